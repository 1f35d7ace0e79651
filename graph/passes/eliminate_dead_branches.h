//===- eliminate_dead_branches.h - inline If with constant conditions, drop zero-trip Loops ---*- C++ -*-===//
#pragma once

#include <memory>

#include "graph/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateEliminateDeadBranchesPass();

}  // namespace kiln
