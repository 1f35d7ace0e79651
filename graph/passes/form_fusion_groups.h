//===- form_fusion_groups.h - group memory-bound chains and matmul epilogues into fused nodes ---*- C++ -*-===//
#pragma once

#include <memory>

#include "graph/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateFormFusionGroupsPass();

}  // namespace kiln
