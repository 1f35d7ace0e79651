//===- cuda_executable.h - Running cuda packages on a GPU -------*- C++ -*-===//
//
// A CudaExecutable is a package directory written by `kiln compile
// --target=cuda`, loaded on the CUDA device: its library (libkiln_model.so,
// built with the package's build.sh when missing or older than its
// sources) is opened with dlopen and driven through its C API
// (kiln_model.h), and the package's host tasks run on kiln's reference
// kernels (the host-op provider given to the launcher).
//
// kiln itself links nothing from CUDA: the driver (libcuda.so.1) is opened
// at run time, so a machine without a GPU or driver gets a clear error
// (ProbeCudaDevice) instead of a loader failure.
//
// A data-parallel step (a package with collectives) runs as one rank on
// inputs of one rank's size, averaging over itself through NCCL; given
// inputs of R times their leading dim it runs R ranks on GPUs 0..R-1, rank
// r on the r-th shard (kiln_model_run_replicas), and returns rank 0's
// outputs: its loss, the gradients' means and the updated parameters.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/ir/tensor.h"
#include "runtime/host_ops.h"

namespace kiln::target {

// OK when the CUDA driver loads and sees at least one device; otherwise an
// error whose message says why (the driver library is missing, cuInit
// failed, no device).
absl::Status ProbeCudaDevice();

// True when `path` is a directory holding a cuda package.
bool IsCudaPackage(const std::string& path);

// Builds DIR/libkiln_model.so with DIR/build.sh when it is missing or older
// than the package's sources; the compiler's output goes to DIR/build.log.
absl::Status EnsureCudaPackageBuilt(const std::string& dir);

class CudaExecutable {
 public:
  struct TensorInfo {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<int64_t> dims;
  };

  // Probes the device, builds the package when needed, loads it.
  static absl::StatusOr<std::unique_ptr<CudaExecutable>> Load(const std::string& dir);
  ~CudaExecutable();

  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  const std::string& device() const { return device_; }

  // Inputs in order; each must match its TensorInfo (the error names the
  // expected and the actual signature), or, for a data-parallel step, all
  // be R times their leading dim.
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs);
  // The ranks a data-parallel step was compiled for (1: no collectives).
  int replicas() const { return replicas_; }

 private:
  CudaExecutable() = default;
  struct Api;
  std::unique_ptr<Api> api_;
  void* library_ = nullptr;
  void* model_ = nullptr;
  std::string dir_, device_;
  std::vector<TensorInfo> inputs_, outputs_;
  int replicas_ = 1;
  // A data-parallel step's ranks on GPUs 0..: ranks_[0] is model_; `joined_`
  // ranks share communicators.
  std::vector<void*> ranks_;
  int joined_ = 1;
  absl::StatusOr<std::vector<Tensor>> RunRanks(const std::vector<Tensor>& inputs, int ranks);
};

// How many ranks of a data-parallel step (compiled for `replicas` > 1)
// `inputs` hold: R >= 2 when each is R times its leading dim of `infos`
// (same dtype, the other dims equal), 0 otherwise (one rank's inputs, or
// inputs that fit neither).
int ShardRanks(const std::vector<Tensor>& inputs, const std::vector<CudaExecutable::TensorInfo>& infos,
               int replicas);

}  // namespace kiln::target
