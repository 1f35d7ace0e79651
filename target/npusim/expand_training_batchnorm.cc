//===- expand_training_batchnorm.cc - Training BatchNorm as vector ops ----===//
#include "target/npusim/expand_training_batchnorm.h"

#include <algorithm>
#include <vector>

#include "graph/ops/op_registry.h"
#include "graph/passes/patterns/rewrite_util.h"
#include "sim/machine/machine.h"

namespace kiln::target::npusim {

namespace {

// The vector unit's time for the expansion: its kernels' launches and
// HBM latencies, and about six passes of the tensor through HBM.
constexpr double kKernels = 12, kKernelCycles = 1200, kPasses = 6;

}  // namespace

int ExpandTrainingBatchNorm(Graph& g, const sim::Machine& machine) {
  int expanded = 0;
  for (Node* n : g.NodeList()) {
    if (n->op() != "BatchNormalization" || !n->domain().empty() || n->GetInt("training_mode", 0) == 0) continue;
    if (n->num_inputs() != 5 || !n->input(0)) continue;
    const Type& t = n->input(0)->type();
    if (!t.is_tensor() || !t.shape().is_static() || !IsFloat(t.dtype()) || t.shape().rank() < 2) continue;
    bool typed = true;
    for (int i = 1; i < 5; ++i) typed &= n->input(i) && n->input(i)->type().is_tensor() && n->input(i)->type().dtype() == t.dtype();
    if (!typed) continue;
    const Dims x = t.shape().StaticDims();
    const DType dt = t.dtype();
    const double bytes = static_cast<double>(t.shape().NumElements()) * DTypeSize(dt);
    const OpCost cost = NodeCost(*n);
    const double aicpu = sim::AicpuTaskCycles(machine, std::max(cost.flops, cost.bytes_read + cost.bytes_written));
    if (aicpu <= kKernels * kKernelCycles + kPasses * 2 * bytes / sim::HbmBytesPerCycle(machine)) continue;
    const int64_t c = x[1];
    std::vector<int64_t> axes = {0}, col = {1, c};
    for (size_t i = 2; i < x.size(); ++i) {
      axes.push_back(static_cast<int64_t>(i));
      col.push_back(1);
    }
    auto op = [&](const char* name, std::vector<Value*> ins) {
      Node* m = g.AddNode(name, ins, 1, "", n);
      m->set_name(n->name());
      patterns::InferNodeTypes(m);
      return m->output(0);
    };
    auto ints = [&](const std::vector<int64_t>& v) {
      return g.AddConstant(g.UniqueName("bn.shape"), Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())}));
    };
    auto scalar = [&](double v) { return patterns::ScalarConst(g, dt, v, "bn.c"); };
    auto mean = [&](Value* v) {
      Node* m = g.AddNode("ReduceMean", {v}, 1, "", n);
      m->SetAttr("axes", Attribute::Ints(axes));
      m->SetAttr("keepdims", Attribute::Int(1));
      m->set_name(n->name());
      patterns::InferNodeTypes(m);
      return m->output(0);
    };
    Value* mu = mean(n->input(0));                                // [1, C, 1...]
    Value* centered = op("Sub", {n->input(0), mu});
    Value* var = mean(op("Mul", {centered, centered}));
    Value* rstd = op("Reciprocal", {op("Sqrt", {op("Add", {var, scalar(n->GetFloat("epsilon", 1e-5f))})})});
    Value* gain = op("Mul", {op("Reshape", {n->input(1), ints(col)}), rstd});
    Value* y = op("Add", {op("Mul", {centered, gain}), op("Reshape", {n->input(2), ints(col)})});
    std::vector<Value*> with = {y};
    const double momentum = n->GetFloat("momentum", 0.9f);
    for (int k = 1; k < n->num_outputs() && k <= 2; ++k) {
      if (!n->output(k) || !n->output(k)->has_uses()) {
        with.push_back(nullptr);
        continue;
      }
      Value* batch = op("Reshape", {k == 1 ? mu : var, ints({c})});
      with.push_back(op("Add", {op("Mul", {n->input(k + 2), scalar(momentum)}), op("Mul", {batch, scalar(1 - momentum)})}));
    }
    while (static_cast<int>(with.size()) < n->num_outputs()) with.push_back(nullptr);
    patterns::ReplaceNode(n, with);
    ++expanded;
  }
  return expanded;
}

}  // namespace kiln::target::npusim
