//===- npusim_description.h - The npusim target's description of a machine -*- C++ -*-===//
//
// What the npusim target tells the rest of kiln about a simulated machine
// (sim/machine/machine.proto): its engines, memory levels, cube shapes and
// rates, and the figures the shared backend tiles by, among them the
// persistent GEMM schedule of the AI cores (each engine's latency, DMA
// bursts, issue queues). The target's description is the default
// machine's; kernels compiled for --machine=FILE tile by that machine's.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "sim/machine/machine.pb.h"
#include "target/api/target.h"

namespace kiln::target::npusim {

TargetDescription DescriptionOf(const sim::Machine& m);

}  // namespace kiln::target::npusim
