//===- tasks_report.cc - A run's tasks as CSV --------------------------------===//
#include "target/api/tasks_report.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/support/checked_math.h"
#include "graph/support/csv_field.h"
#include "target/api/executable.h"

namespace kiln::target {
namespace {

// The records of `text`: fields split at commas and line breaks outside
// quotes; false (with the line) on an unterminated quote.
bool SplitCsv(absl::string_view text, std::vector<std::vector<std::string>>* records, std::vector<int>* lines,
              int* bad_line) {
  std::vector<std::string> record;
  std::string f;
  bool quoted = false, any = false;
  int line = 1, start = 1;
  auto end_record = [&] {
    if (any || !f.empty() || !record.empty()) {
      record.push_back(std::move(f));
      records->push_back(std::move(record));
      lines->push_back(start);
    }
    record.clear();
    f.clear();
    any = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        f += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        f += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      record.push_back(std::move(f));
      f.clear();
      any = true;
    } else if (c == '\n') {
      end_record();
      start = line;
    } else if (c != '\r') {
      f += c;
    }
  }
  if (quoted) {
    *bad_line = start;
    return false;
  }
  end_record();
  return true;
}

}  // namespace

std::string TasksCsv(const TasksReport& r) {
  std::string out = absl::StrCat(kTasksCsvHeader, "\n");
  auto row = [&out](const TaskReportRow& t) {
    absl::StrAppendFormat(&out, "%s,%s,%.0f,%s,%s,%s,%s,%d,%d,%s,%s\n", CsvField(t.task), CsvField(t.engine), t.cycles,
                          t.estimated_cycles >= 0 ? absl::StrFormat("%.0f", t.estimated_cycles) : "",
                          t.cube_utilization < 0 ? "" : absl::StrFormat("%.4f", t.cube_utilization),
                          t.cores > 0 ? absl::StrCat(t.cores) : "", CsvField(t.bound), t.hbm_read_bytes,
                          t.hbm_write_bytes, t.energy_uj >= 0 ? absl::StrFormat("%.3f", t.energy_uj) : "",
                          t.l2_hit_rate >= 0 ? absl::StrFormat("%.4f", t.l2_hit_rate) : "");
  };
  for (const TaskReportRow& t : r.tasks) row(t);
  TaskReportRow total = r.total;
  total.task = "total";
  total.engine = total.bound = "";
  total.cube_utilization = -1;
  total.cores = 0;
  row(total);
  return out;
}

absl::StatusOr<TasksReport> ParseTasksCsv(absl::string_view text, absl::string_view name) {
  auto bad = [&](int line, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(name, ":", line, ": ", why));
  };
  std::vector<std::vector<std::string>> records;
  std::vector<int> lines;
  int bad_line = 0;
  if (!SplitCsv(text, &records, &lines, &bad_line)) return bad(bad_line, "an unterminated quote");
  if (records.empty()) return bad(1, "not a tasks report (`kiln run --report-tasks=FILE` writes one)");
  const std::vector<std::string>& header = records[0];
  auto column = [&](absl::string_view c) {
    auto it = std::find(header.begin(), header.end(), c);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  const int c_task = column("task"), c_engine = column("engine"), c_cycles = column("cycles"),
            c_estimated = column("estimated_cycles"), c_cube = column("cube_utilization"), c_cores = column("cores"),
            c_bound = column("bound"), c_read = column("hbm_read_bytes"), c_write = column("hbm_write_bytes"),
            c_energy = column("energy_uj"), c_l2 = column("l2_hit_rate");
  if (c_task < 0 || c_cycles < 0)
    return bad(lines[0], absl::StrCat("not a tasks report: the header has no task and cycles columns (expected '",
                                      kTasksCsvHeader, "')"));
  TasksReport r;
  bool total = false;
  for (size_t i = 1; i < records.size(); ++i) {
    const std::vector<std::string>& f = records[i];
    const int line = lines[i];
    if (f.size() != header.size())
      return bad(line, absl::StrCat(f.size(), " fields where the header has ", header.size()));
    // A count: empty (none) or a finite number >= 0 (up to 2^62).
    auto number = [&](int c, double* out) {
      if (c < 0 || f[c].empty()) return true;
      return absl::SimpleAtod(f[c], out) && std::isfinite(*out) && *out >= 0 && *out < 4.6e18;
    };
    // A byte count: empty (0) or an integer >= 0 (up to 2^62), read as an
    // integer (a double would round counts past 2^53).
    auto bytes = [&](int c, int64_t* out) {
      if (c < 0 || f[c].empty()) return true;
      return absl::SimpleAtoi(f[c], out) && *out >= 0 && *out < (int64_t{1} << 62);
    };
    TaskReportRow t;
    t.task = f[c_task];
    double cores = 0;
    if (!number(c_cycles, &t.cycles) || !number(c_estimated, &t.estimated_cycles) ||
        !bytes(c_read, &t.hbm_read_bytes) || !bytes(c_write, &t.hbm_write_bytes) || !number(c_cores, &cores) ||
        !number(c_cube, &t.cube_utilization) || !number(c_energy, &t.energy_uj) || !number(c_l2, &t.l2_hit_rate))
      return bad(line, "a count that is not a non-negative number");
    if (c_cube < 0 || f[c_cube].empty()) t.cube_utilization = -1;
    if (c_energy < 0 || f[c_energy].empty()) t.energy_uj = -1;
    if (c_estimated < 0 || f[c_estimated].empty()) t.estimated_cycles = -1;
    if (c_l2 < 0 || f[c_l2].empty()) t.l2_hit_rate = -1;
    t.cores = static_cast<int>(std::min(cores, 1e9));
    if (c_engine >= 0) t.engine = f[c_engine];
    if (c_bound >= 0) t.bound = f[c_bound];
    if (t.task == "total" && t.engine.empty()) {
      if (total) return bad(line, "a second total row");
      r.total = std::move(t);
      total = true;
      continue;
    }
    r.tasks.push_back(std::move(t));
  }
  if (!total) {
    r.total.task = "total";
    for (const TaskReportRow& t : r.tasks) {
      r.total.cycles += t.cycles;
      std::optional<int64_t> read = CheckedAdd(r.total.hbm_read_bytes, t.hbm_read_bytes);
      std::optional<int64_t> write = CheckedAdd(r.total.hbm_write_bytes, t.hbm_write_bytes);
      // The sums must read back as the counts do (below 2^62 bytes, 4.6e18 cycles).
      if (!read || !write || *read >= (int64_t{1} << 62) || *write >= (int64_t{1} << 62))
        return bad(lines.back(), "the tasks' HBM bytes add up to more than a count holds");
      r.total.hbm_read_bytes = *read;
      r.total.hbm_write_bytes = *write;
    }
    if (!(r.total.cycles < 4.6e18)) return bad(lines.back(), "the tasks' cycles add up to more than a count holds");
  }
  return r;
}

}  // namespace kiln::target
