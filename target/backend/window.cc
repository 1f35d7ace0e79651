//===- window.cc - The sliding window of a convolution or pooling node ----===//
#include "target/backend/window.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kiln::target {
namespace {

absl::Status Unfit(const Node& n, absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat(n.QualifiedOp(), ": ", why));
}

absl::StatusOr<std::vector<int64_t>> Dims(const Node& n, const Value* v, const char* what) {
  if (!v || !v->type().is_tensor() || !v->type().shape().is_static()) {
    return Unfit(n, absl::StrCat(what, " has no static shape"));
  }
  return v->type().shape().StaticDims();
}

}  // namespace

bool Window2d::pointwise() const {
  for (int i = 0; i < 2; ++i) {
    if (kernel[i] != 1 || stride[i] != 1 || pad_begin[i] != 0 || pad_end[i] != 0) return false;
  }
  return oh == h && ow == w;
}

absl::StatusOr<Window2d> WindowOf(const Node& node) {
  const bool conv = node.op() == "Conv";
  if (!node.domain().empty() || (!conv && node.op() != "MaxPool" && node.op() != "AveragePool")) {
    return Unfit(node, "no sliding window");
  }
  if (node.num_inputs() < 1 || node.num_outputs() < 1) return Unfit(node, "missing input or output");
  auto xd = Dims(node, node.input(0), "X");
  if (!xd.ok()) return xd.status();
  auto yd = Dims(node, node.output(0), "Y");
  if (!yd.ok()) return yd.status();
  const size_t rank = xd->size();
  if ((rank != 3 && rank != 4) || yd->size() != rank) {
    return absl::UnimplementedError(absl::StrCat(node.QualifiedOp(), ": only 1-D and 2-D windows (X of rank ", rank, ")"));
  }
  const size_t sp = rank - 2;
  Window2d w;
  w.one_d = sp == 1;
  w.n = (*xd)[0];
  w.c = (*xd)[1];
  w.h = w.one_d ? 1 : (*xd)[2];
  w.w = xd->back();
  w.oc = (*yd)[1];
  w.oh = w.one_d ? 1 : (*yd)[2];
  w.ow = yd->back();
  if ((*yd)[0] != w.n) return Unfit(node, "X and Y disagree on the batch");

  std::vector<int64_t> kernel = node.GetInts("kernel_shape");
  if (conv) {
    auto wd = Dims(node, node.num_inputs() > 1 ? node.input(1) : nullptr, "W");
    if (!wd.ok()) return wd.status();
    if (wd->size() != rank) return Unfit(node, "W's rank differs from X's");
    if (kernel.empty()) kernel.assign(wd->begin() + 2, wd->end());
    w.groups = node.GetInt("group", 1);
    if (w.groups < 1 || w.c % w.groups != 0 || w.oc % w.groups != 0 || (*wd)[0] != w.oc ||
        (*wd)[1] * w.groups != w.c) {
      return Unfit(node, "the channels do not match the groups");
    }
    if (!std::equal(kernel.begin(), kernel.end(), wd->begin() + 2, wd->end())) {
      return Unfit(node, "kernel_shape differs from W's spatial dims");
    }
  } else if (w.oc != w.c) {
    return Unfit(node, "a pool keeps the channels");
  }
  std::vector<int64_t> strides = node.GetInts("strides"), dil = node.GetInts("dilations"), pads = node.GetInts("pads");
  if (strides.empty()) strides.assign(sp, 1);
  if (dil.empty()) dil.assign(sp, 1);
  if (pads.empty()) pads.assign(2 * sp, 0);
  if (kernel.size() != sp || strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp) {
    return Unfit(node, "kernel_shape, strides, dilations or pads do not match the rank");
  }
  const std::string auto_pad = node.GetString("auto_pad", "NOTSET");
  const int first = w.one_d ? 1 : 0;
  const int64_t in[2] = {w.h, w.w}, out[2] = {w.oh, w.ow};
  for (size_t d = 0; d < sp; ++d) {
    const int i = first + static_cast<int>(d);
    w.kernel[i] = kernel[d];
    w.stride[i] = strides[d];
    w.dilation[i] = dil[d];
    w.pad_begin[i] = pads[d];
    w.pad_end[i] = pads[d + sp];
  }
  for (int i = 0; i < 2; ++i) {
    if (w.kernel[i] < 1 || w.stride[i] < 1 || w.dilation[i] < 1 || w.pad_begin[i] < 0 || w.pad_end[i] < 0) {
      return Unfit(node, "kernel, strides and dilations must be positive, pads not negative");
    }
    if (auto_pad == "VALID") {
      w.pad_begin[i] = w.pad_end[i] = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t total =
          std::max<int64_t>(0, (out[i] - 1) * w.stride[i] + (w.kernel[i] - 1) * w.dilation[i] + 1 - in[i]);
      w.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[i] = total - w.pad_begin[i];
    } else if (auto_pad != "NOTSET") {
      return Unfit(node, absl::StrCat("auto_pad '", auto_pad, "'"));
    }
    // The first window of every output position starts inside the padded input.
    if (out[i] < 1 || (out[i] - 1) * w.stride[i] - w.pad_begin[i] >= in[i] + w.pad_end[i]) {
      return Unfit(node, "the output shape does not match the window");
    }
  }
  return w;
}

}  // namespace kiln::target
