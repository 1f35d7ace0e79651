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

bool SimplifyGraph(Graph& graph, PassStatistics* stats, ChangeKinds* kinds, bool* settled) {
  const auto& by_op = PatternsByOp();
  bool changed = false;
  // A sweep settles when each rewrite forwarded a node that had readers and
  // erased nothing else: the value forwarded gains readers and loses none,
  // and no node is added, so no node swept earlier meets anything new (the
  // patterns ask of a node's inputs their producers, types and data, which
  // a later node's rewrite does not change, and at most that a value have
  // one reader or none, which more readers never makes true). The node
  // count tells whether a rewrite erased or added more than its node,
  // here or, through a nested graph, in this one.
  const size_t nodes_before = graph.num_nodes();
  size_t forwarded = 0;
  // Straight through the list, up to the node that was last when the sweep
  // began: rewrites insert only before the node visited and erase only it
  // and nodes before it, so the next node is read first.
  for (Node *n = graph.first_node(), *last = graph.last_node(), *next = nullptr; n; n = next) {
    next = n == last ? nullptr : n->next();
    graph.PrefetchAhead(next);
    for (Graph* sub : n->subgraphs()) changed |= SimplifyGraph(*sub, stats, kinds, settled);
    if (!n->domain().empty()) continue;
    auto it = by_op.find(n->op());
    if (it == by_op.end()) continue;
    bool erased = false;
    for (int round = 0; round < kMaxRewritesPerNode && !erased; ++round) {
      bool applied = false;
      const bool read = n->num_outputs() == 1 && n->output(0)->has_uses();
      for (const AlgebraicPattern* p : it->second) {
        RewriteResult r = p->apply(n);
        if (r == RewriteResult::kNoMatch) continue;
        if (stats) stats->Add(p->counter);
        changed = applied = true;
        erased = r == RewriteResult::kErased || r == RewriteResult::kForwarded;
        if (kinds) *kinds |= r == RewriteResult::kForwarded ? kChangeMerged : kChangeOther;
        if (r == RewriteResult::kForwarded && read)
          ++forwarded;
        else if (settled)
          *settled = false;
        break;
      }
      if (!applied) break;
    }
  }
  if (settled && graph.num_nodes() + forwarded != nodes_before) *settled = false;
  return changed;
}

namespace {

// Whether `graph` holds a node that a pattern asking for use counts looks
// at (or may, in a nested graph).
bool HoldsUseCountPatternOp(const Graph& graph) {
  for (const AlgebraicPattern& p : patterns::AlgebraicPatterns())
    if (p.reads_use_counts && graph.NestMayHoldOp(p.op)) return true;
  return false;
}

class SimplifyPass : public Pass {
 public:
  absl::string_view name() const override { return "simplify"; }
  // Patterns ask of a node its inputs' producers, types and data, which
  // merging and erasing elsewhere leave alone; the few that ask how many
  // readers a value has can apply after those too, where the graph holds
  // their ops.
  ChangeKinds woken_by(const Graph& graph) const override {
    return HoldsUseCountPatternOp(graph) ? kAnyChange : ChangeKinds{kChangeOther};
  }
  absl::StatusOr<bool> Run(Graph& graph) override {
    ChangeKinds kinds = 0;
    bool settled = true;
    bool changed = SimplifyGraph(graph, &stats(), &kinds, &settled);
    // Removing x*1, x+0, Identity and the like merges the node's output
    // into x; other rewrites are changes of any kind. Settled when only
    // such removals happened (see SimplifyGraph).
    NoteChange(kinds);
    if (settled) NoteSettled();
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateSimplifyPass() { return std::make_unique<SimplifyPass>(); }

}  // namespace kiln
