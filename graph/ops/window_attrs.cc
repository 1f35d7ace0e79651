//===- window_attrs.cc - The window attributes of convolutions and pools --===//
#include "graph/ops/window_attrs.h"

#include <algorithm>

#include "graph/support/status.h"

namespace kiln {

absl::Status ReadWindowAttrs(const Node& n, int nsp, const std::vector<int64_t>* kernel_from_w,
                             bool require_kernel, WindowAttrs& a) {
  a.nsp = nsp;
  if (nsp > kMaxSpatial) return InvalidArgument("at most ", kMaxSpatial, " spatial dims are supported, got ", nsp);
  if (n.has_attr("kernel_shape")) {
    a.kernel = n.GetInts("kernel_shape");
    if (static_cast<int>(a.kernel.size()) != nsp)
      return InvalidArgument("kernel_shape has ", a.kernel.size(), " values, expected ", nsp);
    if (kernel_from_w && *kernel_from_w != a.kernel)
      return InvalidArgument("kernel_shape does not match the spatial dims of the weights");
  } else if (kernel_from_w) {
    a.kernel = *kernel_from_w;
  } else if (require_kernel) {
    return InvalidArgument("attribute 'kernel_shape' is required");
  }
  double kvol = 1;
  for (int64_t k : a.kernel) {
    if (k <= 0) return InvalidArgument("kernel_shape values must be positive");
    if (k > kMaxAttrValue) return InvalidArgument("kernel_shape value ", k, " is too large");
    kvol *= static_cast<double>(k);
  }
  if (kvol > static_cast<double>(int64_t{1} << 40)) return InvalidArgument("kernel volume is too large");
  a.strides = n.GetInts("strides", std::vector<int64_t>(nsp, 1));
  if (static_cast<int>(a.strides.size()) != nsp)
    return InvalidArgument("strides has ", a.strides.size(), " values, expected ", nsp);
  for (int64_t s : a.strides)
    if (s <= 0 || s > kMaxAttrValue) return InvalidArgument("strides must be in [1, ", kMaxAttrValue, "]");
  a.dilations = n.GetInts("dilations", std::vector<int64_t>(nsp, 1));
  if (a.dilations.empty()) a.dilations.assign(nsp, 1);
  if (static_cast<int>(a.dilations.size()) != nsp)
    return InvalidArgument("dilations has ", a.dilations.size(), " values, expected ", nsp);
  for (int64_t d : a.dilations)
    if (d <= 0 || d > kMaxAttrValue) return InvalidArgument("dilations must be in [1, ", kMaxAttrValue, "]");
  a.pads = n.GetInts("pads", std::vector<int64_t>(2 * nsp, 0));
  if (a.pads.empty()) a.pads.assign(2 * nsp, 0);
  if (static_cast<int>(a.pads.size()) != 2 * nsp)
    return InvalidArgument("pads has ", a.pads.size(), " values, expected ", 2 * nsp);
  for (int64_t p : a.pads)
    if (p < 0 || p > kMaxAttrValue) return InvalidArgument("pads must be in [0, ", kMaxAttrValue, "]");
  a.auto_pad = n.GetString("auto_pad", "NOTSET");
  if (a.auto_pad != "NOTSET" && a.auto_pad != "SAME_UPPER" && a.auto_pad != "SAME_LOWER" &&
      a.auto_pad != "VALID")
    return InvalidArgument("auto_pad '", a.auto_pad, "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  a.ceil_mode = n.GetInt("ceil_mode", 0) != 0;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> WindowOutDim(WindowAttrs& a, int d, int64_t in) {
  int64_t k = a.kernel[d], s = a.strides[d], dil = a.dilations[d];
  int64_t ek = (k - 1) * dil + 1;
  int64_t& pb = a.pads[d];
  int64_t& pe = a.pads[d + a.nsp];
  if (a.auto_pad == "VALID") {
    pb = pe = 0;
    if (in < ek) return InvalidArgument("spatial dim ", d, " (", in, ") is smaller than the kernel extent ", ek);
    return (in - ek) / s + 1;
  }
  if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
    int64_t out = CeilDiv(in, s);
    int64_t total = std::max<int64_t>(0, (out - 1) * s + ek - in);
    pb = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    pe = total - pb;
    return out;
  }
  int64_t span = in + pb + pe - ek;
  if (span < 0)
    return InvalidArgument("spatial dim ", d, " (", in, " padded by ", pb, "+", pe,
                           ") is smaller than the kernel extent ", ek);
  if (!a.ceil_mode) return span / s + 1;
  int64_t out = CeilDiv(span, s) + 1;
  // The last window must start inside the input or its leading padding.
  if ((out - 1) * s >= in + pb) --out;
  return out;
}

absl::StatusOr<Dims> WindowOutDims(WindowAttrs& a, const Dims& in_spatial) {
  Dims out(a.nsp);
  for (int d = 0; d < a.nsp; ++d) {
    KILN_ASSIGN_OR_RETURN(out[d], WindowOutDim(a, d, in_spatial[d]));
  }
  return out;
}

}  // namespace kiln
