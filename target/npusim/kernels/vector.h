//===- vector.h - npusim vector kernels ----------------------------*- C++ -*-===//
//
// The vector unit: elementwise ops, casts, reductions, softmax, layer
// normalization, pooling.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "absl/status/statusor.h"
#include "target/npusim/kernels/kernel.h"

namespace kiln::target::npusim {

// A kernel for req.node, or an error whose message says why this engine
// cannot run it (the driver records it as the AICPU fallback reason).
absl::StatusOr<GeneratedKernel> GenerateVectorKernel(const KernelRequest& req);

// Whether memory-bound op `n` may join a fused group on the vector unit:
// the group kernels take no one-element bool input (the Where that keeps or
// skips a training step's update), so such an op runs on its own kernel
// rather than making its group's kernel fail and every member run alone.
bool VectorGroupTakes(const Node& n);

}  // namespace kiln::target::npusim
