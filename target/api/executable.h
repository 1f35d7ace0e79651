//===- executable.h - The runtime half of a target ---------------*- C++ -*-===//
//
// An Executable is an artifact a target has loaded, ready to run: inputs
// in, outputs out, in signature order. `kiln run`, `kiln conformance`,
// training loops (--steps) and gears all drive a target through this
// interface; what a run can give beyond its outputs (a trace, a report, a
// roofline, streamed batches, a loop sunk onto the device) the executable
// declares in RunFeatures, and kiln refuses the flags of the features it
// lacks instead of ignoring them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/ir/tensor.h"

namespace kiln::target {

// One input or output of a compiled model.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;  // -1: known only when the model runs
  // Per dim, the symbol of a dim known only at run time ("batch"; empty
  // where none, or for every dim).
  std::vector<std::string> symbols;
  // "x: f32[batch,3,?,224]"
  std::string ToString() const;
};

// Output `output` (NAME.next) feeds input `input` (NAME) of the next step
// of a training loop.
struct StepFeed {
  int output = 0;
  int input = 0;
};

// What an executable can do beyond running its inputs: the `kiln run` flags
// it honours.
struct RunFeatures {
  bool trace = false;        // --trace: Chrome trace-event JSON (Report(kTraceJson))
  bool report = false;       // --report, --report-csv (Report(kText), Report(kCsv))
  bool roofline = false;     // --roofline (Report(kRooflineSvg), Report(kRooflineCsv))
  bool batches = false;      // --batches: streams batches through the device (RunOptions::batches)
  bool timing_only = false;  // --timing-only: times the run without computing values
  bool cycle_limit = false;  // --cycle-limit: a simulated run stops past a cycle count
  bool device_loop = false;  // --steps runs on the device (RunOptions::feeds), not step by step from the host
  bool latency = false;      // --repeat: a run's wall time is the device's time
};

struct RunOptions {
  bool functional = true;  // false: timing only (RunFeatures::timing_only)
  bool trace = false;
  // What the trace covers: the cycles from trace_from to trace_to (0: to the
  // end), and only the kernels whose name trace_kernels (an ECMAScript
  // regular expression) matches, where not empty.
  double trace_from = 0, trace_to = 0;
  std::string trace_kernels;
  // Called now and then while a long run lasts, with what it has done
  // ("1.2 M cycles simulated"): a terminal's progress line. Unset: nothing.
  std::function<void(const std::string& done)> progress;
  int batches = 1;
  double cycle_limit = 1e11;
  // A training loop sunk onto the device (RunFeatures::device_loop): the
  // batches are its steps, and each feed's output of one step becomes its
  // input of the next without leaving device memory.
  std::vector<StepFeed> feeds;
  // Called after the run with each step's outputs, in order (a fed output
  // may be undefined except in the last step).
  std::function<void(int step, const std::vector<Tensor>& outputs)> after_step;
};

// What Executable::Report gives. kTasksCsv: the run's tasks in launch
// order, one per row, under the header of kTasksCsvHeader (a field holding
// a comma or a quote is quoted, RFC 4180), then a row named "total" with
// the run's cycles: what `kiln diff` aligns two runs by. The traces:
// kTraceJson (Chrome trace-event JSON), kTraceJsonGz (the same, gzip'd),
// kTracePerfetto (Perfetto's protobuf format, names interned).
enum class ReportKind : uint8_t {
  kText, kCsv, kTraceJson, kRooflineSvg, kRooflineCsv, kTasksCsv, kTraceJsonGz, kTracePerfetto
};
// The trace kind a file's name asks for: ".pftrace" or ".perfetto-trace"
// Perfetto's protobuf, ".gz" gzip'd JSON, else JSON.
ReportKind TraceKindOf(const std::string& path);
inline constexpr char kTasksCsvHeader[] =
    "task,engine,cycles,estimated_cycles,cube_utilization,cores,bound,hbm_read_bytes,hbm_write_bytes,energy_uj,"
    "l2_hit_rate";

class Executable {
 public:
  virtual ~Executable() = default;
  virtual const std::vector<TensorSpec>& inputs() const = 0;
  virtual const std::vector<TensorSpec>& outputs() const = 0;
  // The inputs' initial values in signature order (undefined for an input
  // every run must give): what a run reads for an input left out (a
  // training step's parameters).
  virtual std::vector<Tensor> InitialValues() const { return std::vector<Tensor>(inputs().size()); }
  virtual RunFeatures features() const { return {}; }
  // Checks `inputs` (signature order) before anything runs — a wrong shape
  // or dtype, no gear that takes them — and says what the run will do, in
  // lines for a terminal ("gear batch=4", "simulating 12 tasks on ...").
  virtual absl::StatusOr<std::string> Prepare(const std::vector<Tensor>& inputs, const RunOptions& options) {
    return std::string();
  }
  // Runs the inputs (signature order); the outputs in signature order.
  virtual absl::StatusOr<std::vector<Tensor>> Run(std::vector<Tensor> inputs, const RunOptions& options) = 0;
  // What the last run measured (RunFeatures says which kinds exist);
  // `title` names the run in charts (the artifact's file name).
  virtual absl::StatusOr<std::string> Report(ReportKind kind, const std::string& title) const {
    return absl::UnimplementedError("this target's runs have no reports");
  }
  // What the user should know about the last run (a trace cut at its bound).
  virtual std::vector<std::string> Warnings() const { return {}; }
  // The artifact's tasks per engine ("cube", 12): `kiln conformance` sums
  // them over the models it compiles.
  virtual std::vector<std::pair<std::string, int64_t>> TasksPerEngine() const { return {}; }
};

}  // namespace kiln::target
