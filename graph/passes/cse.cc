//===- cse.cc - common-subexpression elimination ---===//
#include "graph/passes/cse.h"

namespace kiln {
namespace {

class CsePass : public Pass {
 public:
  absl::string_view name() const override { return "cse"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return false; }
};

}  // namespace

std::unique_ptr<Pass> CreateCsePass() { return std::make_unique<CsePass>(); }

}  // namespace kiln
