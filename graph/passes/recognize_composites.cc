//===- recognize_composites.cc - recognize LayerNorm, GELU, Softmax and attention patterns ---===//
#include "graph/passes/recognize_composites.h"

namespace kiln {
namespace {

class RecognizeCompositesPass : public Pass {
 public:
  absl::string_view name() const override { return "recognize-composites"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return false; }
};

}  // namespace

std::unique_ptr<Pass> CreateRecognizeCompositesPass() { return std::make_unique<RecognizeCompositesPass>(); }

}  // namespace kiln
