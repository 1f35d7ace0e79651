//===- cost_model.cc - What fusion may group, and what grouping saves -----===//
#include "graph/passes/fusion/cost_model.h"

#include <algorithm>

#include "graph/ops/op_registry.h"
#include "graph/passes/rewrite_helpers.h"

namespace kiln::fusion {
namespace {

bool IsFusibleDomain(const Node& n) {
  return n.domain().empty() || n.domain() == "ai.onnx" || n.domain() == "kiln";
}

bool IsNumericTensor(const Value* v) {
  if (!v || !v->type().is_tensor()) return false;
  DType d = v->type().dtype();
  return d != DType::kUndefined && d != DType::kString;
}

// Elementwise ops whose kernels are costly enough that recomputing them is
// never assumed cheap when their shapes are not static.
bool IsTranscendental(const Node& n) {
  static const char* const kOps[] = {"Exp",  "Log",   "Tanh", "Sigmoid", "Erf",  "Pow",  "Sin",      "Cos",
                                     "Tan",  "Asin",  "Acos", "Atan",    "Sinh", "Cosh", "Asinh",    "Acosh",
                                     "Atanh", "Gelu", "Softplus", "Selu", "Elu",  "Celu", "HardSwish", "Mod"};
  for (const char* op : kOps)
    if (n.op() == op) return true;
  return false;
}

}  // namespace

Role RoleOf(const Node& n) {
  if (!IsFusibleDomain(n) || IsNondeterministicOp(n)) return Role::kNone;
  if (n.domain() == "kiln" && (n.op() == "Fused" || n.op() == "GearDispatch")) return Role::kNone;
  const OpDef* def = OpRegistry::Global().Find(n);
  if (!def || !def->kernel) return Role::kNone;
  if (n.num_outputs() < 1 || !IsNumericTensor(n.output(0))) return Role::kNone;
  for (const Value* v : n.inputs())
    if (v && !IsNumericTensor(v)) return Role::kNone;
  bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
  switch (def->op_class) {
    case OpClass::kElementwise:
      // Dropout may draw random numbers; multi-output ops are not elementwise
      // in the sense fusion needs.
      if (n.num_outputs() != 1 || n.op() == "Dropout") return Role::kNone;
      return Role::kElementwise;
    case OpClass::kReduction:
    case OpClass::kNormalization:
      if (!n.input(0)) return Role::kNone;
      for (const Value* o : n.outputs())
        if (!IsNumericTensor(o)) return Role::kNone;
      return Role::kTerminal;
    case OpClass::kMatMul:
      if (default_domain && n.num_outputs() == 1 && (n.op() == "MatMul" || n.op() == "Gemm"))
        return Role::kMatMulAnchor;
      return Role::kNone;
    case OpClass::kConv:
      if (default_domain && n.num_outputs() == 1 && n.op() == "Conv") return Role::kConvAnchor;
      return Role::kNone;
    default:
      return Role::kNone;
  }
}

bool IsIterationShape(const Shape& s) {
  if (!s.ranked()) return false;
  for (const Dim& d : s.dims())
    if (d.is_unknown()) return false;
  return true;
}

Shape IterationShape(const Node& n, Role role) {
  const Value* v = role == Role::kTerminal ? n.input(0) : n.output(0);
  if (!v || !v->type().is_tensor()) return Shape();
  return v->type().shape();
}

double EstimatedBytes(const Value* v) {
  if (!v || !v->type().is_tensor() || !v->type().shape().ranked()) return 0;
  double n = 1;
  for (const Dim& d : v->type().shape().dims()) {
    if (d.is_static()) n *= static_cast<double>(d.value());
    else n *= static_cast<double>(kSymbolicDimEstimate);
  }
  return n * static_cast<double>(DTypeSize(v->type().dtype()));
}

double StaticBytes(const Value* v) {
  if (!v || !v->type().is_tensor()) return 0;
  int64_t n = v->type().shape().NumElements();
  return n > 0 ? static_cast<double>(n) * static_cast<double>(DTypeSize(v->type().dtype())) : 0;
}

double FlopsPerElement(const Node& n) {
  // Op costs count a transcendental function as one flop or a few; it is
  // worth a polynomial of about eight.
  double floor = IsTranscendental(n) ? 8 : 0;
  int64_t elems = n.num_outputs() > 0 && n.output(0)->type().is_tensor()
                      ? n.output(0)->type().shape().NumElements()
                      : -1;
  if (elems > 0) return std::max(floor, NodeCost(n).flops / static_cast<double>(elems));
  return std::max(floor, 1.0);
}

bool IsCheapElementwise(const Node& n) {
  return RoleOf(n) == Role::kElementwise && FlopsPerElement(n) <= kCheapFlopsPerElement;
}

bool RecomputeBeatsRoundTrip(const Node& producer, double new_input_bytes, bool write_avoidable) {
  const Value* out = producer.output(0);
  double bytes = EstimatedBytes(out);
  double elems = bytes / static_cast<double>(DTypeSize(out->type().dtype()));
  double recompute = new_input_bytes + FlopsPerElement(producer) * elems / kFlopsPerByte;
  double round_trip = write_avoidable ? 2 * bytes : bytes;
  return recompute < round_trip;
}

}  // namespace kiln::fusion
