//===- energy.h - The energy of a run ---------------------------*- C++ -*-===//
//
// What a run cost in joules, from the machine's energy figures
// (Machine.energy): the dynamic energy of every action the kernels took
// (each instruction's arithmetic and the bytes it read and wrote in each
// memory, charged by InstCost and summed per pipe), the bytes sent over
// the host link and the chip links, the L2 prefetches' fills, and the chip's static power (every AI
// core's and the rest of the chip's) for as long as the run lasted.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "sim/machine/machine.pb.h"
#include "sim/model/device.h"

namespace kiln::sim {

struct RunEnergy {
  double kernels_j = 0;    // dynamic: the kernels' actions
  double host_link_j = 0;  // H2D and D2H bytes
  double chip_link_j = 0;  // the bytes each chip sent in its collectives
  double copies_j = 0;     // copies within device memory: read and written in HBM
  double prefetch_j = 0;   // L2 prefetches: lines read from HBM into the L2, dirty lines they evicted
  double static_j = 0;     // static power x the run's time
  double total_j() const { return kernels_j + host_link_j + chip_link_j + copies_j + prefetch_j + static_j; }
};

// The chip's static power: chip_static_watts + ai_cores x core_static_watts.
double StaticWatts(const Machine& m);
// An L2 prefetch's energy in picojoules: the lines it read from HBM into
// the L2, and the dirty lines their fills evicted to HBM.
double PrefetchEnergyPj(const Machine& m, double fetched_bytes, double written_back_bytes);
// A kernel's dynamic energy, its pipes' summed, in joules.
double KernelEnergyJ(const KernelStats& k);
RunEnergy EnergyOf(const RunStats& s, const Machine& m);

}  // namespace kiln::sim
