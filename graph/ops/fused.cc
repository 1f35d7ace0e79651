//===- fused.cc - Ops the optimizer introduces (kiln.Fused, kiln.GearDispatch) ===//
//
// kiln.Fused(inputs...) {body, kind, anchor} -> outputs...
//   One fusion group: the nodes of `body` run as one kernel. The body's
//   inputs bind the node's inputs by position and its outputs are the node's
//   outputs, so the body is self-contained (it captures nothing). `kind` is
//   "elementwise", "reduction", "matmul-epilogue" or "conv-epilogue"; `anchor`
//   names the op the group is built around (the MatMul, Gemm or Conv of an
//   epilogue, the reduction or normalization a reduction group ends with, the
//   last op of an elementwise group). The reference kernel runs the body;
//   inference reads the body's output types. The cost is the sum of the
//   body's node costs less the bytes the group keeps out of memory: each
//   intermediate value is neither written nor read back.
//
// kiln.GearDispatch(inputs...) {variants, gear_symbols, gear_values} -> outputs...
//   Static-shape gears: `variants` holds one graph per gear, each taking the
//   node's inputs by position with static shapes. `gear_symbols` names the
//   dims that vary ("batch" for --dynamic-batch) and `gear_values` holds, per
//   variant, one value per symbol. The kernel runs the first variant whose
//   input types the actual inputs fit; an input that fits no gear is an
//   error naming the gears. Outputs join the variants' output types.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

const Graph* GraphAttr(const Node& n, absl::string_view name) {
  const Attribute* a = n.attr(name);
  if (!a || a->kind() != AttrKind::kGraph) return nullptr;
  return a->g();
}

double BytesOf(const Value* v) {
  if (!v || !v->type().is_tensor()) return 0;
  int64_t n = v->type().shape().NumElements();
  return n > 0 ? static_cast<double>(n) * DTypeSize(v->type().dtype()) : 0;
}

std::string DimsText(const Dims& d) { return absl::StrCat("[", absl::StrJoin(d, ","), "]"); }

// Whether `t` fits `type`: dtype, rank and static dims.
bool Fits(const Tensor& t, const Type& type) {
  if (!type.is_tensor()) return true;
  if (type.dtype() != DType::kUndefined && t.dtype() != type.dtype()) return false;
  const Shape& s = type.shape();
  if (!s.ranked()) return true;
  if (s.rank() != t.rank()) return false;
  for (int i = 0; i < s.rank(); ++i)
    if (s[i].is_static() && s[i].value() != t.dim(i)) return false;
  return true;
}

// The least type that covers both: dims that differ become unknown, ranks
// that differ make the shape unranked.
Type JoinTypes(const Type& a, const Type& b) {
  if (a == b) return a;
  if (!a.is_tensor() || !b.is_tensor()) return Type();
  DType dt = a.dtype() == b.dtype() ? a.dtype() : DType::kUndefined;
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  if (!sa.ranked() || !sb.ranked() || sa.rank() != sb.rank()) return Type::Tensor(dt, Shape());
  DimVector dims;
  for (int i = 0; i < sa.rank(); ++i) dims.push_back(sa[i] == sb[i] ? sa[i] : Dim());
  return Type::Tensor(dt, Shape(std::move(dims)));
}

// Checks a known input type against the type a nested graph declares for it.
absl::Status CheckInputFits(const InferContext& ctx, int i, const Type& declared, absl::string_view graph) {
  if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
  const Type& t = ctx.input_type(i);
  if (!t.is_tensor() || !declared.is_tensor()) return absl::OkStatus();
  if (t.dtype() != DType::kUndefined && declared.dtype() != DType::kUndefined && t.dtype() != declared.dtype())
    return ctx.Error("input ", i, " is ", t.ToString(), " but ", graph, " takes ", declared.ToString());
  return absl::OkStatus();
}

//===--- Fused ------------------------------------------------------------===//

constexpr const char* kFusionKinds[] = {"elementwise", "reduction", "matmul-epilogue", "conv-epilogue"};

absl::Status InferFused(InferContext& ctx) {
  const Node& n = ctx.node();
  const Graph* body = GraphAttr(n, "body");
  if (!body) return ctx.Error("attribute 'body' must be a graph");
  std::string kind = n.GetString("kind", "");
  if (std::find(std::begin(kFusionKinds), std::end(kFusionKinds), kind) == std::end(kFusionKinds))
    return ctx.Error("attribute 'kind' must be elementwise, reduction, matmul-epilogue or conv-epilogue, got \"",
                     kind, "\"");
  if (static_cast<int>(body->inputs().size()) != ctx.num_inputs())
    return ctx.Error("the node has ", ctx.num_inputs(), " inputs but its body takes ", body->inputs().size());
  if (static_cast<int>(body->outputs().size()) != ctx.num_outputs())
    return ctx.Error("the node has ", ctx.num_outputs(), " outputs but its body yields ", body->outputs().size());
  for (int i = 0; i < ctx.num_inputs(); ++i)
    KILN_RETURN_IF_ERROR(CheckInputFits(ctx, i, body->inputs()[i]->type(), "the body"));
  for (int i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, body->outputs()[i]->type());
  return absl::OkStatus();
}

absl::Status FusedKernel(KernelContext& ctx) {
  const Graph* body = GraphAttr(ctx.node(), "body");
  if (!body) return ctx.Error("attribute 'body' must be a graph");
  if (!ctx.run_subgraph()) return ctx.Error("no subgraph runner is available");
  std::vector<Tensor> args;
  args.reserve(ctx.num_inputs());
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
    args.push_back(ctx.input(i));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ctx.run_subgraph()(*body, std::move(args)));
  if (static_cast<int>(outs.size()) != ctx.num_outputs())
    return ctx.Error("the body yields ", outs.size(), " values, expected ", ctx.num_outputs());
  for (int i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, std::move(outs[i]));
  return absl::OkStatus();
}

// The body's node costs, less the traffic of every value made inside the
// body: an intermediate (not a body output) is never written, and no use of
// it by a body node reads memory.
OpCost FusedCost(const Node& n) {
  OpCost c;
  const Graph* body = GraphAttr(n, "body");
  if (!body) return c;
  for (const Node* m : body->nodes()) {
    OpCost k = NodeCost(*m);
    c.flops += k.flops;
    c.bytes_read += k.bytes_read;
    c.bytes_written += k.bytes_written;
  }
  absl::flat_hash_map<const Value*, bool> is_output;
  for (const Value* v : body->outputs()) is_output[v] = true;
  for (const Node* m : body->nodes()) {
    for (const Value* v : m->outputs()) {
      double b = BytesOf(v);
      if (b == 0) continue;
      if (!is_output.contains(v)) c.bytes_written -= b;
      for (const Use& u : v->uses())
        if (u.user) c.bytes_read -= b;
    }
  }
  c.bytes_read = std::max(c.bytes_read, 0.0);
  c.bytes_written = std::max(c.bytes_written, 0.0);
  return c;
}

//===--- GearDispatch -----------------------------------------------------===//

struct Gears {
  const std::vector<std::unique_ptr<Graph>>* variants = nullptr;
  std::vector<std::string> symbols;
  std::vector<int64_t> values;  // variants x symbols
};

template <typename Ctx>
absl::StatusOr<Gears> ReadGears(const Ctx& ctx) {
  const Node& n = ctx.node();
  const Attribute* a = n.attr("variants");
  if (!a || a->kind() != AttrKind::kGraphs || a->graphs().empty())
    return ctx.Error("attribute 'variants' must be a non-empty list of graphs");
  Gears g;
  g.variants = &a->graphs();
  if (const Attribute* s = n.attr("gear_symbols"); s && s->kind() == AttrKind::kStrings) g.symbols = s->strings();
  g.values = n.GetInts("gear_values", {});
  if (g.values.size() != g.variants->size() * g.symbols.size())
    return ctx.Error("gear_values holds ", g.values.size(), " values but ", g.variants->size(), " variants of ",
                     g.symbols.size(), " symbols need ", g.variants->size() * g.symbols.size());
  for (const auto& v : *g.variants) {
    if (!v) return ctx.Error("attribute 'variants' holds a null graph");
    if (static_cast<int>(v->inputs().size()) != ctx.num_inputs())
      return ctx.Error("variant '", v->name(), "' takes ", v->inputs().size(), " inputs but the node has ",
                       ctx.num_inputs());
    if (static_cast<int>(v->outputs().size()) != ctx.num_outputs())
      return ctx.Error("variant '", v->name(), "' yields ", v->outputs().size(), " values but the node has ",
                       ctx.num_outputs(), " outputs");
  }
  return g;
}

// "batch 1, 2, 4, 8" for one symbol; "(batch, seq) = (1, 16), (1, 32)" for more.
std::string DescribeGears(const Gears& g) {
  size_t k = g.symbols.size();
  if (k == 0) return absl::StrCat(g.variants->size(), " static variants");
  std::vector<std::string> parts;
  for (size_t v = 0; v < g.variants->size(); ++v) {
    std::vector<int64_t> vals(g.values.begin() + v * k, g.values.begin() + (v + 1) * k);
    parts.push_back(k == 1 ? absl::StrCat(vals[0]) : absl::StrCat("(", absl::StrJoin(vals, ", "), ")"));
  }
  if (k == 1) return absl::StrCat(g.symbols[0], " ", absl::StrJoin(parts, ", "));
  return absl::StrCat("(", absl::StrJoin(g.symbols, ", "), ") = ", absl::StrJoin(parts, ", "));
}

absl::Status InferGearDispatch(InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(Gears g, ReadGears(ctx));
  for (const auto& v : *g.variants)
    for (int i = 0; i < ctx.num_inputs(); ++i)
      KILN_RETURN_IF_ERROR(CheckInputFits(ctx, i, v->inputs()[i]->type(), absl::StrCat("variant '", v->name(), "'")));
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    Type t = (*g.variants)[0]->outputs()[i]->type();
    for (size_t k = 1; k < g.variants->size(); ++k) t = JoinTypes(t, (*g.variants)[k]->outputs()[i]->type());
    ctx.set_output(i, std::move(t));
  }
  return absl::OkStatus();
}

absl::Status GearDispatchKernel(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(Gears g, ReadGears(ctx));
  if (!ctx.run_subgraph()) return ctx.Error("no subgraph runner is available");
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
  auto fits = [&](const Graph& v, int i) {
    return Fits(ctx.input(i), v.inputs()[i]->type());
  };
  for (const auto& v : *g.variants) {
    bool all = true;
    for (int i = 0; all && i < ctx.num_inputs(); ++i) all = fits(*v, i);
    if (!all) continue;
    std::vector<Tensor> args;
    for (int i = 0; i < ctx.num_inputs(); ++i) args.push_back(ctx.input(i));
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ctx.run_subgraph()(*v, std::move(args)));
    if (static_cast<int>(outs.size()) != ctx.num_outputs())
      return ctx.Error("variant '", v->name(), "' yields ", outs.size(), " values, expected ", ctx.num_outputs());
    for (int i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, std::move(outs[i]));
    return absl::OkStatus();
  }
  // Name the first input that fits no gear at all, else the combination.
  auto name_of = [&](int i) {
    const Value* v = ctx.node().input(i);
    return v ? v->name() : absl::StrCat(i);
  };
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    bool any = false;
    for (const auto& v : *g.variants) any = any || fits(*v, i);
    if (!any)
      return InvalidArgument("input '", name_of(i), "' has shape ", DimsText(ctx.input(i).dims()),
                             "; the model was compiled for ", DescribeGears(g));
  }
  std::vector<std::string> shapes;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    shapes.push_back(absl::StrCat("'", name_of(i), "' ", DimsText(ctx.input(i).dims())));
  return InvalidArgument("inputs ", absl::StrJoin(shapes, ", "), " fit no single gear; the model was compiled for ",
                         DescribeGears(g));
}

// The most expensive variant.
OpCost GearDispatchCost(const Node& n) {
  OpCost best;
  const Attribute* a = n.attr("variants");
  if (!a) return best;
  for (const auto& v : a->graphs()) {
    if (!v) continue;
    OpCost c;
    for (const Node* m : v->nodes()) {
      OpCost k = NodeCost(*m);
      c.flops += k.flops;
      c.bytes_read += k.bytes_read;
      c.bytes_written += k.bytes_written;
    }
    if (c.flops + c.bytes_read + c.bytes_written > best.flops + best.bytes_read + best.bytes_written) best = c;
  }
  return best;
}

}  // namespace

void RegisterFusedOps(OpRegistry& r) {
  r.Register("Fused", "kiln").Inputs(0, -1).Outputs(1, -1).Class(OpClass::kOther)
      .RequiredAttr("body", AttrKind::kGraph)
      .RequiredAttr("kind", AttrKind::kString)
      .Attr("anchor", AttrKind::kString, "\"\"")
      .Infer(InferFused).Kernel(FusedKernel).Cost(FusedCost);
  r.Register("GearDispatch", "kiln").Inputs(0, -1).Outputs(1, -1).Class(OpClass::kControlFlow)
      .RequiredAttr("variants", AttrKind::kGraphs)
      .Attr("gear_symbols", AttrKind::kStrings, "[]")
      .Attr("gear_values", AttrKind::kInts, "[]")
      .Infer(InferGearDispatch).Kernel(GearDispatchKernel).Cost(GearDispatchCost);
}

}  // namespace kiln
