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
// a dead node is dead. Graph inputs are never removed: they are the
// interface of the graph (or, for a body, its positional signature).
//
// Every user of a node comes after it (a later node of its graph, or a node
// nested in a later one), so one sweep of each graph from its last node to
// its first decides each node when it reaches it: a node nothing live has
// marked by then is dead and is erased there, its users being gone already;
// a live node marks its producers and has its nested graphs swept the same
// way. A node that still has uses is never erased (on a graph whose order
// does not verify, liveness may come too late, and such a node stays).
//
//===----------------------------------------------------------------------===//
#include "graph/passes/dce.h"

namespace kiln {
namespace {

class DeadCodeEliminator {
 public:
  // Sweeps `g`, whose outputs are live.
  void Sweep(Graph& g) {
    for (const Value* v : g.outputs()) MarkProducer(v);
    for (Node* n = g.last_node(), *prev = nullptr; n; n = prev) {
      prev = n->prev();
      g.PrefetchBehind(prev);
      if (live_.Contains(n)) {
        for (Graph* s : n->subgraphs()) Sweep(*s);
        for (const Value* v : n->inputs()) MarkProducer(v);
        continue;
      }
      bool used = false;
      for (const Value* o : n->outputs()) used |= o->has_uses();
      if (used) continue;
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

 private:
  void MarkProducer(const Value* v) {
    if (v && v->producer()) live_.Insert(v->producer());
  }

  ScratchMarks live_;
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
