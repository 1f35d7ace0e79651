//===- cube_dispatch.cc - Which cube kernel generator runs a node -----===//
#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "target/npusim/kernels/cube.h"
#include "target/npusim/kernels/cube_conv.h"
#include "target/npusim/kernels/cube_matmul.h"

namespace kiln::target::npusim {

absl::StatusOr<GeneratedKernel> GenerateCubeKernel(const KernelRequest& req) {
  const Node& node = *req.node;
  if (node.domain().empty() && (node.op() == "MatMul" || node.op() == "Gemm")) {
    KILN_ASSIGN_OR_RETURN(GemmSpec spec, GemmSpecOfNode(node, req.max_blocks));
    return GenerateGemm(spec, *req.machine);
  }
  if (node.domain() == "kiln" && node.op() == "Fused") {
    std::vector<const Value*> constants;
    KILN_ASSIGN_OR_RETURN(GemmSpec spec, GemmSpecOfFused(node, req.max_blocks, &constants));
    KILN_ASSIGN_OR_RETURN(GeneratedKernel k, GenerateGemm(spec, *req.machine));
    k.constant_args = std::move(constants);
    return k;
  }
  if (node.domain().empty() && node.op() == "Conv") {
    // Pointwise convolutions are a batched GEMM; the rest go through im2col.
    absl::StatusOr<GemmSpec> spec = GemmSpecOfPointwiseConv(node, req.max_blocks);
    if (spec.ok()) return GenerateGemm(*spec, *req.machine);
    if (!absl::IsUnimplemented(spec.status())) return spec.status();
    return GenerateCubeConv(node, *req.machine, req.max_blocks);
  }
  return absl::UnimplementedError(absl::StrCat("no cube kernel for ", node.QualifiedOp(), " yet"));
}

}  // namespace kiln::target::npusim
