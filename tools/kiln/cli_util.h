//===- cli_util.h - Shared pieces of the kiln driver ------------*- C++ -*-===//
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "sim/model/roofline.h"
#include "tools/driver/compile_model.h"

namespace kiln::cli {

// --cycle-limit's default: a simulated run stops with an error past this
// many cycles.
inline constexpr double kDefaultCycleLimit = 1e10;

// A subcommand: its name, one-line summary, full help text and entry point.
// `args` are the positional arguments left after flag parsing.
// `target_settings`: the command compiles for a target and takes that
// target's settings as flags of their own (--machine=FILE).
struct Command {
  const char* name;
  const char* summary;
  const char* help;
  int (*run)(const std::vector<std::string>& args);
  bool target_settings = false;
};

const std::vector<Command>& Commands();

// Values of the repeatable `--input NAME=FILE` flag, in order.
std::vector<std::string>& RepeatedInputs();
// Values of the repeatable `--set FIELD=V1,V2` flag of `kiln sweep`, in order.
std::vector<std::string>& RepeatedSweepSets();

// The target settings given on the command line (--NAME=VALUE where NAME is
// a setting some registered target declares), in order.
std::vector<std::pair<std::string, std::string>>& TargetSettings();

// Registers the built-in targets (through the path plugins take) and kiln's
// host kernels, then the plugins on KILN_PLUGIN_PATH (one that cannot be
// added is a warning: kiln goes on without it) and those named by
// --plugin (`plugins`; one that cannot be added is an error).
absl::Status SetUpTargets(const std::vector<std::string>& plugins);

// kiln's host kernels as a shared library (libkiln_hostops.so): beside an
// installed kiln (PREFIX/lib), else where the build made it.
std::string HostOpsLibraryPath();

// The settings section of `kiln compile --target=NAME --help`.
std::string TargetSettingsHelp(const std::string& target_name);

// Prints "kiln: error: MESSAGE" on stderr and returns the exit code 1.
// The candidate nearest to `name` by edit distance when it is near enough
// to be a slip (at most a third of the name's length, at least 1); empty
// otherwise: the "did you mean" of misspelled names.
std::string DidYouMean(const std::string& name, const std::vector<std::string>& candidates);

// A tensor's type and first values: "f32[1,10] = [0.5, 1, ...]".
std::string Summarize(const Tensor& t);

int Fail(const absl::Status& status);
int Fail(const std::string& message);

// Loads a model from .onnx (imported) or .kir (parsed, with its .blobs side
// file when present).
using driver::LoadModel;

// Runs the optimizer as the flags ask (--passes, default: `target_pipeline`,
// and the pass options) over `model` (cmd_opt.cc). A flag that acts only
// through a pass the pipeline does not run is refused; `is_opt`: the
// command is `kiln opt`, where the gears, mixed-precision and training
// flags act through their passes too.
absl::Status RunPipelineFromFlags(Model& model, const std::string& target_pipeline, bool is_opt);
// The pipeline RunPipelineFromFlags runs ("" for none), every pass flag
// checked against it: what a command that runs it per model (conformance)
// checks once, up front.
absl::StatusOr<std::string> PipelineFromFlags(const std::string& target_pipeline, bool is_opt);

// Whether flag `name` (spelled with dashes, without them in front) holds
// other than its default value: what a command checks before refusing a
// flag that would do nothing where it is given.
bool FlagGiven(const std::string& name);

// What --trace-window=START:END (cycles; END may be left out) and
// --trace-kernels=REGEX ask of a trace, checked: both need --trace.
struct TraceScope {
  double from = 0, to = 0;  // to 0: to the end
  std::string kernels;
};
absl::StatusOr<TraceScope> TraceScopeFromFlags();

// --target, or the registry's default target (the golden one) when it is
// not given.
std::string TargetFromFlags();

// Writes `data` to `path` (reports, traces).
absl::Status WriteFile(const std::string& path, const std::string& data);

// --roofline=FILE of `kiln run` and `kiln sim`: the chart when FILE ends in
// .svg, the table when it ends in .csv. CheckRooflinePath refuses any other
// name before anything runs.
absl::Status CheckRooflinePath(const std::string& path);
absl::Status WriteRoofline(const std::string& path, const std::vector<sim::RooflinePoint>& points,
                           const sim::Roofs& roofs, const std::string& title);

}  // namespace kiln::cli
