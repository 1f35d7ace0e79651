//===- control_flow.cc - If, Loop and Scan --------------------------------===//
//
// Control flow runs nested graphs (held by node attributes) through the
// executor's SubgraphRunner. Values cross the subgraph boundary by position:
// If's branches take no inputs; a Loop body takes (iteration, condition,
// loop-carried...) and yields (condition, loop-carried..., scan outputs...);
// a Scan body takes (states..., scan-input slices...) and yields (states...,
// scan-output slices...). Scan outputs are stacked along a new axis.
//
// Sequence- and optional-typed values are not supported by the executor, so
// inference rejects them where they appear.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstring>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

//===--- Helpers ----------------------------------------------------------===//

constexpr const char* kNoSequences = "sequence values are not supported";

bool IsSequenceLike(const Type& t) {
  return t.kind() == Type::Kind::kSequence || t.kind() == Type::Kind::kOptional;
}

std::string DimsText(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) absl::StrAppend(&s, i ? "," : "", d[i]);
  return s + "]";
}

// The least type that covers both: dims where they disagree become unknown,
// ranks that disagree make the shape unranked.
Type JoinTypes(const Type& a, const Type& b) {
  if (a.is_none() && b.is_none()) return Type();
  if (a.is_none() || b.is_none()) {
    const Type& k = a.is_none() ? b : a;
    return k.is_tensor() ? Type::Tensor(k.dtype(), Shape()) : Type();
  }
  if (!a.is_tensor() || !b.is_tensor()) return a == b ? a : Type();
  DType dt = a.dtype() == b.dtype() ? a.dtype() : DType::kUndefined;
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  if (!sa.ranked() || !sb.ranked() || sa.rank() != sb.rank()) return Type::Tensor(dt, Shape());
  DimVector dims;
  for (int i = 0; i < sa.rank(); ++i) dims.push_back(sa[i] == sb[i] ? sa[i] : Dim());
  return Type::Tensor(dt, Shape(std::move(dims)));
}

// `t` with `d` inserted at position `axis` (already normalized for rank+1).
Type InsertDim(const Type& t, int axis, Dim d) {
  if (!t.is_tensor()) return t;
  if (!t.shape().ranked()) return Type::Tensor(t.dtype(), Shape());
  DimVector dims = t.shape().dims();
  dims.insert(dims.begin() + axis, d);
  return Type::Tensor(t.dtype(), Shape(std::move(dims)));
}

// `t` with dim `axis` removed.
Type RemoveDim(const Type& t, int axis) {
  if (!t.is_tensor()) return t;
  if (!t.shape().ranked() || axis >= t.shape().rank()) return Type::Tensor(t.dtype(), Shape());
  DimVector dims = t.shape().dims();
  dims.erase(dims.begin() + axis);
  return Type::Tensor(t.dtype(), Shape(std::move(dims)));
}

const Graph* SubgraphAttr(const Node& n, absl::string_view name) {
  const Attribute* a = n.attr(name);
  if (!a || a->kind() != AttrKind::kGraph) return nullptr;
  return a->g();
}

// Copies `n` elements from src[src_off...] to dst[dst_off...] (same dtype).
void CopyElements(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off, int64_t n) {
  if (n <= 0) return;
  if (src.dtype() == DType::kString) {
    const std::string* s = src.data<std::string>() + src_off;
    std::string* d = dst.data<std::string>() + dst_off;
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
    return;
  }
  size_t es = DTypeSize(src.dtype());
  std::memcpy(static_cast<uint8_t*>(dst.raw()) + dst_off * es,
              static_cast<const uint8_t*>(src.raw()) + src_off * es, n * es);
}

// The slice of `t` at `index` along `axis`, with that axis removed.
Tensor SliceAlong(const Tensor& t, int axis, int64_t index) {
  Dims out_dims = t.dims();
  int64_t len = out_dims[axis];
  out_dims.erase(out_dims.begin() + axis);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= t.dim(i);
  for (int i = axis + 1; i < t.rank(); ++i) inner *= t.dim(i);
  Tensor out(t.dtype(), out_dims);
  for (int64_t o = 0; o < outer; ++o) CopyElements(t, (o * len + index) * inner, out, o * inner, inner);
  return out;
}

// Stacks equally shaped `parts` along a new axis `axis`; part t goes to
// position t, or to position size-1-t when `reverse`.
Tensor StackAlong(const std::vector<Tensor>& parts, int axis, bool reverse, DType dtype,
                  const Dims& elem_dims) {
  int64_t len = static_cast<int64_t>(parts.size());
  Dims out_dims = elem_dims;
  out_dims.insert(out_dims.begin() + axis, len);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= elem_dims[i];
  for (size_t i = axis; i < elem_dims.size(); ++i) inner *= elem_dims[i];
  Tensor out(dtype, out_dims);
  for (int64_t t = 0; t < len; ++t) {
    int64_t pos = reverse ? len - 1 - t : t;
    for (int64_t o = 0; o < outer; ++o) CopyElements(parts[t], o * inner, out, (o * len + pos) * inner, inner);
  }
  return out;
}

// Dims for an output that received no iterations: the declared element type
// of the body output with `len` 0 inserted at `axis`. Unknown dims become 0.
absl::StatusOr<Tensor> EmptyStack(const KernelContext& ctx, const Type& elem, int axis, int which) {
  if (!elem.is_tensor() || elem.dtype() == DType::kUndefined || !elem.shape().ranked())
    return ctx.Error("scan output ", which,
                     " has no iterations and the body does not declare its element type");
  Dims d;
  for (const Dim& x : elem.shape().dims()) d.push_back(x.is_static() ? x.value() : 0);
  if (axis > static_cast<int>(d.size())) return ctx.Error("scan output ", which, " axis is out of range");
  d.insert(d.begin() + axis, 0);
  return Tensor(elem.dtype(), d);
}

// Collects the per-iteration values of one scan output and checks they agree.
struct ScanAccumulator {
  std::vector<Tensor> parts;
  absl::Status Add(const KernelContext& ctx, int which, Tensor t) {
    if (!parts.empty() && (t.dtype() != parts[0].dtype() || t.dims() != parts[0].dims()))
      return ctx.Error("scan output ", which, " changes from ", DTypeName(parts[0].dtype()),
                       DimsText(parts[0].dims()), " to ", DTypeName(t.dtype()), DimsText(t.dims()),
                       " across iterations");
    parts.push_back(std::move(t));
    return absl::OkStatus();
  }
};

// Sum of the costs of the nodes of a graph (nested graphs included through
// their ops' cost functions).
OpCost GraphCost(const Graph* g) {
  OpCost c;
  if (!g) return c;
  for (Node* n : g->nodes()) {
    OpCost k = NodeCost(*n);
    c.flops += k.flops;
    c.bytes_read += k.bytes_read;
    c.bytes_written += k.bytes_written;
  }
  return c;
}

OpCost Scaled(OpCost c, double f) {
  c.flops *= f;
  c.bytes_read *= f;
  c.bytes_written *= f;
  return c;
}

absl::Status CheckNoSequences(const InferContext& ctx, const Graph* body) {
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && IsSequenceLike(ctx.input_type(i))) return ctx.Error(kNoSequences);
  if (body) {
    for (const Value* v : body->inputs())
      if (IsSequenceLike(v->type())) return ctx.Error(kNoSequences);
    for (const Value* v : body->outputs())
      if (IsSequenceLike(v->type())) return ctx.Error(kNoSequences);
  }
  return absl::OkStatus();
}

// Reads a scalar (or one-element) condition tensor.
absl::StatusOr<bool> ReadCondition(const KernelContext& ctx, const Tensor& t, absl::string_view what) {
  if (t.numel() != 1 || t.dtype() == DType::kString)
    return ctx.Error(what, " must be a single boolean, got ", DTypeName(t.dtype()), DimsText(t.dims()));
  return t.GetDouble(0) != 0;
}

//===--- If ---------------------------------------------------------------===//

absl::Status InferIf(InferContext& ctx) {
  const Node& n = ctx.node();
  const Graph* then_g = SubgraphAttr(n, "then_branch");
  const Graph* else_g = SubgraphAttr(n, "else_branch");
  if (!then_g || !else_g) return ctx.Error("attributes 'then_branch' and 'else_branch' must be graphs");
  KILN_RETURN_IF_ERROR(CheckNoSequences(ctx, then_g));
  KILN_RETURN_IF_ERROR(CheckNoSequences(ctx, else_g));
  if (ctx.has_input(0)) {
    const Type& c = ctx.input_type(0);
    if (c.is_tensor() && c.dtype() != DType::kUndefined && c.dtype() != DType::kBool)
      return ctx.Error("condition must be bool, got ", DTypeName(c.dtype()));
    if (c.is_tensor() && c.shape().NumElements() > 1)
      return ctx.Error("condition must have one element, got shape ", c.shape().ToString());
  }
  int nout = ctx.num_outputs();
  if (static_cast<int>(then_g->outputs().size()) != nout || static_cast<int>(else_g->outputs().size()) != nout)
    return ctx.Error("the node has ", nout, " outputs but then_branch yields ", then_g->outputs().size(),
                     " and else_branch ", else_g->outputs().size());
  if (!then_g->inputs().empty() || !else_g->inputs().empty())
    return ctx.Error("If branches take no inputs");
  // A known condition picks its branch's types exactly.
  const Tensor* c = ctx.const_input(0);
  for (int i = 0; i < nout; ++i) {
    const Type& a = then_g->outputs()[i]->type();
    const Type& b = else_g->outputs()[i]->type();
    if (a.is_tensor() && b.is_tensor() && a.dtype() != DType::kUndefined &&
        b.dtype() != DType::kUndefined && a.dtype() != b.dtype())
      return ctx.Error("output ", i, " is ", DTypeName(a.dtype()), " in then_branch but ",
                       DTypeName(b.dtype()), " in else_branch");
    if (c && c->numel() == 1 && c->dtype() != DType::kString)
      ctx.set_output(i, c->GetDouble(0) != 0 ? a : b);
    else
      ctx.set_output(i, JoinTypes(a, b));
  }
  return absl::OkStatus();
}

absl::Status If(KernelContext& ctx) {
  const Node& n = ctx.node();
  const Graph* then_g = SubgraphAttr(n, "then_branch");
  const Graph* else_g = SubgraphAttr(n, "else_branch");
  if (!then_g || !else_g) return ctx.Error("attributes 'then_branch' and 'else_branch' must be graphs");
  if (!ctx.run_subgraph()) return ctx.Error("no subgraph runner is available");
  KILN_ASSIGN_OR_RETURN(bool cond, ReadCondition(ctx, ctx.input(0), "condition"));
  const Graph* g = cond ? then_g : else_g;
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ctx.run_subgraph()(*g, {}));
  if (static_cast<int>(outs.size()) != ctx.num_outputs())
    return ctx.Error(cond ? "then_branch" : "else_branch", " yields ", outs.size(), " values, expected ",
                     ctx.num_outputs());
  for (int i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, std::move(outs[i]));
  return absl::OkStatus();
}

OpCost IfCost(const Node& n) {
  OpCost a = GraphCost(SubgraphAttr(n, "then_branch"));
  OpCost b = GraphCost(SubgraphAttr(n, "else_branch"));
  return a.flops >= b.flops ? a : b;
}

//===--- Loop -------------------------------------------------------------===//

absl::Status InferLoop(InferContext& ctx) {
  const Node& n = ctx.node();
  const Graph* body = SubgraphAttr(n, "body");
  if (!body) return ctx.Error("attribute 'body' must be a graph");
  KILN_RETURN_IF_ERROR(CheckNoSequences(ctx, body));
  int num_carried = std::max(ctx.num_inputs() - 2, 0);
  int num_scan = ctx.num_outputs() - num_carried;
  if (num_scan < 0)
    return ctx.Error("the node has ", num_carried, " loop-carried inputs but only ", ctx.num_outputs(), " outputs");
  if (static_cast<int>(body->inputs().size()) != 2 + num_carried)
    return ctx.Error("body takes ", body->inputs().size(), " inputs, expected ", 2 + num_carried,
                     " (iteration number, condition, ", num_carried, " loop-carried values)");
  if (static_cast<int>(body->outputs().size()) != 1 + num_carried + num_scan)
    return ctx.Error("body yields ", body->outputs().size(), " values, expected ", 1 + num_carried + num_scan,
                     " (condition, ", num_carried, " loop-carried values, ", num_scan, " scan outputs)");
  if (ctx.has_input(0)) {
    const Type& m = ctx.input_type(0);
    if (m.is_tensor() && m.dtype() != DType::kUndefined && m.dtype() != DType::kI64)
      return ctx.Error("trip count M must be i64, got ", DTypeName(m.dtype()));
    if (m.is_tensor() && m.shape().NumElements() > 1)
      return ctx.Error("trip count M must have one element, got shape ", m.shape().ToString());
  }
  if (ctx.has_input(1)) {
    const Type& c = ctx.input_type(1);
    if (c.is_tensor() && c.dtype() != DType::kUndefined && c.dtype() != DType::kBool)
      return ctx.Error("condition must be bool, got ", DTypeName(c.dtype()));
  }
  for (int i = 0; i < num_carried; ++i) {
    const Type& body_out = body->outputs()[1 + i]->type();
    ctx.set_output(i, ctx.has_input(2 + i) ? JoinTypes(ctx.input_type(2 + i), body_out) : body_out);
  }
  // The trip count is exact when M is known and there is no condition.
  Dim trips;
  const Tensor* m = ctx.const_input(0);
  if (m && m->numel() == 1 && !ctx.has_input(1)) trips = Dim(std::max<int64_t>(m->GetInt(0), 0));
  for (int k = 0; k < num_scan; ++k)
    ctx.set_output(num_carried + k, InsertDim(body->outputs()[1 + num_carried + k]->type(), 0, trips));
  return absl::OkStatus();
}

absl::Status Loop(KernelContext& ctx) {
  const Graph* body = SubgraphAttr(ctx.node(), "body");
  if (!body) return ctx.Error("attribute 'body' must be a graph");
  if (!ctx.run_subgraph()) return ctx.Error("no subgraph runner is available");
  int num_carried = std::max(ctx.num_inputs() - 2, 0);
  int num_scan = ctx.num_outputs() - num_carried;
  if (num_scan < 0 || static_cast<int>(body->inputs().size()) != 2 + num_carried ||
      static_cast<int>(body->outputs().size()) != 1 + num_carried + num_scan)
    return ctx.Error("body signature does not match the node's inputs and outputs");

  bool has_m = ctx.has_input(0);
  int64_t max_trips = 0;
  if (has_m) {
    const Tensor& m = ctx.input(0);
    if (m.numel() != 1 || !IsInteger(m.dtype()))
      return ctx.Error("trip count M must be a single integer, got ", DTypeName(m.dtype()), DimsText(m.dims()));
    max_trips = m.GetInt(0);
  }
  bool has_cond = ctx.has_input(1);
  bool cond = true;
  if (has_cond) {
    KILN_ASSIGN_OR_RETURN(cond, ReadCondition(ctx, ctx.input(1), "condition"));
  }

  std::vector<Tensor> carried;
  for (int i = 0; i < num_carried; ++i) {
    if (!ctx.has_input(2 + i)) return ctx.Error("loop-carried input ", i, " is missing");
    carried.push_back(ctx.input(2 + i));
  }
  std::vector<ScanAccumulator> scans(num_scan);

  for (int64_t it = 0;; ++it) {
    if (has_m && it >= max_trips) break;
    if (!cond) break;
    std::vector<Tensor> args;
    args.reserve(2 + num_carried);
    args.push_back(Tensor::Scalar<int64_t>(it));
    args.push_back(Tensor::Scalar<bool>(cond));
    for (Tensor& t : carried) args.push_back(t);
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ctx.run_subgraph()(*body, std::move(args)));
    if (static_cast<int>(outs.size()) != 1 + num_carried + num_scan)
      return ctx.Error("body yields ", outs.size(), " values, expected ", 1 + num_carried + num_scan);
    // With a trip count and no condition input the body's condition is
    // ignored (a for loop); otherwise it decides whether to go on.
    if (has_cond || !has_m) {
      KILN_ASSIGN_OR_RETURN(cond, ReadCondition(ctx, outs[0], "body condition output"));
    }
    for (int i = 0; i < num_carried; ++i) carried[i] = std::move(outs[1 + i]);
    for (int k = 0; k < num_scan; ++k)
      KILN_RETURN_IF_ERROR(scans[k].Add(ctx, k, std::move(outs[1 + num_carried + k])));
  }

  for (int i = 0; i < num_carried; ++i) ctx.set_output(i, std::move(carried[i]));
  for (int k = 0; k < num_scan; ++k) {
    if (scans[k].parts.empty()) {
      KILN_ASSIGN_OR_RETURN(Tensor e, EmptyStack(ctx, body->outputs()[1 + num_carried + k]->type(), 0, k));
      ctx.set_output(num_carried + k, std::move(e));
      continue;
    }
    const Tensor& first = scans[k].parts[0];
    ctx.set_output(num_carried + k, StackAlong(scans[k].parts, 0, false, first.dtype(), first.dims()));
  }
  return absl::OkStatus();
}

OpCost LoopCost(const Node& n) {
  double trips = 1;
  Value* m = n.input(0);
  if (const Tensor* t = ConstantData(m); t && t->numel() == 1)
    trips = static_cast<double>(std::max<int64_t>(t->GetInt(0), 0));
  return Scaled(GraphCost(SubgraphAttr(n, "body")), trips);
}

//===--- Scan -------------------------------------------------------------===//

struct ScanAttrs {
  int num_states = 0, num_scan_in = 0, num_scan_out = 0;
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
};

// Reads and validates Scan's attributes against the node's arity.
template <typename Ctx>
absl::StatusOr<ScanAttrs> ReadScanAttrs(const Ctx& ctx, const Graph* body) {
  const Node& n = ctx.node();
  ScanAttrs a;
  int64_t m = n.GetInt("num_scan_inputs", -1);
  if (m < 1 || m > ctx.num_inputs())
    return ctx.Error("num_scan_inputs is ", m, " but the node has ", ctx.num_inputs(), " inputs");
  a.num_scan_in = static_cast<int>(m);
  a.num_states = ctx.num_inputs() - a.num_scan_in;
  a.num_scan_out = ctx.num_outputs() - a.num_states;
  if (a.num_scan_out < 0)
    return ctx.Error("the node has ", a.num_states, " state inputs but only ", ctx.num_outputs(), " outputs");
  if (static_cast<int>(body->inputs().size()) != a.num_states + a.num_scan_in)
    return ctx.Error("body takes ", body->inputs().size(), " inputs, expected ", a.num_states + a.num_scan_in);
  if (static_cast<int>(body->outputs().size()) != a.num_states + a.num_scan_out)
    return ctx.Error("body yields ", body->outputs().size(), " values, expected ", a.num_states + a.num_scan_out);
  a.in_axes = n.GetInts("scan_input_axes", std::vector<int64_t>(a.num_scan_in, 0));
  a.in_dirs = n.GetInts("scan_input_directions", std::vector<int64_t>(a.num_scan_in, 0));
  a.out_axes = n.GetInts("scan_output_axes", std::vector<int64_t>(a.num_scan_out, 0));
  a.out_dirs = n.GetInts("scan_output_directions", std::vector<int64_t>(a.num_scan_out, 0));
  if (static_cast<int>(a.in_axes.size()) != a.num_scan_in)
    return ctx.Error("scan_input_axes has ", a.in_axes.size(), " entries, expected ", a.num_scan_in);
  if (static_cast<int>(a.in_dirs.size()) != a.num_scan_in)
    return ctx.Error("scan_input_directions has ", a.in_dirs.size(), " entries, expected ", a.num_scan_in);
  if (static_cast<int>(a.out_axes.size()) != a.num_scan_out)
    return ctx.Error("scan_output_axes has ", a.out_axes.size(), " entries, expected ", a.num_scan_out);
  if (static_cast<int>(a.out_dirs.size()) != a.num_scan_out)
    return ctx.Error("scan_output_directions has ", a.out_dirs.size(), " entries, expected ", a.num_scan_out);
  for (int64_t d : a.in_dirs)
    if (d != 0 && d != 1) return ctx.Error("scan_input_directions values must be 0 or 1, got ", d);
  for (int64_t d : a.out_dirs)
    if (d != 0 && d != 1) return ctx.Error("scan_output_directions values must be 0 or 1, got ", d);
  return a;
}

absl::Status InferScan(InferContext& ctx) {
  const Graph* body = SubgraphAttr(ctx.node(), "body");
  if (!body) return ctx.Error("attribute 'body' must be a graph");
  KILN_RETURN_IF_ERROR(CheckNoSequences(ctx, body));
  KILN_ASSIGN_OR_RETURN(ScanAttrs a, ReadScanAttrs(ctx, body));
  // The sequence length, from the first scan input whose dim is known.
  Dim seq;
  for (int j = 0; j < a.num_scan_in; ++j) {
    int idx = a.num_states + j;
    if (!ctx.has_input(idx)) return ctx.Error("scan input ", j, " is missing");
    const Type& t = ctx.input_type(idx);
    if (!t.is_tensor() || !t.shape().ranked()) continue;
    int rank = t.shape().rank();
    if (rank < 1) return ctx.Error("scan input ", j, " is a scalar; it needs a sequence axis");
    auto axis = NormalizeAxis(a.in_axes[j], rank);
    if (!axis.ok()) return ctx.Error("scan input ", j, ": ", axis.status().message());
    const Dim& d = t.shape()[*axis];
    if (d.is_static() && seq.is_static() && d.value() != seq.value())
      return ctx.Error("scan inputs disagree on the sequence length: ", seq.value(), " and ", d.value());
    if (seq.is_unknown() || (d.is_static() && !seq.is_static())) seq = d;
  }
  for (int i = 0; i < a.num_states; ++i) {
    const Type& body_out = body->outputs()[i]->type();
    ctx.set_output(i, ctx.has_input(i) ? JoinTypes(ctx.input_type(i), body_out) : body_out);
  }
  for (int k = 0; k < a.num_scan_out; ++k) {
    const Type& elem = body->outputs()[a.num_states + k]->type();
    if (!elem.is_tensor() || !elem.shape().ranked()) {
      ctx.set_output(a.num_states + k, elem.is_tensor() ? Type::Tensor(elem.dtype(), Shape()) : Type());
      continue;
    }
    auto axis = NormalizeAxis(a.out_axes[k], elem.shape().rank() + 1);
    if (!axis.ok()) return ctx.Error("scan output ", k, ": ", axis.status().message());
    ctx.set_output(a.num_states + k, InsertDim(elem, *axis, seq));
  }
  return absl::OkStatus();
}

absl::Status Scan(KernelContext& ctx) {
  const Graph* body = SubgraphAttr(ctx.node(), "body");
  if (!body) return ctx.Error("attribute 'body' must be a graph");
  if (!ctx.run_subgraph()) return ctx.Error("no subgraph runner is available");
  KILN_ASSIGN_OR_RETURN(ScanAttrs a, ReadScanAttrs(ctx, body));

  std::vector<Tensor> states;
  for (int i = 0; i < a.num_states; ++i) {
    if (!ctx.has_input(i)) return ctx.Error("state input ", i, " is missing");
    states.push_back(ctx.input(i));
  }
  std::vector<int> in_axis(a.num_scan_in);
  int64_t seq = -1;
  for (int j = 0; j < a.num_scan_in; ++j) {
    if (!ctx.has_input(a.num_states + j)) return ctx.Error("scan input ", j, " is missing");
    const Tensor& t = ctx.input(a.num_states + j);
    if (t.rank() < 1) return ctx.Error("scan input ", j, " is a scalar; it needs a sequence axis");
    auto axis = NormalizeAxis(a.in_axes[j], t.rank());
    if (!axis.ok()) return ctx.Error("scan input ", j, ": ", axis.status().message());
    in_axis[j] = *axis;
    int64_t len = t.dim(*axis);
    if (seq >= 0 && len != seq)
      return ctx.Error("scan inputs disagree on the sequence length: ", seq, " and ", len);
    seq = len;
  }

  std::vector<ScanAccumulator> scans(a.num_scan_out);
  for (int64_t t = 0; t < seq; ++t) {
    std::vector<Tensor> args;
    args.reserve(a.num_states + a.num_scan_in);
    for (Tensor& s : states) args.push_back(s);
    for (int j = 0; j < a.num_scan_in; ++j) {
      const Tensor& x = ctx.input(a.num_states + j);
      int64_t idx = a.in_dirs[j] ? seq - 1 - t : t;
      args.push_back(SliceAlong(x, in_axis[j], idx));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ctx.run_subgraph()(*body, std::move(args)));
    if (static_cast<int>(outs.size()) != a.num_states + a.num_scan_out)
      return ctx.Error("body yields ", outs.size(), " values, expected ", a.num_states + a.num_scan_out);
    for (int i = 0; i < a.num_states; ++i) states[i] = std::move(outs[i]);
    for (int k = 0; k < a.num_scan_out; ++k)
      KILN_RETURN_IF_ERROR(scans[k].Add(ctx, k, std::move(outs[a.num_states + k])));
  }

  for (int i = 0; i < a.num_states; ++i) ctx.set_output(i, std::move(states[i]));
  for (int k = 0; k < a.num_scan_out; ++k) {
    if (scans[k].parts.empty()) {
      const Type& elem = body->outputs()[a.num_states + k]->type();
      int rank = elem.is_tensor() && elem.shape().ranked() ? elem.shape().rank() : 0;
      auto axis = NormalizeAxis(a.out_axes[k], rank + 1);
      if (!axis.ok()) return ctx.Error("scan output ", k, ": ", axis.status().message());
      KILN_ASSIGN_OR_RETURN(Tensor e, EmptyStack(ctx, elem, *axis, k));
      ctx.set_output(a.num_states + k, std::move(e));
      continue;
    }
    const Tensor& first = scans[k].parts[0];
    auto axis = NormalizeAxis(a.out_axes[k], first.rank() + 1);
    if (!axis.ok()) return ctx.Error("scan output ", k, ": ", axis.status().message());
    ctx.set_output(a.num_states + k,
                   StackAlong(scans[k].parts, *axis, a.out_dirs[k] != 0, first.dtype(), first.dims()));
  }
  return absl::OkStatus();
}

OpCost ScanCost(const Node& n) {
  double trips = 1;
  int64_t m = n.GetInt("num_scan_inputs", 0);
  int first_scan = n.num_inputs() - static_cast<int>(m);
  if (m > 0 && first_scan >= 0) {
    Value* x = n.input(first_scan);
    std::vector<int64_t> axes = n.GetInts("scan_input_axes", {0});
    if (x && x->type().is_tensor() && x->type().shape().ranked() && !axes.empty()) {
      auto axis = NormalizeAxis(axes[0], x->type().shape().rank());
      if (axis.ok() && x->type().shape()[*axis].is_static())
        trips = static_cast<double>(x->type().shape()[*axis].value());
    }
  }
  return Scaled(GraphCost(SubgraphAttr(n, "body")), trips);
}

// Scan-8 had a leading batch axis on every input and output and an optional
// sequence_lens input. Without sequence_lens it is an opset-9 Scan over the
// batch whose body runs the original Scan on one batch entry:
//
//   Scan<body = { Scan<original body, directions>(states_b..., inputs_b...) },
//        num_scan_inputs = all>(states..., inputs...)
absl::Status UpgradeScan(Graph& g, Node* node, int64_t opset) {
  if (opset >= 9) return absl::OkStatus();
  std::string label = node->name().empty() ? "node (Scan)" : absl::StrCat("node '", node->name(), "' (Scan)");
  if (node->input(0))
    return Unimplemented(label, ": the opset-8 Scan input sequence_lens is not supported");
  const Graph* body = SubgraphAttr(*node, "body");
  if (!body) return InvalidArgument(label, ": attribute 'body' must be a graph");
  int64_t num_scan = node->GetInt("num_scan_inputs", -1);
  std::vector<Value*> ins(node->inputs().begin() + (node->num_inputs() > 0 ? 1 : 0), node->inputs().end());
  int n_in = static_cast<int>(ins.size());
  if (num_scan < 1 || num_scan > n_in)
    return InvalidArgument(label, ": num_scan_inputs is ", num_scan, " but the node has ", n_in,
                           " state and scan inputs");
  for (Value* v : ins)
    if (!v) return InvalidArgument(label, ": state and scan inputs must not be omitted");

  auto outer = std::make_unique<Graph>("", &g);
  outer->set_name(outer->UniqueName(absl::StrCat(body->name().empty() ? "scan" : body->name(), "_batch")));
  std::vector<Value*> outer_ins;
  for (Value* v : ins)
    outer_ins.push_back(outer->AddInput(outer->UniqueName(absl::StrCat(v->name(), "_b")), RemoveDim(v->type(), 0)));
  Node* inner = outer->AddNode("Scan", outer_ins, node->num_outputs());
  inner->set_name(outer->UniqueName(node->name().empty() ? "scan_inner" : absl::StrCat(node->name(), "_inner")));
  inner->SetAttr("body", Attribute::GraphValue(body->Clone(outer.get())));
  inner->SetAttr("num_scan_inputs", Attribute::Int(num_scan));
  if (const Attribute* dirs = node->attr("directions"))
    inner->SetAttr("scan_input_directions", Attribute::Ints(dirs->ints()));
  for (int i = 0; i < node->num_outputs(); ++i) {
    inner->output(i)->set_type(RemoveDim(node->output(i)->type(), 0));
    outer->AddOutput(inner->output(i));
  }

  for (int i = 0; i < n_in; ++i) node->SetInput(i, ins[i]);
  node->RemoveTrailingInputs(n_in);
  node->RemoveAttr("directions");
  node->SetAttr("num_scan_inputs", Attribute::Int(n_in));
  node->SetAttr("body", Attribute::GraphValue(std::move(outer)));
  return absl::OkStatus();
}

}  // namespace

void RegisterControlFlowOps(OpRegistry& r) {
  r.Register("If").Inputs(1).Outputs(1, -1).Class(OpClass::kControlFlow)
      .RequiredAttr("then_branch", AttrKind::kGraph)
      .RequiredAttr("else_branch", AttrKind::kGraph)
      .Infer(InferIf).Kernel(If).Cost(IfCost);
  r.Register("Loop").Inputs(2, -1).OptionalInput(0).OptionalInput(1).Outputs(1, -1).Class(OpClass::kControlFlow)
      .RequiredAttr("body", AttrKind::kGraph)
      .Infer(InferLoop).Kernel(Loop).Cost(LoopCost);
  r.Register("Scan").Inputs(1, -1).Outputs(1, -1).Class(OpClass::kControlFlow).Since(8)
      .RequiredAttr("body", AttrKind::kGraph)
      .RequiredAttr("num_scan_inputs", AttrKind::kInt)
      .Attr("scan_input_axes", AttrKind::kInts, "[0, ...]")
      .Attr("scan_input_directions", AttrKind::kInts, "[0, ...]")
      .Attr("scan_output_axes", AttrKind::kInts, "[0, ...]")
      .Attr("scan_output_directions", AttrKind::kInts, "[0, ...]")
      .Attr("directions", AttrKind::kInts, "[0, ...] (opset 8 only; upgraded)")
      .Infer(InferScan).Kernel(Scan).Cost(ScanCost).Upgrade(UpgradeScan);
}

}  // namespace kiln
