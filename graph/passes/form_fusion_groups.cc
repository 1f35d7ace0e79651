//===- form_fusion_groups.cc - group memory-bound chains and matmul epilogues into fused nodes ---===//
//
// A fusion group is a convex set of nodes that a target runs as one kernel
// so that the values passed between its members never go through memory:
// the elementwise consumers of a MatMul, Gemm or Conv (its epilogue), or a
// chain of elementwise nodes that may end with a reduction or
// normalization; each group becomes one kiln.Fused node computing exactly
// what its members computed.
//
// Which nodes group together is decided by fusion::PartitionGraph (the
// epilogues first, then memory-bound chains from the last node back, with
// the cost model of fusion/cost_model.h: fusing saves an intermediate's
// write and read-back; a producer with other users is recomputed inside a
// group only when it is cheap and that beats the round trip) and written out
// by fusion::OutlineGroups. Nested graphs of If, Loop, Scan and other nodes
// are partitioned on their own; bodies of existing kiln.Fused nodes are left
// alone, so running the pass twice changes nothing the second time.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/form_fusion_groups.h"

#include "graph/passes/fusion/outline.h"
#include "graph/passes/rewrite_helpers.h"

namespace kiln {
namespace {

bool IsFused(const Node& n) { return n.domain() == "kiln" && n.op() == "Fused"; }

void FormIn(Graph& g, const fusion::PartitionOptions& options, NameTable& names, int* body_count,
            FusionReport& report) {
  for (Node* n : g.nodes())
    if (!IsFused(*n))
      for (Graph* s : n->subgraphs()) FormIn(*s, options, names, body_count, report);
  fusion::Partition p = fusion::PartitionGraph(g, options);
  report.groups_dissolved += p.dissolved;
  fusion::OutlineReport o = fusion::OutlineGroups(g, p, names, body_count);
  for (int k = 0; k < 4; ++k) report.groups[k] += o.groups[k];
  report.nodes_fused += o.nodes_fused;
  report.nodes_duplicated += o.nodes_duplicated;
  report.duplicates_erased += o.duplicates_erased;
  report.bytes_saved += o.bytes_saved;
}

}  // namespace

FusionReport FormFusionGroups(Graph& g, const fusion::PartitionOptions& options) {
  FusionReport report;
  NameTable names(g);
  int body_count = 0;
  FormIn(g, options, names, &body_count, report);
  return report;
}

namespace {

class FormFusionGroupsPass : public Pass {
 public:
  absl::string_view name() const override { return "form-fusion-groups"; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    FusionReport r = FormFusionGroups(graph);
    static const char* const kCounters[] = {"elementwise-groups", "reduction-groups", "matmul-epilogue-groups",
                                            "conv-epilogue-groups"};
    for (int k = 0; k < 4; ++k)
      if (r.groups[k]) stats().Add(kCounters[k], r.groups[k]);
    if (r.total_groups()) stats().Add("groups-formed", r.total_groups());
    if (r.nodes_fused) stats().Add("nodes-fused", r.nodes_fused);
    if (r.nodes_duplicated) stats().Add("nodes-duplicated", r.nodes_duplicated);
    if (r.duplicates_erased) stats().Add("duplicates-erased", r.duplicates_erased);
    if (r.bytes_saved) stats().Add("intermediate-bytes-saved", r.bytes_saved);
    if (r.groups_dissolved) stats().Add("groups-dissolved", r.groups_dissolved);
    return r.total_groups() > 0 || r.nodes_fused > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFormFusionGroupsPass() { return std::make_unique<FormFusionGroupsPass>(); }

}  // namespace kiln
