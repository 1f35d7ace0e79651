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

}  // namespace kiln::target::npusim
