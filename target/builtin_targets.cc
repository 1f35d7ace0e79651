//===- builtin_targets.cc - The targets built into kiln -------------------===//
#include "target/builtin_targets.h"

#include "target/api/target_registry.h"
#include "target/cuda/cuda_target.h"
#include "target/npusim/npusim_target.h"
#include "target/reference/reference_target.h"

namespace kiln::target {

void RegisterBuiltinTargets(TargetRegistry& r) {
  (void)r.Register("cuda", "NVIDIA GPUs (H100-like; sm_80 mma.sync, sm_90a wgmma) as a CUDA C++ package",
                   CreateCudaTarget);
  (void)r.Register("npusim", "Ascend-like NPU on kiln's SystemC cycle model (cube, vector, AICPU)",
                   CreateNpusimTarget);
  (void)r.Register("reference", "host reference kernels (the golden model)", CreateReferenceTarget);
}

absl::StatusOr<std::unique_ptr<Target>> CreateBuiltinTarget(absl::string_view name) {
  static TargetRegistry* builtins = [] {
    auto* r = new TargetRegistry();
    RegisterBuiltinTargets(*r);
    return r;
  }();
  return builtins->Create(name);
}

}  // namespace kiln::target
