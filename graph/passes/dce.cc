//===- dce.cc - dead-code elimination ---===//
//
// A node is dead if no output of the graph being optimized depends on it,
// and a constant is dead if nothing uses it; dead nodes and constants are
// removed, in nested graphs too.
//
// Every user of a node comes after it (a later node of its graph, or a node
// nested in a later one), so one sweep of each graph from its last node to
// its first decides each node when it reaches it: the dead users of its
// outputs are erased by then (with their nested graphs, whose uses of
// enclosing values go with them), so a node whose outputs have no uses left
// is dead and is erased there, and one with a use is live (a use by a
// surviving node or by an output of the graph) and has its nested graphs
// swept the same way. A node used only inside the nested graph of a dead
// node is therefore dead. The sweep reads each node and value and writes
// nothing but the erasures: no liveness marks. Graph inputs are never
// removed: they are the interface of the graph (or, for a body, its
// positional signature). A node that still has uses is never erased (on a
// graph whose order does not verify, a user may come before it).
//
//===----------------------------------------------------------------------===//
#include "graph/passes/dce.h"

namespace kiln {
namespace {

class DeadCodeEliminator {
 public:
  void Sweep(Graph& g) {
    for (Node* n = g.last_node(), *prev = nullptr; n; n = prev) {
      prev = n->prev();
      g.PrefetchBehind(prev);
      bool used = false;
      for (const Value* o : n->outputs()) used |= o->has_uses();
      if (used) {
        if (n->may_hold_graphs())
          for (Graph* s : n->subgraphs()) Sweep(*s);
        continue;
      }
      g.EraseNode(n);
      ++report.nodes_removed;
    }
    // Constants first to last, reading the next one before erasing.
    for (Value* c = g.first_constant(), *next = nullptr; c; c = next) {
      next = g.NextConstant(c);
      if (c->has_uses()) continue;
      g.EraseValue(c);
      ++report.constants_removed;
    }
  }

  DceReport report;
};

}  // namespace

DceReport EliminateDeadCode(Graph& g) {
  DeadCodeEliminator dce;
  dce.Sweep(g);
  return dce.report;
}

namespace {

class DcePass : public Pass {
 public:
  absl::string_view name() const override { return "dce"; }
  // Merges leave nothing unused (Pass::kChangeMerged).
  ChangeKinds woken_by(const Graph&) const override { return kChangeOther | kChangeErased; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    DceReport r = EliminateDeadCode(graph);
    if (r.nodes_removed) stats().Add("nodes-removed", r.nodes_removed);
    if (r.constants_removed) stats().Add("constants-removed", r.constants_removed);
    // One sweep erases every dead node (users before producers).
    NoteChange(kChangeErased);
    NoteSettled();
    return r.nodes_removed > 0 || r.constants_removed > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateDcePass() { return std::make_unique<DcePass>(); }

}  // namespace kiln
