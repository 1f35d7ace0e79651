//===- form_fusion_groups.h - group memory-bound chains and matmul epilogues into fused nodes ---*- C++ -*-===//
#pragma once

#include <cstdint>
#include <memory>

#include "graph/ir/graph.h"
#include "graph/passes/fusion/partition.h"
#include "graph/passes/pass.h"

namespace kiln {

struct FusionReport {
  int64_t groups[4] = {0, 0, 0, 0};  // by fusion::GroupKind
  int64_t nodes_fused = 0;
  int64_t nodes_duplicated = 0;
  int64_t duplicates_erased = 0;
  int64_t bytes_saved = 0;
  int64_t groups_dissolved = 0;
  int64_t total_groups() const { return groups[0] + groups[1] + groups[2] + groups[3]; }
};

// Forms the fusion groups of `g` and the graphs nested in it (not inside
// existing kiln.Fused bodies) and turns each into one kiln.Fused node.
FusionReport FormFusionGroups(Graph& g, const fusion::PartitionOptions& options = {});

std::unique_ptr<Pass> CreateFormFusionGroupsPass();

}  // namespace kiln
