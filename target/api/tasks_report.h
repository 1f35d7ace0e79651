//===- tasks_report.h - A run's tasks as CSV (ReportKind::kTasksCsv) -*- C++ -*-===//
//
// The form a target's Executable::Report(kTasksCsv) gives and `kiln diff`
// reads: a header (kTasksCsvHeader), one row per task of the run's first
// batch in launch order, then a row named "total" with an empty engine for
// the whole run. Fields holding a comma, a quote or a line break are
// quoted (RFC 4180). A reader takes the columns by name, so a report with
// only `task,cycles` is one too.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::target {

struct TaskReportRow {
  std::string task, engine, bound;
  double cycles = 0;
  double estimated_cycles = -1;  // < 0: none
  double cube_utilization = -1;  // of the cube's peak, 0..1; < 0: not a kernel
  int cores = 0;                 // 0: not reported
  int64_t hbm_read_bytes = 0, hbm_write_bytes = 0;
  double energy_uj = -1;         // microjoules (the total: the run's, static included); < 0: not reported
  // The share of the GM bytes it read that a cache in front of global
  // memory served, 0..1; < 0: no cache reported (or nothing read).
  double l2_hit_rate = -1;
};

struct TasksReport {
  std::vector<TaskReportRow> tasks;
  // The run's totals (engine, bound, cube and cores unused); without a
  // "total" row, the sums of the tasks'.
  TaskReportRow total;
};

// The CSV of `r`, header and "total" row included.
std::string TasksCsv(const TasksReport& r);

// Reads a tasks report; `name` (the file) starts each error, with the line
// ("t.csv:3: an unterminated quote").
absl::StatusOr<TasksReport> ParseTasksCsv(absl::string_view text, absl::string_view name);

}  // namespace kiln::target
