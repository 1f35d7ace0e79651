//===- npusim_fusion_test.cc - npusim fusion groups and epilogues -----------===//
//
// The optimizer's fusion groups on npusim: memory-bound groups run as one
// vector kernel each through the shared tile lowering's steps (flat and row
// forms), groups without a vector form split back, convolutions take the
// epilogues their kernels can apply, and a MatMul takes its bias, a
// residual and a GELU (both forms) in its UB epilogue.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tests/target/npusim_test_util.h"

namespace kiln::npusim_test {
namespace {

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

// fp32: a Conv through img2col takes its Relu (FIXP applies it as tiles go
// out), and the second Conv its residual Add and Relu (the vector unit, on
// each tile): two tasks, as at fp16.
TEST(NpusimCompile, Fp32ConvTakesItsReluAndItsResidualThroughImg2col) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", F32({1, 16, 12, 12}));
  g.AddOutput(ResidualBlock(g, x, 16, 16));
  ASSERT_TRUE(InferShapes(g).ok());
  auto a = Compile(m);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->npusim().tasks_size(), 2);
  EXPECT_EQ(TasksPlanning(*a, "img2col from L1"), 2);
  EXPECT_EQ(TasksPlanning(*a, "relu on FIXP"), 1);
  EXPECT_EQ(TasksPlanning(*a, "residual add + relu on the vector unit"), 1);
  ExpectMatchesReference(m, {Random({1, 16, 12, 12}, 3)});
}

// A MatMul's bias and GELU (tanh and erf forms; a decoder's fc1), and a
// residual before a GELU, run in the cube kernel's UB epilogue: one task
// each, against the reference.
TEST(NpusimCompile, MatMulTakesItsGeluInTheEpilogue) {
  for (const char* approximate : {"tanh", "none"}) {
    SCOPED_TRACE(approximate);
    Model m;
    Graph& g = *m.graph;
    Value* x = g.AddInput("x", F32({32, 128}));
    Value* r = g.AddInput("r", F32({32, 256}));
    Value* mm = g.AddNode("MatMul", {x, g.AddConstant("w", Random({128, 256}, 4))}, {"mm"})->output(0);
    Value* b = g.AddNode("Add", {mm, g.AddConstant("bias", Random({256}, 5))}, {"biased"})->output(0);
    Value* res = g.AddNode("Add", {b, r}, {"res"})->output(0);
    Node* gelu = g.AddNode("Gelu", {res}, {"y"}, "kiln");
    gelu->SetAttr("approximate", Attribute::String(approximate));
    g.AddOutput(gelu->output(0));
    ASSERT_TRUE(InferShapes(g).ok());
    auto a = Compile(m);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_EQ(a->npusim().tasks_size(), 1) << a->npusim().tasks(0).plan();
    EXPECT_EQ(TasksPlanning(*a, std::string(approximate) == "tanh" ? "adds a residual, GELU (tanh)" : "adds a residual, GELU,"),
              1);
    ExpectMatchesReference(m, {Random({32, 128}, 1), Random({32, 256}, 2)});
  }
}

}  // namespace
}  // namespace kiln::npusim_test
