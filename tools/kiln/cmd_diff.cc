//===- cmd_diff.cc - `kiln diff`: two runs side by side --------------------===//
//
// The daily question "what did my change do": two task reports, or two
// models or artifacts run on the same inputs, aligned task by task (by the
// node each task runs: a task's name), with the totals' ratio and the
// outputs' largest difference.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/exec/executor.h"
#include "graph/support/status.h"
#include "graph/support/read_file.h"
#include "target/api/executable.h"
#include "target/api/tasks_report.h"
#include "target/api/target_registry.h"
#include "tools/kiln/cli_util.h"
#include "tools/kiln/run_setup.h"

ABSL_DECLARE_FLAG(bool, timing_only);

namespace kiln::cli {
namespace {

// One task of a run, as a tasks report has it.
struct TaskRow {
  std::string name, engine, bound;
  double cycles = 0;
  double cube = -1;  // < 0: none (not a kernel, or not reported)
  bool matched = false;
};

// One side of the comparison.
struct Side {
  std::string path;
  std::string where;  // the target, the reference executor, or a report
  std::vector<std::string> output_names;
  std::vector<Tensor> outputs;  // empty: not computed
  bool has_tasks = false;
  std::vector<TaskRow> tasks;
  double total_cycles = 0;
  int64_t total_hbm_bytes = 0;
  double total_energy_uj = -1;  // < 0: not reported
};

// A tasks report (`kiln run --report-tasks=FILE`, ReportKind::kTasksCsv).
absl::Status ParseTasks(const std::string& text, const std::string& name, Side* side) {
  KILN_ASSIGN_OR_RETURN(target::TasksReport report, target::ParseTasksCsv(text, name));
  side->has_tasks = true;
  for (const target::TaskReportRow& t : report.tasks) {
    TaskRow r;
    r.name = t.task;
    r.engine = t.engine;
    r.bound = t.bound;
    r.cycles = t.cycles;
    r.cube = t.cube_utilization;
    side->tasks.push_back(std::move(r));
  }
  side->total_cycles = report.total.cycles;
  side->total_hbm_bytes = report.total.hbm_read_bytes + report.total.hbm_write_bytes;
  side->total_energy_uj = report.total.energy_uj;
  return absl::OkStatus();
}

absl::StatusOr<Side> ReadReport(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFileBytes(path));
  Side side;
  side.path = path;
  side.where = "report";
  KILN_RETURN_IF_ERROR(ParseTasks(text, path, &side));
  return side;
}

// A model on the reference executor.
absl::StatusOr<Side> RunReference(const std::string& path) {
  if (absl::GetFlag(FLAGS_timing_only))
    return absl::InvalidArgumentError(absl::StrCat(
        "--timing-only: '", path, "' runs on the reference executor, which has no timing (compile it for a target)"));
  KILN_ASSIGN_OR_RETURN(Model model, LoadModel(path));
  const Graph& g = *model.graph;
  std::vector<std::string> names, described;
  std::vector<Tensor> initial;
  Side side;
  side.path = path;
  side.where = "reference executor";
  for (Value* in : g.inputs()) {
    names.push_back(in->name());
    described.push_back(absl::StrCat(in->name(), ": ", in->type().ToString()));
    initial.push_back(in->initial());
  }
  for (Value* out : g.outputs()) side.output_names.push_back(out->name());
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, InputsByName(names, described, initial));
  Executor exec;
  KILN_ASSIGN_OR_RETURN(side.outputs, exec.Run(g, std::move(inputs)));
  return side;
}

// An artifact on its target's device.
absl::StatusOr<Side> RunArtifact(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<target::Target> target, TargetOfArtifact(path));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<target::Executable> exe, target->Load(path));
  const target::RunFeatures features = exe->features();
  const bool timing_only = absl::GetFlag(FLAGS_timing_only);
  Side side;
  side.path = path;
  side.where = target->description().name;
  if (timing_only && !features.timing_only)
    return absl::InvalidArgumentError(absl::StrCat("--timing-only: runs of target ", side.where,
                                                   " do not take it ('", path, "' was compiled for it)"));
  std::vector<std::string> names, described;
  for (const target::TensorSpec& s : exe->inputs()) {
    names.push_back(s.name);
    described.push_back(s.ToString());
  }
  for (const target::TensorSpec& s : exe->outputs()) side.output_names.push_back(s.name);
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, InputsByName(names, described, exe->InitialValues()));
  target::RunOptions options;
  options.functional = !timing_only;
  KILN_ASSIGN_OR_RETURN(std::string plan, exe->Prepare(inputs, options));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, exe->Run(std::move(inputs), options));
  if (!timing_only) side.outputs = std::move(outputs);
  if (features.report) {
    KILN_ASSIGN_OR_RETURN(std::string tasks, exe->Report(target::ReportKind::kTasksCsv, path));
    KILN_RETURN_IF_ERROR(ParseTasks(tasks, path, &side));
  }
  return side;
}

absl::StatusOr<Side> SideOf(const std::string& path) {
  if (absl::EndsWith(path, ".csv")) return ReadReport(path);
  if (absl::EndsWith(path, ".onnx") || absl::EndsWith(path, ".kir")) return RunReference(path);
  return RunArtifact(path);
}

std::string Shorten(const std::string& name, size_t width) {
  return name.size() > width ? "..." + name.substr(name.size() - (width - 3)) : name;
}

std::string Ratio(double b, double a) { return a > 0 ? absl::StrFormat("%.2f", b / a) : "-"; }

std::string Cube(double c) { return c < 0 ? "-" : absl::StrFormat("%.1f", 100 * c); }

// Per task: cycles, their ratio, the cube's utilization and the bound, A then B.
void PrintTasks(Side& a, Side& b) {
  std::cout << absl::StrFormat("%-40s %-7s %12s %12s %6s  %-13s  %s\n", "task", "engine", "A cycles", "B cycles",
                               "B/A", "cube% A -> B", "bound A -> B");
  for (TaskRow& ra : a.tasks) {
    TaskRow* rb = nullptr;
    for (TaskRow& r : b.tasks)
      if (!r.matched && r.name == ra.name) {
        rb = &r;
        break;
      }
    if (!rb) continue;
    ra.matched = rb->matched = true;
    const std::string engine = ra.engine == rb->engine ? ra.engine : absl::StrCat(ra.engine, "/", rb->engine);
    const std::string cube = absl::StrCat(Cube(ra.cube), " -> ", Cube(rb->cube));
    const std::string bound = ra.bound == rb->bound ? ra.bound : absl::StrCat(ra.bound, " -> ", rb->bound);
    std::cout << absl::StrFormat("%-40s %-7s %12.0f %12.0f %6s  %-13s  %s\n", Shorten(ra.name, 40), engine, ra.cycles,
                                 rb->cycles, Ratio(rb->cycles, ra.cycles), cube, bound);
  }
  for (const auto& [side, label] : {std::pair<const Side*, const char*>{&a, "A"}, {&b, "B"}}) {
    int n = 0;
    double cycles = 0;
    for (const TaskRow& r : side->tasks)
      if (!r.matched) {
        if (n++ == 0) std::cout << "\nonly in " << label << ":\n";
        cycles += r.cycles;
        std::cout << absl::StrFormat("  %-38s %-7s %12.0f  %s\n", Shorten(r.name, 38), r.engine, r.cycles, r.bound);
      }
    if (n > 1) std::cout << absl::StrFormat("  %d tasks, %.0f cycles\n", n, cycles);
  }
  std::cout << absl::StrFormat("\n%-40s %-7s %12.0f %12.0f %6s\n", "total", "", a.total_cycles, b.total_cycles,
                               Ratio(b.total_cycles, a.total_cycles));
  std::cout << absl::StrFormat("%-40s %-7s %12d %12d %6s\n", "HBM bytes", "", a.total_hbm_bytes, b.total_hbm_bytes,
                               Ratio(static_cast<double>(b.total_hbm_bytes), static_cast<double>(a.total_hbm_bytes)));
  if (a.total_energy_uj >= 0 && b.total_energy_uj >= 0)
    std::cout << absl::StrFormat("%-40s %-7s %12.1f %12.1f %6s\n", "energy uJ", "", a.total_energy_uj,
                                 b.total_energy_uj, Ratio(b.total_energy_uj, a.total_energy_uj));
  std::cout << absl::StrFormat("%-40s %-7s %12d %12d\n", "tasks", "", a.tasks.size(), b.tasks.size());
}

// "[0,417]": the multi-index of flat index `i` in `dims`.
std::string IndexOf(int64_t i, const Dims& dims) {
  std::vector<int64_t> idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = dims[d] > 0 ? i % dims[d] : 0;
    i = dims[d] > 0 ? i / dims[d] : 0;
  }
  return absl::StrCat("[", absl::StrJoin(idx, ","), "]");
}

// One output of B against A's: the largest difference and where.
std::string CompareOutput(const Tensor& a, const Tensor& b) {
  const std::string ta = absl::StrCat(DTypeName(a.dtype()), "[", absl::StrJoin(a.dims(), ","), "]");
  const std::string tb = absl::StrCat(DTypeName(b.dtype()), "[", absl::StrJoin(b.dims(), ","), "]");
  if (a.dims() != b.dims()) return absl::StrCat(ta, " against ", tb, ": the shapes differ");
  const std::string type = ta == tb ? ta : absl::StrCat(ta, " against ", tb);
  if (a.dtype() == DType::kString || b.dtype() == DType::kString) {
    if (a.dtype() != b.dtype()) return absl::StrCat(type, ": the dtypes differ");
    int64_t differ = 0;
    for (int64_t i = 0; i < a.numel(); ++i) differ += a.data<std::string>()[i] != b.data<std::string>()[i];
    return absl::StrCat(type, ": ", differ, " of ", a.numel(), " strings differ");
  }
  double worst = 0, scale = 0;
  int64_t at = -1, nan = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.GetDouble(i), y = b.GetDouble(i);
    if (std::isnan(x) || std::isnan(y)) {
      nan += std::isnan(x) != std::isnan(y);
      continue;
    }
    if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
    const double d = x == y ? 0 : std::fabs(y - x);  // equal infinities differ by 0
    if (at < 0 || d > worst) {
      worst = d;
      at = i;
    }
  }
  std::string s = absl::StrCat(type, ": largest |B - A| ", absl::StrFormat("%.6g", worst));
  if (at >= 0 && worst > 0)
    absl::StrAppend(&s, " at ", IndexOf(at, a.dims()), " (A ", absl::StrFormat("%.6g", a.GetDouble(at)), ", B ",
                    absl::StrFormat("%.6g", b.GetDouble(at)), ")");
  if (scale > 0) absl::StrAppend(&s, absl::StrFormat(", %.3g%% of A's largest |value| %.6g", 100 * worst / scale, scale));
  if (nan > 0) absl::StrAppend(&s, "; NaN in one and not the other at ", nan, " elements");
  return s;
}

void PrintOutputs(const Side& a, const Side& b) {
  if (a.outputs.empty() || b.outputs.empty()) {
    if (a.where != "report" && b.where != "report") std::cout << "\noutputs: not computed (--timing-only)\n";
    return;
  }
  std::cout << "\noutputs (B against A):\n";
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    const std::string& name = a.output_names[i];
    auto it = std::find(b.output_names.begin(), b.output_names.end(), name);
    if (it == b.output_names.end()) {
      std::cout << "  " << name << ": only in A\n";
      continue;
    }
    const Tensor& tb = b.outputs[static_cast<size_t>(it - b.output_names.begin())];
    std::cout << "  " << name << ": " << CompareOutput(a.outputs[i], tb) << "\n";
  }
  for (const std::string& name : b.output_names)
    if (std::find(a.output_names.begin(), a.output_names.end(), name) == a.output_names.end())
      std::cout << "  " << name << ": only in B\n";
}

int Diff(const std::vector<std::string>& args) {
  if (args.size() != 2) return Fail("diff takes two runs: A B (tasks reports, models or artifacts)");
  const bool a_report = absl::EndsWith(args[0], ".csv"), b_report = absl::EndsWith(args[1], ".csv");
  if (a_report != b_report)
    return Fail("diff compares two tasks reports, or two models or artifacts, not one of each");
  if (a_report && (!RepeatedInputs().empty() || absl::GetFlag(FLAGS_timing_only)))
    return Fail(absl::StrCat(RepeatedInputs().empty() ? "--timing-only" : "--input",
                             ": two tasks reports are compared as they are; nothing runs"));
  auto a = SideOf(args[0]);
  if (!a.ok()) return Fail(a.status());
  auto b = SideOf(args[1]);
  if (!b.ok()) return Fail(b.status());
  std::cout << "A: " << a->path << " (" << a->where << ")\nB: " << b->path << " (" << b->where << ")\n";
  if (a->has_tasks && b->has_tasks) {
    std::cout << "\n";
    PrintTasks(*a, *b);
  } else if (a->has_tasks || b->has_tasks) {
    std::cout << "\ntasks: only " << (a->has_tasks ? "A" : "B") << "'s target reports them\n";
  }
  PrintOutputs(*a, *b);
  return 0;
}

}  // namespace

extern const Command kDiffCommand;
const Command kDiffCommand = {
    "diff", "compare two runs task by task, and their outputs",
    R"(usage: kiln diff A B [--input NAME=FILE ...] [--timing-only] [--plugin=lib.so]

Compares two runs: what a change did. A and B are either two tasks reports
(`kiln run ARTIFACT --report-tasks=FILE.csv`), compared as they are, or two
models or artifacts, which kiln runs on the same inputs (.onnx and .kir on
the host reference executor, an artifact on its target's device).

Prints the tasks both runs have, aligned by task name (the node a task
runs), in A's order: each side's cycles, B/A, the cube's utilization and
the bound, A -> B; then the tasks only one side has, the totals (cycles,
HBM bytes, energy where both report it, tasks) and their ratio. Runs of a target without reports
(the reference executor, a package run on real hardware) have no task table. For two runs,
each output of B against A's: the largest absolute difference, where, and
its share of A's largest magnitude. For example, fp16 against fp32:

  kiln compile resnet18.onnx --target=T -o r32.kiln
  kiln compile resnet18.onnx --target=T --precision=fp16 -o r16.kiln
  kiln diff r32.kiln r16.kiln --input input_0=x.npy

flags:
  --input NAME=FILE    an input of both runs (repeat for each input)
  --timing-only        time both runs without computing values (no output
                       comparison)
  --plugin=lib.so      load a target plugin first (repeatable)
)",
    Diff};

}  // namespace kiln::cli
