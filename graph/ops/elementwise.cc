//===- elementwise.cc - Elementwise operators -----------------------------===//
//
// Unary math, binary arithmetic with numpy broadcasting, logic and
// comparison, activations, variadic Max/Min/Sum/Mean, Where, Clip, Dropout,
// Identity, Cast and CastLike. Float math on f16/bf16 is computed in f32 and
// rounded once; integer arithmetic follows ONNX (and numpy) semantics:
// two's-complement wrap on overflow, Div truncates toward zero, Mod with
// fmod=0 takes the sign of the divisor.
//
// Upgraders bring opset 1-16 nodes to opset-17 form: `consumed_inputs` is
// dropped, legacy `broadcast`/`axis` broadcasting (opset < 7) becomes numpy
// broadcasting, per-channel PRelu slopes (opset < 7) are reshaped, Clip's
// min/max attributes (opset < 11) and Dropout's ratio (opset < 12) become
// inputs, and Cast-1's string `to` becomes a data type number.
//
//===----------------------------------------------------------------------===//
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <type_traits>

#include "absl/strings/str_join.h"
#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

//===--- Element types ----------------------------------------------------===//

// Computation type of a storage type: f16/bf16 compute in float.
template <typename T> struct ComputeType { using type = T; };
template <> struct ComputeType<Half> { using type = float; };
template <> struct ComputeType<BFloat16> { using type = float; };
template <typename T> using ComputeT = typename ComputeType<T>::type;

// Reads a stored element as its computation type (by reference when that is
// the stored type, so strings are not copied).
template <typename T>
inline decltype(auto) Load(const T& v) {
  if constexpr (kIsHalfLike<T>) return static_cast<float>(v);
  else return (v);
}

// Stores a computed value; f16/bf16 round to nearest even here, once.
template <typename T, typename C>
inline T Store(const C& v) {
  if constexpr (kIsHalfLike<T>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

// Integer arithmetic that wraps (two's complement) instead of overflowing.
template <typename C>
using WideUnsigned = std::conditional_t<sizeof(C) <= 4, uint32_t, uint64_t>;

template <typename C> inline C WrapAdd(C a, C b) {
  if constexpr (std::is_integral_v<C>) return static_cast<C>(WideUnsigned<C>(a) + WideUnsigned<C>(b));
  else return a + b;
}
template <typename C> inline C WrapSub(C a, C b) {
  if constexpr (std::is_integral_v<C>) return static_cast<C>(WideUnsigned<C>(a) - WideUnsigned<C>(b));
  else return a - b;
}
template <typename C> inline C WrapMul(C a, C b) {
  if constexpr (std::is_integral_v<C>) return static_cast<C>(WideUnsigned<C>(a) * WideUnsigned<C>(b));
  else return a * b;
}
template <typename C> inline C WrapNeg(C a) {
  if constexpr (std::is_integral_v<C>) return static_cast<C>(WideUnsigned<C>(0) - WideUnsigned<C>(a));
  else return -a;
}

//===--- Dtype sets -------------------------------------------------------===//

constexpr uint32_t Bit(DType t) { return 1u << static_cast<unsigned>(t); }
constexpr uint32_t kFloatSet = Bit(DType::kF16) | Bit(DType::kBF16) | Bit(DType::kF32) | Bit(DType::kF64);
constexpr uint32_t kSIntSet = Bit(DType::kI8) | Bit(DType::kI16) | Bit(DType::kI32) | Bit(DType::kI64);
constexpr uint32_t kUIntSet = Bit(DType::kU8) | Bit(DType::kU16) | Bit(DType::kU32) | Bit(DType::kU64);
constexpr uint32_t kIntSet = kSIntSet | kUIntSet;
constexpr uint32_t kBoolSet = Bit(DType::kBool);
constexpr uint32_t kStringSet = Bit(DType::kString);
constexpr uint32_t kNumSet = kFloatSet | kIntSet;       // numbers, not bool
constexpr uint32_t kSignedSet = kFloatSet | kSIntSet;   // numbers with a sign
constexpr uint32_t kAllNumSet = kNumSet | kBoolSet;     // numbers and bool
constexpr uint32_t kCastSet = kAllNumSet | kStringSet;  // what Cast converts
constexpr uint32_t kPowBaseSet = kFloatSet | Bit(DType::kI32) | Bit(DType::kI64);

inline bool InSet(DType t, uint32_t set) { return (Bit(t) & set) != 0; }

std::string SetText(uint32_t set) {
  if (set == kFloatSet) return "a float type (f16, bf16, f32, f64)";
  if (set == kBoolSet) return "bool";
  std::vector<std::string> names;
  for (int i = 1; i <= static_cast<int>(DType::kC128); ++i)
    if (set & (1u << i)) names.emplace_back(DTypeName(static_cast<DType>(i)));
  return absl::StrCat("one of ", absl::StrJoin(names, ", "));
}

// Calls f.template operator()<T>() for the C++ type of `t`; only the types
// of `Set` are instantiated. `t` must be in `Set` (kernels check first).
template <uint32_t Set, typename F>
void DispatchIn(DType t, F&& f) {
#define KILN_EW_CASE(DT, T)                                   \
  case DType::DT:                                             \
    if constexpr ((Set & Bit(DType::DT)) != 0) {              \
      f.template operator()<T>();                             \
      return;                                                 \
    }                                                         \
    break;
  switch (t) {
    KILN_EW_CASE(kF32, float)
    KILN_EW_CASE(kF64, double)
    KILN_EW_CASE(kF16, Half)
    KILN_EW_CASE(kBF16, BFloat16)
    KILN_EW_CASE(kI8, int8_t)
    KILN_EW_CASE(kI16, int16_t)
    KILN_EW_CASE(kI32, int32_t)
    KILN_EW_CASE(kI64, int64_t)
    KILN_EW_CASE(kU8, uint8_t)
    KILN_EW_CASE(kU16, uint16_t)
    KILN_EW_CASE(kU32, uint32_t)
    KILN_EW_CASE(kU64, uint64_t)
    KILN_EW_CASE(kBool, bool)
    KILN_EW_CASE(kString, std::string)
    default: break;
  }
#undef KILN_EW_CASE
  DispatchFailure(t);
}

absl::Status CheckInput(const KernelContext& ctx, int i, uint32_t set) {
  if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
  DType t = ctx.input(i).dtype();
  if (!InSet(t, set))
    return ctx.Error("input ", i, " has dtype ", DTypeName(t), ", expected ", SetText(set));
  return absl::OkStatus();
}

absl::Status CheckSameDType(const KernelContext& ctx, int i, int j) {
  if (ctx.input(i).dtype() != ctx.input(j).dtype())
    return ctx.Error("input ", j, " has dtype ", DTypeName(ctx.input(j).dtype()), ", expected ",
                     DTypeName(ctx.input(i).dtype()), " like input ", i);
  return absl::OkStatus();
}

//===--- Broadcast iteration ----------------------------------------------===//

// Output dims with size-1 dims dropped and adjacent dims merged where every
// input walks them contiguously; per-input strides over those dims.
template <size_t N>
struct RowPlan {
  Dims dims;
  std::array<Dims, N> strides;
};

template <size_t N>
RowPlan<N> MakeRowPlan(const Dims& out, const std::array<const Dims*, N>& ins) {
  std::array<Dims, N> st;
  for (size_t k = 0; k < N; ++k) st[k] = BroadcastStrides(*ins[k], out);
  RowPlan<N> p;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    if (!p.dims.empty()) {
      bool merge = true;
      for (size_t k = 0; k < N; ++k)
        if (p.strides[k].back() != st[k][d] * out[d]) merge = false;
      if (merge) {
        p.dims.back() *= out[d];
        for (size_t k = 0; k < N; ++k) p.strides[k].back() = st[k][d];
        continue;
      }
    }
    p.dims.push_back(out[d]);
    for (size_t k = 0; k < N; ++k) p.strides[k].push_back(st[k][d]);
  }
  if (p.dims.empty()) {
    p.dims.push_back(1);
    for (size_t k = 0; k < N; ++k) p.strides[k].push_back(0);
  }
  return p;
}

// Calls f(out_offset, in_offsets, count, inner_strides) once per row of the
// innermost (merged) dim; outer offsets advance incrementally.
template <size_t N, typename F>
void ForEachRow(const RowPlan<N>& p, F&& f) {
  int rank = static_cast<int>(p.dims.size());
  int64_t total = NumElements(p.dims);
  if (total == 0) return;
  int64_t n = p.dims[rank - 1];
  std::array<int64_t, N> inner;
  for (size_t k = 0; k < N; ++k) inner[k] = p.strides[k][rank - 1];
  std::array<int64_t, N> off{};
  std::vector<int64_t> idx(rank, 0);
  for (int64_t o = 0; o < total; o += n) {
    f(o, off, n, inner);
    for (int d = rank - 2; d >= 0; --d) {
      if (++idx[d] < p.dims[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += p.strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= p.strides[k][d] * (p.dims[d] - 1);
      idx[d] = 0;
    }
  }
}

// y = op(a, b) elementwise with broadcasting; y is allocated by the caller
// with the broadcast dims. `op` takes computation-type operands.
template <typename TO, typename TA, typename TB, typename Op>
void BroadcastBinary(const Tensor& a, const Tensor& b, Tensor& y, Op op) {
  RowPlan<2> plan = MakeRowPlan<2>(y.dims(), {&a.dims(), &b.dims()});
  const TA* pa = a.data<TA>();
  const TB* pb = b.data<TB>();
  TO* py = y.data<TO>();
  ForEachRow<2>(plan, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n,
                          const std::array<int64_t, 2>& s) {
    TO* out = py + o;
    const TA* x = pa + off[0];
    const TB* z = pb + off[1];
    if (s[0] == 1 && s[1] == 1) {
      for (int64_t k = 0; k < n; ++k) out[k] = Store<TO>(op(Load(x[k]), Load(z[k])));
    } else if (s[0] == 1 && s[1] == 0) {
      const auto zv = Load(z[0]);
      for (int64_t k = 0; k < n; ++k) out[k] = Store<TO>(op(Load(x[k]), zv));
    } else if (s[0] == 0 && s[1] == 1) {
      const auto xv = Load(x[0]);
      for (int64_t k = 0; k < n; ++k) out[k] = Store<TO>(op(xv, Load(z[k])));
    } else {
      for (int64_t k = 0; k < n; ++k) out[k] = Store<TO>(op(Load(x[k * s[0]]), Load(z[k * s[1]])));
    }
  });
}

// Output dims of a broadcast over every present input.
absl::StatusOr<Dims> BroadcastAll(const KernelContext& ctx, int first = 0) {
  Dims dims;
  bool any = false;
  for (int i = first; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (!any) {
      dims = ctx.input(i).dims();
      any = true;
      continue;
    }
    auto d = BroadcastDims(dims, ctx.input(i).dims());
    if (!d.ok()) return ctx.Error(d.status().message());
    dims = *std::move(d);
  }
  return dims;
}

//===--- Kernel skeletons -------------------------------------------------===//

// y = f(x) for every element; `Set` lists the accepted dtypes, `BoolOut`
// makes the output bool instead of the input dtype.
template <uint32_t Set, bool BoolOut = false, typename F>
absl::Status MapUnary(KernelContext& ctx, F f) {
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 0, Set));
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.AllocOutput(0, BoolOut ? DType::kBool : x.dtype(), x.dims());
  DispatchIn<Set>(x.dtype(), [&]<typename T>() {
    using TO = std::conditional_t<BoolOut, bool, T>;
    const T* in = x.data<T>();
    TO* out = y.data<TO>();
    int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = Store<TO>(f(Load(in[i])));
  });
  return absl::OkStatus();
}

// y = f(a, b) with broadcasting, a and b of one dtype in `Set`.
template <uint32_t Set, bool BoolOut = false, typename F>
absl::Status MapBinary(KernelContext& ctx, F f) {
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 0, Set));
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, Set));
  KILN_RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  auto dims = BroadcastDims(a.dims(), b.dims());
  if (!dims.ok()) return ctx.Error(dims.status().message());
  Tensor& y = ctx.AllocOutput(0, BoolOut ? DType::kBool : a.dtype(), *dims);
  DispatchIn<Set>(a.dtype(), [&]<typename T>() {
    using TO = std::conditional_t<BoolOut, bool, T>;
    BroadcastBinary<TO, T, T>(a, b, y, f);
  });
  return absl::OkStatus();
}

// Float-only unary math; `f` is called with float or double.
template <typename F>
absl::Status MapFloat(KernelContext& ctx, F f) {
  return MapUnary<kFloatSet>(ctx, f);
}

bool AnyZero(const Tensor& t) {
  bool zero = false;
  DispatchIn<kIntSet>(t.dtype(), [&]<typename T>() {
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (p[i] == 0) { zero = true; break; }
  });
  return zero;
}

//===--- Unary math -------------------------------------------------------===//

absl::Status Abs(KernelContext& ctx) {
  return MapUnary<kNumSet>(ctx, []<typename C>(C x) -> C {
    if constexpr (std::is_unsigned_v<C>) return x;
    else if constexpr (std::is_integral_v<C>) return x < 0 ? WrapNeg(x) : x;
    else return std::fabs(x);
  });
}
absl::Status Neg(KernelContext& ctx) {
  return MapUnary<kSignedSet>(ctx, []<typename C>(C x) -> C { return WrapNeg(x); });
}
absl::Status Sign(KernelContext& ctx) {
  return MapUnary<kNumSet>(ctx, []<typename C>(C x) -> C {
    if constexpr (std::is_unsigned_v<C>) return x > 0 ? 1 : 0;
    else if constexpr (std::is_integral_v<C>) return static_cast<C>((x > 0) - (x < 0));
    else return x > 0 ? C(1) : x < 0 ? C(-1) : x;  // 0 and NaN pass through
  });
}
absl::Status Reciprocal(KernelContext& ctx) {
  return MapFloat(ctx, []<typename C>(C x) -> C { return C(1) / x; });
}
absl::Status Sqrt(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::sqrt(x); }); }
absl::Status Exp(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::exp(x); }); }
absl::Status Log(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::log(x); }); }
absl::Status Ceil(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::ceil(x); }); }
absl::Status Floor(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::floor(x); }); }
// Round half to even: nearbyint under the default rounding mode.
absl::Status Round(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::nearbyint(x); }); }
absl::Status Sin(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::sin(x); }); }
absl::Status Cos(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::cos(x); }); }
absl::Status Tan(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::tan(x); }); }
absl::Status Asin(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::asin(x); }); }
absl::Status Acos(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::acos(x); }); }
absl::Status Atan(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::atan(x); }); }
absl::Status Sinh(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::sinh(x); }); }
absl::Status Cosh(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::cosh(x); }); }
absl::Status Tanh(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::tanh(x); }); }
absl::Status Asinh(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::asinh(x); }); }
absl::Status Acosh(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::acosh(x); }); }
absl::Status Atanh(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::atanh(x); }); }
absl::Status Erf(KernelContext& ctx) { return MapFloat(ctx, [](auto x) { return std::erf(x); }); }

absl::Status IsNaN(KernelContext& ctx) {
  return MapUnary<kFloatSet, true>(ctx, [](auto x) { return std::isnan(x); });
}
absl::Status IsInf(KernelContext& ctx) {
  bool pos = ctx.node().GetInt("detect_positive", 1) != 0;
  bool neg = ctx.node().GetInt("detect_negative", 1) != 0;
  return MapUnary<kFloatSet, true>(ctx, [pos, neg](auto x) {
    return std::isinf(x) && (x > 0 ? pos : neg);
  });
}

absl::Status Not(KernelContext& ctx) {
  return MapUnary<kBoolSet>(ctx, [](bool x) { return !x; });
}

//===--- Activations ------------------------------------------------------===//

absl::Status Relu(KernelContext& ctx) {
  return MapUnary<kSignedSet>(ctx, []<typename C>(C x) -> C { return x > 0 ? x : C(0); });
}
absl::Status Sigmoid(KernelContext& ctx) {
  return MapFloat(ctx, []<typename C>(C x) -> C {
    if (x >= 0) return C(1) / (C(1) + std::exp(-x));
    C e = std::exp(x);
    return e / (C(1) + e);
  });
}
absl::Status Softplus(KernelContext& ctx) {
  return MapFloat(ctx, []<typename C>(C x) -> C {
    return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  });
}
absl::Status Softsign(KernelContext& ctx) {
  return MapFloat(ctx, []<typename C>(C x) -> C { return x / (C(1) + std::fabs(x)); });
}
absl::Status LeakyRelu(KernelContext& ctx) {
  float alpha = ctx.node().GetFloat("alpha", 0.01f);
  return MapFloat(ctx, [alpha]<typename C>(C x) -> C { return x < 0 ? C(alpha) * x : x; });
}
absl::Status ThresholdedRelu(KernelContext& ctx) {
  float alpha = ctx.node().GetFloat("alpha", 1.0f);
  return MapFloat(ctx, [alpha]<typename C>(C x) -> C { return x > C(alpha) ? x : C(0); });
}
absl::Status Elu(KernelContext& ctx) {
  float alpha = ctx.node().GetFloat("alpha", 1.0f);
  return MapFloat(ctx, [alpha]<typename C>(C x) -> C { return x < 0 ? C(alpha) * std::expm1(x) : x; });
}
absl::Status Celu(KernelContext& ctx) {
  float alpha = ctx.node().GetFloat("alpha", 1.0f);
  if (alpha == 0) return ctx.Error("attribute 'alpha' must not be 0");
  return MapFloat(ctx, [alpha]<typename C>(C x) -> C {
    C a = C(alpha);
    return x > 0 ? x : a * std::expm1(x / a);
  });
}
constexpr float kSeluAlpha = 1.67326319217681884765625f;
constexpr float kSeluGamma = 1.05070102214813232421875f;
absl::Status Selu(KernelContext& ctx) {
  float alpha = ctx.node().GetFloat("alpha", kSeluAlpha);
  float gamma = ctx.node().GetFloat("gamma", kSeluGamma);
  return MapFloat(ctx, [alpha, gamma]<typename C>(C x) -> C {
    return x > 0 ? C(gamma) * x : C(gamma) * (C(alpha) * std::exp(x) - C(alpha));
  });
}
absl::Status HardSigmoid(KernelContext& ctx) {
  float alpha = ctx.node().GetFloat("alpha", 0.2f);
  float beta = ctx.node().GetFloat("beta", 0.5f);
  return MapFloat(ctx, [alpha, beta]<typename C>(C x) -> C {
    C v = C(alpha) * x + C(beta);
    return v < 0 ? C(0) : v > 1 ? C(1) : v;
  });
}
absl::Status HardSwish(KernelContext& ctx) {
  return MapFloat(ctx, []<typename C>(C x) -> C {
    C v = C(1.0 / 6.0) * x + C(0.5);
    return x * (v < 0 ? C(0) : v > 1 ? C(1) : v);
  });
}

absl::Status Shrink(KernelContext& ctx) {
  double bias = ctx.node().GetFloat("bias", 0.0f);
  double lambd = ctx.node().GetFloat("lambd", 0.5f);
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 0, kNumSet));
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  DispatchIn<kNumSet>(x.dtype(), [&]<typename T>() {
    // Integers compute in double; floats in their computation type.
    using C = std::conditional_t<std::is_integral_v<T>, double, ComputeT<T>>;
    const C b = static_cast<C>(bias), l = static_cast<C>(lambd);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      C v = static_cast<C>(Load(in[i]));
      C r = v < -l ? v + b : v > l ? v - b : C(0);
      if constexpr (std::is_integral_v<T>) out[i] = ConvertElement<T>(r);
      else out[i] = Store<T>(r);
    }
  });
  return absl::OkStatus();
}

//===--- Binary arithmetic ------------------------------------------------===//

absl::Status Add(KernelContext& ctx) {
  return MapBinary<kNumSet>(ctx, []<typename C>(C a, C b) -> C { return WrapAdd(a, b); });
}
absl::Status Sub(KernelContext& ctx) {
  return MapBinary<kNumSet>(ctx, []<typename C>(C a, C b) -> C { return WrapSub(a, b); });
}
absl::Status Mul(KernelContext& ctx) {
  return MapBinary<kNumSet>(ctx, []<typename C>(C a, C b) -> C { return WrapMul(a, b); });
}

absl::Status Div(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 0, kNumSet));
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, kNumSet));
  KILN_RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  if (IsInteger(ctx.input(1).dtype()) && AnyZero(ctx.input(1)))
    return ctx.Error("integer division by zero");
  return MapBinary<kNumSet>(ctx, []<typename C>(C a, C b) -> C {
    if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
      if (b == -1) return WrapNeg(a);  // INT_MIN / -1 wraps
    }
    return static_cast<C>(a / b);  // integers truncate toward zero
  });
}

absl::Status Mod(KernelContext& ctx) {
  int64_t fmod = ctx.node().GetInt("fmod", 0);
  if (fmod != 0 && fmod != 1) return ctx.Error("attribute 'fmod' must be 0 or 1, got ", fmod);
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 0, kNumSet));
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, kNumSet));
  KILN_RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  if (IsInteger(ctx.input(1).dtype()) && AnyZero(ctx.input(1)))
    return ctx.Error("integer modulo by zero");
  if (fmod == 1) {
    return MapBinary<kNumSet>(ctx, []<typename C>(C a, C b) -> C {
      if constexpr (std::is_floating_point_v<C>) return std::fmod(a, b);
      else if constexpr (std::is_signed_v<C>) return b == -1 ? C(0) : static_cast<C>(a % b);
      else return static_cast<C>(a % b);
    });
  }
  // fmod=0: the result takes the sign of the divisor (Python / numpy mod).
  return MapBinary<kNumSet>(ctx, []<typename C>(C a, C b) -> C {
    if constexpr (std::is_unsigned_v<C>) {
      return static_cast<C>(a % b);
    } else {
      C r;
      if constexpr (std::is_floating_point_v<C>) r = std::fmod(a, b);
      else r = b == -1 ? C(0) : static_cast<C>(a % b);
      if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
      return r;
    }
  });
}

// Integer power by squaring with wrapping products; negative exponents give
// the truncated reciprocal (0 unless the base is 1 or -1).
template <typename C>
C IntPow(C base, int64_t e) {
  if (e < 0) {
    if (base == 1) return 1;
    if constexpr (std::is_signed_v<C>) {
      if (base == -1) return (e & 1) ? C(-1) : C(1);
    }
    return 0;
  }
  C result = 1;
  while (e > 0) {
    if (e & 1) result = WrapMul(result, base);
    base = WrapMul(base, base);
    e >>= 1;
  }
  return result;
}

absl::Status Pow(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 0, kPowBaseSet));
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, kNumSet));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() == b.dtype()) {
    return MapBinary<kPowBaseSet>(ctx, []<typename C>(C x, C y) -> C {
      if constexpr (std::is_integral_v<C>) return IntPow(x, static_cast<int64_t>(y));
      else return std::pow(x, y);
    });
  }
  auto dims = BroadcastDims(a.dims(), b.dims());
  if (!dims.ok()) return ctx.Error(dims.status().message());
  Tensor& y = ctx.AllocOutput(0, a.dtype(), *dims);
  if (IsInteger(a.dtype()) && IsInteger(b.dtype())) {
    // Exponents are read as int64 (u64 values beyond int64 wrap).
    Tensor e = CastTensor(b, DType::kI64);
    DispatchIn<Bit(DType::kI32) | Bit(DType::kI64)>(a.dtype(), [&]<typename T>() {
      BroadcastBinary<T, T, int64_t>(a, e, y, [](T x, int64_t k) { return IntPow(x, k); });
    });
  } else {
    // Mixed types compute in double, as numpy does, and convert once.
    Tensor e = CastTensor(b, DType::kF64);
    DispatchIn<kPowBaseSet>(a.dtype(), [&]<typename T>() {
      BroadcastBinary<T, T, double>(a, e, y, [](auto x, double k) {
        return ConvertElement<T>(std::pow(static_cast<double>(x), k));
      });
    });
  }
  return absl::OkStatus();
}

absl::Status PRelu(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 0, kNumSet));
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, kNumSet));
  KILN_RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  auto dims = BroadcastDims(ctx.input(0).dims(), ctx.input(1).dims());
  if (!dims.ok() || *dims != ctx.input(0).dims())
    return ctx.Error("slope of shape [", absl::StrJoin(ctx.input(1).dims(), ","),
                     "] does not broadcast to input of shape [", absl::StrJoin(ctx.input(0).dims(), ","), "]");
  return MapBinary<kNumSet>(ctx, []<typename C>(C x, C s) -> C {
    if constexpr (std::is_unsigned_v<C>) return x;
    else return x < 0 ? WrapMul(s, x) : x;
  });
}

absl::Status BitShift(KernelContext& ctx) {
  std::string dir = ctx.node().GetString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    return ctx.Error("attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"", dir, "\"");
  // Shifts by the bit width or more give 0.
  if (dir == "LEFT") {
    return MapBinary<kUIntSet>(ctx, []<typename C>(C x, C s) -> C {
      return s >= sizeof(C) * 8 ? C(0) : static_cast<C>(WideUnsigned<C>(x) << s);
    });
  }
  return MapBinary<kUIntSet>(ctx, []<typename C>(C x, C s) -> C {
    return s >= sizeof(C) * 8 ? C(0) : static_cast<C>(x >> s);
  });
}

//===--- Logic and comparison ---------------------------------------------===//

absl::Status And(KernelContext& ctx) {
  return MapBinary<kBoolSet>(ctx, [](bool a, bool b) { return a && b; });
}
absl::Status Or(KernelContext& ctx) {
  return MapBinary<kBoolSet>(ctx, [](bool a, bool b) { return a || b; });
}
absl::Status Xor(KernelContext& ctx) {
  return MapBinary<kBoolSet>(ctx, [](bool a, bool b) { return a != b; });
}
absl::Status Equal(KernelContext& ctx) {
  return MapBinary<kCastSet, true>(ctx, [](const auto& a, const auto& b) { return a == b; });
}
absl::Status Greater(KernelContext& ctx) {
  return MapBinary<kNumSet, true>(ctx, [](auto a, auto b) { return a > b; });
}
absl::Status Less(KernelContext& ctx) {
  return MapBinary<kNumSet, true>(ctx, [](auto a, auto b) { return a < b; });
}
absl::Status GreaterOrEqual(KernelContext& ctx) {
  return MapBinary<kNumSet, true>(ctx, [](auto a, auto b) { return a >= b; });
}
absl::Status LessOrEqual(KernelContext& ctx) {
  return MapBinary<kNumSet, true>(ctx, [](auto a, auto b) { return a <= b; });
}

//===--- Variadic ---------------------------------------------------------===//

// y = fold(op, inputs...) with broadcasting, accumulated in the computation
// type; Mean divides by the input count before the single rounding.
template <uint32_t Set, typename Op>
absl::Status Variadic(KernelContext& ctx, Op op, bool mean) {
  if (ctx.num_inputs() == 0) return ctx.Error("expects at least one input");
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    KILN_RETURN_IF_ERROR(CheckInput(ctx, i, Set));
    if (i > 0) KILN_RETURN_IF_ERROR(CheckSameDType(ctx, 0, i));
  }
  KILN_ASSIGN_OR_RETURN(Dims dims, BroadcastAll(ctx));
  Tensor& y = ctx.AllocOutput(0, ctx.input(0).dtype(), dims);
  DispatchIn<Set>(y.dtype(), [&]<typename T>() {
    using C = ComputeT<T>;
    std::vector<C> buffer;
    C* acc;
    if constexpr (std::is_same_v<C, T>) {
      acc = y.data<T>();
    } else {
      buffer.resize(y.numel());
      acc = buffer.data();
    }
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& x = ctx.input(i);
      const T* px = x.data<T>();
      RowPlan<1> plan = MakeRowPlan<1>(dims, {&x.dims()});
      ForEachRow<1>(plan, [&](int64_t o, const std::array<int64_t, 1>& off, int64_t n,
                              const std::array<int64_t, 1>& s) {
        C* dst = acc + o;
        const T* src = px + off[0];
        int64_t st = s[0];
        if (i == 0) {
          for (int64_t k = 0; k < n; ++k) dst[k] = Load(src[k * st]);
        } else if (st == 1) {
          for (int64_t k = 0; k < n; ++k) dst[k] = op(dst[k], Load(src[k]));
        } else {
          for (int64_t k = 0; k < n; ++k) dst[k] = op(dst[k], Load(src[k * st]));
        }
      });
    }
    T* out = y.data<T>();
    int64_t n = y.numel();
    if constexpr (!std::is_integral_v<C>) {
      if (mean) {
        C count = static_cast<C>(ctx.num_inputs());
        for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] / count;
      }
    }
    if constexpr (!std::is_same_v<C, T>) {
      for (int64_t i = 0; i < n; ++i) out[i] = Store<T>(acc[i]);
    }
  });
  return absl::OkStatus();
}

// NaN propagates, as numpy's maximum/minimum do.
absl::Status Max(KernelContext& ctx) {
  return Variadic<kNumSet>(ctx, []<typename C>(C a, C b) -> C { return (a != a || a > b) ? a : b; }, false);
}
absl::Status Min(KernelContext& ctx) {
  return Variadic<kNumSet>(ctx, []<typename C>(C a, C b) -> C { return (a != a || a < b) ? a : b; }, false);
}
absl::Status Sum(KernelContext& ctx) {
  return Variadic<kFloatSet>(ctx, []<typename C>(C a, C b) -> C { return a + b; }, false);
}
absl::Status Mean(KernelContext& ctx) {
  return Variadic<kFloatSet>(ctx, []<typename C>(C a, C b) -> C { return a + b; }, true);
}

//===--- Where, Clip ------------------------------------------------------===//

absl::Status Where(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 0, kBoolSet));
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, kCastSet));
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 2, kCastSet));
  KILN_RETURN_IF_ERROR(CheckSameDType(ctx, 1, 2));
  KILN_ASSIGN_OR_RETURN(Dims dims, BroadcastAll(ctx));
  const Tensor& c = ctx.input(0);
  const Tensor& a = ctx.input(1);
  const Tensor& b = ctx.input(2);
  Tensor& y = ctx.AllocOutput(0, a.dtype(), dims);
  RowPlan<3> plan = MakeRowPlan<3>(dims, {&c.dims(), &a.dims(), &b.dims()});
  DispatchBySize(a.dtype(), [&]<typename T>() {
    const bool* pc = c.data<bool>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* py = y.data<T>();
    ForEachRow<3>(plan, [&](int64_t o, const std::array<int64_t, 3>& off, int64_t n,
                            const std::array<int64_t, 3>& s) {
      const bool* cc = pc + off[0];
      const T* aa = pa + off[1];
      const T* bb = pb + off[2];
      T* out = py + o;
      for (int64_t k = 0; k < n; ++k) out[k] = cc[k * s[0]] ? aa[k * s[1]] : bb[k * s[2]];
    });
  });
  return absl::OkStatus();
}

absl::Status Clip(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 0, kNumSet));
  const Tensor& x = ctx.input(0);
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) continue;
    KILN_RETURN_IF_ERROR(CheckSameDType(ctx, 0, i));
    if (ctx.input(i).numel() != 1)
      return ctx.Error("input ", i, " (", i == 1 ? "min" : "max", ") must hold one element, has ",
                       ctx.input(i).numel());
  }
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  DispatchIn<kNumSet>(x.dtype(), [&]<typename T>() {
    using C = ComputeT<T>;
    C lo, hi;
    if constexpr (std::is_integral_v<C>) {
      lo = std::numeric_limits<C>::lowest();
      hi = std::numeric_limits<C>::max();
    } else {
      lo = -std::numeric_limits<C>::infinity();
      hi = std::numeric_limits<C>::infinity();
    }
    if (ctx.has_input(1)) lo = Load(ctx.input(1).data<T>()[0]);
    if (ctx.has_input(2)) hi = Load(ctx.input(2).data<T>()[0]);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    // min > max gives max everywhere; NaN passes through.
    for (int64_t i = 0; i < x.numel(); ++i) {
      C v = Load(in[i]);
      v = v < lo ? lo : v;
      v = v > hi ? hi : v;
      out[i] = Store<T>(v);
    }
  });
  return absl::OkStatus();
}

//===--- Identity, Dropout ------------------------------------------------===//

absl::Status Identity(KernelContext& ctx) {
  if (!ctx.has_input(0)) return ctx.Error("input 0 is missing");
  ctx.set_output(0, ctx.input(0));
  return absl::OkStatus();
}

// Uniform doubles in [0, 1) from MT19937, the way numpy's legacy
// RandomState(seed).uniform() draws them, so seeded dropout matches numpy.
class NumpyUniform {
 public:
  explicit NumpyUniform(uint32_t seed) : gen_(seed) {}
  double Next() {
    uint32_t a = static_cast<uint32_t>(gen_()) >> 5;
    uint32_t b = static_cast<uint32_t>(gen_()) >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
  }

 private:
  std::mt19937 gen_;
};

absl::Status Dropout(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 0, kFloatSet));
  const Tensor& x = ctx.input(0);
  double ratio = 0.5;
  if (ctx.has_input(1)) {
    KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, kFloatSet));
    if (ctx.input(1).numel() != 1) return ctx.Error("input 1 (ratio) must hold one element");
    ratio = ctx.input(1).GetDouble(0);
  }
  bool training = false;
  if (ctx.has_input(2)) {
    KILN_RETURN_IF_ERROR(CheckInput(ctx, 2, kBoolSet));
    if (ctx.input(2).numel() != 1) return ctx.Error("input 2 (training_mode) must hold one element");
    training = ctx.input(2).data<bool>()[0];
  }
  if (!(ratio >= 0 && ratio < 1) && training)
    return ctx.Error("ratio must be in [0, 1), got ", ratio);
  if (!training || ratio == 0) {
    ctx.set_output(0, x);
    if (ctx.num_outputs() > 1) {
      Tensor& mask = ctx.AllocOutput(1, DType::kBool, x.dims());
      std::memset(mask.raw(), 1, mask.nbytes());
    }
    return absl::OkStatus();
  }
  // Training: keep an element when its uniform draw is >= ratio and scale
  // the kept ones by 1 / (1 - ratio). Without a seed the draw uses seed 0.
  int64_t seed = ctx.node().GetInt("seed", 0);
  NumpyUniform rng(static_cast<uint32_t>(seed));
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  Tensor mask(DType::kBool, x.dims());
  bool* m = mask.data<bool>();
  for (int64_t i = 0; i < x.numel(); ++i) m[i] = rng.Next() >= ratio;
  DispatchIn<kFloatSet>(x.dtype(), [&]<typename T>() {
    using C = ComputeT<T>;
    const C scale = C(1) - static_cast<C>(ratio);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = Store<T>(m[i] ? Load(in[i]) / scale : C(0));
  });
  if (ctx.num_outputs() > 1) ctx.set_output(1, mask);
  return absl::OkStatus();
}

//===--- Cast, CastLike ---------------------------------------------------===//

absl::Status CastTo(KernelContext& ctx, DType to) {
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 0, kCastSet));
  if (!InSet(to, kCastSet)) return ctx.Error("cannot cast to ", DTypeName(to));
  ctx.set_output(0, CastTensor(ctx.input(0), to));
  return absl::OkStatus();
}

absl::Status Cast(KernelContext& ctx) {
  auto dt = DTypeFromOnnx(ctx.node().GetInt("to", 0));
  if (!dt) return ctx.Error("attribute 'to' is not a known data type");
  return CastTo(ctx, *dt);
}

absl::Status CastLike(KernelContext& ctx) {
  if (!ctx.has_input(1)) return ctx.Error("input 1 is missing");
  return CastTo(ctx, ctx.input(1).dtype());
}

//===--- Inference --------------------------------------------------------===//

// The tensor type of input i, or null when unknown (absent, not inferred).
// A non-tensor input is an error.
absl::StatusOr<const Type*> TensorInput(const InferContext& ctx, int i) {
  if (!ctx.has_input(i) || ctx.input_type(i).is_none()) return nullptr;
  const Type& t = ctx.input_type(i);
  if (!t.is_tensor()) return ctx.Error("input ", i, " is ", t.ToString(), ", expected a tensor");
  return &t;
}

absl::Status CheckInputDType(const InferContext& ctx, int i, const Type* t, uint32_t set) {
  if (t && t->dtype() != DType::kUndefined && !InSet(t->dtype(), set))
    return ctx.Error("input ", i, " has dtype ", DTypeName(t->dtype()), ", expected ", SetText(set));
  return absl::OkStatus();
}

enum class OutKind { kSame, kBool };

// Broadcast shape of the present inputs in [first, last]; unranked when one
// of them has no known shape.
absl::StatusOr<Shape> InferBroadcastShape(const InferContext& ctx, int first, int last) {
  Shape shape;
  bool any = false;
  for (int i = first; i <= last && i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    KILN_ASSIGN_OR_RETURN(const Type* t, TensorInput(ctx, i));
    if (!t) return Shape();
    if (!any) {
      shape = t->shape();
      any = true;
      continue;
    }
    auto s = BroadcastShapes(shape, t->shape());
    if (!s.ok()) return ctx.Error(s.status().message());
    shape = *std::move(s);
  }
  return shape;
}

// The common dtype of the present inputs in [first, last], each in `set`;
// kUndefined when none is known.
absl::StatusOr<DType> InferCommonDType(const InferContext& ctx, int first, int last, uint32_t set) {
  DType dt = DType::kUndefined;
  int from = -1;
  for (int i = first; i <= last && i < ctx.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(const Type* t, TensorInput(ctx, i));
    if (!t || t->dtype() == DType::kUndefined) continue;
    KILN_RETURN_IF_ERROR(CheckInputDType(ctx, i, t, set));
    if (dt == DType::kUndefined) {
      dt = t->dtype();
      from = i;
    } else if (t->dtype() != dt) {
      return ctx.Error("input ", i, " has dtype ", DTypeName(t->dtype()), ", expected ", DTypeName(dt),
                       " like input ", from);
    }
  }
  return dt;
}

// Every input is a tensor of `Set`, all of one dtype; the output is their
// broadcast, of that dtype or bool.
template <uint32_t Set, OutKind Out>
absl::Status InferElementwise(InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(DType dt, InferCommonDType(ctx, 0, ctx.num_inputs() - 1, Set));
  KILN_ASSIGN_OR_RETURN(Shape shape, InferBroadcastShape(ctx, 0, ctx.num_inputs() - 1));
  DType out = Out == OutKind::kBool ? DType::kBool : dt;
  if (out != DType::kUndefined || shape.ranked()) ctx.set_output(0, Type::Tensor(out, shape));
  return absl::OkStatus();
}

absl::Status InferPow(InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Type* a, TensorInput(ctx, 0));
  KILN_ASSIGN_OR_RETURN(const Type* b, TensorInput(ctx, 1));
  KILN_RETURN_IF_ERROR(CheckInputDType(ctx, 0, a, kPowBaseSet));
  KILN_RETURN_IF_ERROR(CheckInputDType(ctx, 1, b, kNumSet));
  Shape shape;
  if (a && b) {
    auto s = BroadcastShapes(a->shape(), b->shape());
    if (!s.ok()) return ctx.Error(s.status().message());
    shape = *std::move(s);
  }
  if (a) ctx.set_output(0, Type::Tensor(a->dtype(), shape));
  return absl::OkStatus();
}

absl::Status InferPRelu(InferContext& ctx) {
  KILN_RETURN_IF_ERROR((InferElementwise<kNumSet, OutKind::kSame>(ctx)));
  KILN_ASSIGN_OR_RETURN(const Type* x, TensorInput(ctx, 0));
  KILN_ASSIGN_OR_RETURN(const Type* s, TensorInput(ctx, 1));
  if (x && s && x->shape().ranked() && s->shape().ranked()) {
    const Shape& xs = x->shape();
    const Shape& ss = s->shape();
    bool ok = ss.rank() <= xs.rank();
    for (int i = 0; ok && i < ss.rank(); ++i) {
      const Dim& d = ss[i];
      const Dim& xd = xs[i + xs.rank() - ss.rank()];
      if (d.is_static() && d.value() != 1 && xd.is_static() && d.value() != xd.value()) ok = false;
    }
    if (!ok)
      return ctx.Error("slope of shape ", ss.ToString(), " does not broadcast to input of shape ", xs.ToString());
  }
  if (x) ctx.set_output(0, *x);
  return absl::OkStatus();
}

absl::Status InferBitShift(InferContext& ctx) {
  std::string dir = ctx.node().GetString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    return ctx.Error("attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"", dir, "\"");
  return InferElementwise<kUIntSet, OutKind::kSame>(ctx);
}

absl::Status InferMod(InferContext& ctx) {
  int64_t fmod = ctx.node().GetInt("fmod", 0);
  if (fmod != 0 && fmod != 1) return ctx.Error("attribute 'fmod' must be 0 or 1, got ", fmod);
  return InferElementwise<kNumSet, OutKind::kSame>(ctx);
}

absl::Status InferWhere(InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Type* c, TensorInput(ctx, 0));
  KILN_RETURN_IF_ERROR(CheckInputDType(ctx, 0, c, kBoolSet));
  KILN_ASSIGN_OR_RETURN(DType dt, InferCommonDType(ctx, 1, 2, kCastSet));
  KILN_ASSIGN_OR_RETURN(Shape shape, InferBroadcastShape(ctx, 0, 2));
  if (dt != DType::kUndefined || shape.ranked()) ctx.set_output(0, Type::Tensor(dt, shape));
  return absl::OkStatus();
}

absl::Status CheckScalarInput(const InferContext& ctx, int i, const Type* t) {
  if (t && t->shape().is_static() && t->shape().NumElements() != 1)
    return ctx.Error("input ", i, " must hold one element, has shape ", t->shape().ToString());
  return absl::OkStatus();
}

absl::Status InferClip(InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Type* x, TensorInput(ctx, 0));
  KILN_RETURN_IF_ERROR(CheckInputDType(ctx, 0, x, kNumSet));
  for (int i = 1; i <= 2; ++i) {
    KILN_ASSIGN_OR_RETURN(const Type* b, TensorInput(ctx, i));
    KILN_RETURN_IF_ERROR(CheckScalarInput(ctx, i, b));
    if (x && b && x->dtype() != DType::kUndefined && b->dtype() != DType::kUndefined && b->dtype() != x->dtype())
      return ctx.Error("input ", i, " has dtype ", DTypeName(b->dtype()), ", expected ", DTypeName(x->dtype()),
                       " like input 0");
  }
  if (x) ctx.set_output(0, *x);
  return absl::OkStatus();
}

absl::Status InferDropout(InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Type* x, TensorInput(ctx, 0));
  KILN_ASSIGN_OR_RETURN(const Type* r, TensorInput(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Type* t, TensorInput(ctx, 2));
  KILN_RETURN_IF_ERROR(CheckInputDType(ctx, 0, x, kFloatSet));
  KILN_RETURN_IF_ERROR(CheckInputDType(ctx, 1, r, kFloatSet));
  KILN_RETURN_IF_ERROR(CheckInputDType(ctx, 2, t, kBoolSet));
  KILN_RETURN_IF_ERROR(CheckScalarInput(ctx, 1, r));
  KILN_RETURN_IF_ERROR(CheckScalarInput(ctx, 2, t));
  if (const Tensor* rv = ctx.const_input(1); rv && rv->numel() == 1 && IsFloat(rv->dtype())) {
    double ratio = rv->GetDouble(0);
    if (!(ratio >= 0 && ratio <= 1)) return ctx.Error("ratio must be in [0, 1], got ", ratio);
  }
  if (x) ctx.set_output(0, *x);
  if (ctx.num_outputs() > 1) ctx.set_output(1, Type::Tensor(DType::kBool, x ? x->shape() : Shape()));
  return absl::OkStatus();
}

absl::Status InferCastTo(InferContext& ctx, DType to) {
  KILN_ASSIGN_OR_RETURN(const Type* x, TensorInput(ctx, 0));
  KILN_RETURN_IF_ERROR(CheckInputDType(ctx, 0, x, kCastSet));
  if (!InSet(to, kCastSet)) return ctx.Error("cannot cast to ", DTypeName(to));
  ctx.set_output(0, Type::Tensor(to, x ? x->shape() : Shape()));
  return absl::OkStatus();
}

absl::Status InferCast(InferContext& ctx) {
  auto dt = DTypeFromOnnx(ctx.node().GetInt("to", 0));
  if (!dt) return ctx.Error("attribute 'to' is not a known data type");
  return InferCastTo(ctx, *dt);
}

absl::Status InferCastLike(InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Type* like, TensorInput(ctx, 1));
  if (!like || like->dtype() == DType::kUndefined) {
    KILN_ASSIGN_OR_RETURN(const Type* x, TensorInput(ctx, 0));
    KILN_RETURN_IF_ERROR(CheckInputDType(ctx, 0, x, kCastSet));
    if (x) ctx.set_output(0, Type::Tensor(DType::kUndefined, x->shape()));
    return absl::OkStatus();
  }
  return InferCastTo(ctx, like->dtype());
}

absl::Status InferCelu(InferContext& ctx) {
  if (ctx.node().GetFloat("alpha", 1.0f) == 0) return ctx.Error("attribute 'alpha' must not be 0");
  return InferElementwise<kFloatSet, OutKind::kSame>(ctx);
}

absl::Status InferIdentity(InferContext& ctx) {
  if (ctx.has_input(0)) ctx.set_output(0, ctx.input_type(0));
  return absl::OkStatus();
}

//===--- Cost -------------------------------------------------------------===//

double TypeBytes(const Value* v) {
  if (!v || !v->type().is_tensor()) return 0;
  int64_t n = v->type().shape().NumElements();
  return n > 0 ? static_cast<double>(n) * DTypeSize(v->type().dtype()) : 0;
}

double OutputElements(const Node& node) {
  if (node.num_outputs() == 0 || !node.output(0)->type().is_tensor()) return 0;
  int64_t n = node.output(0)->type().shape().NumElements();
  return n > 0 ? static_cast<double>(n) : 0;
}

// `Flops` operations per output element; every input and output is moved once.
template <int Flops>
OpCost PerElementCost(const Node& node) {
  OpCost c;
  for (Value* v : node.inputs()) c.bytes_read += TypeBytes(v);
  for (Value* v : node.outputs()) c.bytes_written += TypeBytes(v);
  c.flops = Flops * OutputElements(node);
  return c;
}

// Cast, CastLike, Identity, inference Dropout: a copy, no arithmetic;
// CastLike reads only the dtype of its second input.
OpCost CopyCost(const Node& node) {
  OpCost c;
  c.bytes_read = TypeBytes(node.input(0));
  for (Value* v : node.outputs()) c.bytes_written += TypeBytes(v);
  return c;
}

// Max/Min/Sum: one operation per output element per input beyond the first;
// Mean also divides.
template <int Extra>
OpCost VariadicCost(const Node& node) {
  OpCost c = PerElementCost<0>(node);
  c.flops = (node.num_inputs() - 1 + Extra) * OutputElements(node);
  return c;
}

//===--- Upgraders --------------------------------------------------------===//

// The type of `v` for an upgrader: its declared type, or, when that has no
// rank, the type inferred by running inference on its producers (whose
// types are recorded on the way).
const Type& UpgradeType(Value* v, int depth = 0) {
  const Type& t = v->type();
  if ((t.is_tensor() && t.shape().ranked()) || !v->producer() || depth > 256) return t;
  Node* p = v->producer();
  const OpDef* def = OpRegistry::Global().Find(*p);
  if (!def) return t;
  for (Value* in : p->inputs())
    if (in) UpgradeType(in, depth + 1);
  auto inferred = InferNode(*def, *p);
  if (!inferred.ok()) return t;
  for (int i = 0; i < p->num_outputs() && i < static_cast<int>(inferred->size()); ++i)
    if (p->output(i)->type().is_none() && !(*inferred)[i].is_none()) p->output(i)->set_type((*inferred)[i]);
  return v->type();
}

int KnownRank(Value* v) {
  const Type& t = UpgradeType(v);
  return t.is_tensor() && t.shape().ranked() ? t.shape().rank() : -1;
}

// Appends `count` unit dims to input `index` of `node`: the constant is
// reshaped when it is one, otherwise an Unsqueeze is inserted.
void AppendUnitDims(Node* node, int index, int count) {
  if (count <= 0) return;
  Graph& g = *node->owner();
  Value* v = node->input(index);
  int rank = KnownRank(v);
  if (v->constant_data()) {
    Dims dims = v->constant().dims();
    dims.insert(dims.end(), count, 1);
    Value* c = g.AddConstant(g.UniqueName(v->name()), v->constant().Reshaped(dims));
    node->SetInput(index, c);
    if (!v->has_uses() && v->owner() == &g) g.EraseValue(v);
    return;
  }
  std::vector<int64_t> axes;
  for (int i = 0; i < count; ++i) axes.push_back(rank + i);
  Value* axes_v = g.AddConstant(g.UniqueName("axes"), Tensor::FromVector<int64_t>(axes, {count}));
  Node* unsq = g.AddNode("Unsqueeze", {v, axes_v}, 1, "", node);
  const Type& t = v->type();
  if (t.is_tensor() && t.shape().ranked()) {
    DimVector dims = t.shape().dims();
    dims.insert(dims.end(), count, Dim(1));
    unsq->output(0)->set_type(Type::Tensor(t.dtype(), Shape(std::move(dims))));
  }
  node->SetInput(index, unsq->output(0));
}

absl::Status UpgradeDropConsumed(Graph& g, Node* node, int64_t opset) {
  node->RemoveAttr("consumed_inputs");
  return absl::OkStatus();
}

// Opset < 7 binary ops: `broadcast=1` broadcasts input 1 to input 0 from
// `axis` (or by suffix); numpy broadcasting does the same once input 1 has
// unit dims appended up to input 0's rank.
absl::Status UpgradeLegacyBroadcast(Graph& g, Node* node, int64_t opset) {
  node->RemoveAttr("consumed_inputs");
  bool broadcast = node->GetInt("broadcast", 0) != 0;
  bool has_axis = node->has_attr("axis");
  int64_t axis = node->GetInt("axis", 0);
  node->RemoveAttr("broadcast");
  node->RemoveAttr("axis");
  if (!broadcast || !has_axis || node->num_inputs() < 2 || !node->input(0) || !node->input(1))
    return absl::OkStatus();
  int ra = KnownRank(node->input(0));
  int rb = KnownRank(node->input(1));
  if (ra < 0 || rb < 0)
    return InvalidArgument("node '", node->name(), "' (", node->op(),
                           "): legacy broadcast with axis needs the ranks of both inputs, which are unknown");
  if (axis < 0) axis += ra;
  int count = ra - static_cast<int>(axis) - rb;
  if (axis < 0 || count < 0)
    return InvalidArgument("node '", node->name(), "' (", node->op(), "): input 1 of rank ", rb,
                           " does not fit at axis ", axis, " of input 0 of rank ", ra);
  AppendUnitDims(node, 1, count);
  return absl::OkStatus();
}

// Opset < 7 PRelu: a 1-D slope is per channel (axis 1).
absl::Status UpgradePRelu(Graph& g, Node* node, int64_t opset) {
  node->RemoveAttr("consumed_inputs");
  if (opset >= 7 || node->num_inputs() < 2 || !node->input(1)) return absl::OkStatus();
  int rx = KnownRank(node->input(0));
  const Type& st = UpgradeType(node->input(1));
  if (rx <= 2 || !st.is_tensor() || !st.shape().ranked() || st.shape().rank() != 1) return absl::OkStatus();
  const Dim& c = st.shape()[0];
  if (c.is_static() && c.value() == 1) return absl::OkStatus();
  AppendUnitDims(node, 1, rx - 2);
  return absl::OkStatus();
}

// Opset < 11 Clip: min/max attributes become inputs of the input's dtype.
absl::Status UpgradeClip(Graph& g, Node* node, int64_t opset) {
  node->RemoveAttr("consumed_inputs");
  if (!node->has_attr("min") && !node->has_attr("max")) return absl::OkStatus();
  Graph& owner = *node->owner();
  DType dt = DType::kF32;
  const Type& xt = UpgradeType(node->input(0));
  if (xt.is_tensor() && IsFloat(xt.dtype())) dt = xt.dtype();
  const char* names[2] = {"min", "max"};
  for (int i = 0; i < 2; ++i) {
    if (!node->has_attr(names[i])) continue;
    float v = node->GetFloat(names[i], 0);
    Tensor t = CastTensor(Tensor::Scalar<float>(v), dt);
    node->SetInput(i + 1, owner.AddConstant(owner.UniqueName(names[i]), t));
    node->RemoveAttr(names[i]);
  }
  return absl::OkStatus();
}

// Opset < 12 Dropout: `ratio` becomes input 1 (training_mode stays absent:
// inference); is_test goes. Opset < 10 returned the mask in the input dtype,
// so a Cast restores it.
absl::Status UpgradeDropout(Graph& g, Node* node, int64_t opset) {
  node->RemoveAttr("consumed_inputs");
  node->RemoveAttr("is_test");
  Graph& owner = *node->owner();
  if (node->has_attr("ratio")) {
    float ratio = node->GetFloat("ratio", 0.5f);
    node->RemoveAttr("ratio");
    if (node->num_inputs() < 2 || !node->input(1))
      node->SetInput(1, owner.AddConstant(owner.UniqueName("ratio"), Tensor::Scalar<float>(ratio)));
  }
  if (opset >= 10 || node->num_outputs() < 2) return absl::OkStatus();
  // A mask already used only by Casts needs nothing (a Cast of the bool mask
  // gives what a Cast of the old 0/1 mask gave); this also keeps the rewrite
  // from applying twice.
  bool only_cast = node->output(1)->has_uses();
  for (const Use& u : node->output(1)->uses())
    if (!u.user || u.user->op() != "Cast") only_cast = false;
  if (only_cast) return absl::OkStatus();
  const Type& xt = UpgradeType(node->input(0));
  DType dt = xt.is_tensor() && xt.dtype() != DType::kUndefined ? xt.dtype() : DType::kF32;
  std::vector<Value*> inputs(node->inputs().begin(), node->inputs().end());
  Value* y = node->output(0);
  Value* m = node->output(1);
  Type y_type = y->type(), m_type = m->type();
  if (!y->has_uses() && !m->has_uses()) {
    // While importing, later nodes find these outputs by name: the
    // replacement keeps the names.
    std::string y_name = y->name(), m_name = m->name();
    std::vector<Node*> list = owner.NodeList();
    Node* next = nullptr;
    for (size_t i = 0; i + 1 < list.size(); ++i)
      if (list[i] == node) next = list[i + 1];
    std::map<std::string, Attribute> attrs;
    for (const auto& [name, attr] : node->attrs()) attrs[name] = attr.Clone(&owner);
    owner.EraseNode(node);
    Node* d = owner.AddNode("Dropout", inputs, {y_name, owner.UniqueName(m_name)}, "", next);
    for (auto& [name, attr] : attrs) d->SetAttr(name, std::move(attr));
    Node* cast = owner.AddNode("Cast", {d->output(1)}, {m_name}, "", next);
    cast->SetAttr("to", Attribute::Int(DTypeToOnnx(dt)));
    d->output(0)->set_type(y_type);
    cast->output(0)->set_type(m_type);
    return absl::OkStatus();
  }
  Node* d = owner.AddNode("Dropout", inputs, 2, "", node);
  for (const auto& [name, attr] : node->attrs()) d->SetAttr(name, attr.Clone(&owner));
  Node* cast = owner.AddNode("Cast", {d->output(1)}, 1, "", node);
  cast->SetAttr("to", Attribute::Int(DTypeToOnnx(dt)));
  d->output(0)->set_type(y_type);
  cast->output(0)->set_type(m_type);
  y->ReplaceAllUsesWith(d->output(0));
  m->ReplaceAllUsesWith(cast->output(0));
  owner.EraseNode(node);
  return absl::OkStatus();
}

// Cast-1 named the target type with a string.
absl::Status UpgradeCast(Graph& g, Node* node, int64_t opset) {
  const Attribute* to = node->attr("to");
  if (!to || to->kind() != AttrKind::kString) return absl::OkStatus();
  static const char* const kNames[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16",
                                       "INT32", "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE",
                                       "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  std::string name = to->s();
  for (int i = 1; i < static_cast<int>(std::size(kNames)); ++i) {
    if (name == kNames[i]) {
      node->SetAttr("to", Attribute::Int(i));
      return absl::OkStatus();
    }
  }
  return InvalidArgument("node '", node->name(), "' (Cast): unknown type name '", name, "' in attribute 'to'");
}

// Selu-1 had less precise defaults.
absl::Status UpgradeSelu(Graph& g, Node* node, int64_t opset) {
  node->RemoveAttr("consumed_inputs");
  if (opset < 6) {
    if (!node->has_attr("alpha")) node->SetAttr("alpha", Attribute::Float(1.6732f));
    if (!node->has_attr("gamma")) node->SetAttr("gamma", Attribute::Float(1.0507f));
  }
  return absl::OkStatus();
}

//===--- Registration -----------------------------------------------------===//

template <uint32_t Set, OutKind Out = OutKind::kSame>
constexpr InferFn kInfer = InferElementwise<Set, Out>;

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  auto unary = [&](const char* name, KernelFn k, InferFn inf, int since = 1) {
    return r.Register(name).Inputs(1).Outputs(1).Class(OpClass::kElementwise).Since(since)
        .Infer(inf).Kernel(k).Upgrade(UpgradeDropConsumed);
  };
  InferFn fl = kInfer<kFloatSet>;

  // Unary math.
  unary("Abs", Abs, kInfer<kNumSet>);
  unary("Neg", Neg, kInfer<kSignedSet>);
  unary("Sign", Sign, kInfer<kNumSet>, 9);
  unary("Reciprocal", Reciprocal, fl);
  unary("Sqrt", Sqrt, fl);
  unary("Exp", Exp, fl);
  unary("Log", Log, fl);
  unary("Ceil", Ceil, fl);
  unary("Floor", Floor, fl);
  unary("Round", Round, fl, 11);
  unary("Sin", Sin, fl, 7);
  unary("Cos", Cos, fl, 7);
  unary("Tan", Tan, fl, 7);
  unary("Asin", Asin, fl, 7);
  unary("Acos", Acos, fl, 7);
  unary("Atan", Atan, fl, 7);
  unary("Sinh", Sinh, fl, 9);
  unary("Cosh", Cosh, fl, 9);
  unary("Tanh", Tanh, fl);
  unary("Asinh", Asinh, fl, 9);
  unary("Acosh", Acosh, fl, 9);
  unary("Atanh", Atanh, fl, 9);
  unary("Erf", Erf, fl, 9);
  unary("IsNaN", IsNaN, kInfer<kFloatSet, OutKind::kBool>, 9);
  unary("IsInf", IsInf, kInfer<kFloatSet, OutKind::kBool>, 10)
      .Attr("detect_negative", AttrKind::kInt, "1")
      .Attr("detect_positive", AttrKind::kInt, "1");
  unary("Not", Not, kInfer<kBoolSet>);

  // Activations.
  unary("Relu", Relu, kInfer<kSignedSet>);
  unary("Sigmoid", Sigmoid, fl).Cost(PerElementCost<4>);
  unary("Softplus", Softplus, fl).Cost(PerElementCost<4>);
  unary("Softsign", Softsign, fl).Cost(PerElementCost<3>);
  unary("LeakyRelu", LeakyRelu, fl).Attr("alpha", AttrKind::kFloat, "0.01").Cost(PerElementCost<2>);
  unary("ThresholdedRelu", ThresholdedRelu, fl, 10).Attr("alpha", AttrKind::kFloat, "1.0");
  unary("Elu", Elu, fl).Attr("alpha", AttrKind::kFloat, "1.0").Cost(PerElementCost<3>);
  unary("Celu", Celu, InferCelu, 12).Attr("alpha", AttrKind::kFloat, "1.0").Cost(PerElementCost<4>);
  unary("Selu", Selu, fl)
      .Attr("alpha", AttrKind::kFloat, "1.67326319217681884765625")
      .Attr("gamma", AttrKind::kFloat, "1.05070102214813232421875")
      .Upgrade(UpgradeSelu).Cost(PerElementCost<4>);
  unary("HardSigmoid", HardSigmoid, fl)
      .Attr("alpha", AttrKind::kFloat, "0.2").Attr("beta", AttrKind::kFloat, "0.5").Cost(PerElementCost<4>);
  unary("HardSwish", HardSwish, fl, 14).Cost(PerElementCost<5>);
  unary("Shrink", Shrink, kInfer<kNumSet>, 9)
      .Attr("bias", AttrKind::kFloat, "0.0").Attr("lambd", AttrKind::kFloat, "0.5").Cost(PerElementCost<2>);

  // Binary ops with numpy broadcasting.
  auto binary = [&](const char* name, KernelFn k, InferFn inf, int since = 1) {
    return r.Register(name).Inputs(2).Outputs(1).Class(OpClass::kElementwise).Since(since)
        .Infer(inf).Kernel(k).Upgrade(UpgradeLegacyBroadcast);
  };
  binary("Add", Add, kInfer<kNumSet>);
  binary("Sub", Sub, kInfer<kNumSet>);
  binary("Mul", Mul, kInfer<kNumSet>);
  binary("Div", Div, kInfer<kNumSet>);
  binary("Pow", Pow, InferPow);
  binary("Mod", Mod, InferMod, 10).Attr("fmod", AttrKind::kInt, "0");
  binary("BitShift", BitShift, InferBitShift, 11).RequiredAttr("direction", AttrKind::kString);
  binary("And", And, kInfer<kBoolSet>);
  binary("Or", Or, kInfer<kBoolSet>);
  binary("Xor", Xor, kInfer<kBoolSet>);
  binary("Equal", Equal, kInfer<kCastSet, OutKind::kBool>);
  binary("Greater", Greater, kInfer<kNumSet, OutKind::kBool>);
  binary("Less", Less, kInfer<kNumSet, OutKind::kBool>);
  binary("GreaterOrEqual", GreaterOrEqual, kInfer<kNumSet, OutKind::kBool>, 12);
  binary("LessOrEqual", LessOrEqual, kInfer<kNumSet, OutKind::kBool>, 12);
  binary("PRelu", PRelu, InferPRelu).Upgrade(UpgradePRelu).Cost(PerElementCost<2>);

  // Variadic ops with numpy broadcasting.
  auto variadic = [&](const char* name, KernelFn k, InferFn inf, CostFn cost) {
    r.Register(name).Inputs(1, -1).Outputs(1).Class(OpClass::kElementwise)
        .Infer(inf).Kernel(k).Cost(cost).Upgrade(UpgradeDropConsumed);
  };
  variadic("Max", Max, kInfer<kNumSet>, VariadicCost<0>);
  variadic("Min", Min, kInfer<kNumSet>, VariadicCost<0>);
  variadic("Sum", Sum, fl, VariadicCost<0>);
  variadic("Mean", Mean, fl, VariadicCost<1>);

  r.Register("Where").Inputs(3).Outputs(1).Class(OpClass::kElementwise).Since(9)
      .Infer(InferWhere).Kernel(Where);
  r.Register("Clip").Inputs(1, 3).Outputs(1).Class(OpClass::kElementwise)
      .Infer(InferClip).Kernel(Clip).Upgrade(UpgradeClip).Cost(PerElementCost<2>);
  r.Register("Identity").Inputs(1).Outputs(1).Class(OpClass::kElementwise)
      .Infer(InferIdentity).Kernel(Identity).Cost(CopyCost);
  r.Register("Dropout").Inputs(1, 3).Outputs(1, 2).Class(OpClass::kElementwise)
      .Attr("seed", AttrKind::kInt, "none (random)")
      .Infer(InferDropout).Kernel(Dropout).Upgrade(UpgradeDropout).Cost(CopyCost);
  r.Register("Cast").Inputs(1).Outputs(1).Class(OpClass::kElementwise)
      .RequiredAttr("to", AttrKind::kInt)
      .Infer(InferCast).Kernel(Cast).Upgrade(UpgradeCast).Cost(CopyCost);
  r.Register("CastLike").Inputs(2).Outputs(1).Class(OpClass::kElementwise).Since(15)
      .Infer(InferCastLike).Kernel(CastLike).Cost(CopyCost);
}

}  // namespace kiln
