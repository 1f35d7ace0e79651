//===- dedup_constants.cc - merge constants with identical dtype, shape and bytes ---===//
//
// Constants with the same dtype, dims and bytes are one constant: every use
// of a later one is redirected to the first, which is kept.
//
// Constants are found by a content hash (Tensor::Hash) and confirmed by a
// byte comparison. "First" follows scoping: a graph's constants are visible
// in every graph nested in it, so a nested graph's constant may be replaced
// by one of an enclosing graph, but never by one of a sibling graph. Within
// a graph the first in creation order is kept. A constant that is an output
// of the top graph is kept under its name (the model's interface); elided
// constants (no bytes) are left alone.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/dedup_constants.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "graph/passes/rewrite_helpers.h"

namespace kiln {
namespace {

class ConstantDeduplicator {
 public:
  void ProcessGraph(Graph& g) {
    size_t mark = pushed_.size();
    // Reads the next constant before erasing the one it stands on.
    for (Value* c = g.first_constant(), *next = nullptr; c; c = next) {
      next = g.NextConstant(c);
      const Tensor& t = c->constant();
      if (!t.defined()) continue;
      uint64_t h = t.Hash();
      std::vector<Value*>& bucket = table_[h];
      Value* rep = nullptr;
      for (Value* r : bucket)
        if (r->constant().Equals(t)) {
          rep = r;
          break;
        }
      if (!rep) {
        bucket.push_back(c);
        pushed_.push_back(h);
        continue;
      }
      if (IsRootGraphOutput(c)) continue;
      if (c->has_uses()) c->ReplaceAllUsesWith(rep);
      ++report.constants_merged;
      if (!t.SharesStorageWith(rep->constant())) report.bytes_saved += static_cast<int64_t>(t.nbytes());
      g.EraseValue(c);
    }
    if (g.may_hold_graphs())
      for (Node* n : g.nodes())
        for (Graph* s : n->subgraphs()) ProcessGraph(*s);
    while (pushed_.size() > mark) {
      table_[pushed_.back()].pop_back();
      pushed_.pop_back();
    }
  }

  DedupReport report;

 private:
  absl::flat_hash_map<uint64_t, std::vector<Value*>> table_;
  std::vector<uint64_t> pushed_;
};

}  // namespace

DedupReport DeduplicateConstants(Graph& g) {
  ConstantDeduplicator d;
  d.ProcessGraph(g);
  return d.report;
}

namespace {

class DedupConstantsPass : public Pass {
 public:
  absl::string_view name() const override { return "dedup-constants"; }
  // Only a change of another kind (folding) makes new constants.
  ChangeKinds woken_by(const Graph&) const override { return kChangeOther; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    DedupReport r = DeduplicateConstants(graph);
    if (r.constants_merged) stats().Add("constants-merged", r.constants_merged);
    if (r.bytes_saved) stats().Add("bytes-saved", r.bytes_saved);
    // Constants of one dtype, dims and bytes have one type; every
    // duplicate is merged in one run.
    NoteChange(kChangeMerged);
    NoteSettled();
    return r.constants_merged > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateDedupConstantsPass() { return std::make_unique<DedupConstantsPass>(); }

}  // namespace kiln
