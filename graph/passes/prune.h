//===- prune.h - prune the graph to the requested outputs ---*- C++ -*-===//
#pragma once

#include <memory>

#include "graph/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreatePrunePass();

}  // namespace kiln
