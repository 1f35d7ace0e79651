//===- vector_dispatch.cc - Which vector kernel generator runs a node -----===//
#include "absl/strings/str_cat.h"
#include "target/npusim/kernels/vector.h"

namespace kiln::target::npusim {

absl::StatusOr<GeneratedKernel> GenerateVectorKernel(const KernelRequest& req) {
  return absl::UnimplementedError(absl::StrCat("no vector kernel for ", req.node->QualifiedOp(), " yet"));
}

}  // namespace kiln::target::npusim
