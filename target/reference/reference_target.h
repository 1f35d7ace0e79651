//===- reference_target.h - The reference target ----------------*- C++ -*-===//
//
// Runs every node on the host reference kernels: the golden model. Its
// artifact holds the optimized graph, which the runtime executes with the
// reference executor.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>

#include "target/api/target.h"

namespace kiln::target {

std::unique_ptr<Target> CreateReferenceTarget();

}  // namespace kiln::target
