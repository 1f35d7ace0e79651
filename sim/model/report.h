//===- report.h - Per-kernel summaries of a run -----------------*- C++ -*-===//
//
// For each kernel and pipe: busy cycles, stall cycles, instructions and the
// pipe's utilization (busy / (kernel cycles x cores used)); the cube's
// utilization against the machine's peak; and the bound, named after the
// busiest pipe: "compute" (CUBE or VECTOR); "HBM bandwidth", "L2 bandwidth",
// "HBM latency" or "L2 latency" (MTE2 or MTE3, which move global memory:
// bandwidth when the kernel keeps HBM, else the L2, at least half busy;
// latency of the L2 when it served most of the kernel's reads);
// "internal transfer" (MTE1, FIXP) or "SCALAR issue";
// when no pipe is busy half the time, "sync stalls". Each kernel's and
// pipe's energy (its actions', sim/model/energy.h) and the run's.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "sim/machine/machine.pb.h"
#include "sim/model/device.h"

namespace kiln::sim {

std::string KernelBound(const KernelStats& k, const Machine& m);
// The share of a kernel's (or run's) GM read bytes the L2 served, 0..1;
// -1 on a machine without an L2, or for one that read nothing from GM.
double L2HitRate(const Machine& m, int64_t hit_bytes, int64_t miss_bytes);
// "L2 32 MiB: 87.3% of reads hit (1234 B; 567 B missed, 1024 B of lines
// from HBM), 890 B of writes absorbed, 512 B of dirty lines written back":
// the run's L2 traffic; empty for a machine without an L2.
std::string L2Line(const RunStats& s, const Machine& m);
std::string ReportText(const RunStats& s, const Machine& m);
// "energy: 12.345 uJ (kernels ..., static ...); average power 123.4 W":
// the run's energy (sim/model/energy.h) and its average power.
std::string EnergyLine(const RunStats& s, const Machine& m);
// "simulator: ... cycles and ... instructions in ... s of wall time: ... M
// cycles/s, ... M instructions/s": the simulator's own speed on this host
// (the one line of a report that differs from run to run).
std::string SimulatorSpeedLine(const RunStats& s);

// The cycles the chip links carried collectives: their spans summed (they
// hold the links one at a time, so the spans do not overlap).
double CollectiveCycles(const RunStats& s);
// One row per kernel and pipe, then a totals row per kernel (pipe "total");
// the kernel's columns end with its L2 hit rate (empty: no L2 or no reads).
std::string ReportCsv(const RunStats& s, const Machine& m);

}  // namespace kiln::sim
