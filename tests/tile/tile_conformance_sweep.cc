//===- tile_conformance_sweep.cc - Every lowerable node of the ONNX test models, interpreted ---===//
//
// For every model of the ONNX backend test data (libonnx-testdata: node,
// pytorch-converted, pytorch-operator, simple; the suites `kiln
// conformance` runs), as imported and after the cuda target's pipeline
// (fused groups; where the pipeline succeeds): the graph runs node by node on the reference
// executor with its first test data set's inputs, and every node that
// LowerNode takes, lowered with the cuda and the npusim figures (f32, and
// f16 matrix inputs on cuda), runs on the tile IR interpreter with the
// node's actual inputs and is compared with the node's reference outputs
// (tests/tile/tile_check.h).
//
// Each model runs in a forked child, so a crash in one is reported as that
// model's failure. The test asserts that no kernel disagrees except the
// known lowering bugs listed below (each of which must still disagree), and
// prints how many kernels it checked. ctest: tile.interpreter.conformance.
//
//===----------------------------------------------------------------------===//
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/tensor_proto.h"
#include "target/builtin_targets.h"
#include "graph/passes/pass_manager.h"
#include "tests/tile/tile_check.h"
#include "tools/conformance/conformance.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// Known lowering bugs: "suite/test: value" -> why. Each must still disagree.
const std::map<std::string, std::string>& KnownBugs() {
  static const auto* known = [] {
    auto* m = new std::map<std::string, std::string>;
    return m;
  }();
  return *known;
}

// What one model gave: kernels checked per op, and the disagreements.
struct ModelResult {
  bool ran = false;
  std::string why_not;
  int checked = 0;
  std::map<std::string, int> ops;
  std::vector<std::pair<std::string, std::string>> mismatches;  // value, text
};

ModelResult CheckModel(const fs::path& dir, const std::vector<tile_check::Config>& configs) {
  ModelResult r;
  auto model = onnx_import::ImportFile((dir / "model.onnx").string());
  if (!model.ok()) {
    r.why_not = absl::StrCat("import: ", model.status().message());
    return r;
  }
  std::vector<Tensor> inputs;
  for (const std::string& f : NumberedFiles(dir / "test_data_set_0", "input")) {
    auto t = onnx_import::ReadTensorProtoFile(f);
    if (!t.ok()) {
      r.why_not = absl::StrCat("input: ", t.status().message());
      return r;
    }
    inputs.push_back(*std::move(t));
  }
  const Graph& g = *model->graph;
  if (inputs.size() != g.inputs().size()) {
    r.why_not = absl::StrCat(inputs.size(), " input files for ", g.inputs().size(), " graph inputs");
    return r;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!g.inputs()[i]->type().is_tensor() || inputs[i].dtype() != g.inputs()[i]->type().dtype()) {
      r.why_not = "an input's dtype differs from the graph's";
      return r;
    }
  }
  // The raw graph, then the graph after the cuda target's pipeline (fused groups).
  Model optimized = model->Clone();
  auto t = target::CreateBuiltinTarget("cuda");
  PassManager pm;
  const bool have_optimized = t.ok() && pm.AddPipeline((*t)->description().pipeline).ok() && pm.Run(optimized).ok();
  for (const Graph* graph : std::vector<const Graph*>{&g, have_optimized ? optimized.graph.get() : nullptr}) {
    if (!graph) continue;
    auto checked = tile_check::CheckGraph(*graph, inputs, configs);
    if (!checked.ok()) {
      if (graph == &g) {
        r.why_not = absl::StrCat("reference: ", checked.status().message());
        return r;
      }
      continue;
    }
    r.ran = true;
    r.checked += checked->checked;
    for (const auto& [op, n] : checked->lowered_ops) r.ops[op] += n;
    const std::string where = graph == &g ? "" : " (optimized)";
    for (const auto& m : checked->mismatches) r.mismatches.emplace_back(m.value + where, m.text);
  }
  return r;
}

// One line per field; a field's newlines become \x01.
std::string Encode(const ModelResult& r) {
  auto esc = [](std::string s) {
    for (char& c : s)
      if (c == '\n') c = '\x01';
    return s;
  };
  std::string out = absl::StrCat(r.ran ? 1 : 0, "\n", esc(r.why_not), "\n", r.checked, "\n", r.ops.size(), "\n");
  for (const auto& [op, n] : r.ops) absl::StrAppend(&out, op, "\n", n, "\n");
  absl::StrAppend(&out, r.mismatches.size(), "\n");
  for (const auto& [v, t] : r.mismatches) absl::StrAppend(&out, esc(v), "\n", esc(t), "\n");
  return out;
}

ModelResult Decode(const std::string& text) {
  std::vector<std::string> l = absl::StrSplit(text, '\n');
  ModelResult r;
  size_t i = 0;
  auto next = [&]() -> std::string {
    std::string s = i < l.size() ? l[i++] : "";
    for (char& c : s)
      if (c == '\x01') c = '\n';
    return s;
  };
  auto num = [&]() {
    int n = 0;
    return absl::SimpleAtoi(next(), &n) ? n : 0;
  };
  r.ran = next() == "1";
  r.why_not = next();
  r.checked = num();
  for (int n = num(); n > 0; --n) {
    std::string op = next();
    r.ops[op] = num();
  }
  for (int n = num(); n > 0; --n) {
    std::string v = next();
    r.mismatches.emplace_back(v, next());
  }
  return r;
}

// CheckModel in a forked child: a crash or a hang is that model's failure.
ModelResult CheckIsolated(const fs::path& dir, const std::vector<tile_check::Config>& configs) {
  absl::StatusOr<std::string> msg = RunInChild([&] { return Encode(CheckModel(dir, configs)); }, 120);
  if (!msg.ok()) {
    ModelResult r;
    r.ran = true;
    r.mismatches.emplace_back("?", absl::StrCat("the check failed: ", msg.status().message()));
    return r;
  }
  return Decode(*msg);
}

TEST(TileInterpreterSweep, ConformanceModels) {
  const ConformanceOptions suites;  // the data and suites `kiln conformance` runs
  const fs::path data = suites.data_dir;
  ASSERT_TRUE(fs::is_directory(data)) << data << " is missing: scripts/setup installs libonnx-testdata";
  const std::vector<tile_check::Config> configs = {
      {"cuda f32", tile_check::FiguresOfTarget("cuda"), DType::kF32, 1e-4},
      {"npusim f32", tile_check::FiguresOfTarget("npusim"), DType::kF32, 1e-4},
      {"cuda f16", tile_check::FiguresOfTarget("cuda"), DType::kF16, 1e-2}};
  std::vector<std::pair<std::string, fs::path>> models;
  for (const std::string& suite : suites.suites) {
    if (!fs::is_directory(data / suite)) continue;
    for (const auto& e : fs::directory_iterator(data / suite))
      if (fs::exists(e.path() / "model.onnx") && fs::is_directory(e.path() / "test_data_set_0"))
        models.emplace_back(absl::StrCat(suite, "/", e.path().filename().string()), e.path());
  }
  std::sort(models.begin(), models.end());
  const auto start = std::chrono::steady_clock::now();
  int ran = 0, with_kernels = 0, checked = 0;
  std::map<std::string, int> ops;
  std::set<std::string> failing;
  for (const auto& [name, dir] : models) {
    ModelResult r = CheckIsolated(dir, configs);
    if (!r.ran) continue;
    ++ran;
    with_kernels += r.checked > 0;
    checked += r.checked;
    for (const auto& [op, n] : r.ops) ops[op] += n;
    for (const auto& [value, text] : r.mismatches) {
      const std::string key = absl::StrCat(name, ": ", value);
      if (!failing.insert(key).second) continue;
      if (!KnownBugs().count(key)) ADD_FAILURE() << key << "\n" << text;
    }
  }
  for (const auto& [key, why] : KnownBugs())
    EXPECT_TRUE(failing.count(key)) << key << " agrees now; remove it from KnownBugs (" << why << ")";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << models.size() << " models, " << ran << " run, " << with_kernels << " with tile kernels; " << checked
            << " kernels checked (cuda and npusim figures, f32; cuda, f16 matrix inputs), " << failing.size() << " disagreeing ("
            << KnownBugs().size() << " known), " << static_cast<int>(seconds) << " s\n";
  for (const auto& [op, n] : ops) std::cout << "  " << op << ": " << n << "\n";
  EXPECT_GT(checked, 500) << "too few kernels checked: the sweep lost its models";
}

}  // namespace
}  // namespace kiln
