//===- narrow_precision.cc - Matrix work in fp16/bf16 ---------------------===//
#include "graph/passes/narrow_precision.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "graph/ops/matmul.h"
#include "graph/passes/rewrite_helpers.h"
#include "graph/support/float16.h"

namespace kiln {
namespace {

// Ops that, given values of a narrow float type, compute what the f32 op
// computes on them widened and round the result once to the narrow type.
// Bit for bit the same values: ops that select one of their operands (Relu,
// Clip to representable bounds, Max, Min, max pooling, Gather, Where) and
// views (a view of a narrow value is narrow, still no kernel). One rounding
// of an exact f32 result, within the error the fp16/bf16 modes allow: Add,
// Sub, Mul (one f16 instruction, or f32 and a conversion for bf16) and
// average pooling (the kernels sum in f32 and convert once). One rounding
// of an f32 computation: LayerNormalization, Softmax and GELU, whose
// kernels widen their inputs, compute in f32 and convert the result once.
// Both device targets have kernels for each of them in f16 and bf16 (npusim
// vector kernels; the cuda target's, which compute every op in f32 between
// converting loads and stores). And copies (Transpose, Split), run on any
// dtype in half the bytes: a transformer's activations stay narrow from the
// embedding lookup through attention, the MLP and the residual stream.
bool KeepsNarrow(const Node& n) {
  static constexpr const char* kOps[] = {
      "Relu",    "Clip",      "Max", "Min", "MaxPool",     "GlobalMaxPool",      // select an operand
      "Reshape", "Flatten",   "Squeeze",    "Unsqueeze",   "Identity",           // views
      "Add",     "Sub",       "Mul",        "AveragePool", "GlobalAveragePool",  // round once
      "Transpose", "Split",                                                      // copies
      "LayerNormalization", "Softmax",                                           // f32 inside, round once
      "Gather",    "Where",                                                      // select an operand
  };
  // MaxPool's Indices output has host kernels only (the AICPU, the cuda
  // target's host tasks): keep the node as it is.
  if (n.op() == "MaxPool" && n.num_outputs() > 1 && n.output(1) && n.output(1)->has_uses()) return false;
  if (n.domain() == "kiln" && n.op() == "Gelu") return true;  // f32 inside, round once
  return IsOneOf(n, kOps);
}

bool IsCastTo(const Node* n, DType t) {
  return n && n->domain().empty() && n->op() == "Cast" && n->input(0) && n->output(0)->type().dtype() == t;
}

// `t` (f32) in the narrow type, element by element (round to nearest).
Tensor NarrowCopy(const Tensor& t, DType narrow) {
  Tensor c(narrow, t.dims());
  for (int64_t j = 0; j < t.numel(); ++j) {
    float f = t.data<float>()[j];
    if (narrow == DType::kF16) c.data<Half>()[j] = Half(f);
    else c.data<BFloat16>()[j] = BFloat16(f);
  }
  return c;
}

// Whether the narrow type holds every finite element of `t` (no overflow to
// infinity).
bool NarrowHolds(const Tensor& t, DType narrow) {
  for (int64_t j = 0; j < t.numel(); ++j) {
    float f = t.data<float>()[j];
    float r = narrow == DType::kF16 ? static_cast<float>(Half(f)) : static_cast<float>(BFloat16(f));
    if (std::isfinite(f) && !std::isfinite(r)) return false;
  }
  return true;
}

// `v` in the narrow type: a Cast of it inserted before `before`.
Value* CastToNarrow(Graph& g, Value* v, DType narrow, Node* before) {
  Node* cast = g.AddNode("Cast", {v}, {g.UniqueName(absl::StrCat(v->name(), ".", DTypeName(narrow)))}, "", before);
  cast->SetAttr("to", Attribute::Int(DTypeToOnnx(narrow)));
  cast->output(0)->set_type(Type::Tensor(narrow, v->type().shape()));
  return cast->output(0);
}

// `y` (f32) becomes the narrow type; a Cast inserted before `before` (at
// the end when null) gives its users the f32 value they read.
void NarrowWithCastBack(Graph& g, Value* y, DType narrow, Node* before) {
  Type wide = y->type();
  Node* back = g.AddNode("Cast", {y}, {g.UniqueName(absl::StrCat(y->name(), ".f32"))}, "", before);
  back->SetAttr("to", Attribute::Int(DTypeToOnnx(DType::kF32)));
  back->output(0)->set_type(wide);
  y->ReplaceAllUsesWith(back->output(0));
  back->SetInput(0, y);
  y->set_type(Type::Tensor(narrow, wide.shape()));
}

// Whether every result of `n` is only a graph output: a Cast after it would
// stay (the outputs keep their types), so it may as well stay before it,
// where a matrix op's epilogue can take it.
bool OnlyGraphOutputs(const Graph& g, const Node& n) {
  for (const Value* y : n.outputs())
    for (const Use& u : y->uses())
      if (u.user) return false;
  for (const Value* y : n.outputs())
    if (std::find(g.outputs().begin(), g.outputs().end(), y) == g.outputs().end()) return false;
  return true;
}

// Activations stay narrow between matrix ops. A Cast back to f32 of a
// narrow value sinks past a node that KeepsNarrow when each of its f32
// inputs is such a Cast or a constant that the narrow type holds (converted
// once; ReLU6's bounds 0 and 6 exactly): the node runs in the narrow type
// and one Cast back to f32 follows each of its outputs. Nodes are visited
// in order, so a chain of them (Conv -> Clip -> Add -> MaxPool) carries the
// Cast to its end; a Cast to the narrow type of a Cast from it is then the
// value itself, so the next matrix op reads the narrow value. A Gather from
// a constant table (an embedding) starts such a chain with no Cast before
// it: the table converts once.
bool SinkWideningCasts(Graph& g, DType narrow) {
  bool changed = false;
  auto widened = [&](const Value* v) -> Node* {
    Node* c = v->producer();
    return IsCastTo(c, DType::kF32) && c->input(0)->type().dtype() == narrow ? c : nullptr;
  };
  auto is_f32 = [](const Value* v) { return v && v->type().is_tensor() && v->type().dtype() == DType::kF32; };
  absl::flat_hash_map<const Value*, Value*> narrowed;  // f32 constant -> its narrow copy
  for (Node* n : g.NodeList()) {
    if (!KeepsNarrow(*n)) continue;
    bool sink = true, any_cast = false, any_out = false;
    for (const Value* v : n->inputs()) {
      if (!v || !v->type().is_tensor() || !IsFloat(v->type().dtype())) continue;
      if (!is_f32(v)) sink = false;
      else if (widened(v)) any_cast = true;
      else if (!v->is_constant() || !v->constant().defined() || !NarrowHolds(v->constant(), narrow)) sink = false;
    }
    for (const Value* y : n->outputs()) any_out |= is_f32(y);
    const bool lookup = n->op() == "Gather" && n->input(0) && n->input(0)->is_constant();
    if (!sink || !(any_cast || lookup) || !any_out || OnlyGraphOutputs(g, *n)) continue;
    changed = true;
    for (int i = 0; i < n->num_inputs(); ++i) {
      Value* v = n->input(i);
      if (!is_f32(v)) continue;
      if (Node* c = widened(v)) {
        n->SetInput(i, c->input(0));
        if (!c->output(0)->has_uses()) g.EraseNode(c);
        continue;
      }
      Value*& c = narrowed[v];
      if (!c) c = g.AddConstant(g.UniqueName(absl::StrCat(v->name(), ".", DTypeName(narrow))),
                                NarrowCopy(v->constant(), narrow));
      n->SetInput(i, c);
    }
    Node* next = n->next();
    for (Value* y : n->outputs()) {
      if (!is_f32(y)) continue;
      NarrowWithCastBack(g, y, narrow, next);
    }
  }
  for (Node* b : g.NodeList()) {
    if (!IsCastTo(b, narrow)) continue;
    Node* a = widened(b->input(0));
    if (!a) continue;
    b->output(0)->ReplaceAllUsesWith(a->input(0));
    g.EraseNode(b);
    if (!a->output(0)->has_uses()) g.EraseNode(a);
    changed = true;
  }
  return changed;
}

}  // namespace

absl::StatusOr<bool> NarrowMatrixOps(Graph& g, DType narrow) {
  if (narrow != DType::kF16 && narrow != DType::kBF16)
    return absl::InvalidArgumentError(absl::StrCat("narrowing to ", DTypeName(narrow), ": only f16 and bf16"));
  bool changed = false;
  absl::flat_hash_map<const Value*, Value*> converted;  // f32 constant -> its narrow copy, made once
  std::vector<Node*> nodes = g.NodeList();
  for (size_t k = 0; k < nodes.size(); ++k) {
    Node* n = nodes[k];
    Node* next = k + 1 < nodes.size() ? nodes[k + 1] : nullptr;
    if (!n->domain().empty() || (n->op() != "MatMul" && n->op() != "Gemm" && n->op() != "Conv")) continue;
    bool all_f32 = n->output(0)->type().dtype() == DType::kF32;
    for (Value* v : n->inputs()) all_f32 &= !v || v->type().dtype() == DType::kF32;
    if (!all_f32 || !n->output(0)->type().shape().is_static()) continue;
    changed = true;
    for (int i = 0; i < n->num_inputs(); ++i) {
      Value* v = n->input(i);
      if (!v) continue;
      // An operand transposed for this MatMul alone is transposed narrow,
      // so that the GEMM reads it transposed (IsMatrixTranspose).
      if (Node* t = v->producer(); n->op() == "MatMul" && t && IsMatrixTranspose(*t) &&
                                   v->uses().size() == 1 && !t->input(0)->is_constant()) {
        t->SetInput(0, CastToNarrow(g, t->input(0), narrow, t));
        v->set_type(Type::Tensor(narrow, v->type().shape()));
        continue;
      }
      if (v->is_constant() && v->constant().defined()) {
        Value*& nc = converted[v];
        if (!nc) nc = g.AddConstant(g.UniqueName(absl::StrCat(v->name(), ".", DTypeName(narrow))),
                                    NarrowCopy(v->constant(), narrow));
        n->SetInput(i, nc);
      } else {
        n->SetInput(i, CastToNarrow(g, v, narrow, n));
      }
    }
    // The node now produces the narrow type; a Cast restores f32 for its users.
    NarrowWithCastBack(g, n->output(0), narrow, next);
  }
  changed |= SinkWideningCasts(g, narrow);
  return changed;
}


namespace {

class NarrowPass : public Pass {
 public:
  NarrowPass(DType narrow, absl::string_view name) : narrow_(narrow), name_(name) {}
  absl::string_view name() const override { return name_; }
  absl::StatusOr<bool> Run(Graph& graph) override { return NarrowMatrixOps(graph, narrow_); }

 private:
  DType narrow_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Pass> CreateNarrowFp16Pass() { return std::make_unique<NarrowPass>(DType::kF16, "narrow-fp16"); }
std::unique_ptr<Pass> CreateNarrowBf16Pass() { return std::make_unique<NarrowPass>(DType::kBF16, "narrow-bf16"); }

}  // namespace kiln
