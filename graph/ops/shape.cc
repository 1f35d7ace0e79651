//===- shape.cc - Shape operators -----------------------------------------===//
//
// Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Expand.
//
// Inference here carries the most weight in the compiler: when a
// shape-carrying input (Reshape's `shape`, Unsqueeze's `axes`, ...) is a
// known constant, the output shape is computed exactly, and symbolic dims
// pass through wherever they survive (Flatten of [batch,3,4] at axis 1 is
// [batch,12]; Reshape of [batch,3,4] to [0,-1] is [batch,12]).
//
// Reshape, Flatten, Squeeze and Unsqueeze kernels return views that share the
// input's storage; Expand copies.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstring>
#include <map>

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

// Largest tensor a kernel allocates from run-time values.
constexpr int64_t kMaxElements = int64_t{1} << 32;

// a * b, saturating at kMaxElements + 1 (both are >= 0).
int64_t MulSat(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || r > kMaxElements) return kMaxElements + 1;
  return r;
}

// Cost of an op that moves or views data: no arithmetic.
OpCost MoveCost(const Node& node) {
  OpCost c;
  auto bytes = [](const Value* v) -> double {
    if (!v || !v->type().is_tensor()) return 0;
    int64_t n = v->type().shape().NumElements();
    return n > 0 ? static_cast<double>(n) * DTypeSize(v->type().dtype()) : 0;
  };
  if (node.num_inputs() > 0) c.bytes_read = bytes(node.input(0));
  for (const Value* v : node.outputs()) c.bytes_written += bytes(v);
  return c;
}

// Cost of an op that reads only metadata.
OpCost MetaCost(const Node& node) {
  OpCost c;
  for (const Value* v : node.outputs())
    if (v->type().is_tensor() && v->type().shape().NumElements() > 0)
      c.bytes_written += static_cast<double>(v->type().shape().NumElements()) * 8;
  return c;
}

bool IsIntegerTensorType(const Type& t) {
  return t.is_tensor() && (t.dtype() == DType::kUndefined || IsInteger(t.dtype()));
}

// Input `i` as int64 values when it is known; nullopt otherwise.
std::optional<std::vector<int64_t>> ConstInts(const InferContext& ctx, int i) {
  const Tensor* t = ctx.const_input(i);
  if (!t || !IsInteger(t->dtype())) return std::nullopt;
  return ToInt64Vector(*t);
}

// Checks that input `i` of a kernel is an integer tensor of rank <= 1 and
// returns its values.
absl::StatusOr<std::vector<int64_t>> KernelInts(const KernelContext& ctx, int i, absl::string_view what) {
  const Tensor& t = ctx.input(i);
  if (!IsInteger(t.dtype()))
    return ctx.Error(what, " must be an integer tensor, got ", DTypeName(t.dtype()));
  if (t.rank() > 1) return ctx.Error(what, " must be 1-D, got rank ", t.rank());
  return ToInt64Vector(t);
}

// Product of dims[b, e): static when every dim is static (or one is 0), the
// one symbolic dim when all the others are static 1, unknown otherwise.
Dim DimProduct(const DimVector& dims, int b, int e) {
  int64_t p = 1;
  int non_static = 0;
  Dim sym;
  for (int i = b; i < e; ++i) {
    if (dims[i].is_static()) {
      if (dims[i].value() == 0) return Dim(0);
      p = MulSat(p, dims[i].value());
    } else {
      ++non_static;
      sym = dims[i];
    }
  }
  if (non_static == 0) return Dim(p);
  if (non_static == 1 && p == 1 && sym.is_symbolic()) return sym;
  return Dim();
}

std::string DimsText(const Dims& d) { return absl::StrCat("[", absl::StrJoin(d, ","), "]"); }

// Replaces attribute `name` (ints) of `node` by a constant i64 input at
// position `index` (opset upgrade of attributes that became inputs).
void AttrToInput(Graph& g, Node* node, absl::string_view name, int index) {
  const Attribute* a = node->attr(name);
  if (!a) return;
  std::vector<int64_t> v = node->GetInts(name);
  node->RemoveAttr(name);
  Value* c = g.AddConstant(g.UniqueName(name), Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())}));
  while (node->num_inputs() < index) node->AddInput(nullptr);
  node->SetInput(index, c);
}

//===--- Shape, Size ------------------------------------------------------===//

// The [start, end) range of Shape's attributes for a rank.
std::pair<int64_t, int64_t> ShapeRange(const Node& n, int64_t rank) {
  int64_t start = n.GetInt("start", 0);
  int64_t end = n.GetInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return {start, std::max(start, end)};
}

absl::Status InferShape(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.is_none() && !x.is_tensor()) return ctx.Error("input 0 must be a tensor, got ", x.ToString());
  if (!x.is_tensor() || !x.shape().ranked()) {
    ctx.set_output(0, Type::Tensor(DType::kI64, Shape({Dim()})));
    return absl::OkStatus();
  }
  auto [s, e] = ShapeRange(ctx.node(), x.shape().rank());
  ctx.set_output(0, Type::Tensor(DType::kI64, Shape::Static({e - s})));
  return absl::OkStatus();
}

absl::Status ShapeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto [s, e] = ShapeRange(ctx.node(), x.rank());
  Tensor& y = ctx.AllocOutput(0, DType::kI64, {e - s});
  for (int64_t i = s; i < e; ++i) y.data<int64_t>()[i - s] = x.dim(static_cast<int>(i));
  return absl::OkStatus();
}

absl::Status InferSize(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.is_none() && !x.is_tensor()) return ctx.Error("input 0 must be a tensor, got ", x.ToString());
  ctx.set_output(0, Type::Tensor(DType::kI64, Shape::Scalar()));
  return absl::OkStatus();
}

absl::Status SizeKernel(KernelContext& ctx) {
  ctx.set_output(0, Tensor::Scalar<int64_t>(ctx.input(0).numel()));
  return absl::OkStatus();
}

//===--- Reshape ----------------------------------------------------------===//

absl::Status UpgradeReshape(Graph& g, Node* node, int64_t opset) {
  if (opset < 5) {
    node->RemoveAttr("consumed_inputs");
    if (node->has_attr("shape")) AttrToInput(g, node, "shape", 1);
  }
  return absl::OkStatus();
}

// Target dims of a Reshape from the input shape and the `shape` values.
// Works on symbolic shapes: 0 copies the input dim, -1 is solved by
// cancelling symbols that appear on both sides.
absl::StatusOr<Shape> ReshapeTarget(const Shape& in, const std::vector<int64_t>& target, bool allowzero) {
  DimVector out(target.size());
  int infer_at = -1;
  bool has_zero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t t = target[i];
    if (t == -1) {
      if (infer_at >= 0) return InvalidArgument("shape has more than one -1");
      infer_at = static_cast<int>(i);
    } else if (t < -1) {
      return InvalidArgument("shape[", i, "] = ", t, " is invalid");
    } else if (t == 0 && !allowzero) {
      if (in.ranked()) {
        if (static_cast<int>(i) >= in.rank())
          return InvalidArgument("shape[", i, "] = 0 copies dim ", i, " but the input has rank ", in.rank());
        out[i] = in[static_cast<int>(i)];
      }
    } else {
      if (t == 0) has_zero = true;
      out[i] = Dim(t);
    }
  }
  if (allowzero && has_zero && infer_at >= 0)
    return InvalidArgument("shape has both 0 and -1 with allowzero=1");
  if (!in.ranked()) return Shape(std::move(out));

  // Static products, symbol multisets and unknown counts of both sides.
  int64_t p_in = 1, p_out = 1;
  int u_in = 0, u_out = 0;
  std::map<std::string, int> syms;  // input count minus output count
  for (const Dim& d : in.dims()) {
    if (d.is_static()) p_in = MulSat(p_in, d.value());
    else if (d.is_symbolic()) ++syms[d.symbol()];
    else ++u_in;
  }
  for (int i = 0; i < static_cast<int>(out.size()); ++i) {
    if (i == infer_at) continue;
    const Dim& d = out[i];
    if (d.is_static()) p_out = MulSat(p_out, d.value());
    else if (d.is_symbolic()) --syms[d.symbol()];
    else ++u_out;
  }
  int sym_in = 0, sym_out = 0;
  std::string last_sym;
  for (const auto& [name, count] : syms) {
    if (count > 0) { sym_in += count; last_sym = name; }
    if (count < 0) sym_out -= count;
  }
  bool in_static = u_in == 0 && sym_in == 0 && sym_out == 0;
  if (infer_at < 0) {
    if (in_static && u_out == 0 && p_in != p_out)
      return InvalidArgument("cannot reshape ", in.ToString(), " (", p_in, " elements) to ",
                             Shape(out).ToString(), " (", p_out, " elements)");
    return Shape(std::move(out));
  }
  Dim solved;
  if (u_in == 0 && u_out == 0 && sym_out == 0) {
    if (sym_in == 0) {
      if (p_out == 0) {
        if (p_in != 0) return InvalidArgument("cannot reshape ", in.ToString(), " to a shape with a 0 dim and -1");
      } else {
        if (p_in % p_out != 0)
          return InvalidArgument("cannot reshape ", in.ToString(), " (", p_in, " elements) to ",
                                 Shape(out).ToString(), " with -1: ", p_in, " is not a multiple of ", p_out);
        solved = Dim(p_in / p_out);
      }
    } else if (sym_in == 1 && p_in == p_out && p_out != 0) {
      solved = Dim::Symbol(last_sym);
    }
  }
  out[infer_at] = solved;
  return Shape(std::move(out));
}

absl::Status InferReshape(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!ctx.has_input(1)) return ctx.Error("input 1 (shape) is missing");
  const Type& st = ctx.input_type(1);
  if (!IsIntegerTensorType(st) && !st.is_none())
    return ctx.Error("input 1 (shape) must be an int64 tensor, got ", st.ToString());
  DType dt = x.is_tensor() ? x.dtype() : DType::kUndefined;
  bool allowzero = ctx.node().GetInt("allowzero", 0) != 0;
  if (auto target = ConstInts(ctx, 1)) {
    auto out = ReshapeTarget(x.is_tensor() ? x.shape() : Shape(), *target, allowzero);
    if (!out.ok()) return ctx.Error(out.status().message());
    ctx.set_output(0, Type::Tensor(dt, *out));
    return absl::OkStatus();
  }
  // Unknown target: the rank is known when the shape input's length is.
  Shape out;
  if (st.is_tensor() && st.shape().ranked() && st.shape().rank() == 1 && st.shape()[0].is_static())
    out = Shape(DimVector(st.shape()[0].value()));
  ctx.set_output(0, Type::Tensor(dt, out));
  return absl::OkStatus();
}

absl::Status ReshapeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> target, KernelInts(ctx, 1, "shape"));
  auto out = ReshapeTarget(Shape::Static(x.dims()), target, ctx.node().GetInt("allowzero", 0) != 0);
  if (!out.ok()) return ctx.Error(out.status().message());
  if (!out->is_static())
    return ctx.Error("cannot reshape ", DimsText(x.dims()), " to ", DimsText(target));
  Dims dims = out->StaticDims();
  if (NumElements(dims) != x.numel())
    return ctx.Error("cannot reshape ", DimsText(x.dims()), " (", x.numel(), " elements) to ", DimsText(dims));
  ctx.set_output(0, x.Reshaped(std::move(dims)));
  return absl::OkStatus();
}

//===--- Flatten ----------------------------------------------------------===//

absl::Status InferFlatten(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  DType dt = x.is_tensor() ? x.dtype() : DType::kUndefined;
  if (!x.is_tensor() || !x.shape().ranked()) {
    ctx.set_output(0, Type::Tensor(dt, Shape({Dim(), Dim()})));
    return absl::OkStatus();
  }
  int rank = x.shape().rank();
  int64_t axis = ctx.node().GetInt("axis", 1);
  if (axis < -rank || axis > rank) return ctx.Error("axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  const auto& d = x.shape().dims();
  ctx.set_output(0, Type::Tensor(dt, Shape({DimProduct(d, 0, static_cast<int>(axis)),
                                            DimProduct(d, static_cast<int>(axis), rank)})));
  return absl::OkStatus();
}

absl::Status FlattenKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int rank = x.rank();
  int64_t axis = ctx.node().GetInt("axis", 1);
  if (axis < -rank || axis > rank) return ctx.Error("axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  int64_t outer = 1;
  for (int i = 0; i < axis; ++i) outer *= x.dim(i);
  int64_t inner = 1;
  for (int i = static_cast<int>(axis); i < rank; ++i) inner *= x.dim(i);
  ctx.set_output(0, x.Reshaped({outer, inner}));
  return absl::OkStatus();
}

//===--- Squeeze, Unsqueeze -----------------------------------------------===//

absl::Status UpgradeAxesAttr(Graph& g, Node* node, int64_t opset) {
  if (opset < 13 && node->has_attr("axes")) AttrToInput(g, node, "axes", 1);
  return absl::OkStatus();
}

absl::Status InferSqueeze(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  DType dt = x.is_tensor() ? x.dtype() : DType::kUndefined;
  if (ctx.has_input(1) && !IsIntegerTensorType(ctx.input_type(1)) && !ctx.input_type(1).is_none())
    return ctx.Error("input 1 (axes) must be an int64 tensor, got ", ctx.input_type(1).ToString());
  if (!x.is_tensor() || !x.shape().ranked()) {
    ctx.set_output(0, Type::Tensor(dt));
    return absl::OkStatus();
  }
  const Shape& s = x.shape();
  std::vector<bool> drop(s.rank(), false);
  if (ctx.has_input(1)) {
    auto axes = ConstInts(ctx, 1);
    if (!axes) {
      // Unknown axes: the rank is known when their count is.
      const Type& at = ctx.input_type(1);
      Shape out;
      if (at.is_tensor() && at.shape().ranked() && at.shape().rank() == 1 && at.shape()[0].is_static() &&
          at.shape()[0].value() <= s.rank())
        out = Shape(DimVector(s.rank() - at.shape()[0].value()));
      ctx.set_output(0, Type::Tensor(dt, out));
      return absl::OkStatus();
    }
    auto norm = NormalizeAxes(*axes, s.rank());
    if (!norm.ok()) return ctx.Error(norm.status().message());
    for (int a : *norm) {
      if (s[a].is_static() && s[a].value() != 1)
        return ctx.Error("cannot squeeze axis ", a, " of ", s.ToString(), ": its size is not 1");
      drop[a] = true;
    }
  } else {
    for (int i = 0; i < s.rank(); ++i) {
      if (!s[i].is_static()) {  // might be 1 at run time
        ctx.set_output(0, Type::Tensor(dt));
        return absl::OkStatus();
      }
      drop[i] = s[i].value() == 1;
    }
  }
  DimVector out;
  for (int i = 0; i < s.rank(); ++i)
    if (!drop[i]) out.push_back(s[i]);
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
  return absl::OkStatus();
}

absl::Status SqueezeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<bool> drop(x.rank(), false);
  if (ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, KernelInts(ctx, 1, "axes"));
    auto norm = NormalizeAxes(axes, x.rank());
    if (!norm.ok()) return ctx.Error(norm.status().message());
    for (int a : *norm) {
      if (x.dim(a) != 1)
        return ctx.Error("cannot squeeze axis ", a, " of ", DimsText(x.dims()), ": its size is not 1");
      drop[a] = true;
    }
  } else {
    for (int i = 0; i < x.rank(); ++i) drop[i] = x.dim(i) == 1;
  }
  Dims out;
  for (int i = 0; i < x.rank(); ++i)
    if (!drop[i]) out.push_back(x.dim(i));
  ctx.set_output(0, x.Reshaped(std::move(out)));
  return absl::OkStatus();
}

absl::Status InferUnsqueeze(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  DType dt = x.is_tensor() ? x.dtype() : DType::kUndefined;
  if (!ctx.has_input(1)) return ctx.Error("input 1 (axes) is missing");
  const Type& at = ctx.input_type(1);
  if (!IsIntegerTensorType(at) && !at.is_none())
    return ctx.Error("input 1 (axes) must be an int64 tensor, got ", at.ToString());
  if (!x.is_tensor() || !x.shape().ranked()) {
    ctx.set_output(0, Type::Tensor(dt));
    return absl::OkStatus();
  }
  const Shape& s = x.shape();
  auto axes = ConstInts(ctx, 1);
  if (!axes) {
    Shape out;
    if (at.is_tensor() && at.shape().ranked() && at.shape().rank() == 1 && at.shape()[0].is_static())
      out = Shape(DimVector(s.rank() + at.shape()[0].value()));
    ctx.set_output(0, Type::Tensor(dt, out));
    return absl::OkStatus();
  }
  int out_rank = s.rank() + static_cast<int>(axes->size());
  auto norm = NormalizeAxes(*axes, out_rank);
  if (!norm.ok()) return ctx.Error(norm.status().message());
  std::vector<bool> inserted(out_rank, false);
  for (int a : *norm) inserted[a] = true;
  DimVector out;
  int j = 0;
  for (int i = 0; i < out_rank; ++i) out.push_back(inserted[i] ? Dim(1) : s[j++]);
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
  return absl::OkStatus();
}

absl::Status UnsqueezeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!ctx.has_input(1)) return ctx.Error("input 1 (axes) is missing");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, KernelInts(ctx, 1, "axes"));
  int out_rank = x.rank() + static_cast<int>(axes.size());
  auto norm = NormalizeAxes(axes, out_rank);
  if (!norm.ok()) return ctx.Error(norm.status().message());
  std::vector<bool> inserted(out_rank, false);
  for (int a : *norm) inserted[a] = true;
  Dims out;
  int j = 0;
  for (int i = 0; i < out_rank; ++i) out.push_back(inserted[i] ? 1 : x.dim(j++));
  ctx.set_output(0, x.Reshaped(std::move(out)));
  return absl::OkStatus();
}

//===--- Expand -----------------------------------------------------------===//

absl::Status InferExpand(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  DType dt = x.is_tensor() ? x.dtype() : DType::kUndefined;
  if (!ctx.has_input(1)) return ctx.Error("input 1 (shape) is missing");
  const Type& st = ctx.input_type(1);
  if (!IsIntegerTensorType(st) && !st.is_none())
    return ctx.Error("input 1 (shape) must be an int64 tensor, got ", st.ToString());
  auto target = ConstInts(ctx, 1);
  if (!target) {
    // The output rank is max(rank(x), len(shape)) when both are known.
    Shape out;
    if (x.is_tensor() && x.shape().ranked() && st.is_tensor() && st.shape().ranked() &&
        st.shape().rank() == 1 && st.shape()[0].is_static()) {
      int64_t n = st.shape()[0].value();
      int rank = std::max<int>(x.shape().rank(), static_cast<int>(n));
      DimVector dims(rank);
      // Input dims other than 1 survive broadcasting.
      for (int i = 0; i < x.shape().rank(); ++i) {
        const Dim& d = x.shape()[i];
        if (d.is_static() && d.value() != 1) dims[rank - x.shape().rank() + i] = d;
      }
      out = Shape(std::move(dims));
    }
    ctx.set_output(0, Type::Tensor(dt, out));
    return absl::OkStatus();
  }
  for (int64_t v : *target)
    if (v < 0) return ctx.Error("shape has a negative dim ", v);
  if (!x.is_tensor() || !x.shape().ranked()) {
    ctx.set_output(0, Type::Tensor(dt));
    return absl::OkStatus();
  }
  auto s = BroadcastShapes(x.shape(), Shape::Static(*target));
  if (!s.ok()) return ctx.Error(s.status().message());
  ctx.set_output(0, Type::Tensor(dt, *s));
  return absl::OkStatus();
}

// Copies `x` broadcast to `out` dims. The innermost loop runs over
// contiguous output rows.
template <typename T>
void BroadcastCopy(const T* in, const Dims& in_dims, T* out, const Dims& out_dims) {
  int rank = static_cast<int>(out_dims.size());
  int64_t total = NumElements(out_dims);
  if (total == 0) return;
  if (rank == 0) {
    out[0] = in[0];
    return;
  }
  Dims strides = BroadcastStrides(in_dims, out_dims);
  int64_t inner = out_dims[rank - 1];
  int64_t inner_stride = strides[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  for (int64_t o = 0; o < total; o += inner) {
    T* dst = out + o;
    const T* src = in + off;
    if (inner_stride == 0) std::fill(dst, dst + inner, *src);
    else std::copy(src, src + inner, dst);
    for (int d = rank - 2; d >= 0; --d) {
      if (++idx[d] < out_dims[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (out_dims[d] - 1);
      idx[d] = 0;
    }
  }
}

absl::Status ExpandKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> target, KernelInts(ctx, 1, "shape"));
  for (int64_t v : target)
    if (v < 0) return ctx.Error("shape has a negative dim ", v);
  auto dims = BroadcastDims(x.dims(), target);
  if (!dims.ok()) return ctx.Error(dims.status().message());
  int64_t n = 1;
  for (int64_t d : *dims) n = MulSat(n, d);
  if (n > kMaxElements) return ctx.Error("output shape ", DimsText(*dims), " is too large");
  Tensor& y = ctx.AllocOutput(0, x.dtype(), *dims);
  DispatchBySize(x.dtype(), [&]<typename T>() { BroadcastCopy<T>(x.data<T>(), x.dims(), y.data<T>(), *dims); });
  return absl::OkStatus();
}

}  // namespace

void RegisterShapeOps(OpRegistry& r) {
  r.Register("Shape").Inputs(1).Outputs(1).Class(OpClass::kShape)
      .Attr("start", AttrKind::kInt, "0").Attr("end", AttrKind::kInt, "rank")
      .Infer(ReqI<InferShape, 1>).Kernel(ReqK<ShapeKernel, 1>).Cost(MetaCost);
  r.Register("Size").Inputs(1).Outputs(1).Class(OpClass::kShape)
      .Infer(ReqI<InferSize, 1>).Kernel(ReqK<SizeKernel, 1>).Cost(MetaCost);
  r.Register("Reshape").Inputs(2).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("allowzero", AttrKind::kInt, "0")
      .Infer(ReqI<InferReshape, 2>).Kernel(ReqK<ReshapeKernel, 2>).Cost(MoveCost).Upgrade(UpgradeReshape);
  r.Register("Flatten").Inputs(1).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("axis", AttrKind::kInt, "1")
      .Infer(ReqI<InferFlatten, 1>).Kernel(ReqK<FlattenKernel, 1>).Cost(MoveCost);
  r.Register("Squeeze").Inputs(1, 2).Outputs(1).Class(OpClass::kDataMovement)
      .Infer(ReqI<InferSqueeze, 1>).Kernel(ReqK<SqueezeKernel, 1>).Cost(MoveCost).Upgrade(UpgradeAxesAttr);
  r.Register("Unsqueeze").Inputs(2).Outputs(1).Class(OpClass::kDataMovement)
      .Infer(ReqI<InferUnsqueeze, 2>).Kernel(ReqK<UnsqueezeKernel, 2>).Cost(MoveCost).Upgrade(UpgradeAxesAttr);
  r.Register("Expand").Inputs(2).Outputs(1).Class(OpClass::kDataMovement)
      .Infer(ReqI<InferExpand, 2>).Kernel(ReqK<ExpandKernel, 2>).Cost(MoveCost);
}

}  // namespace kiln
