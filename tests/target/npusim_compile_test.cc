//===- npusim_compile_test.cc - The npusim target end to end ----------------===//
//
// Graphs compiled for npusim, run on the SystemC model through the runtime,
// and compared with the reference executor: whatever engine each node lands
// on (cube, vector, AICPU), the outputs must agree. Also the compile-time
// and run-time errors, views, host-resident values, determinism, batches,
// what an artifact stores and the target's description.
//
// Narrow precisions and layouts: npusim_precision_test.cc; fusion groups and
// epilogues: npusim_fusion_test.cc.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/training_step.h"
#include "sim/machine/machine.h"
#include "tests/target/npusim_test_util.h"

namespace kiln::npusim_test {
namespace {

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

// A timing-only run reads no data, so the constants reach device memory
// only with the first functional run: one after a timing-only run on the
// same loaded model still computes with them.
TEST(NpusimCompile, AFunctionalRunAfterATimingOnlyRunHasItsConstants) {
  Model m = Mlp();
  auto a = Compile(m);
  ASSERT_TRUE(a.ok()) << a.status();
  auto loaded = runtime::LoadedModel::FromArtifact(*a, "test.kiln", target::NpusimModuleLoader());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<Tensor> in = {Random({8, 32}, 3)};
  target::RunOptions timing;
  timing.functional = false;
  ASSERT_TRUE((*loaded)->Run(in, timing).ok());
  auto got = (*loaded)->Run(in, {});
  ASSERT_TRUE(got.ok()) << got.status();
  Executor exec;
  auto want = exec.Run(*m.graph, in);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(got->size(), 1u);
  for (int64_t j = 0; j < (*want)[0].numel(); ++j)
    ASSERT_NEAR((*got)[0].GetDouble(j), (*want)[0].GetDouble(j), 1e-4 * std::max(1.0, std::fabs((*want)[0].GetDouble(j))))
        << "element " << j;
}

// A decode attention finds its live tiles from its mask's values (`ld`),
// so a timing-only run computes it and what makes the mask (the Greater
// on the AICPU, the Not, the Where that makes it additive), and then takes
// the functional run's branches: the same cycles, where it used to read
// the whole cache. The MatMul that makes the query does not steer and is
// only timed.
TEST(NpusimCompile, ADecodeAttentionsMaskIsComputedInTimingOnlyRuns) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({1, 2, 1, 64}));
  Value* k = g.AddInput("k", F32({1, 2, 256, 64}));
  Value* v = g.AddInput("v", F32({1, 2, 256, 64}));
  Value* pos = g.AddInput("pos", Type::Tensor(DType::kI64, Shape::Static({})));
  Value* q = g.AddNode("MatMul", {x, g.AddConstant("w", Random({64, 64}, 4))}, {"q"})->output(0);
  std::vector<int64_t> keys(256);
  for (int64_t i = 0; i < 256; ++i) keys[i] = i;
  Value* later = g.AddNode("Greater", {g.AddConstant("keys", Tensor::FromVector<int64_t>(keys, {1, 256})), pos},
                           {"later"})->output(0);
  Value* keep = g.AddNode("Not", {later}, {"keep"})->output(0);
  Node* att = g.AddNode("Attention", {q, k, v, keep}, {"y"}, "kiln");
  att->SetAttr("scale", Attribute::Float(0.125f));
  g.AddOutput(att->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  auto a = Compile(m);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::flat_hash_map<std::string, bool> computes;  // by op
  for (const auto& t : a->npusim().tasks()) {
    if (t.has_kernel()) computes[t.op()] = t.kernel().computes_in_timing_only();
    if (t.has_aicpu()) computes[t.op()] = t.aicpu().computes_in_timing_only();
  }
  EXPECT_TRUE(computes["kiln.Attention"]);
  EXPECT_TRUE(computes["Where"]);
  EXPECT_TRUE(computes["Not"]);
  EXPECT_TRUE(computes["Greater"]);
  ASSERT_TRUE(computes.contains("MatMul"));
  EXPECT_FALSE(computes["MatMul"]);
  EXPECT_EQ(TasksPlanning(*a, "computed in timing-only runs too: its control flow reads its mask's values"), 1);

  auto loaded = runtime::LoadedModel::FromArtifact(*a, "test.kiln", target::NpusimModuleLoader());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<Tensor> in = {Random({1, 2, 1, 64}, 1), Random({1, 2, 256, 64}, 2), Random({1, 2, 256, 64}, 3),
                                  Tensor::FromVector<int64_t>({70}, {})};
  auto cycles = [&](bool functional) {
    target::RunOptions o;
    o.functional = functional;
    EXPECT_TRUE((*loaded)->Run(in, o).ok());
    return target::NpusimOf(**loaded)->summary().stats.total_cycles;
  };
  const double timed = cycles(false);  // first: no functional run has left its data behind
  EXPECT_DOUBLE_EQ(timed, cycles(true));
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
  ASSERT_EQ(d.memory.size(), 7u);
  // The documented ascend910-like figures (docs/npu.md); the L2 last, a
  // cache (no tile IR scope), each core's share of its 6,000 B/cycle.
  const std::vector<std::pair<int64_t, double>> levels = {
      {int64_t{32} << 30, 256}, {1 << 20, 256},    {64 << 10, 512},        {64 << 10, 512},
      {256 << 10, 256},         {256 << 10, 256},  {32 << 20, 6000.0 / 32}};
  EXPECT_EQ(d.memory[6].scope, "");
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
}  // namespace kiln::npusim_test
