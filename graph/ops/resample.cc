//===- resample.cc - Resize, Upsample and GridSample ----------------------===//
//
// Resize and Upsample (upgraded to Resize) sample the input on a regular
// grid; GridSample samples it at the coordinates of a grid input. Both
// interpolate by nearest, linear or cubic taps.
//
// Interpolating kernels compute in double and round once on store.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/ops/operand_checks.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

//===--- Helpers ----------------------------------------------------------===//

// Stores a double into a numeric element: floats round once, integers round
// to nearest and saturate.
template <typename T>
inline T StoreRounded(double v) {
  if constexpr (kIsFloatLike<T>) return FromDouble<T>(v);
  else return FromDouble<T>(std::nearbyint(v));
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

}  // namespace

void RegisterResampleOps(OpRegistry& r) {
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
  r.Register("GridSample").Inputs(2).Outputs(1).Class(OpClass::kDataMovement).Since(16)
      .Attr("align_corners", AttrKind::kInt, "0")
      .Attr("mode", AttrKind::kString, "bilinear")
      .Attr("padding_mode", AttrKind::kString, "zeros")
      .Infer(InferGridSample).Kernel(GridSample).Cost(GridSampleCost);
}

}  // namespace kiln
