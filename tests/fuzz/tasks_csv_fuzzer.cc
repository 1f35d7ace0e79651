// Fuzz target for the tasks report reader (`kiln diff A.csv B.csv`): any
// bytes read as a report or fail with a status; a report read writes back
// to CSV that reads as the same report and writes the same bytes again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "target/api/tasks_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto r = kiln::target::ParseTasksCsv(bytes, "fuzz.csv");
  if (!r.ok()) return 0;
  const std::string written = kiln::target::TasksCsv(*r);
  auto back = kiln::target::ParseTasksCsv(written, "written.csv");
  if (!back.ok() || back->tasks.size() != r->tasks.size()) std::abort();
  for (size_t i = 0; i < r->tasks.size(); ++i)
    if (back->tasks[i].task != r->tasks[i].task || back->tasks[i].engine != r->tasks[i].engine ||
        back->tasks[i].bound != r->tasks[i].bound)
      std::abort();
  if (kiln::target::TasksCsv(*back) != written) std::abort();
  return 0;
}
