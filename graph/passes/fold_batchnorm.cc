//===- fold_batchnorm.cc - fold BatchNormalization into the preceding Conv or Gemm ---===//
#include "graph/passes/fold_batchnorm.h"

namespace kiln {
namespace {

class FoldBatchNormPass : public Pass {
 public:
  absl::string_view name() const override { return "fold-batchnorm"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return false; }
};

}  // namespace

std::unique_ptr<Pass> CreateFoldBatchNormPass() { return std::make_unique<FoldBatchNormPass>(); }

}  // namespace kiln
