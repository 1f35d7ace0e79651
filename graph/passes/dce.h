//===- dce.h - dead-code elimination ---*- C++ -*-===//
#pragma once

#include <cstdint>
#include <memory>

#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

struct DceReport {
  int64_t nodes_removed = 0;      // in every graph of the nest
  int64_t constants_removed = 0;
};

// Removes the nodes of `g` and its nested graphs that no output of `g`
// depends on, then the constants nothing uses.
DceReport EliminateDeadCode(Graph& g);

std::unique_ptr<Pass> CreateDcePass();

}  // namespace kiln
