//===- npusim_compile_test.cc - The npusim target end to end ---------------===//
//
// Graphs compiled for npusim, run on the SystemC model through the runtime,
// and compared with the reference executor: whatever engine each node lands
// on (cube, vector, AICPU), the outputs must agree. Also the compile-time
// and run-time errors, views, host-resident values, determinism, batches.
//
//===----------------------------------------------------------------------===//
#include <random>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/training_step.h"
#include "graph/support/status.h"
#include "graph/verifier/verifier.h"
#include "runtime/loaded_model.h"
#include "target/npusim/npusim_executable.h"
#include "sim/machine/machine.h"
#include "target/builtin_targets.h"
#include "target/artifact/artifact_io.h"
#include "target/npusim/npusim_compile.h"
#include "tests/target/target_test_util.h"

namespace kiln {
namespace {

using testing_util::Random;

Type F32(std::vector<int64_t> dims) { return Type::Tensor(DType::kF32, Shape::Static(dims)); }

std::unique_ptr<target::Target> Npusim() {
  auto t = target::CreateBuiltinTarget("npusim");
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

absl::StatusOr<artifact::Artifact> Compile(const Model& m) {
  auto t = Npusim();
  return target::CompileForNpusim(m, *t, {});
}

// How many tasks of `a` have `text` in their plan.
int TasksPlanning(const artifact::Artifact& a, absl::string_view text) {
  int n = 0;
  for (const auto& task : a.npusim().tasks()) n += absl::StrContains(task.plan(), text);
  return n;
}

// No kernel of a run beats the machine's roofs (sim/model/roofline.h): its
// units' peak-rate cycles and its HBM bytes fit in the cycles it took.
void ExpectUnderRoofs(const runtime::LoadedModel& loaded) {
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
std::unique_ptr<runtime::LoadedModel> ExpectMatchesReference(const Model& m, std::vector<Tensor> inputs,
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
absl::StatusOr<SimAndReference> RunOnSimAndReference(const artifact::Artifact& a, const Model& m,
                                                     const std::vector<Tensor>& inputs) {
  KILN_ASSIGN_OR_RETURN(auto loaded, runtime::LoadedModel::FromArtifact(a, "test.kiln", target::NpusimModuleLoader()));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> got, loaded->Run(inputs));
  ExpectUnderRoofs(*loaded);
  Executor exec;
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> want, exec.Run(*m.graph, inputs));
  if (got.empty() || want.empty()) return absl::InternalError("no output");
  return SimAndReference{std::move(got[0]), std::move(want[0])};
}

Model Mlp() {
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

// One training step of the MLP under a cross-entropy loss (the backward
// pass: transposed matmuls on the cube, the Relu mask and the bias sums on
// the vector unit, the SGD update) gives the reference executor's loss,
// gradients and updated parameters.
TEST(NpusimCompile, TrainingStepMatchesReference) {
  Model m = Mlp();
  Graph& g = *m.graph;
  Value* labels = g.AddInput("labels", Type::Tensor(DType::kI64, Shape::Static({4})));
  Value* w2 = g.AddConstant("w2", Random({32, 8}, 4));
  Value* logits = g.AddNode("MatMul", {g.outputs()[0], w2}, {"logits"})->output(0);
  Value* loss = g.AddNode("SoftmaxCrossEntropyLoss", {logits, labels}, {"loss"})->output(0);
  g.ClearOutputs();
  g.AddOutput(loss);
  auto step = AppendTrainingStep(g, TrainingOptions());
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->params, (std::vector<std::string>{"w", "b", "w2"}));
  ExpectMatchesReference(m, {Random({8, 32}, 3), Tensor::FromVector<int64_t>({0, 7, 3, 3}, {4})});
}

TEST(NpusimCompile, MlpMatchesReference) {
  Model m = Mlp();
  auto loaded = ExpectMatchesReference(m, {Random({8, 32}, 3)});
  ASSERT_TRUE(loaded);
  const artifact::NpusimModule& mod = loaded->artifact().npusim();
  // The Reshape is a view of the Relu's buffer.
  bool view = false;
  for (const auto& t : mod.tasks()) view |= t.op() == "Reshape" && t.engine() == "view";
  EXPECT_TRUE(view);
  EXPECT_GT(target::NpusimOf(*loaded)->summary().stats.total_cycles, 0);
  EXPECT_EQ(target::NpusimOf(*loaded)->summary().stats.h2d_bytes, 8 * 32 * 4);
  EXPECT_EQ(target::NpusimOf(*loaded)->summary().stats.d2h_bytes, 8 * 16 * 4);
  // The roofline has a point per kernel task, named after its node: the
  // MatMul with its Add and Relu epilogue is one kernel ("r") whose cube
  // work is 2 x 8 x 32 x 16 FLOPs at least (its tiles may pad) and whose
  // vector work covers the epilogue. The report ends with the table.
  std::vector<sim::RooflinePoint> roofline = target::NpusimOf(*loaded)->Roofline();
  std::vector<std::string> kernel_nodes;
  for (const auto& t : mod.tasks())
    if (t.has_kernel()) kernel_nodes.push_back(t.node());
  ASSERT_EQ(roofline.size(), kernel_nodes.size());
  for (size_t i = 0; i < roofline.size(); ++i) EXPECT_EQ(roofline[i].name, kernel_nodes[i]);
  ASSERT_EQ(roofline[0].name, "r");
  EXPECT_GE(roofline[0].cube_flops, 2.0 * 8 * 32 * 16);
  EXPECT_GT(roofline[0].vector_elements, 0);
  EXPECT_TRUE(absl::StrContains(target::NpusimOf(*loaded)->ReportText(), "\nroofline (whole chip, 32 AI cores)"));
}

TEST(NpusimCompile, AnOutputThatIsAViewKeepsItsBytesToTheEnd) {
  // y = Reshape(Relu(x)) is a graph output computed early; later tasks
  // must not reuse the Relu's buffer.
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({64, 64}));
  Value* r = g.AddNode("Relu", {x}, {"r"})->output(0);
  Value* shape = g.AddConstant("shape", Tensor::FromVector<int64_t>({4096}, {1}));
  Value* y = g.AddNode("Reshape", {r, shape}, {"y"})->output(0);
  Value* cur = g.AddNode("Neg", {x}, {"n0"})->output(0);
  for (int i = 1; i < 6; ++i) cur = g.AddNode(i % 2 ? "Abs" : "Neg", {cur}, {absl::StrCat("n", i)})->output(0);
  g.AddOutput(y);
  g.AddOutput(cur);
  ASSERT_TRUE(InferShapes(g).ok());
  ExpectMatchesReference(m, {Random({64, 64}, 11)});
}

TEST(NpusimCompile, EveryTaskHasAnEngineAndAReason) {
  auto a = Compile(Mlp());
  ASSERT_TRUE(a.ok()) << a.status();
  for (const auto& t : a->npusim().tasks()) {
    EXPECT_FALSE(t.engine().empty()) << t.node();
    EXPECT_FALSE(t.reason().empty()) << t.node();
  }
  std::string explain = target::ExplainNpusimTasks(*a);
  EXPECT_NE(explain.find("tasks per engine"), std::string::npos) << explain;
  EXPECT_NE(explain.find("device memory"), std::string::npos) << explain;
  // The summary counts the graph's nodes (a fused group's members) and
  // FLOPs per engine: MatMul + Add + Relu one cube task, the Reshape a view.
  int nodes = 0;
  for (const auto& t : a->npusim().tasks()) nodes += t.nodes();
  EXPECT_EQ(nodes, 4);
  EXPECT_TRUE(absl::StrContains(explain, "cube          1 tasks      3 nodes")) << explain;
  EXPECT_TRUE(absl::StrContains(explain, "GFLOP 100.00%")) << explain;
}

TEST(NpusimCompile, ArtifactIsDeterministic) {
  auto a = Compile(Mlp());
  auto b = Compile(Mlp());
  ASSERT_TRUE(a.ok() && b.ok());
  std::string x, y;
  ASSERT_TRUE(a->SerializeToString(&x));
  ASSERT_TRUE(b->SerializeToString(&y));
  EXPECT_EQ(x, y);
}

TEST(NpusimCompile, UnknownDomainFailsNamingTheNode) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({4}));
  Node* n = g.AddNode("Frobnicate", {x}, {"y"}, "com.example");
  n->set_name("my_custom_node");
  n->output(0)->set_type(F32({4}));
  g.AddOutput(n->output(0));
  auto a = Compile(m);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("my_custom_node"), std::string::npos) << a.status();
}

TEST(NpusimCompile, WrongInputShapeNamesBothSignatures) {
  auto a = Compile(Mlp());
  ASSERT_TRUE(a.ok());
  auto loaded = runtime::LoadedModel::FromArtifact(*a, "mlp.kiln", target::NpusimModuleLoader());
  ASSERT_TRUE(loaded.ok());
  auto r = (*loaded)->Run({Random({8, 31}, 1)});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("f32[8,32]"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("f32[8,31]"), std::string::npos) << r.status();
  auto d = (*loaded)->Run({Tensor::FromVector<int32_t>(std::vector<int32_t>(256, 1), {8, 32})});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("i32"), std::string::npos) << d.status();
}

TEST(NpusimCompile, DataDependentShapesStayOnTheHost) {
  // NonZero's output shape depends on the data: it lives on the host side
  // and every consumer runs on the AICPU.
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({3, 4}));
  Value* r = g.AddNode("Relu", {x}, {"r"})->output(0);
  Value* nz = g.AddNode("NonZero", {r}, {"nz"})->output(0);
  Value* t = g.AddNode("Transpose", {nz}, {"t"})->output(0);
  g.AddOutput(t);
  g.AddOutput(r);
  ASSERT_TRUE(InferShapes(g).ok());
  ExpectMatchesReference(m, {Random({3, 4}, 9)});
  auto a = Compile(m);
  ASSERT_TRUE(a.ok());
  int host = 0;
  for (const auto& b : a->npusim().buffers()) host += b.kind() == artifact::Buffer::HOST;
  EXPECT_GE(host, 2);
}

// Per-channel reductions (axes {0, 2, 3} of NCHW, as in convolution and
// BatchNorm gradients) run on the vector unit as two reductions, the inner
// axes first: sums, means, maxima and minima, with and without keepdims.
TEST(NpusimCompile, PerChannelReductionsRunOnTheVectorUnitInTwo) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({4, 8, 5, 6}));
  Value* axes = g.AddConstant("axes", Tensor::FromVector<int64_t>({0, 2, 3}, {3}));
  int i = 0;
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"})
    for (int64_t keep : {0, 1}) {
      Node* r = std::string(op) == "ReduceSum" ? g.AddNode(op, {x, axes}, {absl::StrCat("r", i++)})
                                               : g.AddNode(op, {x}, {absl::StrCat("r", i++)});
      if (std::string(op) != "ReduceSum") r->SetAttr("axes", Attribute::Ints({0, 2, 3}));
      r->SetAttr("keepdims", Attribute::Int(keep));
      g.AddOutput(r->output(0));
    }
  ASSERT_TRUE(InferShapes(g).ok());
  ExpectMatchesReference(m, {Random({4, 8, 5, 6}, 21)});
  auto a = Compile(m);
  ASSERT_TRUE(a.ok()) << a.status();
  int vector = 0, aicpu = 0;
  for (const auto& t : a->npusim().tasks()) {
    vector += t.engine() == "vector";
    aicpu += t.engine() == "aicpu";
  }
  EXPECT_EQ(aicpu, 0);
  EXPECT_EQ(vector, 16);  // two per reduction
}

// A training-mode BatchNorm large enough that the AICPU would be slower
// runs as vector ops (the batch's statistics, the normalization, the
// running statistics' update); a small one stays on the AICPU.
TEST(NpusimCompile, TrainingBatchNormRunsOnTheVectorUnitWhenLarge) {
  for (int64_t n : {8, 1}) {
    SCOPED_TRACE(n);
    Model m;
    Graph& g = *m.graph;
    const int64_t side = n == 8 ? 32 : 4;
    Value* x = g.AddInput("x", F32({n, 32, side, side}));
    std::vector<Value*> ins = {x};
    for (const char* name : {"scale", "bias", "mean", "var"}) {
      Tensor v = Random({32}, static_cast<uint32_t>(ins.size()));
      if (std::string(name) == "var" || std::string(name) == "scale")
        for (float& f : v.span<float>()) f = 1.0f + 0.25f * f;
      ins.push_back(g.AddConstant(name, v));
    }
    Node* bn = g.AddNode("BatchNormalization", ins, {"y", "running_mean", "running_var"});
    bn->SetAttr("training_mode", Attribute::Int(1));
    bn->SetAttr("momentum", Attribute::Float(0.8f));
    for (int i = 0; i < 3; ++i) g.AddOutput(bn->output(i));
    ASSERT_TRUE(InferShapes(g).ok());
    ExpectMatchesReference(m, {Random({n, 32, side, side}, 31)});
    auto a = Compile(m);
    ASSERT_TRUE(a.ok()) << a.status();
    int aicpu = 0;
    for (const auto& t : a->npusim().tasks()) aicpu += t.engine() == "aicpu";
    EXPECT_EQ(aicpu, n == 8 ? 0 : 1);
  }
}

TEST(NpusimCompile, ControlFlowRunsOnTheAicpu) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({4}));
  Value* c = g.AddInput("c", Type::Tensor(DType::kBool, Shape::Static({})));
  auto then_g = std::make_unique<Graph>("then", &g);
  Value* tr = then_g->AddNode("Relu", {x}, {"tr"})->output(0);
  tr->set_type(F32({4}));
  then_g->AddOutput(tr);
  auto else_g = std::make_unique<Graph>("else", &g);
  Value* en = else_g->AddNode("Neg", {x}, {"en"})->output(0);
  en->set_type(F32({4}));
  else_g->AddOutput(en);
  Node* n = g.AddNode("If", {c}, {"y"});
  n->SetAttr("then_branch", Attribute::GraphValue(std::move(then_g)));
  n->SetAttr("else_branch", Attribute::GraphValue(std::move(else_g)));
  g.AddOutput(n->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  for (bool cond : {true, false})
    ExpectMatchesReference(m, {Random({4}, 5), Tensor::FromVector<bool>({cond}, {})});
  auto a = Compile(m);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->npusim().tasks(0).engine(), "aicpu");
}

TEST(NpusimCompile, BatchesGiveTheSameOutputsAndOverlapTransfers) {
  Model m = Mlp();
  target::NpusimRunOptions one;
  auto single = ExpectMatchesReference(m, {Random({8, 32}, 3)}, one);
  ASSERT_TRUE(single);
  double single_cycles = target::NpusimOf(*single)->summary().stats.total_cycles;
  target::NpusimRunOptions four;
  four.batches = 4;
  auto batched = ExpectMatchesReference(m, {Random({8, 32}, 3)}, four);
  ASSERT_TRUE(batched);
  const auto& s = target::NpusimOf(*batched)->summary();
  EXPECT_EQ(s.stats.h2d_bytes, 4 * 8 * 32 * 4);
  EXPECT_EQ(s.batches, 4);
  // Pipelined: four batches take less than four separate runs.
  EXPECT_LT(s.stats.total_cycles, 4 * single_cycles);
  EXPECT_NE(target::NpusimOf(*batched)->ReportText().find("pipelined"), std::string::npos);
}

// The host link has a lane each way: a model bound by its copies moves one
// batch's input while the previous batch's output comes back, so a batch
// costs its slower direction, and the report's bound is a bound.
TEST(NpusimCompile, TheTransferBoundTakesTheSlowerDirectionOfTheLink) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({256, 256}));
  g.AddOutput(g.AddNode("Relu", {x}, {"y"})->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  target::NpusimRunOptions eight;
  eight.batches = 8;
  auto run = ExpectMatchesReference(m, {Random({256, 256}, 4)}, eight);
  ASSERT_TRUE(run);
  const target::NpusimExecutable& npu = *target::NpusimOf(*run);
  const auto& s = npu.summary();
  const double one_way = sim::UsToCycles(npu.machine(), npu.machine().host_link().latency_us()) +
                         256.0 * 256 * 4 / sim::HostLinkBytesPerCycle(npu.machine());
  EXPECT_NEAR(s.transfer_cycles, one_way, 1.0);
  EXPECT_GT(s.transfer_cycles, s.compute_cycles);
  EXPECT_GE(s.stats.total_cycles / s.batches, std::max(s.compute_cycles, s.transfer_cycles));
  // Both directions overlap: well under the two lanes' sum per batch.
  EXPECT_LT(s.stats.total_cycles / s.batches, 1.5 * one_way);
}

TEST(NpusimCompile, Fp16PrecisionRunsMatrixWorkInHalfWithinTolerance) {
  Model m = Mlp();
  auto t = Npusim();
  target::CompileOptions options;
  options.precision = target::Precision::kFp16;
  auto a = target::CompileForNpusim(m, *t, options);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->npusim().precision(), "fp16");
  // The weights are f16 constants; a Cast task before the MatMul, and the
  // Cast back to f32 after its Relu is its group's (FIXP writes f32).
  int casts = 0;
  bool half_weights = false;
  for (const auto& task : a->npusim().tasks()) casts += task.op() == "Cast";
  for (const auto& b : a->npusim().buffers())
    half_weights |= b.kind() == artifact::Buffer::CONSTANT && b.dtype() == "f16";
  EXPECT_EQ(casts, 1);
  EXPECT_TRUE(half_weights);
  EXPECT_EQ(TasksPlanning(*a, "writes f32"), 1);
  auto r = RunOnSimAndReference(*a, m, {Random({8, 32}, 3)});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->got.dtype(), DType::kF32);
  for (int64_t j = 0; j < r->want.numel(); ++j)
    EXPECT_NEAR(r->got.GetDouble(j), r->want.GetDouble(j), 1e-2 * std::max(1.0, std::fabs(r->want.GetDouble(j))));
}

// Mixed precision decides per matrix op: the two 16x128 layers compute in
// f16 (their weights become f16 constants, the Relu between them stays
// f16), the 2x4x4 MatMul beside them would convert as many elements as it
// multiplies and stays f32, bit for bit the reference's.
TEST(NpusimCompile, MixedPrecisionKeepsSmallMatrixOpsF32) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({16, 128}));
  Value* s = g.AddInput("s", F32({2, 4}));
  Value* h = g.AddNode("MatMul", {x, g.AddConstant("w1", Random({128, 128}, 1))}, {"h"})->output(0);
  Value* r = g.AddNode("Relu", {h}, {"r"})->output(0);
  Value* y = g.AddNode("MatMul", {r, g.AddConstant("w2", Random({128, 32}, 2))}, {"y"})->output(0);
  Value* t = g.AddNode("MatMul", {s, g.AddConstant("ws", Random({4, 4}, 4))}, {"t"})->output(0);
  g.AddOutput(y);
  g.AddOutput(t);
  ASSERT_TRUE(InferShapes(g).ok());
  auto target = Npusim();
  target::CompileOptions options;
  options.precision = target::Precision::kMixed;
  auto a = target::CompileForNpusim(m, *target, options);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->npusim().precision(), "mixed");
  std::map<std::string, std::string> constants;  // name -> dtype
  for (const auto& b : a->npusim().buffers())
    if (b.kind() == artifact::Buffer::CONSTANT) constants[b.name()] = b.dtype();
  int f16 = 0, ws = 0;
  for (const auto& [name, dtype] : constants) {
    f16 += dtype == "f16";
    // The small MatMul's weight (in the cube's fractal layout) stays f32.
    if (absl::StartsWith(name, "ws")) {
      ++ws;
      EXPECT_EQ(dtype, "f32") << name;
    }
  }
  EXPECT_EQ(f16, 2);
  EXPECT_EQ(ws, 1);
  auto loaded = runtime::LoadedModel::FromArtifact(*a, "test.kiln", target::NpusimModuleLoader());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<Tensor> inputs = {Random({16, 128}, 5), Random({2, 4}, 6)};
  auto got = (*loaded)->Run(inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  Executor exec;
  auto want = exec.Run(*m.graph, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  double range = 1;
  for (int64_t j = 0; j < (*want)[0].numel(); ++j) range = std::max(range, std::fabs((*want)[0].GetDouble(j)));
  for (int64_t j = 0; j < (*want)[0].numel(); ++j)
    ASSERT_NEAR((*got)[0].GetDouble(j), (*want)[0].GetDouble(j), 1e-2 * range) << j;
  for (int64_t j = 0; j < (*want)[1].numel(); ++j)
    EXPECT_NEAR((*got)[1].GetDouble(j), (*want)[1].GetDouble(j), 1e-5 * std::max(1.0, std::fabs((*want)[1].GetDouble(j))));
}

// Conv -> Relu -> Conv under fp16: the Relu runs in f16 between the two
// convolutions (it commutes with rounding), so the only Casts are the
// model's input in and its output back.
TEST(NpusimCompile, Fp16KeepsActivationsHalfThroughRelu) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({1, 16, 10, 10}));
  Node* c1 = g.AddNode("Conv", {x, g.AddConstant("w1", Random({32, 16, 3, 3}, 1))}, {"c1"});
  c1->SetAttr("pads", Attribute::Ints({1, 1, 1, 1}));
  Value* r = g.AddNode("Relu", {c1->output(0)}, {"r"})->output(0);
  Node* c2 = g.AddNode("Conv", {r, g.AddConstant("w2", Random({16, 32, 3, 3}, 2)), g.AddConstant("b2", Random({16}, 4))},
                       {"y"});
  c2->SetAttr("pads", Attribute::Ints({1, 1, 1, 1}));
  g.AddOutput(c2->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  auto t = Npusim();
  target::CompileOptions options;
  options.precision = target::Precision::kFp16;
  auto a = target::CompileForNpusim(m, *t, options);
  ASSERT_TRUE(a.ok()) << a.status();
  int casts = 0;
  for (const auto& task : a->npusim().tasks()) casts += task.op() == "Cast";
  EXPECT_EQ(casts, 2);
  EXPECT_EQ(TasksPlanning(*a, "img2col from L1"), 2);
  auto run = RunOnSimAndReference(*a, m, {Random({1, 16, 10, 10}, 3)});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->got.dtype(), DType::kF32);
  // fp16 intermediates: errors relative to the output's range.
  double range = 1;
  for (int64_t j = 0; j < run->want.numel(); ++j) range = std::max(range, std::fabs(run->want.GetDouble(j)));
  for (int64_t j = 0; j < run->want.numel(); ++j)
    ASSERT_NEAR(run->got.GetDouble(j), run->want.GetDouble(j), 1e-2 * range) << j;
}

// The graph a compiled artifact carries (what its AICPU tasks run), verified.
absl::StatusOr<Model> CompiledGraph(const artifact::Artifact& a) {
  BlobStore blobs;
  KILN_RETURN_IF_ERROR(DeserializeBlobStore(a.constants(), &blobs));
  KILN_ASSIGN_OR_RETURN(Model m, ParseModel(a.graph_kir(), "compiled.kir", &blobs));
  KILN_RETURN_IF_ERROR(VerifyModel(m));
  return m;
}

absl::StatusOr<artifact::Artifact> CompileNarrow(const Model& m, target::Precision precision) {
  auto t = Npusim();
  target::CompileOptions options;
  options.precision = precision;
  return target::CompileForNpusim(m, *t, options);
}

int CountOps(const Model& m, absl::string_view op) {
  int n = 0;
  for (const Node* node : m.graph->nodes()) n += node->op() == op;
  return n;
}

// The first node of `op` in the compiled graph.
const Node* Find(const Model& m, absl::string_view op) {
  for (const Node* node : m.graph->nodes())
    if (node->op() == op) return node;
  return nullptr;
}

// Runs `a` on the SystemC model and `m` on the reference executor: every
// element within `tolerance` of the reference output's largest magnitude.
void ExpectSimWithinRange(const artifact::Artifact& a, const Model& m, const std::vector<Tensor>& inputs,
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
void ExpectOutputDTypes(const Model& compiled, std::initializer_list<const char*> ops, absl::string_view dtype) {
  for (const char* op : ops) {
    const Node* n = Find(compiled, op);
    ASSERT_TRUE(n) << op;
    EXPECT_EQ(DTypeName(n->output(0)->type().dtype()), dtype) << op;
  }
}

// Flatten -> Gemm (transposed [classes, features] weights) to the graph's
// output "y": a classifier after a global pool.
void ClassifierHead(Graph& g, Value* pooled, int64_t classes, int64_t features, uint32_t seed) {
  Node* flat = g.AddNode("Flatten", {pooled}, {"flat"});
  Node* fc = g.AddNode("Gemm", {flat->output(0), g.AddConstant("fc.w", Random({classes, features}, seed))}, {"y"});
  fc->SetAttr("transB", Attribute::Int(1));
  g.AddOutput(fc->output(0));
}

Node* Conv3x3(Graph& g, Value* x, int64_t co, int64_t ci, uint32_t seed, const std::string& name) {
  Node* c = g.AddNode("Conv", {x, g.AddConstant(name + ".w", Random({co, ci, 3, 3}, seed))}, {name});
  c->SetAttr("pads", Attribute::Ints({1, 1, 1, 1}));
  return c;
}

// The plan of the task that computes `value`.
std::string PlanOf(const artifact::Artifact& a, absl::string_view value) {
  for (const auto& t : a.npusim().tasks())
    if (t.node() == value) return t.plan();
  return "";
}

// The plan of the first task whose value's name starts with `prefix` (a
// model output's narrow value: its Cast back took the output's name).
std::string PlanStartingWith(const artifact::Artifact& a, absl::string_view prefix) {
  for (const auto& t : a.npusim().tasks())
    if (absl::StartsWith(t.node(), prefix)) return t.plan();
  return "";
}

// The layout of `value`'s buffer ("" for row-major).
std::string LayoutOf(const artifact::Artifact& a, absl::string_view value) {
  for (const auto& b : a.npusim().buffers())
    if (b.name() == value) return b.layout();
  return "(no buffer)";
}

// Conv -> Clip(0, 6) -> Conv (MobileNetV2's ReLU6): the Clip runs narrow
// with its bounds converted (exactly), so the only Casts are the model's
// input in and its output back. Under fp16 the Clip is the first Conv's
// epilogue (FIXP's relu, then a vector min); under bf16, which the vector
// unit does not compute on, it is a vector task of its own.
TEST(NpusimCompile, NarrowKeepsActivationsNarrowThroughClip) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({1, 16, 10, 10}));
  Value* c1 = Conv3x3(g, x, 32, 16, 1, "c1")->output(0);
  Value* lo = g.AddConstant("lo", Tensor::FromVector<float>({0.f}, {}));
  Value* hi = g.AddConstant("hi", Tensor::FromVector<float>({6.f}, {}));
  Value* r6 = g.AddNode("Clip", {c1, lo, hi}, {"r6"})->output(0);
  g.AddOutput(Conv3x3(g, r6, 16, 32, 2, "y")->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  for (auto [precision, dtype, tolerance] : {std::tuple{target::Precision::kFp16, DType::kF16, 1e-2},
                                              std::tuple{target::Precision::kBf16, DType::kBF16, 3e-2}}) {
    SCOPED_TRACE(DTypeName(dtype));
    auto a = CompileNarrow(m, precision);
    ASSERT_TRUE(a.ok()) << a.status();
    auto compiled = CompiledGraph(*a);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    EXPECT_EQ(CountOps(*compiled, "Cast"), 2);
    int clip_on_vector = 0;
    for (const auto& task : a->npusim().tasks()) clip_on_vector += task.op() == "Clip" && task.engine() == "vector";
    if (dtype == DType::kF16) {
      EXPECT_EQ(clip_on_vector, 0);
      EXPECT_NE(PlanOf(*a, "r6").find("relu on FIXP, min on the vector unit"), std::string::npos) << PlanOf(*a, "r6");
    } else {
      EXPECT_EQ(clip_on_vector, 1);
      const Node* clip = Find(*compiled, "Clip");
      ASSERT_TRUE(clip);
      for (const Value* v : clip->inputs()) EXPECT_EQ(DTypeName(v->type().dtype()), DTypeName(dtype)) << v->name();
      EXPECT_EQ(clip->input(2)->constant().GetDouble(0), 6.0);
    }
    ExpectSimWithinRange(*a, m, {Random({1, 16, 10, 10}, 3)}, tolerance);
  }
}

// A residual block: the Add's operands are both narrow values widened (the
// Relu's and the second Conv's), so it runs narrow with one Cast after,
// which the next Conv's Cast in cancels. The classifier's Gemm takes the
// output's Cast back to f32 (FIXP writes f32): the input's is the only
// Cast left.
TEST(NpusimCompile, NarrowKeepsResidualAddsNarrow) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({1, 16, 10, 10}));
  Value* r = g.AddNode("Relu", {Conv3x3(g, x, 16, 16, 1, "c1")->output(0)}, {"r"})->output(0);
  Value* c2 = Conv3x3(g, r, 16, 16, 2, "c2")->output(0);
  Value* sum = g.AddNode("Add", {r, c2}, {"sum"})->output(0);
  ClassifierHead(g, g.AddNode("GlobalAveragePool", {sum}, {"pooled"})->output(0), 10, 16, 4);
  ASSERT_TRUE(InferShapes(g).ok());
  auto a = CompileNarrow(m, target::Precision::kFp16);
  ASSERT_TRUE(a.ok()) << a.status();
  auto compiled = CompiledGraph(*a);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(CountOps(*compiled, "Cast"), 1);
  ExpectOutputDTypes(*compiled, {"Fused", "GlobalAveragePool", "Flatten"}, "f16");
  EXPECT_NE(PlanOf(*a, "sum").find("residual add on the vector unit"), std::string::npos) << PlanOf(*a, "sum");
  EXPECT_EQ(TasksPlanning(*a, "writes f32"), 1);
  ExpectSimWithinRange(*a, m, {Random({1, 16, 10, 10}, 3)}, 1e-2);
}

// Relu(Conv3x3 "c1") "r1" -> Conv3x3 "c2" -> Add "sum" of c2 and r1 ->
// Relu "s": a residual block whose shortcut is its first Conv's output.
Value* ResidualBlock(Graph& g, Value* x, int64_t ci, int64_t co) {
  Value* r1 = g.AddNode("Relu", {Conv3x3(g, x, co, ci, 1, "c1")->output(0)}, {"r1"})->output(0);
  Value* c2 = Conv3x3(g, r1, co, co, 2, "c2")->output(0);
  return g.AddNode("Relu", {g.AddNode("Add", {c2, r1}, {"sum"})->output(0)}, {"s"})->output(0);
}

// Between convolutions through img2col, activations stay NC1HWC0 (through
// Relu and the residual Add, which the Convs take as their epilogues): each
// Conv reads its band into L1 as it is and writes 16-channel blocks. A
// pointwise Conv (a GEMM on NCHW) joins because both its tensors are kept;
// the model's input and output stay NCHW.
TEST(NpusimCompile, Fp16KeepsNC1HWC0BetweenConvolutions) {
  Model m;
  Graph& g = *m.graph;
  Value* s = ResidualBlock(g, g.AddInput("x", F32({1, 16, 12, 12})), 16, 32);
  Value* c3 = g.AddNode("Conv", {s, g.AddConstant("c3.w", Random({32, 32, 1, 1}, 3))}, {"c3"})->output(0);
  Value* r3 = g.AddNode("Relu", {c3}, {"r3"})->output(0);
  g.AddOutput(Conv3x3(g, r3, 16, 32, 4, "c4")->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  auto a = CompileNarrow(m, target::Precision::kFp16);
  ASSERT_TRUE(a.ok()) << a.status();
  // c1, c2 (with the Add and the Relu) and c3 are fused groups named after
  // their outputs; the values inside them have no buffers.
  for (const char* v : {"r1", "s", "r3"}) EXPECT_EQ(LayoutOf(*a, v), "NC1HWC0") << v;
  for (const char* v : {"c1", "c2", "sum", "c3"}) EXPECT_EQ(LayoutOf(*a, v), "(no buffer)") << v;
  EXPECT_EQ(LayoutOf(*a, "c4"), "");
  struct { const char* task; bool in, out; const char* epilogue; } kConvs[] = {
      {"r1", false, true, ", relu on FIXP"},
      {"s", true, true, ", residual add + relu on the vector unit"},
      {"r3", true, true, ", relu on FIXP"},
      {"c4.f16.", true, false, ""}};  // the model's output: its Cast back is "c4"
  for (const auto& c : kConvs) {
    const std::string plan = absl::EndsWith(c.task, ".") ? PlanStartingWith(*a, c.task) : PlanOf(*a, c.task);
    EXPECT_NE(plan.find("img2col from L1"), std::string::npos) << c.task << ": " << plan;
    EXPECT_EQ(plan.find("input NC1HWC0") != std::string::npos, c.in) << c.task << ": " << plan;
    EXPECT_EQ(plan.find("output NC1HWC0") != std::string::npos, c.out) << c.task << ": " << plan;
    EXPECT_TRUE(absl::EndsWith(plan, absl::StrCat("W as fractals", c.epilogue))) << c.task << ": " << plan;
  }
  ExpectSimWithinRange(*a, m, {Random({1, 16, 12, 12}, 5)}, 1e-2);
}

// Convolutions take their epilogues on NCHW tensors too (24 channels keep
// NC1HWC0 out): FIXP applies a Relu (and a Clip's lower bound of 0), the
// vector unit a residual Add, the Relu after it and a Clip's upper bound on
// each tile before it goes out. A pointwise Conv whose epilogue the GEMM
// cannot take runs as the GEMM and a vector task. Under bf16 only FIXP's
// relu is fused (the vector unit does not compute on bf16).
TEST(NpusimCompile, NarrowFusesConvEpilogues) {
  Model m;
  Graph& g = *m.graph;
  Value* s = ResidualBlock(g, g.AddInput("x", F32({1, 24, 10, 10})), 24, 24);
  Value* lo = g.AddConstant("lo", Tensor::FromVector<float>({0.f}, {}));
  Value* hi = g.AddConstant("hi", Tensor::FromVector<float>({6.f}, {}));
  Value* r6 = g.AddNode("Clip", {Conv3x3(g, s, 24, 24, 3, "c3")->output(0), lo, hi}, {"r6"})->output(0);
  Value* c4 = g.AddNode("Conv", {r6, g.AddConstant("c4.w", Random({24, 24, 1, 1}, 4))}, {"c4"})->output(0);
  Value* p6 = g.AddNode("Clip", {c4, lo, hi}, {"p6"})->output(0);
  // A residual that is not the Conv's own input.
  Value* far = g.AddNode("Add", {Conv3x3(g, p6, 24, 24, 6, "c5")->output(0), s}, {"far"})->output(0);
  g.AddOutput(Conv3x3(g, far, 8, 24, 5, "y")->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  // (bf16's 8-bit mantissa over five layers: within 5%.)
  for (auto [precision, tolerance] : {std::pair{target::Precision::kFp16, 1e-2}, std::pair{target::Precision::kBf16, 5e-2}}) {
    const bool f16 = precision == target::Precision::kFp16;
    SCOPED_TRACE(f16 ? "fp16" : "bf16");
    auto a = CompileNarrow(m, precision);
    ASSERT_TRUE(a.ok()) << a.status();
    for (const auto& b : a->npusim().buffers()) EXPECT_EQ(b.layout(), "") << b.name();
    EXPECT_TRUE(absl::EndsWith(PlanOf(*a, "r1"), "W as fractals, relu on FIXP")) << PlanOf(*a, "r1");
    if (f16) {
      EXPECT_TRUE(absl::EndsWith(PlanOf(*a, "s"), "relu on FIXP, residual add + relu on the vector unit") ||
                  absl::EndsWith(PlanOf(*a, "s"), "W as fractals, residual add + relu on the vector unit"))
          << PlanOf(*a, "s");
      EXPECT_TRUE(absl::EndsWith(PlanOf(*a, "r6"), "relu on FIXP, min on the vector unit")) << PlanOf(*a, "r6");
      EXPECT_TRUE(absl::EndsWith(PlanOf(*a, "far"), "W as fractals, residual add on the vector unit")) << PlanOf(*a, "far");
    } else {
      // The Add and the Relu are tasks of their own.
      EXPECT_TRUE(absl::StartsWith(PlanOf(*a, "sum"), "Add")) << PlanOf(*a, "sum");
      EXPECT_TRUE(absl::StartsWith(PlanOf(*a, "s"), "Relu")) << PlanOf(*a, "s");
    }
    // The pointwise Conv and its Clip: a GEMM and a vector task.
    EXPECT_NE(PlanOf(*a, "c4").find("conv1x1"), std::string::npos) << PlanOf(*a, "c4");
    int clips = 0;
    for (const auto& t : a->npusim().tasks()) clips += t.op() == "Clip" && t.engine() == "vector";
    EXPECT_EQ(clips, f16 ? 1 : 2);
    ExpectSimWithinRange(*a, m, {Random({1, 24, 10, 10}, 6)}, tolerance);
  }
}

// A global pool reads NC1HWC0 as [N, C/16, H*W, 16] and writes [N, C, 1, 1]
// (the same bytes in either layout), so the last Conv before it keeps its
// output in blocks too.
TEST(NpusimCompile, Fp16GlobalPoolsReadNC1HWC0) {
  for (const char* pool : {"GlobalAveragePool", "GlobalMaxPool"}) {
    Model m;
    Graph& g = *m.graph;
    Value* x = g.AddInput("x", F32({2, 16, 9, 9}));
    Value* r = g.AddNode("Relu", {Conv3x3(g, x, 48, 16, 1, "c1")->output(0)}, {"r"})->output(0);
    ClassifierHead(g, g.AddNode(pool, {r}, {"p"})->output(0), 10, 48, 2);
    ASSERT_TRUE(InferShapes(g).ok());
    auto a = CompileNarrow(m, target::Precision::kFp16);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(LayoutOf(*a, "r"), "NC1HWC0") << pool;
    EXPECT_EQ(LayoutOf(*a, "p"), "") << pool;
    EXPECT_NE(PlanOf(*a, "r").find("output NC1HWC0"), std::string::npos) << PlanOf(*a, "r");
    ExpectSimWithinRange(*a, m, {Random({2, 16, 9, 9}, 3)}, 1e-2);
  }
}

// NCHW stays where a value's channels are not whole blocks of 16, where a
// consumer other than an img2col Conv or an elementwise op reads it
// (MaxPool), and where a pointwise Conv would write NC1HWC0 from an NCHW
// input (it is faster as a GEMM): no buffer of these models is NC1HWC0.
TEST(NpusimCompile, Fp16KeepsNCHWWhereNC1HWC0WouldNotPay) {
  auto compile = [](Model& m) {
    EXPECT_TRUE(InferShapes(*m.graph).ok());
    auto a = CompileNarrow(m, target::Precision::kFp16);
    EXPECT_TRUE(a.ok()) << a.status();
    int n = 0;
    if (a.ok())
      for (const auto& b : a->npusim().buffers()) n += b.layout() == "NC1HWC0";
    return n;
  };
  {
    Model m;  // 24 channels between the convolutions
    Graph& g = *m.graph;
    Value* r = g.AddNode("Relu", {Conv3x3(g, g.AddInput("x", F32({1, 16, 8, 8})), 24, 16, 1, "c1")->output(0)}, {"r"})
                   ->output(0);
    g.AddOutput(Conv3x3(g, r, 16, 24, 2, "c2")->output(0));
    EXPECT_EQ(compile(m), 0);
  }
  {
    Model m;  // a MaxPool reads the first Conv's output
    Graph& g = *m.graph;
    Value* c1 = Conv3x3(g, g.AddInput("x", F32({1, 16, 8, 8})), 16, 16, 1, "c1")->output(0);
    Node* pool = g.AddNode("MaxPool", {c1}, {"p"});
    pool->SetAttr("kernel_shape", Attribute::Ints({2, 2}));
    g.AddOutput(pool->output(0));
    g.AddOutput(Conv3x3(g, c1, 16, 16, 2, "c2")->output(0));
    EXPECT_EQ(compile(m), 0);
  }
  {
    Model m;  // 3x3 -> Relu -> pointwise Conv -> the model's output
    Graph& g = *m.graph;
    Value* r = g.AddNode("Relu", {Conv3x3(g, g.AddInput("x", F32({1, 16, 8, 8})), 32, 16, 1, "c1")->output(0)}, {"r"})
                   ->output(0);
    g.AddOutput(g.AddNode("Conv", {r, g.AddConstant("c2.w", Random({16, 32, 1, 1}, 2))}, {"c2"})->output(0));
    EXPECT_EQ(compile(m), 0);
  }
}

// Where an operand is a genuine f32 value (a graph input), the node stays
// f32 and the Cast before it stays: an Add of the Conv's result and the
// model's input, a Clip whose lower bound is an input.
TEST(NpusimCompile, NarrowKeepsTheCastBeforeAnOpOfAWideValue) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({1, 16, 10, 10}));
  Value* lo = g.AddInput("lo", F32({}));
  Value* c1 = Conv3x3(g, x, 16, 16, 1, "c1")->output(0);
  Value* skip = g.AddNode("Add", {c1, x}, {"skip"})->output(0);
  Value* hi = g.AddConstant("hi", Tensor::FromVector<float>({6.f}, {}));
  Value* clip = g.AddNode("Clip", {c1, lo, hi}, {"clip"})->output(0);
  Value* both = g.AddNode("Mul", {skip, clip}, {"both"})->output(0);
  g.AddOutput(Conv3x3(g, both, 16, 16, 2, "y")->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  auto a = CompileNarrow(m, target::Precision::kFp16);
  ASSERT_TRUE(a.ok()) << a.status();
  auto compiled = CompiledGraph(*a);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  // x in and y back; c1 widened and Mul's result narrowed inside the
  // memory-bound group that runs Add, Clip and Mul in f32.
  EXPECT_EQ(CountOps(*compiled, "Cast"), 2);
  const Node* group = Find(*compiled, "Fused");
  ASSERT_TRUE(group && group->attr("body") && group->attr("body")->g());
  int casts = 0;
  for (const Node* n : group->attr("body")->g()->nodes()) {
    casts += n->op() == "Cast";
    if (n->op() == "Add" || n->op() == "Clip" || n->op() == "Mul") {
      EXPECT_EQ(n->output(0)->type().dtype(), DType::kF32) << n->op();
    }
  }
  EXPECT_EQ(casts, 2);
  ExpectSimWithinRange(*a, m, {Random({1, 16, 10, 10}, 3), Tensor::FromVector<float>({-0.25f}, {})}, 1e-2);
}

// A transformer's activations stay f16 from the embedding lookup on: the
// Gather reads a table converted at compile time, LayerNorm and Softmax
// widen, compute in f32 and round once, and the last GEMM writes the f32
// output itself (its group takes the Cast): no Cast task is left.
TEST(NpusimCompile, NarrowKeepsTransformerActivationsNarrow) {
  Model m;
  Graph& g = *m.graph;
  Value* ids = g.AddInput("ids", Type::Tensor(DType::kI64, Shape::Static({2, 8})));
  Value* emb = g.AddNode("Gather", {g.AddConstant("table", Random({50, 32}, 1)), ids}, {"emb"})->output(0);
  Node* ln = g.AddNode("LayerNormalization",
                       {emb, g.AddConstant("gamma", Random({32}, 2)), g.AddConstant("beta", Random({32}, 3))}, {"ln"});
  ln->SetAttr("axis", Attribute::Int(-1));
  Value* h = g.AddNode("MatMul", {ln->output(0), g.AddConstant("w1", Random({32, 32}, 4))}, {"h"})->output(0);
  Value* p = g.AddNode("Softmax", {h}, {"p"})->output(0);
  g.AddOutput(g.AddNode("MatMul", {p, g.AddConstant("w2", Random({32, 16}, 5))}, {"y"})->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  auto a = CompileNarrow(m, target::Precision::kFp16);
  ASSERT_TRUE(a.ok()) << a.status();
  auto compiled = CompiledGraph(*a);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(CountOps(*compiled, "Cast"), 0);
  ExpectOutputDTypes(*compiled, {"Gather", "LayerNormalization", "Softmax"}, "f16");
  Tensor tokens(DType::kI64, {2, 8});
  for (int64_t i = 0; i < 16; ++i) tokens.data<int64_t>()[i] = (i * 7) % 50;
  ExpectSimWithinRange(*a, m, {tokens}, 1e-2);
}

// Attention's scores: MatMul(Q, Transpose(K)) * scale, Softmax, MatMul(., V).
// The optimizer's grouping takes the Transpose and the scale into the first
// MatMul, so the cube reads K as a transposed operand and no DMA transpose
// runs; under fp16 the Cast goes before the Transpose (K is cast, then read
// transposed).
TEST(NpusimCompile, AttentionReadsKeysTransposed) {
  Model m;
  Graph& g = *m.graph;
  Value* q = g.AddInput("q", F32({2, 4, 32, 16}));
  Value* k = g.AddInput("k", F32({2, 4, 32, 16}));
  Value* v = g.AddInput("v", F32({2, 4, 32, 16}));
  Node* kt = g.AddNode("Transpose", {k}, {"kt"});
  kt->SetAttr("perm", Attribute::Ints({0, 1, 3, 2}));
  Value* s = g.AddNode("MatMul", {q, kt->output(0)}, {"s"})->output(0);
  Value* scaled = g.AddNode("Mul", {s, g.AddConstant("scale", Tensor::Scalar(0.25f))}, {"scaled"})->output(0);
  Value* p = g.AddNode("Softmax", {scaled}, {"p"})->output(0);
  g.AddOutput(g.AddNode("MatMul", {p, v}, {"o"})->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  std::vector<Tensor> inputs = {Random({2, 4, 32, 16}, 1), Random({2, 4, 32, 16}, 2), Random({2, 4, 32, 16}, 3)};
  for (target::Precision precision : {target::Precision::kFp32, target::Precision::kFp16}) {
    SCOPED_TRACE(target::PrecisionName(precision));
    auto a = CompileNarrow(m, precision);
    ASSERT_TRUE(a.ok()) << a.status();
    for (const auto& task : a->npusim().tasks()) EXPECT_NE(task.op(), "Transpose") << task.node();
    EXPECT_EQ(TasksPlanning(*a, "B read transposed, scaled by 0.25"), 1);
    ExpectSimWithinRange(*a, m, inputs, precision == target::Precision::kFp32 ? 1e-5 : 1e-2);
  }
}

// Infers `m`'s shapes, compiles it, and expects one vector task whose plan
// holds `plan`.
void ExpectOneVectorTask(Model& m, absl::string_view plan) {
  ASSERT_TRUE(InferShapes(*m.graph).ok());
  auto a = Compile(m);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->npusim().tasks_size(), 1);
  EXPECT_EQ(a->npusim().tasks(0).engine(), "vector");
  EXPECT_TRUE(absl::StrContains(a->npusim().tasks(0).plan(), plan)) << a->npusim().tasks(0).plan();
}

// The optimizer's memory-bound groups run as one vector kernel each, its
// steps those of the shared tile lowering: SiLU, a residual and a bias row
// broadcast down the rows (the row form: the row stays resident in UB).
TEST(NpusimCompile, FusedElementwiseGroupRunsAsOneVectorKernel) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({4, 64, 256}));
  Value* r = g.AddInput("r", F32({4, 64, 256}));
  Value* s = g.AddNode("Sigmoid", {x}, {"s"})->output(0);
  Value* silu = g.AddNode("Mul", {x, s}, {"silu"})->output(0);
  Value* res = g.AddNode("Add", {silu, r}, {"res"})->output(0);
  g.AddOutput(g.AddNode("Add", {res, g.AddConstant("bias", Random({256}, 3))}, {"y"})->output(0));
  ASSERT_NO_FATAL_FAILURE(ExpectOneVectorTask(m, "fused Sigmoid, Mul, Add, Add (elementwise over [256, 256])"));
  ExpectMatchesReference(m, {Random({4, 64, 256}, 1), Random({4, 64, 256}, 2)});
}

// Whole tensors and a run-time scalar: the flat form. A Cast to f16 inside
// the group rounds there, as the reference does (computing on in f32 would
// be off by up to 2^-11 relative, ten times the tolerance).
TEST(NpusimCompile, FusedFlatGroupRoundsAtItsCasts) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({64, 160}));
  Value* k = g.AddInput("k", F32({1}));
  Value* e = g.AddNode("Mul", {x, k}, {"e"})->output(0);
  Node* narrow = g.AddNode("Cast", {e}, {"e16"});
  narrow->SetAttr("to", Attribute::Int(10));  // FLOAT16
  Node* wide = g.AddNode("Cast", {narrow->output(0)}, {"e32"});
  wide->SetAttr("to", Attribute::Int(1));  // FLOAT
  Value* q = g.AddNode("Div", {wide->output(0), g.AddConstant("three", Tensor::Scalar(3.0f))}, {"q"})->output(0);
  g.AddOutput(g.AddNode("Tanh", {q}, {"y"})->output(0));
  ASSERT_NO_FATAL_FAILURE(
      ExpectOneVectorTask(m, "fused Mul, Cast, Cast, Div, Tanh (elementwise over 10240 elements): flat"));
  Tensor scale = Tensor::FromVector<float>({1.7f}, {1});
  ExpectMatchesReference(m, {Random({64, 160}, 1), scale});
}

// A residual Add and the LayerNormalization after it (the row-reduction
// form), with the sum also an output of the group.
TEST(NpusimCompile, FusedAddAndLayerNormWriteBothResults) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({2, 48, 96}));
  Value* r = g.AddInput("r", F32({2, 48, 96}));
  Value* sum = g.AddNode("Add", {x, r}, {"sum"})->output(0);
  Node* ln = g.AddNode("LayerNormalization",
                       {sum, g.AddConstant("gamma", Random({96}, 3)), g.AddConstant("beta", Random({96}, 4))}, {"ln"});
  ln->SetAttr("axis", Attribute::Int(-1));
  g.AddOutput(ln->output(0));
  g.AddOutput(sum);
  ASSERT_NO_FATAL_FAILURE(ExpectOneVectorTask(m, "fused Add, LayerNormalization (row reduction over [96, 96])"));
  ExpectMatchesReference(m, {Random({2, 48, 96}, 1), Random({2, 48, 96}, 2)});
}

// A group with a step the vector kernel has no form for (LeakyRelu's
// compare and select) is split back into its ops, each its own kernel.
TEST(NpusimCompile, FusedGroupWithoutAVectorFormSplitsBack) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({32, 128}));
  Value* e = g.AddNode("Exp", {x}, {"e"})->output(0);
  Node* lr = g.AddNode("LeakyRelu", {e}, {"lr"});
  lr->SetAttr("alpha", Attribute::Float(0.1f));
  g.AddOutput(g.AddNode("Sqrt", {lr->output(0)}, {"y"})->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  auto a = Compile(m);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->npusim().tasks_size(), 3);
  EXPECT_EQ(TasksPlanning(*a, "fused"), 0);
  ExpectMatchesReference(m, {Random({32, 128}, 1)});
}

// Narrowing turns a kiln.Gelu between two MatMuls to f16 after the driver
// first made its kernel for f32: the kernel is made again (a stale one read
// an f16 buffer as f32, past its end). With fusion off, nothing groups the
// Gelu into the GEMM.
TEST(NpusimCompile, NarrowRemakesTheKernelsOfCompositesItNarrows) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({16, 64}));
  Value* h = g.AddNode("MatMul", {x, g.AddConstant("w1", Random({64, 128}, 1))}, {"h"})->output(0);
  Value* a = g.AddNode("Gelu", {h}, {"a"}, "kiln")->output(0);
  g.AddOutput(g.AddNode("MatMul", {a, g.AddConstant("w2", Random({128, 32}, 2))}, {"y"})->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  auto t = Npusim();
  target::CompileOptions options;
  options.precision = target::Precision::kFp16;
  options.fusion = false;
  auto art = target::CompileForNpusim(m, *t, options);
  ASSERT_TRUE(art.ok()) << art.status();
  auto compiled = CompiledGraph(*art);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ExpectOutputDTypes(*compiled, {"Gelu"}, "f16");
  EXPECT_EQ(TasksPlanning(*art, "fused"), 0);
  ExpectSimWithinRange(*art, m, {Random({16, 64}, 3)}, 1e-2);
}

// fp32: a Conv through im2col in GM takes its Relu (FIXP applies it as
// tiles go out); the second Conv's residual Add and Relu, which that kernel
// does not take, are left out of its group and run as one vector kernel.
TEST(NpusimCompile, Fp32ConvTakesItsReluAndLeavesTheResidualToTheVectorUnit) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({1, 16, 12, 12}));
  g.AddOutput(ResidualBlock(g, x, 16, 16));
  ASSERT_TRUE(InferShapes(g).ok());
  auto a = Compile(m);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->npusim().tasks_size(), 3);
  EXPECT_EQ(TasksPlanning(*a, "input in GM"), 2);  // "im2col as shifted rows of zero-padded input in GM"
  EXPECT_EQ(TasksPlanning(*a, "FIXP applies the Relu"), 1);
  EXPECT_EQ(TasksPlanning(*a, "fused Add, Relu"), 1);
  ExpectMatchesReference(m, {Random({1, 16, 12, 12}, 3)});
}

// The artifact stores each weight once: a convolution's weights travel as
// the fractal copy its kernel loads, not also row-major (and, under fp16,
// not also as the f32 originals narrowing replaced). The compiled graph
// keeps their types, elided; the run still matches the reference.
TEST(NpusimCompile, WeightsAreStoredOnce) {
  for (target::Precision precision : {target::Precision::kFp32, target::Precision::kFp16}) {
    Model m;
    Graph& g = *m.graph;
    Value* c1 = Conv3x3(g, g.AddInput("x", F32({1, 16, 12, 12})), 32, 16, 1, "c1")->output(0);
    Value* r1 = g.AddNode("Relu", {c1}, {"r1"})->output(0);
    g.AddOutput(Conv3x3(g, r1, 32, 32, 2, "c2")->output(0));
    ASSERT_TRUE(InferShapes(g).ok());
    auto a = CompileNarrow(m, precision);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(TasksPlanning(*a, "W as fractals"), 2);
    auto compiled = CompiledGraph(*a);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    int64_t carried = 0;
    int elided = 0;
    for (const Value* c = compiled->graph->first_constant(); c; c = compiled->graph->NextConstant(c)) {
      if (const Tensor* t = c->constant_data()) carried += static_cast<int64_t>(t->nbytes());
      elided += !c->has_data();
    }
    const int64_t weights = (32 * 16 + 32 * 32) * 9 * (precision == target::Precision::kFp16 ? 2 : 4);
    EXPECT_LE(carried, weights + 1024) << "precision " << static_cast<int>(precision);
    EXPECT_EQ(elided, 2);
    ExpectSimWithinRange(*a, m, {Random({1, 16, 12, 12}, 5)}, 1e-2);
  }
}

TEST(NpusimCompile, InconsistentArtifactsAreRejected) {
  auto a = Compile(Mlp());
  ASSERT_TRUE(a.ok());
  artifact::Artifact bad = *a;
  for (auto& t : *bad.mutable_npusim()->mutable_tasks())
    if (t.has_kernel()) t.mutable_kernel()->set_program(99);
    else if (t.has_aicpu()) t.mutable_aicpu()->set_node(999);
  auto loaded = runtime::LoadedModel::FromArtifact(bad, "bad.kiln", target::NpusimModuleLoader());
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("bad.kiln"), std::string::npos) << loaded.status();

  artifact::Artifact shifted = *a;
  shifted.mutable_npusim()->mutable_buffers(0)->set_offset(int64_t{1} << 40);
  EXPECT_FALSE(runtime::LoadedModel::FromArtifact(shifted, "shifted.kiln", target::NpusimModuleLoader()).ok());
}

// The npusim description is the default machine's, not numbers of its own:
// the figures the shared backend tiles for are the ones the model simulates.
TEST(NpusimCompile, DescriptionIsTheDefaultMachine) {
  auto t = target::CreateBuiltinTarget("npusim");
  ASSERT_TRUE(t.ok()) << t.status();
  const target::TargetDescription& d = (*t)->description();
  const sim::Machine m = sim::DefaultMachine();
  EXPECT_EQ(d.compute_units, m.chip().ai_cores());
  EXPECT_DOUBLE_EQ(d.clock_ghz * 1000, m.chip().clock_mhz());
  EXPECT_DOUBLE_EQ(d.global_bytes_per_second, m.chip().hbm_bandwidth_gbps() * 1e9);
  EXPECT_DOUBLE_EQ(d.tiling.global_latency_cycles, m.chip().hbm_latency_cycles());
  ASSERT_EQ(d.memory.size(), 6u);
  // The documented ascend910-like figures (docs/npu.md).
  const std::vector<std::pair<int64_t, double>> levels = {{int64_t{32} << 30, 256}, {1 << 20, 256}, {64 << 10, 512},
                                                           {64 << 10, 512},         {256 << 10, 256}, {256 << 10, 256}};
  for (size_t i = 0; i < levels.size(); ++i) {
    EXPECT_EQ(d.memory[i].bytes, levels[i].first) << d.memory[i].name;
    EXPECT_DOUBLE_EQ(d.memory[i].bytes_per_cycle, levels[i].second) << d.memory[i].name;
  }
  EXPECT_DOUBLE_EQ(d.mma[0].macs_per_cycle, 4096);
  EXPECT_DOUBLE_EQ(d.mma[2].macs_per_cycle, 8192);
  EXPECT_DOUBLE_EQ(d.mma[3].macs_per_cycle, 1024);
  EXPECT_DOUBLE_EQ(d.host_link_bytes_per_second, 32e9);
}

}  // namespace
}  // namespace kiln
