//===- cmd_run.cc - `kiln run` --------------------------------------------===//
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "frontend/onnx/tensor_proto.h"
#include "graph/exec/executor.h"
#include "graph/io/npy.h"
#include "absl/strings/str_split.h"
#include "runtime/step_loop.h"
#include "target/api/target_registry.h"
#include "target/artifact/artifact_io.h"
#include "tools/kiln/cli_util.h"
#include "tools/kiln/progress_line.h"
#include "tools/kiln/run_setup.h"

ABSL_FLAG(std::string, output_dir, "", "Directory to write each output as <name>.npy.");
ABSL_FLAG(int, batches, 1, "stream this many batches, overlapping transfers with compute.");
ABSL_FLAG(int, steps, 1, "run the model this many times, feeding each output NAME.next into input NAME.");
ABSL_FLAG(int, repeat, 0, "run the artifact this many more times and print its latency.");
ABSL_FLAG(std::string, report_tasks, "", "Write the run's tasks, one per row, as CSV (what `kiln diff` compares).");
ABSL_DECLARE_FLAG(std::string, trace);
ABSL_DECLARE_FLAG(bool, report);
ABSL_DECLARE_FLAG(std::string, report_csv);
ABSL_DECLARE_FLAG(std::string, roofline);
ABSL_DECLARE_FLAG(bool, timing_only);
ABSL_DECLARE_FLAG(double, cycle_limit);

namespace kiln::cli {
namespace {

// A file name for an output value: ONNX names may hold '/', ':' and more.
std::string FileNameFor(const std::string& value_name) {
  std::string s;
  for (char c : value_name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  if (s.empty() || s[0] == '.') s = "_" + s;
  return s;
}

// The run flags given that `features` lacks, as "--trace, --report" (empty
// when every flag given is honoured). `features` null: a model on the
// reference executor, which honours none of them.
std::vector<std::string> UnsupportedRunFlags(const target::RunFeatures& f) {
  std::vector<std::string> given;
  if (!absl::GetFlag(FLAGS_trace).empty() && !f.trace) given.push_back("--trace");
  if (absl::GetFlag(FLAGS_report) && !f.report) given.push_back("--report");
  if (!absl::GetFlag(FLAGS_report_csv).empty() && !f.report) given.push_back("--report-csv");
  if (!absl::GetFlag(FLAGS_report_tasks).empty() && !f.report) given.push_back("--report-tasks");
  if (!absl::GetFlag(FLAGS_roofline).empty() && !f.roofline) given.push_back("--roofline");
  if (absl::GetFlag(FLAGS_batches) != 1 && !f.batches) given.push_back("--batches");
  if (absl::GetFlag(FLAGS_timing_only) && !f.timing_only) given.push_back("--timing-only");
  if (absl::GetFlag(FLAGS_cycle_limit) != kDefaultCycleLimit && !f.cycle_limit) given.push_back("--cycle-limit");
  if (absl::GetFlag(FLAGS_repeat) != 0 && !f.latency) given.push_back("--repeat");
  return given;
}

// --steps: the step count, checked, and the feeds of a loop (an error when
// more than one step is asked of a model without any).
absl::StatusOr<std::vector<runtime::StepFeed>> StepFeedsFromFlags(const std::vector<std::string>& inputs,
                                                                  const std::vector<std::string>& outputs,
                                                                  int* steps) {
  *steps = absl::GetFlag(FLAGS_steps);
  if (*steps < 1 || *steps > 1000000) return absl::InvalidArgumentError("--steps must be between 1 and 1000000");
  std::vector<runtime::StepFeed> feeds = runtime::StepFeeds(inputs, outputs);
  if (*steps > 1 && feeds.empty())
    return absl::InvalidArgumentError(
        "--steps needs a model whose outputs NAME.next feed its inputs NAME (a training step with "
        "`kiln opt --passes=training-step --state=inputs`); this one has none");
  return feeds;
}

// With more than one step: a line per step with the outputs of one element
// that feed no input (the loss).
runtime::StepFn PrintSteps(int steps, const std::vector<std::string>& outputs,
                           const std::vector<runtime::StepFeed>& feeds) {
  if (steps <= 1) return nullptr;
  std::vector<bool> fed(outputs.size(), false);
  for (const runtime::StepFeed& f : feeds) fed[f.output] = true;
  return [outputs, fed](int step, const std::vector<Tensor>& out) {
    std::string line = absl::StrCat("step ", step, ":");
    for (size_t i = 0; i < out.size() && i < outputs.size(); ++i)
      if (!fed[i] && out[i].defined() && out[i].numel() == 1 && out[i].dtype() != DType::kString)
        absl::StrAppend(&line, " ", outputs[i], " = ", out[i].GetDouble(0));
    std::cout << line << "\n";
  };
}

int WriteOutputs(const std::vector<std::string>& names, const std::vector<Tensor>& outputs) {
  std::string dir = absl::GetFlag(FLAGS_output_dir);
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Fail("cannot create --output-dir '" + dir + "': " + ec.message());
  }
  // A timing-only run computes no values: its outputs are marked, and no
  // file of zeros is written for them.
  const bool timing_only = absl::GetFlag(FLAGS_timing_only);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (timing_only) {
      const Tensor& t = outputs[i];
      std::cout << names[i] << ": " << DTypeName(t.dtype()) << "[" << absl::StrJoin(t.dims(), ",")
                << "] not computed (--timing-only)\n";
      continue;
    }
    std::cout << names[i] << ": " << Summarize(outputs[i]) << "\n";
    if (!dir.empty()) {
      std::string path = (std::filesystem::path(dir) / (FileNameFor(names[i]) + ".npy")).string();
      absl::Status s = WriteNpy(path, outputs[i]);
      if (!s.ok()) return Fail(s);
    }
  }
  return 0;
}

// A compiled artifact, on the device of the target that compiled it.
int RunCompiled(const std::string& path) {
  auto target = TargetOfArtifact(path);
  if (!target.ok()) return Fail(target.status());
  const std::string target_name = (*target)->description().name;
  auto loaded = (*target)->Load(path);
  if (!loaded.ok()) return Fail(loaded.status());
  // The process ends with the command: the executable (its device's
  // state, however large) is left to the exit, not torn down.
  static auto* kept = new std::vector<std::unique_ptr<target::Executable>>();
  kept->push_back(*std::move(loaded));
  target::Executable& exe = *kept->back();
  const target::RunFeatures features = exe.features();
  if (std::vector<std::string> flags = UnsupportedRunFlags(features); !flags.empty())
    return Fail(absl::StrCat(absl::StrJoin(flags, ", "), ": runs of target ", target_name,
                             flags.size() == 1 ? " do not take it" : " do not take them", " ('", path,
                             "' was compiled for it)"));
  if (std::string r = absl::GetFlag(FLAGS_roofline); !r.empty())
    if (absl::Status s = CheckRooflinePath(r); !s.ok()) return Fail(s);
  if (!absl::GetFlag(FLAGS_output_dir).empty() && absl::GetFlag(FLAGS_timing_only))
    return Fail("--output-dir: a --timing-only run computes no outputs to write");
  absl::StatusOr<TraceScope> scope = TraceScopeFromFlags();
  if (!scope.ok()) return Fail(scope.status());
  std::vector<std::string> names, described, out_names;
  for (const target::TensorSpec& s : exe.inputs()) {
    names.push_back(s.name);
    described.push_back(s.ToString());
  }
  for (const target::TensorSpec& s : exe.outputs()) out_names.push_back(s.name);
  auto inputs = InputsByName(names, described, exe.InitialValues());
  if (!inputs.ok()) return Fail(inputs.status());
  int steps = 1;
  auto feeds = StepFeedsFromFlags(names, out_names, &steps);
  if (!feeds.ok()) return Fail(feeds.status());
  if (steps > 1 && absl::GetFlag(FLAGS_batches) != 1)
    return Fail("--steps and --batches: a training loop streams one batch per step (give --steps alone)");
  target::RunOptions options;
  options.batches = absl::GetFlag(FLAGS_batches);
  if (options.batches < 1 || options.batches > 1024) return Fail("--batches must be between 1 and 1024");
  const int repeat = absl::GetFlag(FLAGS_repeat);
  if (repeat < 0 || repeat > 100000) return Fail("--repeat must be between 0 and 100000");
  options.trace = !absl::GetFlag(FLAGS_trace).empty();
  options.trace_from = scope->from;
  options.trace_to = scope->to;
  options.trace_kernels = scope->kernels;
  options.functional = !absl::GetFlag(FLAGS_timing_only);
  options.cycle_limit = absl::GetFlag(FLAGS_cycle_limit);
  // A device that runs training loops itself: the steps are its batches,
  // the variables staying in device memory.
  const bool device_loop = features.device_loop && steps > 1;
  if (device_loop) {
    options.batches = steps;
    options.feeds = *feeds;
    options.after_step = PrintSteps(steps, out_names, *feeds);
  }
  ProgressLine progress;
  if (progress.active()) options.progress = [&progress](const std::string& done) { progress.Show(done); };
  auto plan = exe.Prepare(*inputs, options);
  if (!plan.ok()) return Fail(plan.status());
  if (isatty(2))
    for (absl::string_view line : absl::StrSplit(*plan, '\n', absl::SkipEmpty())) std::cerr << "kiln: " << line << "\n";
  absl::StatusOr<std::vector<Tensor>> outputs;
  if (device_loop) {
    outputs = exe.Run(*inputs, options);
  } else {
    outputs = runtime::RunSteps(
        steps, *inputs, *feeds, [&](std::vector<Tensor> in) { return exe.Run(std::move(in), options); },
        PrintSteps(steps, out_names, *feeds));
  }
  progress.Clear();
  if (!outputs.ok()) return Fail(outputs.status());
  if (int rc = WriteOutputs(out_names, *outputs); rc != 0) return rc;
  const std::string title = std::filesystem::path(path).filename().string();
  if (absl::GetFlag(FLAGS_report)) {
    auto text = exe.Report(target::ReportKind::kText, title);
    if (!text.ok()) return Fail(text.status());
    std::cout << "\n" << *text;
  }
  // The reports that go to files: --report-csv, --report-tasks, --roofline, --trace.
  const std::string roofline = absl::GetFlag(FLAGS_roofline);
  const std::pair<std::string, target::ReportKind> files[] = {
      {absl::GetFlag(FLAGS_report_csv), target::ReportKind::kCsv},
      {absl::GetFlag(FLAGS_report_tasks), target::ReportKind::kTasksCsv},
      {roofline, absl::EndsWith(roofline, ".csv") ? target::ReportKind::kRooflineCsv : target::ReportKind::kRooflineSvg},
      {absl::GetFlag(FLAGS_trace), target::TraceKindOf(absl::GetFlag(FLAGS_trace))}};
  for (const auto& [file, kind] : files) {
    if (file.empty()) continue;
    auto text = exe.Report(kind, title);
    if (!text.ok()) return Fail(text.status());
    if (absl::Status s = WriteFile(file, *text); !s.ok()) return Fail(s);
  }
  for (const std::string& w : exe.Warnings()) std::cerr << "kiln: warning: " << w << "\n";
  // --repeat: the latency of further runs (the first run above warmed up).
  if (repeat == 0) return 0;
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto again = exe.Run(*inputs, options);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (!again.ok()) return Fail(again.status());
  }
  std::sort(ms.begin(), ms.end());
  double mean = 0;
  for (double x : ms) mean += x / ms.size();
  std::cout << absl::StrFormat("latency: median %.4f ms, mean %.4f ms, min %.4f ms over %d runs\n",
                               ms[ms.size() / 2], mean, ms.front(), repeat);
  return 0;
}

int Run(const std::vector<std::string>& args) {
  if (args.size() != 1) {
    // `--input NAME FILE` leaves FILE as a second argument.
    for (const std::string& spec : RepeatedInputs())
      if (spec.find('=') == std::string::npos)
        return Fail(absl::StrCat("--input takes NAME=FILE as one argument, got '--input ", spec, "' and '",
                                 args.size() > 1 ? args[1] : "", "' apart"));
    return Fail("run takes one model (MODEL.onnx or MODEL.kir)");
  }
  // A model (.onnx, .kir) runs on the reference executor; anything else is
  // a compiled artifact.
  if (!absl::EndsWith(args[0], ".onnx") && !absl::EndsWith(args[0], ".kir")) return RunCompiled(args[0]);
  if (std::vector<std::string> flags = UnsupportedRunFlags({}); !flags.empty())
    return Fail(absl::StrCat(absl::StrJoin(flags, ", "), ": '", args[0],
                             "' runs on the reference executor, which does not take ",
                             flags.size() == 1 ? "it" : "them", " (compile it for a target that does)"));
  auto model = LoadModel(args[0]);
  if (!model.ok()) return Fail(model.status());
  const Graph& g = *model->graph;

  std::vector<std::string> names, described, out_names;
  for (Value* in : g.inputs()) {
    names.push_back(in->name());
    described.push_back(absl::StrCat(in->name(), ": ", in->type().ToString()));
  }
  std::vector<Tensor> initial;
  for (Value* out : g.outputs()) out_names.push_back(out->name());
  for (Value* in : g.inputs()) initial.push_back(in->initial());
  auto inputs = InputsByName(names, described, initial);
  if (!inputs.ok()) return Fail(inputs.status());
  int steps = 1;
  auto feeds = StepFeedsFromFlags(names, out_names, &steps);
  if (!feeds.ok()) return Fail(feeds.status());
  Executor exec;
  auto outputs = runtime::RunSteps(
      steps, *std::move(inputs), *feeds, [&](std::vector<Tensor> in) { return exec.Run(g, std::move(in)); },
      PrintSteps(steps, out_names, *feeds));
  if (!outputs.ok()) return Fail(outputs.status());
  return WriteOutputs(out_names, *outputs);
}

}  // namespace

extern const Command kRunCommand;
const Command kRunCommand = {
    "run", "run a model and write its outputs",
    R"(usage: kiln run MODEL.onnx|MODEL.kir|ARTIFACT [--input NAME=FILE ...] [--output-dir=DIR]
                [--trace=FILE] [--trace-window=START:END] [--trace-kernels=REGEX]
                [--report] [--report-csv=FILE] [--report-tasks=FILE]
                [--roofline=FILE] [--batches=N]
                [--timing-only] [--steps=N] [--repeat=N] [--plugin=lib.so]

Runs a model: .onnx and .kir on the host reference executor; a compiled
artifact (a .kiln file, a package directory, or a plugin target's own
form) on the device of the target that recognizes it, through that
target's runtime, which says which of the run features below it has
(target/api's RunFeatures); a target that cannot run here says why in
one line.
Each input is given as NAME=FILE, where FILE is a NumPy .npy file or an
ONNX TensorProto .pb file; an input with an initial value (a training
step's parameters and optimizer state with `--state=inputs`) may be left
out. Prints each output's type and first values; with --output-dir, writes
each output as DIR/<output name>.npy (characters other than letters,
digits, '_', '-' and '.' become '_'). A data-parallel step (`kiln opt
--replicas=N`) takes inputs of R times their batch, one shard per device
(the target's runtime runs R ranks), or of one shard's size.

The flags below marked * are features of a target's runs; a flag the
artifact's target lacks is refused.

flags:
  --input NAME=FILE    an input (repeat for each input)
  --output-dir=DIR     where to write the outputs
  --trace=FILE         * the run's trace: Perfetto's protobuf format when FILE ends
                       in .pftrace (the smallest, for ui.perfetto.dev), Chrome
                       trace-event JSON otherwise (Perfetto, chrome://tracing),
                       gzip-compressed when FILE ends in .gz
  --trace-window=START:END  * trace only these cycles (END left out: to the end)
  --trace-kernels=REGEX  * trace only the kernels whose name matches (the HBM,
                       stream and fallback-engine tracks over their span)
  --report             * per-task cycles, matrix-unit utilization and bound,
                       totals, and the roofline table (work, HBM bytes, work per
                       byte and per cycle, the roof at that intensity, % of it,
                       the limit)
  --report-csv=FILE    * the per-kernel, per-pipe report as CSV
  --report-tasks=FILE  * the tasks of the first batch as CSV, one per row (task,
                       engine, cycles, estimate, matrix-unit utilization, cores,
                       bound, HBM bytes read and written), then the run's total:
                       what `kiln diff` compares
  --roofline=FILE      * the roofline of the first batch, FILE.svg (a log-log
                       chart: HBM slope, matrix and vector roofs, a circle per
                       kernel) or FILE.csv (the table)
  --batches=N          * stream N batches (inputs of batch i+1 cross PCIe
                       while batch i computes); the report gives the throughput
                       against max(compute, transfer)
  --timing-only        * skip the arithmetic: outputs are not computed (printed
                         as such; --output-dir is refused with it)
  --steps=N            run N times on the same data inputs, each output NAME.next
                       feeding input NAME of the next run (a training loop); prints
                       each step's one-element outputs (the loss), then the last
                       step's outputs. A target whose runtime runs the loop
                       on its device pipelines the steps as batches and moves
                       NAME.next to NAME within device memory (the report and
                       trace cover every step)
  --cycle-limit=N      * stop with an error past N simulated cycles
  --repeat=N           * run N more times and print the latency (host inputs
                       and outputs, their copies included)
  --plugin=lib.so      load a target plugin first (repeatable)
)",
    Run};

}  // namespace kiln::cli
