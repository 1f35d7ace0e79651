//===- conformance_npusim.cc - `kiln conformance --target=npusim` ---------===//
#include "tools/kiln/conformance_npusim.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "graph/verifier/verifier.h"
#include "runtime/loaded_model.h"
#include "target/api/target_registry.h"
#include "target/npusim/npusim_compile.h"

namespace kiln::cli {

absl::Status RunPipelineFromFlags(Model& model, const std::string& target_pipeline);

namespace {

// One line per compiled model, written with a single append so children
// running at the same time do not interleave.
void Tally(const std::string& path, const artifact::Artifact& a) {
  if (path.empty()) return;
  std::map<std::string, int> counts;
  for (const artifact::Task& t : a.npusim().tasks()) ++counts[t.engine()];
  std::string line;
  for (const auto& [engine, n] : counts) absl::StrAppend(&line, engine, " ", n, " ");
  line += "\n";
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) return;
  ssize_t unused = write(fd, line.data(), line.size());
  (void)unused;
  close(fd);
}

}  // namespace

ModelRunner MakeNpusimRunner(const std::string& tally_path) {
  return [tally_path](const Model& input, std::vector<Tensor> inputs) -> absl::StatusOr<std::vector<Tensor>> {
    Model m = input.Clone();
    auto target = target::TargetRegistry::Global().Create("npusim");
    if (!target.ok()) return target.status();
    if (absl::Status s = RunPipelineFromFlags(m, (*target)->description().pipeline); !s.ok()) return s;
    if (absl::Status s = VerifyModel(m); !s.ok())
      return absl::InternalError(absl::StrCat("the optimized graph does not verify: ", s.message()));
    auto a = target::CompileForNpusim(m, **target, {});
    if (!a.ok()) return absl::Status(a.status().code(), absl::StrCat("compile: ", a.status().message()));
    Tally(tally_path, *a);
    auto loaded = runtime::LoadedModel::FromArtifact(*std::move(a), "model.kiln");
    if (!loaded.ok()) return loaded.status();
    return (*loaded)->Run(std::move(inputs));
  };
}

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
  std::string out = absl::StrCat("tasks per engine over ", models, " compiled models:");
  for (const auto& [engine, n] : totals)
    absl::StrAppend(&out, " ", engine, " ", n, " (in ", models_using[engine], " models);");
  if (!totals.empty()) out.pop_back();
  return out;
}

}  // namespace kiln::cli
