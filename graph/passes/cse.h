//===- cse.h - common-subexpression elimination ---*- C++ -*-===//
#pragma once

#include <cstdint>
#include <memory>

#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

struct CseReport {
  int64_t nodes_removed = 0;
  // Merged values whose type differed from the kept one's (the kept one
  // takes the more precise of the two).
  int64_t types_differed = 0;
  // Constants that only removed nodes read (the kept node reads an equal
  // constant): nothing uses them now.
  int64_t constants_left_unused = 0;
};

// Merges the nodes of `g` and its nested graphs that compute the same thing
// as an earlier visible node.
CseReport EliminateCommonSubexpressions(Graph& g);

std::unique_ptr<Pass> CreateCsePass();

}  // namespace kiln
