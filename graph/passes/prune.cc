//===- prune.cc - prune the graph to the requested outputs ---===//
#include "graph/passes/prune.h"

namespace kiln {
namespace {

class PrunePass : public Pass {
 public:
  absl::string_view name() const override { return "prune"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return false; }
};

}  // namespace

std::unique_ptr<Pass> CreatePrunePass() { return std::make_unique<PrunePass>(); }

}  // namespace kiln
