//===- expand_composites.cc - Expand composite ops into ONNX ops ----------===//
//
// A composite node is expanded when it is replaced by ONNX ops of the
// default domain that compute what its definition says (graph/ops/
// composite.cc), so that no kiln.* composite remains.
//
// The expansion of a node is inserted just before it, so the sweep in node
// order never meets the new nodes or an erased one.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/expand_composites.h"

#include <vector>

#include "graph/passes/patterns/composite_expanders.h"

namespace kiln {

bool ExpandComposites(Graph& graph, PassStatistics* stats) {
  bool changed = false;
  for (Node* n : graph.NodeList()) {
    for (Graph* sub : n->subgraphs()) changed |= ExpandComposites(*sub, stats);
    if (n->domain() != "kiln") continue;
    for (const patterns::CompositeExpander& e : patterns::CompositeExpanders()) {
      if (n->op() != e.op) continue;
      if (e.apply(n)) {
        if (stats) stats->Add(e.counter);
        changed = true;
      }
      break;
    }
  }
  return changed;
}

namespace {

class ExpandCompositesPass : public Pass {
 public:
  absl::string_view name() const override { return "expand-composites"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return ExpandComposites(graph, &stats()); }
};

}  // namespace

std::unique_ptr<Pass> CreateExpandCompositesPass() { return std::make_unique<ExpandCompositesPass>(); }

}  // namespace kiln
