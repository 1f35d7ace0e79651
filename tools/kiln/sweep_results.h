//===- sweep_results.h - The results of a design-space sweep ----*- C++ -*-===//
//
// Each point of a sweep leaves its run's tasks report (`kiln run
// --report-tasks`): its latency, energy and average power, the cube's
// utilization over the run (each kernel's weighted by its cycles and cores,
// over the chip's cores) and the bound of its longest task. A point is on
// the Pareto frontier when no other point is at least as fast and as
// frugal and better in one. They are written as CSV (one row per point, the
// fields varied first) and as an SVG of energy against latency with the
// frontier marked.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/machine/machine.pb.h"

namespace kiln::cli {

struct SweepResult {
  std::vector<std::string> values;  // one per field varied
  std::string error;                // a point that did not run: why (the rest unset)
  double cycles = 0, latency_us = 0, per_second = 0;
  double energy_uj = -1, watts = -1;  // < 0: the target reports no energy
  double cube_utilization = 0;
  double l2_hit_rate = -1;  // < 0: no L2 reported
  std::string bound;
  bool pareto = false;
};

// A point's result from its tasks report and the machine it ran on.
absl::StatusOr<SweepResult> ReadSweepResult(const std::string& tasks_csv, const std::string& name,
                                            const sim::Machine& machine);
// Marks the points on the frontier of latency and energy (of latency alone
// where no point reports energy); points with an error are never on it.
void MarkPareto(std::vector<SweepResult>* results);
std::string SweepCsv(const std::vector<std::string>& fields, const std::vector<SweepResult>& results);
std::string SweepSvg(const std::string& title, const std::vector<std::string>& fields,
                     const std::vector<SweepResult>& results);

}  // namespace kiln::cli
