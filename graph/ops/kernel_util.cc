//===- kernel_util.cc - Helpers shared by reference kernels ---------------===//
#include "graph/ops/kernel_util.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "graph/ir/dtype_dispatch.h"
#include "graph/support/status.h"

namespace kiln {

Dims StridesOf(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank) {
  if (axis < -rank || axis >= std::max(rank, 1))
    return InvalidArgument("axis ", axis, " is out of range for rank ", rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

absl::StatusOr<std::vector<int>> NormalizeAxes(const std::vector<int64_t>& axes, int rank) {
  std::vector<int> out;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return InvalidArgument("axis ", a, " is out of range for rank ", rank);
    int n = static_cast<int>(a < 0 ? a + rank : a);
    if (std::find(out.begin(), out.end(), n) != out.end())
      return InvalidArgument("axis ", a, " is repeated");
    out.push_back(n);
  }
  return out;
}

absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  if (!a.ranked() || !b.ranked()) return Shape();
  int rank = std::max(a.rank(), b.rank());
  DimVector out(rank);
  for (int i = 0; i < rank; ++i) {
    int ia = i - (rank - a.rank()), ib = i - (rank - b.rank());
    Dim da = ia >= 0 ? a[ia] : Dim(1);
    Dim db = ib >= 0 ? b[ib] : Dim(1);
    if (da.is_static() && da.value() == 1) out[i] = db;
    else if (db.is_static() && db.value() == 1) out[i] = da;
    else if (da.is_static() && db.is_static()) {
      if (da.value() != db.value())
        return InvalidArgument("shapes ", a.ToString(), " and ", b.ToString(), " do not broadcast");
      out[i] = da;
    } else if (da == db) out[i] = da;
    else if (da.is_static()) out[i] = da;  // the other must be equal at run time
    else if (db.is_static()) out[i] = db;
    else out[i] = Dim();
  }
  return Shape(std::move(out));
}

absl::StatusOr<Dims> BroadcastDims(const Dims& a, const Dims& b) {
  size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da == db || db == 1) out[i] = da;
    else if (da == 1) out[i] = db;
    else return InvalidArgument("shapes [", absl::StrJoin(a, ","), "] and [", absl::StrJoin(b, ","),
                                "] do not broadcast");
  }
  return out;
}

Dims BroadcastStrides(const Dims& in, const Dims& out) {
  Dims s(out.size(), 0);
  Dims in_strides = StridesOf(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[i + off] = in[i] == 1 ? 0 : in_strides[i];
  return s;
}

std::vector<int64_t> ToInt64Vector(const Tensor& t) {
  std::vector<int64_t> out(t.numel());
  DispatchNumeric(t.dtype(), [&]<typename T>() {
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = ConvertElement<int64_t>(p[i]);
  });
  return out;
}

std::vector<double> ToDoubleVector(const Tensor& t) {
  std::vector<double> out(t.numel());
  DispatchNumeric(t.dtype(), [&]<typename T>() {
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = ToDouble(p[i]);
  });
  return out;
}

absl::Status InferSameAsInput0(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.Error("input 0 is missing");
  for (int i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, ctx.input_type(0));
  return absl::OkStatus();
}

static absl::Status InferBroadcastTo(InferContext& ctx, std::optional<DType> dtype) {
  Shape shape;
  bool first = true;
  DType dt = DType::kUndefined;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const Type& t = ctx.input_type(i);
    if (!t.is_tensor()) return absl::OkStatus();
    if (first) {
      shape = t.shape();
      dt = t.dtype();
      first = false;
      continue;
    }
    auto s = BroadcastShapes(shape, t.shape());
    if (!s.ok()) return ctx.Error(s.status().message());
    shape = *s;
  }
  ctx.set_output(0, Type::Tensor(dtype ? *dtype : dt, shape));
  return absl::OkStatus();
}

absl::Status InferBroadcast(InferContext& ctx) { return InferBroadcastTo(ctx, std::nullopt); }
absl::Status InferBroadcastBool(InferContext& ctx) { return InferBroadcastTo(ctx, DType::kBool); }

std::optional<Dims> StaticDims(const Type& t) {
  if (!t.is_tensor() || !t.shape().is_static()) return std::nullopt;
  return t.shape().StaticDims();
}

}  // namespace kiln
