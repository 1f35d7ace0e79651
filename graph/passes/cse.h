//===- cse.h - common-subexpression elimination ---*- C++ -*-===//
#pragma once

#include <cstdint>
#include <memory>

#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

// Merges the nodes of `g` and its nested graphs that compute the same thing
// as an earlier visible node; returns how many nodes were removed.
int64_t EliminateCommonSubexpressions(Graph& g);

std::unique_ptr<Pass> CreateCsePass();

}  // namespace kiln
