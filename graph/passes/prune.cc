//===- prune.cc - prune the graph to the requested outputs ---===//
//
// With --outputs=a,b the graph's outputs become exactly a and b, and every
// node and constant they do not depend on is removed.
//
// The requested names must be outputs of the graph (an unknown one is an
// error that lists the real outputs); repeated names are kept once. The
// removal is the dce pass's, so nested graphs are pruned as well.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/prune.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/passes/dce.h"
#include "graph/support/status.h"

namespace kiln {

absl::StatusOr<PruneReport> PruneToOutputs(Graph& g, const std::vector<std::string>& keep) {
  PruneReport report;
  if (keep.empty()) return report;
  absl::flat_hash_map<std::string, Value*> by_name;
  for (Value* v : g.outputs()) by_name.emplace(v->name(), v);
  std::vector<Value*> outputs;
  absl::flat_hash_set<std::string> seen;
  for (const std::string& name : keep) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      std::vector<std::string> real;
      for (const Value* v : g.outputs()) real.push_back(absl::StrCat("'", v->name(), "'"));
      return InvalidArgument("unknown output '", name, "' (the graph's outputs are ",
                             real.empty() ? "none" : absl::StrJoin(real, ", "), ")");
    }
    if (seen.insert(name).second) outputs.push_back(it->second);
  }
  report.outputs_removed = static_cast<int64_t>(g.outputs().size() - outputs.size());
  bool changed = outputs != g.outputs();
  if (changed) {
    g.ClearOutputs();
    for (Value* v : outputs) g.AddOutput(v);
  }
  DceReport r = EliminateDeadCode(g);
  report.nodes_removed = r.nodes_removed;
  report.constants_removed = r.constants_removed;
  report.changed = changed || r.nodes_removed > 0 || r.constants_removed > 0;
  return report;
}

namespace {

class PrunePass : public Pass {
 public:
  absl::string_view name() const override { return "prune"; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    KILN_ASSIGN_OR_RETURN(PruneReport r, PruneToOutputs(graph, options().outputs));
    if (r.outputs_removed) stats().Add("outputs-removed", r.outputs_removed);
    if (r.nodes_removed) stats().Add("nodes-removed", r.nodes_removed);
    if (r.constants_removed) stats().Add("constants-removed", r.constants_removed);
    return r.changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreatePrunePass() { return std::make_unique<PrunePass>(); }

}  // namespace kiln
