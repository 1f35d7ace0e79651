//===- vector_dispatch.cc - Which vector kernel generator runs a node -----===//
#include <cctype>

#include "absl/strings/str_cat.h"
#include "target/npusim/kernels/vector.h"
#include "target/npusim/kernels/vector_internal.h"

namespace kiln::target::npusim {

absl::Status vec::Unimpl(const Node& n, absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat(n.QualifiedOp(), ": ", why));
}

std::string vec::KernelName(const Node& n) {
  std::string s = absl::StrCat("vec_", n.op());
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

absl::StatusOr<GeneratedKernel> vec::GenerateOwn(const KernelRequest& req) {
  const Node& n = *req.node;
  if (vec::IsUnaryOp(n)) return vec::GenerateUnary(req);
  if (vec::IsBinaryOp(n)) return vec::GenerateBinary(req);
  if (vec::IsReduceOp(n)) return vec::GenerateReduce(req);
  if (vec::IsPoolOp(n)) return vec::GeneratePool(req);
  if (vec::IsCompareOp(n)) return vec::GenerateCompare(req);
  if (n.domain().empty()) {
    const std::string& op = n.op();
    if (op == "Cast" || op == "CastLike") return vec::GenerateCast(req);
    if (op == "Softmax" || op == "LogSoftmax") return vec::GenerateSoftmax(req);
    if (op == "LayerNormalization") return vec::GenerateLayerNorm(req);
    if (op == "ArgMax" || op == "ArgMin") return vec::GenerateArgMax(req);
    if (op == "BatchNormalization") return vec::GenerateBatchNorm(req);
  }
  return absl::UnimplementedError(absl::StrCat("no vector kernel for ", n.QualifiedOp()));
}

absl::StatusOr<GeneratedKernel> GenerateVectorKernel(const KernelRequest& req) {
  if (!req.machine) return absl::InvalidArgumentError("no machine");
  if (vec::IsFusedGroup(*req.node)) return vec::GenerateFused(req);
  absl::StatusOr<GeneratedKernel> own = vec::GenerateOwn(req);
  // Tensors in NC1HWC0 are npusim's own kernels' business (the shared
  // lowering sees every tensor row-major).
  if (!own.ok() || req.x_c1hwc0 || req.y_c1hwc0) return own;
  // The shared lowering's kernel of the node, where its estimate is no
  // higher than npusim's own (both are estimated on the same skeletons).
  absl::StatusOr<GeneratedKernel> shared = vec::GenerateFromTileSteps(req);
  if (shared.ok() && shared->estimated_cycles <= own->estimated_cycles) return shared;
  return own;
}

bool VectorGroupTakes(const Node& n) {
  for (const Value* v : n.inputs())
    if (v && v->type().is_tensor() && v->type().dtype() == DType::kBool && v->type().shape().is_static() &&
        v->type().shape().NumElements() == 1)
      return false;
  return true;
}

}  // namespace kiln::target::npusim
