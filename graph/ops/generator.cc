//===- generator.cc - Operators that generate tensors ---------------------===//
//
// Constant, ConstantOfShape, Range, EyeLike, OneHot, the window functions
// (Blackman, Hamming, Hann), and the random ops (RandomUniform[Like],
// RandomNormal[Like], Bernoulli, Multinomial).
//
// Random ops draw from kiln's own generator: a std::mt19937_64 seeded from
// the `seed` attribute (or a fixed default), with uniform doubles taken from
// the top 53 bits and normals from Box-Muller. The same node with the same
// seed gives the same values on every run and every machine; the values do
// not match other runtimes.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>
#include <random>

#include "absl/strings/str_join.h"
#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

//===--- Helpers ----------------------------------------------------------===//

// Wrap inference and kernel functions so that a missing required input (the
// first N) is an error rather than a null dereference.
template <absl::Status (*F)(InferContext&), int N>
absl::Status ReqI(InferContext& ctx) {
  for (int i = 0; i < N; ++i)
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
  return F(ctx);
}
template <absl::Status (*F)(KernelContext&), int N>
absl::Status ReqK(KernelContext& ctx) {
  for (int i = 0; i < N; ++i)
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
  return F(ctx);
}

// Largest tensor a generator op may create from run-time values.
constexpr int64_t kMaxGeneratedElements = int64_t{1} << 31;

DType InDType(const InferContext& ctx, int i) {
  return ctx.has_input(i) && ctx.input_type(i).is_tensor() ? ctx.input_type(i).dtype() : DType::kUndefined;
}

absl::Status RequireTensor(const InferContext& ctx, int i, absl::string_view what) {
  if (!ctx.has_input(i)) return ctx.Error(what, " is missing");
  const Type& t = ctx.input_type(i);
  if (!t.is_none() && !t.is_tensor()) return ctx.Error(what, " must be a tensor, got ", t.ToString());
  return absl::OkStatus();
}

// The DType of an ONNX dtype attribute, or `dflt` when the attribute is absent.
absl::StatusOr<DType> DTypeAttr(const Node& n, absl::string_view name, DType dflt) {
  if (!n.has_attr(name)) return dflt;
  int64_t v = n.GetInt(name, 0);
  auto dt = DTypeFromOnnx(v);
  if (!dt) return InvalidArgument("attribute '", name, "' = ", v, " is not a known data type");
  return *dt;
}

// Checks that a dims vector from the user is valid and not absurdly large.
absl::Status CheckDims(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgument("shape has a negative dim ", d);
    if (d > 0 && n > kMaxGeneratedElements / d)
      return InvalidArgument("shape [", absl::StrJoin(dims, ","), "] is too large");
    n *= d;
  }
  return absl::OkStatus();
}

// A scalar (or one-element) input's value as double.
absl::StatusOr<double> ScalarInput(const KernelContext& ctx, int i, absl::string_view what) {
  const Tensor& t = ctx.input(i);
  if (!IsNumeric(t.dtype())) return ctx.Error(what, " must be numeric, got ", DTypeName(t.dtype()));
  if (t.numel() != 1) return ctx.Error(what, " must have one element, got ", t.numel());
  return t.GetDouble(0);
}

//===--- Constant ---------------------------------------------------------===//

const char* const kConstantAttrs[] = {"value", "value_float", "value_floats", "value_int",
                                      "value_ints", "value_string", "value_strings", "sparse_value"};

// The tensor a Constant node produces.
absl::StatusOr<Tensor> ConstantValue(const Node& n) {
  const char* which = nullptr;
  for (const char* a : kConstantAttrs) {
    if (!n.has_attr(a)) continue;
    if (which) return InvalidArgument("has both '", which, "' and '", a, "'; exactly one value attribute is allowed");
    which = a;
  }
  if (!which) return InvalidArgument("has no value attribute");
  const Attribute& a = *n.attr(which);
  std::string w = which;
  if (w == "sparse_value") return Unimplemented("sparse_value constants are not supported");
  if (w == "value") {
    if (a.kind() != AttrKind::kTensor) return InvalidArgument("attribute 'value' must be a tensor");
    if (!a.t().defined()) return InvalidArgument("attribute 'value' holds no data");
    return a.t();
  }
  if (w == "value_float") return Tensor::Scalar<float>(a.kind() == AttrKind::kFloat ? a.f() : static_cast<float>(a.i()));
  if (w == "value_int") return Tensor::Scalar<int64_t>(a.i());
  if (w == "value_string") {
    Tensor t(DType::kString, {});
    t.data<std::string>()[0] = a.s();
    return t;
  }
  if (w == "value_floats")
    return Tensor::FromVector<float>(a.floats(), {static_cast<int64_t>(a.floats().size())});
  if (w == "value_ints") return Tensor::FromVector<int64_t>(a.ints(), {static_cast<int64_t>(a.ints().size())});
  // value_strings
  Tensor t(DType::kString, {static_cast<int64_t>(a.strings().size())});
  for (size_t i = 0; i < a.strings().size(); ++i) t.data<std::string>()[i] = a.strings()[i];
  return t;
}

absl::Status InferConstant(InferContext& ctx) {
  const Node& n = ctx.node();
  // Types are known without building the tensor for the list forms.
  auto v = ConstantValue(n);
  if (!v.ok()) return ctx.Error(v.status().message());
  ctx.set_output(0, Type::Of(*v));
  return absl::OkStatus();
}

absl::Status ConstantKernel(KernelContext& ctx) {
  auto v = ConstantValue(ctx.node());
  if (!v.ok()) return ctx.Error(v.status().message());
  ctx.set_output(0, *std::move(v));
  return absl::OkStatus();
}

//===--- ConstantOfShape --------------------------------------------------===//

absl::StatusOr<Tensor> FillValue(const Node& n) {
  const Attribute* a = n.attr("value");
  if (!a) return Tensor::Scalar<float>(0.0f);
  if (a->kind() != AttrKind::kTensor || !a->t().defined()) return InvalidArgument("attribute 'value' must be a tensor");
  if (a->t().numel() != 1) return InvalidArgument("attribute 'value' must have one element, got ", a->t().numel());
  return a->t();
}

absl::Status InferConstantOfShape(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  auto v = FillValue(ctx.node());
  if (!v.ok()) return ctx.Error(v.status().message());
  DType dt = v->dtype();
  DType st = InDType(ctx, 0);
  if (st != DType::kUndefined && !IsInteger(st)) return ctx.Error("input 0 must be int64, got ", DTypeName(st));
  if (const Tensor* s = ctx.const_input(0); s && IsInteger(s->dtype())) {
    Dims dims = ToInt64Vector(*s);
    absl::Status c = CheckDims(dims);
    if (!c.ok()) return ctx.Error(c.message());
    ctx.set_output(0, Type::Tensor(dt, Shape::Static(dims)));
    return absl::OkStatus();
  }
  Shape out;
  const Type& t = ctx.input_type(0);
  if (t.is_tensor() && t.shape().ranked() && t.shape().rank() == 1 && t.shape()[0].is_static())
    out = Shape(DimVector(t.shape()[0].value()));
  ctx.set_output(0, Type::Tensor(dt, out));
  return absl::OkStatus();
}

absl::Status ConstantOfShapeKernel(KernelContext& ctx) {
  auto v = FillValue(ctx.node());
  if (!v.ok()) return ctx.Error(v.status().message());
  const Tensor& s = ctx.input(0);
  if (!IsInteger(s.dtype()) || s.rank() > 1) return ctx.Error("input 0 must be a 1-D int64 tensor");
  Dims dims = ToInt64Vector(s);
  absl::Status c = CheckDims(dims);
  if (!c.ok()) return ctx.Error(c.message());
  Tensor& y = ctx.AllocOutput(0, v->dtype(), dims);
  DispatchBySize(v->dtype(), [&]<typename T>() {
    T* out = y.data<T>();
    std::fill(out, out + y.numel(), v->data<T>()[0]);
  });
  return absl::OkStatus();
}

//===--- Range ------------------------------------------------------------===//

bool IsRangeType(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kI16 || t == DType::kI32 || t == DType::kI64;
}

// Number of elements of Range(start, limit, delta); errors on delta 0 or a
// result too large to allocate.
absl::StatusOr<int64_t> RangeCount(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  double n;
  if (IsInteger(start.dtype())) {
    __int128 s = start.GetInt(0), l = limit.GetInt(0), d = delta.GetInt(0);
    if (d == 0) return InvalidArgument("delta must not be 0");
    __int128 span = l - s;
    __int128 c = d > 0 ? (span > 0 ? (span + d - 1) / d : 0) : (span < 0 ? (-span + (-d) - 1) / (-d) : 0);
    n = static_cast<double>(c);
  } else {
    double s = start.GetDouble(0), l = limit.GetDouble(0), d = delta.GetDouble(0);
    if (d == 0) return InvalidArgument("delta must not be 0");
    n = std::ceil((l - s) / d);
    if (std::isnan(n)) return InvalidArgument("start, limit and delta give no element count");
    n = std::max(n, 0.0);
  }
  if (n > static_cast<double>(kMaxGeneratedElements)) return InvalidArgument("Range would produce ", n, " elements");
  return static_cast<int64_t>(n);
}

absl::Status CheckRangeInputs(const Tensor& a, const Tensor& b, const Tensor& c) {
  if (!IsRangeType(a.dtype())) return InvalidArgument("start has unsupported dtype ", DTypeName(a.dtype()));
  if (b.dtype() != a.dtype() || c.dtype() != a.dtype())
    return InvalidArgument("start, limit and delta must have the same dtype");
  if (a.numel() != 1 || b.numel() != 1 || c.numel() != 1) return InvalidArgument("start, limit and delta must be scalars");
  return absl::OkStatus();
}

absl::Status InferRange(InferContext& ctx) {
  DType dt = DType::kUndefined;
  for (int i = 0; i < 3; ++i) {
    KILN_RETURN_IF_ERROR(RequireTensor(ctx, i, absl::StrCat("input ", i)));
    DType d = InDType(ctx, i);
    if (d == DType::kUndefined) continue;
    if (!IsRangeType(d)) return ctx.Error("input ", i, " has unsupported dtype ", DTypeName(d));
    if (dt != DType::kUndefined && d != dt) return ctx.Error("input ", i, " has dtype ", DTypeName(d), ", expected ", DTypeName(dt));
    dt = d;
    const Type& t = ctx.input_type(i);
    if (t.shape().ranked() && t.shape().rank() > 1) return ctx.Error("input ", i, " must be a scalar");
  }
  const Tensor *a = ctx.const_input(0), *b = ctx.const_input(1), *c = ctx.const_input(2);
  Dim n;
  if (a && b && c) {
    absl::Status s = CheckRangeInputs(*a, *b, *c);
    if (!s.ok()) return ctx.Error(s.message());
    auto count = RangeCount(*a, *b, *c);
    if (!count.ok()) return ctx.Error(count.status().message());
    n = Dim(*count);
  }
  ctx.set_output(0, Type::Tensor(dt, Shape({n})));
  return absl::OkStatus();
}

absl::Status RangeKernel(KernelContext& ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1), &c = ctx.input(2);
  absl::Status s = CheckRangeInputs(a, b, c);
  if (!s.ok()) return ctx.Error(s.message());
  auto count = RangeCount(a, b, c);
  if (!count.ok()) return ctx.Error(count.status().message());
  Tensor& y = ctx.AllocOutput(0, a.dtype(), {*count});
  DispatchNumeric(a.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool> || kIsHalfLike<T>) {
      return;  // not a Range dtype; rejected above
    } else {
      T start = a.data<T>()[0], delta = c.data<T>()[0];
      T* out = y.data<T>();
      for (int64_t i = 0; i < *count; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    }
  });
  return absl::OkStatus();
}

//===--- EyeLike ----------------------------------------------------------===//

absl::Status InferEyeLike(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  auto dt = DTypeAttr(ctx.node(), "dtype", InDType(ctx, 0));
  if (!dt.ok()) return ctx.Error(dt.status().message());
  if (*dt != DType::kUndefined && !IsNumeric(*dt)) return ctx.Error("output dtype ", DTypeName(*dt), " is not numeric");
  const Type& t = ctx.input_type(0);
  Shape s = t.is_tensor() ? t.shape() : Shape();
  if (s.ranked() && s.rank() != 2) return ctx.Error("input 0 has rank ", s.rank(), ", expected 2");
  if (!s.ranked()) s = Shape({Dim(), Dim()});
  ctx.set_output(0, Type::Tensor(*dt, s));
  return absl::OkStatus();
}

absl::Status EyeLikeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) return ctx.Error("input 0 has rank ", x.rank(), ", expected 2");
  auto dt = DTypeAttr(ctx.node(), "dtype", x.dtype());
  if (!dt.ok()) return ctx.Error(dt.status().message());
  if (!IsNumeric(*dt)) return ctx.Error("output dtype ", DTypeName(*dt), " is not numeric");
  int64_t k = std::clamp<int64_t>(ctx.node().GetInt("k", 0), -(int64_t{1} << 62), int64_t{1} << 62);
  int64_t rows = x.dim(0), cols = x.dim(1);
  Tensor& y = ctx.AllocOutput(0, *dt, x.dims());
  DispatchNumeric(*dt, [&]<typename T>() {
    T* out = y.data<T>();
    T one = FromDouble<T>(1.0);
    for (int64_t i = 0; i < rows; ++i) {
      int64_t j = i + k;
      if (j >= 0 && j < cols) out[i * cols + j] = one;
    }
  });
  return absl::OkStatus();
}

//===--- OneHot -----------------------------------------------------------===//

absl::Status InferOneHot(InferContext& ctx) {
  for (int i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(RequireTensor(ctx, i, absl::StrCat("input ", i)));
  DType dt = InDType(ctx, 2);
  const Type& it = ctx.input_type(0);
  Dim depth;
  if (const Tensor* d = ctx.const_input(1); d && IsNumeric(d->dtype()) && d->numel() == 1) {
    int64_t v = static_cast<int64_t>(d->GetDouble(0));
    if (v < 1) return ctx.Error("depth must be positive, got ", v);
    depth = Dim(v);
  }
  if (!it.is_tensor() || !it.shape().ranked()) {
    ctx.set_output(0, Type::Tensor(dt));
    return absl::OkStatus();
  }
  int rank = it.shape().rank() + 1;
  int64_t a = ctx.node().GetInt("axis", -1);
  if (a < -rank || a >= rank) return ctx.Error("axis ", a, " is out of range for rank ", rank);
  int axis = static_cast<int>(a < 0 ? a + rank : a);
  DimVector out = it.shape().dims();
  out.insert(out.begin() + axis, depth);
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
  return absl::OkStatus();
}

absl::Status OneHotKernel(KernelContext& ctx) {
  const Tensor& ind = ctx.input(0);
  const Tensor& vals = ctx.input(2);
  if (!IsNumeric(ind.dtype())) return ctx.Error("indices must be numeric, got ", DTypeName(ind.dtype()));
  KILN_ASSIGN_OR_RETURN(double dd, ScalarInput(ctx, 1, "depth"));
  if (!(dd >= 1)) return ctx.Error("depth must be positive, got ", dd);
  if (dd > static_cast<double>(kMaxGeneratedElements)) return ctx.Error("depth ", dd, " is too large");
  int64_t depth = static_cast<int64_t>(dd);
  if (vals.numel() != 2) return ctx.Error("values must have two elements [off, on], got ", vals.numel());
  int rank = ind.rank() + 1;
  int64_t a = ctx.node().GetInt("axis", -1);
  if (a < -rank || a >= rank) return ctx.Error("axis ", a, " is out of range for rank ", rank);
  int axis = static_cast<int>(a < 0 ? a + rank : a);
  Dims out = ind.dims();
  out.insert(out.begin() + axis, depth);
  KILN_RETURN_IF_ERROR(CheckDims(out));
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= ind.dim(d);
  int64_t inner = ind.numel() / std::max<int64_t>(outer, 1);
  if (outer == 0) inner = 0;
  std::vector<double> idx = ToDoubleVector(ind);
  Tensor& y = ctx.AllocOutput(0, vals.dtype(), out);
  DispatchBySize(vals.dtype(), [&]<typename T>() {
    const T off = vals.data<T>()[0], on = vals.data<T>()[1];
    T* dst = y.data<T>();
    std::fill(dst, dst + y.numel(), off);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double v = idx[o * inner + i];
        if (!(v >= -static_cast<double>(depth) && v < static_cast<double>(depth))) continue;
        int64_t k = static_cast<int64_t>(v);
        if (k < 0) k += depth;
        dst[(o * depth + k) * inner + i] = on;
      }
  });
  return absl::OkStatus();
}

//===--- Windows ----------------------------------------------------------===//

// Cosine-sum window a0 - a1 cos(x) + a2 cos(2x), x = 2 pi n / N.
struct WindowCoeffs {
  double a0, a1, a2;
};

absl::Status InferWindow(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0 (size)"));
  DType st = InDType(ctx, 0);
  if (st != DType::kUndefined && st != DType::kI32 && st != DType::kI64)
    return ctx.Error("size must be int32 or int64, got ", DTypeName(st));
  auto dt = DTypeAttr(ctx.node(), "output_datatype", DType::kF32);
  if (!dt.ok()) return ctx.Error(dt.status().message());
  if (!IsNumeric(*dt) || *dt == DType::kBool) return ctx.Error("output_datatype ", DTypeName(*dt), " is not supported");
  Dim n;
  if (const Tensor* s = ctx.const_input(0); s && IsInteger(s->dtype()) && s->numel() == 1) {
    if (s->GetInt(0) < 0) return ctx.Error("size must not be negative, got ", s->GetInt(0));
    n = Dim(s->GetInt(0));
  }
  ctx.set_output(0, Type::Tensor(*dt, Shape({n})));
  return absl::OkStatus();
}

absl::Status WindowKernel(KernelContext& ctx, WindowCoeffs w) {
  const Tensor& s = ctx.input(0);
  if (s.dtype() != DType::kI32 && s.dtype() != DType::kI64)
    return ctx.Error("size must be int32 or int64, got ", DTypeName(s.dtype()));
  if (s.numel() != 1) return ctx.Error("size must be a scalar");
  int64_t size = s.GetInt(0);
  if (size < 0) return ctx.Error("size must not be negative, got ", size);
  if (size > kMaxGeneratedElements) return ctx.Error("size ", size, " is too large");
  auto dt = DTypeAttr(ctx.node(), "output_datatype", DType::kF32);
  if (!dt.ok()) return ctx.Error(dt.status().message());
  if (!IsNumeric(*dt) || *dt == DType::kBool) return ctx.Error("output_datatype ", DTypeName(*dt), " is not supported");
  bool periodic = ctx.node().GetInt("periodic", 1) != 0;
  double n_div = periodic ? static_cast<double>(size) : static_cast<double>(size) - 1;
  double step = 2 * std::numbers::pi / n_div;
  Tensor& y = ctx.AllocOutput(0, *dt, {size});
  DispatchNumeric(*dt, [&]<typename T>() {
    T* out = y.data<T>();
    for (int64_t i = 0; i < size; ++i) {
      double x = static_cast<double>(i) * step;
      out[i] = FromDouble<T>(w.a0 - w.a1 * std::cos(x) + w.a2 * std::cos(2 * x));
    }
  });
  return absl::OkStatus();
}

absl::Status HannWindowKernel(KernelContext& ctx) { return WindowKernel(ctx, {0.5, 0.5, 0.0}); }
absl::Status HammingWindowKernel(KernelContext& ctx) {
  return WindowKernel(ctx, {25.0 / 46.0, 21.0 / 46.0, 0.0});
}
absl::Status BlackmanWindowKernel(KernelContext& ctx) { return WindowKernel(ctx, {0.42, 0.5, 0.08}); }

//===--- Random -----------------------------------------------------------===//

// kiln's random generator: mt19937_64 seeded from the `seed` attribute.
class Rng {
 public:
  explicit Rng(const Node& n) {
    uint64_t s = 0x6b696c6e5f726e67ull;  // fixed default: runs are reproducible
    if (const Attribute* a = n.attr("seed")) {
      float f = a->kind() == AttrKind::kFloat ? a->f() : static_cast<float>(a->i());
      s ^= static_cast<uint64_t>(std::bit_cast<uint32_t>(f)) * 0x9e3779b97f4a7c15ull;
    }
    gen_.seed(s);
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  // Standard normal (Box-Muller, one value per call).
  double Normal() {
    double u1 = Uniform(), u2 = Uniform();
    if (u1 <= 0) u1 = 0x1.0p-53;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 gen_;
};

// Output dtype of a random op: the dtype attribute, else `dflt`; floats only.
absl::StatusOr<DType> RandomDType(const Node& n, DType dflt) {
  KILN_ASSIGN_OR_RETURN(DType dt, DTypeAttr(n, "dtype", dflt));
  if (dt != DType::kUndefined && !IsFloat(dt))
    return InvalidArgument("dtype ", DTypeName(dt), " is not a float type");
  return dt;
}

absl::Status InferRandom(InferContext& ctx) {
  auto dt = RandomDType(ctx.node(), DType::kF32);
  if (!dt.ok()) return ctx.Error(dt.status().message());
  Dims dims = ctx.node().GetInts("shape");
  absl::Status c = CheckDims(dims);
  if (!c.ok()) return ctx.Error(c.message());
  ctx.set_output(0, Type::Tensor(*dt, Shape::Static(dims)));
  return absl::OkStatus();
}

absl::Status InferRandomLike(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  DType in = InDType(ctx, 0);
  DType dflt = in != DType::kUndefined && IsFloat(in) ? in : DType::kUndefined;
  if (in != DType::kUndefined && !IsFloat(in) && !ctx.node().has_attr("dtype"))
    return ctx.Error("input dtype ", DTypeName(in), " is not a float type and no dtype is given");
  auto dt = RandomDType(ctx.node(), dflt);
  if (!dt.ok()) return ctx.Error(dt.status().message());
  const Type& t = ctx.input_type(0);
  ctx.set_output(0, Type::Tensor(*dt, t.is_tensor() ? t.shape() : Shape()));
  return absl::OkStatus();
}

// Fills a new float tensor with `draw(rng)` values.
template <typename Draw>
absl::Status FillRandom(KernelContext& ctx, DType dt, const Dims& dims, Draw draw) {
  absl::Status c = CheckDims(dims);
  if (!c.ok()) return ctx.Error(c.message());
  Rng rng(ctx.node());
  Tensor& y = ctx.AllocOutput(0, dt, dims);
  DispatchFloat(dt, [&]<typename T>() {
    T* out = y.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) out[i] = FromDouble<T>(draw(rng));
  });
  return absl::OkStatus();
}

absl::StatusOr<DType> KernelRandomDType(const KernelContext& ctx, bool like) {
  DType dflt = DType::kF32;
  if (like) {
    dflt = ctx.input(0).dtype();
    if (!IsFloat(dflt) && !ctx.node().has_attr("dtype"))
      return ctx.Error("input dtype ", DTypeName(dflt), " is not a float type and no dtype is given");
  }
  auto dt = RandomDType(ctx.node(), dflt);
  if (!dt.ok()) return ctx.Error(dt.status().message());
  return *dt;
}

template <bool kLike>
absl::Status RandomUniformKernel(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(DType dt, KernelRandomDType(ctx, kLike));
  double lo = ctx.node().GetFloat("low", 0.0f), hi = ctx.node().GetFloat("high", 1.0f);
  Dims dims = kLike ? ctx.input(0).dims() : ctx.node().GetInts("shape");
  return FillRandom(ctx, dt, dims, [&](Rng& r) { return lo + (hi - lo) * r.Uniform(); });
}

template <bool kLike>
absl::Status RandomNormalKernel(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(DType dt, KernelRandomDType(ctx, kLike));
  double mean = ctx.node().GetFloat("mean", 0.0f), scale = ctx.node().GetFloat("scale", 1.0f);
  Dims dims = kLike ? ctx.input(0).dims() : ctx.node().GetInts("shape");
  return FillRandom(ctx, dt, dims, [&](Rng& r) { return mean + scale * r.Normal(); });
}

absl::Status InferBernoulli(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  DType in = InDType(ctx, 0);
  if (in != DType::kUndefined && !IsFloat(in)) return ctx.Error("input 0 must be a float tensor, got ", DTypeName(in));
  auto dt = DTypeAttr(ctx.node(), "dtype", in);
  if (!dt.ok()) return ctx.Error(dt.status().message());
  if (*dt != DType::kUndefined && !IsNumeric(*dt)) return ctx.Error("dtype ", DTypeName(*dt), " is not numeric");
  const Type& t = ctx.input_type(0);
  ctx.set_output(0, Type::Tensor(*dt, t.is_tensor() ? t.shape() : Shape()));
  return absl::OkStatus();
}

absl::Status BernoulliKernel(KernelContext& ctx) {
  const Tensor& p = ctx.input(0);
  if (!IsFloat(p.dtype())) return ctx.Error("input 0 must be a float tensor, got ", DTypeName(p.dtype()));
  auto dt = DTypeAttr(ctx.node(), "dtype", p.dtype());
  if (!dt.ok()) return ctx.Error(dt.status().message());
  if (!IsNumeric(*dt)) return ctx.Error("dtype ", DTypeName(*dt), " is not numeric");
  std::vector<double> probs = ToDoubleVector(p);
  Rng rng(ctx.node());
  Tensor& y = ctx.AllocOutput(0, *dt, p.dims());
  DispatchNumeric(*dt, [&]<typename T>() {
    T* out = y.data<T>();
    for (size_t i = 0; i < probs.size(); ++i) out[i] = FromDouble<T>(rng.Uniform() < probs[i] ? 1.0 : 0.0);
  });
  return absl::OkStatus();
}

absl::Status InferMultinomial(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  DType in = InDType(ctx, 0);
  if (in != DType::kUndefined && !IsFloat(in)) return ctx.Error("input 0 must be a float tensor, got ", DTypeName(in));
  auto dt = DTypeAttr(ctx.node(), "dtype", DType::kI32);
  if (!dt.ok()) return ctx.Error(dt.status().message());
  if (*dt != DType::kI32 && *dt != DType::kI64) return ctx.Error("dtype must be int32 or int64, got ", DTypeName(*dt));
  int64_t samples = ctx.node().GetInt("sample_size", 1);
  if (samples < 0) return ctx.Error("sample_size must not be negative, got ", samples);
  const Type& t = ctx.input_type(0);
  Dim batch;
  if (t.is_tensor() && t.shape().ranked()) {
    if (t.shape().rank() != 2) return ctx.Error("input 0 has rank ", t.shape().rank(), ", expected 2");
    batch = t.shape()[0];
  }
  ctx.set_output(0, Type::Tensor(*dt, Shape({batch, Dim(samples)})));
  return absl::OkStatus();
}

absl::Status MultinomialKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("input 0 must be a float tensor, got ", DTypeName(x.dtype()));
  if (x.rank() != 2) return ctx.Error("input 0 has rank ", x.rank(), ", expected 2");
  auto dt = DTypeAttr(ctx.node(), "dtype", DType::kI32);
  if (!dt.ok()) return ctx.Error(dt.status().message());
  if (*dt != DType::kI32 && *dt != DType::kI64) return ctx.Error("dtype must be int32 or int64, got ", DTypeName(*dt));
  int64_t samples = ctx.node().GetInt("sample_size", 1);
  if (samples < 0) return ctx.Error("sample_size must not be negative, got ", samples);
  int64_t batch = x.dim(0), classes = x.dim(1);
  Dims out = {batch, samples};
  KILN_RETURN_IF_ERROR(CheckDims(out));
  if (classes == 0 && samples > 0 && batch > 0) return ctx.Error("cannot sample from zero classes");
  std::vector<double> logits = ToDoubleVector(x);
  Rng rng(ctx.node());
  Tensor& y = ctx.AllocOutput(0, *dt, out);
  std::vector<double> cdf(classes);
  for (int64_t b = 0; b < batch; ++b) {
    const double* l = logits.data() + b * classes;
    double mx = -INFINITY;
    for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, l[c]);
    double total = 0;
    for (int64_t c = 0; c < classes; ++c) {
      total += std::isfinite(mx) ? std::exp(l[c] - mx) : 1.0;
      cdf[c] = total;
    }
    for (int64_t s = 0; s < samples; ++s) {
      double u = rng.Uniform() * total;
      int64_t k = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
      k = std::min(k, classes - 1);
      if (*dt == DType::kI32) y.data<int32_t>()[b * samples + s] = static_cast<int32_t>(k);
      else y.data<int64_t>()[b * samples + s] = k;
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterGeneratorOps(OpRegistry& r) {
  r.Register("Constant").Inputs(0).Outputs(1).Class(OpClass::kOther)
      .Attr("value", AttrKind::kTensor).Attr("value_float", AttrKind::kFloat)
      .Attr("value_floats", AttrKind::kFloats).Attr("value_int", AttrKind::kInt)
      .Attr("value_ints", AttrKind::kInts).Attr("value_string", AttrKind::kString)
      .Attr("value_strings", AttrKind::kStrings)
      .Attr("sparse_value", AttrKind::kTensor, "unsupported")
      .Infer(InferConstant).Kernel(ConstantKernel);
  r.Register("ConstantOfShape").Inputs(1).Outputs(1).Class(OpClass::kOther)
      .Attr("value", AttrKind::kTensor, "f32 0")
      .Infer(ReqI<InferConstantOfShape, 1>).Kernel(ReqK<ConstantOfShapeKernel, 1>);
  r.Register("Range").Inputs(3).Outputs(1).Class(OpClass::kOther)
      .Infer(ReqI<InferRange, 3>).Kernel(ReqK<RangeKernel, 3>);
  r.Register("EyeLike").Inputs(1).Outputs(1).Class(OpClass::kOther)
      .Attr("dtype", AttrKind::kInt, "the input's dtype").Attr("k", AttrKind::kInt, "0")
      .Infer(ReqI<InferEyeLike, 1>).Kernel(ReqK<EyeLikeKernel, 1>);
  r.Register("OneHot").Inputs(3).Outputs(1).Class(OpClass::kOther)
      .Attr("axis", AttrKind::kInt, "-1")
      .Infer(ReqI<InferOneHot, 3>).Kernel(ReqK<OneHotKernel, 3>);
  r.Register("HannWindow").Inputs(1).Outputs(1).Class(OpClass::kOther)
      .Attr("output_datatype", AttrKind::kInt, "1 (f32)").Attr("periodic", AttrKind::kInt, "1")
      .Infer(ReqI<InferWindow, 1>).Kernel(ReqK<HannWindowKernel, 1>);
  r.Register("HammingWindow").Inputs(1).Outputs(1).Class(OpClass::kOther)
      .Attr("output_datatype", AttrKind::kInt, "1 (f32)").Attr("periodic", AttrKind::kInt, "1")
      .Infer(ReqI<InferWindow, 1>).Kernel(ReqK<HammingWindowKernel, 1>);
  r.Register("BlackmanWindow").Inputs(1).Outputs(1).Class(OpClass::kOther)
      .Attr("output_datatype", AttrKind::kInt, "1 (f32)").Attr("periodic", AttrKind::kInt, "1")
      .Infer(ReqI<InferWindow, 1>).Kernel(ReqK<BlackmanWindowKernel, 1>);
  r.Register("RandomUniform").Inputs(0).Outputs(1).Class(OpClass::kOther)
      .Attr("dtype", AttrKind::kInt, "1 (f32)").Attr("high", AttrKind::kFloat, "1.0")
      .Attr("low", AttrKind::kFloat, "0.0").Attr("seed", AttrKind::kFloat, "kiln's fixed seed")
      .RequiredAttr("shape", AttrKind::kInts)
      .Infer(InferRandom).Kernel(RandomUniformKernel<false>);
  r.Register("RandomUniformLike").Inputs(1).Outputs(1).Class(OpClass::kOther)
      .Attr("dtype", AttrKind::kInt, "the input's dtype").Attr("high", AttrKind::kFloat, "1.0")
      .Attr("low", AttrKind::kFloat, "0.0").Attr("seed", AttrKind::kFloat, "kiln's fixed seed")
      .Infer(ReqI<InferRandomLike, 1>).Kernel(ReqK<RandomUniformKernel<true>, 1>);
  r.Register("RandomNormal").Inputs(0).Outputs(1).Class(OpClass::kOther)
      .Attr("dtype", AttrKind::kInt, "1 (f32)").Attr("mean", AttrKind::kFloat, "0.0")
      .Attr("scale", AttrKind::kFloat, "1.0").Attr("seed", AttrKind::kFloat, "kiln's fixed seed")
      .RequiredAttr("shape", AttrKind::kInts)
      .Infer(InferRandom).Kernel(RandomNormalKernel<false>);
  r.Register("RandomNormalLike").Inputs(1).Outputs(1).Class(OpClass::kOther)
      .Attr("dtype", AttrKind::kInt, "the input's dtype").Attr("mean", AttrKind::kFloat, "0.0")
      .Attr("scale", AttrKind::kFloat, "1.0").Attr("seed", AttrKind::kFloat, "kiln's fixed seed")
      .Infer(ReqI<InferRandomLike, 1>).Kernel(ReqK<RandomNormalKernel<true>, 1>);
  r.Register("Bernoulli").Inputs(1).Outputs(1).Class(OpClass::kOther)
      .Attr("dtype", AttrKind::kInt, "the input's dtype").Attr("seed", AttrKind::kFloat, "kiln's fixed seed")
      .Infer(ReqI<InferBernoulli, 1>).Kernel(ReqK<BernoulliKernel, 1>);
  r.Register("Multinomial").Inputs(1).Outputs(1).Class(OpClass::kOther)
      .Attr("dtype", AttrKind::kInt, "6 (i32)").Attr("sample_size", AttrKind::kInt, "1")
      .Attr("seed", AttrKind::kFloat, "kiln's fixed seed")
      .Infer(ReqI<InferMultinomial, 1>).Kernel(ReqK<MultinomialKernel, 1>);
}

}  // namespace kiln
