//===- cmd_conformance.cc - `kiln conformance` ----------------------------===//
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "graph/support/status.h"
#include "graph/verifier/verifier.h"
#include "target/api/target_registry.h"
#include "target/placement/placement.h"
#include "tools/conformance/conformance.h"
#include "tools/kiln/cli_util.h"

ABSL_FLAG(std::string, target, "",
          "Target to compile for and run on (`kiln targets`; default: the golden target it names).");
ABSL_FLAG(std::string, filter, "", "Regular expression selecting tests by 'suite/test_name'.");
ABSL_FLAG(std::string, data_dir, "/usr/share/libonnx-testdata/data", "Root of the ONNX backend test data.");
ABSL_FLAG(bool, verbose, false, "Also print the tests that pass.");
ABSL_FLAG(bool, isolate, true, "Run each test in its own process (a crash fails one test, not the run).");
ABSL_FLAG(bool, check_roundtrip, true, "Check that print -> parse -> print of each imported graph is exact.");
ABSL_FLAG(int, timeout, 300, "Seconds allowed per test when isolated.");
ABSL_FLAG(bool, optimize, false,
          "Run the optimizer (--passes, default: the default pipeline) on each model before running it.");

namespace kiln::cli {


namespace {

// One line per compiled model ("cube 3 vector 5 ", empty for a model
// without tasks or a target that does not count them), written with a
// single append so children running at the same time do not interleave.
void Tally(const std::string& path, const std::vector<std::pair<std::string, int64_t>>& tasks) {
  if (path.empty()) return;
  std::string line;
  for (const auto& [engine, n] : tasks) absl::StrAppend(&line, engine, " ", n, " ");
  line += "\n";
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) return;
  ssize_t unused = write(fd, line.data(), line.size());
  (void)unused;
  close(fd);
}

// "tasks per engine over N compiled models: cube A (in M models); ..." from
// the tally file; empty when no model had tasks.
std::string SummarizeEngineTally(const std::string& tally_path) {
  std::ifstream in(tally_path);
  std::map<std::string, int64_t> totals, models_using;
  int64_t models = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string engine;
    int64_t n;
    ++models;
    while (ss >> engine >> n) {
      totals[engine] += n;
      ++models_using[engine];
    }
  }
  if (totals.empty()) return "";
  std::string out = absl::StrCat("tasks per engine over ", models, " compiled models:");
  for (const auto& [engine, n] : totals)
    absl::StrAppend(&out, " ", engine, " ", n, " (in ", models_using[engine], " models);");
  out.pop_back();
  return out + "\n";
}

// Each model the way `kiln compile --target=NAME` and `kiln run` take it:
// the target's pipeline (or --passes), placement, the target's code
// generation into an artifact in a scratch directory, the target's runtime.
ModelRunner MakeTargetRunner(const std::string& target_name, const std::string& tally_path) {
  return [target_name, tally_path](const Model& input,
                                   std::vector<Tensor> inputs) -> absl::StatusOr<std::vector<Tensor>> {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<target::Target> t, target::TargetRegistry::Global().Create(target_name));
    const target::TargetDescription& d = t->description();
    Model m = input.Clone();
    KILN_RETURN_IF_ERROR(RunPipelineFromFlags(m, d.pipeline, /*is_opt=*/false));
    if (absl::Status s = VerifyModel(m); !s.ok())
      return absl::InternalError(absl::StrCat("the optimized graph does not verify: ", s.message()));
    target::CompileOptions options;
    options.settings = TargetSettings();
    options.host_ops_library = HostOpsLibraryPath();
    if (absl::Status s = target::PlaceGraph(*m.graph, *t, options).status(); !s.ok())
      return absl::Status(s.code(), absl::StrCat("compile: ", s.message()));
    char scratch[] = "/tmp/kiln-conformance-model-XXXXXX";
    if (!mkdtemp(scratch)) return absl::InternalError("cannot create a scratch directory");
    const std::filesystem::path artifact = std::filesystem::path(scratch) / ("model" + d.artifact_suffix);
    absl::StatusOr<std::vector<Tensor>> outputs = [&]() -> absl::StatusOr<std::vector<Tensor>> {
      if (absl::Status s = t->Compile(m, options, artifact.string()); !s.ok())
        return absl::Status(s.code(), absl::StrCat("compile: ", s.message()));
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<target::Executable> exe, t->Load(artifact.string()));
      Tally(tally_path, exe->TasksPerEngine());
      return exe->Run(std::move(inputs), target::RunOptions());
    }();
    std::error_code ec;
    std::filesystem::remove_all(scratch, ec);
    return outputs;
  };
}

}  // namespace

extern const Command kConformanceCommand;
const Command kConformanceCommand = {
    "conformance", "run the ONNX backend test data on a target",
    R"(usage: kiln conformance [--target=NAME] [--filter=REGEX] [flags]

Runs every model of the ONNX backend test data (node, pytorch-converted,
pytorch-operator, simple) on the target, compares each output with the
expected one (rtol 1e-3, atol 1e-7), prints one line per failing or skipped
test with the reason, and as its last line `N passed, N failed, N skipped`.
Exits non-zero when a test fails.

flags:
  --target=NAME        any registered target (`kiln targets`, --plugin):
                       each model through the target's pipeline, its code
                       generation into an artifact and its runtime, as
                       `kiln compile` and `kiln run` take it (the tasks per
                       engine, where the target reports them, are summed
                       up before the summary line); default reference
  --SETTING=VALUE      a setting of the target, as for `kiln compile`
  --plugin=lib.so      load a target plugin first (repeatable)
  --filter=REGEX       only tests whose 'suite/test_name' matches
  --data-dir=DIR       test data root; default /usr/share/libonnx-testdata/data
  --verbose            also print passing tests
  --noisolate          run tests in-process (faster, but a crash ends the run)
  --nocheck-roundtrip  skip the .kir print/parse/print check of each model
  --timeout=SECONDS    per-test limit when isolated; default 300
  --optimize           run the optimizer on each imported model first (the
                       pipeline given by --passes, default: default), then
                       verify the optimized graph
  --passes, --verify-each, --stats, --time-passes, --print-after,
  --print-after-all, --fold-max-elements: as for `kiln opt` (with
                       --optimize, and for a --target, on its pipeline)
)",
    [](const std::vector<std::string>& args) -> int {
      if (!args.empty()) return Fail("conformance takes no positional arguments");
      if (!absl::GetFlag(FLAGS_isolate) && FlagGiven("timeout"))
        return Fail("--timeout limits isolated tests; --noisolate runs them in-process, unlimited");
      const std::string target_name = TargetFromFlags();
      auto target = target::TargetRegistry::Global().Create(target_name);
      if (!target.ok()) return Fail(target.status());
      target::CompileOptions given;
      given.settings = TargetSettings();
      if (absl::Status s = target::CheckSettings(given, (*target)->description()); !s.ok()) return Fail(s);
      // The pass flags, checked once against the pipeline each model runs.
      if (auto p = PipelineFromFlags((*target)->description().pipeline, /*is_opt=*/false); !p.ok()) return Fail(p.status());
      if (absl::GetFlag(FLAGS_optimize))
        if (auto p = PipelineFromFlags("", /*is_opt=*/false); !p.ok()) return Fail(p.status());
      if (absl::Status s = (*target)->CanRun(); !s.ok())
        return Fail(absl::StrCat("target ", target_name, " cannot run here: ", s.message()));
      char tally[] = "/tmp/kiln-conformance-XXXXXX";
      int fd = mkstemp(tally);
      if (fd < 0) return Fail("cannot create a temporary file for the engine tally");
      close(fd);
      const std::string tally_path = tally;
      ModelRunner runner = MakeTargetRunner(target_name, tally_path);
      ConformanceOptions options;
      options.before_summary = [&tally_path] { return SummarizeEngineTally(tally_path); };
      options.data_dir = absl::GetFlag(FLAGS_data_dir);
      options.filter = absl::GetFlag(FLAGS_filter);
      options.verbose = absl::GetFlag(FLAGS_verbose);
      options.isolate = absl::GetFlag(FLAGS_isolate);
      options.timeout_seconds = absl::GetFlag(FLAGS_timeout);
      options.progress = isatty(STDERR_FILENO);
      if (absl::GetFlag(FLAGS_optimize)) {
        options.transform_model = [](Model& m) -> absl::Status {
          absl::Status s = RunPipelineFromFlags(m, "", /*is_opt=*/false);
          if (!s.ok()) return absl::InternalError(absl::StrCat("optimize: ", s.message()));
          s = VerifyModel(m);
          if (!s.ok()) return absl::InternalError(absl::StrCat("optimize: the optimized graph does not verify: ",
                                                               s.message()));
          return absl::OkStatus();
        };
      }
      if (absl::GetFlag(FLAGS_check_roundtrip)) {
        options.extra_model_check = [](const Model& m) -> absl::Status {
          PrintOptions po;
          po.inline_all_constants = true;
          std::string first = PrintModel(m, po);
          auto parsed = ParseModel(first, "<printed>");
          if (!parsed.ok()) return absl::InternalError(absl::StrCat("round trip: the printed graph does not parse: ",
                                                                    parsed.status().message()));
          std::string second = PrintModel(*parsed, po);
          if (first != second) return absl::InternalError("round trip: print -> parse -> print differs");
          return absl::OkStatus();
        };
      }
      auto summary = RunConformance(options, runner, std::cout);
      unlink(tally_path.c_str());
      if (!summary.ok()) return Fail(summary.status());
      return summary->failed == 0 ? 0 : 1;
    },
    /*target_settings=*/true};

}  // namespace kiln::cli
