//===- dce.cc - dead-code elimination ---===//
//
// A node is dead if no output of the graph being optimized depends on it,
// and a constant is dead if nothing uses it; dead nodes and constants are
// removed, in nested graphs too.
//
// Liveness flows backwards from the outputs of the top graph: a live node
// makes the producers of its inputs live, and every output of its nested
// graphs (the body of a live Loop yields all its values), which in turn may
// be values of enclosing graphs. A node used only inside the nested graph of
// a dead node is dead. Nested graphs of live nodes are swept before their
// enclosing graph, and each graph's dead nodes are erased last to first, so
// no erased value still has a use. Graph inputs are never removed: they are
// the interface of the graph (or, for a body, its positional signature).
//
//===----------------------------------------------------------------------===//
#include "graph/passes/dce.h"

#include <vector>

#include "absl/container/flat_hash_set.h"

namespace kiln {
namespace {

class DeadCodeEliminator {
 public:
  void MarkFromOutputs(const Graph& g) {
    live_.reserve(g.num_nodes());
    for (const Value* v : g.outputs()) MarkValue(v);
    while (!worklist_.empty()) {
      const Node* n = worklist_.back();
      worklist_.pop_back();
      for (const Value* v : n->inputs()) MarkValue(v);
      for (const Graph* s : n->subgraphs())
        for (const Value* v : s->outputs()) MarkValue(v);
    }
  }

  void Sweep(Graph& g) {
    if (g.may_hold_graphs()) {
      for (Node* n : g.nodes()) {
        std::vector<Graph*> subs = n->subgraphs();
        if (!subs.empty() && live_.contains(n))
          for (Graph* s : subs) Sweep(*s);
      }
    }
    // Last to first, straight through the list: erasing a node leaves the
    // ones before it in place.
    for (Node* n = g.last_node(), *prev = nullptr; n; n = prev) {
      prev = n->prev();
      if (live_.contains(n)) continue;
      bool used = false;
      for (const Value* o : n->outputs()) used |= o->has_uses();
      if (used) continue;  // cannot happen: a use by a live node makes n live
      g.EraseNode(n);
      ++report.nodes_removed;
    }
    for (Value* c : g.Constants()) {
      if (c->has_uses()) continue;
      g.EraseValue(c);
      ++report.constants_removed;
    }
  }

  DceReport report;

 private:
  void MarkValue(const Value* v) {
    if (!v || !v->producer()) return;
    if (live_.insert(v->producer()).second) worklist_.push_back(v->producer());
  }

  absl::flat_hash_set<const Node*> live_;
  std::vector<const Node*> worklist_;
};

}  // namespace

DceReport EliminateDeadCode(Graph& g) {
  DeadCodeEliminator dce;
  dce.MarkFromOutputs(g);
  dce.Sweep(g);
  return dce.report;
}

namespace {

class DcePass : public Pass {
 public:
  absl::string_view name() const override { return "dce"; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    DceReport r = EliminateDeadCode(graph);
    if (r.nodes_removed) stats().Add("nodes-removed", r.nodes_removed);
    if (r.constants_removed) stats().Add("constants-removed", r.constants_removed);
    return r.nodes_removed > 0 || r.constants_removed > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateDcePass() { return std::make_unique<DcePass>(); }

}  // namespace kiln
