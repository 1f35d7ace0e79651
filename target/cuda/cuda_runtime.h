//===- cuda_runtime.h - The runtime half of the cuda target -----*- C++ -*-===//
//
// A cuda package directory run on the GPU through the package's own
// library (cuda_executable.h: built with the package's build.sh
// when missing, loaded with dlopen, host tasks on kiln's reference
// kernels), behind the target API's Executable.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "target/api/executable.h"

namespace kiln::target {

absl::StatusOr<std::unique_ptr<Executable>> LoadCudaPackage(const std::string& dir);

}  // namespace kiln::target
