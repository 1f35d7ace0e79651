//===- cube.h - npusim cube kernels ----------------------------*- C++ -*-===//
//
// Matrix work on the cube: MatMul, Gemm, Conv (and the matmuls of attention),
// with their epilogues.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "absl/status/statusor.h"
#include "target/npusim/kernels/kernel.h"

namespace kiln::target::npusim {

// A kernel for req.node, or an error whose message says why this engine
// cannot run it (the driver records it as the AICPU fallback reason).
absl::StatusOr<GeneratedKernel> GenerateCubeKernel(const KernelRequest& req);

}  // namespace kiln::target::npusim
