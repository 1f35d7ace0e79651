//===- prune.h - prune the graph to the requested outputs ---*- C++ -*-===//
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

struct PruneReport {
  int64_t outputs_removed = 0;
  int64_t nodes_removed = 0;
  int64_t constants_removed = 0;
  bool changed = false;
};

// Keeps only the outputs of `g` named in `keep` (in that order; an error
// lists the real outputs when a name is not one), then removes what they do
// not need. An empty `keep` changes nothing.
absl::StatusOr<PruneReport> PruneToOutputs(Graph& g, const std::vector<std::string>& keep);

std::unique_ptr<Pass> CreatePrunePass();

}  // namespace kiln
