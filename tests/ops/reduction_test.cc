// Tests of the reduction family: Reduce*, ArgMax/ArgMin, CumSum, Hardmax and
// the loss ops: inference, kernels, upgraders and error cases.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/exec/executor.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"

namespace kiln {
namespace {

Tensor F32T(std::vector<float> v, Dims dims) { return Tensor::FromVector<float>(v, std::move(dims)); }
Tensor I64T(std::vector<int64_t> v, Dims dims) { return Tensor::FromVector<int64_t>(v, std::move(dims)); }
Tensor I64(std::vector<int64_t> v) { return I64T(v, {static_cast<int64_t>(v.size())}); }
Type TypeOf(const Tensor& t) {
  DimVector d(t.dims().begin(), t.dims().end());
  return Type::Tensor(t.dtype(), Shape(std::move(d)));
}
std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<float>(t.GetDouble(i)));
  return v;
}
std::vector<int64_t> Ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.GetInt(i));
  return v;
}

// One node whose inputs are graph inputs (run-time data) or constants.
struct OneOp {
  Graph g;
  Node* node = nullptr;
  std::vector<Tensor> feeds;
  OneOp(absl::string_view op, std::vector<Tensor> inputs, std::vector<std::optional<Tensor>> consts = {},
        int outputs = 1) {
    std::vector<Value*> ins;
    for (Tensor& t : inputs) {
      ins.push_back(g.AddInput(g.UniqueName("x"), TypeOf(t)));
      feeds.push_back(t);
    }
    for (auto& c : consts) ins.push_back(c ? g.AddConstant(g.UniqueName("c"), *c) : nullptr);
    node = g.AddNode(op, ins, outputs);
    for (int i = 0; i < outputs; ++i) g.AddOutput(node->output(i));
  }
  OneOp& Attr(const char* name, Attribute a) {
    node->SetAttr(name, std::move(a));
    return *this;
  }
  absl::Status Infer() { return InferShapes(g); }
  Type Out(int i = 0) const { return node->output(i)->type(); }
  absl::StatusOr<std::vector<Tensor>> Run() {
    absl::Status s = InferShapes(g);
    if (!s.ok()) return s;
    Executor ex;
    return ex.Run(g, feeds);
  }
};

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

// x = [[1, 2, 3], [4, 5, 6]]
Tensor X23() { return F32T({1, 2, 3, 4, 5, 6}, {2, 3}); }

TEST(ReductionOps, ReduceSumAxesInput) {
  OneOp op("ReduceSum", {X23()}, {I64({1})});
  op.Attr("keepdims", Attribute::Int(0));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "f32[2]");
  ExpectNear(Floats((*r)[0]), {6, 15});
}

TEST(ReductionOps, ReduceSumNoAxesReducesAllOrNothing) {
  OneOp all("ReduceSum", {X23()});
  auto r = all.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(all.Out().ToString(), "f32[1,1]");
  ExpectNear(Floats((*r)[0]), {21});

  OneOp noop("ReduceSum", {X23()}, {I64({})});
  noop.Attr("noop_with_empty_axes", Attribute::Int(1));
  r = noop.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(noop.Out().ToString(), "f32[2,3]");
  ExpectNear(Floats((*r)[0]), {1, 2, 3, 4, 5, 6});
}

TEST(ReductionOps, ReduceSumUnknownAxesInference) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape({Dim::Symbol("b"), 3, 1})));
  Value* a = g.AddInput("a", Type::Tensor(DType::kI64, Shape({2})));
  Node* keep = g.AddNode("ReduceSum", {x, a}, 1);
  Node* drop = g.AddNode("ReduceSum", {x, a}, 1);
  drop->SetAttr("keepdims", Attribute::Int(0));
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(keep->output(0)->type().ToString(), "f32[?,?,1]");
  EXPECT_EQ(drop->output(0)->type().ToString(), "f32[?]");
}

TEST(ReductionOps, ReduceSumUpgradeFromOpset11) {
  OneOp op("ReduceSum", {X23()});
  op.Attr("axes", Attribute::Ints({0}));
  const OpDef* def = OpRegistry::Global().Find(*op.node);
  ASSERT_TRUE(def->upgrade(op.g, op.node, 11).ok());
  EXPECT_FALSE(op.node->has_attr("axes"));
  ASSERT_EQ(op.node->num_inputs(), 2);
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "f32[1,3]");
  ExpectNear(Floats((*r)[0]), {5, 7, 9});
}

TEST(ReductionOps, AttributeReductions) {
  struct Case {
    const char* op;
    std::vector<float> want;  // over axis 1 of X23
  } cases[] = {
      {"ReduceMean", {2, 5}},
      {"ReduceMax", {3, 6}},
      {"ReduceMin", {1, 4}},
      {"ReduceProd", {6, 120}},
      {"ReduceL1", {6, 15}},
      {"ReduceL2", {std::sqrt(14.0f), std::sqrt(77.0f)}},
      {"ReduceSumSquare", {14, 77}},
      {"ReduceLogSum", {std::log(6.0f), std::log(15.0f)}},
      {"ReduceLogSumExp",
       {std::log(std::exp(1.0f) + std::exp(2.0f) + std::exp(3.0f)),
        std::log(std::exp(4.0f) + std::exp(5.0f) + std::exp(6.0f))}},
  };
  for (const Case& c : cases) {
    OneOp op(c.op, {X23()});
    op.Attr("axes", Attribute::Ints({-1})).Attr("keepdims", Attribute::Int(0));
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << c.op << ": " << r.status();
    EXPECT_EQ(op.Out().ToString(), "f32[2]") << c.op;
    ExpectNear(Floats((*r)[0]), c.want, 1e-4f);
  }
}

TEST(ReductionOps, ReduceOverMiddleAxesAndSymbolicDims) {
  Tensor x(DType::kF32, {2, 3, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i);
  OneOp op("ReduceMax", {x});
  op.Attr("axes", Attribute::Ints({0, 2}));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "f32[1,3,1]");
  ExpectNear(Floats((*r)[0]), {15, 19, 23});

  Graph g;
  Value* in = g.AddInput("x", Type::Tensor(DType::kF16, Shape({Dim::Symbol("batch"), 7, 5})));
  Node* n = g.AddNode("ReduceMean", {in}, 1);
  n->SetAttr("axes", Attribute::Ints({1}));
  n->SetAttr("keepdims", Attribute::Int(0));
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(n->output(0)->type().ToString(), "f16[batch,5]");
}

TEST(ReductionOps, IntegerAndHalfReductions) {
  OneOp op("ReduceSum", {Tensor::FromVector<int32_t>({2147483647, 1, 5, 6}, {2, 2})}, {I64({1})});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{-2147483648LL, 11}));  // wraps like int32

  OneOp mean("ReduceMean", {Tensor::FromVector<int64_t>({1, 2, 4, -7}, {4})});
  r = mean.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{0}));

  Tensor h(DType::kF16, {3});
  for (int i = 0; i < 3; ++i) h.data<Half>()[i] = Half(0.1f * (i + 1));
  OneOp hs("ReduceSum", {h});
  r = hs.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dtype(), DType::kF16);
  EXPECT_NEAR((*r)[0].GetDouble(0), 0.6, 1e-3);
}

TEST(ReductionOps, ReduceMaxPropagatesNaN) {
  OneOp op("ReduceMax", {F32T({1, NAN, 3}, {3})});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(std::isnan((*r)[0].GetDouble(0)));
}

TEST(ReductionOps, ReduceErrors) {
  OneOp bad("ReduceMean", {X23()});
  bad.Attr("axes", Attribute::Ints({2}));
  EXPECT_FALSE(bad.Infer().ok());
  // The kernel checks too (axes given at run time).
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape({2, 3})));
  Value* a = g.AddInput("a", Type::Tensor(DType::kI64, Shape({1})));
  Node* n = g.AddNode("ReduceSum", {x, a}, 1);
  g.AddOutput(n->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  Executor ex;
  auto r = ex.Run(g, {X23(), I64({5})});
  EXPECT_FALSE(r.ok());
  OneOp str("ReduceMax", {Tensor(DType::kBool, {2})});
  EXPECT_FALSE(str.Infer().ok());
}

TEST(ReductionOps, ArgMaxArgMin) {
  Tensor x = F32T({2, 5, 5, 1, 0, 1}, {2, 3});
  OneOp first("ArgMax", {x});
  first.Attr("axis", Attribute::Int(1));
  auto r = first.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(first.Out().ToString(), "i64[2,1]");
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{1, 0}));

  OneOp last("ArgMax", {x});
  last.Attr("axis", Attribute::Int(-1)).Attr("select_last_index", Attribute::Int(1)).Attr("keepdims", Attribute::Int(0));
  r = last.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(last.Out().ToString(), "i64[2]");
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{2, 2}));

  OneOp mn("ArgMin", {x});
  r = mn.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{1, 1, 1}));

  OneOp nan("ArgMax", {F32T({1, NAN, 7}, {3})});
  r = nan.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{1}));

  OneOp bad("ArgMax", {x});
  bad.Attr("axis", Attribute::Int(3));
  EXPECT_FALSE(bad.Infer().ok());
}

TEST(ReductionOps, CumSum) {
  Tensor x = F32T({1, 2, 3, 4, 5, 6}, {2, 3});
  OneOp plain("CumSum", {x}, {I64T({1}, {})});
  auto r = plain.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {1, 3, 6, 4, 9, 15});

  OneOp rev("CumSum", {x}, {Tensor::FromVector<int32_t>({0}, {})});
  rev.Attr("exclusive", Attribute::Int(1)).Attr("reverse", Attribute::Int(1));
  r = rev.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {4, 5, 6, 0, 0, 0});

  OneOp ints("CumSum", {Tensor::FromVector<int32_t>({1, -2, 3}, {3})}, {I64T({-1}, {})});
  r = ints.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{1, -1, 2}));

  OneOp bad("CumSum", {x}, {I64T({2}, {})});
  EXPECT_FALSE(bad.Infer().ok());
}

TEST(ReductionOps, Hardmax) {
  Tensor x = F32T({3, 0, 3, 1, 5, 2, 0, 0}, {2, 2, 2});
  OneOp op("Hardmax", {x});
  op.Attr("axis", Attribute::Int(1));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  // Along axis 1: pairs (3,3)->first, (0,1)->second, (5,0)->first, (2,0)->first.
  ExpectNear(Floats((*r)[0]), {1, 0, 0, 1, 1, 1, 0, 0});
}

TEST(ReductionOps, HardmaxUpgradeCoercesTo2D) {
  // Opset 11 with axis 1 on [2,2,2]: one-hot over the 4 elements of each batch.
  Tensor x = F32T({3, 0, 3, 1, 5, 2, 0, 7}, {2, 2, 2});
  OneOp op("Hardmax", {x});
  op.Attr("axis", Attribute::Int(1));
  std::string out_name = op.node->output(0)->name();
  const OpDef* def = OpRegistry::Global().Find(*op.node);
  ASSERT_TRUE(def->upgrade(op.g, op.node, 11).ok());
  EXPECT_EQ(op.g.outputs()[0]->name(), out_name);
  ASSERT_TRUE(InferShapes(op.g).ok());
  Executor ex;
  auto r = ex.Run(op.g, op.feeds);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dims(), (Dims{2, 2, 2}));
  ExpectNear(Floats((*r)[0]), {1, 0, 0, 0, 0, 0, 0, 1});
}

TEST(ReductionOps, HardmaxUpgradeLastAxisKeepsNode) {
  OneOp op("Hardmax", {F32T({1, 2, 3, 4}, {2, 2})});
  const OpDef* def = OpRegistry::Global().Find(*op.node);
  Node* before = op.node;
  ASSERT_TRUE(def->upgrade(op.g, op.node, 1).ok());
  EXPECT_EQ(op.g.num_nodes(), 1u);
  EXPECT_EQ(before->GetInt("axis", -1), 1);
}

TEST(ReductionOps, NegativeLogLikelihoodLoss) {
  // input [N=2, C=3], target [2]
  Tensor x = F32T({-1, -2, -3, -4, -5, -6}, {2, 3});
  Tensor t = I64T({2, 0}, {2});
  OneOp none("NegativeLogLikelihoodLoss", {x, t});
  none.Attr("reduction", Attribute::String("none"));
  auto r = none.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(none.Out().ToString(), "f32[2]");
  ExpectNear(Floats((*r)[0]), {3, 4});

  Tensor w = F32T({0.5f, 1, 2}, {3});
  OneOp mean("NegativeLogLikelihoodLoss", {x, t, w});
  r = mean.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(mean.Out().ToString(), "f32[]");
  ExpectNear(Floats((*r)[0]), {(3 * 2 + 4 * 0.5f) / 2.5f});

  OneOp ii("NegativeLogLikelihoodLoss", {x, t});
  ii.Attr("ignore_index", Attribute::Int(2));
  r = ii.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {4});

  OneOp oob("NegativeLogLikelihoodLoss", {x, I64T({3, 0}, {2})});
  EXPECT_FALSE(oob.Run().ok());
}

TEST(ReductionOps, SoftmaxCrossEntropyLoss) {
  Tensor x = F32T({1, 2, 3, 1, 1, 1}, {2, 3});
  Tensor t = I64T({2, 1}, {2});
  OneOp op("SoftmaxCrossEntropyLoss", {x, t}, {}, 2);
  op.Attr("reduction", Attribute::String("sum"));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  double lse1 = std::log(3.0);
  ExpectNear(Floats((*r)[0]), {static_cast<float>((lse0 - 3) + lse1)});
  EXPECT_EQ(op.Out(1).ToString(), "f32[2,3]");
  EXPECT_NEAR((*r)[1].GetDouble(0), 1 - lse0, 1e-5);
  EXPECT_NEAR((*r)[1].GetDouble(4), -lse1, 1e-5);  // row [1,1,1]: log(1/3)
}

TEST(ReductionOps, EmptyInputs) {
  Tensor e(DType::kF32, {2, 0});
  OneOp sum("ReduceSum", {e}, {I64({1})});
  auto r = sum.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {0, 0});
  OneOp mx("ReduceMax", {e});
  mx.Attr("axes", Attribute::Ints({1}));
  r = mx.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(std::isinf((*r)[0].GetDouble(0)));
  OneOp arg("ArgMax", {e});
  arg.Attr("axis", Attribute::Int(1));
  EXPECT_FALSE(arg.Run().ok());
  OneOp hm("Hardmax", {e});
  r = hm.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].numel(), 0);
  OneOp cs("CumSum", {F32T({1}, {})}, {I64T({0}, {})});
  EXPECT_FALSE(cs.Run().ok());
  OneOp scalar("ReduceSum", {F32T({4}, {})});
  r = scalar.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {4});
}

}  // namespace
}  // namespace kiln
