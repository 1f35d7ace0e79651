//===- host_kernels.h - kiln's reference kernels, for any target -*- C++ -*-===//
//
// The host kernels kiln folds constants with and checks every target
// against, offered to targets that run work on a CPU: the AICPU of a
// simulated chip, host fallbacks of a device, a target that runs on the
// host altogether. kiln provides them (TargetRegistry::host_kernels()); a
// plugin calls them without linking kiln's op library.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"

namespace kiln::target {

class HostKernels {
 public:
  virtual ~HostKernels() = default;
  // Runs `graph` with `inputs` bound to its inputs, in order (checked
  // against their declared types); its outputs in order.
  virtual absl::StatusOr<std::vector<Tensor>> RunGraph(const Graph& graph, std::vector<Tensor> inputs) const = 0;
  // The values a node reads: its inputs, then the values of enclosing
  // graphs its subgraphs capture (control flow).
  virtual std::vector<const Value*> Operands(const Node& node) const = 0;
  // Runs one node (control flow included) on its own: `lookup` gives the
  // value of each of Operands(node) (constants may be left to the graph).
  // The node's outputs in order.
  virtual absl::StatusOr<std::vector<Tensor>> RunNode(
      const Node& node, const std::function<const Tensor*(const Value*)>& lookup) const = 0;
  // Whether kiln has a host kernel for `node`'s op.
  virtual bool HasKernel(const Node& node) const = 0;
};

}  // namespace kiln::target
