//===- simplify.cc - algebraic simplification ---===//
#include "graph/passes/simplify.h"

namespace kiln {
namespace {

class SimplifyPass : public Pass {
 public:
  absl::string_view name() const override { return "simplify"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return false; }
};

}  // namespace

std::unique_ptr<Pass> CreateSimplifyPass() { return std::make_unique<SimplifyPass>(); }

}  // namespace kiln
