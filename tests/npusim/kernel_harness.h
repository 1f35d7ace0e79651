//===- kernel_harness.h - Runs one generated npusim kernel -------*- C++ -*-===//
//
// Tests of the npusim kernel generators run a kernel for one node on a fresh
// simulated device and compare its outputs with the reference kernels.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/ir/tensor.h"
#include "sim/model/device.h"
#include "target/npusim/kernels/kernel.h"

namespace kiln::testing {

struct KernelRun {
  std::vector<Tensor> outputs;  // the node's outputs, in order
  sim::RunStats stats;
};

// Runs `kernel` (generated for `node`) on a fresh device of `machine`. The
// value of each non-constant input comes from `inputs`; constant inputs from
// the graph. `functional` false: timing only (outputs are zeros).
absl::StatusOr<KernelRun> RunKernelOnSim(const target::npusim::GeneratedKernel& kernel, const Node& node,
                                         const absl::flat_hash_map<const Value*, Tensor>& inputs,
                                         const sim::Machine& machine, bool functional = true);

// The node's outputs computed by the reference kernels (a one-node graph
// through the executor).
absl::StatusOr<std::vector<Tensor>> RunNodeOnReference(const Node& node,
                                                       const absl::flat_hash_map<const Value*, Tensor>& inputs);

// Largest |a - b| / max(1, |b|) over all elements (both converted to double).
double MaxRelativeError(const Tensor& a, const Tensor& b);

}  // namespace kiln::testing
