// Tests of the shape family: inference (static and symbolic), kernels,
// upgraders.
#include <gtest/gtest.h>

#include "graph/exec/executor.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"

namespace kiln {
namespace {

Tensor I64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())}); }
Tensor Iota(Dims dims) {
  Tensor t(DType::kF32, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}
Type F32(DimVector dims) { return Type::Tensor(DType::kF32, Shape(std::move(dims))); }

std::vector<int64_t> Ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.GetInt(i));
  return v;
}

// Builds `op` with inputs (data input first, constants after) and infers.
struct OneOp {
  Graph g;
  Node* node = nullptr;
  Value* x = nullptr;
  OneOp(absl::string_view op, Type x_type, std::vector<std::optional<Tensor>> consts = {}, int outputs = 1) {
    x = g.AddInput("x", std::move(x_type));
    std::vector<Value*> ins = {x};
    for (auto& c : consts) ins.push_back(c ? g.AddConstant(g.UniqueName("c"), *c) : nullptr);
    node = g.AddNode(op, ins, outputs);
    for (int i = 0; i < outputs; ++i) g.AddOutput(node->output(i));
  }
  absl::Status Infer() { return InferShapes(g); }
  Type Out(int i = 0) const { return node->output(i)->type(); }
  absl::StatusOr<std::vector<Tensor>> Run(Tensor in) {
    absl::Status s = InferShapes(g);
    if (!s.ok()) return s;
    Executor ex;
    return ex.Run(g, {std::move(in)});
  }
};

TEST(ShapeOps, ShapeWithStartEnd) {
  OneOp op("Shape", F32({Dim::Symbol("batch"), 3, 4}));
  op.node->SetAttr("start", Attribute::Int(-2));
  ASSERT_TRUE(op.Infer().ok());
  EXPECT_EQ(op.Out().ToString(), "i64[2]");
  auto r = op.Run(Iota({5, 3, 4}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{3, 4}));
}

TEST(ShapeOps, ShapeClampsRange) {
  OneOp op("Shape", F32({2, 3, 4}));
  op.node->SetAttr("start", Attribute::Int(-10));
  op.node->SetAttr("end", Attribute::Int(10));
  auto r = op.Run(Iota({2, 3, 4}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{2, 3, 4}));
}

TEST(ShapeOps, Size) {
  OneOp op("Size", F32({2, 3}));
  auto r = op.Run(Iota({2, 3}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "i64[]");
  EXPECT_EQ((*r)[0].GetInt(0), 6);
}

TEST(ShapeOps, ReshapeKeepsSymbolicDims) {
  OneOp op("Reshape", F32({Dim::Symbol("batch"), 3, 4}), {I64({0, -1})});
  ASSERT_TRUE(op.Infer().ok());
  EXPECT_EQ(op.Out().ToString(), "f32[batch,12]");
}

TEST(ShapeOps, ReshapeSolvesMinusOneWithSymbols) {
  OneOp op("Reshape", F32({Dim::Symbol("batch"), 3, 4}), {I64({-1, 12})});
  ASSERT_TRUE(op.Infer().ok());
  EXPECT_EQ(op.Out().ToString(), "f32[batch,12]");
  OneOp op2("Reshape", F32({Dim::Symbol("batch"), 3, 4}), {I64({-1, 6})});
  ASSERT_TRUE(op2.Infer().ok());
  EXPECT_EQ(op2.Out().ToString(), "f32[?,6]");
}

TEST(ShapeOps, ReshapeStatic) {
  OneOp op("Reshape", F32({2, 3, 4}), {I64({4, -1})});
  auto r = op.Run(Iota({2, 3, 4}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "f32[4,6]");
  EXPECT_EQ((*r)[0].dims(), (Dims{4, 6}));
  EXPECT_EQ((*r)[0].data<float>()[23], 23.0f);
}

TEST(ShapeOps, ReshapeAllowZero) {
  OneOp op("Reshape", F32({0, 3, 4}), {I64({3, 4, 0})});
  op.node->SetAttr("allowzero", Attribute::Int(1));
  auto r = op.Run(Tensor(DType::kF32, {0, 3, 4}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dims(), (Dims{3, 4, 0}));
}

TEST(ShapeOps, ReshapeRejectsBadCount) {
  OneOp op("Reshape", F32({2, 3, 4}), {I64({5, -1})});
  EXPECT_FALSE(op.Infer().ok());
  OneOp op2("Reshape", F32({2, 3}), {I64({-1, -1})});
  EXPECT_FALSE(op2.Infer().ok());
}

TEST(ShapeOps, ReshapeUnknownShapeKnowsRank) {
  OneOp op("Reshape", F32({2, 3, 4}));
  Value* s = op.g.AddInput("s", Type::Tensor(DType::kI64, Shape::Static({3})));
  op.node->AddInput(s);
  ASSERT_TRUE(op.Infer().ok());
  EXPECT_EQ(op.Out().ToString(), "f32[?,?,?]");
}

TEST(ShapeOps, ReshapeUpgradeFromOpset1) {
  OneOp op("Reshape", F32({2, 3, 4}));
  op.node->SetAttr("shape", Attribute::Ints({6, 4}));
  op.node->SetAttr("consumed_inputs", Attribute::Ints({0}));
  const OpDef* def = OpRegistry::Global().Find(*op.node);
  ASSERT_TRUE(def->upgrade(op.g, op.node, 1).ok());
  EXPECT_FALSE(op.node->has_attr("shape"));
  EXPECT_FALSE(op.node->has_attr("consumed_inputs"));
  ASSERT_EQ(op.node->num_inputs(), 2);
  ASSERT_TRUE(op.Infer().ok());
  EXPECT_EQ(op.Out().ToString(), "f32[6,4]");
}

TEST(ShapeOps, FlattenSymbolic) {
  OneOp op("Flatten", F32({Dim::Symbol("batch"), 3, 4}));
  ASSERT_TRUE(op.Infer().ok());
  EXPECT_EQ(op.Out().ToString(), "f32[batch,12]");
  OneOp op2("Flatten", F32({Dim::Symbol("batch"), 3, 4}));
  op2.node->SetAttr("axis", Attribute::Int(0));
  ASSERT_TRUE(op2.Infer().ok());
  EXPECT_EQ(op2.Out().ToString(), "f32[1,?]");
  OneOp op3("Flatten", F32({2, 3, 4}));
  op3.node->SetAttr("axis", Attribute::Int(-1));
  auto r = op3.Run(Iota({2, 3, 4}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dims(), (Dims{6, 4}));
}

TEST(ShapeOps, SqueezeUnsqueeze) {
  OneOp sq("Squeeze", F32({1, Dim::Symbol("n"), 1}), {I64({0, -1})});
  ASSERT_TRUE(sq.Infer().ok());
  EXPECT_EQ(sq.Out().ToString(), "f32[n]");
  OneOp sq2("Squeeze", F32({1, 3, 1}));
  auto r = sq2.Run(Iota({1, 3, 1}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dims(), (Dims{3}));
  OneOp bad("Squeeze", F32({2, 3}), {I64({0})});
  EXPECT_FALSE(bad.Infer().ok());

  OneOp un("Unsqueeze", F32({Dim::Symbol("n"), 3}), {I64({0, -1})});
  ASSERT_TRUE(un.Infer().ok());
  EXPECT_EQ(un.Out().ToString(), "f32[1,n,3,1]");
  OneOp un2("Unsqueeze", F32({2, 3}), {I64({1, 3})});
  auto r2 = un2.Run(Iota({2, 3}));
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ((*r2)[0].dims(), (Dims{2, 1, 3, 1}));
}

TEST(ShapeOps, UnsqueezeUpgradeFromOpset11) {
  OneOp op("Unsqueeze", F32({2, 3}));
  op.node->SetAttr("axes", Attribute::Ints({0}));
  const OpDef* def = OpRegistry::Global().Find(*op.node);
  ASSERT_TRUE(def->upgrade(op.g, op.node, 11).ok());
  ASSERT_TRUE(op.Infer().ok());
  EXPECT_EQ(op.Out().ToString(), "f32[1,2,3]");
}

TEST(ShapeOps, Expand) {
  OneOp op("Expand", F32({3, 1}), {I64({2, 1, 4})});
  auto r = op.Run(Iota({3, 1}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "f32[2,3,4]");
  const float* p = (*r)[0].data<float>();
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_EQ(p[4], 1.0f);
  EXPECT_EQ(p[12 + 11], 2.0f);
  OneOp sym("Expand", F32({Dim::Symbol("b"), 1}), {I64({1, 5})});
  ASSERT_TRUE(sym.Infer().ok());
  EXPECT_EQ(sym.Out().ToString(), "f32[b,5]");
  OneOp bad("Expand", F32({3, 2}), {I64({4, 2})});
  EXPECT_FALSE(bad.Infer().ok());
}

}  // namespace
}  // namespace kiln
