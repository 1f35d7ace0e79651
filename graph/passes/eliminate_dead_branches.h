//===- eliminate_dead_branches.h - inline If nodes with a constant condition; remove Loops that never run ---*- C++ -*-===//
#pragma once

#include <cstdint>
#include <memory>

#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

struct DeadBranchReport {
  int64_t ifs_inlined = 0;
  int64_t nodes_inlined = 0;  // nodes moved out of taken branches
  int64_t loops_removed = 0;
};

// Inlines the taken branch of every If of `g` (and its nested graphs) whose
// condition is a constant, and removes every Loop that runs zero times.
DeadBranchReport EliminateDeadBranches(Graph& g);

std::unique_ptr<Pass> CreateEliminateDeadBranchesPass();

}  // namespace kiln
