//===- expand_training_batchnorm.h - Training BatchNorm as vector ops -*- C++ -*-===//
//
// npusim's vector unit has a kernel for inference BatchNormalization only.
// A training-mode node (the batch's statistics, and the running statistics
// updated as outputs 1 and 2) becomes the ops it stands for, which the
// vector unit runs: the mean and (population) variance over every axis but
// the channels, x normalized by them, scaled and shifted, and each running
// statistic times the momentum plus the batch's times (1 - momentum). A
// node is expanded where the AICPU would take longer than those ops on the
// vector unit (about a dozen kernels, each paying its launch and passing the
// tensor through HBM): small batches stay on the AICPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graph/ir/graph.h"
#include "sim/machine/machine.pb.h"

namespace kiln::target::npusim {

// Expands the training-mode BatchNormalization nodes of `g`'s top level with
// static shapes that the vector unit runs faster than `machine`'s AICPU;
// returns how many.
int ExpandTrainingBatchNorm(Graph& g, const sim::Machine& machine);

}  // namespace kiln::target::npusim
