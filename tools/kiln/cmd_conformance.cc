//===- cmd_conformance.cc - `kiln conformance` ----------------------------===//
#include <unistd.h>

#include <iostream>

#include "absl/flags/flag.h"
#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "graph/verifier/verifier.h"
#include "tools/conformance/conformance.h"
#include "tools/kiln/cli_util.h"
#include "tools/kiln/conformance_npusim.h"

ABSL_FLAG(std::string, target, "reference", "Target to run on: reference, npusim or cuda.");
ABSL_FLAG(std::string, filter, "", "Regular expression selecting tests by 'suite/test_name'.");
ABSL_FLAG(std::string, data_dir, "/usr/share/libonnx-testdata/data", "Root of the ONNX backend test data.");
ABSL_FLAG(bool, verbose, false, "Also print the tests that pass.");
ABSL_FLAG(bool, isolate, true, "Run each test in its own process (a crash fails one test, not the run).");
ABSL_FLAG(bool, check_roundtrip, true, "Check that print -> parse -> print of each imported graph is exact.");
ABSL_FLAG(int, timeout, 300, "Seconds allowed per test when isolated.");
ABSL_FLAG(bool, optimize, false,
          "Run the optimizer (--passes, default: the default pipeline) on each model before running it.");

namespace kiln::cli {

absl::Status RunPipelineFromFlags(Model& model, const std::string& target_pipeline);  // cmd_opt.cc

extern const Command kConformanceCommand;
const Command kConformanceCommand = {
    "conformance", "run the ONNX backend test data on a target",
    R"(usage: kiln conformance [--target=reference|npusim|cuda] [--filter=REGEX] [flags]

Runs every model of the ONNX backend test data (node, pytorch-converted,
pytorch-operator, simple) on the target, compares each output with the
expected one (rtol 1e-3, atol 1e-7), prints one line per failing or skipped
test with the reason, and as its last line `N passed, N failed, N skipped`.
Exits non-zero when a test fails.

flags:
  --target=NAME        reference (the host reference executor) or npusim
                       (the default pipeline, npusim code generation, the
                       SystemC model; the tasks per engine are summed up
                       before the summary line); default reference
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
                       --optimize, and on npusim)
)",
    [](const std::vector<std::string>& args) -> int {
      if (!args.empty()) return Fail("conformance takes no positional arguments");
      std::string target = absl::GetFlag(FLAGS_target);
      ModelRunner runner;
      std::string tally_path;
      if (target == "reference") {
        runner = [](const Model& m, std::vector<Tensor> inputs) {
          Executor exec;
          return exec.Run(*m.graph, std::move(inputs));
        };
      } else if (target == "npusim") {
        char tally[] = "/tmp/kiln-conformance-XXXXXX";
        int fd = mkstemp(tally);
        if (fd < 0) return Fail("cannot create a temporary file for the engine tally");
        close(fd);
        tally_path = tally;
        runner = MakeNpusimRunner(tally_path);
      } else {
        return Fail("target '" + target + "' is not available in this build (available: reference, npusim)");
      }
      ConformanceOptions options;
      if (!tally_path.empty())
        options.before_summary = [&tally_path] { return SummarizeEngineTally(tally_path) + "\n"; };
      options.data_dir = absl::GetFlag(FLAGS_data_dir);
      options.filter = absl::GetFlag(FLAGS_filter);
      options.verbose = absl::GetFlag(FLAGS_verbose);
      options.isolate = absl::GetFlag(FLAGS_isolate);
      options.timeout_seconds = absl::GetFlag(FLAGS_timeout);
      options.progress = isatty(STDERR_FILENO);
      if (absl::GetFlag(FLAGS_optimize)) {
        options.transform_model = [](Model& m) -> absl::Status {
          absl::Status s = RunPipelineFromFlags(m, "");
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
      if (!tally_path.empty()) unlink(tally_path.c_str());
      if (!summary.ok()) return Fail(summary.status());
      return summary->failed == 0 ? 0 : 1;
    }};

}  // namespace kiln::cli
