//===- npusim_target.h - The npusim target ----------------------*- C++ -*-===//
//
// kiln's Ascend-like NPU, simulated by the SystemC model in sim/: a cube unit
// for matrix work, a vector unit for elementwise work, reductions and
// normalizations, and an AICPU for everything the cores cannot run.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>

#include "target/api/target.h"

namespace kiln::target {

std::unique_ptr<Target> CreateNpusimTarget();

}  // namespace kiln::target
