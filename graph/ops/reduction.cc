//===- reduction.cc - Reductions, arg-reductions, CumSum, Hardmax, losses -===//
//
// Reduce* (opset-17 forms: ReduceSum takes `axes` as an optional input, the
// others an `axes` attribute), ArgMax/ArgMin, CumSum, Hardmax, and the two
// loss ops NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
//
// Kernels compute in a small set of canonical element types to keep template
// instantiations few: f16/bf16/f32 become f32 (sums accumulate in double),
// f64 stays, signed integers become i64 and unsigned ones u64 (integer sums
// wrap like the original type does); the result is converted back once.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/support/status.h"

namespace kiln {

// Rewrites Softmax/LogSoftmax/Hardmax of opsets before 13, which coerce the
// input to 2-D at `axis`, into the opset-13 form (normalization.cc).
absl::Status UpgradeCoercedAxisOp(Graph& g, Node* node, int64_t opset);

namespace {

//===--- Helpers ----------------------------------------------------------===//

// The canonical computation dtype of a numeric dtype (see the file comment).
DType CanonicalDType(DType t) {
  switch (t) {
    case DType::kF16: case DType::kBF16: case DType::kF32: return DType::kF32;
    case DType::kF64: return DType::kF64;
    case DType::kI8: case DType::kI16: case DType::kI32: case DType::kI64: return DType::kI64;
    case DType::kU8: case DType::kU16: case DType::kU32: case DType::kU64: case DType::kBool:
      return DType::kU64;
    default: return DType::kUndefined;
  }
}

Tensor ToCanonical(const Tensor& t) {
  DType c = CanonicalDType(t.dtype());
  return c == t.dtype() ? t : CastTensor(t, c);
}

Tensor FromCanonical(const Tensor& t, DType to) { return t.dtype() == to ? t : CastTensor(t, to); }

// Instantiates f for the canonical types f32, f64, i64, u64.
template <typename F>
decltype(auto) DispatchCanonical(DType t, F&& f) {
  switch (t) {
    case DType::kF32: return f.template operator()<float>();
    case DType::kF64: return f.template operator()<double>();
    case DType::kI64: return f.template operator()<int64_t>();
    case DType::kU64: return f.template operator()<uint64_t>();
    default: DispatchFailure(t);
  }
}

template <typename T>
bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

bool IsNumericNonBool(DType t) { return IsNumeric(t) && t != DType::kBool; }

double NumelOf(const Value* v) {
  if (!v || !v->type().is_tensor()) return 0;
  int64_t n = v->type().shape().NumElements();
  return n > 0 ? static_cast<double>(n) : 0;
}

double BytesOf(const Value* v) {
  if (!v || !v->type().is_tensor()) return 0;
  return NumelOf(v) * static_cast<double>(DTypeSize(v->type().dtype()));
}

// Cost of an op that does `flops_per_input` operations per element of input 0.
OpCost PerInputCost(const Node& n, double flops_per_input) {
  OpCost c;
  c.flops = NumelOf(n.input(0)) * flops_per_input;
  for (Value* v : n.inputs()) c.bytes_read += BytesOf(v);
  for (Value* v : n.outputs()) c.bytes_written += BytesOf(v);
  return c;
}

absl::Status CheckTensorInput(InferContext& ctx, int i, bool* known) {
  *known = false;
  if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
  const Type& t = ctx.input_type(i);
  if (t.is_none()) return absl::OkStatus();
  if (!t.is_tensor()) return ctx.Error("input ", i, " must be a tensor, got ", t.ToString());
  *known = true;
  return absl::OkStatus();
}

// Errors unless the first `n` inputs are present (an omitted required input
// reaches the kernel as null).
absl::Status RequireInputs(const KernelContext& ctx, int n) {
  for (int i = 0; i < n; ++i)
    if (!ctx.has_input(i)) return ctx.Error("required input ", i, " is missing");
  return absl::OkStatus();
}

//===--- Reduce* ------------------------------------------------------------===//

enum class ReduceKind { kSum, kSumSquare, kL1, kL2, kLogSum, kLogSumExp, kMax, kMin, kMean, kProd };

// What one reduction does: for each input element (in order) the offset of
// its output element is found by `out_strides` (0 along reduced axes).
struct ReducePlan {
  Dims in_dims;
  Dims out_dims;     // as the op returns it (keepdims applied)
  Dims out_strides;  // aligned to in_dims
  int64_t out_numel = 0;
  int64_t count = 0;  // input elements per output element
  bool identity = false;
};

absl::StatusOr<ReducePlan> MakeReducePlan(const Dims& in, const std::vector<int64_t>& axes_in,
                                          bool keepdims, bool noop_empty) {
  ReducePlan p;
  p.in_dims = in;
  int rank = static_cast<int>(in.size());
  std::vector<bool> reduced(rank, false);
  if (axes_in.empty()) {
    if (noop_empty) {
      p.identity = true;
      p.out_dims = in;
      p.out_numel = NumElements(in);
      p.count = 1;
      return p;
    }
    std::fill(reduced.begin(), reduced.end(), true);
  } else {
    KILN_ASSIGN_OR_RETURN(std::vector<int> axes, NormalizeAxes(axes_in, rank));
    for (int a : axes) reduced[a] = true;
  }
  Dims keep(rank);
  p.count = 1;
  for (int i = 0; i < rank; ++i) {
    keep[i] = reduced[i] ? 1 : in[i];
    if (reduced[i]) p.count *= in[i];
    if (!reduced[i] || keepdims) p.out_dims.push_back(keep[i]);
  }
  Dims ks = StridesOf(keep);
  p.out_strides.resize(rank);
  for (int i = 0; i < rank; ++i) p.out_strides[i] = reduced[i] ? 0 : ks[i];
  p.out_numel = NumElements(keep);
  return p;
}

// Calls f(value, out_offset) for each input element in order.
template <typename T, typename F>
void WalkReduce(const ReducePlan& p, const T* in, F&& f) {
  ForEachBroadcast<1>(p.in_dims, std::array<Dims, 1>{p.out_strides},
                      [&](int64_t i, const std::array<int64_t, 1>& o) { f(in[i], o[0]); });
}

template <typename T>
Tensor ReduceCanonical(ReduceKind kind, const Tensor& x, const ReducePlan& p) {
  constexpr bool kInt = std::is_integral_v<T>;
  using Acc = std::conditional_t<kInt, uint64_t, double>;  // integers wrap
  Tensor y(DTypeOf<T>(), p.out_dims);
  T* out = y.data<T>();
  const T* in = x.data<T>();
  const int64_t n = p.out_numel;
  switch (kind) {
    case ReduceKind::kMax:
    case ReduceKind::kMin: {
      bool is_max = kind == ReduceKind::kMax;
      T init;
      if constexpr (kInt) init = is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
      else init = is_max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
      std::fill(out, out + n, init);
      if (is_max) {
        WalkReduce(p, in, [&](T v, int64_t o) {
          if (v > out[o] || IsNan(v)) out[o] = v;
        });
      } else {
        WalkReduce(p, in, [&](T v, int64_t o) {
          if (v < out[o] || IsNan(v)) out[o] = v;
        });
      }
      return y;
    }
    case ReduceKind::kSum:
    case ReduceKind::kSumSquare:
    case ReduceKind::kL1:
    case ReduceKind::kProd: {
      std::vector<Acc> acc(n, kind == ReduceKind::kProd ? Acc(1) : Acc(0));
      if (kind == ReduceKind::kSum) {
        WalkReduce(p, in, [&](T v, int64_t o) { acc[o] += static_cast<Acc>(v); });
      } else if (kind == ReduceKind::kSumSquare) {
        WalkReduce(p, in, [&](T v, int64_t o) { acc[o] += static_cast<Acc>(v) * static_cast<Acc>(v); });
      } else if (kind == ReduceKind::kL1) {
        WalkReduce(p, in, [&](T v, int64_t o) {
          if constexpr (kInt) acc[o] += v < 0 ? Acc(0) - static_cast<Acc>(v) : static_cast<Acc>(v);
          else acc[o] += std::fabs(static_cast<Acc>(v));
        });
      } else {
        WalkReduce(p, in, [&](T v, int64_t o) { acc[o] *= static_cast<Acc>(v); });
      }
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(acc[i]);
      return y;
    }
    case ReduceKind::kMean:
    case ReduceKind::kL2:
    case ReduceKind::kLogSum: {
      std::vector<double> acc(n, 0.0);
      if (kind == ReduceKind::kL2) {
        WalkReduce(p, in, [&](T v, int64_t o) {
          double d = static_cast<double>(v);
          acc[o] += d * d;
        });
      } else {
        WalkReduce(p, in, [&](T v, int64_t o) { acc[o] += static_cast<double>(v); });
      }
      double count = static_cast<double>(p.count);
      for (int64_t i = 0; i < n; ++i) {
        double r = kind == ReduceKind::kMean ? acc[i] / count
                   : kind == ReduceKind::kL2 ? std::sqrt(acc[i])
                                             : std::log(acc[i]);
        out[i] = FromDouble<T>(r);
      }
      return y;
    }
    case ReduceKind::kLogSumExp: {
      std::vector<double> mx(n, -std::numeric_limits<double>::infinity());
      WalkReduce(p, in, [&](T v, int64_t o) {
        double d = static_cast<double>(v);
        if (d > mx[o] || std::isnan(d)) mx[o] = d;
      });
      for (double& m : mx)
        if (std::isinf(m)) m = 0;  // all -inf (or some +inf): no shift needed
      std::vector<double> acc(n, 0.0);
      WalkReduce(p, in, [&](T v, int64_t o) { acc[o] += std::exp(static_cast<double>(v) - mx[o]); });
      for (int64_t i = 0; i < n; ++i) out[i] = FromDouble<T>(std::log(acc[i]) + mx[i]);
      return y;
    }
  }
  return y;
}

std::vector<int64_t> ReduceAxesAttr(const Node& n) { return n.GetInts("axes", {}); }

// Infers a reduction's output. `axes` is nullopt when it is not known.
absl::Status InferReduceWith(InferContext& ctx, std::optional<std::vector<int64_t>> axes,
                             int64_t num_axes_if_unknown, bool noop_empty) {
  bool known;
  KILN_RETURN_IF_ERROR(CheckTensorInput(ctx, 0, &known));
  if (!known) {
    ctx.set_output(0, Type());
    return absl::OkStatus();
  }
  const Type& x = ctx.input_type(0);
  if (x.dtype() != DType::kUndefined && !IsNumericNonBool(x.dtype()))
    return ctx.Error("input 0 has dtype ", DTypeName(x.dtype()), ", expected a numeric type");
  bool keepdims = ctx.node().GetInt("keepdims", 1) != 0;
  const Shape& s = x.shape();
  if (!s.ranked()) {
    if (axes && axes->empty() && noop_empty) ctx.set_output(0, x);
    else ctx.set_output(0, Type::Tensor(x.dtype(), Shape()));
    return absl::OkStatus();
  }
  int rank = s.rank();
  if (!axes) {
    if (keepdims) {
      DimVector dims;
      for (const Dim& d : s.dims()) dims.push_back(d.is_static() && d.value() == 1 ? Dim(1) : Dim());
      ctx.set_output(0, Type::Tensor(x.dtype(), Shape(std::move(dims))));
    } else if (num_axes_if_unknown > 0 && num_axes_if_unknown <= rank) {
      ctx.set_output(0, Type::Tensor(x.dtype(), Shape(DimVector(rank - num_axes_if_unknown))));
    } else {
      ctx.set_output(0, Type::Tensor(x.dtype(), Shape()));
    }
    return absl::OkStatus();
  }
  if (axes->empty() && noop_empty) {
    ctx.set_output(0, x);
    return absl::OkStatus();
  }
  std::vector<bool> reduced(rank, axes->empty());
  if (!axes->empty()) {
    auto norm = NormalizeAxes(*axes, rank);
    if (!norm.ok()) return ctx.Error(norm.status().message());
    for (int a : *norm) reduced[a] = true;
  }
  DimVector dims;
  for (int i = 0; i < rank; ++i) {
    if (!reduced[i]) dims.push_back(s[i]);
    else if (keepdims) dims.push_back(Dim(1));
  }
  ctx.set_output(0, Type::Tensor(x.dtype(), Shape(std::move(dims))));
  return absl::OkStatus();
}

absl::Status InferReduceAttr(InferContext& ctx) {
  return InferReduceWith(ctx, ReduceAxesAttr(ctx.node()), 0, false);
}

absl::Status InferReduceSum(InferContext& ctx) {
  bool noop = ctx.node().GetInt("noop_with_empty_axes", 0) != 0;
  if (!ctx.has_input(1)) return InferReduceWith(ctx, std::vector<int64_t>{}, 0, noop);
  const Type& at = ctx.input_type(1);
  if (at.is_tensor() && at.dtype() != DType::kUndefined && at.dtype() != DType::kI64)
    return ctx.Error("input 1 (axes) has dtype ", DTypeName(at.dtype()), ", expected i64");
  if (const Tensor* a = ctx.const_input(1)) return InferReduceWith(ctx, ToInt64Vector(*a), 0, noop);
  int64_t k = 0;
  if (at.is_tensor() && at.shape().ranked() && at.shape().rank() == 1 && at.shape()[0].is_static()) {
    k = at.shape()[0].value();
    if (k == 0) return InferReduceWith(ctx, std::vector<int64_t>{}, 0, noop);  // known to be empty
  }
  return InferReduceWith(ctx, std::nullopt, k, noop);
}

absl::Status RunReduce(KernelContext& ctx, ReduceKind kind, const std::vector<int64_t>& axes,
                       bool noop_empty) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const Tensor& x = ctx.input(0);
  if (!IsNumericNonBool(x.dtype()))
    return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a numeric type");
  bool keepdims = ctx.node().GetInt("keepdims", 1) != 0;
  auto plan = MakeReducePlan(x.dims(), axes, keepdims, noop_empty);
  if (!plan.ok()) return ctx.Error(plan.status().message());
  if (plan->identity) {
    ctx.set_output(0, x);
    return absl::OkStatus();
  }
  Tensor cx = ToCanonical(x);
  Tensor y = DispatchCanonical(cx.dtype(), [&]<typename T>() { return ReduceCanonical<T>(kind, cx, *plan); });
  ctx.set_output(0, FromCanonical(y, x.dtype()));
  return absl::OkStatus();
}

template <ReduceKind K>
absl::Status ReduceAttrKernel(KernelContext& ctx) {
  return RunReduce(ctx, K, ReduceAxesAttr(ctx.node()), false);
}

absl::Status ReduceSumKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  std::vector<int64_t> axes;
  if (ctx.has_input(1)) {
    const Tensor& a = ctx.input(1);
    if (!IsInteger(a.dtype())) return ctx.Error("axes must be an integer tensor, got ", DTypeName(a.dtype()));
    if (a.rank() > 1) return ctx.Error("axes must be 1-D, got rank ", a.rank());
    axes = ToInt64Vector(a);
  }
  return RunReduce(ctx, ReduceKind::kSum, axes, ctx.node().GetInt("noop_with_empty_axes", 0) != 0);
}

// ReduceSum before opset 13 takes `axes` as an attribute.
absl::Status UpgradeReduceSum(Graph& g, Node* node, int64_t opset) {
  if (opset >= 13) return absl::OkStatus();
  if (!node->has_attr("axes")) return absl::OkStatus();
  std::vector<int64_t> axes = node->GetInts("axes");
  node->RemoveAttr("axes");
  if (axes.empty()) return absl::OkStatus();
  Value* c = g.AddConstant(g.UniqueName("axes"),
                           Tensor::FromVector<int64_t>(axes, {static_cast<int64_t>(axes.size())}));
  if (node->num_inputs() < 2) node->AddInput(c);
  else node->SetInput(1, c);
  return absl::OkStatus();
}

OpCost ReduceCostSimple(const Node& n) { return PerInputCost(n, 1); }
OpCost ReduceCostSquare(const Node& n) { return PerInputCost(n, 2); }
OpCost ReduceCostExp(const Node& n) { return PerInputCost(n, 4); }

//===--- ArgMax / ArgMin ----------------------------------------------------===//

absl::Status InferArg(InferContext& ctx) {
  bool known;
  KILN_RETURN_IF_ERROR(CheckTensorInput(ctx, 0, &known));
  if (!known || !ctx.input_type(0).shape().ranked()) {
    if (known && ctx.input_type(0).dtype() != DType::kUndefined && !IsNumericNonBool(ctx.input_type(0).dtype()))
      return ctx.Error("input 0 has dtype ", DTypeName(ctx.input_type(0).dtype()), ", expected a numeric type");
    ctx.set_output(0, Type::Tensor(DType::kI64, Shape()));
    return absl::OkStatus();
  }
  const Type& x = ctx.input_type(0);
  if (x.dtype() != DType::kUndefined && !IsNumericNonBool(x.dtype()))
    return ctx.Error("input 0 has dtype ", DTypeName(x.dtype()), ", expected a numeric type");
  int rank = x.shape().rank();
  auto axis = NormalizeAxis(ctx.node().GetInt("axis", 0), rank);
  if (!axis.ok() || rank == 0) return ctx.Error("axis ", ctx.node().GetInt("axis", 0), " is out of range for rank ", rank);
  bool keepdims = ctx.node().GetInt("keepdims", 1) != 0;
  DimVector dims;
  for (int i = 0; i < rank; ++i) {
    if (i != *axis) dims.push_back(x.shape()[i]);
    else if (keepdims) dims.push_back(Dim(1));
  }
  ctx.set_output(0, Type::Tensor(DType::kI64, Shape(std::move(dims))));
  return absl::OkStatus();
}

// Splits dims around `axis` into outer x n x inner.
void SplitAtAxis(const Dims& d, int axis, int64_t* outer, int64_t* n, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int i = 0; i < axis; ++i) *outer *= d[i];
  *n = d[axis];
  for (size_t i = axis + 1; i < d.size(); ++i) *inner *= d[i];
}

// Index of the max (or min) along the middle axis of an outer x n x inner
// block, for each (outer, inner); NaN wins like numpy's argmax.
template <typename T>
void ArgReduce(const T* in, int64_t outer, int64_t n, int64_t inner, bool is_max, bool last, int64_t* out) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      const T* p = in + o * n * inner + j;
      int64_t best = 0;
      T bv = p[0];
      for (int64_t k = 1; k < n; ++k) {
        T v = p[k * inner];
        bool better;
        if (IsNan(bv)) better = last && IsNan(v);
        else if (IsNan(v)) better = true;
        else if (is_max) better = last ? v >= bv : v > bv;
        else better = last ? v <= bv : v < bv;
        if (better) {
          best = k;
          bv = v;
        }
      }
      out[o * inner + j] = best;
    }
  }
}

absl::Status ArgKernel(KernelContext& ctx, bool is_max) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const Tensor& x = ctx.input(0);
  if (!IsNumericNonBool(x.dtype()))
    return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a numeric type");
  auto axis = NormalizeAxis(ctx.node().GetInt("axis", 0), x.rank());
  if (!axis.ok() || x.rank() == 0) return ctx.Error("axis ", ctx.node().GetInt("axis", 0), " is out of range for rank ", x.rank());
  if (x.dim(*axis) == 0) return ctx.Error("cannot take the arg-reduction of an empty axis");
  bool keepdims = ctx.node().GetInt("keepdims", 1) != 0;
  bool last = ctx.node().GetInt("select_last_index", 0) != 0;
  Dims od;
  for (int i = 0; i < x.rank(); ++i) {
    if (i != *axis) od.push_back(x.dim(i));
    else if (keepdims) od.push_back(1);
  }
  Tensor& y = ctx.AllocOutput(0, DType::kI64, od);
  int64_t outer, n, inner;
  SplitAtAxis(x.dims(), *axis, &outer, &n, &inner);
  Tensor cx = ToCanonical(x);
  DispatchCanonical(cx.dtype(), [&]<typename T>() {
    ArgReduce<T>(cx.data<T>(), outer, n, inner, is_max, last, y.data<int64_t>());
  });
  return absl::OkStatus();
}

absl::Status ArgMaxKernel(KernelContext& ctx) { return ArgKernel(ctx, true); }
absl::Status ArgMinKernel(KernelContext& ctx) { return ArgKernel(ctx, false); }

//===--- CumSum -------------------------------------------------------------===//

absl::StatusOr<int64_t> ScalarAxis(const Tensor& a) {
  if (!IsInteger(a.dtype())) return InvalidArgument("axis must be an integer tensor, got ", DTypeName(a.dtype()));
  if (a.numel() != 1 || a.rank() > 1) return InvalidArgument("axis must be a scalar");
  return a.GetInt(0);
}

absl::Status InferCumSum(InferContext& ctx) {
  bool known;
  KILN_RETURN_IF_ERROR(CheckTensorInput(ctx, 0, &known));
  if (!ctx.has_input(1)) return ctx.Error("input 1 (axis) is missing");
  if (!known) {
    ctx.set_output(0, Type());
    return absl::OkStatus();
  }
  const Type& x = ctx.input_type(0);
  if (x.dtype() != DType::kUndefined && !IsNumericNonBool(x.dtype()))
    return ctx.Error("input 0 has dtype ", DTypeName(x.dtype()), ", expected a numeric type");
  const Type& at = ctx.input_type(1);
  if (at.is_tensor() && at.dtype() != DType::kUndefined && at.dtype() != DType::kI32 && at.dtype() != DType::kI64)
    return ctx.Error("input 1 (axis) has dtype ", DTypeName(at.dtype()), ", expected i32 or i64");
  if (const Tensor* a = ctx.const_input(1); a && x.shape().ranked()) {
    auto ax = ScalarAxis(*a);
    if (!ax.ok()) return ctx.Error(ax.status().message());
    auto n = NormalizeAxis(*ax, x.shape().rank());
    if (!n.ok() || x.shape().rank() == 0) return ctx.Error("axis ", *ax, " is out of range for rank ", x.shape().rank());
  }
  ctx.set_output(0, x);
  return absl::OkStatus();
}

absl::Status CumSumKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const Tensor& x = ctx.input(0);
  if (!IsNumericNonBool(x.dtype()))
    return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a numeric type");
  auto ax = ScalarAxis(ctx.input(1));
  if (!ax.ok()) return ctx.Error(ax.status().message());
  auto axis = NormalizeAxis(*ax, x.rank());
  if (!axis.ok() || x.rank() == 0) return ctx.Error("axis ", *ax, " is out of range for rank ", x.rank());
  bool exclusive = ctx.node().GetInt("exclusive", 0) != 0;
  bool reverse = ctx.node().GetInt("reverse", 0) != 0;
  int64_t outer, n, inner;
  SplitAtAxis(x.dims(), *axis, &outer, &n, &inner);
  Tensor cx = ToCanonical(x);
  Tensor cy(cx.dtype(), cx.dims());
  DispatchCanonical(cx.dtype(), [&]<typename T>() {
    using Acc = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;
    const T* in = cx.data<T>();
    T* out = cy.data<T>();
    std::vector<Acc> acc(inner);
    for (int64_t o = 0; o < outer; ++o) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      const T* pi = in + o * n * inner;
      T* po = out + o * n * inner;
      for (int64_t s = 0; s < n; ++s) {
        int64_t k = reverse ? n - 1 - s : s;
        const T* row = pi + k * inner;
        T* orow = po + k * inner;
        for (int64_t j = 0; j < inner; ++j) {
          if (exclusive) {
            orow[j] = static_cast<T>(acc[j]);
            acc[j] += static_cast<Acc>(row[j]);
          } else {
            acc[j] += static_cast<Acc>(row[j]);
            orow[j] = static_cast<T>(acc[j]);
          }
        }
      }
    }
  });
  ctx.set_output(0, FromCanonical(cy, x.dtype()));
  return absl::OkStatus();
}

//===--- Hardmax ------------------------------------------------------------===//

absl::Status InferHardmax(InferContext& ctx) {
  bool known;
  KILN_RETURN_IF_ERROR(CheckTensorInput(ctx, 0, &known));
  if (!known) {
    ctx.set_output(0, Type());
    return absl::OkStatus();
  }
  const Type& x = ctx.input_type(0);
  if (x.dtype() != DType::kUndefined && !IsFloat(x.dtype()))
    return ctx.Error("input 0 has dtype ", DTypeName(x.dtype()), ", expected a float type");
  if (x.shape().ranked()) {
    auto a = NormalizeAxis(ctx.node().GetInt("axis", -1), x.shape().rank());
    if (!a.ok() || x.shape().rank() == 0) return ctx.Error("axis ", ctx.node().GetInt("axis", -1), " is out of range for rank ", x.shape().rank());
  }
  ctx.set_output(0, x);
  return absl::OkStatus();
}

absl::Status HardmaxKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a float type");
  auto axis = NormalizeAxis(ctx.node().GetInt("axis", -1), x.rank());
  if (!axis.ok() || x.rank() == 0) return ctx.Error("axis ", ctx.node().GetInt("axis", -1), " is out of range for rank ", x.rank());
  int64_t outer, n, inner;
  SplitAtAxis(x.dims(), *axis, &outer, &n, &inner);
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  if (n == 0 || x.numel() == 0) return absl::OkStatus();
  std::vector<int64_t> idx(outer * inner);
  Tensor cx = ToCanonical(x);
  DispatchCanonical(cx.dtype(), [&]<typename T>() {
    ArgReduce<T>(cx.data<T>(), outer, n, inner, true, false, idx.data());
  });
  DispatchFloat(x.dtype(), [&]<typename T>() {
    T* out = y.data<T>();
    T one = static_cast<T>(1.0f);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) out[(o * n + idx[o * inner + j]) * inner + j] = one;
  });
  return absl::OkStatus();
}

//===--- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss ----------------===//

// Infers the loss output: target's shape for reduction "none", else a scalar.
absl::Status InferLossOutput(InferContext& ctx, int target_index) {
  bool known_x, known_t;
  KILN_RETURN_IF_ERROR(CheckTensorInput(ctx, 0, &known_x));
  KILN_RETURN_IF_ERROR(CheckTensorInput(ctx, target_index, &known_t));
  std::string reduction = ctx.node().GetString("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return ctx.Error("reduction must be 'none', 'sum' or 'mean', got '", reduction, "'");
  DType dt = known_x ? ctx.input_type(0).dtype() : DType::kUndefined;
  if (dt != DType::kUndefined && !IsFloat(dt))
    return ctx.Error("input 0 has dtype ", DTypeName(dt), ", expected a float type");
  if (known_t) {
    DType tt = ctx.input_type(target_index).dtype();
    if (tt != DType::kUndefined && tt != DType::kI32 && tt != DType::kI64)
      return ctx.Error("input ", target_index, " (target) has dtype ", DTypeName(tt), ", expected i32 or i64");
  }
  if (known_x && known_t) {
    const Shape& xs = ctx.input_type(0).shape();
    const Shape& ts = ctx.input_type(target_index).shape();
    if (xs.ranked() && xs.rank() < 2) return ctx.Error("input 0 has rank ", xs.rank(), ", expected at least 2");
    if (xs.ranked() && ts.ranked()) {
      if (ts.rank() != xs.rank() - 1)
        return ctx.Error("target has rank ", ts.rank(), ", expected ", xs.rank() - 1);
      for (int i = 0; i < ts.rank(); ++i) {
        const Dim& a = xs[i == 0 ? 0 : i + 1];
        const Dim& b = ts[i];
        if (a.is_static() && b.is_static() && a.value() != b.value())
          return ctx.Error("target dim ", i, " is ", b.value(), ", expected ", a.value());
      }
    }
  }
  if (ctx.has_input(target_index + 1) && known_x) {
    const Type& w = ctx.input_type(target_index + 1);
    if (w.is_tensor() && w.shape().ranked() && w.shape().rank() != 1)
      return ctx.Error("weight has rank ", w.shape().rank(), ", expected 1");
  }
  if (reduction == "none") {
    Shape s;
    if (known_t) s = ctx.input_type(target_index).shape();
    else if (known_x && ctx.input_type(0).shape().ranked()) {
      DimVector d = ctx.input_type(0).shape().dims();
      d.erase(d.begin() + 1);
      s = Shape(std::move(d));
    }
    ctx.set_output(0, Type::Tensor(dt, s));
  } else {
    ctx.set_output(0, Type::Tensor(dt, Shape::Scalar()));
  }
  return absl::OkStatus();
}

// The loss from log-probabilities `logp` (N x C x D, as doubles).
absl::Status ComputeNll(KernelContext& ctx, const std::vector<double>& logp, const Dims& xdims,
                        const Tensor& target, const Tensor* weight, DType out_dtype) {
  if (xdims.size() < 2) return ctx.Error("input has rank ", xdims.size(), ", expected at least 2");
  if (!IsInteger(target.dtype())) return ctx.Error("target must be an integer tensor");
  int64_t N = xdims[0], C = xdims[1];
  int64_t D = 1;
  for (size_t i = 2; i < xdims.size(); ++i) D *= xdims[i];
  Dims expect_t = xdims;
  expect_t.erase(expect_t.begin() + 1);
  if (target.dims() != expect_t) return ctx.Error("target shape does not match the input's N, d1, ... dims");
  std::vector<double> w;
  if (weight) {
    if (weight->rank() != 1 || weight->dim(0) != C)
      return ctx.Error("weight must be 1-D of size ", C);
    if (!IsFloat(weight->dtype())) return ctx.Error("weight must be a float tensor");
    w = ToDoubleVector(*weight);
  }
  const Node& node = ctx.node();
  bool has_ii = node.has_attr("ignore_index");
  int64_t ii = node.GetInt("ignore_index", 0);
  std::string reduction = node.GetString("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return ctx.Error("reduction must be 'none', 'sum' or 'mean', got '", reduction, "'");
  std::vector<int64_t> t = ToInt64Vector(target);
  std::vector<double> loss(N * D);
  double wsum = 0, lsum = 0;
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t d = 0; d < D; ++d) {
      int64_t c = t[i * D + d];
      double l = 0, wt = 0;
      if (!(has_ii && c == ii)) {
        if (c < 0 || c >= C) return ctx.Error("target value ", c, " is out of range [0, ", C, ")");
        wt = weight ? w[c] : 1.0;
        l = -logp[(i * C + c) * D + d] * wt;
      }
      loss[i * D + d] = l;
      lsum += l;
      wsum += wt;
    }
  }
  if (reduction == "none") {
    Tensor y(out_dtype, target.dims());
    DispatchFloat(out_dtype, [&]<typename T>() {
      T* p = y.data<T>();
      for (size_t k = 0; k < loss.size(); ++k) p[k] = FromDouble<T>(loss[k]);
    });
    ctx.set_output(0, y);
    return absl::OkStatus();
  }
  double r = lsum;
  if (reduction == "mean") {
    if (weight || has_ii) r = lsum / wsum;
    else r = lsum / static_cast<double>(N * D);
  }
  Tensor y(out_dtype, {});
  DispatchFloat(out_dtype, [&]<typename T>() { y.data<T>()[0] = FromDouble<T>(r); });
  ctx.set_output(0, y);
  return absl::OkStatus();
}

absl::Status NllKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a float type");
  return ComputeNll(ctx, ToDoubleVector(x), x.dims(), ctx.input(1), ctx.has_input(2) ? &ctx.input(2) : nullptr,
                    x.dtype());
}

absl::Status InferNll(InferContext& ctx) { return InferLossOutput(ctx, 1); }

absl::Status InferSce(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(InferLossOutput(ctx, 1));
  if (ctx.num_outputs() > 1) {
    if (ctx.input_type(0).is_tensor()) ctx.set_output(1, ctx.input_type(0));
    else ctx.set_output(1, Type());
  }
  return absl::OkStatus();
}

absl::Status SceKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a float type");
  if (x.rank() < 2) return ctx.Error("scores have rank ", x.rank(), ", expected at least 2");
  int64_t N = x.dim(0), C = x.dim(1);
  int64_t D = 1;
  for (int i = 2; i < x.rank(); ++i) D *= x.dim(i);
  std::vector<double> v = ToDoubleVector(x);
  // log_softmax over axis 1.
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t d = 0; d < D; ++d) {
      double* base = v.data() + i * C * D + d;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < C; ++c) mx = std::max(mx, base[c * D]);
      if (std::isinf(mx)) mx = 0;
      double s = 0;
      for (int64_t c = 0; c < C; ++c) s += std::exp(base[c * D] - mx);
      double ls = std::log(s) + mx;
      for (int64_t c = 0; c < C; ++c) base[c * D] -= ls;
    }
  }
  KILN_RETURN_IF_ERROR(ComputeNll(ctx, v, x.dims(), ctx.input(1), ctx.has_input(2) ? &ctx.input(2) : nullptr,
                                  x.dtype()));
  if (ctx.num_outputs() > 1) {
    Tensor lp(x.dtype(), x.dims());
    DispatchFloat(x.dtype(), [&]<typename T>() {
      T* p = lp.data<T>();
      for (size_t k = 0; k < v.size(); ++k) p[k] = FromDouble<T>(v[k]);
    });
    ctx.set_output(1, lp);
  }
  return absl::OkStatus();
}

// Losses: a gather, a multiply and a sum per target element (plus a
// log-softmax over the scores for SCE).
OpCost NllCost(const Node& n) {
  OpCost c = PerInputCost(n, 0);
  c.flops = 3 * NumelOf(n.input(1));
  return c;
}
OpCost SceCost(const Node& n) { return PerInputCost(n, 5.0); }

void RegisterReduce(OpRegistry& r, const char* name, KernelFn k, CostFn cost) {
  r.Register(name).Inputs(1).Outputs(1).Class(OpClass::kReduction)
      .Attr("axes", AttrKind::kInts, "[] (all axes)")
      .Attr("keepdims", AttrKind::kInt, "1")
      .Infer(InferReduceAttr).Kernel(k).Cost(cost);
}

}  // namespace

void RegisterReductionOps(OpRegistry& r) {
  RegisterReduce(r, "ReduceL1", ReduceAttrKernel<ReduceKind::kL1>, ReduceCostSimple);
  RegisterReduce(r, "ReduceL2", ReduceAttrKernel<ReduceKind::kL2>, ReduceCostSquare);
  RegisterReduce(r, "ReduceLogSum", ReduceAttrKernel<ReduceKind::kLogSum>, ReduceCostSimple);
  RegisterReduce(r, "ReduceLogSumExp", ReduceAttrKernel<ReduceKind::kLogSumExp>, ReduceCostExp);
  RegisterReduce(r, "ReduceMax", ReduceAttrKernel<ReduceKind::kMax>, ReduceCostSimple);
  RegisterReduce(r, "ReduceMean", ReduceAttrKernel<ReduceKind::kMean>, ReduceCostSimple);
  RegisterReduce(r, "ReduceMin", ReduceAttrKernel<ReduceKind::kMin>, ReduceCostSimple);
  RegisterReduce(r, "ReduceProd", ReduceAttrKernel<ReduceKind::kProd>, ReduceCostSimple);
  RegisterReduce(r, "ReduceSumSquare", ReduceAttrKernel<ReduceKind::kSumSquare>, ReduceCostSquare);
  r.Register("ReduceSum").Inputs(1, 2).Outputs(1).Class(OpClass::kReduction)
      .Attr("keepdims", AttrKind::kInt, "1")
      .Attr("noop_with_empty_axes", AttrKind::kInt, "0")
      .Infer(InferReduceSum).Kernel(ReduceSumKernel).Cost(ReduceCostSimple).Upgrade(UpgradeReduceSum);

  r.Register("ArgMax").Inputs(1).Outputs(1).Class(OpClass::kReduction)
      .Attr("axis", AttrKind::kInt, "0")
      .Attr("keepdims", AttrKind::kInt, "1")
      .Attr("select_last_index", AttrKind::kInt, "0")
      .Infer(InferArg).Kernel(ArgMaxKernel).Cost(ReduceCostSimple);
  r.Register("ArgMin").Inputs(1).Outputs(1).Class(OpClass::kReduction)
      .Attr("axis", AttrKind::kInt, "0")
      .Attr("keepdims", AttrKind::kInt, "1")
      .Attr("select_last_index", AttrKind::kInt, "0")
      .Infer(InferArg).Kernel(ArgMinKernel).Cost(ReduceCostSimple);

  r.Register("CumSum").Inputs(2).Outputs(1).Class(OpClass::kReduction).Since(11)
      .Attr("exclusive", AttrKind::kInt, "0")
      .Attr("reverse", AttrKind::kInt, "0")
      .Infer(InferCumSum).Kernel(CumSumKernel).Cost(ReduceCostSimple);

  r.Register("Hardmax").Inputs(1).Outputs(1).Class(OpClass::kReduction)
      .Attr("axis", AttrKind::kInt, "-1")
      .Infer(InferHardmax).Kernel(HardmaxKernel).Cost(ReduceCostSimple).Upgrade(UpgradeCoercedAxisOp);

  r.Register("NegativeLogLikelihoodLoss").Inputs(2, 3).Outputs(1).Class(OpClass::kReduction).Since(12)
      .Attr("ignore_index", AttrKind::kInt, "none")
      .Attr("reduction", AttrKind::kString, "mean")
      .Infer(InferNll).Kernel(NllKernel).Cost(NllCost);
  r.Register("SoftmaxCrossEntropyLoss").Inputs(2, 3).Outputs(1, 2).Class(OpClass::kReduction).Since(12)
      .Attr("ignore_index", AttrKind::kInt, "none")
      .Attr("reduction", AttrKind::kString, "mean")
      .Infer(InferSce).Kernel(SceKernel).Cost(SceCost);
}

}  // namespace kiln
