//===- misc.cc - Resize, TopK, NMS, Unique, quantization, signal, strings --===//
//
// The operators that fit no other family: Resize and Upsample, TopK,
// NonMaxSuppression, NonZero, Unique, linear quantization, StringNormalizer,
// TfIdfVectorizer, the signal ops (DFT, STFT, MelWeightMatrix), GridSample,
// and the optimizers of domain ai.onnx.preview.training.
//
// Interpolating kernels compute in double and round once on store.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

constexpr double kPi = 3.14159265358979323846;

//===--- Helpers ----------------------------------------------------------===//

std::string DimsText(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) absl::StrAppend(&s, i ? "," : "", d[i]);
  return s + "]";
}

// Outputs larger than this are refused (a user error, not an allocation crash).
constexpr int64_t kMaxElements = int64_t{1} << 32;

template <typename Ctx>
absl::Status CheckOutputSize(const Ctx& ctx, const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return ctx.Error("output shape ", DimsText(dims), " has a negative dim");
    if (d == 0) return absl::OkStatus();
  }
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements)
      return ctx.Error("output shape ", DimsText(dims), " is too large");
  return absl::OkStatus();
}

std::string Label(const Node& n) {
  return n.name().empty() ? absl::StrCat("node (", n.QualifiedOp(), ")")
                          : absl::StrCat("node '", n.name(), "' (", n.QualifiedOp(), ")");
}

// Stores a double into a numeric element: floats round once, integers round
// to nearest and saturate.
template <typename T>
inline T StoreRounded(double v) {
  if constexpr (kIsFloatLike<T>) return FromDouble<T>(v);
  else return FromDouble<T>(std::nearbyint(v));
}

// True when `t` is a tensor type whose dtype is known and not in `ok`.
bool DTypeIsNot(const Type& t, std::initializer_list<DType> ok) {
  if (!t.is_tensor() || t.dtype() == DType::kUndefined) return false;
  return std::find(ok.begin(), ok.end(), t.dtype()) == ok.end();
}

// Reads a one-element integer input.
template <typename Ctx>
absl::StatusOr<int64_t> ScalarInt(const Ctx& ctx, const Tensor& t, absl::string_view what) {
  if (t.numel() != 1 || !IsInteger(t.dtype()))
    return ctx.Error(what, " must be a single integer, got ", DTypeName(t.dtype()), DimsText(t.dims()));
  return t.GetInt(0);
}

template <typename Ctx>
absl::StatusOr<double> ScalarFloat(const Ctx& ctx, const Tensor& t, absl::string_view what) {
  if (t.numel() != 1 || t.dtype() == DType::kString || t.dtype() == DType::kBool)
    return ctx.Error(what, " must be a single number, got ", DTypeName(t.dtype()), DimsText(t.dims()));
  return t.GetDouble(0);
}

// Replaces `node` by a new node of op `op` with the same outputs (names and
// types kept when nothing uses them yet, as during import).
Node* ReplaceNode(Graph& g, Node* node, absl::string_view op, std::vector<Value*> inputs) {
  int nout = node->num_outputs();
  bool used = false;
  for (Value* o : node->outputs()) used |= o->has_uses();
  std::vector<Node*> list = g.NodeList();
  Node* next = nullptr;
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i] == node && i + 1 < list.size()) next = list[i + 1];
  std::vector<std::string> names;
  std::vector<Type> types;
  for (Value* o : node->outputs()) types.push_back(o->type());
  if (used) {
    for (Value* o : node->outputs()) names.push_back(g.UniqueName(o->name()));
    Node* n = g.AddNode(op, std::move(inputs), std::move(names), node->domain(), node);
    for (int i = 0; i < nout; ++i) {
      n->output(i)->set_type(types[i]);
      node->output(i)->ReplaceAllUsesWith(n->output(i));
    }
    n->set_name(node->name());
    g.EraseNode(node);
    return n;
  }
  for (Value* o : node->outputs()) names.push_back(o->name());
  std::string name = node->name();
  std::string domain = node->domain();
  g.EraseNode(node);
  Node* n = g.AddNode(op, std::move(inputs), std::move(names), domain, next);
  for (int i = 0; i < nout; ++i) n->output(i)->set_type(types[i]);
  n->set_name(name);
  return n;
}

//===--- Resize and Upsample ----------------------------------------------===//

enum class ResizeMode { kNearest, kLinear, kCubic };
enum class CoordMode { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNN, kTfCropAndResize };
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeParams {
  ResizeMode mode = ResizeMode::kNearest;
  CoordMode coord = CoordMode::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
};

template <typename Ctx>
absl::StatusOr<ResizeParams> ReadResizeParams(const Ctx& ctx) {
  const Node& n = ctx.node();
  ResizeParams p;
  std::string mode = n.GetString("mode", "nearest");
  if (mode == "nearest") p.mode = ResizeMode::kNearest;
  else if (mode == "linear" || mode == "bilinear" || mode == "trilinear") p.mode = ResizeMode::kLinear;
  else if (mode == "cubic" || mode == "bicubic") p.mode = ResizeMode::kCubic;
  else return ctx.Error("unknown mode '", mode, "'");
  std::string coord = n.GetString("coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel") p.coord = CoordMode::kHalfPixel;
  else if (coord == "pytorch_half_pixel") p.coord = CoordMode::kPytorchHalfPixel;
  else if (coord == "align_corners") p.coord = CoordMode::kAlignCorners;
  else if (coord == "asymmetric") p.coord = CoordMode::kAsymmetric;
  else if (coord == "tf_half_pixel_for_nn") p.coord = CoordMode::kTfHalfPixelForNN;
  else if (coord == "tf_crop_and_resize") p.coord = CoordMode::kTfCropAndResize;
  else return ctx.Error("unknown coordinate_transformation_mode '", coord, "'");
  std::string nearest = n.GetString("nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor") p.nearest = NearestMode::kRoundPreferFloor;
  else if (nearest == "round_prefer_ceil") p.nearest = NearestMode::kRoundPreferCeil;
  else if (nearest == "floor") p.nearest = NearestMode::kFloor;
  else if (nearest == "ceil") p.nearest = NearestMode::kCeil;
  else return ctx.Error("unknown nearest_mode '", nearest, "'");
  p.cubic_a = n.GetFloat("cubic_coeff_a", -0.75f);
  p.exclude_outside = n.GetInt("exclude_outside", 0) != 0;
  p.extrapolation = n.GetFloat("extrapolation_value", 0.0f);
  return p;
}

// The interpolation taps of one dim: for output index o, taps
// [begin[o], begin[o+1]) with input offsets (index * stride) and weights.
struct DimTaps {
  std::vector<int32_t> begin;
  std::vector<int64_t> offset;
  std::vector<double> weight;
  std::vector<uint8_t> outside;  // tf_crop_and_resize: sample outside the input
};

inline double CubicWeight(double t, double a) {
  t = std::fabs(t);
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0;
}

DimTaps BuildTaps(const ResizeParams& p, int64_t in, int64_t out, double scale, double out_len,
                  double roi_start, double roi_end, int64_t stride) {
  DimTaps t;
  t.begin.reserve(out + 1);
  t.outside.assign(out, 0);
  for (int64_t o = 0; o < out; ++o) {
    t.begin.push_back(static_cast<int32_t>(t.offset.size()));
    double x = 0;
    switch (p.coord) {
      case CoordMode::kHalfPixel: x = (o + 0.5) / scale - 0.5; break;
      case CoordMode::kPytorchHalfPixel: x = out_len > 1 ? (o + 0.5) / scale - 0.5 : 0; break;
      case CoordMode::kAlignCorners: x = out_len == 1 ? 0 : o * (in - 1) / (out_len - 1); break;
      case CoordMode::kAsymmetric: x = o / scale; break;
      case CoordMode::kTfHalfPixelForNN: x = (o + 0.5) / scale; break;
      case CoordMode::kTfCropAndResize:
        x = out_len > 1 ? roi_start * (in - 1) + o * (roi_end - roi_start) * (in - 1) / (out_len - 1)
                        : 0.5 * (roi_start + roi_end) * (in - 1);
        if (!(x >= 0 && x <= in - 1)) {
          t.outside[o] = 1;
          continue;
        }
        break;
    }
    auto clamp = [&](int64_t i) { return std::min<int64_t>(std::max<int64_t>(i, 0), in - 1); };
    double fl = std::floor(x);
    double r = x - fl;
    int64_t x0 = static_cast<int64_t>(fl);
    if (p.mode == ResizeMode::kNearest) {
      int64_t idx = x0;
      if (r != 0) {
        switch (p.nearest) {
          case NearestMode::kRoundPreferFloor: idx = r <= 0.5 ? x0 : x0 + 1; break;
          case NearestMode::kRoundPreferCeil: idx = r < 0.5 ? x0 : x0 + 1; break;
          case NearestMode::kFloor: idx = x0; break;
          case NearestMode::kCeil: idx = x0 + 1; break;
        }
      }
      t.offset.push_back(clamp(idx) * stride);
      t.weight.push_back(1);
      continue;
    }
    int64_t first;
    std::vector<double> w;
    if (p.mode == ResizeMode::kLinear) {
      first = x0;
      w = {1 - r, r};
    } else {
      first = x0 - 1;
      w = {CubicWeight(r + 1, p.cubic_a), CubicWeight(r, p.cubic_a), CubicWeight(1 - r, p.cubic_a),
           CubicWeight(2 - r, p.cubic_a)};
    }
    if (p.exclude_outside) {
      double sum = 0;
      for (size_t k = 0; k < w.size(); ++k) {
        int64_t i = first + static_cast<int64_t>(k);
        if (i < 0 || i >= in) w[k] = 0;
        sum += w[k];
      }
      if (sum != 0)
        for (double& v : w) v /= sum;
    }
    for (size_t k = 0; k < w.size(); ++k) {
      if (w[k] == 0) continue;
      t.offset.push_back(clamp(first + static_cast<int64_t>(k)) * stride);
      t.weight.push_back(w[k]);
    }
  }
  t.begin.push_back(static_cast<int32_t>(t.offset.size()));
  return t;
}

template <typename T>
struct Interpolator {
  const std::vector<DimTaps>* taps;
  const int64_t* cur;
  const T* x;
  int rank;
  double Eval(int d, int64_t base) const {
    const DimTaps& t = (*taps)[d];
    int64_t o = cur[d];
    double s = 0;
    if (d + 1 == rank) {
      for (int32_t k = t.begin[o]; k < t.begin[o + 1]; ++k) s += t.weight[k] * ToDouble(x[base + t.offset[k]]);
    } else {
      for (int32_t k = t.begin[o]; k < t.begin[o + 1]; ++k) s += t.weight[k] * Eval(d + 1, base + t.offset[k]);
    }
    return s;
  }
};

// Output dims and per-dim scales of a resize, from scales or sizes.
struct ResizeGeometry {
  Dims out;
  std::vector<double> scale;
  std::vector<double> out_len;  // the (possibly fractional) resized length
  std::vector<double> roi;      // starts then ends, 2*rank
};

template <typename Ctx>
absl::StatusOr<ResizeGeometry> ResizeGeometryOf(const Ctx& ctx, const ResizeParams& p, const Dims& in,
                                                const Tensor* roi, const Tensor* scales, const Tensor* sizes) {
  int rank = static_cast<int>(in.size());
  ResizeGeometry g;
  g.roi.assign(2 * rank, 0);
  for (int d = 0; d < rank; ++d) g.roi[rank + d] = 1;
  if (p.coord == CoordMode::kTfCropAndResize) {
    if (!roi || roi->numel() == 0) return ctx.Error("tf_crop_and_resize needs the roi input");
    if (roi->numel() != 2 * rank)
      return ctx.Error("roi has ", roi->numel(), " values, expected ", 2 * rank, " (starts and ends)");
    g.roi = ToDoubleVector(*roi);
  }
  bool has_scales = scales && scales->numel() > 0;
  bool has_sizes = sizes && sizes->numel() > 0;
  if (has_scales == has_sizes) return ctx.Error("exactly one of 'scales' and 'sizes' must be given");
  if (has_sizes) {
    if (!IsInteger(sizes->dtype())) return ctx.Error("sizes must be integers");
    if (sizes->numel() != rank) return ctx.Error("sizes has ", sizes->numel(), " values but the input has rank ", rank);
    g.out = ToInt64Vector(*sizes);
    for (int d = 0; d < rank; ++d) {
      if (g.out[d] < 0) return ctx.Error("sizes[", d, "] is negative");
      if (in[d] == 0 && g.out[d] != 0) return ctx.Error("cannot resize dim ", d, " of extent 0 to ", g.out[d]);
      g.scale.push_back(in[d] ? static_cast<double>(g.out[d]) / static_cast<double>(in[d]) : 1.0);
      g.out_len.push_back(static_cast<double>(g.out[d]));
    }
  } else {
    if (!IsFloat(scales->dtype())) return ctx.Error("scales must be floats");
    if (scales->numel() != rank)
      return ctx.Error("scales has ", scales->numel(), " values but the input has rank ", rank);
    std::vector<double> s = ToDoubleVector(*scales);
    for (int d = 0; d < rank; ++d) {
      if (!(s[d] > 0) || !std::isfinite(s[d])) return ctx.Error("scales[", d, "] is ", s[d], "; it must be positive");
      double len = static_cast<double>(in[d]) * s[d];
      if (p.coord == CoordMode::kTfCropAndResize) len *= g.roi[rank + d] - g.roi[d];
      if (len > 1e15) return ctx.Error("scales[", d, "] makes the output too large");
      g.scale.push_back(s[d]);
      g.out_len.push_back(len);
      g.out.push_back(std::max<int64_t>(static_cast<int64_t>(std::floor(len)), 0));
    }
  }
  return g;
}

absl::Status ResizeCore(KernelContext& ctx, const ResizeParams& p, const Tensor* roi, const Tensor* scales,
                        const Tensor* sizes) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::kString) return ctx.Error("string tensors cannot be resized");
  if (p.mode != ResizeMode::kNearest && x.dtype() == DType::kBool)
    return ctx.Error("linear and cubic modes need a numeric input, got bool");
  int rank = x.rank();
  KILN_ASSIGN_OR_RETURN(ResizeGeometry g, ResizeGeometryOf(ctx, p, x.dims(), roi, scales, sizes));
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, g.out));
  Tensor& y = ctx.AllocOutput(0, x.dtype(), g.out);
  if (y.numel() == 0) return absl::OkStatus();
  if (x.numel() == 0) return ctx.Error("cannot resize an empty input to a non-empty output");
  Dims in_strides = StridesOf(x.dims());
  std::vector<DimTaps> taps;
  bool any_outside = false;
  for (int d = 0; d < rank; ++d) {
    taps.push_back(BuildTaps(p, x.dim(d), g.out[d], g.scale[d], g.out_len[d], g.roi[d], g.roi[rank + d],
                             in_strides[d]));
    for (uint8_t o : taps.back().outside) any_outside |= o != 0;
  }
  int64_t total = y.numel();
  if (rank == 0) {
    ctx.set_output(0, x.Clone());
    return absl::OkStatus();
  }
  std::vector<int64_t> idx(rank, 0);
  if (p.mode == ResizeMode::kNearest && !any_outside) {
    // A gather: one tap per dim.
    DispatchBySize(x.dtype(), [&]<typename T>() {
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      int64_t last = g.out[rank - 1];
      const DimTaps& lt = taps[rank - 1];
      for (int64_t i = 0; i < total; i += last) {
        int64_t base = 0;
        for (int d = 0; d + 1 < rank; ++d) base += taps[d].offset[taps[d].begin[idx[d]]];
        for (int64_t o = 0; o < last; ++o) dst[i + o] = src[base + lt.offset[lt.begin[o]]];
        for (int d = rank - 2; d >= 0; --d) {
          if (++idx[d] < g.out[d]) break;
          idx[d] = 0;
        }
      }
    });
    return absl::OkStatus();
  }
  DispatchNumeric(x.dtype(), [&]<typename T>() {
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    Interpolator<T> interp{&taps, idx.data(), src, rank};
    for (int64_t i = 0; i < total; ++i) {
      bool outside = false;
      if (any_outside)
        for (int d = 0; d < rank; ++d) outside |= taps[d].outside[idx[d]] != 0;
      dst[i] = StoreRounded<T>(outside ? p.extrapolation : interp.Eval(0, 0));
      for (int d = rank - 1; d >= 0; --d) {
        if (++idx[d] < g.out[d]) break;
        idx[d] = 0;
      }
    }
  });
  return absl::OkStatus();
}

const Tensor* OptionalInput(const KernelContext& ctx, int i) {
  return ctx.has_input(i) ? &ctx.input(i) : nullptr;
}

absl::Status Resize(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ResizeParams p, ReadResizeParams(ctx));
  return ResizeCore(ctx, p, OptionalInput(ctx, 1), OptionalInput(ctx, 2), OptionalInput(ctx, 3));
}

// Output shape from known scales or sizes; dims with scale 1 pass through.
absl::Status InferResizeFrom(InferContext& ctx, const ResizeParams& p, int roi_i, int scales_i, int sizes_i) {
  const Type& x = ctx.input_type(0);
  if (!x.is_tensor()) return absl::OkStatus();
  if (x.dtype() == DType::kString) return ctx.Error("string tensors cannot be resized");
  const Tensor* scales = scales_i >= 0 ? ctx.const_input(scales_i) : nullptr;
  const Tensor* sizes = sizes_i >= 0 ? ctx.const_input(sizes_i) : nullptr;
  const Tensor* roi = roi_i >= 0 ? ctx.const_input(roi_i) : nullptr;
  bool scales_given = scales_i >= 0 && ctx.has_input(scales_i);
  bool sizes_given = sizes_i >= 0 && ctx.has_input(sizes_i);
  // An empty constant counts as absent (Resize-11 passes empty scales with sizes).
  if (scales && scales->numel() == 0) scales_given = false, scales = nullptr;
  if (sizes && sizes->numel() == 0) sizes_given = false, sizes = nullptr;
  int rank = x.shape().ranked() ? x.shape().rank() : -1;
  auto check_len = [&](int i, absl::string_view what) -> absl::Status {
    if (i < 0 || !ctx.has_input(i)) return absl::OkStatus();
    const Type& t = ctx.input_type(i);
    if (rank >= 0 && t.is_tensor() && t.shape().ranked() && t.shape().rank() == 1 && t.shape()[0].is_static() &&
        t.shape()[0].value() != 0 && t.shape()[0].value() != rank)
      return ctx.Error(what, " has ", t.shape()[0].value(), " values but the input has rank ", rank);
    return absl::OkStatus();
  };
  KILN_RETURN_IF_ERROR(check_len(scales_i, "scales"));
  KILN_RETURN_IF_ERROR(check_len(sizes_i, "sizes"));
  if (rank < 0) {
    if (sizes && sizes->numel() > 0) rank = static_cast<int>(sizes->numel());
    else if (scales && scales->numel() > 0) rank = static_cast<int>(scales->numel());
    else {
      ctx.set_output(0, Type::Tensor(x.dtype(), Shape()));
      return absl::OkStatus();
    }
    ctx.set_output(0, Type::Tensor(x.dtype(), Shape(DimVector(rank))));
    return absl::OkStatus();
  }
  DimVector out(rank);
  if (sizes) {
    if (sizes->numel() != rank) return ctx.Error("sizes has ", sizes->numel(), " values but the input has rank ", rank);
    std::vector<int64_t> s = ToInt64Vector(*sizes);
    for (int d = 0; d < rank; ++d) {
      if (s[d] < 0) return ctx.Error("sizes[", d, "] is negative");
      out[d] = Dim(s[d]);
    }
  } else if (scales && !sizes_given) {
    if (scales->numel() != rank)
      return ctx.Error("scales has ", scales->numel(), " values but the input has rank ", rank);
    std::vector<double> s = ToDoubleVector(*scales);
    std::vector<double> r;
    bool crop = p.coord == CoordMode::kTfCropAndResize;
    if (crop && roi && roi->numel() == 2 * rank) r = ToDoubleVector(*roi);
    for (int d = 0; d < rank; ++d) {
      if (!(s[d] > 0)) return ctx.Error("scales[", d, "] is ", s[d], "; it must be positive");
      const Dim& in = x.shape()[d];
      if (s[d] == 1 && !crop) out[d] = in;
      else if (in.is_static() && (!crop || !r.empty())) {
        double len = static_cast<double>(in.value()) * s[d];
        if (crop) len *= r[rank + d] - r[d];
        out[d] = Dim(std::max<int64_t>(static_cast<int64_t>(std::floor(len)), 0));
      }
    }
  } else if (!scales_given && !sizes_given) {
    return ctx.Error("exactly one of 'scales' and 'sizes' must be given");
  }
  ctx.set_output(0, Type::Tensor(x.dtype(), Shape(std::move(out))));
  return absl::OkStatus();
}

absl::Status InferResize(InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(ResizeParams p, ReadResizeParams(ctx));
  return InferResizeFrom(ctx, p, 1, 2, 3);
}

// Resize-10 and Upsample: asymmetric coordinates; nearest picks floor when
// enlarging and ceil when shrinking. The choice is made from the scales when
// they are constant (floor otherwise, the common enlarging case).
std::string LegacyNearestMode(const Tensor* scales) {
  if (!scales || scales->numel() == 0 || !IsFloat(scales->dtype())) return "floor";
  bool any_down = false, any_up = false;
  for (double s : ToDoubleVector(*scales)) {
    any_down |= s < 1;
    any_up |= s > 1;
  }
  return any_down && !any_up ? "ceil" : "floor";
}

absl::Status UpgradeResize(Graph& g, Node* node, int64_t opset) {
  if (opset >= 11) return absl::OkStatus();
  // Resize-10: (X, scales) -> (X, roi = none, scales).
  Value* scales = node->input(1);
  node->SetInput(2, scales);
  node->SetInput(1, nullptr);
  node->SetAttr("coordinate_transformation_mode", Attribute::String("asymmetric"));
  if (node->GetString("mode", "nearest") == "nearest")
    node->SetAttr("nearest_mode",
                  Attribute::String(LegacyNearestMode(scales && scales->is_constant() ? &scales->constant() : nullptr)));
  return absl::OkStatus();
}

// Upsample (deprecated since opset 10) becomes the equivalent Resize.
absl::Status UpgradeUpsample(Graph& g, Node* node, int64_t opset) {
  std::string label = Label(*node);
  Value* x = node->input(0);
  if (!x) return InvalidArgument(label, ": input X is missing");
  Value* scales = node->input(1);
  if (!scales) {
    std::vector<float> s;
    if (node->has_attr("scales")) {
      s = node->GetFloats("scales");
    } else if (node->has_attr("height_scale") || node->has_attr("width_scale")) {
      s = {1.f, 1.f, node->GetFloat("height_scale", 1.f), node->GetFloat("width_scale", 1.f)};
    } else {
      return InvalidArgument(label, ": the scales are missing");
    }
    scales = g.AddConstant(g.UniqueName("scales"), Tensor::FromVector<float>(s, {static_cast<int64_t>(s.size())}));
  }
  std::string mode = node->GetString("mode", "nearest");
  if (mode == "bilinear") mode = "linear";
  if (mode != "nearest" && mode != "linear") return InvalidArgument(label, ": unknown mode '", mode, "'");
  Node* resize = ReplaceNode(g, node, "Resize", {x, nullptr, scales});
  resize->SetAttr("mode", Attribute::String(mode));
  resize->SetAttr("coordinate_transformation_mode", Attribute::String("asymmetric"));
  if (mode == "nearest")
    resize->SetAttr("nearest_mode",
                    Attribute::String(LegacyNearestMode(scales->is_constant() ? &scales->constant() : nullptr)));
  return absl::OkStatus();
}

ResizeParams UpsampleParams(const Node& n, const Tensor* scales) {
  ResizeParams p;
  std::string mode = n.GetString("mode", "nearest");
  p.mode = mode == "nearest" ? ResizeMode::kNearest : ResizeMode::kLinear;
  p.coord = CoordMode::kAsymmetric;
  p.nearest = LegacyNearestMode(scales) == "ceil" ? NearestMode::kCeil : NearestMode::kFloor;
  return p;
}

template <typename Ctx>
absl::Status CheckUpsampleMode(const Ctx& ctx) {
  std::string mode = ctx.node().GetString("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "bilinear")
    return ctx.Error("unknown mode '", mode, "'");
  return absl::OkStatus();
}

absl::Status InferUpsample(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckUpsampleMode(ctx));
  if (ctx.num_inputs() < 2) return ctx.Error("the scales input is missing (opset 7 models are upgraded)");
  return InferResizeFrom(ctx, UpsampleParams(ctx.node(), ctx.const_input(1)), -1, 1, -1);
}

absl::Status Upsample(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckUpsampleMode(ctx));
  if (!ctx.has_input(1)) return ctx.Error("the scales input is missing");
  return ResizeCore(ctx, UpsampleParams(ctx.node(), &ctx.input(1)), nullptr, &ctx.input(1), nullptr);
}

OpCost ResizeCost(const Node& n) {
  OpCost c;
  Value* x = n.input(0);
  Value* y = n.output(0);
  int64_t in = x && x->type().is_tensor() ? x->type().shape().NumElements() : -1;
  int64_t out = y->type().is_tensor() ? y->type().shape().NumElements() : -1;
  if (in > 0) c.bytes_read = static_cast<double>(in) * DTypeSize(x->type().dtype());
  if (out > 0) {
    c.bytes_written = static_cast<double>(out) * DTypeSize(y->type().dtype());
    std::string mode = n.GetString("mode", "nearest");
    int rank = y->type().shape().rank();
    double taps = mode == "nearest" ? 0 : std::pow(mode == "cubic" ? 4.0 : 2.0, std::min(rank, 3));
    c.flops = static_cast<double>(out) * 2 * taps;
  }
  return c;
}

//===--- TopK -------------------------------------------------------------===//

absl::Status InferTopK(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.is_tensor()) return absl::OkStatus();
  if (x.dtype() == DType::kString || x.dtype() == DType::kBool)
    return ctx.Error("expects a numeric input, got ", DTypeName(x.dtype()));
  if (ctx.num_inputs() < 2 || !ctx.has_input(1)) return ctx.Error("input K is missing");
  const Type& kt = ctx.input_type(1);
  if (DTypeIsNot(kt, {DType::kI64})) return ctx.Error("K must be i64, got ", DTypeName(kt.dtype()));
  if (!x.shape().ranked()) {
    ctx.set_output(0, Type::Tensor(x.dtype(), Shape()));
    ctx.set_output(1, Type::Tensor(DType::kI64, Shape()));
    return absl::OkStatus();
  }
  int rank = x.shape().rank();
  auto axis = NormalizeAxis(ctx.node().GetInt("axis", -1), rank);
  if (!axis.ok() || rank == 0) return ctx.Error("axis ", ctx.node().GetInt("axis", -1), " is out of range for rank ", rank);
  DimVector dims = x.shape().dims();
  Dim k;
  if (const Tensor* kv = ctx.const_input(1)) {
    if (kv->numel() != 1) return ctx.Error("K must have one element");
    int64_t kk = kv->GetInt(0);
    if (kk < 0) return ctx.Error("K is negative (", kk, ")");
    const Dim& n = dims[*axis];
    if (n.is_static() && kk > n.value())
      return ctx.Error("K = ", kk, " exceeds the extent ", n.value(), " of axis ", *axis);
    k = Dim(kk);
  }
  dims[*axis] = k;
  ctx.set_output(0, Type::Tensor(x.dtype(), Shape(dims)));
  ctx.set_output(1, Type::Tensor(DType::kI64, Shape(dims)));
  return absl::OkStatus();
}

absl::Status TopK(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::kString || x.dtype() == DType::kBool)
    return ctx.Error("expects a numeric input, got ", DTypeName(x.dtype()));
  if (!ctx.has_input(1)) return ctx.Error("input K is missing");
  KILN_ASSIGN_OR_RETURN(int64_t k, ScalarInt(ctx, ctx.input(1), "K"));
  int rank = x.rank();
  auto axis_or = NormalizeAxis(ctx.node().GetInt("axis", -1), rank);
  if (!axis_or.ok() || rank == 0) return ctx.Error("axis ", ctx.node().GetInt("axis", -1), " is out of range for rank ", rank);
  int axis = *axis_or;
  int64_t n = x.dim(axis);
  if (k < 0 || k > n) return ctx.Error("K = ", k, " is out of range for axis ", axis, " of extent ", n);
  bool largest = ctx.node().GetInt("largest", 1) != 0;
  Dims out_dims = x.dims();
  out_dims[axis] = k;
  Tensor& values = ctx.AllocOutput(0, x.dtype(), out_dims);
  Tensor& indices = ctx.AllocOutput(1, DType::kI64, out_dims);
  if (values.numel() == 0) return absl::OkStatus();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int i = axis + 1; i < rank; ++i) inner *= x.dim(i);
  DispatchNumeric(x.dtype(), [&]<typename T>() {
    using C = std::conditional_t<kIsHalfLike<T>, float, T>;
    const T* src = x.data<T>();
    T* vo = values.data<T>();
    int64_t* io = indices.data<int64_t>();
    std::vector<C> vals(n);
    std::vector<int64_t> order(n);
    // Ties (and NaNs, which rank above every number) go to the lower index.
    auto before = [&](int64_t a, int64_t b) {
      C va = vals[a], vb = vals[b];
      if constexpr (std::is_floating_point_v<C>) {
        bool na = std::isnan(va), nb = std::isnan(vb);
        if (na || nb) {
          if (na && nb) return a < b;
          return largest ? na : nb;
        }
      }
      if (va != vb) return largest ? va > vb : va < vb;
      return a < b;
    };
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* s = src + o * n * inner + i;
        for (int64_t j = 0; j < n; ++j) vals[j] = static_cast<C>(s[j * inner]);
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        T* vd = vo + o * k * inner + i;
        int64_t* id = io + o * k * inner + i;
        for (int64_t j = 0; j < k; ++j) {
          vd[j * inner] = s[order[j] * inner];
          id[j * inner] = order[j];
        }
      }
    }
  });
  return absl::OkStatus();
}

// TopK-1 had k as an attribute.
absl::Status UpgradeTopK(Graph& g, Node* node, int64_t opset) {
  if (opset >= 10) return absl::OkStatus();
  if (!node->has_attr("k")) return InvalidArgument(Label(*node), ": attribute 'k' is missing");
  int64_t k = node->GetInt("k", 0);
  node->SetInput(1, g.AddConstant(g.UniqueName("k"), Tensor::FromVector<int64_t>({k}, {1})));
  node->RemoveAttr("k");
  return absl::OkStatus();
}

OpCost TopKCost(const Node& n) {
  OpCost c;
  Value* x = n.input(0);
  int64_t in = x && x->type().is_tensor() ? x->type().shape().NumElements() : -1;
  if (in > 0) {
    c.bytes_read = static_cast<double>(in) * DTypeSize(x->type().dtype());
    int64_t axis_len = 1;
    const Shape& s = x->type().shape();
    auto axis = NormalizeAxis(n.GetInt("axis", -1), s.rank());
    if (axis.ok() && s.rank() > 0) axis_len = std::max<int64_t>(s[*axis].value(), 1);
    c.flops = static_cast<double>(in) * std::max(1.0, std::log2(static_cast<double>(axis_len)));
  }
  for (int i = 0; i < n.num_outputs(); ++i) {
    int64_t m = n.output(i)->type().is_tensor() ? n.output(i)->type().shape().NumElements() : -1;
    if (m > 0) c.bytes_written += static_cast<double>(m) * DTypeSize(n.output(i)->type().dtype());
  }
  return c;
}

//===--- NonMaxSuppression ------------------------------------------------===//

absl::Status InferNonMaxSuppression(InferContext& ctx) {
  const Type& boxes = ctx.input_type(0);
  const Type& scores = ctx.input_type(1);
  if (boxes.is_tensor() && boxes.shape().ranked()) {
    const Shape& s = boxes.shape();
    if (s.rank() != 3) return ctx.Error("boxes has rank ", s.rank(), ", expected 3 [batch, boxes, 4]");
    if (s[2].is_static() && s[2].value() != 4) return ctx.Error("boxes must have 4 coordinates in its last dim");
  }
  if (scores.is_tensor() && scores.shape().ranked() && scores.shape().rank() != 3)
    return ctx.Error("scores has rank ", scores.shape().rank(), ", expected 3 [batch, classes, boxes]");
  if (DTypeIsNot(boxes, {DType::kF32, DType::kF16, DType::kF64, DType::kBF16}))
    return ctx.Error("boxes must be float, got ", DTypeName(boxes.dtype()));
  ctx.set_output(0, Type::Tensor(DType::kI64, Shape({Dim(), Dim(3)})));
  return absl::OkStatus();
}

absl::Status NonMaxSuppression(KernelContext& ctx) {
  const Tensor& boxes_t = ctx.input(0);
  const Tensor& scores_t = ctx.input(1);
  if (!IsFloat(boxes_t.dtype()) || !IsFloat(scores_t.dtype())) return ctx.Error("boxes and scores must be float");
  if (boxes_t.rank() != 3 || boxes_t.dim(2) != 4)
    return ctx.Error("boxes must be [batch, boxes, 4], got ", DimsText(boxes_t.dims()));
  if (scores_t.rank() != 3) return ctx.Error("scores must be [batch, classes, boxes], got ", DimsText(scores_t.dims()));
  int64_t batches = boxes_t.dim(0), nboxes = boxes_t.dim(1), classes = scores_t.dim(1);
  if (scores_t.dim(0) != batches || scores_t.dim(2) != nboxes)
    return ctx.Error("scores ", DimsText(scores_t.dims()), " do not match boxes ", DimsText(boxes_t.dims()));
  int64_t max_out = 0;
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
    KILN_ASSIGN_OR_RETURN(max_out, ScalarInt(ctx, ctx.input(2), "max_output_boxes_per_class"));
  }
  double iou_threshold = 0;
  if (ctx.has_input(3) && ctx.input(3).numel() > 0) {
    KILN_ASSIGN_OR_RETURN(iou_threshold, ScalarFloat(ctx, ctx.input(3), "iou_threshold"));
  }
  bool has_score_threshold = ctx.has_input(4) && ctx.input(4).numel() > 0;
  double score_threshold = 0;
  if (has_score_threshold) {
    KILN_ASSIGN_OR_RETURN(score_threshold, ScalarFloat(ctx, ctx.input(4), "score_threshold"));
  }
  if (iou_threshold < 0 || iou_threshold > 1) return ctx.Error("iou_threshold must be in [0, 1], got ", iou_threshold);
  bool center = ctx.node().GetInt("center_point_box", 0) != 0;

  std::vector<double> bx = ToDoubleVector(boxes_t);
  std::vector<double> sc = ToDoubleVector(scores_t);
  // Corners as (ymin, xmin, ymax, xmax).
  std::vector<std::array<double, 4>> corners(batches * nboxes);
  for (int64_t i = 0; i < batches * nboxes; ++i) {
    const double* b = &bx[i * 4];
    if (center) {
      corners[i] = {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
    } else {
      corners[i] = {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
    }
  }
  auto suppresses = [&](const std::array<double, 4>& a, const std::array<double, 4>& b) {
    double ymin = std::max(a[0], b[0]), xmin = std::max(a[1], b[1]);
    double ymax = std::min(a[2], b[2]), xmax = std::min(a[3], b[3]);
    double inter = std::max(0.0, ymax - ymin) * std::max(0.0, xmax - xmin);
    if (inter <= 0) return false;
    double area_a = (a[2] - a[0]) * (a[3] - a[1]);
    double area_b = (b[2] - b[0]) * (b[3] - b[1]);
    double uni = area_a + area_b - inter;
    if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
    return inter / uni > iou_threshold;
  };
  std::vector<int64_t> selected;  // triples
  std::vector<int64_t> cand, picked;
  for (int64_t b = 0; b < batches && max_out > 0; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      const double* s = &sc[(b * classes + c) * nboxes];
      cand.clear();
      for (int64_t i = 0; i < nboxes; ++i)
        if (!has_score_threshold || s[i] > score_threshold) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) { return s[i] > s[j]; });
      picked.clear();
      for (int64_t i : cand) {
        if (static_cast<int64_t>(picked.size()) >= max_out) break;
        bool keep = true;
        for (int64_t p : picked)
          if (suppresses(corners[b * nboxes + p], corners[b * nboxes + i])) {
            keep = false;
            break;
          }
        if (!keep) continue;
        picked.push_back(i);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  Tensor& out = ctx.AllocOutput(0, DType::kI64, {static_cast<int64_t>(selected.size() / 3), 3});
  std::copy(selected.begin(), selected.end(), out.data<int64_t>());
  return absl::OkStatus();
}

OpCost NmsCost(const Node& n) {
  OpCost c;
  Value* s = n.input(1);
  int64_t m = s && s->type().is_tensor() ? s->type().shape().NumElements() : -1;
  int64_t boxes = -1;
  if (s && s->type().is_tensor() && s->type().shape().ranked() && s->type().shape().rank() == 3 &&
      s->type().shape()[2].is_static())
    boxes = s->type().shape()[2].value();
  if (m > 0) {
    c.bytes_read = static_cast<double>(m) * 4 * 5;
    c.flops = static_cast<double>(m) * std::max<int64_t>(boxes, 1) * 10;
  }
  return c;
}

//===--- NonZero ----------------------------------------------------------===//

absl::Status InferNonZero(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.is_tensor()) return absl::OkStatus();
  if (x.dtype() == DType::kString) return ctx.Error("expects a numeric input, got str");
  Dim rank = x.shape().ranked() ? Dim(std::max(x.shape().rank(), 1)) : Dim();
  ctx.set_output(0, Type::Tensor(DType::kI64, Shape({rank, Dim()})));
  return absl::OkStatus();
}

absl::Status NonZero(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::kString) return ctx.Error("expects a numeric input, got str");
  // A scalar counts as a one-element vector.
  Dims dims = x.rank() == 0 ? Dims{1} : x.dims();
  int rank = static_cast<int>(dims.size());
  std::vector<int64_t> hits;
  DispatchNumeric(x.dtype(), [&]<typename T>() {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i)
      if (static_cast<float>(p[i]) != 0 || (!kIsHalfLike<T> && p[i] != T(0))) hits.push_back(i);
  });
  int64_t nnz = static_cast<int64_t>(hits.size());
  Tensor& y = ctx.AllocOutput(0, DType::kI64, {rank, nnz});
  int64_t* out = y.data<int64_t>();
  Dims strides = StridesOf(dims);
  for (int64_t j = 0; j < nnz; ++j) {
    int64_t rem = hits[j];
    for (int d = 0; d < rank; ++d) {
      out[d * nnz + j] = rem / strides[d];
      rem %= strides[d];
    }
  }
  return absl::OkStatus();
}

//===--- Unique -----------------------------------------------------------===//

absl::Status InferUnique(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.is_tensor()) return absl::OkStatus();
  const Node& n = ctx.node();
  if (n.has_attr("axis")) {
    if (!x.shape().ranked()) {
      ctx.set_output(0, Type::Tensor(x.dtype(), Shape()));
      for (int i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, Type::Tensor(DType::kI64, Shape({Dim()})));
      return absl::OkStatus();
    }
    auto axis = NormalizeAxis(n.GetInt("axis", 0), x.shape().rank());
    if (!axis.ok() || x.shape().rank() == 0)
      return ctx.Error("axis ", n.GetInt("axis", 0), " is out of range for rank ", x.shape().rank());
    DimVector dims = x.shape().dims();
    Dim along = dims[*axis];
    dims[*axis] = Dim();
    ctx.set_output(0, Type::Tensor(x.dtype(), Shape(dims)));
    if (ctx.num_outputs() > 1) ctx.set_output(1, Type::Tensor(DType::kI64, Shape({Dim()})));
    if (ctx.num_outputs() > 2) ctx.set_output(2, Type::Tensor(DType::kI64, Shape({along})));
    if (ctx.num_outputs() > 3) ctx.set_output(3, Type::Tensor(DType::kI64, Shape({Dim()})));
    return absl::OkStatus();
  }
  ctx.set_output(0, Type::Tensor(x.dtype(), Shape({Dim()})));
  Dim total = x.shape().NumElements() >= 0 ? Dim(x.shape().NumElements()) : Dim();
  if (ctx.num_outputs() > 1) ctx.set_output(1, Type::Tensor(DType::kI64, Shape({Dim()})));
  if (ctx.num_outputs() > 2) ctx.set_output(2, Type::Tensor(DType::kI64, Shape({total})));
  if (ctx.num_outputs() > 3) ctx.set_output(3, Type::Tensor(DType::kI64, Shape({Dim()})));
  return absl::OkStatus();
}

// Three-way comparison of two elements; NaNs are equal to each other and
// greater than every number (numpy's order).
template <typename T>
inline int CompareElems(const T& a, const T& b) {
  if constexpr (kIsHalfLike<T>) {
    return CompareElems<float>(static_cast<float>(a), static_cast<float>(b));
  } else {
    if constexpr (std::is_floating_point_v<T>) {
      bool na = std::isnan(a), nb = std::isnan(b);
      if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
    }
    if (a < b) return -1;
    if (b < a) return 1;
    return 0;
  }
}

absl::Status Unique(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& n = ctx.node();
  int64_t sorted = n.GetInt("sorted", 1);
  int64_t outer = 1, len = x.numel(), inner = 1;
  int axis = -1;
  if (n.has_attr("axis")) {
    auto a = NormalizeAxis(n.GetInt("axis", 0), x.rank());
    if (!a.ok() || x.rank() == 0) return ctx.Error("axis ", n.GetInt("axis", 0), " is out of range for rank ", x.rank());
    axis = *a;
    outer = 1;
    inner = 1;
    for (int i = 0; i < axis; ++i) outer *= x.dim(i);
    len = x.dim(axis);
    for (int i = axis + 1; i < x.rank(); ++i) inner *= x.dim(i);
  }
  std::vector<int64_t> order(len);
  std::iota(order.begin(), order.end(), 0);
  // Groups of equal slices: for each slice its group, in group order.
  std::vector<int64_t> group_first;  // first occurrence of each group
  std::vector<int64_t> group_count;
  std::vector<int64_t> inverse(len);
  auto run = [&]<typename T>() {
    const T* p = x.data<T>();
    auto cmp = [&](int64_t a, int64_t b) -> int {
      for (int64_t o = 0; o < outer; ++o) {
        const T* sa = p + (o * len + a) * inner;
        const T* sb = p + (o * len + b) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          int c = CompareElems<T>(sa[i], sb[i]);
          if (c) return c;
        }
      }
      return 0;
    };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || cmp(order[i - 1], order[i]) != 0) {
        group_first.push_back(order[i]);  // stable sort: the lowest index leads
        group_count.push_back(0);
      }
      inverse[order[i]] = static_cast<int64_t>(group_first.size()) - 1;
      ++group_count.back();
    }
  };
  if (x.dtype() == DType::kString) run.template operator()<std::string>();
  else DispatchNumeric(x.dtype(), run);

  int64_t u = static_cast<int64_t>(group_first.size());
  // Group order: sorted (as found) or by first occurrence.
  std::vector<int64_t> rank_of(u);
  std::iota(rank_of.begin(), rank_of.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(u);
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return group_first[a] < group_first[b]; });
    for (int64_t i = 0; i < u; ++i) rank_of[by_first[i]] = i;
  }
  std::vector<int64_t> first(u), count(u);
  for (int64_t gi = 0; gi < u; ++gi) {
    first[rank_of[gi]] = group_first[gi];
    count[rank_of[gi]] = group_count[gi];
  }
  Dims ydims = axis < 0 ? Dims{u} : x.dims();
  if (axis >= 0) ydims[axis] = u;
  Tensor& y = ctx.AllocOutput(0, x.dtype(), ydims);
  DispatchBySize(x.dtype(), [&]<typename T>() {
    const T* p = x.data<T>();
    T* q = y.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < u; ++j)
        for (int64_t i = 0; i < inner; ++i) q[(o * u + j) * inner + i] = p[(o * len + first[j]) * inner + i];
  });
  if (ctx.num_outputs() > 1)
    std::copy(first.begin(), first.end(), ctx.AllocOutput(1, DType::kI64, {u}).data<int64_t>());
  if (ctx.num_outputs() > 2) {
    int64_t* inv = ctx.AllocOutput(2, DType::kI64, {len}).data<int64_t>();
    for (int64_t i = 0; i < len; ++i) inv[i] = rank_of[inverse[i]];
  }
  if (ctx.num_outputs() > 3)
    std::copy(count.begin(), count.end(), ctx.AllocOutput(3, DType::kI64, {u}).data<int64_t>());
  return absl::OkStatus();
}

//===--- Quantization -----------------------------------------------------===//

// Per-tensor (scalar scale) or per-axis (1-D scale along `axis`) parameters.
template <typename Ctx>
absl::StatusOr<int64_t> QuantAxisBlocks(const Ctx& ctx, const Tensor& x, const Tensor& scale,
                                        const Tensor* zp, int64_t* inner) {
  *inner = 1;
  if (zp && zp->numel() != scale.numel())
    return ctx.Error("the zero point has ", zp->numel(), " values but the scale has ", scale.numel());
  if (scale.numel() == 1 && scale.rank() <= 1) return int64_t{1};
  if (scale.rank() != 1) return ctx.Error("the scale must be a scalar or 1-D, got ", DimsText(scale.dims()));
  auto axis = NormalizeAxis(ctx.node().GetInt("axis", 1), x.rank());
  if (!axis.ok() || x.rank() == 0) return ctx.Error("axis ", ctx.node().GetInt("axis", 1), " is out of range for rank ", x.rank());
  if (x.dim(*axis) != scale.numel())
    return ctx.Error("the scale has ", scale.numel(), " values but axis ", *axis, " has extent ", x.dim(*axis));
  for (int i = *axis + 1; i < x.rank(); ++i) *inner *= x.dim(i);
  return scale.numel();
}

absl::Status InferQuantizeLinear(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (DTypeIsNot(x, {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI32}))
    return ctx.Error("x must be float or i32, got ", DTypeName(x.dtype()));
  DType out = DType::kU8;
  if (ctx.num_inputs() > 2 && ctx.has_input(2)) {
    const Type& zp = ctx.input_type(2);
    if (DTypeIsNot(zp, {DType::kU8, DType::kI8})) return ctx.Error("the zero point must be u8 or i8, got ", DTypeName(zp.dtype()));
    if (zp.is_tensor() && zp.dtype() != DType::kUndefined) out = zp.dtype();
  }
  ctx.set_output(0, Type::Tensor(out, x.is_tensor() ? x.shape() : Shape()));
  return absl::OkStatus();
}

absl::Status QuantizeLinear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (!IsFloat(x.dtype()) && x.dtype() != DType::kI32) return ctx.Error("x must be float or i32, got ", DTypeName(x.dtype()));
  if (!IsFloat(scale.dtype())) return ctx.Error("the scale must be float, got ", DTypeName(scale.dtype()));
  DType out = zp ? zp->dtype() : DType::kU8;
  if (out != DType::kU8 && out != DType::kI8) return ctx.Error("the zero point must be u8 or i8, got ", DTypeName(out));
  int64_t inner;
  KILN_ASSIGN_OR_RETURN(int64_t blocks, QuantAxisBlocks(ctx, x, scale, zp, &inner));
  std::vector<double> s = ToDoubleVector(scale);
  std::vector<double> z = zp ? ToDoubleVector(*zp) : std::vector<double>(s.size(), 0);
  for (double v : s)
    if (v == 0) return ctx.Error("the scale is 0");
  Tensor& y = ctx.AllocOutput(0, out, x.dims());
  float lo = out == DType::kU8 ? 0.f : -128.f, hi = out == DType::kU8 ? 255.f : 127.f;
  std::vector<double> xs = ToDoubleVector(x);
  DispatchInteger(out, [&]<typename Q>() {
    if constexpr (sizeof(Q) == 1) {
      Q* q = y.data<Q>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t c = blocks == 1 ? 0 : (i / inner) % blocks;
        float v = std::nearbyint(static_cast<float>(xs[i]) / static_cast<float>(s[c])) + static_cast<float>(z[c]);
        q[i] = static_cast<Q>(std::isnan(v) ? 0.f : std::min(std::max(v, lo), hi));
      }
    }
  });
  return absl::OkStatus();
}

absl::Status InferDequantizeLinear(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (DTypeIsNot(x, {DType::kU8, DType::kI8, DType::kI32}))
    return ctx.Error("x must be u8, i8 or i32, got ", DTypeName(x.dtype()));
  const Type& s = ctx.input_type(1);
  DType out = s.is_tensor() && s.dtype() != DType::kUndefined ? s.dtype() : DType::kF32;
  if (!IsFloat(out)) return ctx.Error("the scale must be float, got ", DTypeName(out));
  if (ctx.num_inputs() > 2 && ctx.has_input(2)) {
    const Type& zp = ctx.input_type(2);
    if (x.is_tensor() && zp.is_tensor() && x.dtype() != DType::kUndefined && zp.dtype() != DType::kUndefined &&
        zp.dtype() != x.dtype())
      return ctx.Error("the zero point is ", DTypeName(zp.dtype()), " but x is ", DTypeName(x.dtype()));
  }
  ctx.set_output(0, Type::Tensor(out, x.is_tensor() ? x.shape() : Shape()));
  return absl::OkStatus();
}

absl::Status DequantizeLinear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (x.dtype() != DType::kU8 && x.dtype() != DType::kI8 && x.dtype() != DType::kI32)
    return ctx.Error("x must be u8, i8 or i32, got ", DTypeName(x.dtype()));
  if (!IsFloat(scale.dtype())) return ctx.Error("the scale must be float, got ", DTypeName(scale.dtype()));
  if (zp && zp->dtype() != x.dtype())
    return ctx.Error("the zero point is ", DTypeName(zp->dtype()), " but x is ", DTypeName(x.dtype()));
  int64_t inner;
  KILN_ASSIGN_OR_RETURN(int64_t blocks, QuantAxisBlocks(ctx, x, scale, zp, &inner));
  std::vector<double> s = ToDoubleVector(scale);
  std::vector<int64_t> z = zp ? ToInt64Vector(*zp) : std::vector<int64_t>(s.size(), 0);
  Tensor& y = ctx.AllocOutput(0, scale.dtype(), x.dims());
  std::vector<int64_t> xs = ToInt64Vector(x);
  DispatchFloat(scale.dtype(), [&]<typename T>() {
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t c = blocks == 1 ? 0 : (i / inner) % blocks;
      out[i] = static_cast<T>(static_cast<float>(xs[i] - z[c]) * static_cast<float>(s[c]));
    }
  });
  return absl::OkStatus();
}

absl::Status InferDynamicQuantizeLinear(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (DTypeIsNot(x, {DType::kF32})) return ctx.Error("x must be f32, got ", DTypeName(x.dtype()));
  ctx.set_output(0, Type::Tensor(DType::kU8, x.is_tensor() ? x.shape() : Shape()));
  ctx.set_output(1, Type::Tensor(DType::kF32, Shape::Scalar()));
  ctx.set_output(2, Type::Tensor(DType::kU8, Shape::Scalar()));
  return absl::OkStatus();
}

absl::Status DynamicQuantizeLinear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kF32) return ctx.Error("x must be f32, got ", DTypeName(x.dtype()));
  const float* p = x.data<float>();
  float mn = 0, mx = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (!std::isfinite(p[i])) return ctx.Error("x contains NaN or infinity");
    mn = std::min(mn, p[i]);
    mx = std::max(mx, p[i]);
  }
  float scale = (mx - mn) / 255.f;
  float zp = 0;
  if (scale != 0) zp = std::min(std::max(std::nearbyint((0.f - mn) / scale), 0.f), 255.f);
  uint8_t* q = ctx.AllocOutput(0, DType::kU8, x.dims()).data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = scale != 0 ? std::nearbyint(p[i] / scale) + zp : zp;
    q[i] = static_cast<uint8_t>(std::min(std::max(v, 0.f), 255.f));
  }
  ctx.set_output(1, Tensor::Scalar<float>(scale));
  ctx.set_output(2, Tensor::Scalar<uint8_t>(static_cast<uint8_t>(zp)));
  return absl::OkStatus();
}

//===--- StringNormalizer -------------------------------------------------===//

// Simple case mapping of one code point: ASCII, Latin-1, Latin Extended-A,
// Greek and Cyrillic.
char32_t MapCase(char32_t c, bool upper) {
  if (upper) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
      bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
      if (odd_lower ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
      return c;
    }
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c == 0x3C2) return 0x3A3;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
  }
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_lower ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

std::string ChangeCase(const std::string& s, bool upper) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    char32_t c;
    size_t n;
    if (b < 0x80) { c = b; n = 1; }
    else if ((b & 0xE0) == 0xC0 && i + 1 < s.size()) { c = ((b & 0x1F) << 6) | (s[i + 1] & 0x3F); n = 2; }
    else {
      // Other sequences (3- and 4-byte, or malformed) are copied unchanged.
      size_t len = (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
      len = std::min(len, s.size() - i);
      out.append(s, i, len);
      i += len;
      continue;
    }
    char32_t m = MapCase(c, upper);
    if (m < 0x80) out.push_back(static_cast<char>(m));
    else {
      out.push_back(static_cast<char>(0xC0 | (m >> 6)));
      out.push_back(static_cast<char>(0x80 | (m & 0x3F)));
    }
    i += n;
  }
  return out;
}

template <typename Ctx>
absl::Status CheckStringNormalizerAttrs(const Ctx& ctx) {
  std::string action = ctx.node().GetString("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return ctx.Error("case_change_action must be NONE, LOWER or UPPER, got '", action, "'");
  return absl::OkStatus();
}

absl::Status InferStringNormalizer(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckStringNormalizerAttrs(ctx));
  const Type& x = ctx.input_type(0);
  if (DTypeIsNot(x, {DType::kString})) return ctx.Error("expects a string input, got ", DTypeName(x.dtype()));
  if (x.is_tensor() && x.shape().ranked()) {
    const Shape& s = x.shape();
    if (s.rank() == 1) {
      ctx.set_output(0, Type::Tensor(DType::kString, Shape({Dim()})));
      return absl::OkStatus();
    }
    if (s.rank() == 2 && !(s[0].is_static() && s[0].value() != 1)) {
      ctx.set_output(0, Type::Tensor(DType::kString, Shape({Dim(1), Dim()})));
      return absl::OkStatus();
    }
    return ctx.Error("expects a [C] or [1, C] input, got ", s.ToString());
  }
  ctx.set_output(0, Type::Tensor(DType::kString, Shape()));
  return absl::OkStatus();
}

absl::Status StringNormalizer(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckStringNormalizerAttrs(ctx));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kString) return ctx.Error("expects a string input, got ", DTypeName(x.dtype()));
  if (!(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1)))
    return ctx.Error("expects a [C] or [1, C] input, got ", DimsText(x.dims()));
  const Node& n = ctx.node();
  std::string action = n.GetString("case_change_action", "NONE");
  bool sensitive = n.GetInt("is_case_sensitive", 0) != 0;
  std::vector<std::string> stop;
  if (const Attribute* a = n.attr("stopwords")) stop = a->strings();
  if (!sensitive)
    for (std::string& s : stop) s = ChangeCase(s, false);
  std::sort(stop.begin(), stop.end());
  std::vector<std::string> kept;
  const std::string* p = x.data<std::string>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::string& key = sensitive ? p[i] : ChangeCase(p[i], false);
    if (std::binary_search(stop.begin(), stop.end(), key)) continue;
    if (action == "LOWER") kept.push_back(ChangeCase(p[i], false));
    else if (action == "UPPER") kept.push_back(ChangeCase(p[i], true));
    else kept.push_back(p[i]);
  }
  if (kept.empty()) kept.push_back("");
  int64_t c = static_cast<int64_t>(kept.size());
  Tensor& y = ctx.AllocOutput(0, DType::kString, x.rank() == 1 ? Dims{c} : Dims{1, c});
  std::move(kept.begin(), kept.end(), y.data<std::string>());
  return absl::OkStatus();
}

//===--- TfIdfVectorizer --------------------------------------------------===//

struct TfIdfConfig {
  int64_t min_n = 0, max_n = 0, max_skip = 0;
  enum { kTF, kIDF, kTFIDF } mode = kTF;
  int64_t out_size = 0;
  std::vector<int64_t> indexes;  // output coordinate of each pool n-gram
  std::vector<float> weights;
  // Pool n-grams of each length n (1-based), with their pool ids.
  std::vector<std::map<std::vector<int64_t>, int64_t>> pool_ints;
  std::vector<std::map<std::vector<std::string>, int64_t>> pool_strings;
  bool strings = false;
};

template <typename Ctx>
absl::StatusOr<TfIdfConfig> ReadTfIdf(const Ctx& ctx) {
  const Node& n = ctx.node();
  TfIdfConfig c;
  c.min_n = n.GetInt("min_gram_length", 0);
  c.max_n = n.GetInt("max_gram_length", 0);
  c.max_skip = n.GetInt("max_skip_count", 0);
  if (c.min_n < 1 || c.max_n < c.min_n)
    return ctx.Error("gram lengths must satisfy 1 <= min_gram_length <= max_gram_length, got ", c.min_n, " and ", c.max_n);
  if (c.max_skip < 0) return ctx.Error("max_skip_count is negative");
  std::string mode = n.GetString("mode", "");
  if (mode == "TF") c.mode = TfIdfConfig::kTF;
  else if (mode == "IDF") c.mode = TfIdfConfig::kIDF;
  else if (mode == "TFIDF") c.mode = TfIdfConfig::kTFIDF;
  else return ctx.Error("mode must be TF, IDF or TFIDF, got '", mode, "'");
  std::vector<int64_t> counts = n.GetInts("ngram_counts");
  c.indexes = n.GetInts("ngram_indexes");
  c.weights = n.GetFloats("weights");
  bool has_ints = n.has_attr("pool_int64s"), has_strings = n.has_attr("pool_strings");
  if (has_ints == has_strings) return ctx.Error("exactly one of pool_int64s and pool_strings must be set");
  c.strings = has_strings;
  std::vector<int64_t> pi = has_ints ? n.GetInts("pool_int64s") : std::vector<int64_t>{};
  std::vector<std::string> ps = has_strings ? n.attr("pool_strings")->strings() : std::vector<std::string>{};
  int64_t pool = static_cast<int64_t>(has_ints ? pi.size() : ps.size());
  if (counts.empty()) return ctx.Error("ngram_counts is empty");
  c.pool_ints.resize(counts.size() + 1);
  c.pool_strings.resize(counts.size() + 1);
  int64_t id = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    int64_t len = static_cast<int64_t>(g) + 1;
    int64_t start = counts[g], end = g + 1 < counts.size() ? counts[g + 1] : pool;
    if (start < 0 || end < start || end > pool || (end - start) % len != 0)
      return ctx.Error("ngram_counts does not split the pool into whole ", len, "-grams");
    for (int64_t i = start; i < end; i += len, ++id) {
      if (has_ints) c.pool_ints[len].emplace(std::vector<int64_t>(pi.begin() + i, pi.begin() + i + len), id);
      else c.pool_strings[len].emplace(std::vector<std::string>(ps.begin() + i, ps.begin() + i + len), id);
    }
  }
  if (static_cast<int64_t>(c.indexes.size()) != id)
    return ctx.Error("ngram_indexes has ", c.indexes.size(), " entries but the pool holds ", id, " n-grams");
  if (!c.weights.empty() && c.weights.size() != c.indexes.size())
    return ctx.Error("weights has ", c.weights.size(), " entries, expected ", c.indexes.size());
  for (int64_t i : c.indexes) {
    if (i < 0) return ctx.Error("ngram_indexes has a negative entry");
    c.out_size = std::max(c.out_size, i + 1);
  }
  return c;
}

absl::Status InferTfIdfVectorizer(InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(TfIdfConfig c, ReadTfIdf(ctx));
  const Type& x = ctx.input_type(0);
  if (c.strings ? DTypeIsNot(x, {DType::kString}) : DTypeIsNot(x, {DType::kI32, DType::kI64}))
    return ctx.Error("the input dtype ", DTypeName(x.dtype()), " does not match the pool");
  if (x.is_tensor() && x.shape().ranked()) {
    if (x.shape().rank() == 1) ctx.set_output(0, Type::Tensor(DType::kF32, Shape({Dim(c.out_size)})));
    else if (x.shape().rank() == 2) ctx.set_output(0, Type::Tensor(DType::kF32, Shape({x.shape()[0], Dim(c.out_size)})));
    else return ctx.Error("expects a [C] or [N, C] input, got ", x.shape().ToString());
  } else {
    ctx.set_output(0, Type::Tensor(DType::kF32, Shape()));
  }
  return absl::OkStatus();
}

absl::Status TfIdfVectorizer(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(TfIdfConfig c, ReadTfIdf(ctx));
  const Tensor& x = ctx.input(0);
  if (c.strings ? x.dtype() != DType::kString : (x.dtype() != DType::kI32 && x.dtype() != DType::kI64))
    return ctx.Error("the input dtype ", DTypeName(x.dtype()), " does not match the pool");
  if (x.rank() != 1 && x.rank() != 2) return ctx.Error("expects a [C] or [N, C] input, got ", DimsText(x.dims()));
  int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
  int64_t cols = x.rank() == 2 ? x.dim(1) : (x.rank() == 1 ? x.dim(0) : 0);
  Dims ydims = x.rank() == 2 ? Dims{rows, c.out_size} : Dims{c.out_size};
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, ydims));
  Tensor& y = ctx.AllocOutput(0, DType::kF32, ydims);
  float* out = y.data<float>();
  std::vector<int64_t> ints = c.strings ? std::vector<int64_t>{} : ToInt64Vector(x);
  const std::string* strs = c.strings ? x.data<std::string>() : nullptr;
  std::vector<int64_t> counts(c.indexes.size());
  std::vector<int64_t> key_i;
  std::vector<std::string> key_s;
  int64_t max_len = std::min<int64_t>(c.max_n, static_cast<int64_t>(c.pool_ints.size()) - 1);
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(counts.begin(), counts.end(), 0);
    for (int64_t len = c.min_n; len <= max_len; ++len) {
      int64_t skips = len == 1 ? 0 : c.max_skip;
      for (int64_t skip = 0; skip <= skips; ++skip) {
        int64_t step = skip + 1;
        for (int64_t start = 0; start + (len - 1) * step < cols; ++start) {
          int64_t id = -1;
          if (c.strings) {
            key_s.clear();
            for (int64_t j = 0; j < len; ++j) key_s.push_back(strs[r * cols + start + j * step]);
            auto it = c.pool_strings[len].find(key_s);
            if (it != c.pool_strings[len].end()) id = it->second;
          } else {
            key_i.clear();
            for (int64_t j = 0; j < len; ++j) key_i.push_back(ints[r * cols + start + j * step]);
            auto it = c.pool_ints[len].find(key_i);
            if (it != c.pool_ints[len].end()) id = it->second;
          }
          if (id >= 0) ++counts[id];
        }
      }
    }
    float* row = out + r * c.out_size;
    for (size_t id = 0; id < counts.size(); ++id) {
      if (counts[id] == 0) continue;
      float w = c.weights.empty() ? 1.f : c.weights[id];
      float v = c.mode == TfIdfConfig::kTF ? static_cast<float>(counts[id])
                : c.mode == TfIdfConfig::kIDF ? w
                                              : static_cast<float>(counts[id]) * w;
      row[c.indexes[id]] += v;
    }
  }
  return absl::OkStatus();
}

//===--- DFT, STFT, MelWeightMatrix ---------------------------------------===//

using Complex = std::complex<double>;

// Unnormalized radix-2 FFT of a power-of-two size, with e^{sign 2 pi i jk/n}.
class Radix2 {
 public:
  Radix2(int64_t n, double sign) : n_(n), twiddle_(n / 2) {
    for (int64_t k = 0; k < n / 2; ++k) {
      double ang = sign * 2 * kPi * static_cast<double>(k) / static_cast<double>(n);
      twiddle_[k] = Complex(std::cos(ang), std::sin(ang));
    }
  }

  void Run(Complex* a) const {
    for (int64_t i = 1, j = 0; i < n_; ++i) {
      int64_t bit = n_ >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (int64_t len = 2; len <= n_; len <<= 1) {
      int64_t half = len / 2, step = n_ / len;
      for (int64_t i = 0; i < n_; i += len) {
        for (int64_t j = 0; j < half; ++j) {
          Complex u = a[i + j], v = a[i + j + half] * twiddle_[j * step];
          a[i + j] = u + v;
          a[i + j + half] = u - v;
        }
      }
    }
  }

 private:
  int64_t n_;
  std::vector<Complex> twiddle_;
};

// In-place DFT of `a` (any length n > 0): radix-2 for powers of two, a
// direct sum for short other lengths, Bluestein's chirp-z convolution for
// long ones. `inverse` uses e^{+i} and scales by 1/n.
class Fourier {
 public:
  Fourier(int64_t n, bool inverse) : n_(n), inverse_(inverse) {
    double sign = inverse ? 1.0 : -1.0;
    if (n <= 0) return;
    if ((n & (n - 1)) == 0) {
      fft_ = std::make_unique<Radix2>(n, sign);
    } else if (n <= 64) {
      twiddle_.resize(n);
      for (int64_t k = 0; k < n; ++k) {
        double ang = sign * 2 * kPi * static_cast<double>(k) / static_cast<double>(n);
        twiddle_[k] = Complex(std::cos(ang), std::sin(ang));
      }
    } else {
      // X_k = w_k sum_j (x_j w_j) conj(w_{k-j}), w_k = e^{sign i pi k^2 / n}.
      m_ = 1;
      while (m_ < 2 * n - 1) m_ <<= 1;
      fft_ = std::make_unique<Radix2>(m_, -1.0);
      ifft_ = std::make_unique<Radix2>(m_, 1.0);
      chirp_.resize(n);
      for (int64_t k = 0; k < n; ++k) {
        int64_t k2 = static_cast<int64_t>((static_cast<unsigned __int128>(k) * k) % (2 * n));
        double ang = sign * kPi * static_cast<double>(k2) / static_cast<double>(n);
        chirp_[k] = Complex(std::cos(ang), std::sin(ang));
      }
      kernel_.assign(m_, Complex(0));
      kernel_[0] = std::conj(chirp_[0]);
      for (int64_t k = 1; k < n; ++k) kernel_[k] = kernel_[m_ - k] = std::conj(chirp_[k]);
      fft_->Run(kernel_.data());
    }
    tmp_.resize(std::max(n, m_));
  }

  void Run(std::vector<Complex>& a) {
    if (n_ <= 0) return;
    if (m_ > 0) Bluestein(a);
    else if (fft_) fft_->Run(a.data());
    else Direct(a);
    if (inverse_)
      for (Complex& v : a) v /= static_cast<double>(n_);
  }

 private:
  void Direct(std::vector<Complex>& a) {
    for (int64_t k = 0; k < n_; ++k) {
      Complex s = 0;
      int64_t idx = 0;
      for (int64_t j = 0; j < n_; ++j) {
        s += a[j] * twiddle_[idx];
        idx += k;
        if (idx >= n_) idx -= n_;
      }
      tmp_[k] = s;
    }
    std::copy(tmp_.begin(), tmp_.begin() + n_, a.begin());
  }

  void Bluestein(std::vector<Complex>& a) {
    std::fill(tmp_.begin(), tmp_.end(), Complex(0));
    for (int64_t j = 0; j < n_; ++j) tmp_[j] = a[j] * chirp_[j];
    fft_->Run(tmp_.data());
    for (int64_t i = 0; i < m_; ++i) tmp_[i] *= kernel_[i];
    ifft_->Run(tmp_.data());
    double scale = 1.0 / static_cast<double>(m_);
    for (int64_t k = 0; k < n_; ++k) a[k] = tmp_[k] * scale * chirp_[k];
  }

  int64_t n_;
  bool inverse_;
  int64_t m_ = 0;  // Bluestein convolution size, 0 when unused
  std::unique_ptr<Radix2> fft_, ifft_;
  std::vector<Complex> twiddle_, chirp_, kernel_, tmp_;
};

// Longest transform accepted (its working buffers are a few times larger).
constexpr int64_t kMaxSignalLength = int64_t{1} << 24;

template <typename Ctx>
absl::StatusOr<int> DftAxis(const Ctx& ctx, int rank) {
  int64_t a = ctx.node().GetInt("axis", 1);
  if (rank < 2) return ctx.Error("the input has rank ", rank, "; it needs a signal axis and a last dim of 1 or 2");
  // The last dim holds the real and imaginary parts; it is not a signal axis.
  int64_t norm = a < 0 ? a + rank : a;
  if (norm < 0 || norm > rank - 2) return ctx.Error("axis ", a, " is out of range for rank ", rank);
  return static_cast<int>(norm);
}

absl::Status InferDFT(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.is_tensor()) return absl::OkStatus();
  if (DTypeIsNot(x, {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}))
    return ctx.Error("expects a float input, got ", DTypeName(x.dtype()));
  if (!x.shape().ranked()) {
    ctx.set_output(0, Type::Tensor(x.dtype(), Shape()));
    return absl::OkStatus();
  }
  int rank = x.shape().rank();
  KILN_ASSIGN_OR_RETURN(int axis, DftAxis(ctx, rank));
  const Dim& last = x.shape()[rank - 1];
  if (last.is_static() && last.value() != 1 && last.value() != 2)
    return ctx.Error("the last dim must be 1 (real) or 2 (complex), got ", last.value());
  bool onesided = ctx.node().GetInt("onesided", 0) != 0;
  DimVector dims = x.shape().dims();
  Dim n = dims[axis];
  if (ctx.num_inputs() > 1 && ctx.has_input(1)) {
    const Tensor* len = ctx.const_input(1);
    n = len && len->numel() == 1 ? Dim(len->GetInt(0)) : Dim();
  }
  if (onesided) n = n.is_static() ? Dim(n.value() / 2 + 1) : Dim();
  dims[axis] = n;
  dims[rank - 1] = Dim(2);
  ctx.set_output(0, Type::Tensor(x.dtype(), Shape(dims)));
  return absl::OkStatus();
}

absl::Status DFT(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("expects a float input, got ", DTypeName(x.dtype()));
  int rank = x.rank();
  KILN_ASSIGN_OR_RETURN(int axis, DftAxis(ctx, rank));
  int64_t comps = x.dim(rank - 1);
  if (comps != 1 && comps != 2) return ctx.Error("the last dim must be 1 (real) or 2 (complex), got ", comps);
  bool inverse = ctx.node().GetInt("inverse", 0) != 0;
  bool onesided = ctx.node().GetInt("onesided", 0) != 0;
  if (onesided && comps == 2) return ctx.Error("onesided output needs a real input");
  if (onesided && inverse) return ctx.Error("onesided is not supported with inverse");
  int64_t in_len = x.dim(axis);
  int64_t n = in_len;
  if (ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(n, ScalarInt(ctx, ctx.input(1), "dft_length"));
    if (n < 1) return ctx.Error("dft_length must be positive, got ", n);
  }
  if (n > kMaxSignalLength) return ctx.Error("the DFT length ", n, " is too large");
  int64_t out_len = onesided ? n / 2 + 1 : n;
  Dims out_dims = x.dims();
  out_dims[axis] = out_len;
  out_dims[rank - 1] = 2;
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out_dims));
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out_dims);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int i = axis + 1; i < rank - 1; ++i) inner *= x.dim(i);
  std::vector<double> xs = ToDoubleVector(x);
  Fourier f(n, inverse);
  std::vector<Complex> a(n);
  DispatchFloat(x.dtype(), [&]<typename T>() {
    T* out = y.data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        std::fill(a.begin(), a.end(), Complex(0));
        for (int64_t j = 0; j < std::min(n, in_len); ++j) {
          const double* p = &xs[((o * in_len + j) * inner + i) * comps];
          a[j] = Complex(p[0], comps == 2 ? p[1] : 0.0);
        }
        f.Run(a);
        for (int64_t k = 0; k < out_len; ++k) {
          T* q = out + ((o * out_len + k) * inner + i) * 2;
          q[0] = FromDouble<T>(a[k].real());
          q[1] = FromDouble<T>(a[k].imag());
        }
      }
    }
  });
  return absl::OkStatus();
}

OpCost DftCost(const Node& n) {
  OpCost c;
  Value* x = n.input(0);
  Value* y = n.output(0);
  int64_t in = x && x->type().is_tensor() ? x->type().shape().NumElements() : -1;
  int64_t out = y->type().is_tensor() ? y->type().shape().NumElements() : -1;
  if (in > 0) c.bytes_read = static_cast<double>(in) * DTypeSize(x->type().dtype());
  if (out > 0) {
    c.bytes_written = static_cast<double>(out) * DTypeSize(y->type().dtype());
    double len = 2;
    const Shape& s = y->type().shape();
    auto axis = NormalizeAxis(n.GetInt("axis", 1), s.rank());
    if (axis.ok() && s[*axis].is_static()) len = std::max<double>(2, static_cast<double>(s[*axis].value()));
    c.flops = static_cast<double>(out) * 5 * std::log2(len);
  }
  return c;
}

absl::Status InferSTFT(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.is_tensor()) return absl::OkStatus();
  if (DTypeIsNot(x, {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}))
    return ctx.Error("expects a float signal, got ", DTypeName(x.dtype()));
  if (x.shape().ranked() && x.shape().rank() != 3)
    return ctx.Error("signal has rank ", x.shape().rank(), ", expected 3 [batch, length, 1 or 2]");
  bool onesided = ctx.node().GetInt("onesided", 1) != 0;
  Dim frame;
  if (ctx.num_inputs() > 3 && ctx.has_input(3)) {
    if (const Tensor* fl = ctx.const_input(3); fl && fl->numel() == 1) frame = Dim(fl->GetInt(0));
  } else if (ctx.num_inputs() > 2 && ctx.has_input(2)) {
    const Type& w = ctx.input_type(2);
    if (w.is_tensor() && w.shape().ranked() && w.shape().rank() == 1) frame = w.shape()[0];
  }
  Dim frames;
  const Tensor* step = ctx.const_input(1);
  if (x.shape().ranked() && x.shape()[1].is_static() && frame.is_static() && step && step->numel() == 1 &&
      step->GetInt(0) > 0 && frame.value() > 0 && frame.value() <= x.shape()[1].value())
    frames = Dim(1 + (x.shape()[1].value() - frame.value()) / step->GetInt(0));
  Dim bins = frame.is_static() ? Dim(onesided ? frame.value() / 2 + 1 : frame.value()) : Dim();
  Dim batch = x.shape().ranked() ? x.shape()[0] : Dim();
  ctx.set_output(0, Type::Tensor(x.dtype(), Shape({batch, frames, bins, Dim(2)})));
  return absl::OkStatus();
}

absl::Status STFT(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("expects a float signal, got ", DTypeName(x.dtype()));
  if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2))
    return ctx.Error("signal must be [batch, length, 1 or 2], got ", DimsText(x.dims()));
  KILN_ASSIGN_OR_RETURN(int64_t step, ScalarInt(ctx, ctx.input(1), "frame_step"));
  if (step < 1) return ctx.Error("frame_step must be positive, got ", step);
  const Tensor* window = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  int64_t frame = -1;
  if (ctx.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(frame, ScalarInt(ctx, ctx.input(3), "frame_length"));
  }
  if (window) {
    if (window->rank() != 1 || !IsFloat(window->dtype()))
      return ctx.Error("window must be a 1-D float tensor, got ", DimsText(window->dims()));
    if (frame >= 0 && frame != window->dim(0))
      return ctx.Error("frame_length ", frame, " differs from the window length ", window->dim(0));
    frame = window->dim(0);
  }
  if (frame < 1) return ctx.Error("the frame length is unknown or not positive: give a window or frame_length");
  int64_t batch = x.dim(0), len = x.dim(1), comps = x.dim(2);
  if (frame > len) return ctx.Error("the frame length ", frame, " exceeds the signal length ", len);
  if (frame > kMaxSignalLength) return ctx.Error("the frame length ", frame, " is too large");
  bool onesided = ctx.node().GetInt("onesided", 1) != 0;
  if (onesided && comps == 2) return ctx.Error("onesided output needs a real signal; set onesided=0");
  int64_t frames = 1 + (len - frame) / step;
  int64_t bins = onesided ? frame / 2 + 1 : frame;
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, {batch, frames, bins, 2}));
  Tensor& y = ctx.AllocOutput(0, x.dtype(), {batch, frames, bins, 2});
  std::vector<double> xs = ToDoubleVector(x);
  std::vector<double> w = window ? ToDoubleVector(*window) : std::vector<double>(frame, 1.0);
  Fourier f(frame, false);
  std::vector<Complex> a(frame);
  DispatchFloat(x.dtype(), [&]<typename T>() {
    T* out = y.data<T>();
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t fr = 0; fr < frames; ++fr) {
        for (int64_t j = 0; j < frame; ++j) {
          const double* p = &xs[(b * len + fr * step + j) * comps];
          a[j] = Complex(p[0], comps == 2 ? p[1] : 0.0) * w[j];
        }
        f.Run(a);
        T* q = out + (b * frames + fr) * bins * 2;
        for (int64_t k = 0; k < bins; ++k) {
          q[2 * k] = FromDouble<T>(a[k].real());
          q[2 * k + 1] = FromDouble<T>(a[k].imag());
        }
      }
    }
  });
  return absl::OkStatus();
}

absl::Status InferMelWeightMatrix(InferContext& ctx) {
  auto dt = DTypeFromOnnx(ctx.node().GetInt("output_datatype", 1));
  if (!dt || !IsNumeric(*dt)) return ctx.Error("output_datatype is not a numeric data type");
  Dim rows, cols;
  if (const Tensor* m = ctx.const_input(0); m && m->numel() == 1) cols = Dim(std::max<int64_t>(m->GetInt(0), 0));
  if (const Tensor* d = ctx.const_input(1); d && d->numel() == 1) rows = Dim(std::max<int64_t>(d->GetInt(0) / 2 + 1, 0));
  ctx.set_output(0, Type::Tensor(*dt, Shape({rows, cols})));
  return absl::OkStatus();
}

absl::Status MelWeightMatrix(KernelContext& ctx) {
  auto dt = DTypeFromOnnx(ctx.node().GetInt("output_datatype", 1));
  if (!dt || !IsNumeric(*dt)) return ctx.Error("output_datatype is not a numeric data type");
  KILN_ASSIGN_OR_RETURN(int64_t mel_bins, ScalarInt(ctx, ctx.input(0), "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(int64_t dft_length, ScalarInt(ctx, ctx.input(1), "dft_length"));
  KILN_ASSIGN_OR_RETURN(int64_t sample_rate, ScalarInt(ctx, ctx.input(2), "sample_rate"));
  KILN_ASSIGN_OR_RETURN(double lower, ScalarFloat(ctx, ctx.input(3), "lower_edge_hertz"));
  KILN_ASSIGN_OR_RETURN(double upper, ScalarFloat(ctx, ctx.input(4), "upper_edge_hertz"));
  if (mel_bins < 1) return ctx.Error("num_mel_bins must be positive, got ", mel_bins);
  if (dft_length < 1) return ctx.Error("dft_length must be positive, got ", dft_length);
  if (sample_rate < 1) return ctx.Error("sample_rate must be positive, got ", sample_rate);
  if (!(lower >= 0 && upper >= lower && std::isfinite(upper)))
    return ctx.Error("edges must satisfy 0 <= lower_edge_hertz <= upper_edge_hertz (finite)");
  int64_t spec_bins = dft_length / 2 + 1;
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, {spec_bins, mel_bins}));
  // Band edges on the mel scale, mapped back to spectrogram bins.
  float low_mel = 2595.f * std::log10(1.f + static_cast<float>(lower) / 700.f);
  float high_mel = 2595.f * std::log10(1.f + static_cast<float>(upper) / 700.f);
  float mel_step = (high_mel - low_mel) / static_cast<float>(mel_bins + 2);
  std::vector<int64_t> edge(mel_bins + 2);
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    double mel = static_cast<double>(i) * mel_step + low_mel;
    double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
    double bin = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
    if (!(std::fabs(bin) < 1e15)) return ctx.Error("the band edges fall outside any usable bin range");
    edge[i] = static_cast<int64_t>(bin);
  }
  std::vector<double> w(spec_bins * mel_bins, 0.0);
  // Triangles, written only where they meet the spectrogram bins.
  for (int64_t i = 0; i < mel_bins; ++i) {
    int64_t lo = edge[i], center = edge[i + 1], hi = edge[i + 2];
    if (center == lo) {
      if (center >= 0 && center < spec_bins) w[center * mel_bins + i] = 1.0;
    } else {
      for (int64_t j = std::max<int64_t>(lo, 0); j <= std::min(center, spec_bins - 1); ++j)
        w[j * mel_bins + i] = static_cast<double>(j - lo) / static_cast<double>(center - lo);
    }
    if (hi > center)
      for (int64_t j = std::max<int64_t>(center, 0); j < std::min(hi, spec_bins); ++j)
        w[j * mel_bins + i] = static_cast<double>(hi - j) / static_cast<double>(hi - center);
  }
  Tensor& y = ctx.AllocOutput(0, *dt, {spec_bins, mel_bins});
  DispatchNumeric(*dt, [&]<typename T>() {
    T* out = y.data<T>();
    for (size_t i = 0; i < w.size(); ++i) out[i] = FromDouble<T>(w[i]);
  });
  return absl::OkStatus();
}

//===--- GridSample -------------------------------------------------------===//

enum class GridMode { kBilinear, kNearest, kBicubic };
enum class GridPadding { kZeros, kBorder, kReflection };

struct GridParams {
  GridMode mode = GridMode::kBilinear;
  GridPadding padding = GridPadding::kZeros;
  bool align = false;
};

template <typename Ctx>
absl::StatusOr<GridParams> ReadGridParams(const Ctx& ctx) {
  GridParams p;
  std::string mode = ctx.node().GetString("mode", "bilinear");
  if (mode == "bilinear") p.mode = GridMode::kBilinear;
  else if (mode == "nearest") p.mode = GridMode::kNearest;
  else if (mode == "bicubic") p.mode = GridMode::kBicubic;
  else return ctx.Error("unknown mode '", mode, "'");
  std::string pad = ctx.node().GetString("padding_mode", "zeros");
  if (pad == "zeros") p.padding = GridPadding::kZeros;
  else if (pad == "border") p.padding = GridPadding::kBorder;
  else if (pad == "reflection") p.padding = GridPadding::kReflection;
  else return ctx.Error("unknown padding_mode '", pad, "'");
  p.align = ctx.node().GetInt("align_corners", 0) != 0;
  return p;
}

// A pixel coordinate as an index; non-finite or far-away values map to an
// index outside every image (so they read as padding zeros).
inline int64_t GridIndex(double v) {
  if (!(std::fabs(v) < 1e15)) return -(int64_t{1} << 40);
  return static_cast<int64_t>(v);
}

// Maps a normalized coordinate in [-1, 1] to a pixel coordinate.
inline double GridUnnormalize(double c, int64_t size, bool align) {
  return align ? (c + 1) / 2 * static_cast<double>(size - 1) : ((c + 1) * static_cast<double>(size) - 1) / 2;
}

inline double GridReflect(double x, double twice_low, double twice_high) {
  if (twice_low == twice_high) return 0;
  double lo = twice_low / 2, span = (twice_high - twice_low) / 2;
  x = std::fabs(x - lo);
  double extra = std::fmod(x, span);
  int64_t flips = static_cast<int64_t>(std::floor(x / span));
  return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

// Applies border or reflection padding to a pixel coordinate.
inline double GridPad(double x, int64_t size, const GridParams& p) {
  double hi = static_cast<double>(size - 1);
  if (p.padding == GridPadding::kBorder) return std::min(hi, std::max(x, 0.0));
  if (p.padding == GridPadding::kReflection) {
    x = p.align ? GridReflect(x, 0, 2 * hi) : GridReflect(x, -1, 2 * static_cast<double>(size) - 1);
    return std::min(hi, std::max(x, 0.0));
  }
  return x;
}

absl::Status InferGridSample(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ReadGridParams(ctx).status());
  const Type& x = ctx.input_type(0);
  const Type& grid = ctx.input_type(1);
  if (!x.is_tensor()) return absl::OkStatus();
  if (DTypeIsNot(x, {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}))
    return ctx.Error("X must be float, got ", DTypeName(x.dtype()));
  if (x.shape().ranked() && x.shape().rank() != 4) return ctx.Error("X has rank ", x.shape().rank(), ", expected 4");
  if (grid.is_tensor() && grid.shape().ranked()) {
    const Shape& g = grid.shape();
    if (g.rank() != 4) return ctx.Error("grid has rank ", g.rank(), ", expected 4 [N, H_out, W_out, 2]");
    if (g[3].is_static() && g[3].value() != 2) return ctx.Error("grid must end in a dim of 2");
  }
  Dim n = x.shape().ranked() ? x.shape()[0] : Dim();
  Dim c = x.shape().ranked() ? x.shape()[1] : Dim();
  bool g_ranked = grid.is_tensor() && grid.shape().ranked();
  if (n.is_unknown() && g_ranked) n = grid.shape()[0];
  Dim h = g_ranked ? grid.shape()[1] : Dim();
  Dim w = g_ranked ? grid.shape()[2] : Dim();
  ctx.set_output(0, Type::Tensor(x.dtype(), Shape({n, c, h, w})));
  return absl::OkStatus();
}

absl::Status GridSample(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(GridParams p, ReadGridParams(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  if (!IsFloat(x.dtype()) || !IsFloat(grid.dtype())) return ctx.Error("X and grid must be float");
  if (x.rank() != 4) return ctx.Error("X must be [N, C, H, W], got ", DimsText(x.dims()));
  if (grid.rank() != 4 || grid.dim(3) != 2 || grid.dim(0) != x.dim(0))
    return ctx.Error("grid must be [N, H_out, W_out, 2] with N = ", x.dim(0), ", got ", DimsText(grid.dims()));
  int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  int64_t Ho = grid.dim(1), Wo = grid.dim(2);
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, {N, C, Ho, Wo}));
  Tensor& y = ctx.AllocOutput(0, x.dtype(), {N, C, Ho, Wo});
  if (y.numel() == 0) return absl::OkStatus();
  std::vector<double> gs = ToDoubleVector(grid);
  DispatchFloat(x.dtype(), [&]<typename T>() {
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t oh = 0; oh < Ho; ++oh) {
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const double* g = &gs[((n * Ho + oh) * Wo + ow) * 2];
          double ix = GridUnnormalize(g[0], W, p.align);
          double iy = GridUnnormalize(g[1], H, p.align);
          for (int64_t c = 0; c < C; ++c) {
            const T* plane = src + (n * C + c) * H * W;
            auto at = [&](int64_t yy, int64_t xx) -> double {
              return yy >= 0 && yy < H && xx >= 0 && xx < W ? ToDouble(plane[yy * W + xx]) : 0.0;
            };
            double v = 0;
            if (p.mode == GridMode::kBicubic) {
              double fx = std::floor(ix), fy = std::floor(iy);
              double tx = ix - fx, ty = iy - fy;
              int64_t x0 = GridIndex(fx), y0 = GridIndex(fy);
              double wx[4], wy[4];
              for (int k = 0; k < 4; ++k) {
                wx[k] = CubicWeight(tx - (k - 1), -0.75);
                wy[k] = CubicWeight(ty - (k - 1), -0.75);
              }
              for (int a = 0; a < 4; ++a) {
                double row = 0;
                for (int b = 0; b < 4; ++b) {
                  // Padding applies to each tap position.
                  double px = GridPad(static_cast<double>(x0 - 1 + b), W, p);
                  double py = GridPad(static_cast<double>(y0 - 1 + a), H, p);
                  row += wx[b] * at(GridIndex(py), GridIndex(px));
                }
                v += wy[a] * row;
              }
            } else {
              double px = GridPad(ix, W, p), py = GridPad(iy, H, p);
              if (p.mode == GridMode::kNearest) {
                v = at(GridIndex(std::nearbyint(py)), GridIndex(std::nearbyint(px)));
              } else {
                double fx = std::floor(px), fy = std::floor(py);
                int64_t x0 = GridIndex(fx), y0 = GridIndex(fy);
                double tx = px - fx, ty = py - fy;
                v = (1 - ty) * ((1 - tx) * at(y0, x0) + tx * at(y0, x0 + 1)) +
                    ty * ((1 - tx) * at(y0 + 1, x0) + tx * at(y0 + 1, x0 + 1));
              }
            }
            dst[((n * C + c) * Ho + oh) * Wo + ow] = FromDouble<T>(v);
          }
        }
      }
    }
  });
  return absl::OkStatus();
}

OpCost GridSampleCost(const Node& n) {
  OpCost c;
  Value* y = n.output(0);
  int64_t out = y->type().is_tensor() ? y->type().shape().NumElements() : -1;
  if (out > 0) {
    std::string mode = n.GetString("mode", "bilinear");
    double taps = mode == "nearest" ? 1 : mode == "bicubic" ? 16 : 4;
    c.flops = static_cast<double>(out) * taps * 2;
    c.bytes_written = static_cast<double>(out) * DTypeSize(y->type().dtype());
    c.bytes_read = static_cast<double>(out) * taps * DTypeSize(y->type().dtype());
  }
  return c;
}

//===--- Optimizers (ai.onnx.preview.training) ----------------------------===//

// Inputs (R, T, groups x N tensors); outputs (outs x N tensors), each output
// group typed like the matching input group starting with X.
absl::StatusOr<int64_t> OptimizerCount(int num_inputs, int num_outputs, int groups, int outs) {
  int vars = num_inputs - 2;
  if (vars <= 0 || vars % groups != 0 || num_outputs != vars / groups * outs)
    return InvalidArgument("expects 2 + ", groups, "N inputs and ", outs, "N outputs, got ", num_inputs,
                           " inputs and ", num_outputs, " outputs");
  return vars / groups;
}

template <int kGroups, int kOuts>
absl::Status InferOptimizer(InferContext& ctx) {
  auto count = OptimizerCount(ctx.num_inputs(), ctx.num_outputs(), kGroups, kOuts);
  if (!count.ok()) return ctx.Error(count.status().message());
  int64_t n = *count;
  const Type& r = ctx.input_type(0);
  if (DTypeIsNot(r, {DType::kF32, DType::kF64})) return ctx.Error("R must be f32 or f64, got ", DTypeName(r.dtype()));
  if (DTypeIsNot(ctx.input_type(1), {DType::kI64})) return ctx.Error("T must be i64");
  // Output group o mirrors input group: X for o = 0, the state groups after G.
  for (int o = 0; o < kOuts; ++o) {
    int group = o == 0 ? 0 : o + 1;
    for (int64_t i = 0; i < n; ++i) ctx.set_output(o * n + i, ctx.input_type(2 + group * n + i));
  }
  return absl::OkStatus();
}

struct OptimizerArgs {
  double r = 0;
  int64_t t = 0;
  int64_t n = 0;
};

template <int kGroups, int kOuts>
absl::StatusOr<OptimizerArgs> ReadOptimizerArgs(KernelContext& ctx) {
  auto count = OptimizerCount(ctx.num_inputs(), ctx.num_outputs(), kGroups, kOuts);
  if (!count.ok()) return ctx.Error(count.status().message());
  OptimizerArgs a;
  a.n = *count;
  KILN_ASSIGN_OR_RETURN(a.r, ScalarFloat(ctx, ctx.input(0), "R"));
  KILN_ASSIGN_OR_RETURN(a.t, ScalarInt(ctx, ctx.input(1), "T"));
  for (int64_t i = 0; i < a.n; ++i) {
    const Tensor& x = ctx.input(2 + i);
    if (!IsFloat(x.dtype())) return ctx.Error("optimized tensor ", i, " must be float, got ", DTypeName(x.dtype()));
    for (int g = 1; g < kGroups; ++g) {
      const Tensor& o = ctx.input(2 + g * a.n + i);
      if (o.dtype() != x.dtype() || o.dims() != x.dims())
        return ctx.Error("input ", 2 + g * a.n + i, " is ", DTypeName(o.dtype()), DimsText(o.dims()),
                         " but the tensor it belongs to is ", DTypeName(x.dtype()), DimsText(x.dims()));
    }
  }
  return a;
}

// Runs `step(x, g, state..., outputs...)` elementwise in double for every
// optimized tensor; state and output pointers are passed as arrays.
template <int kGroups, int kOuts, typename F>
absl::Status RunOptimizer(KernelContext& ctx, const OptimizerArgs& a, F step) {
  for (int64_t i = 0; i < a.n; ++i) {
    const Tensor& x = ctx.input(2 + i);
    for (int o = 0; o < kOuts; ++o) ctx.AllocOutput(o * a.n + i, x.dtype(), x.dims());
    DispatchFloat(x.dtype(), [&]<typename T>() {
      std::array<const T*, kGroups> in;
      for (int g = 0; g < kGroups; ++g) in[g] = ctx.input(2 + g * a.n + i).template data<T>();
      std::array<T*, kOuts> out;
      for (int o = 0; o < kOuts; ++o) out[o] = ctx.output(o * a.n + i).template data<T>();
      std::array<double, kGroups> v;
      std::array<double, kOuts> r;
      for (int64_t e = 0; e < x.numel(); ++e) {
        for (int g = 0; g < kGroups; ++g) v[g] = ToDouble(in[g][e]);
        step(v, r);
        for (int o = 0; o < kOuts; ++o) out[o][e] = FromDouble<T>(r[o]);
      }
    });
  }
  return absl::OkStatus();
}

absl::Status Adagrad(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(OptimizerArgs a, (ReadOptimizerArgs<3, 2>(ctx)));
  const Node& n = ctx.node();
  double norm = n.GetFloat("norm_coefficient", 0.f), eps = n.GetFloat("epsilon", 1e-6f);
  double decay = n.GetFloat("decay_factor", 0.f);
  double r = a.r / (1 + static_cast<double>(a.t) * decay);
  return RunOptimizer<3, 2>(ctx, a, [&](const std::array<double, 3>& v, std::array<double, 2>& out) {
    double x = v[0], g = norm * v[0] + v[1];
    double h = v[2] + g * g;
    out[0] = x - r * g / (std::sqrt(h) + eps);
    out[1] = h;
  });
}

absl::Status Adam(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(OptimizerArgs a, (ReadOptimizerArgs<4, 3>(ctx)));
  const Node& n = ctx.node();
  double norm = n.GetFloat("norm_coefficient", 0.f), post = n.GetFloat("norm_coefficient_post", 0.f);
  double alpha = n.GetFloat("alpha", 0.9f), beta = n.GetFloat("beta", 0.999f), eps = n.GetFloat("epsilon", 1e-6f);
  double t = static_cast<double>(a.t);
  double r = a.t > 0 ? a.r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : a.r;
  return RunOptimizer<4, 3>(ctx, a, [&](const std::array<double, 4>& v, std::array<double, 3>& out) {
    double x = v[0], g = norm * v[0] + v[1];
    double m = alpha * v[2] + (1 - alpha) * g;
    double h = beta * v[3] + (1 - beta) * g * g;
    double xn = x - r * m / (std::sqrt(h) + eps);
    out[0] = (1 - post) * xn;
    out[1] = m;
    out[2] = h;
  });
}

template <typename Ctx>
absl::StatusOr<bool> MomentumIsNesterov(const Ctx& ctx) {
  std::string mode = ctx.node().GetString("mode", "");
  if (mode != "standard" && mode != "nesterov")
    return ctx.Error("mode must be 'standard' or 'nesterov', got '", mode, "'");
  return mode == "nesterov";
}

absl::Status InferMomentum(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(MomentumIsNesterov(ctx).status());
  return InferOptimizer<3, 2>(ctx);
}

absl::Status Momentum(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(bool nesterov, MomentumIsNesterov(ctx));
  KILN_ASSIGN_OR_RETURN(OptimizerArgs a, (ReadOptimizerArgs<3, 2>(ctx)));
  const Node& n = ctx.node();
  double norm = n.GetFloat("norm_coefficient", 0.f), alpha = n.GetFloat("alpha", 0.f), beta = n.GetFloat("beta", 0.f);
  double b = a.t > 0 ? beta : 1.0;
  double r = a.r;
  return RunOptimizer<3, 2>(ctx, a, [&](const std::array<double, 3>& v, std::array<double, 2>& out) {
    double x = v[0], g = norm * v[0] + v[1];
    double m = alpha * v[2] + b * g;
    out[0] = nesterov ? x - r * (g + alpha * m) : x - r * m;
    out[1] = m;
  });
}

// Gradient needs automatic differentiation, which kiln does not do: it has
// inference (each output is typed like its x) but no kernel, so running it
// reports that the op has no reference kernel.
absl::Status InferGradient(InferContext& ctx) {
  const Node& n = ctx.node();
  const Attribute* xs = n.attr("xs");
  if (!xs || xs->kind() != AttrKind::kStrings) return ctx.Error("attribute 'xs' must be a list of names");
  if (static_cast<int>(xs->strings().size()) != ctx.num_outputs())
    return ctx.Error("xs names ", xs->strings().size(), " values but the node has ", ctx.num_outputs(), " outputs");
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    Value* v = n.owner() ? n.owner()->Lookup(xs->strings()[i]) : nullptr;
    if (v) ctx.set_output(i, v->type());
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterMiscOps(OpRegistry& r) {
  r.Register("Resize").Inputs(1, 4).Outputs(1).Class(OpClass::kDataMovement).Since(10)
      .Attr("mode", AttrKind::kString, "nearest")
      .Attr("coordinate_transformation_mode", AttrKind::kString, "half_pixel")
      .Attr("nearest_mode", AttrKind::kString, "round_prefer_floor")
      .Attr("cubic_coeff_a", AttrKind::kFloat, "-0.75")
      .Attr("exclude_outside", AttrKind::kInt, "0")
      .Attr("extrapolation_value", AttrKind::kFloat, "0.0")
      .Infer(InferResize).Kernel(Resize).Cost(ResizeCost).Upgrade(UpgradeResize);
  r.Register("Upsample").Inputs(1, 2).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("mode", AttrKind::kString, "nearest")
      .Attr("scales", AttrKind::kFloats, "(opset 7-8 only; upgraded)")
      .Attr("height_scale", AttrKind::kFloat, "(opset 1 only; upgraded)")
      .Attr("width_scale", AttrKind::kFloat, "(opset 1 only; upgraded)")
      .Infer(InferUpsample).Kernel(Upsample).Cost(ResizeCost).Upgrade(UpgradeUpsample);
  r.Register("TopK").Inputs(1, 2).Outputs(2).Class(OpClass::kOther)
      .Attr("axis", AttrKind::kInt, "-1")
      .Attr("largest", AttrKind::kInt, "1")
      .Attr("sorted", AttrKind::kInt, "1")
      .Attr("k", AttrKind::kInt, "(opset 1-9 only; upgraded)")
      .Infer(InferTopK).Kernel(TopK).Cost(TopKCost).Upgrade(UpgradeTopK);
  r.Register("NonMaxSuppression").Inputs(2, 5).Outputs(1).Class(OpClass::kOther).Since(10)
      .Attr("center_point_box", AttrKind::kInt, "0")
      .Infer(InferNonMaxSuppression).Kernel(NonMaxSuppression).Cost(NmsCost);
  r.Register("NonZero").Inputs(1).Outputs(1).Class(OpClass::kOther).Since(9)
      .Infer(InferNonZero).Kernel(NonZero);
  r.Register("Unique").Inputs(1).Outputs(1, 4).Class(OpClass::kOther).Since(11)
      .Attr("axis", AttrKind::kInt, "(none: flatten)")
      .Attr("sorted", AttrKind::kInt, "1")
      .Infer(InferUnique).Kernel(Unique);
  r.Register("QuantizeLinear").Inputs(2, 3).Outputs(1).Class(OpClass::kElementwise).Since(10)
      .Attr("axis", AttrKind::kInt, "1")
      .Infer(InferQuantizeLinear).Kernel(QuantizeLinear);
  r.Register("DequantizeLinear").Inputs(2, 3).Outputs(1).Class(OpClass::kElementwise).Since(10)
      .Attr("axis", AttrKind::kInt, "1")
      .Infer(InferDequantizeLinear).Kernel(DequantizeLinear);
  r.Register("DynamicQuantizeLinear").Inputs(1).Outputs(3).Class(OpClass::kOther).Since(11)
      .Infer(InferDynamicQuantizeLinear).Kernel(DynamicQuantizeLinear);
  r.Register("StringNormalizer").Inputs(1).Outputs(1).Class(OpClass::kOther).Since(10)
      .Attr("case_change_action", AttrKind::kString, "NONE")
      .Attr("is_case_sensitive", AttrKind::kInt, "0")
      .Attr("locale", AttrKind::kString, "(ignored: built-in case mapping)")
      .Attr("stopwords", AttrKind::kStrings, "[]")
      .Infer(InferStringNormalizer).Kernel(StringNormalizer);
  r.Register("TfIdfVectorizer").Inputs(1).Outputs(1).Class(OpClass::kOther).Since(9)
      .RequiredAttr("max_gram_length", AttrKind::kInt)
      .RequiredAttr("min_gram_length", AttrKind::kInt)
      .RequiredAttr("max_skip_count", AttrKind::kInt)
      .RequiredAttr("mode", AttrKind::kString)
      .RequiredAttr("ngram_counts", AttrKind::kInts)
      .RequiredAttr("ngram_indexes", AttrKind::kInts)
      .Attr("pool_int64s", AttrKind::kInts, "(one of the pools)")
      .Attr("pool_strings", AttrKind::kStrings, "(one of the pools)")
      .Attr("weights", AttrKind::kFloats, "[1, ...]")
      .Infer(InferTfIdfVectorizer).Kernel(TfIdfVectorizer);
  r.Register("DFT").Inputs(1, 2).Outputs(1).Class(OpClass::kOther).Since(17)
      .Attr("axis", AttrKind::kInt, "1")
      .Attr("inverse", AttrKind::kInt, "0")
      .Attr("onesided", AttrKind::kInt, "0")
      .Infer(InferDFT).Kernel(DFT).Cost(DftCost);
  r.Register("STFT").Inputs(2, 4).Outputs(1).Class(OpClass::kOther).Since(17)
      .Attr("onesided", AttrKind::kInt, "1")
      .Infer(InferSTFT).Kernel(STFT).Cost(DftCost);
  r.Register("MelWeightMatrix").Inputs(5).Outputs(1).Class(OpClass::kOther).Since(17)
      .Attr("output_datatype", AttrKind::kInt, "1 (f32)")
      .Infer(InferMelWeightMatrix).Kernel(MelWeightMatrix);
  r.Register("GridSample").Inputs(2).Outputs(1).Class(OpClass::kDataMovement).Since(16)
      .Attr("align_corners", AttrKind::kInt, "0")
      .Attr("mode", AttrKind::kString, "bilinear")
      .Attr("padding_mode", AttrKind::kString, "zeros")
      .Infer(InferGridSample).Kernel(GridSample).Cost(GridSampleCost);

  const std::string kTraining = "ai.onnx.preview.training";
  r.Register("Adagrad", kTraining).Inputs(3, -1).Outputs(1, -1).Class(OpClass::kElementwise)
      .Attr("decay_factor", AttrKind::kFloat, "0.0")
      .Attr("epsilon", AttrKind::kFloat, "1e-6")
      .Attr("norm_coefficient", AttrKind::kFloat, "0.0")
      .Infer(InferOptimizer<3, 2>).Kernel(Adagrad);
  r.Register("Adam", kTraining).Inputs(3, -1).Outputs(1, -1).Class(OpClass::kElementwise)
      .Attr("alpha", AttrKind::kFloat, "0.9")
      .Attr("beta", AttrKind::kFloat, "0.999")
      .Attr("epsilon", AttrKind::kFloat, "1e-6")
      .Attr("norm_coefficient", AttrKind::kFloat, "0.0")
      .Attr("norm_coefficient_post", AttrKind::kFloat, "0.0")
      .Infer(InferOptimizer<4, 3>).Kernel(Adam);
  r.Register("Momentum", kTraining).Inputs(3, -1).Outputs(1, -1).Class(OpClass::kElementwise)
      .RequiredAttr("alpha", AttrKind::kFloat)
      .RequiredAttr("beta", AttrKind::kFloat)
      .RequiredAttr("mode", AttrKind::kString)
      .RequiredAttr("norm_coefficient", AttrKind::kFloat)
      .Infer(InferMomentum).Kernel(Momentum);
  r.Register("Gradient", kTraining).Inputs(1, -1).Outputs(1, -1).Class(OpClass::kOther)
      .RequiredAttr("xs", AttrKind::kStrings)
      .RequiredAttr("y", AttrKind::kString)
      .Attr("zs", AttrKind::kStrings, "[]")
      .Infer(InferGradient);
}

}  // namespace kiln
