//===- npusim_precision_test.cc - npusim under fp16, bf16 and mixed precision ---===//
//
// Models compiled for npusim at a narrow precision, run on the SystemC model
// against the reference executor within the narrow type's tolerance: which
// ops compute narrow, where the Casts stay, the layouts (NC1HWC0 between
// img2col convolutions) and the epilogues narrowing keeps.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/target/npusim_test_util.h"

namespace kiln::npusim_test {
namespace {

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

// An f32 attention with a bool mask (the masked_fill of a causal decoder)
// under --precision=fp16: kept whole through narrowing, computed in f16 by
// the fused kernel, its mask made additive (Where before it), within the
// fp16 tolerance of the reference's f32 attention; with
// --fused-attention=false it is split back as before.
TEST(NpusimCompile, Fp16AttentionRunsFusedWithItsBoolMask) {
  Model m;
  Graph& g = *m.graph;
  Value* q = g.AddInput("q", F32({1, 2, 128, 64}));
  Value* k = g.AddInput("k", F32({1, 2, 128, 64}));
  Value* v = g.AddInput("v", F32({1, 2, 128, 64}));
  Value* keep = g.AddInput("keep", Type::Tensor(DType::kBool, Shape::Static({128, 128})));
  Node* att = g.AddNode("Attention", {q, k, v, keep}, {"y"}, "kiln");
  att->SetAttr("scale", Attribute::Float(0.125f));
  g.AddOutput(att->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  Tensor mask(DType::kBool, {128, 128});
  for (int i = 0; i < 128; ++i)
    for (int j = 0; j < 128; ++j) mask.data<bool>()[i * 128 + j] = j <= i + 5;  // a causal band, shifted
  auto a = CompileNarrow(m, target::Precision::kFp16);
  ASSERT_TRUE(a.ok()) << a.status();
  bool fused = false, additive = false;
  for (const auto& task : a->npusim().tasks()) {
    fused |= task.op() == "kiln.Attention" && task.engine() == "cube";
    additive |= task.op() == "Where";
  }
  EXPECT_TRUE(fused);
  EXPECT_TRUE(additive);
  auto r = RunOnSimAndReference(*a, m, {Random({1, 2, 128, 64}, 1), Random({1, 2, 128, 64}, 2),
                                        Random({1, 2, 128, 64}, 3), mask});
  ASSERT_TRUE(r.ok()) << r.status();
  for (int64_t j = 0; j < r->want.numel(); ++j)
    EXPECT_NEAR(r->got.GetDouble(j), r->want.GetDouble(j), 1e-2) << j;

  target::CompileOptions split;
  split.precision = target::Precision::kFp16;
  split.settings = {{"fused-attention", "false"}};
  auto b = target::CompileForNpusim(m, *Npusim(), split);
  ASSERT_TRUE(b.ok()) << b.status();
  for (const auto& task : b->npusim().tasks()) EXPECT_NE(task.op(), "kiln.Attention");
}

}  // namespace
}  // namespace kiln::npusim_test
