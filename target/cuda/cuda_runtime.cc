//===- cuda_runtime.cc - The runtime half of the cuda target --------------===//
#include "target/cuda/cuda_runtime.h"

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "target/cuda/cuda_executable.h"

namespace kiln::target {
namespace {

class CudaPackageExecutable final : public Executable {
 public:
  explicit CudaPackageExecutable(std::unique_ptr<CudaExecutable> exe) : exe_(std::move(exe)) {
    for (const auto& t : exe_->inputs()) inputs_.push_back({t.name, t.dtype, t.dims, {}});
    for (const auto& t : exe_->outputs()) outputs_.push_back({t.name, t.dtype, t.dims, {}});
  }
  const std::vector<TensorSpec>& inputs() const override { return inputs_; }
  const std::vector<TensorSpec>& outputs() const override { return outputs_; }
  RunFeatures features() const override {
    RunFeatures f;
    f.latency = true;
    return f;
  }
  absl::StatusOr<std::string> Prepare(const std::vector<Tensor>&, const RunOptions&) override {
    return absl::StrCat("running on ", exe_->device(), "\n");
  }
  absl::StatusOr<std::vector<Tensor>> Run(std::vector<Tensor> inputs, const RunOptions&) override {
    return exe_->Run(inputs);
  }

 private:
  std::unique_ptr<CudaExecutable> exe_;
  std::vector<TensorSpec> inputs_, outputs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Executable>> LoadCudaPackage(const std::string& dir) {
  if (absl::Status s = ProbeCudaDevice(); !s.ok())
    return absl::FailedPreconditionError(absl::StrCat("no CUDA device: ", s.message()));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutable> exe, CudaExecutable::Load(dir));
  return std::make_unique<CudaPackageExecutable>(std::move(exe));
}

}  // namespace kiln::target
