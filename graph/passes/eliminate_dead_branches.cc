//===- eliminate_dead_branches.cc - inline If nodes with a constant condition; remove Loops that never run ---===//
//
// Control flow whose path is known before the graph runs is replaced by that
// path: an If whose condition is a constant by the nodes of its taken
// branch, and a Loop that runs zero times by its initial values.
//
// Inlining moves the taken branch's constants and nodes (their own nested
// graphs included) into the enclosing graph just before the If, keeps their
// uses of enclosing values, and redirects the If's outputs to the branch's
// outputs. A moved value keeps its name unless another value of the graph
// nest holds it (sibling branches and later nested graphs may), and a branch
// value returned as If output takes that output's name. A Loop whose trip
// count M is a constant <= 0, or whose initial condition is a constant false,
// yields its initial loop-carried values and empty scan outputs; it is left
// alone when a scan output's element type is not static. Outputs of the top
// graph keep their names: an If or Loop whose replacement would rename one
// (an enclosing value returned by the branch, a non-constant initial value)
// stays.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/eliminate_dead_branches.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "graph/exec/executor.h"
#include "graph/passes/rewrite_helpers.h"

namespace kiln {
namespace {

class DeadBranchEliminator {
 public:
  explicit DeadBranchEliminator(Graph& root) : names_(root) {}

  // Processes `nodes` of `g` in order; `tail` is the node that follows the
  // last of them (null at the end of the graph).
  void ProcessNodes(Graph& g, const std::vector<Node*>& nodes, Node* tail) {
    for (size_t k = 0; k < nodes.size(); ++k) {
      Node* n = nodes[k];
      Node* next = k + 1 < nodes.size() ? nodes[k + 1] : tail;
      if (std::optional<std::vector<Node*>> inlined = TryInlineIf(g, n, next)) {
        ProcessNodes(g, *inlined, next);
        continue;
      }
      if (TryRemoveLoop(g, n)) continue;
      for (Graph* s : n->subgraphs()) ProcessNodes(*s, s->NodeList(), nullptr);
    }
  }

  DeadBranchReport report;

 private:
  // A name for a value moving into `g`: `preferred` when no other value of
  // the nest holds it, else a fresh one.
  std::string NameFor(Graph& g, const std::string& preferred) {
    if (names_.AtMostOne(preferred) && !g.NameInUse(preferred)) return preferred;
    return names_.Fresh(g, preferred);
  }

  std::optional<std::vector<Node*>> TryInlineIf(Graph& g, Node* n, Node* next) {
    if (!IsOp(*n, "If")) return std::nullopt;
    std::optional<bool> cond = ConstantTruth(n->input(0));
    if (!cond) return std::nullopt;
    const Attribute* attr = n->attr(*cond ? "then_branch" : "else_branch");
    if (!attr || attr->kind() != AttrKind::kGraph || !attr->g()) return std::nullopt;
    Graph* branch = attr->g();
    if (!branch->inputs().empty() || static_cast<int>(branch->outputs().size()) != n->num_outputs())
      return std::nullopt;
    // Which If output names each branch value it returns; an output of the
    // top graph must be named so, or the rewrite would rename it.
    absl::flat_hash_map<const Value*, int> named_by;
    for (int i = 0; i < n->num_outputs(); ++i) {
      const Value* v = branch->outputs()[i];
      if (v->owner() == branch && named_by.emplace(v, i).second) continue;
      if (IsRootGraphOutput(n->output(i))) return std::nullopt;
    }

    // Take the branch out of the node, park the If's uses, erase the If
    // (names are counted while its outputs and the branch still hold theirs).
    names_.Ensure();
    std::unique_ptr<Graph> taken = std::move(const_cast<Attribute*>(attr)->mutable_graphs()[0]);
    const_cast<Attribute*>(attr)->mutable_graphs().clear();
    std::vector<std::string> out_names;
    std::vector<Value*> parked(n->num_outputs(), nullptr);
    for (int i = 0; i < n->num_outputs(); ++i) {
      Value* o = n->output(i);
      out_names.push_back(o->name());
      if (!o->has_uses()) continue;
      parked[i] = g.AddElidedConstant(g.UniqueName("if.out"), o->type());
      o->ReplaceAllUsesWith(parked[i]);
    }
    g.EraseNode(n);

    auto name_of = [&](const Value* v) {
      auto it = named_by.find(v);
      return NameFor(g, it != named_by.end() ? out_names[it->second] : v->name());
    };
    for (Value* c : taken->Constants()) {
      std::string name = name_of(c);
      Value* nc = c->constant().defined() ? g.AddConstant(name, c->constant()) : g.AddElidedConstant(name, c->type());
      if (c->has_uses()) c->ReplaceAllUsesWith(nc);
    }
    std::vector<Node*> moved;
    for (Node* bn : taken->NodeList()) {
      std::vector<std::string> names;
      for (const Value* o : bn->outputs()) names.push_back(name_of(o));
      Node* nn = g.AddNode(bn->op(), bn->inputs(), std::move(names), bn->domain(), next);
      nn->set_name(bn->name());
      for (const auto& [key, a] : bn->attrs()) {
        if (a.kind() == AttrKind::kGraph || a.kind() == AttrKind::kGraphs) {
          // Move nested graphs: cloning would rebind their captures by name.
          Attribute m = std::move(const_cast<Attribute&>(a));
          for (auto& sg : m.mutable_graphs()) sg->set_parent(&g);
          nn->SetAttr(key, std::move(m));
        } else {
          nn->SetAttr(key, a.Clone(&g));
        }
      }
      for (int i = 0; i < bn->num_outputs(); ++i) {
        nn->output(i)->set_type(bn->output(i)->type());
        if (bn->output(i)->has_uses()) bn->output(i)->ReplaceAllUsesWith(nn->output(i));
      }
      moved.push_back(nn);
    }
    for (int i = 0; i < static_cast<int>(parked.size()); ++i) {
      if (!parked[i]) continue;
      parked[i]->ReplaceAllUsesWith(taken->outputs()[i]);
      g.EraseValue(parked[i]);
    }
    ++report.ifs_inlined;
    report.nodes_inlined += static_cast<int64_t>(moved.size());
    return moved;  // `taken` is destroyed here, releasing its uses
  }

  bool TryRemoveLoop(Graph& g, Node* n) {
    if (!IsOp(*n, "Loop")) return false;
    std::optional<int64_t> trips = ConstantInt(n->input(0));
    std::optional<bool> cond = ConstantTruth(n->input(1));
    if (!((trips && *trips <= 0) || (cond && !*cond))) return false;
    const Attribute* attr = n->attr("body");
    const Graph* body = attr && attr->kind() == AttrKind::kGraph ? attr->g() : nullptr;
    if (!body) return false;
    int num_carried = std::max(n->num_inputs() - 2, 0);
    int num_scan = n->num_outputs() - num_carried;
    if (num_scan < 0 || static_cast<int>(body->outputs().size()) != 1 + num_carried + num_scan) return false;
    std::vector<Value*> values(n->num_outputs(), nullptr);
    std::vector<Tensor> tensors(n->num_outputs());
    for (int i = 0; i < num_carried; ++i) {
      Value* init = n->input(2 + i);
      if (!init) return false;
      if (IsRootGraphOutput(n->output(i))) {
        if (!init->constant_data()) return false;
        tensors[i] = init->constant();  // a constant under the output's name
      } else {
        values[i] = init;
      }
    }
    for (int k = 0; k < num_scan; ++k) {
      const Type& elem = body->outputs()[1 + num_carried + k]->type();
      if (!elem.is_tensor() || elem.dtype() == DType::kUndefined || !elem.shape().ranked() ||
          !elem.shape().is_static())
        return false;
      Dims dims = elem.shape().StaticDims();
      dims.insert(dims.begin(), 0);
      Tensor empty(elem.dtype(), dims);
      Value* out = n->output(num_carried + k);
      if (!CheckTensorMatchesType(empty, out->type(), out->name()).ok()) return false;
      tensors[num_carried + k] = std::move(empty);
    }
    ReplaceNodeOutputs(g, n, values, tensors);
    ++report.loops_removed;
    return true;
  }

  NameTable names_;
};

}  // namespace

DeadBranchReport EliminateDeadBranches(Graph& g) {
  DeadBranchEliminator e(g);
  // Only nodes holding graphs (If, Loop) are rewritten: a graph that never
  // held one is left without a walk.
  if (g.may_hold_graphs()) e.ProcessNodes(g, g.NodeList(), nullptr);
  return e.report;
}

namespace {

class EliminateDeadBranchesPass : public Pass {
 public:
  absl::string_view name() const override { return "eliminate-dead-branches"; }
  // A condition or trip count becomes constant only by a change of another
  // kind (folding).
  ChangeKinds woken_by(const Graph&) const override { return kChangeOther; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    DeadBranchReport r = EliminateDeadBranches(graph);
    if (r.ifs_inlined) stats().Add("ifs-inlined", r.ifs_inlined);
    if (r.nodes_inlined) stats().Add("nodes-inlined", r.nodes_inlined);
    if (r.loops_removed) stats().Add("loops-removed", r.loops_removed);
    return r.ifs_inlined > 0 || r.loops_removed > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateEliminateDeadBranchesPass() { return std::make_unique<EliminateDeadBranchesPass>(); }

}  // namespace kiln
