//===- dedup_constants.h - merge constants with identical dtype, shape and bytes ---*- C++ -*-===//
#pragma once

#include <cstdint>
#include <memory>

#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

struct DedupReport {
  int64_t constants_merged = 0;
  int64_t bytes_saved = 0;
};

// Replaces every constant of `g` and its nested graphs by the first visible
// constant with the same dtype, dims and bytes.
DedupReport DeduplicateConstants(Graph& g);

std::unique_ptr<Pass> CreateDedupConstantsPass();

}  // namespace kiln
