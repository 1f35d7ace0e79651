//===- npusim_test_util.h - Helpers of the npusim end-to-end tests -*- C++ -*-===//
//
// Graphs compiled for npusim and run on the SystemC model through the
// runtime, against the reference executor (npusim_compile_test,
// npusim_precision_test, npusim_fusion_test): compiling, running and
// comparing, and reading what an artifact holds (its graph, plans, layouts).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "graph/ops/shape_inference.h"
#include "graph/support/status.h"
#include "graph/verifier/verifier.h"
#include "runtime/loaded_model.h"
#include "target/builtin_targets.h"
#include "target/npusim/npusim_compile.h"
#include "target/npusim/npusim_executable.h"
#include "tests/target/target_test_util.h"

namespace kiln::npusim_test {

using testing_util::Random;

inline Type F32(std::vector<int64_t> dims) { return Type::Tensor(DType::kF32, Shape::Static(dims)); }

inline std::unique_ptr<target::Target> Npusim() {
  auto t = target::CreateBuiltinTarget("npusim");
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

inline absl::StatusOr<artifact::Artifact> Compile(const Model& m) {
  auto t = Npusim();
  return target::CompileForNpusim(m, *t, {});
}

// How many tasks of `a` have `text` in their plan.
inline int TasksPlanning(const artifact::Artifact& a, absl::string_view text) {
  int n = 0;
  for (const auto& task : a.npusim().tasks()) n += absl::StrContains(task.plan(), text);
  return n;
}

// No kernel of a run beats the machine's roofs (sim/model/roofline.h): its
// units' peak-rate cycles and its HBM bytes fit in the cycles it took.
inline void ExpectUnderRoofs(const runtime::LoadedModel& loaded) {
  const target::NpusimExecutable* npu = target::NpusimOf(loaded);
  if (!npu) return;
  for (const sim::RooflinePoint& p : npu->Roofline()) {
    EXPECT_LE(p.efficiency(), 1.0) << p.name << ": " << p.cycles << " cycles, bounds " << p.compute_bound() << " / "
                                   << p.memory_bound;
    EXPECT_GT(p.cycles, 0) << p.name;
  }
}

// Compiles, runs on the simulator, and compares every output with the
// reference executor; returns the loaded model for further checks.
inline std::unique_ptr<runtime::LoadedModel> ExpectMatchesReference(const Model& m, std::vector<Tensor> inputs,
                                                             target::NpusimRunOptions options = {}) {
  auto a = Compile(m);
  EXPECT_TRUE(a.ok()) << a.status();
  if (!a.ok()) return nullptr;
  auto loaded = runtime::LoadedModel::FromArtifact(*a, "test.kiln", target::NpusimModuleLoader());
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return nullptr;
  auto got = (*loaded)->Run(inputs, options);
  EXPECT_TRUE(got.ok()) << got.status();
  if (got.ok()) ExpectUnderRoofs(**loaded);
  Executor exec;
  auto want = exec.Run(*m.graph, inputs);
  EXPECT_TRUE(want.ok()) << want.status();
  if (!got.ok() || !want.ok()) return nullptr;
  EXPECT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size() && i < want->size(); ++i) {
    const Tensor& g = (*got)[i];
    const Tensor& w = (*want)[i];
    EXPECT_EQ(g.dims(), w.dims()) << "output " << i;
    EXPECT_EQ(g.dtype(), w.dtype()) << "output " << i;
    if (g.dims() != w.dims() || g.dtype() != w.dtype()) continue;
    int bad = 0;
    for (int64_t j = 0; j < w.numel() && bad < 5; ++j) {
      double x = g.GetDouble(j), y = w.GetDouble(j);
      if (std::fabs(x - y) > 1e-4 * std::max(1.0, std::fabs(y))) {
        ADD_FAILURE() << "output " << i << " element " << j << ": " << x << " vs " << y;
        ++bad;
      }
    }
  }
  return *std::move(loaded);
}

// The first output of a compiled model run on the simulator, and the
// reference executor's on the source graph.
struct SimAndReference {
  Tensor got, want;
};
inline absl::StatusOr<SimAndReference> RunOnSimAndReference(const artifact::Artifact& a, const Model& m,
                                                     const std::vector<Tensor>& inputs) {
  KILN_ASSIGN_OR_RETURN(auto loaded, runtime::LoadedModel::FromArtifact(a, "test.kiln", target::NpusimModuleLoader()));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> got, loaded->Run(inputs));
  ExpectUnderRoofs(*loaded);
  Executor exec;
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> want, exec.Run(*m.graph, inputs));
  if (got.empty() || want.empty()) return absl::InternalError("no output");
  return SimAndReference{std::move(got[0]), std::move(want[0])};
}

inline Model Mlp() {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({8, 32}));
  Value* w = g.AddConstant("w", Random({32, 16}, 1));
  Value* b = g.AddConstant("b", Random({16}, 2));
  Value* h = g.AddNode("MatMul", {x, w}, {"h"})->output(0);
  Value* hb = g.AddNode("Add", {h, b}, {"hb"})->output(0);
  Value* r = g.AddNode("Relu", {hb}, {"r"})->output(0);
  Value* shape = g.AddConstant("shape", Tensor::FromVector<int64_t>({4, 32}, {2}));
  Value* y = g.AddNode("Reshape", {r, shape}, {"y"})->output(0);
  g.AddOutput(y);
  EXPECT_TRUE(InferShapes(g).ok());
  return m;
}

// The graph a compiled artifact carries (what its AICPU tasks run), verified.
inline absl::StatusOr<Model> CompiledGraph(const artifact::Artifact& a) {
  BlobStore blobs;
  KILN_RETURN_IF_ERROR(DeserializeBlobStore(a.constants(), &blobs));
  KILN_ASSIGN_OR_RETURN(Model m, ParseModel(a.graph_kir(), "compiled.kir", &blobs));
  KILN_RETURN_IF_ERROR(VerifyModel(m));
  return m;
}

inline absl::StatusOr<artifact::Artifact> CompileNarrow(const Model& m, target::Precision precision) {
  auto t = Npusim();
  target::CompileOptions options;
  options.precision = precision;
  return target::CompileForNpusim(m, *t, options);
}

inline int CountOps(const Model& m, absl::string_view op) {
  int n = 0;
  for (const Node* node : m.graph->nodes()) n += node->op() == op;
  return n;
}

// The first node of `op` in the compiled graph.
inline const Node* Find(const Model& m, absl::string_view op) {
  for (const Node* node : m.graph->nodes())
    if (node->op() == op) return node;
  return nullptr;
}

// Runs `a` on the SystemC model and `m` on the reference executor: every
// element within `tolerance` of the reference output's largest magnitude.
inline void ExpectSimWithinRange(const artifact::Artifact& a, const Model& m, const std::vector<Tensor>& inputs,
                          double tolerance) {
  absl::StatusOr<SimAndReference> run = RunOnSimAndReference(a, m, inputs);
  ASSERT_TRUE(run.ok()) << run.status();
  const SimAndReference& r = *run;
  ASSERT_EQ(r.got.dtype(), DType::kF32);
  double range = 1;
  for (int64_t j = 0; j < r.want.numel(); ++j) range = std::max(range, std::fabs(r.want.GetDouble(j)));
  for (int64_t j = 0; j < r.want.numel(); ++j)
    ASSERT_NEAR(r.got.GetDouble(j), r.want.GetDouble(j), tolerance * range) << j;
}

// The first node of each of `ops` in the compiled graph produces `dtype`.
inline void ExpectOutputDTypes(const Model& compiled, std::initializer_list<const char*> ops, absl::string_view dtype) {
  for (const char* op : ops) {
    const Node* n = Find(compiled, op);
    ASSERT_TRUE(n) << op;
    EXPECT_EQ(DTypeName(n->output(0)->type().dtype()), dtype) << op;
  }
}

// Flatten -> Gemm (transposed [classes, features] weights) to the graph's
// output "y": a classifier after a global pool.
inline void ClassifierHead(Graph& g, Value* pooled, int64_t classes, int64_t features, uint32_t seed) {
  Node* flat = g.AddNode("Flatten", {pooled}, {"flat"});
  Node* fc = g.AddNode("Gemm", {flat->output(0), g.AddConstant("fc.w", Random({classes, features}, seed))}, {"y"});
  fc->SetAttr("transB", Attribute::Int(1));
  g.AddOutput(fc->output(0));
}

inline Node* Conv3x3(Graph& g, Value* x, int64_t co, int64_t ci, uint32_t seed, const std::string& name) {
  Node* c = g.AddNode("Conv", {x, g.AddConstant(name + ".w", Random({co, ci, 3, 3}, seed))}, {name});
  c->SetAttr("pads", Attribute::Ints({1, 1, 1, 1}));
  return c;
}

// The plan of the task that computes `value`.
inline std::string PlanOf(const artifact::Artifact& a, absl::string_view value) {
  for (const auto& t : a.npusim().tasks())
    if (t.node() == value) return t.plan();
  return "";
}

// The plan of the first task whose value's name starts with `prefix` (a
// model output's narrow value: its Cast back took the output's name).
inline std::string PlanStartingWith(const artifact::Artifact& a, absl::string_view prefix) {
  for (const auto& t : a.npusim().tasks())
    if (absl::StartsWith(t.node(), prefix)) return t.plan();
  return "";
}

// The layout of `value`'s buffer ("" for row-major).
inline std::string LayoutOf(const artifact::Artifact& a, absl::string_view value) {
  for (const auto& b : a.npusim().buffers())
    if (b.name() == value) return b.layout();
  return "(no buffer)";
}

// Relu(Conv3x3 "c1") "r1" -> Conv3x3 "c2" -> Add "sum" of c2 and r1 ->
// Relu "s": a residual block whose shortcut is its first Conv's output.
inline Value* ResidualBlock(Graph& g, Value* x, int64_t ci, int64_t co) {
  Value* r1 = g.AddNode("Relu", {Conv3x3(g, x, co, ci, 1, "c1")->output(0)}, {"r1"})->output(0);
  Value* c2 = Conv3x3(g, r1, co, co, 2, "c2")->output(0);
  return g.AddNode("Relu", {g.AddNode("Add", {c2, r1}, {"sum"})->output(0)}, {"s"})->output(0);
}

}  // namespace kiln::npusim_test
