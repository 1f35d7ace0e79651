//===- cli_util.cc - Shared pieces of the kiln driver ---------------------===//
#include "tools/kiln/cli_util.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/onnx/importer.h"
#include "graph/ir/parser.h"
#include "graph/ops/shape_inference.h"
#include "graph/support/status.h"
#include "graph/support/read_file.h"
#include "target/api/target_registry.h"

ABSL_DECLARE_FLAG(std::string, target);
ABSL_DECLARE_FLAG(std::string, trace);
ABSL_DECLARE_FLAG(std::string, trace_window);
ABSL_DECLARE_FLAG(std::string, trace_kernels);

namespace kiln::cli {

std::vector<std::string>& RepeatedInputs() {
  static std::vector<std::string> inputs;
  return inputs;
}

std::vector<std::string>& RepeatedSweepSets() {
  static std::vector<std::string> sets;
  return sets;
}

std::string HostOpsLibraryPath() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed = exe.parent_path().parent_path() / "lib" / "libkiln_hostops.so";
    if (std::filesystem::exists(installed, ec)) return installed.string();
  }
  return KILN_HOSTOPS_LIBRARY_PATH;
}

std::vector<std::pair<std::string, std::string>>& TargetSettings() {
  static std::vector<std::pair<std::string, std::string>> settings;
  return settings;
}

int Fail(const absl::Status& status) { return Fail(std::string(status.message())); }

std::string DidYouMean(const std::string& name, const std::vector<std::string>& candidates) {
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diagonal = up;
      }
    }
    return row[b.size()];
  };
  std::string best;
  size_t best_distance = std::max<size_t>(1, name.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const size_t d = distance(name, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

std::string Summarize(const Tensor& t) {
  std::string s = absl::StrCat(DTypeName(t.dtype()), "[", absl::StrJoin(t.dims(), ","), "]");
  if (t.dtype() == DType::kString || t.numel() == 0) return s;
  s += " = [";
  int64_t n = std::min<int64_t>(t.numel(), 8);
  for (int64_t i = 0; i < n; ++i) absl::StrAppend(&s, i ? ", " : "", t.GetDouble(i));
  if (t.numel() > n) s += ", ...";
  return s + "]";
}

int Fail(const std::string& message) {
  // One line whatever the message quotes from its input: control bytes, and
  // the UTF-8 line and paragraph separators (U+0085, U+2028, U+2029), become
  // spaces.
  std::string one_line;
  one_line.reserve(message.size());
  for (size_t i = 0; i < message.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(message[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      one_line += ' ';
    } else if (c == 0xc2 && i + 1 < message.size() && static_cast<unsigned char>(message[i + 1]) == 0x85) {
      one_line += ' ';
      ++i;
    } else if (c == 0xe2 && i + 2 < message.size() && static_cast<unsigned char>(message[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(message[i + 2]) == 0xa8 || static_cast<unsigned char>(message[i + 2]) == 0xa9)) {
      one_line += ' ';
      i += 2;
    } else {
      one_line += static_cast<char>(c);
    }
  }
  std::cerr << "kiln: error: " << one_line << "\n";
  return 1;
}

absl::StatusOr<TraceScope> TraceScopeFromFlags() {
  TraceScope scope;
  const std::string window = absl::GetFlag(FLAGS_trace_window);
  scope.kernels = absl::GetFlag(FLAGS_trace_kernels);
  if (absl::GetFlag(FLAGS_trace).empty()) {
    if (!window.empty()) return absl::InvalidArgumentError("--trace-window narrows a trace: give --trace=FILE too");
    if (!scope.kernels.empty()) return absl::InvalidArgumentError("--trace-kernels narrows a trace: give --trace=FILE too");
    return scope;
  }
  if (!window.empty()) {
    const size_t colon = window.find(':');
    const std::string a = window.substr(0, colon), b = colon == std::string::npos ? "" : window.substr(colon + 1);
    if (colon == std::string::npos || !absl::SimpleAtod(a, &scope.from) || scope.from < 0 || !std::isfinite(scope.from) ||
        (!b.empty() && (!absl::SimpleAtod(b, &scope.to) || !std::isfinite(scope.to) || scope.to <= scope.from)))
      return absl::InvalidArgumentError(absl::StrCat("--trace-window takes START:END in cycles (END after START, or left "
                                                     "out for the end of the run), not '", window, "'"));
  }
  if (!scope.kernels.empty()) {
    try {
      std::regex check(scope.kernels);
    } catch (const std::regex_error& e) {
      return absl::InvalidArgumentError(absl::StrCat("--trace-kernels: '", scope.kernels, "' is not a regular expression"));
    }
  }
  return scope;
}

bool FlagGiven(const std::string& name) {
  std::string underscored = name;
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  const absl::CommandLineFlag* f = absl::FindCommandLineFlag(underscored);
  return f && f->CurrentValue() != f->DefaultValue();
}

absl::Status WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  if (!out || !out.write(data.data(), static_cast<std::streamsize>(data.size())))
    return absl::InvalidArgumentError("cannot write '" + path + "'");
  return absl::OkStatus();
}

std::string TargetFromFlags() {
  const std::string given = absl::GetFlag(FLAGS_target);
  return given.empty() ? target::TargetRegistry::Global().DefaultTarget() : given;
}

absl::Status CheckRooflinePath(const std::string& path) {
  if (absl::EndsWith(path, ".svg") || absl::EndsWith(path, ".csv")) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--roofline: '", path, "' must end in .svg (the chart) or .csv (the table)"));
}

absl::Status WriteRoofline(const std::string& path, const std::vector<sim::RooflinePoint>& points,
                           const sim::Roofs& roofs, const std::string& title) {
  KILN_RETURN_IF_ERROR(CheckRooflinePath(path));
  bool table = absl::EndsWith(path, ".csv");
  return WriteFile(path, table ? sim::RooflineCsv(points) : sim::RooflineSvg(points, roofs, title));
}

}  // namespace kiln::cli
