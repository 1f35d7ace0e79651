//===- dce.cc - dead-code elimination ---===//
#include "graph/passes/dce.h"

namespace kiln {
namespace {

class DcePass : public Pass {
 public:
  absl::string_view name() const override { return "dce"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return false; }
};

}  // namespace

std::unique_ptr<Pass> CreateDcePass() { return std::make_unique<DcePass>(); }

}  // namespace kiln
