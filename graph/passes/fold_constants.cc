//===- fold_constants.cc - evaluate nodes whose inputs are constant or whose output depends only on static shapes ---===//
//
// A deterministic node whose outputs are known before the graph runs - its
// inputs are all constants, or it reads only static dims - is replaced by
// constants holding those outputs.
//
// Nodes are visited in order (nested graphs first), so a chain of foldable
// nodes collapses in one run: the reference kernel of each op computes the
// outputs (a fresh reference executor runs the bodies of If, Loop and Scan,
// whose captured values must be constants too). Shape and Size of values
// with static dims fold without data, and so do Gather and Slice reading
// only static entries of a Shape (`x.shape[1]` of f32[batch,128] is 128).
// Random ops never fold; a node whose output would have more than
// fold_max_elements new elements is left alone ("folds-skipped-size"; views
// such as Identity and Reshape of a constant share its bytes), as is one
// whose kernel fails or disagrees with the declared type (the executor will
// report it). A folded output becomes a constant in place, keeping its name
// and uses. Types of the nodes after a fold are refined on the way when
// their inputs changed (one inference per such node); the infer-shapes pass
// does the rest.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/fold_constants.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "graph/exec/executor.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/rewrite_helpers.h"

namespace kiln {
namespace {

// Ops whose reference kernels return a view of their input's storage: their
// folds create no elements, so the size limit does not apply to them.
bool IsViewOp(const Node& n) {
  return std::any_of(std::begin(kViewOps), std::end(kViewOps), [&](const char* op) { return IsOp(n, op); });
}

bool SharesInputStorage(const Node& n, const Tensor& t) {
  for (const Value* v : n.inputs())
    if (const Tensor* c = ConstantData(v); c && c->SharesStorageWith(t)) return true;
  return false;
}

// The dims a Shape node reports, when `v` is the output of one whose input
// is ranked (entries may be symbolic or unknown).
std::optional<DimVector> ShapeEntries(const Value* v) {
  const Node* p = v ? v->producer() : nullptr;
  if (!p || !IsOp(*p, "Shape") || !p->input(0)) return std::nullopt;
  const Type& t = p->input(0)->type();
  if (!t.is_tensor() || !t.shape().ranked()) return std::nullopt;
  int64_t rank = t.shape().rank();
  int64_t start = p->GetInt("start", 0);
  int64_t end = p->GetInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  DimVector dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(t.shape()[static_cast<int>(i)]);
  return dims;
}

// A 1-D i64 tensor of `dims` when every one is static.
std::optional<Tensor> StaticDimsTensor(const DimVector& dims, Dims tensor_dims) {
  Tensor t(DType::kI64, std::move(tensor_dims));
  if (t.numel() != static_cast<int64_t>(dims.size())) return std::nullopt;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (!dims[i].is_static()) return std::nullopt;
    t.data<int64_t>()[i] = dims[i].value();
  }
  return t;
}

// Outputs that follow from static dims alone: Shape, Size, and Gather or
// Slice of a Shape that select only static entries.
std::optional<Tensor> FoldFromShapes(const Node& n) {
  if (IsOp(n, "Shape")) {
    // The node's own output: ShapeEntries reads its producer, this node.
    std::optional<DimVector> entries = ShapeEntries(n.output(0));
    if (!entries) return std::nullopt;
    return StaticDimsTensor(*entries, {static_cast<int64_t>(entries->size())});
  }
  if (IsOp(n, "Size")) {
    if (!n.input(0)) return std::nullopt;
    const Type& t = n.input(0)->type();
    if (!t.is_tensor() || !t.shape().ranked() || !t.shape().is_static()) return std::nullopt;
    return Tensor::Scalar<int64_t>(t.shape().NumElements());
  }
  if (IsOp(n, "Gather")) {
    std::optional<DimVector> entries = ShapeEntries(n.input(0));
    const Value* idx = n.input(1);
    if (!entries || !ConstantData(idx) || !IsInteger(idx->constant().dtype())) return std::nullopt;
    int64_t axis = n.GetInt("axis", 0);
    if (axis != 0 && axis != -1) return std::nullopt;
    const Tensor& it = idx->constant();
    int64_t len = static_cast<int64_t>(entries->size());
    DimVector picked;
    for (int64_t i = 0; i < it.numel(); ++i) {
      int64_t k = it.GetInt(i);
      if (k < 0) k += len;
      if (k < 0 || k >= len) return std::nullopt;
      picked.push_back((*entries)[k]);
    }
    return StaticDimsTensor(picked, it.dims());
  }
  if (IsOp(n, "Slice")) {
    std::optional<DimVector> entries = ShapeEntries(n.input(0));
    if (!entries) return std::nullopt;
    std::optional<int64_t> start = ConstantInt(n.input(1)), end = ConstantInt(n.input(2));
    std::optional<int64_t> axis = n.input(3) ? ConstantInt(n.input(3)) : std::optional<int64_t>(0);
    std::optional<int64_t> step = n.input(4) ? ConstantInt(n.input(4)) : std::optional<int64_t>(1);
    if (!start || !end || !axis || !step || (*axis != 0 && *axis != -1) || *step == 0) return std::nullopt;
    int64_t len = static_cast<int64_t>(entries->size());
    int64_t s = *start, e = *end;
    if (s < 0) s += len;
    if (e < 0) e += len;
    DimVector picked;
    if (*step > 0) {
      s = std::clamp<int64_t>(s, 0, len);
      e = std::clamp<int64_t>(e, 0, len);
      for (int64_t i = s; i < e; i += *step) picked.push_back((*entries)[i]);
    } else {
      s = std::clamp<int64_t>(s, 0, len - 1);
      e = std::clamp<int64_t>(e, -1, len - 1);
      for (int64_t i = s; i > e; i += *step) picked.push_back((*entries)[i]);
    }
    return StaticDimsTensor(picked, {static_cast<int64_t>(picked.size())});
  }
  return std::nullopt;
}

class ConstantFolder {
 public:
  explicit ConstantFolder(int64_t max_elements) : max_elements_(max_elements) {}

  void FoldGraph(Graph& g) {
    // Straight through the list: a fold erases only the node folded.
    for (Node* n = g.first_node(), *next = nullptr; n; n = next) {
      next = n->next();
      g.PrefetchAhead(next);
      for (Graph* s : n->subgraphs()) FoldGraph(*s);
      if (!TryFold(g, n)) Refine(n);
    }
  }

  // Erases the constants this run created that nothing uses any more (the
  // intermediate results of folded chains). The constants marked refined are
  // those this run created.
  void EraseUnusedCreated(Graph& g) {
    if (report.constants_folded == 0) return;
    for (Value* c = g.first_constant(), *next = nullptr; c; c = next) {
      next = g.NextConstant(c);
      if (!c->has_uses() && refined_.Contains(c)) g.EraseValue(c);
    }
    if (g.may_hold_graphs())
      for (Node* n : g.nodes())
        for (Graph* s : n->subgraphs()) EraseUnusedCreated(*s);
  }

  FoldReport report;

 private:
  bool AllInputsConstant(const Node& n) const {
    for (const Value* v : n.inputs())
      if (v && !v->constant_data()) return false;
    return true;
  }

  // Control flow folds when its bodies are deterministic and bounded.
  bool SubgraphsFoldable(const Node& n) const {
    for (const Graph* s : n.subgraphs())
      if (HasNondeterministicOp(*s)) return false;
    if (IsOp(n, "Loop")) {
      std::optional<int64_t> trips = n.input(0) ? ConstantInt(n.input(0)) : std::nullopt;
      const bool never = ConstantTruth(n.input(1)) == false;
      if (!never && (!trips || *trips > kMaxFoldedLoopTrips)) return false;
    }
    return true;
  }

  std::optional<std::vector<Tensor>> Evaluate(const OpDef& def, const Node& n) const {
    std::vector<const Tensor*> ins;
    for (const Value* v : n.inputs()) ins.push_back(v ? &v->constant() : nullptr);
    // A fresh executor per fold: it caches plans by graph address, and
    // folding destroys graphs.
    std::unique_ptr<Executor> exec;
    SubgraphRunner runner;
    if (!n.subgraphs().empty()) {
      exec = std::make_unique<Executor>();
      runner = [e = exec.get()](const Graph& g, std::vector<Tensor> in) { return e->Run(g, std::move(in)); };
    }
    KernelContext ctx(n, std::move(ins), std::move(runner));
    if (!def.kernel(ctx).ok()) return std::nullopt;
    return std::move(ctx.outputs());
  }

  bool TryFold(Graph& g, Node* n) {
    if (IsNondeterministicOp(*n)) return false;
    const OpDef* def = OpRegistry::Global().Find(*n);
    if (!def || !def->kernel) return false;
    for (const Value* o : n->outputs())
      if (!o->type().is_none() && !o->type().is_tensor()) return false;

    std::vector<Tensor> results;
    if (std::optional<Tensor> t = FoldFromShapes(*n); t && n->num_outputs() == 1) {
      results.push_back(std::move(*t));
    } else {
      if (!AllInputsConstant(*n)) return false;
      if (!n->subgraphs().empty() && !SubgraphsFoldable(*n)) return false;
      // Refuse before computing anything too large whose size is known.
      auto inferred = InferNode(*def, *n);
      if (!inferred.ok()) return false;
      for (const Type& t : *inferred) {
        if (!IsViewOp(*n) && t.is_tensor() && t.shape().ranked() && t.shape().is_static() &&
            t.shape().NumElements() > max_elements_) {
          ++report.skipped_size;
          return false;
        }
      }
      std::optional<std::vector<Tensor>> out = Evaluate(*def, *n);
      if (!out) return false;
      results = std::move(*out);
    }
    if (static_cast<int>(results.size()) != n->num_outputs()) return false;
    for (int i = 0; i < n->num_outputs(); ++i) {
      const Tensor& t = results[i];
      Value* out = n->output(i);
      if (!t.defined()) {
        if (out->has_uses()) return false;
        continue;
      }
      if (t.numel() > max_elements_ && !SharesInputStorage(*n, t)) {
        ++report.skipped_size;
        return false;
      }
      if (!CheckTensorMatchesType(t, out->type(), out->name()).ok()) return false;
    }
    std::vector<Value*> repl = ReplaceNodeOutputs(g, n, {}, results);
    ++report.nodes_removed;
    for (Value* c : repl) {
      if (!c) continue;
      ++report.constants_folded;
      refined_.Insert(c);
    }
    return true;
  }

  // Re-infers a node whose inputs changed in this run (or whose nested
  // graphs may have), keeping what it already declares.
  void Refine(Node* n) {
    bool touched = n->may_hold_graphs() && !n->subgraphs().empty();
    for (const Value* v : n->inputs()) touched |= v && refined_.Contains(v);
    if (!touched) return;
    const OpDef* def = OpRegistry::Global().Find(*n);
    if (!def) return;
    auto inferred = InferNode(*def, *n);
    if (!inferred.ok()) return;
    bool merged_all = true;
    for (int i = 0; i < n->num_outputs() && i < static_cast<int>(inferred->size()); ++i) {
      Value* out = n->output(i);
      if ((*inferred)[i] == out->type()) continue;
      auto merged = MergeTypes(out->type(), (*inferred)[i]);
      merged_all &= merged.ok();
      if (merged.ok() && *merged != out->type()) {
        out->set_type(*std::move(merged));
        refined_.Insert(out);
      }
    }
    // What infer-shapes would have made of it (it reports the merges that
    // failed).
    if (merged_all) n->MarkTypesCurrent();
  }

  int64_t max_elements_;
  // Values whose type or data became known in this run: node outputs whose
  // type was refined, and the constants this run created.
  ScratchMarks refined_;
};

}  // namespace

FoldReport FoldConstants(Graph& g, int64_t max_elements) {
  ConstantFolder folder(max_elements);
  folder.FoldGraph(g);
  folder.EraseUnusedCreated(g);
  return folder.report;
}

namespace {

class FoldConstantsPass : public Pass {
 public:
  absl::string_view name() const override { return "fold-constants"; }
  // Erasing what nothing reads makes no input constant, and a merged value
  // is a constant exactly when the value it replaced was.
  ChangeKinds woken_by(const Graph&) const override { return kChangeOther; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    // Nodes are visited in order and the types after a fold are refined on
    // the way, so one run folds every node it can; a graph holding nested
    // graphs is not claimed settled (bodies are folded as a whole).
    if (!graph.may_hold_graphs()) NoteSettled();
    FoldReport r = FoldConstants(graph, options().fold_max_elements);
    if (r.constants_folded) stats().Add("constants-folded", r.constants_folded);
    if (r.nodes_removed) stats().Add("nodes-removed", r.nodes_removed);
    if (r.skipped_size) stats().Add("folds-skipped-size", r.skipped_size);
    return r.nodes_removed > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFoldConstantsPass() { return std::make_unique<FoldConstantsPass>(); }

}  // namespace kiln
