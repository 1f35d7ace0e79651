//===- fold_constants.h - evaluate nodes whose inputs are constant or whose output depends only on static shapes ---*- C++ -*-===//
#pragma once

#include <cstdint>
#include <memory>

#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

// A Loop is folded only when its trip count is known and at most this.
inline constexpr int64_t kMaxFoldedLoopTrips = 4096;

struct FoldReport {
  int64_t constants_folded = 0;  // constants created for folded outputs
  int64_t nodes_removed = 0;     // nodes replaced by constants
  int64_t skipped_size = 0;      // folds left alone: a result over max_elements
};

// Folds every node of `g` and its nested graphs that can be evaluated now;
// no result tensor may have more than `max_elements` elements.
FoldReport FoldConstants(Graph& g, int64_t max_elements);

std::unique_ptr<Pass> CreateFoldConstantsPass();

}  // namespace kiln
