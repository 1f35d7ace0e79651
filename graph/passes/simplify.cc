//===- simplify.cc - Algebraic simplification -----------------------------===//
//
// A node is simplified when an algebraic pattern proves that it computes a
// value the graph already has (and is removed), or that it computes the same
// value from earlier inputs with less work (and is rewritten).
//
// Nodes are visited in order, so a node's producers are already simplified
// when it is visited and chains (Transpose∘Transpose∘Transpose) collapse in
// one sweep. A node rewritten in place is offered to the patterns again.
// Patterns only erase the node they look at and producers that become dead,
// which come before it, so the sweep never meets an erased node.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/simplify.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "graph/passes/patterns/algebraic.h"

namespace kiln {
namespace {

using patterns::AlgebraicPattern;
using patterns::RewriteResult;

// Patterns by op (each op's in table order).
const absl::flat_hash_map<std::string, std::vector<const AlgebraicPattern*>>& PatternsByOp() {
  static const auto* by_op = [] {
    auto* m = new absl::flat_hash_map<std::string, std::vector<const AlgebraicPattern*>>;
    for (const AlgebraicPattern& p : patterns::AlgebraicPatterns()) (*m)[p.op].push_back(&p);
    return m;
  }();
  return *by_op;
}

// A node rewritten in place is offered again at most this many times.
constexpr int kMaxRewritesPerNode = 8;

}  // namespace

bool SimplifyGraph(Graph& graph, PassStatistics* stats, ChangeKinds* kinds) {
  const auto& by_op = PatternsByOp();
  bool changed = false;
  // Straight through the list, up to the node that was last when the sweep
  // began: rewrites insert only before the node visited and erase only it
  // and nodes before it, so the next node is read first.
  for (Node *n = graph.first_node(), *last = graph.last_node(), *next = nullptr; n; n = next) {
    next = n == last ? nullptr : n->next();
    graph.PrefetchAhead(next);
    for (Graph* sub : n->subgraphs()) changed |= SimplifyGraph(*sub, stats, kinds);
    if (!n->domain().empty()) continue;
    auto it = by_op.find(n->op());
    if (it == by_op.end()) continue;
    bool erased = false;
    for (int round = 0; round < kMaxRewritesPerNode && !erased; ++round) {
      bool applied = false;
      for (const AlgebraicPattern* p : it->second) {
        RewriteResult r = p->apply(n);
        if (r == RewriteResult::kNoMatch) continue;
        if (stats) stats->Add(p->counter);
        changed = applied = true;
        erased = r == RewriteResult::kErased || r == RewriteResult::kForwarded;
        if (kinds) *kinds |= r == RewriteResult::kForwarded ? kChangeMerged : kChangeOther;
        break;
      }
      if (!applied) break;
    }
  }
  return changed;
}

namespace {

class SimplifyPass : public Pass {
 public:
  absl::string_view name() const override { return "simplify"; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    ChangeKinds kinds = 0;
    bool changed = SimplifyGraph(graph, &stats(), &kinds);
    // Removing x*1, x+0, Identity and the like merges the node's output
    // into x; other rewrites are changes of any kind. Not settled: a
    // removal can leave an earlier value with one reader, which some
    // patterns ask for.
    NoteChange(kinds);
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateSimplifyPass() { return std::make_unique<SimplifyPass>(); }

}  // namespace kiln
