//===- movement.cc - Data movement operators ------------------------------===//
//
// Transpose, Concat, Split, Slice, Gather, GatherElements, GatherND, Scatter,
// ScatterElements, ScatterND, Pad, Tile, DepthToSpace, SpaceToDepth,
// Compress, ReverseSequence, Trilu.
//
// Kernels move elements without looking at them, so they are instantiated
// per element size (DispatchBySize), string tensors included; only the
// reductions of ScatterElements/ScatterND do arithmetic.
//
// Most of the ops here are one primitive: every output dim d maps its index
// i to an input offset offs[d][i] (or to "fill"), and an output element reads
// the input at the sum of its dims' offsets. Transpose, Slice, Tile, Pad (all
// modes), DepthToSpace and SpaceToDepth build such per-dim tables and share
// one copy loop that walks the output in order, with contiguous rows copied
// as blocks.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>

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

OpCost MoveCost(const Node& node) {
  OpCost c;
  auto bytes = [](const Value* v) -> double {
    if (!v || !v->type().is_tensor()) return 0;
    int64_t n = v->type().shape().NumElements();
    return n > 0 ? static_cast<double>(n) * DTypeSize(v->type().dtype()) : 0;
  };
  for (const Value* v : node.inputs()) c.bytes_read += bytes(v);
  for (const Value* v : node.outputs()) c.bytes_written += bytes(v);
  return c;
}

// Gather, GatherElements, GatherND and Slice read only the elements they
// write (and their indices), not the whole data input: an embedding lookup
// of 64 tokens reads 64 rows of the table.
OpCost SelectCost(const Node& node) {
  OpCost c = MoveCost(node);
  if (node.num_inputs() > 0 && node.input(0) && node.input(0)->type().is_tensor()) {
    int64_t n = node.input(0)->type().shape().NumElements();
    if (n > 0) c.bytes_read -= static_cast<double>(n) * DTypeSize(node.input(0)->type().dtype());
    c.bytes_read += c.bytes_written;
  }
  return c;
}

// Largest tensor a kernel allocates from run-time values.
constexpr int64_t kMaxElements = int64_t{1} << 32;

// Errors when an output shape computed from run-time values is too large to
// allocate (zero dims do not hide huge ones: offset tables are per dim).
absl::Status CheckOutputSize(const KernelContext& ctx, const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return ctx.Error("output dim ", d, " is negative");
    if (d == 0) continue;
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements)
      return ctx.Error("output shape [", absl::StrJoin(dims, ","), "] is too large");
  }
  return absl::OkStatus();
}

std::string DimsText(const Dims& d) { return absl::StrCat("[", absl::StrJoin(d, ","), "]"); }

bool IsIntegerTensorType(const Type& t) {
  return t.is_tensor() && (t.dtype() == DType::kUndefined || IsInteger(t.dtype()));
}

// Input `i` as int64 values when it is known; nullopt otherwise.
std::optional<std::vector<int64_t>> ConstInts(const InferContext& ctx, int i) {
  const Tensor* t = ctx.const_input(i);
  if (!t || !IsInteger(t->dtype())) return std::nullopt;
  return ToInt64Vector(*t);
}

absl::StatusOr<std::vector<int64_t>> KernelInts(const KernelContext& ctx, int i, absl::string_view what) {
  const Tensor& t = ctx.input(i);
  if (!IsInteger(t.dtype()))
    return ctx.Error(what, " must be an integer tensor, got ", DTypeName(t.dtype()));
  if (t.rank() > 1) return ctx.Error(what, " must be 1-D, got rank ", t.rank());
  return ToInt64Vector(t);
}

// The dtype and shape of input i, with "unknown" for missing information.
DType InDType(const InferContext& ctx, int i) {
  return ctx.has_input(i) && ctx.input_type(i).is_tensor() ? ctx.input_type(i).dtype() : DType::kUndefined;
}
const Shape* RankedShape(const InferContext& ctx, int i) {
  if (!ctx.has_input(i)) return nullptr;
  const Type& t = ctx.input_type(i);
  return t.is_tensor() && t.shape().ranked() ? &t.shape() : nullptr;
}

absl::Status RequireTensor(const InferContext& ctx, int i, absl::string_view what) {
  if (!ctx.has_input(i)) return absl::OkStatus();
  const Type& t = ctx.input_type(i);
  if (!t.is_none() && !t.is_tensor()) return ctx.Error(what, " must be a tensor, got ", t.ToString());
  return absl::OkStatus();
}

absl::Status RequireIndexType(const InferContext& ctx, int i, absl::string_view what) {
  if (!ctx.has_input(i)) return absl::OkStatus();
  const Type& t = ctx.input_type(i);
  if (t.is_none()) return absl::OkStatus();
  if (!IsIntegerTensorType(t)) return ctx.Error(what, " must be an integer tensor, got ", t.ToString());
  return absl::OkStatus();
}

void AttrToInput(Graph& g, Node* node, absl::string_view name, int index) {
  if (!node->has_attr(name)) return;
  std::vector<int64_t> v = node->GetInts(name);
  node->RemoveAttr(name);
  Value* c = g.AddConstant(g.UniqueName(name), Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())}));
  while (node->num_inputs() < index) node->AddInput(nullptr);
  node->SetInput(index, c);
}

// Offset that means "write the fill value" in an offset table.
constexpr int64_t kFill = INT64_MIN;
using OffsetTable = std::vector<std::vector<int64_t>>;

// out[o] = in[sum over d of offs[d][i_d]] for every output index (i_0, ...);
// an offset of kFill in any dim writes `fill` instead.
template <typename T>
void GatherOffsets(const T* in, T* out, const Dims& out_dims, const OffsetTable& offs, const T& fill) {
  int rank = static_cast<int>(out_dims.size());
  int64_t total = NumElements(out_dims);
  if (total == 0) return;
  if (rank == 0) {
    out[0] = in[0];
    return;
  }
  const std::vector<int64_t>& last = offs[rank - 1];
  int64_t inner = out_dims[rank - 1];
  bool contiguous = last[0] != kFill;
  bool inner_fill = false;
  for (int64_t i = 0; i < inner; ++i) {
    if (last[i] == kFill) inner_fill = true;
    if (last[i] == kFill || last[i] != last[0] + i) contiguous = false;
  }
  std::vector<int64_t> idx(rank - 1, 0);
  int64_t base = 0;
  int fills = 0;
  for (int d = 0; d < rank - 1; ++d) {
    if (offs[d][0] == kFill) ++fills;
    else base += offs[d][0];
  }
  for (int64_t o = 0; o < total; o += inner) {
    T* dst = out + o;
    if (fills) {
      std::fill(dst, dst + inner, fill);
    } else if (contiguous) {
      const T* src = in + base + last[0];
      std::copy(src, src + inner, dst);
    } else if (inner_fill) {
      for (int64_t i = 0; i < inner; ++i) dst[i] = last[i] == kFill ? fill : in[base + last[i]];
    } else {
      const T* src = in + base;
      for (int64_t i = 0; i < inner; ++i) dst[i] = src[last[i]];
    }
    for (int d = rank - 2; d >= 0; --d) {
      int64_t prev = offs[d][idx[d]];
      if (prev == kFill) --fills;
      else base -= prev;
      bool wrapped = ++idx[d] == out_dims[d];
      if (wrapped) idx[d] = 0;
      int64_t next = offs[d][idx[d]];
      if (next == kFill) ++fills;
      else base += next;
      if (!wrapped) break;
    }
  }
}

// Runs GatherOffsets for a tensor of any dtype; `fill` (one element of x's
// dtype, or undefined for zero) supplies the fill value.
void RunGather(const Tensor& x, Tensor& y, const OffsetTable& offs, const Tensor* fill = nullptr) {
  DispatchBySize(x.dtype(), [&]<typename T>() {
    T f{};
    if (fill && fill->defined() && fill->numel() > 0) f = fill->data<T>()[0];
    GatherOffsets<T>(x.data<T>(), y.data<T>(), y.dims(), offs, f);
  });
}

// The offset table of a transpose: output dim d walks input dim perm[d].
OffsetTable TransposeTable(const Dims& in_dims, const std::vector<int>& perm) {
  Dims strides = StridesOf(in_dims);
  OffsetTable t(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    int64_t n = in_dims[perm[d]];
    t[d].resize(n);
    for (int64_t i = 0; i < n; ++i) t[d][i] = i * strides[perm[d]];
  }
  return t;
}

//===--- Transpose --------------------------------------------------------===//

absl::StatusOr<std::vector<int>> PermFor(const Node& n, int rank) {
  std::vector<int64_t> p = n.GetInts("perm");
  std::vector<int> perm;
  if (!n.has_attr("perm")) {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
    return perm;
  }
  if (static_cast<int>(p.size()) != rank)
    return InvalidArgument("perm has ", p.size(), " entries but the input has rank ", rank);
  std::vector<bool> seen(rank, false);
  for (int64_t a : p) {
    if (a < 0 || a >= rank || seen[a]) return InvalidArgument("perm [", absl::StrJoin(p, ","), "] is not a permutation");
    seen[a] = true;
    perm.push_back(static_cast<int>(a));
  }
  return perm;
}

absl::Status InferTranspose(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  DType dt = InDType(ctx, 0);
  const Shape* s = RankedShape(ctx, 0);
  if (!s) {
    Shape out;
    if (ctx.node().has_attr("perm")) out = Shape(DimVector(ctx.node().GetInts("perm").size()));
    ctx.set_output(0, Type::Tensor(dt, out));
    return absl::OkStatus();
  }
  auto perm = PermFor(ctx.node(), s->rank());
  if (!perm.ok()) return ctx.Error(perm.status().message());
  DimVector out;
  for (int p : *perm) out.push_back((*s)[p]);
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
  return absl::OkStatus();
}

absl::Status TransposeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto perm = PermFor(ctx.node(), x.rank());
  if (!perm.ok()) return ctx.Error(perm.status().message());
  Dims out;
  for (int p : *perm) out.push_back(x.dim(p));
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out);
  RunGather(x, y, TransposeTable(x.dims(), *perm));
  return absl::OkStatus();
}

//===--- Concat -----------------------------------------------------------===//

absl::Status UpgradeConcat(Graph&, Node* node, int64_t opset) {
  if (opset < 4 && !node->has_attr("axis")) node->SetAttr("axis", Attribute::Int(1));
  return absl::OkStatus();
}

absl::Status InferConcat(InferContext& ctx) {
  DType dt = DType::kUndefined;
  int rank = -1;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
    KILN_RETURN_IF_ERROR(RequireTensor(ctx, i, absl::StrCat("input ", i)));
    DType d = InDType(ctx, i);
    if (d != DType::kUndefined) {
      if (dt != DType::kUndefined && d != dt)
        return ctx.Error("input ", i, " has dtype ", DTypeName(d), ", expected ", DTypeName(dt));
      dt = d;
    }
    if (const Shape* s = RankedShape(ctx, i)) {
      if (rank >= 0 && s->rank() != rank) return ctx.Error("input ", i, " has rank ", s->rank(), ", expected ", rank);
      rank = s->rank();
    }
  }
  if (rank < 0) {
    ctx.set_output(0, Type::Tensor(dt));
    return absl::OkStatus();
  }
  int64_t a = ctx.node().GetInt("axis", 0);
  if (a < -rank || a >= rank) return ctx.Error("axis ", a, " is out of range for rank ", rank);
  int axis = static_cast<int>(a < 0 ? a + rank : a);
  DimVector out(rank);
  bool sum_known = true;
  int64_t sum = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Shape* s = RankedShape(ctx, i);
    if (!s) {
      sum_known = false;
      continue;
    }
    for (int d = 0; d < rank; ++d) {
      const Dim& dim = (*s)[d];
      if (d == axis) {
        if (dim.is_static()) sum += dim.value();
        else sum_known = false;
        continue;
      }
      if (dim.is_static()) {
        if (out[d].is_static() && out[d].value() != dim.value())
          return ctx.Error("input ", i, " has dim ", d, " = ", dim.value(), ", expected ", out[d].value());
        out[d] = dim;
      } else if (dim.is_symbolic() && out[d].is_unknown()) {
        out[d] = dim;
      }
    }
  }
  if (sum_known) out[axis] = Dim(sum);
  else if (ctx.num_inputs() == 1) out[axis] = (*RankedShape(ctx, 0))[axis];
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
  return absl::OkStatus();
}

absl::Status ConcatKernel(KernelContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.Error("needs at least one input");
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
  const Tensor& x0 = ctx.input(0);
  int rank = x0.rank();
  int64_t a = ctx.node().GetInt("axis", 0);
  if (rank == 0) return ctx.Error("cannot concatenate scalars");
  if (a < -rank || a >= rank) return ctx.Error("axis ", a, " is out of range for rank ", rank);
  int axis = static_cast<int>(a < 0 ? a + rank : a);
  Dims out = x0.dims();
  out[axis] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    if (x.dtype() != x0.dtype())
      return ctx.Error("input ", i, " has dtype ", DTypeName(x.dtype()), ", expected ", DTypeName(x0.dtype()));
    if (x.rank() != rank) return ctx.Error("input ", i, " has rank ", x.rank(), ", expected ", rank);
    for (int d = 0; d < rank; ++d)
      if (d != axis && x.dim(d) != x0.dim(d))
        return ctx.Error("input ", i, " has shape ", DimsText(x.dims()), ", which does not match ",
                         DimsText(x0.dims()), " outside axis ", axis);
    out[axis] += x.dim(axis);
  }
  Tensor& y = ctx.AllocOutput(0, x0.dtype(), out);
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= out[d];
  int64_t inner = 1;
  for (int d = axis + 1; d < rank; ++d) inner *= out[d];
  int64_t out_row = out[axis] * inner;
  DispatchBySize(x0.dtype(), [&]<typename T>() {
    T* dst = y.data<T>();
    int64_t col = 0;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& x = ctx.input(i);
      int64_t row = x.dim(axis) * inner;
      const T* src = x.data<T>();
      for (int64_t o = 0; o < outer; ++o) std::copy(src + o * row, src + (o + 1) * row, dst + o * out_row + col);
      col += row;
    }
  });
  return absl::OkStatus();
}

//===--- Split ------------------------------------------------------------===//

absl::Status UpgradeSplit(Graph& g, Node* node, int64_t opset) {
  if (opset < 2 && node->input(1)) {
    // Split-1 takes `split` as an optional input of the data's float type.
    Value* s = node->input(1);
    if (!s->constant_data())
      return InvalidArgument("Split-1 with a non-constant 'split' input is not supported");
    std::vector<int64_t> v = ToInt64Vector(s->constant());
    node->SetInput(1, g.AddConstant(g.UniqueName("split"), Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())})));
  }
  if (opset < 13 && node->has_attr("split")) AttrToInput(g, node, "split", 1);
  return absl::OkStatus();
}

absl::Status InferSplit(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  KILN_RETURN_IF_ERROR(RequireIndexType(ctx, 1, "input 1 (split)"));
  DType dt = InDType(ctx, 0);
  const Shape* s = RankedShape(ctx, 0);
  int n = ctx.num_outputs();
  if (!s) {
    for (int i = 0; i < n; ++i) ctx.set_output(i, Type::Tensor(dt));
    return absl::OkStatus();
  }
  int rank = s->rank();
  int64_t a = ctx.node().GetInt("axis", 0);
  if (a < -rank || a >= rank) return ctx.Error("axis ", a, " is out of range for rank ", rank);
  int axis = static_cast<int>(a < 0 ? a + rank : a);
  const Dim& d = (*s)[axis];
  DimVector parts(n);
  if (ctx.has_input(1)) {
    if (auto split = ConstInts(ctx, 1)) {
      if (static_cast<int>(split->size()) != n)
        return ctx.Error("split has ", split->size(), " entries for ", n, " outputs");
      int64_t sum = 0;
      for (int64_t v : *split) {
        if (v < 0) return ctx.Error("split has a negative entry ", v);
        sum += v;
      }
      if (d.is_static() && sum != d.value())
        return ctx.Error("split sums to ", sum, " but axis ", axis, " has size ", d.value());
      for (int i = 0; i < n; ++i) parts[i] = Dim((*split)[i]);
    }
  } else if (d.is_static()) {
    if (d.value() % n != 0)
      return ctx.Error("axis ", axis, " of size ", d.value(), " does not split evenly into ", n, " outputs");
    for (int i = 0; i < n; ++i) parts[i] = Dim(d.value() / n);
  } else if (n == 1) {
    parts[0] = d;
  }
  for (int i = 0; i < n; ++i) {
    DimVector dims = s->dims();
    dims[axis] = parts[i];
    ctx.set_output(i, Type::Tensor(dt, Shape(std::move(dims))));
  }
  return absl::OkStatus();
}

absl::Status SplitKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int rank = x.rank();
  int n = ctx.num_outputs();
  int64_t a = ctx.node().GetInt("axis", 0);
  if (rank == 0) return ctx.Error("cannot split a scalar");
  if (a < -rank || a >= rank) return ctx.Error("axis ", a, " is out of range for rank ", rank);
  int axis = static_cast<int>(a < 0 ? a + rank : a);
  std::vector<int64_t> split;
  if (ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(split, KernelInts(ctx, 1, "split"));
    if (static_cast<int>(split.size()) != n) return ctx.Error("split has ", split.size(), " entries for ", n, " outputs");
    int64_t sum = 0;
    for (int64_t v : split) {
      if (v < 0) return ctx.Error("split has a negative entry ", v);
      sum += v;
    }
    if (sum != x.dim(axis)) return ctx.Error("split sums to ", sum, " but axis ", axis, " has size ", x.dim(axis));
  } else {
    if (x.dim(axis) % n != 0)
      return ctx.Error("axis ", axis, " of size ", x.dim(axis), " does not split evenly into ", n, " outputs");
    split.assign(n, x.dim(axis) / n);
  }
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= x.dim(d);
  int64_t inner = 1;
  for (int d = axis + 1; d < rank; ++d) inner *= x.dim(d);
  int64_t in_row = x.dim(axis) * inner;
  DispatchBySize(x.dtype(), [&]<typename T>() {
    const T* src = x.data<T>();
    int64_t col = 0;
    for (int i = 0; i < n; ++i) {
      Dims dims = x.dims();
      dims[axis] = split[i];
      Tensor& y = ctx.AllocOutput(i, x.dtype(), dims);
      T* dst = y.data<T>();
      int64_t row = split[i] * inner;
      for (int64_t o = 0; o < outer; ++o)
        std::copy(src + o * in_row + col, src + o * in_row + col + row, dst + o * row);
      col += row;
    }
  });
  return absl::OkStatus();
}

//===--- Slice ------------------------------------------------------------===//

absl::Status UpgradeSlice(Graph& g, Node* node, int64_t opset) {
  if (opset >= 10) return absl::OkStatus();
  bool has_axes = node->has_attr("axes");
  AttrToInput(g, node, "starts", 1);
  AttrToInput(g, node, "ends", 2);
  if (has_axes) AttrToInput(g, node, "axes", 3);
  return absl::OkStatus();
}

// Normalized start and element count of one sliced axis (numpy semantics).
struct SliceRange {
  int64_t start = 0, count = 0, step = 1;
};

SliceRange ClampSlice(int64_t start, int64_t end, int64_t step, int64_t dim) {
  SliceRange r;
  r.step = step;
  if (dim == 0) return r;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    r.count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    // -step without overflow for step == INT64_MIN.
    uint64_t back = static_cast<uint64_t>(-(step + 1)) + 1;
    r.count = start > end ? static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / back) + 1 : 0;
  }
  r.start = start;
  return r;
}

// Reads starts/ends/axes/steps; fails when they are inconsistent.
struct SliceParams {
  std::vector<int64_t> starts, ends, steps;
  std::vector<int> axes;
};

absl::StatusOr<SliceParams> MakeSliceParams(std::vector<int64_t> starts, std::vector<int64_t> ends,
                                            std::optional<std::vector<int64_t>> axes,
                                            std::optional<std::vector<int64_t>> steps, int rank) {
  SliceParams p;
  size_t n = starts.size();
  if (ends.size() != n) return InvalidArgument("starts has ", n, " entries but ends has ", ends.size());
  std::vector<int64_t> ax;
  if (axes) {
    ax = *axes;
    if (ax.size() != n) return InvalidArgument("starts has ", n, " entries but axes has ", ax.size());
  } else {
    if (static_cast<int>(n) > rank) return InvalidArgument("starts has ", n, " entries for rank ", rank);
    for (size_t i = 0; i < n; ++i) ax.push_back(static_cast<int64_t>(i));
  }
  if (steps) {
    if (steps->size() != n) return InvalidArgument("starts has ", n, " entries but steps has ", steps->size());
    for (int64_t s : *steps)
      if (s == 0) return InvalidArgument("steps must not be 0");
    p.steps = *steps;
  } else {
    p.steps.assign(n, 1);
  }
  KILN_ASSIGN_OR_RETURN(p.axes, NormalizeAxes(ax, rank));
  p.starts = std::move(starts);
  p.ends = std::move(ends);
  return p;
}

absl::Status InferSlice(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  for (int i = 1; i < 5; ++i) KILN_RETURN_IF_ERROR(RequireIndexType(ctx, i, absl::StrCat("input ", i)));
  if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.Error("starts and ends are required");
  DType dt = InDType(ctx, 0);
  const Shape* s = RankedShape(ctx, 0);
  if (!s) {
    ctx.set_output(0, Type::Tensor(dt));
    return absl::OkStatus();
  }
  auto starts = ConstInts(ctx, 1);
  auto ends = ConstInts(ctx, 2);
  std::optional<std::vector<int64_t>> axes, steps;
  bool known = starts && ends;
  if (ctx.has_input(3)) known = known && (axes = ConstInts(ctx, 3)).has_value();
  if (ctx.has_input(4)) known = known && (steps = ConstInts(ctx, 4)).has_value();
  DimVector out = s->dims();
  if (!known) {
    // Which axes are sliced is known only from constant axes.
    if (ctx.has_input(3) && ctx.const_input(3)) {
      auto ax = NormalizeAxes(*ConstInts(ctx, 3), s->rank());
      if (!ax.ok()) return ctx.Error(ax.status().message());
      for (int a : *ax) out[a] = Dim();
    } else {
      for (Dim& d : out) d = Dim();
    }
    ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
    return absl::OkStatus();
  }
  auto p = MakeSliceParams(*starts, *ends, axes, steps, s->rank());
  if (!p.ok()) return ctx.Error(p.status().message());
  for (size_t i = 0; i < p->axes.size(); ++i) {
    int a = p->axes[i];
    const Dim& d = (*s)[a];
    if (d.is_static()) {
      out[a] = Dim(ClampSlice(p->starts[i], p->ends[i], p->steps[i], d.value()).count);
    } else if ((p->steps[i] == 1 && p->starts[i] == 0 && p->ends[i] >= INT32_MAX) ||
               (p->steps[i] == -1 && (p->starts[i] == -1 || p->starts[i] >= INT32_MAX) &&
                p->ends[i] <= -static_cast<int64_t>(INT32_MAX))) {
      out[a] = d;  // the whole axis, forward or reversed
    } else {
      out[a] = Dim();
    }
  }
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
  return absl::OkStatus();
}

absl::Status SliceKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.Error("starts and ends are required");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> starts, KernelInts(ctx, 1, "starts"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ends, KernelInts(ctx, 2, "ends"));
  std::optional<std::vector<int64_t>> axes, steps;
  if (ctx.has_input(3)) { KILN_ASSIGN_OR_RETURN(axes, KernelInts(ctx, 3, "axes")); }
  if (ctx.has_input(4)) { KILN_ASSIGN_OR_RETURN(steps, KernelInts(ctx, 4, "steps")); }
  auto p = MakeSliceParams(std::move(starts), std::move(ends), axes, steps, x.rank());
  if (!p.ok()) return ctx.Error(p.status().message());
  int rank = x.rank();
  std::vector<SliceRange> ranges(rank);
  for (int d = 0; d < rank; ++d) ranges[d].count = x.dim(d);
  for (size_t i = 0; i < p->axes.size(); ++i)
    ranges[p->axes[i]] = ClampSlice(p->starts[i], p->ends[i], p->steps[i], x.dim(p->axes[i]));
  Dims strides = StridesOf(x.dims());
  Dims out(rank);
  OffsetTable offs(rank);
  for (int d = 0; d < rank; ++d) {
    out[d] = ranges[d].count;
    offs[d].resize(out[d]);
    for (int64_t i = 0; i < out[d]; ++i) offs[d][i] = (ranges[d].start + i * ranges[d].step) * strides[d];
  }
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out);
  RunGather(x, y, offs);
  return absl::OkStatus();
}

//===--- Gather -----------------------------------------------------------===//

// Reads indices as int64 and checks each against [-n, n); negative ones are
// made positive.
absl::StatusOr<std::vector<int64_t>> ReadIndices(const KernelContext& ctx, const Tensor& t, int64_t n,
                                                 absl::string_view what) {
  if (t.dtype() != DType::kI64 && t.dtype() != DType::kI32)
    return ctx.Error(what, " must be int32 or int64, got ", DTypeName(t.dtype()));
  std::vector<int64_t> v = ToInt64Vector(t);
  for (int64_t& i : v) {
    if (i < -n || i >= n) return ctx.Error(what, " value ", i, " is out of range for a dim of size ", n);
    if (i < 0) i += n;
  }
  return v;
}

absl::Status InferGather(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  KILN_RETURN_IF_ERROR(RequireIndexType(ctx, 1, "input 1 (indices)"));
  DType dt = InDType(ctx, 0);
  const Shape* s = RankedShape(ctx, 0);
  const Shape* ind = RankedShape(ctx, 1);
  if (!s || !ind) {
    ctx.set_output(0, Type::Tensor(dt));
    return absl::OkStatus();
  }
  int rank = s->rank();
  if (rank == 0) return ctx.Error("input 0 must have rank >= 1");
  int64_t a = ctx.node().GetInt("axis", 0);
  if (a < -rank || a >= rank) return ctx.Error("axis ", a, " is out of range for rank ", rank);
  int axis = static_cast<int>(a < 0 ? a + rank : a);
  DimVector out(s->dims().begin(), s->dims().begin() + axis);
  out.insert(out.end(), ind->dims().begin(), ind->dims().end());
  out.insert(out.end(), s->dims().begin() + axis + 1, s->dims().end());
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
  return absl::OkStatus();
}

absl::Status GatherKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  int rank = x.rank();
  if (rank == 0) return ctx.Error("input 0 must have rank >= 1");
  int64_t a = ctx.node().GetInt("axis", 0);
  if (a < -rank || a >= rank) return ctx.Error("axis ", a, " is out of range for rank ", rank);
  int axis = static_cast<int>(a < 0 ? a + rank : a);
  int64_t n = x.dim(axis);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(ctx, ind, n, "indices"));
  Dims out(x.dims().begin(), x.dims().begin() + axis);
  out.insert(out.end(), ind.dims().begin(), ind.dims().end());
  out.insert(out.end(), x.dims().begin() + axis + 1, x.dims().end());
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out);
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= x.dim(d);
  int64_t inner = 1;
  for (int d = axis + 1; d < rank; ++d) inner *= x.dim(d);
  int64_t k = static_cast<int64_t>(idx.size());
  DispatchBySize(x.dtype(), [&]<typename T>() {
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      const T* block = src + o * n * inner;
      for (int64_t j = 0; j < k; ++j, dst += inner) {
        const T* row = block + idx[j] * inner;
        std::copy(row, row + inner, dst);
      }
    }
  });
  return absl::OkStatus();
}

//===--- GatherElements, ScatterElements ----------------------------------===//

// Checks the shapes of GatherElements/ScatterElements: `data` and `ind` have
// the same rank, and ind's dims are within data's outside `axis`.
absl::StatusOr<int> ElementsAxis(const KernelContext& ctx, const Tensor& data, const Tensor& ind) {
  int rank = data.rank();
  if (rank == 0) return ctx.Error("data must have rank >= 1");
  if (ind.rank() != rank) return ctx.Error("indices have rank ", ind.rank(), ", expected ", rank);
  int64_t a = ctx.node().GetInt("axis", 0);
  if (a < -rank || a >= rank) return ctx.Error("axis ", a, " is out of range for rank ", rank);
  int axis = static_cast<int>(a < 0 ? a + rank : a);
  for (int d = 0; d < rank; ++d)
    if (d != axis && ind.dim(d) > data.dim(d))
      return ctx.Error("indices shape ", DimsText(ind.dims()), " exceeds data shape ", DimsText(data.dims()),
                       " outside axis ", axis);
  return axis;
}

absl::Status InferGatherElements(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  KILN_RETURN_IF_ERROR(RequireIndexType(ctx, 1, "input 1 (indices)"));
  const Shape* s = RankedShape(ctx, 0);
  const Shape* ind = RankedShape(ctx, 1);
  if (s && ind && s->rank() != ind->rank())
    return ctx.Error("input 1 has rank ", ind->rank(), ", expected ", s->rank());
  if (s) {
    int64_t a = ctx.node().GetInt("axis", 0);
    if (a < -s->rank() || a >= s->rank()) return ctx.Error("axis ", a, " is out of range for rank ", s->rank());
  }
  ctx.set_output(0, Type::Tensor(InDType(ctx, 0), ind ? *ind : Shape()));
  return absl::OkStatus();
}

absl::Status GatherElementsKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  KILN_ASSIGN_OR_RETURN(int axis, ElementsAxis(ctx, x, ind));
  int64_t n = x.dim(axis);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(ctx, ind, n, "indices"));
  Tensor& y = ctx.AllocOutput(0, x.dtype(), ind.dims());
  Dims strides = StridesOf(x.dims());
  int64_t axis_stride = strides[axis];
  strides[axis] = 0;
  DispatchBySize(x.dtype(), [&]<typename T>() {
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    ForEachBroadcast<1>(ind.dims(), {strides}, [&](int64_t i, const std::array<int64_t, 1>& off) {
      dst[i] = src[off[0] + idx[i] * axis_stride];
    });
  });
  return absl::OkStatus();
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

absl::StatusOr<Reduction> ParseReduction(const KernelContext& ctx) {
  std::string r = ctx.node().GetString("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return ctx.Error("unknown reduction '", r, "'");
}

template <typename T> struct ComputeType { using type = T; };
template <> struct ComputeType<Half> { using type = float; };
template <> struct ComputeType<BFloat16> { using type = float; };

template <typename T>
inline void Combine(T& dst, const T& src, Reduction r) {
  using C = typename ComputeType<T>::type;
  C a = static_cast<C>(dst), b = static_cast<C>(src);
  switch (r) {
    case Reduction::kNone: dst = src; return;
    case Reduction::kAdd:
      if constexpr (std::is_same_v<T, bool>) dst = a || b;
      else dst = static_cast<T>(a + b);
      return;
    case Reduction::kMul:
      if constexpr (std::is_same_v<T, bool>) dst = a && b;
      else dst = static_cast<T>(a * b);
      return;
    case Reduction::kMax: dst = static_cast<T>(std::max(a, b)); return;
    case Reduction::kMin: dst = static_cast<T>(std::min(a, b)); return;
  }
}

// Calls `body<T>()` with T the storage type: by element size for plain
// assignment, by numeric type for reductions.
template <typename F>
absl::Status DispatchScatter(const KernelContext& ctx, DType dt, Reduction r, F&& body) {
  if (r == Reduction::kNone) {
    DispatchBySize(dt, body);
    return absl::OkStatus();
  }
  if (!IsNumeric(dt)) return ctx.Error("reduction is not supported for dtype ", DTypeName(dt));
  DispatchNumeric(dt, body);
  return absl::OkStatus();
}

absl::Status InferScatterLike(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  KILN_RETURN_IF_ERROR(RequireIndexType(ctx, 1, "input 1 (indices)"));
  DType d0 = InDType(ctx, 0), d2 = InDType(ctx, 2);
  if (d0 != DType::kUndefined && d2 != DType::kUndefined && d0 != d2)
    return ctx.Error("updates have dtype ", DTypeName(d2), ", expected ", DTypeName(d0));
  ctx.set_output(0, ctx.input_type(0).is_tensor() ? ctx.input_type(0) : Type::Tensor(d0 != DType::kUndefined ? d0 : d2));
  return absl::OkStatus();
}

absl::Status InferScatterElements(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(InferScatterLike(ctx));
  const Shape* s = RankedShape(ctx, 0);
  const Shape* ind = RankedShape(ctx, 1);
  const Shape* upd = RankedShape(ctx, 2);
  if (s && ind && s->rank() != ind->rank()) return ctx.Error("input 1 has rank ", ind->rank(), ", expected ", s->rank());
  if (ind && upd && ind->rank() != upd->rank())
    return ctx.Error("updates have rank ", upd->rank(), ", expected ", ind->rank());
  return absl::OkStatus();
}

absl::Status ScatterElementsKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  KILN_ASSIGN_OR_RETURN(Reduction red, ParseReduction(ctx));
  KILN_ASSIGN_OR_RETURN(int axis, ElementsAxis(ctx, x, ind));
  if (upd.dtype() != x.dtype())
    return ctx.Error("updates have dtype ", DTypeName(upd.dtype()), ", expected ", DTypeName(x.dtype()));
  if (upd.dims() != ind.dims())
    return ctx.Error("updates shape ", DimsText(upd.dims()), " differs from indices shape ", DimsText(ind.dims()));
  int64_t n = x.dim(axis);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(ctx, ind, n, "indices"));
  Tensor y = x.Clone();
  Dims strides = StridesOf(x.dims());
  int64_t axis_stride = strides[axis];
  strides[axis] = 0;
  KILN_RETURN_IF_ERROR(DispatchScatter(ctx, x.dtype(), red, [&]<typename T>() {
    T* dst = y.data<T>();
    const T* src = upd.data<T>();
    ForEachBroadcast<1>(ind.dims(), {strides}, [&](int64_t i, const std::array<int64_t, 1>& off) {
      T& d = dst[off[0] + idx[i] * axis_stride];
      if constexpr (std::is_arithmetic_v<T> || kIsHalfLike<T>) Combine(d, src[i], red);
      else d = src[i];
    });
  }));
  ctx.set_output(0, std::move(y));
  return absl::OkStatus();
}

//===--- GatherND, ScatterND ----------------------------------------------===//

absl::Status InferGatherND(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  KILN_RETURN_IF_ERROR(RequireIndexType(ctx, 1, "input 1 (indices)"));
  DType dt = InDType(ctx, 0);
  const Shape* s = RankedShape(ctx, 0);
  const Shape* ind = RankedShape(ctx, 1);
  int64_t b = ctx.node().GetInt("batch_dims", 0);
  if (!s || !ind) {
    ctx.set_output(0, Type::Tensor(dt));
    return absl::OkStatus();
  }
  int r = s->rank(), q = ind->rank();
  if (r < 1 || q < 1) return ctx.Error("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) return ctx.Error("batch_dims ", b, " must be in [0, ", std::min(r, q), ")");
  const Dim& kd = (*ind)[q - 1];
  if (!kd.is_static()) {
    ctx.set_output(0, Type::Tensor(dt));
    return absl::OkStatus();
  }
  int64_t k = kd.value();
  if (k < 1 || k > r - b) return ctx.Error("indices.shape[-1] = ", k, " must be in [1, ", r - b, "]");
  for (int i = 0; i < b; ++i)
    if ((*s)[i].is_static() && (*ind)[i].is_static() && (*s)[i].value() != (*ind)[i].value())
      return ctx.Error("batch dim ", i, " differs between data and indices");
  DimVector out(ind->dims().begin(), ind->dims().end() - 1);
  out.insert(out.end(), s->dims().begin() + b + k, s->dims().end());
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
  return absl::OkStatus();
}

// Offsets (within one batch of data) of every index tuple of `ind`; checks
// bounds. data_dims are the dims of one batch of data.
absl::StatusOr<std::vector<int64_t>> TupleOffsets(const KernelContext& ctx, const Tensor& ind, const Dims& data_dims,
                                                  int64_t k) {
  if (ind.dtype() != DType::kI64 && ind.dtype() != DType::kI32)
    return ctx.Error("indices must be int32 or int64, got ", DTypeName(ind.dtype()));
  std::vector<int64_t> v = ToInt64Vector(ind);
  Dims strides = StridesOf(data_dims);
  int64_t tuples = k == 0 ? 0 : static_cast<int64_t>(v.size()) / k;
  std::vector<int64_t> offs(tuples);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t i = v[t * k + j], n = data_dims[j];
      if (i < -n || i >= n) return ctx.Error("index ", i, " is out of range for a dim of size ", n);
      if (i < 0) i += n;
      off += i * strides[j];
    }
    offs[t] = off;
  }
  return offs;
}

absl::Status GatherNDKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  int r = x.rank(), q = ind.rank();
  int64_t b = ctx.node().GetInt("batch_dims", 0);
  if (r < 1 || q < 1) return ctx.Error("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) return ctx.Error("batch_dims ", b, " must be in [0, ", std::min(r, q), ")");
  int64_t k = ind.dim(q - 1);
  if (k < 1 || k > r - b) return ctx.Error("indices.shape[-1] = ", k, " must be in [1, ", r - b, "]");
  int64_t batches = 1;
  for (int i = 0; i < b; ++i) {
    if (x.dim(i) != ind.dim(i)) return ctx.Error("batch dim ", i, " differs between data and indices");
    batches *= x.dim(i);
  }
  Dims batch_dims(x.dims().begin() + b, x.dims().end());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> offs, TupleOffsets(ctx, ind, batch_dims, k));
  Dims out(ind.dims().begin(), ind.dims().end() - 1);
  out.insert(out.end(), x.dims().begin() + b + k, x.dims().end());
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out);
  int64_t slice = 1;
  for (int i = static_cast<int>(b + k); i < r; ++i) slice *= x.dim(i);
  int64_t batch_size = NumElements(batch_dims);
  int64_t per_batch = batches == 0 ? 0 : static_cast<int64_t>(offs.size()) / batches;
  DispatchBySize(x.dtype(), [&]<typename T>() {
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    for (int64_t bi = 0; bi < batches; ++bi)
      for (int64_t t = 0; t < per_batch; ++t, dst += slice) {
        const T* s = src + bi * batch_size + offs[bi * per_batch + t];
        std::copy(s, s + slice, dst);
      }
  });
  return absl::OkStatus();
}

absl::Status InferScatterND(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(InferScatterLike(ctx));
  const Shape* s = RankedShape(ctx, 0);
  const Shape* ind = RankedShape(ctx, 1);
  const Shape* upd = RankedShape(ctx, 2);
  if (s && ind && upd && ind->rank() >= 1 && (*ind)[ind->rank() - 1].is_static()) {
    int64_t k = (*ind)[ind->rank() - 1].value();
    if (k > s->rank()) return ctx.Error("indices.shape[-1] = ", k, " exceeds the data rank ", s->rank());
    int64_t want = ind->rank() - 1 + s->rank() - k;
    if (upd->rank() != want) return ctx.Error("updates have rank ", upd->rank(), ", expected ", want);
  }
  return absl::OkStatus();
}

absl::Status ScatterNDKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  KILN_ASSIGN_OR_RETURN(Reduction red, ParseReduction(ctx));
  int r = x.rank(), q = ind.rank();
  if (r < 1 || q < 1) return ctx.Error("data and indices must have rank >= 1");
  if (upd.dtype() != x.dtype())
    return ctx.Error("updates have dtype ", DTypeName(upd.dtype()), ", expected ", DTypeName(x.dtype()));
  int64_t k = ind.dim(q - 1);
  if (k < 1 || k > r) return ctx.Error("indices.shape[-1] = ", k, " must be in [1, ", r, "]");
  Dims want(ind.dims().begin(), ind.dims().end() - 1);
  want.insert(want.end(), x.dims().begin() + k, x.dims().end());
  if (upd.dims() != want)
    return ctx.Error("updates have shape ", DimsText(upd.dims()), ", expected ", DimsText(want));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> offs, TupleOffsets(ctx, ind, x.dims(), k));
  int64_t slice = 1;
  for (int i = static_cast<int>(k); i < r; ++i) slice *= x.dim(i);
  Tensor y = x.Clone();
  KILN_RETURN_IF_ERROR(DispatchScatter(ctx, x.dtype(), red, [&]<typename T>() {
    T* dst = y.data<T>();
    const T* src = upd.data<T>();
    for (size_t t = 0; t < offs.size(); ++t) {
      T* d = dst + offs[t];
      const T* s = src + static_cast<int64_t>(t) * slice;
      if constexpr (std::is_arithmetic_v<T> || kIsHalfLike<T>) {
        if (red == Reduction::kNone) std::copy(s, s + slice, d);
        else for (int64_t i = 0; i < slice; ++i) Combine(d[i], s[i], red);
      } else {
        std::copy(s, s + slice, d);
      }
    }
  }));
  ctx.set_output(0, std::move(y));
  return absl::OkStatus();
}

//===--- Pad --------------------------------------------------------------===//

absl::Status UpgradePad(Graph& g, Node* node, int64_t opset) {
  if (opset >= 11) return absl::OkStatus();
  const char* name = node->has_attr("paddings") ? "paddings" : "pads";
  AttrToInput(g, node, name, 1);
  float value = node->GetFloat("value", 0.0f);
  node->RemoveAttr("value");
  if (value != 0.0f) {
    DType dt = node->input(0) && node->input(0)->type().is_tensor() ? node->input(0)->type().dtype() : DType::kF32;
    if (dt == DType::kUndefined || dt == DType::kString) dt = DType::kF32;
    Tensor v = CastTensor(Tensor::Scalar<float>(value), dt);
    node->SetInput(2, g.AddConstant(g.UniqueName("constant_value"), v));
  }
  return absl::OkStatus();
}

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

absl::StatusOr<PadMode> ParsePadMode(const Node& n) {
  std::string m = n.GetString("mode", "constant");
  if (m == "constant") return PadMode::kConstant;
  if (m == "reflect") return PadMode::kReflect;
  if (m == "edge") return PadMode::kEdge;
  if (m == "wrap") return PadMode::kWrap;
  return InvalidArgument("unknown mode '", m, "'");
}

absl::Status InferPad(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  KILN_RETURN_IF_ERROR(RequireIndexType(ctx, 1, "input 1 (pads)"));
  auto mode = ParsePadMode(ctx.node());
  if (!mode.ok()) return ctx.Error(mode.status().message());
  DType dt = InDType(ctx, 0);
  const Shape* s = RankedShape(ctx, 0);
  if (!s) {
    ctx.set_output(0, Type::Tensor(dt));
    return absl::OkStatus();
  }
  DimVector out = s->dims();
  auto pads = ctx.has_input(1) ? ConstInts(ctx, 1) : std::optional<std::vector<int64_t>>();
  if (!pads) {
    for (Dim& d : out) d = Dim();
    ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
    return absl::OkStatus();
  }
  int rank = s->rank();
  if (static_cast<int>(pads->size()) != 2 * rank)
    return ctx.Error("pads has ", pads->size(), " entries, expected ", 2 * rank);
  for (int d = 0; d < rank; ++d) {
    int64_t p = (*pads)[d] + (*pads)[d + rank];
    if (out[d].is_static()) {
      if (out[d].value() + p < 0) return ctx.Error("pads make dim ", d, " negative");
      out[d] = Dim(out[d].value() + p);
    } else if (p != 0) {
      out[d] = Dim();
    }
  }
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
  return absl::OkStatus();
}

absl::Status PadKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto mode = ParsePadMode(ctx.node());
  if (!mode.ok()) return ctx.Error(mode.status().message());
  if (!ctx.has_input(1)) return ctx.Error("input 1 (pads) is missing");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, KernelInts(ctx, 1, "pads"));
  int rank = x.rank();
  if (static_cast<int>(pads.size()) != 2 * rank)
    return ctx.Error("pads has ", pads.size(), " entries, expected ", 2 * rank);
  Tensor fill;
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
    const Tensor& cv = ctx.input(2);
    if (cv.dtype() == x.dtype()) fill = cv;
    else if (IsNumeric(cv.dtype()) && IsNumeric(x.dtype())) fill = CastTensor(cv, x.dtype());
    else return ctx.Error("constant_value has dtype ", DTypeName(cv.dtype()), ", expected ", DTypeName(x.dtype()));
  }
  Dims strides = StridesOf(x.dims());
  Dims out(rank);
  OffsetTable offs(rank);
  for (int d = 0; d < rank; ++d) {
    int64_t n = x.dim(d), pb = pads[d], pe = pads[d + rank];
    if (__builtin_add_overflow(n, pb, &out[d]) || __builtin_add_overflow(out[d], pe, &out[d]))
      return ctx.Error("pads of dim ", d, " are too large");
    if (out[d] < 0) return ctx.Error("pads make dim ", d, " negative");
    KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, Dims(out.begin(), out.begin() + d + 1)));
    if (n == 0 && out[d] > 0 && *mode != PadMode::kConstant)
      return ctx.Error("cannot pad an empty dim ", d, " in this mode");
    offs[d].resize(out[d]);
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t i = o - pb;
      if (i < 0 || i >= n) {
        switch (*mode) {
          case PadMode::kConstant: i = kFill; break;
          case PadMode::kEdge: i = i < 0 ? 0 : n - 1; break;
          case PadMode::kWrap: i = ((i % n) + n) % n; break;
          case PadMode::kReflect:
            if (n == 1) {
              i = 0;
            } else {
              int64_t period = 2 * (n - 1);
              i = ((i % period) + period) % period;
              if (i >= n) i = period - i;
            }
            break;
        }
      }
      offs[d][o] = i == kFill ? kFill : i * strides[d];
    }
  }
  // An empty input dim maps every output index to kFill, so an empty input
  // is never read.
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out);
  RunGather(x, y, offs, fill.defined() ? &fill : nullptr);
  return absl::OkStatus();
}

//===--- Tile -------------------------------------------------------------===//

absl::Status InferTile(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  KILN_RETURN_IF_ERROR(RequireIndexType(ctx, 1, "input 1 (repeats)"));
  DType dt = InDType(ctx, 0);
  const Shape* s = RankedShape(ctx, 0);
  if (!s) {
    ctx.set_output(0, Type::Tensor(dt));
    return absl::OkStatus();
  }
  DimVector out = s->dims();
  auto reps = ctx.has_input(1) ? ConstInts(ctx, 1) : std::nullopt;
  if (!reps) {
    for (Dim& d : out)
      if (!(d.is_static() && d.value() == 0)) d = Dim();
  } else {
    if (static_cast<int>(reps->size()) != s->rank())
      return ctx.Error("repeats has ", reps->size(), " entries, expected ", s->rank());
    for (int d = 0; d < s->rank(); ++d) {
      int64_t r = (*reps)[d];
      if (r < 0) return ctx.Error("repeats has a negative entry ", r);
      if (out[d].is_static()) {
        int64_t n;
        if (__builtin_mul_overflow(out[d].value(), r, &n))
          return ctx.Error("dimension ", d, " (", out[d].value(), " x ", r, " repeats) overflows 64 bits");
        out[d] = Dim(n);
      } else if (r == 0) {
        out[d] = Dim(0);
      } else if (r != 1) {
        out[d] = Dim();
      }
    }
  }
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
  return absl::OkStatus();
}

absl::Status TileKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> reps, KernelInts(ctx, 1, "repeats"));
  int rank = x.rank();
  if (static_cast<int>(reps.size()) != rank) return ctx.Error("repeats has ", reps.size(), " entries, expected ", rank);
  Dims strides = StridesOf(x.dims());
  Dims out(rank);
  OffsetTable offs(rank);
  for (int d = 0; d < rank; ++d) {
    if (reps[d] < 0) return ctx.Error("repeats has a negative entry ", reps[d]);
    if (__builtin_mul_overflow(x.dim(d), reps[d], &out[d])) return ctx.Error("repeats are too large");
    KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, Dims(out.begin(), out.begin() + d + 1)));
    offs[d].resize(out[d]);
    for (int64_t o = 0; o < out[d]; ++o) offs[d][o] = (o % x.dim(d)) * strides[d];
  }
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out);
  RunGather(x, y, offs);
  return absl::OkStatus();
}

//===--- DepthToSpace, SpaceToDepth ---------------------------------------===//

absl::Status InferDepthSpace(InferContext& ctx, bool to_space) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  DType dt = InDType(ctx, 0);
  int64_t b = ctx.node().GetInt("blocksize", 0);
  if (b <= 0) return ctx.Error("blocksize must be positive, got ", b);
  if (to_space) {
    std::string mode = ctx.node().GetString("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") return ctx.Error("mode must be DCR or CRD, got '", mode, "'");
  }
  const Shape* s = RankedShape(ctx, 0);
  if (!s) {
    ctx.set_output(0, Type::Tensor(dt, Shape(DimVector(4))));
    return absl::OkStatus();
  }
  if (s->rank() != 4) return ctx.Error("input 0 has rank ", s->rank(), ", expected 4");
  DimVector out = s->dims();
  const Dim& c = out[1];
  if (to_space) {
    if (c.is_static()) {
      if (c.value() % (b * b) != 0) return ctx.Error("channels ", c.value(), " are not a multiple of blocksize^2 = ", b * b);
      out[1] = Dim(c.value() / (b * b));
    } else {
      out[1] = Dim();
    }
    for (int d = 2; d < 4; ++d) out[d] = out[d].is_static() ? Dim(out[d].value() * b) : Dim();
  } else {
    out[1] = c.is_static() ? Dim(c.value() * b * b) : Dim();
    for (int d = 2; d < 4; ++d) {
      if (out[d].is_static()) {
        if (out[d].value() % b != 0) return ctx.Error("dim ", d, " = ", out[d].value(), " is not a multiple of blocksize ", b);
        out[d] = Dim(out[d].value() / b);
      } else {
        out[d] = Dim();
      }
    }
  }
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
  return absl::OkStatus();
}

absl::Status InferDepthToSpace(InferContext& ctx) { return InferDepthSpace(ctx, true); }
absl::Status InferSpaceToDepth(InferContext& ctx) { return InferDepthSpace(ctx, false); }

absl::Status DepthToSpaceKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t b = ctx.node().GetInt("blocksize", 0);
  std::string mode = ctx.node().GetString("mode", "DCR");
  if (b <= 0) return ctx.Error("blocksize must be positive, got ", b);
  if (mode != "DCR" && mode != "CRD") return ctx.Error("mode must be DCR or CRD, got '", mode, "'");
  if (x.rank() != 4) return ctx.Error("input 0 has rank ", x.rank(), ", expected 4");
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (c % (b * b) != 0) return ctx.Error("channels ", c, " are not a multiple of blocksize^2 = ", b * b);
  int64_t oc = c / (b * b);
  Dims view;
  std::vector<int> perm;
  if (mode == "DCR") {
    view = {n, b, b, oc, h, w};
    perm = {0, 3, 4, 1, 5, 2};
  } else {
    view = {n, oc, b, b, h, w};
    perm = {0, 1, 4, 2, 5, 3};
  }
  Dims out6;
  for (int p : perm) out6.push_back(view[p]);
  Tensor y(x.dtype(), out6);
  RunGather(x, y, TransposeTable(view, perm));
  ctx.set_output(0, y.Reshaped({n, oc, h * b, w * b}));
  return absl::OkStatus();
}

absl::Status SpaceToDepthKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t b = ctx.node().GetInt("blocksize", 0);
  if (b <= 0) return ctx.Error("blocksize must be positive, got ", b);
  if (x.rank() != 4) return ctx.Error("input 0 has rank ", x.rank(), ", expected 4");
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (h % b != 0 || w % b != 0)
    return ctx.Error("spatial dims ", h, "x", w, " are not multiples of blocksize ", b);
  Dims view = {n, c, h / b, b, w / b, b};
  std::vector<int> perm = {0, 3, 5, 1, 2, 4};
  Dims out6;
  for (int p : perm) out6.push_back(view[p]);
  Tensor y(x.dtype(), out6);
  RunGather(x, y, TransposeTable(view, perm));
  ctx.set_output(0, y.Reshaped({n, c * b * b, h / b, w / b}));
  return absl::OkStatus();
}

//===--- Compress ---------------------------------------------------------===//

absl::Status InferCompress(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  DType dt = InDType(ctx, 0);
  DType ct = InDType(ctx, 1);
  if (ct != DType::kUndefined && ct != DType::kBool)
    return ctx.Error("condition must be bool, got ", DTypeName(ct));
  const Tensor* cond = ctx.const_input(1);
  Dim selected;
  if (cond && cond->dtype() == DType::kBool) {
    int64_t count = 0;
    for (int64_t i = 0; i < cond->numel(); ++i) count += cond->data<bool>()[i] ? 1 : 0;
    selected = Dim(count);
  }
  const Shape* s = RankedShape(ctx, 0);
  if (!ctx.node().has_attr("axis")) {
    ctx.set_output(0, Type::Tensor(dt, Shape({selected})));
    return absl::OkStatus();
  }
  if (!s) {
    ctx.set_output(0, Type::Tensor(dt));
    return absl::OkStatus();
  }
  int rank = s->rank();
  int64_t a = ctx.node().GetInt("axis", 0);
  if (a < -rank || a >= rank) return ctx.Error("axis ", a, " is out of range for rank ", rank);
  DimVector out = s->dims();
  out[a < 0 ? a + rank : a] = selected;
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(out))));
  return absl::OkStatus();
}

absl::Status CompressKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  if (cond.dtype() != DType::kBool) return ctx.Error("condition must be bool, got ", DTypeName(cond.dtype()));
  if (cond.rank() != 1) return ctx.Error("condition must be 1-D, got rank ", cond.rank());
  bool has_axis = ctx.node().has_attr("axis");
  Dims dims = has_axis ? x.dims() : Dims{x.numel()};
  int rank = static_cast<int>(dims.size());
  int axis = 0;
  if (has_axis) {
    int64_t a = ctx.node().GetInt("axis", 0);
    if (rank == 0 || a < -rank || a >= rank) return ctx.Error("axis ", a, " is out of range for rank ", rank);
    axis = static_cast<int>(a < 0 ? a + rank : a);
  }
  int64_t n = dims[axis];
  std::vector<int64_t> keep;
  const bool* c = cond.data<bool>();
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (!c[i]) continue;
    if (i >= n) return ctx.Error("condition selects index ", i, " but the axis has size ", n);
    keep.push_back(i);
  }
  Dims out = dims;
  out[axis] = static_cast<int64_t>(keep.size());
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out);
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= dims[d];
  int64_t inner = 1;
  for (int d = axis + 1; d < rank; ++d) inner *= dims[d];
  DispatchBySize(x.dtype(), [&]<typename T>() {
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k : keep) {
        const T* s = src + (o * n + k) * inner;
        dst = std::copy(s, s + inner, dst);
      }
  });
  return absl::OkStatus();
}

//===--- ReverseSequence --------------------------------------------------===//

absl::Status ReverseSequenceAxes(const Node& n, int rank, int* time_axis, int* batch_axis) {
  int64_t t = n.GetInt("time_axis", 0), b = n.GetInt("batch_axis", 1);
  if ((t != 0 && t != 1) || (b != 0 && b != 1) || t == b)
    return InvalidArgument("time_axis and batch_axis must be 0 and 1 in some order, got ", t, " and ", b);
  if (rank >= 0 && rank < 2) return InvalidArgument("input must have rank >= 2, got ", rank);
  *time_axis = static_cast<int>(t);
  *batch_axis = static_cast<int>(b);
  return absl::OkStatus();
}

absl::Status InferReverseSequence(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  KILN_RETURN_IF_ERROR(RequireIndexType(ctx, 1, "input 1 (sequence_lens)"));
  const Shape* s = RankedShape(ctx, 0);
  int t, b;
  absl::Status st = ReverseSequenceAxes(ctx.node(), s ? s->rank() : -1, &t, &b);
  if (!st.ok()) return ctx.Error(st.message());
  ctx.set_output(0, ctx.input_type(0).is_tensor() ? ctx.input_type(0) : Type::Tensor(DType::kUndefined));
  return absl::OkStatus();
}

absl::Status ReverseSequenceKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int t, b;
  absl::Status st = ReverseSequenceAxes(ctx.node(), x.rank(), &t, &b);
  if (!st.ok()) return ctx.Error(st.message());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> lens, KernelInts(ctx, 1, "sequence_lens"));
  int64_t batch = x.dim(b), time = x.dim(t);
  if (static_cast<int64_t>(lens.size()) != batch)
    return ctx.Error("sequence_lens has ", lens.size(), " entries for a batch of ", batch);
  for (int64_t l : lens)
    if (l < 0 || l > time) return ctx.Error("sequence length ", l, " is out of range [0, ", time, "]");
  int64_t inner = 1;
  for (int d = 2; d < x.rank(); ++d) inner *= x.dim(d);
  // Element (time i, batch j) starts at i*ts + j*bs.
  int64_t ts = t == 0 ? batch * inner : inner;
  int64_t bs = b == 0 ? time * inner : inner;
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  DispatchBySize(x.dtype(), [&]<typename T>() {
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    for (int64_t j = 0; j < batch; ++j)
      for (int64_t i = 0; i < time; ++i) {
        int64_t from = i < lens[j] ? lens[j] - 1 - i : i;
        const T* s = src + from * ts + j * bs;
        std::copy(s, s + inner, dst + i * ts + j * bs);
      }
  });
  return absl::OkStatus();
}

//===--- Trilu ------------------------------------------------------------===//

absl::Status InferTrilu(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input 0"));
  KILN_RETURN_IF_ERROR(RequireIndexType(ctx, 1, "input 1 (k)"));
  const Shape* s = RankedShape(ctx, 0);
  if (s && s->rank() < 2) return ctx.Error("input 0 has rank ", s->rank(), ", expected >= 2");
  ctx.set_output(0, ctx.input_type(0).is_tensor() ? ctx.input_type(0) : Type::Tensor(DType::kUndefined));
  return absl::OkStatus();
}

absl::Status TriluKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.Error("input 0 has rank ", x.rank(), ", expected >= 2");
  int64_t k = 0;
  if (ctx.has_input(1)) {
    const Tensor& kt = ctx.input(1);
    if (!IsInteger(kt.dtype()) || kt.numel() != 1) return ctx.Error("k must be an integer scalar");
    k = std::clamp<int64_t>(kt.GetInt(0), -(int64_t{1} << 62), int64_t{1} << 62);
  }
  bool upper = ctx.node().GetInt("upper", 1) != 0;
  int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  DispatchBySize(x.dtype(), [&]<typename T>() {
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    for (int64_t m = 0; m < mats; ++m)
      for (int64_t i = 0; i < rows; ++i) {
        const T* s = src + (m * rows + i) * cols;
        T* d = dst + (m * rows + i) * cols;
        // Kept columns: j >= i + k (upper) or j <= i + k (lower).
        int64_t edge = std::clamp<int64_t>(upper ? i + k : i + k + 1, 0, cols);
        if (upper) {
          std::fill(d, d + edge, T{});
          std::copy(s + edge, s + cols, d + edge);
        } else {
          std::copy(s, s + edge, d);
          std::fill(d + edge, d + cols, T{});
        }
      }
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterMovementOps(OpRegistry& r) {
  r.Register("Transpose").Inputs(1).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("perm", AttrKind::kInts, "reversed axes")
      .Infer(ReqI<InferTranspose, 1>).Kernel(ReqK<TransposeKernel, 1>).Cost(MoveCost);
  r.Register("Concat").Inputs(1, -1).Outputs(1).Class(OpClass::kDataMovement)
      .RequiredAttr("axis", AttrKind::kInt)
      .Infer(ReqI<InferConcat, 1>).Kernel(ReqK<ConcatKernel, 1>).Cost(MoveCost).Upgrade(UpgradeConcat);
  r.Register("Split").Inputs(1, 2).Outputs(1, -1).Class(OpClass::kDataMovement)
      .Attr("axis", AttrKind::kInt, "0")
      .Infer(ReqI<InferSplit, 1>).Kernel(ReqK<SplitKernel, 1>).Cost(MoveCost).Upgrade(UpgradeSplit);
  r.Register("Slice").Inputs(3, 5).Outputs(1).Class(OpClass::kDataMovement)
      .Infer(ReqI<InferSlice, 3>).Kernel(ReqK<SliceKernel, 3>).Cost(SelectCost).Upgrade(UpgradeSlice);
  r.Register("Gather").Inputs(2).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("axis", AttrKind::kInt, "0")
      .Infer(ReqI<InferGather, 2>).Kernel(ReqK<GatherKernel, 2>).Cost(SelectCost);
  r.Register("GatherElements").Inputs(2).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("axis", AttrKind::kInt, "0")
      .Infer(ReqI<InferGatherElements, 2>).Kernel(ReqK<GatherElementsKernel, 2>).Cost(SelectCost);
  r.Register("GatherND").Inputs(2).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("batch_dims", AttrKind::kInt, "0")
      .Infer(ReqI<InferGatherND, 2>).Kernel(ReqK<GatherNDKernel, 2>).Cost(SelectCost);
  // Scatter (deprecated in opset 11) is ScatterElements without reduction.
  r.Register("Scatter").Inputs(3).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("axis", AttrKind::kInt, "0")
      .Infer(ReqI<InferScatterElements, 3>).Kernel(ReqK<ScatterElementsKernel, 3>).Cost(MoveCost);
  r.Register("ScatterElements").Inputs(3).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("axis", AttrKind::kInt, "0").Attr("reduction", AttrKind::kString, "none")
      .Infer(ReqI<InferScatterElements, 3>).Kernel(ReqK<ScatterElementsKernel, 3>).Cost(MoveCost);
  r.Register("ScatterND").Inputs(3).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("reduction", AttrKind::kString, "none")
      .Infer(ReqI<InferScatterND, 3>).Kernel(ReqK<ScatterNDKernel, 3>).Cost(MoveCost);
  r.Register("Pad").Inputs(2, 3).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("mode", AttrKind::kString, "constant")
      .Infer(ReqI<InferPad, 2>).Kernel(ReqK<PadKernel, 2>).Cost(MoveCost).Upgrade(UpgradePad);
  r.Register("Tile").Inputs(2).Outputs(1).Class(OpClass::kDataMovement).Since(6)
      .Infer(ReqI<InferTile, 2>).Kernel(ReqK<TileKernel, 2>).Cost(MoveCost);
  r.Register("DepthToSpace").Inputs(1).Outputs(1).Class(OpClass::kDataMovement)
      .RequiredAttr("blocksize", AttrKind::kInt).Attr("mode", AttrKind::kString, "DCR")
      .Infer(ReqI<InferDepthToSpace, 1>).Kernel(ReqK<DepthToSpaceKernel, 1>).Cost(MoveCost);
  r.Register("SpaceToDepth").Inputs(1).Outputs(1).Class(OpClass::kDataMovement)
      .RequiredAttr("blocksize", AttrKind::kInt)
      .Infer(ReqI<InferSpaceToDepth, 1>).Kernel(ReqK<SpaceToDepthKernel, 1>).Cost(MoveCost);
  r.Register("Compress").Inputs(2).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("axis", AttrKind::kInt, "none: the input is flattened")
      .Infer(ReqI<InferCompress, 2>).Kernel(ReqK<CompressKernel, 2>).Cost(MoveCost);
  r.Register("ReverseSequence").Inputs(2).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("time_axis", AttrKind::kInt, "0").Attr("batch_axis", AttrKind::kInt, "1")
      .Infer(ReqI<InferReverseSequence, 2>).Kernel(ReqK<ReverseSequenceKernel, 2>).Cost(MoveCost);
  r.Register("Trilu").Inputs(1, 2).Outputs(1).Class(OpClass::kDataMovement)
      .Attr("upper", AttrKind::kInt, "1")
      .Infer(ReqI<InferTrilu, 1>).Kernel(ReqK<TriluKernel, 1>).Cost(MoveCost);
}

}  // namespace kiln
