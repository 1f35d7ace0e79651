//===- expand_composites.cc - expand composite nodes back into ONNX ops ---===//
#include "graph/passes/expand_composites.h"

namespace kiln {
namespace {

class ExpandCompositesPass : public Pass {
 public:
  absl::string_view name() const override { return "expand-composites"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return false; }
};

}  // namespace

std::unique_ptr<Pass> CreateExpandCompositesPass() { return std::make_unique<ExpandCompositesPass>(); }

}  // namespace kiln
