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

// A tensor of `dt` with values uniform in [-1, 1) (drawn as f32, then cast).
Tensor RandomTensor(DType dt, const Dims& dims, uint32_t seed);
// A tensor of `dt` with values uniform in [lo, hi) (drawn as double; i32
// values rounded), then cast.
Tensor UniformTensor(DType dt, const Dims& dims, double lo, double hi, uint32_t seed);

// Largest |a - b| / max(1, |b|) over all elements (both converted to double).
double MaxRelativeError(const Tensor& a, const Tensor& b);

}  // namespace kiln::testing
