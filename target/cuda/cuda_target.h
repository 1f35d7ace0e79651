//===- cuda_target.h - The cuda target --------------------------*- C++ -*-===//
//
// NVIDIA GPUs through CUDA C++: matrix work on TensorCores (mma.sync on
// sm_80 and newer, wgmma on sm_90a), memory-bound fused groups and data
// movement on the SIMT cores, and everything else on the host with kiln's
// reference kernels. `kiln compile --target=cuda -o DIR` writes a package
// directory (cuda_package.h); docs/cuda-target.md describes it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "target/api/target.h"

namespace kiln::target {

std::unique_ptr<Target> CreateCudaTarget();
// The cuda target's description (what CreateCudaTarget()->description() gives).
const TargetDescription& CudaDescription();

// The placement explanation a compiled package directory holds
// (DIR/placement.txt): what `kiln compile --explain-placement` prints for
// the cuda target after code generation.
absl::StatusOr<std::string> ExplainCudaPackage(const std::string& dir);

}  // namespace kiln::target
