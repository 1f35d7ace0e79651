//===- op_registry.cc - Operator definitions and their registry -----------===//
#include "graph/ops/op_registry.h"

#include "graph/ops/op_table.h"
#include "graph/support/status.h"

namespace kiln {

absl::string_view OpClassName(OpClass c) {
  switch (c) {
    case OpClass::kElementwise: return "elementwise";
    case OpClass::kReduction: return "reduction";
    case OpClass::kNormalization: return "normalization";
    case OpClass::kMatMul: return "matmul";
    case OpClass::kConv: return "conv";
    case OpClass::kPool: return "pool";
    case OpClass::kDataMovement: return "data-movement";
    case OpClass::kShape: return "shape";
    case OpClass::kControlFlow: return "control-flow";
    case OpClass::kRecurrent: return "recurrent";
    case OpClass::kOther: return "other";
  }
  return "?";
}

static std::string Label(const Node& n) {
  if (n.name().empty()) return absl::StrCat("node (", n.QualifiedOp(), ")");
  return absl::StrCat("node '", n.name(), "' (", n.QualifiedOp(), ")");
}

InferContext::InferContext(const Node& node) : node_(node), outputs_(node.num_outputs()) {
  for (const Value* v : node.inputs()) {
    input_types_.push_back(v ? &v->type() : nullptr);
    input_values_.push_back(ConstantData(v));
  }
}

std::string InferContext::NodeLabel() const { return Label(node_); }

KernelContext::KernelContext(const Node& node, std::vector<const Tensor*> inputs,
                             SubgraphRunner run_subgraph)
    : node_(node),
      inputs_(std::move(inputs)),
      outputs_(node.num_outputs()),
      run_subgraph_(std::move(run_subgraph)) {}

std::string KernelContext::NodeLabel() const { return Label(node_); }

const AttrDef* OpDef::FindAttr(absl::string_view n) const {
  for (const AttrDef& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterAllOps(*r);
    return r;
  }();
  return *registry;
}

OpDefBuilder OpRegistry::Register(std::string name, std::string domain) {
  auto def = std::make_unique<OpDef>();
  def->name = name;
  def->domain = domain;
  OpDef* raw = def.get();
  if (domain.empty()) default_domain_[name] = raw;
  defs_[{std::move(domain), std::move(name)}] = std::move(def);
  return OpDefBuilder(raw);
}

const OpDef* OpRegistry::Find(absl::string_view domain, absl::string_view name) const {
  if (domain.empty() || domain == "ai.onnx") {
    auto it = default_domain_.find(name);
    return it == default_domain_.end() ? nullptr : it->second;
  }
  auto it = defs_.find({std::string(domain), std::string(name)});
  return it == defs_.end() ? nullptr : it->second.get();
}

std::vector<const OpDef*> OpRegistry::All() const {
  std::vector<const OpDef*> out;
  for (const auto& [k, v] : defs_) out.push_back(v.get());
  return out;
}

absl::Status CheckRequiredInputs(const OpDef& def, const Node& node) {
  for (int i = 0; i < def.min_inputs; ++i) {
    if (node.input(i) == nullptr && def.InputRequired(i))
      return absl::InvalidArgumentError(absl::StrCat(Label(node), ": required input ", i, " is missing"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Type>> InferNode(const OpDef& def, const Node& node) {
  InferContext ctx(node);
  KILN_RETURN_IF_ERROR(CheckRequiredInputs(def, node));
  if (def.infer) {
    absl::Status s = def.infer(ctx);
    if (!s.ok()) return s;
  }
  return std::move(ctx.outputs());
}

OpCost NodeCost(const Node& node) {
  const OpDef* def = OpRegistry::Global().Find(node);
  if (def && def->cost) return def->cost(node);
  OpCost c;
  for (Value* v : node.inputs()) {
    if (!v || !v->type().is_tensor()) continue;
    int64_t n = v->type().shape().NumElements();
    if (n > 0) c.bytes_read += static_cast<double>(n) * DTypeSize(v->type().dtype());
  }
  for (Value* v : node.outputs()) {
    if (!v->type().is_tensor()) continue;
    int64_t n = v->type().shape().NumElements();
    if (n > 0) {
      c.bytes_written += static_cast<double>(n) * DTypeSize(v->type().dtype());
      c.flops += static_cast<double>(n);
    }
  }
  return c;
}

}  // namespace kiln
