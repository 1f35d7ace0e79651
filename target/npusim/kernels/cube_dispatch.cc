//===- cube_dispatch.cc - Which cube kernel generator runs a node -----===//
#include "absl/strings/str_cat.h"
#include "target/npusim/kernels/cube.h"

namespace kiln::target::npusim {

absl::StatusOr<GeneratedKernel> GenerateCubeKernel(const KernelRequest& req) {
  return absl::UnimplementedError(absl::StrCat("no cube kernel for ", req.node->QualifiedOp(), " yet"));
}

}  // namespace kiln::target::npusim
