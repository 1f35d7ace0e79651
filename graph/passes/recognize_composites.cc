//===- recognize_composites.cc - Recognize composite subgraphs ------------===//
//
// A subgraph is replaced by a composite node when it computes exactly what
// the composite computes (up to floating-point rounding) from values outside
// it, and nothing outside it reads its intermediate values.
//
// Nodes are visited in order and each is offered, as the last node of a
// subgraph, to the recognizers of its op. A composite created before a later
// root (a Softmax recognized from Exp/ReduceSum/Div) takes part in that
// root's match (attention) in the same sweep. Recognizers erase only the
// matched subgraph and producers that become dead, which all come before
// the root, so the sweep never meets an erased node.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/recognize_composites.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "graph/passes/patterns/composite_recognizers.h"

namespace kiln {
namespace {

using patterns::CompositeRecognizer;

const absl::flat_hash_map<std::string, std::vector<const CompositeRecognizer*>>& RecognizersByOp() {
  static const auto* by_op = [] {
    auto* m = new absl::flat_hash_map<std::string, std::vector<const CompositeRecognizer*>>;
    for (const CompositeRecognizer& r : patterns::CompositeRecognizers()) (*m)[r.op].push_back(&r);
    return m;
  }();
  return *by_op;
}

}  // namespace

bool RecognizeComposites(Graph& graph, PassStatistics* stats) {
  const auto& by_op = RecognizersByOp();
  bool changed = false;
  // Straight through the list, up to the node that was last when the sweep
  // began: rewrites insert only before the node visited and erase only it
  // and nodes before it, so the next node is read first.
  for (Node *n = graph.first_node(), *last = graph.last_node(), *next = nullptr; n; n = next) {
    next = n == last ? nullptr : n->next();
    graph.PrefetchAhead(next);
    for (Graph* sub : n->subgraphs()) changed |= RecognizeComposites(*sub, stats);
    if (!n->domain().empty()) continue;
    auto it = by_op.find(n->op());
    if (it == by_op.end()) continue;
    for (const CompositeRecognizer* r : it->second) {
      if (!r->apply(n)) continue;
      if (stats) stats->Add(r->counter);
      changed = true;
      break;
    }
  }
  return changed;
}

namespace {

// Whether some recognizer may apply: the graph holds an op one of them needs.
bool AnyRecognizerMayApply(const Graph& graph) {
  for (const CompositeRecognizer& r : patterns::CompositeRecognizers())
    for (const char* op : r.needs)
      if (op && graph.NestMayHoldOp(op)) return true;
  return false;
}

class RecognizeCompositesPass : public Pass {
 public:
  absl::string_view name() const override { return "recognize-composites"; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    if (!AnyRecognizerMayApply(graph)) return false;  // nothing to walk for
    return RecognizeComposites(graph, &stats());
  }
};

}  // namespace

std::unique_ptr<Pass> CreateRecognizeCompositesPass() { return std::make_unique<RecognizeCompositesPass>(); }

}  // namespace kiln
