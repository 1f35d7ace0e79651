//===- cli_util.h - Shared pieces of the kiln driver ------------*- C++ -*-===//
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "sim/model/roofline.h"

namespace kiln::cli {

// --cycle-limit's default: a simulated run stops with an error past this
// many cycles.
inline constexpr double kDefaultCycleLimit = 1e10;

// A subcommand: its name, one-line summary, full help text and entry point.
// `args` are the positional arguments left after flag parsing.
struct Command {
  const char* name;
  const char* summary;
  const char* help;
  int (*run)(const std::vector<std::string>& args);
};

const std::vector<Command>& Commands();

// Values of the repeatable `--input NAME=FILE` flag, in order.
std::vector<std::string>& RepeatedInputs();

// Prints "kiln: error: MESSAGE" on stderr and returns the exit code 1.
int Fail(const absl::Status& status);
int Fail(const std::string& message);

// Loads a model from .onnx (imported) or .kir (parsed, with its .blobs side
// file when present).
absl::StatusOr<Model> LoadModel(const std::string& path);

// Writes `data` to `path` (reports, traces).
absl::Status WriteFile(const std::string& path, const std::string& data);

// --roofline=FILE of `kiln run` and `kiln sim`: the chart when FILE ends in
// .svg, the table when it ends in .csv. CheckRooflinePath refuses any other
// name before anything runs.
absl::Status CheckRooflinePath(const std::string& path);
absl::Status WriteRoofline(const std::string& path, const std::vector<sim::RooflinePoint>& points,
                           const sim::Roofs& roofs, const std::string& title);

}  // namespace kiln::cli
