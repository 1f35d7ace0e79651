//===- cmd_sweep.cc - `kiln sweep`: a design-space sweep -------------------===//
//
// What if the chip had X: a model compiled and simulated on every machine of
// a grid (sweep_grid.h), each point a plain `kiln compile` and `kiln run
// --timing-only --report-tasks` command line. The lines go to OUT/jobs.txt;
// kiln runs them itself, several at a time, or leaves them to an existing
// scheduler (GNU parallel, a Slurm array job) with --job-list, and `kiln
// sweep --collect OUT` gathers what the points wrote into OUT/sweep.csv and
// OUT/sweep.svg (sweep_results.h).
//
//===----------------------------------------------------------------------===//
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/text_format.h"
#include "graph/io/npy.h"
#include "graph/support/read_file.h"
#include "sim/machine/machine.h"
#include "target/api/target_registry.h"
#include "tools/driver/compile_model.h"
#include "tools/kiln/cli_util.h"
#include "tools/kiln/progress_line.h"
#include "tools/kiln/sweep_grid.h"
#include "tools/kiln/sweep_results.h"

ABSL_DECLARE_FLAG(std::string, target);
ABSL_DECLARE_FLAG(std::string, machine);
ABSL_DECLARE_FLAG(std::string, precision);
ABSL_DECLARE_FLAG(std::string, o);
ABSL_FLAG(int, jobs, 0, "sweep: points run at once (0: one per core).");
ABSL_FLAG(bool, job_list, false, "sweep: write the points' commands and stop (for GNU parallel or Slurm).");
ABSL_FLAG(std::string, collect, "", "sweep: gather the results a sweep's points wrote under DIR.");
ABSL_FLAG(int, max_points, 1000, "sweep: the most points a grid may have.");

extern char** environ;

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string PointDir(const std::string& out, size_t k) { return (fs::path(out) / absl::StrCat("p", k)).string(); }

// Runs each line with /bin/sh, up to `jobs` at once, with a progress line;
// returns how many failed.
int RunJobs(const std::vector<std::string>& lines, int jobs) {
  ProgressLine progress;
  std::map<pid_t, size_t> running;
  size_t next = 0, done = 0;
  int failed = 0;
  while (done < lines.size()) {
    while (next < lines.size() && static_cast<int>(running.size()) < jobs) {
      const std::string& line = lines[next];
      char sh[] = "/bin/sh", c[] = "-c";
      std::vector<char*> argv = {sh, c, const_cast<char*>(line.c_str()), nullptr};
      pid_t pid = 0;
      if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ) != 0) {
        ++failed;
        ++done;
      } else {
        running[pid] = next;
      }
      ++next;
    }
    if (running.empty()) continue;
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) break;
    if (running.erase(pid) == 0) continue;
    ++done;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    progress.Show(absl::StrFormat("sweep: %d of %d points done", done, lines.size()));
  }
  progress.Clear();
  return failed;
}

// OUT/points.csv: "point" and the fields varied, then a row per point.
absl::Status WritePoints(const std::string& out, const std::vector<SweepAxis>& axes,
                         const std::vector<SweepPointSpec>& points) {
  std::string csv = "point";
  for (const SweepAxis& a : axes) absl::StrAppend(&csv, ",", a.field);
  csv += "\n";
  for (size_t k = 0; k < points.size(); ++k) absl::StrAppend(&csv, "p", k, ",", absl::StrJoin(points[k].values, ","), "\n");
  return WriteFile((fs::path(out) / "points.csv").string(), csv);
}

int Collect(const std::string& out) {
  auto points = ReadFileBytes((fs::path(out) / "points.csv").string());
  if (!points.ok()) return Fail(absl::StrCat(out, " holds no sweep (no points.csv): ", points.status().message()));
  std::vector<std::string> rows = absl::StrSplit(*points, '\n', absl::SkipEmpty());
  if (rows.empty()) return Fail(absl::StrCat(out, "/points.csv is empty"));
  std::vector<std::string> fields = absl::StrSplit(rows[0], ',');
  if (fields.empty() || fields[0] != "point") return Fail(absl::StrCat(out, "/points.csv is not a sweep's"));
  fields.erase(fields.begin());
  std::vector<SweepResult> results;
  int failed = 0;
  for (size_t k = 1; k < rows.size(); ++k) {
    std::vector<std::string> row = absl::StrSplit(rows[k], ',');
    if (row.size() != fields.size() + 1) return Fail(absl::StrCat(out, "/points.csv:", k + 1, ": a malformed row"));
    const std::string dir = (fs::path(out) / row[0]).string();
    SweepResult r;
    auto machine = sim::LoadMachine((fs::path(dir) / "machine.textproto").string());
    auto tasks = ReadFileBytes((fs::path(dir) / "tasks.csv").string());
    if (machine.ok() && tasks.ok()) {
      auto read = ReadSweepResult(*tasks, (fs::path(dir) / "tasks.csv").string(), *machine);
      if (read.ok()) r = *std::move(read);
      else r.error = std::string(read.status().message());
    } else if (!machine.ok()) {
      r.error = std::string(machine.status().message());
    } else {
      auto log = ReadFileBytes((fs::path(dir) / "log.txt").string());
      std::string last = "it wrote no result";
      if (log.ok())
        for (absl::string_view l : absl::StrSplit(*log, '\n', absl::SkipEmpty())) last = std::string(l);
      r.error = last;
    }
    r.values.assign(row.begin() + 1, row.end());
    failed += !r.error.empty();
    results.push_back(std::move(r));
  }
  MarkPareto(&results);
  const std::string csv_path = (fs::path(out) / "sweep.csv").string(), svg_path = (fs::path(out) / "sweep.svg").string();
  if (absl::Status s = WriteFile(csv_path, SweepCsv(fields, results)); !s.ok()) return Fail(s);
  if (absl::Status s = WriteFile(svg_path, SweepSvg(absl::StrCat("kiln sweep: ", absl::StrJoin(fields, " x ")), fields,
                                                    results));
      !s.ok())
    return Fail(s);
  std::cout << absl::StrFormat("%-40s %12s %12s %12s %9s %7s  %s\n", "point", "latency us", "energy uJ", "power W",
                               "cube%", "pareto", "bound");
  for (const SweepResult& r : results) {
    std::string label;
    for (size_t i = 0; i < fields.size(); ++i) absl::StrAppend(&label, i ? " " : "", fields[i], "=", r.values[i]);
    if (!r.error.empty()) {
      std::cout << absl::StrFormat("%-40s failed: %s\n", label, r.error);
      continue;
    }
    std::cout << absl::StrFormat("%-40s %12.1f %12.1f %12.1f %8.1f%% %7s  %s\n", label, r.latency_us, r.energy_uj,
                                 r.watts, 100 * r.cube_utilization, r.pareto ? "*" : "", r.bound);
  }
  std::cerr << "kiln: wrote " << csv_path << " and " << svg_path << "\n";
  if (failed > 0) return Fail(absl::StrCat(failed, " of ", results.size(), " points failed (their log.txt says why)"));
  return 0;
}

int Sweep(const std::vector<std::string>& args) {
  const std::string collect = absl::GetFlag(FLAGS_collect);
  if (!collect.empty()) {
    bool more = !args.empty() || !RepeatedSweepSets().empty() || !RepeatedInputs().empty();
    for (const char* f : {"target", "machine", "precision", "o", "jobs", "job-list", "max-points"}) more |= FlagGiven(f);
    if (more) return Fail("--collect DIR gathers a sweep already run: give it alone");
    return Collect(collect);
  }
  if (absl::GetFlag(FLAGS_job_list) && FlagGiven("jobs"))
    return Fail("--jobs runs the points, and --job-list only writes them: give one");
  if (args.size() != 1) return Fail("usage: kiln sweep MODEL --target=T --set FIELD=V1,V2 ... (see kiln sweep --help)");
  const std::string target_name = TargetFromFlags();
  const auto* entry = target::TargetRegistry::Global().Find(target_name);
  if (!entry) return Fail(absl::StrCat("unknown target '", target_name, "' (see `kiln targets`)"));
  bool has_machine = false;
  const std::unique_ptr<target::Target> t = entry->factory();
  for (const auto& s : t->description().settings) has_machine |= s.name == "machine";
  if (!has_machine)
    return Fail(absl::StrCat("target ", target_name, " has no machine setting to sweep (--target names one that has)"));
  if (RepeatedSweepSets().empty()) return Fail("kiln sweep needs at least one --set FIELD=V1,V2,...");
  std::vector<SweepAxis> axes;
  for (const std::string& spec : RepeatedSweepSets()) {
    auto axis = ParseSweepAxis(spec);
    if (!axis.ok()) return Fail(axis.status());
    axes.push_back(*std::move(axis));
  }
  sim::Machine base = sim::DefaultMachine();
  if (const std::string m = absl::GetFlag(FLAGS_machine); !m.empty()) {
    auto loaded = sim::LoadMachine(m);
    if (!loaded.ok()) return Fail(loaded.status());
    base = *std::move(loaded);
  }
  auto points = SweepGrid(base, axes, absl::GetFlag(FLAGS_max_points));
  if (!points.ok()) return Fail(points.status());
  const int jobs = absl::GetFlag(FLAGS_jobs);
  if (jobs < 0 || jobs > 1024) return Fail("--jobs must be between 0 (one per core) and 1024");

  const std::string model = fs::absolute(args[0]).string();
  auto graph = driver::LoadModel(model);
  if (!graph.ok()) return Fail(graph.status());
  std::string out = absl::GetFlag(FLAGS_o).empty() ? "sweep" : absl::GetFlag(FLAGS_o);
  std::error_code ec;
  fs::create_directories(fs::path(out) / "inputs", ec);
  if (ec) return Fail(absl::StrCat("cannot create '", out, "': ", ec.message()));
  out = fs::absolute(out).string();

  // The inputs: those given, and zeros for the rest (a timing-only run
  // reads no value).
  std::vector<std::string> inputs = RepeatedInputs();
  for (const Value* v : graph->graph->inputs()) {
    bool given = false;
    for (const std::string& in : inputs) given |= absl::StartsWith(in, v->name() + "=");
    if (given || v->initial().defined()) continue;
    if (!v->type().is_tensor() || !v->type().shape().is_static())
      return Fail(absl::StrCat("input ", v->name(), " has no static shape: give it with --input ", v->name(), "=FILE"));
    const std::string file = (fs::path(out) / "inputs" / (v->name() + ".npy")).string();
    if (absl::Status s = WriteNpy(file, Tensor(v->type().dtype(), v->type().shape().StaticDims())); !s.ok())
      return Fail(s);
    inputs.push_back(absl::StrCat(v->name(), "=", file));
  }

  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return Fail("cannot find the kiln binary (/proc/self/exe)");
  const std::string kiln(self, static_cast<size_t>(n));
  std::string precision;
  if (FlagGiven("precision")) precision = " --precision=" + Quote(absl::GetFlag(FLAGS_precision));
  std::vector<std::string> lines;
  for (size_t k = 0; k < points->size(); ++k) {
    const std::string dir = PointDir(out, k);
    fs::create_directories(dir, ec);
    if (ec) return Fail(absl::StrCat("cannot create '", dir, "': ", ec.message()));
    sim::Machine m = (*points)[k].machine;
    m.set_name(absl::StrCat(base.name(), " ", absl::StrJoin((*points)[k].values, " ")));
    std::string text;
    google::protobuf::TextFormat::PrintToString(m, &text);
    const std::string machine_file = (fs::path(dir) / "machine.textproto").string();
    if (absl::Status s = WriteFile(machine_file, text); !s.ok()) return Fail(s);
    const std::string artifact = (fs::path(dir) / "model.kiln").string(), log = (fs::path(dir) / "log.txt").string();
    std::string line = absl::StrCat(Quote(kiln), " compile ", Quote(model), " --target=", Quote(target_name),
                                    " --machine=", Quote(machine_file), precision, " -o ", Quote(artifact), " > ",
                                    Quote(log), " 2>&1 && ", Quote(kiln), " run ", Quote(artifact),
                                    " --timing-only --report-tasks=", Quote((fs::path(dir) / "tasks.csv").string()));
    for (const std::string& in : inputs) absl::StrAppend(&line, " --input=", Quote(in));
    absl::StrAppend(&line, " >> ", Quote(log), " 2>&1");
    lines.push_back(std::move(line));
  }
  if (absl::Status s = WritePoints(out, axes, *points); !s.ok()) return Fail(s);
  const std::string jobs_file = (fs::path(out) / "jobs.txt").string();
  if (absl::Status s = WriteFile(jobs_file, absl::StrJoin(lines, "\n") + "\n"); !s.ok()) return Fail(s);
  if (absl::GetFlag(FLAGS_job_list)) {
    std::cout << "wrote " << jobs_file << ": " << lines.size() << " points, one command per line\n"
              << "run them with `parallel < " << jobs_file << "` or a Slurm array job (line "
              << "$SLURM_ARRAY_TASK_ID + 1), then `kiln sweep --collect " << out << "`\n";
    return 0;
  }
  const int workers = jobs > 0 ? jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  RunJobs(lines, workers);
  return Collect(out);
}

}  // namespace

extern const Command kSweepCommand;
const Command kSweepCommand = {
    "sweep", "compile and simulate a model on every machine of a grid",
    R"(usage: kiln sweep MODEL --target=T --set FIELD=V1,V2,... [--set ...] [--machine=BASE]
                  [--precision=P] [--input NAME=FILE ...] [-o DIR] [--jobs=N] [--job-list]
       kiln sweep --collect DIR

What if the chip had X: compiles MODEL (.onnx or .kir) for target T on
every machine of the grid the --set flags span (each a machine field,
sim/machine/machine.proto, and its values; every combination, the last
--set varying fastest), runs each timing-only, and writes DIR/sweep.csv (one
row per point: the fields varied, cycles, latency, inferences per second,
energy, average power, cube utilization, the L2's hit rate, the bound of
its longest task, whether it is on the Pareto frontier of latency and
energy) and
DIR/sweep.svg (energy against latency, the frontier marked). The target
must take a machine file (a --machine setting). Inputs not given are zeros
(a timing-only run reads no value).

Each point is two plain kiln commands, one line of DIR/jobs.txt, writing
under DIR/pK/ (machine.textproto, model.kiln, tasks.csv, log.txt). kiln runs
them --jobs at a time with a progress line on a terminal; with --job-list
it writes them and stops, for GNU parallel (`parallel < DIR/jobs.txt`) or a
Slurm array job, and `kiln sweep --collect DIR` gathers the results. A point
that fails is a row with its error; the sweep then exits 1.

Example:
  kiln sweep model.onnx --target=T --set core.l1_kib=512,1024 --set chip.ai_cores=16,32 -o sw

flags:
  --target=T           the target (one with a machine setting)
  --set FIELD=V1,V2    an axis of the grid (repeat for each)
  --machine=FILE       the base machine; default the target's own
  --precision=P        passed to each compile (fp32, fp16, bf16, mixed)
  --input NAME=FILE    an input (repeat for each); zeros for those not given
  -o DIR               where the points and the results go; default sweep
  --jobs=N             points run at once (default: one per core)
  --job-list           write DIR/jobs.txt and stop
  --collect DIR        gather the results of a sweep's points
  --max-points=N       the most points a grid may have (default 1000)
)",
    Sweep,
};

}  // namespace kiln::cli
