//===- gears.cc - static-shape gears: one static variant per gear behind a dispatch ---===//
#include "graph/passes/gears.h"

namespace kiln {
namespace {

class GearsPass : public Pass {
 public:
  absl::string_view name() const override { return "gears"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return false; }
};

}  // namespace

std::unique_ptr<Pass> CreateGearsPass() { return std::make_unique<GearsPass>(); }

}  // namespace kiln
