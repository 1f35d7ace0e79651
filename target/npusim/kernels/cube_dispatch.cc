//===- cube_dispatch.cc - Which cube kernel generator runs a node -----===//
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "target/npusim/kernels/cube.h"
#include "target/npusim/kernels/cube_conv.h"
#include "target/npusim/kernels/cube_img2col.h"
#include "target/npusim/kernels/cube_matmul.h"

namespace kiln::target::npusim {
namespace {

// Records the kernel's tile IR: the shared lowering's canonical GEMM of
// `node` with the tiling the cost model chose for the cube program,
// verified against the machine's buffers. A convolution through an im2col
// (its cube program builds the matrix per unit in a workspace) and a GEMM
// whose operand is read through Transposes keep no tile IR yet.
void AttachTileIr(const tile::GemmProblem& p, const KernelRequest& req, const tile::GemmTiling& t,
                  GeneratedKernel& k) {
  if (!req.want_tile_ir || p.im2col) return;  // a convolution's per-unit im2col has no tile form yet
  absl::StatusOr<tile::TileKernel> kernel = tile::LowerGemm(p, t, CubeFiguresOf(*req.machine));
  if (!kernel.ok()) return;
  kernel->plan = k.plan;
  k.tile_ir = tile::Print(*kernel);
}

// The GEMM kernel of a MatMul, a Gemm or a fused group of one, its problem
// read by the shared lowering. The driver has already narrowed the graph's
// matrix operands for --precision, so the tensors' own dtype (kF32: "as
// given") is the cube's.
absl::StatusOr<GeneratedKernel> GenerateMatrixGemm(const Node& node, const KernelRequest& req) {
  KILN_ASSIGN_OR_RETURN(tile::GemmProblem p, tile::GemmProblemOf(node, DType::kF32));
  std::vector<const Value*> constants;
  KILN_ASSIGN_OR_RETURN(GemmSpec spec, GemmSpecOf(node, p, req.max_blocks, &constants));
  tile::GemmTiling t;
  KILN_ASSIGN_OR_RETURN(GeneratedKernel k, GenerateGemm(spec, *req.machine, &t));
  k.constant_args = std::move(constants);
  AttachTileIr(p, req, t, k);
  return k;
}

// A pointwise Conv (or fused group of one) whose epilogue is a Relu at
// most, as the GEMM, its arguments bound in the launch's order.
absl::StatusOr<GemmSpec> GemmSpecOfConv(const ConvOperands& ops, int max_blocks) {
  if (!ops.steps.empty()) return absl::UnimplementedError("the GEMM's epilogue of a Conv is a Relu at most");
  KILN_ASSIGN_OR_RETURN(GemmSpec s, GemmSpecOfNode(*ops.conv, max_blocks));
  s.relu = ops.fixp_relu;
  std::vector<std::string> lines, names;
  std::vector<const Value*> values;
  int a = -1, b = -1, c = -1, y = -1;
  for (const auto& [v, role] : ops.args) {
    const size_t j = std::find(s.arg_names.begin(), s.arg_names.end(), role) - s.arg_names.begin();
    if (j == s.arg_names.size()) return absl::InternalError(absl::StrCat("no GEMM argument for ", role));
    const int i = static_cast<int>(lines.size());
    (role == "w" ? a : role == "x" ? b : role == "bias" ? c : y) = i;
    lines.push_back(s.arg_lines[j]);
    names.push_back(role);
    values.push_back(role == "y" ? nullptr : v);
  }
  s.arg_lines = std::move(lines);
  s.arg_names = std::move(names);
  s.arg_values = std::move(values);
  s.a_arg = a;
  s.b_arg = b;
  s.c_arg = c;
  s.y_arg = y;
  return s;
}

}  // namespace

absl::StatusOr<GeneratedKernel> GenerateCubeKernel(const KernelRequest& req) {
  const Node& node = *req.node;
  if (node.domain().empty() && (node.op() == "MatMul" || node.op() == "Gemm")) return GenerateMatrixGemm(node, req);
  // A Conv, or a kiln.Fused group of one and its epilogue. Pointwise ones
  // whose epilogue is a Relu at most are a batched GEMM; 2-D ones of one
  // group build their im2col rows in L0A from the image in L1 (img2col);
  // the other Convs go through an im2col matrix in global memory (which
  // takes a Relu epilogue at most). A Conv with a tensor in NC1HWC0 runs through img2col,
  // pointwise or not.
  if (absl::StatusOr<ConvOperands> conv = ConvOperandsOf(node); conv.ok()) {
    const ConvLayouts layouts{req.x_c1hwc0, req.y_c1hwc0};
    if (layouts.x_c1hwc0 || layouts.y_c1hwc0) return GenerateImg2ColConv(node, *req.machine, req.max_blocks, layouts);
    absl::StatusOr<GemmSpec> spec = GemmSpecOfConv(*conv, req.max_blocks);
    if (spec.ok()) {
      tile::GemmTiling t;
      KILN_ASSIGN_OR_RETURN(GeneratedKernel k, GenerateGemm(*spec, *req.machine, &t));
      k.constant_args = conv->constant_args;
      // A pointwise convolution is a plain batched GEMM in the shared form too.
      if (req.want_tile_ir)
        if (absl::StatusOr<tile::GemmProblem> p = tile::GemmProblemOf(node, DType::kF32); p.ok())
          AttachTileIr(*p, req, t, k);
      return k;
    }
    if (!absl::IsUnimplemented(spec.status())) return spec.status();
    absl::StatusOr<GeneratedKernel> k = GenerateImg2ColConv(node, *req.machine, req.max_blocks);
    if (k.ok() || !absl::IsUnimplemented(k.status())) return k;
    absl::StatusOr<GeneratedKernel> gm = GenerateCubeConv(node, *req.machine, req.max_blocks);
    // A group neither takes says why img2col does not (the fuller of the two).
    if (!gm.ok() && conv->conv != &node && absl::IsUnimplemented(gm.status())) return k;
    return gm;
  }
  if (node.domain() == "kiln" && node.op() == "Fused") return GenerateMatrixGemm(node, req);
  if (node.domain() == "kiln" && node.op() == "Attention") return GenerateCubeAttention(req);
  return absl::UnimplementedError(absl::StrCat("no cube kernel for ", node.QualifiedOp(), " yet"));
}

bool CubeTakesGroupMember(const std::vector<const Node*>& group, const Node& candidate) {
  if (group.empty()) return false;
  const std::string& anchor = group[0]->op();
  const std::string& op = candidate.op();
  if (candidate.domain() == "kiln" && op == "Gelu") {
    // A GELU after a MatMul's or Gemm's bias and residual (the UB epilogue
    // computes it in f32), reading only the group's result.
    if (anchor != "MatMul" && anchor != "Gemm") return false;
    for (const Node* m : group)
      if (m->op() == "Relu" || m->op() == "Cast" || m->op() == "Gelu") return false;
    const Value* in = candidate.input(0);
    return in && in->producer() && std::find(group.begin(), group.end(), in->producer()) != group.end() &&
           in->uses().size() == 1;
  }
  if (!candidate.domain().empty()) return false;
  auto count = [&](const char* name) {
    return std::count_if(group.begin(), group.end(), [&](const Node* n) { return n->op() == name; });
  };
  if (anchor == "Conv") {
    // img2col's convolutions take a Relu, a Clip and a residual Add (a
    // group the convolution cannot take runs as its members); other dtypes
    // FIXP's Relu only.
    const DType dt = group[0]->output(0)->type().dtype();
    if (dt != DType::kF16 && dt != DType::kBF16 && dt != DType::kF32) return op == "Relu" && group.size() == 1;
    return op == "Relu" || op == "Clip" || (op == "Add" && count("Add") == 0);
  }
  const auto epilogue = group.size() - static_cast<size_t>(count("Transpose")) - 1;  // members after the GEMM
  if (count("Cast") > 0) {  // then only a residual Add of the f32 result, last
    if (op != "Add" || group.back()->op() != "Cast" || count("Relu") > 0 || count("Add") > 1) return false;
    const Value* cast = group.back()->output(0);
    for (const Value* other : candidate.inputs())
      if (other && other != cast) return IsResidual(*other, *candidate.output(0));
    return false;
  }
  if (op == "Cast")
    return candidate.num_inputs() == 1 && candidate.input(0)->type().dtype() != DType::kF32 &&
           candidate.output(0)->type().dtype() == DType::kF32;
  if (op == "Transpose") return anchor == "MatMul" && epilogue == 0;
  // A cube kernel writes one result: an epilogue member may join only if
  // what it reads from the group is read by nothing else (no other node, no
  // graph output), or the group would end with two results and run as its
  // members one by one.
  auto from_group = [&](const Value* v) {
    return v->producer() && std::find(group.begin(), group.end(), v->producer()) != group.end();
  };
  for (const Value* in : candidate.inputs())
    if (in && from_group(in) && in->uses().size() != 1) return false;
  if (op == "Mul") {
    // alpha: a scale of the product by a constant scalar, first. A scalar
    // known only at run time (the 1/S that unscales a gradient) is not one.
    if (epilogue != 0) return false;
    for (const Value* in : candidate.inputs())
      if (in && !from_group(in) && !in->is_constant() && in->type().shape().is_static() &&
          in->type().shape().NumElements() == 1)
        return false;
    return true;
  }
  if (op == "Add") return count("Add") < 2 && count("Relu") == 0 && count("Gelu") == 0;  // a bias, a residual
  return op == "Relu" && count("Relu") == 0;
}

}  // namespace kiln::target::npusim
