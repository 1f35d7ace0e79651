//===- executor.cc - Reference executor for graphs ------------------------===//
#include "graph/exec/executor.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/ops/op_registry.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

std::string DescribeTensor(const Tensor& t) {
  return absl::StrCat(DTypeName(t.dtype()), "[", absl::StrJoin(t.dims(), ","), "]");
}

// Values used by `g` (and graphs nested in it) that `g` does not define.
void CollectFreeValues(const Graph& g, absl::flat_hash_set<const Value*>& out) {
  for (Node* n : g.nodes()) {
    for (Value* v : n->inputs())
      if (v && v->owner() != &g) out.insert(v);
    for (Graph* sub : n->subgraphs()) {
      absl::flat_hash_set<const Value*> inner;
      CollectFreeValues(*sub, inner);
      for (const Value* v : inner)
        if (v->owner() != &g) out.insert(v);
    }
  }
  for (Value* v : g.outputs())
    if (v->owner() != &g) out.insert(v);
}

}  // namespace

absl::Status CheckTensorMatchesType(const Tensor& t, const Type& type, absl::string_view what) {
  if (!type.is_tensor()) return absl::OkStatus();
  bool ok = type.dtype() == DType::kUndefined || t.dtype() == type.dtype();
  const Shape& s = type.shape();
  if (ok && s.ranked()) {
    ok = s.rank() == t.rank();
    for (int i = 0; ok && i < s.rank(); ++i)
      if (s[i].is_static() && s[i].value() != t.dim(i)) ok = false;
  }
  if (!ok)
    return InvalidArgument(what, " expects ", type.ToString(), " but got ", DescribeTensor(t));
  return absl::OkStatus();
}

struct Executor::Impl {
  ExecOptions options;

  // What to do for one node: its definition, its inputs (by value), and the
  // values of this graph whose last use it is.
  struct Step {
    const Node* node;
    const OpDef* def;
    std::vector<const Value*> free_after;
    // Outer values used by the node's subgraphs, resolved when it runs.
    bool has_subgraphs = false;
  };
  struct Plan {
    std::vector<Step> steps;
  };
  absl::flat_hash_map<const Graph*, std::unique_ptr<Plan>> plans;

  using Env = absl::flat_hash_map<const Value*, Tensor>;

  absl::StatusOr<const Plan*> GetPlan(const Graph& g) {
    auto it = plans.find(&g);
    if (it != plans.end()) return it->second.get();
    auto plan = std::make_unique<Plan>();
    absl::flat_hash_map<const Value*, size_t> last_use;
    std::vector<Node*> nodes = g.NodeList();
    for (size_t i = 0; i < nodes.size(); ++i) {
      Node* n = nodes[i];
      const OpDef* def = OpRegistry::Global().Find(*n);
      if (!def || !def->kernel)
        return Unimplemented("node '", n->name(), "' (", n->QualifiedOp(), "): no reference kernel for this op");
      Step step{n, def, {}, !n->subgraphs().empty()};
      plan->steps.push_back(std::move(step));
      for (Value* v : n->inputs())
        if (v && v->owner() == &g) last_use[v] = i;
      for (Graph* sub : n->subgraphs()) {
        absl::flat_hash_set<const Value*> free;
        CollectFreeValues(*sub, free);
        for (const Value* v : free)
          if (v->owner() == &g) last_use[v] = i;
      }
    }
    absl::flat_hash_set<const Value*> outputs(g.outputs().begin(), g.outputs().end());
    // Deterministic order of frees does not matter for results; keep it cheap.
    for (const auto& [v, i] : last_use)
      if (!outputs.contains(v) && !v->is_constant()) plan->steps[i].free_after.push_back(v);
    const Plan* raw = plan.get();
    plans[&g] = std::move(plan);
    return raw;
  }

  // Runs one node's kernel and checks its outputs: output i is undefined
  // only when the kernel made none and nothing reads it.
  absl::StatusOr<std::vector<Tensor>> RunKernel(const OpDef& def, const Node& n, std::vector<const Tensor*> ins,
                                                SubgraphRunner runner) {
    KILN_RETURN_IF_ERROR(CheckRequiredInputs(def, n));
    KernelContext ctx(n, std::move(ins), std::move(runner));
    KILN_RETURN_IF_ERROR(def.kernel(ctx));
    std::vector<Tensor> outs(n.num_outputs());
    for (int i = 0; i < n.num_outputs(); ++i) {
      Tensor& t = ctx.output(i);
      const Value* out = n.output(i);
      if (!t.defined()) {
        if (out->has_uses()) return Internal(ctx.NodeLabel(), ": kernel did not produce output ", i);
        continue;
      }
      if (options.check_types) {
        absl::Status c = CheckTensorMatchesType(t, out->type(), absl::StrCat("output '", out->name(), "'"));
        if (!c.ok()) return Internal(ctx.NodeLabel(), ": kernel result disagrees with inferred type: ", c.message());
      }
      outs[i] = std::move(t);
    }
    return outs;
  }

  absl::StatusOr<std::vector<Tensor>> RunGraph(const Graph& g, std::vector<Tensor> inputs,
                                               std::vector<const Env*> outer) {
    if (inputs.size() != g.inputs().size())
      return InvalidArgument("graph '", g.name(), "' takes ", g.inputs().size(), " inputs but ",
                             inputs.size(), " were given");
    KILN_ASSIGN_OR_RETURN(const Plan* plan, GetPlan(g));
    Env env;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Value* in = g.inputs()[i];
      if (options.check_types)
        KILN_RETURN_IF_ERROR(CheckTensorMatchesType(inputs[i], in->type(), absl::StrCat("input '", in->name(), "'")));
      env[in] = std::move(inputs[i]);
    }
    outer.push_back(&env);
    auto lookup = [&](const Value* v) -> const Tensor* {
      if (v->is_constant()) return v->constant_data();
      for (auto it = outer.rbegin(); it != outer.rend(); ++it) {
        auto f = (*it)->find(v);
        if (f != (*it)->end()) return &f->second;
      }
      return nullptr;
    };
    for (const Step& step : plan->steps) {
      const Node& n = *step.node;
      std::vector<const Tensor*> ins;
      ins.reserve(n.num_inputs());
      for (Value* v : n.inputs()) {
        if (!v) {
          ins.push_back(nullptr);
          continue;
        }
        const Tensor* t = lookup(v);
        if (!t)
          return Internal("node '", n.name(), "' (", n.QualifiedOp(), "): input '", v->name(),
                          "' has no value (elided constant or a value used before it is defined)");
        ins.push_back(t);
      }
      SubgraphRunner runner;
      if (step.has_subgraphs) {
        runner = [this, outer](const Graph& sub, std::vector<Tensor> sub_inputs) {
          return RunGraph(sub, std::move(sub_inputs), outer);
        };
      }
      KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, RunKernel(*step.def, n, std::move(ins), std::move(runner)));
      for (int i = 0; i < n.num_outputs(); ++i)
        if (outs[i].defined()) env[n.output(i)] = std::move(outs[i]);
      for (const Value* v : step.free_after) env.erase(v);
    }
    std::vector<Tensor> results;
    for (const Value* v : g.outputs()) {
      const Tensor* t = lookup(v);
      if (!t) return Internal("graph output '", v->name(), "' was not computed");
      results.push_back(*t);
    }
    return results;
  }
};

namespace {

void CollectOperands(const Graph& g, const Graph* top, std::vector<const Value*>& out,
                     absl::flat_hash_set<const Value*>& seen) {
  // Values defined in `g` or in graphs nested in it are local; the rest are
  // captured from outside the node.
  for (Node* n : g.nodes()) {
    for (Value* v : n->inputs()) {
      if (!v || v->is_constant()) continue;
      bool local = false;
      for (const Graph* o = &g; o && o != top; o = o->parent()) local |= v->owner() == o;
      if (!local && seen.insert(v).second) out.push_back(v);
    }
    for (Graph* sub : n->subgraphs()) CollectOperands(*sub, top, out, seen);
  }
  for (Value* v : g.outputs()) {
    if (v->is_constant()) continue;
    bool local = false;
    for (const Graph* o = &g; o && o != top; o = o->parent()) local |= v->owner() == o;
    if (!local && seen.insert(v).second) out.push_back(v);
  }
}

}  // namespace

std::vector<const Value*> NodeOperands(const Node& node) {
  std::vector<const Value*> out;
  absl::flat_hash_set<const Value*> seen;
  for (Value* v : node.inputs())
    if (v && !v->is_constant() && seen.insert(v).second) out.push_back(v);
  for (Graph* sub : node.subgraphs()) CollectOperands(*sub, node.owner(), out, seen);
  return out;
}

absl::StatusOr<std::vector<Tensor>> Executor::RunNode(const Node& node,
                                                      const std::function<const Tensor*(const Value*)>& lookup) {
  // A one-step graph run: the node's operands form the environment its
  // inputs and its subgraphs read from.
  Impl::Env env;
  for (const Value* v : NodeOperands(node)) {
    const Tensor* t = lookup(v);
    if (!t) return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "': no value for '", v->name(), "'"));
    env[v] = *t;
  }
  const OpDef* def = OpRegistry::Global().Find(node);
  if (!def || !def->kernel)
    return absl::UnimplementedError(absl::StrCat("node '", node.name(), "' (", node.QualifiedOp(), "): no reference kernel"));
  std::vector<const Tensor*> ins;
  for (Value* v : node.inputs()) {
    if (!v) ins.push_back(nullptr);
    else if (v->is_constant()) ins.push_back(v->constant_data());
    else ins.push_back(&env[v]);
    if (v && !ins.back())
      return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "': input '", v->name(), "' has no value"));
  }
  SubgraphRunner runner;
  if (!node.subgraphs().empty()) {
    runner = [this, &env](const Graph& sub, std::vector<Tensor> sub_inputs) {
      return impl_->RunGraph(sub, std::move(sub_inputs), {&env});
    };
  }
  return impl_->RunKernel(*def, node, std::move(ins), std::move(runner));
}

Executor::Executor(ExecOptions options) : impl_(std::make_unique<Impl>()) { impl_->options = options; }
Executor::~Executor() = default;

absl::StatusOr<std::vector<Tensor>> Executor::Run(const Graph& graph, std::vector<Tensor> inputs) {
  return impl_->RunGraph(graph, std::move(inputs), {});
}

}  // namespace kiln
