//===- host_kernels.cc - kiln's reference kernels as HostKernels ----------===//
#include "target/host_kernels.h"

#include "graph/exec/executor.h"
#include "graph/ops/op_registry.h"

namespace kiln::target {
namespace {

class ReferenceKernels final : public HostKernels {
 public:
  absl::StatusOr<std::vector<Tensor>> RunGraph(const Graph& graph, std::vector<Tensor> inputs) const override {
    Executor exec;
    return exec.Run(graph, std::move(inputs));
  }
  std::vector<const Value*> Operands(const Node& node) const override { return NodeOperands(node); }
  absl::StatusOr<std::vector<Tensor>> RunNode(
      const Node& node, const std::function<const Tensor*(const Value*)>& lookup) const override {
    Executor exec;
    return exec.RunNode(node, lookup);
  }
  bool HasKernel(const Node& node) const override {
    const OpDef* def = OpRegistry::Global().Find(node);
    return def && def->kernel;
  }
};

}  // namespace

const HostKernels& ReferenceHostKernels() {
  static const ReferenceKernels* kernels = new ReferenceKernels();
  return *kernels;
}

}  // namespace kiln::target
