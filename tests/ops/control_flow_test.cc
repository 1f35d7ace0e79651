// Tests of If, Loop and Scan: inference from the subgraphs, kernels run
// through the executor, and the opset-8 Scan upgrader.
#include <gtest/gtest.h>

#include "graph/exec/executor.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"

namespace kiln {
namespace {

Type F32(DimVector dims) { return Type::Tensor(DType::kF32, Shape(std::move(dims))); }
Type I64Scalar() { return Type::Tensor(DType::kI64, Shape::Scalar()); }
Type BoolScalar() { return Type::Tensor(DType::kBool, Shape::Scalar()); }

Tensor F32s(std::vector<float> v, Dims dims) { return Tensor::FromVector<float>(v, std::move(dims)); }

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<float>(t.GetDouble(i)));
  return v;
}

absl::StatusOr<std::vector<Tensor>> InferAndRun(Graph& g, std::vector<Tensor> inputs) {
  absl::Status s = InferShapes(g);
  if (!s.ok()) return s;
  Executor ex;
  return ex.Run(g, std::move(inputs));
}

//===--- If ---------------------------------------------------------------===//

// If(cond) with then = x + 1 (shape [2]) and else = a constant of shape `else_dims`.
struct IfGraph {
  Graph g;
  Node* node;
  IfGraph(Dims else_dims) {
    Value* cond = g.AddInput("cond", BoolScalar());
    Value* x = g.AddInput("x", F32({2}));
    node = g.AddNode("If", {cond}, {"y"});
    auto then_g = std::make_unique<Graph>("then", &g);
    Value* one = then_g->AddConstant("one", F32s({1}, {}));
    Node* add = then_g->AddNode("Add", {x, one}, {"t_out"});
    then_g->AddOutput(add->output(0));
    auto else_g = std::make_unique<Graph>("else", &g);
    Tensor c(DType::kF32, else_dims);
    for (int64_t i = 0; i < c.numel(); ++i) c.data<float>()[i] = -1.f - static_cast<float>(i);
    else_g->AddOutput(else_g->AddConstant("e_out", c));
    node->SetAttr("then_branch", Attribute::GraphValue(std::move(then_g)));
    node->SetAttr("else_branch", Attribute::GraphValue(std::move(else_g)));
    g.AddOutput(node->output(0));
  }
};

TEST(ControlFlow, IfRunsTheChosenBranch) {
  IfGraph ig({2});
  auto r = InferAndRun(ig.g, {Tensor::Scalar<bool>(true), F32s({3, 4}, {2})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{4, 5}));
  EXPECT_EQ(ig.node->output(0)->type().ToString(), "f32[2]");
  Executor ex;
  auto e = ex.Run(ig.g, {Tensor::Scalar<bool>(false), F32s({3, 4}, {2})});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(Floats((*e)[0]), (std::vector<float>{-1, -2}));
}

TEST(ControlFlow, IfMergesDisagreeingBranchShapes) {
  IfGraph ig({3});
  ASSERT_TRUE(InferShapes(ig.g).ok());
  EXPECT_EQ(ig.node->output(0)->type().ToString(), "f32[?]");
  Executor ex;
  auto e = ex.Run(ig.g, {Tensor::Scalar<bool>(false), F32s({3, 4}, {2})});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)[0].dims(), (Dims{3}));
}

TEST(ControlFlow, IfRejectsBranchArityMismatch) {
  // A second output the branches do not yield.
  Graph g2;
  Value* c = g2.AddInput("c", BoolScalar());
  Node* bad = g2.AddNode("If", {c}, 2);
  auto t = std::make_unique<Graph>("t", &g2);
  t->AddOutput(t->AddConstant("a", F32s({1}, {1})));
  auto e = std::make_unique<Graph>("e", &g2);
  e->AddOutput(e->AddConstant("b", F32s({1}, {1})));
  bad->SetAttr("then_branch", Attribute::GraphValue(std::move(t)));
  bad->SetAttr("else_branch", Attribute::GraphValue(std::move(e)));
  absl::Status s = InferShapes(g2);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("yields"), std::string::npos) << s;
}

TEST(ControlFlow, IfRejectsSequenceBranches) {
  Graph g;
  Value* c = g.AddInput("c", BoolScalar());
  Node* n = g.AddNode("If", {c}, 1);
  auto t = std::make_unique<Graph>("t", &g);
  t->AddOutput(t->AddInput("s", Type::Sequence(F32({1}))));
  auto e = std::make_unique<Graph>("e", &g);
  e->AddOutput(e->AddInput("s2", Type::Sequence(F32({1}))));
  n->SetAttr("then_branch", Attribute::GraphValue(std::move(t)));
  n->SetAttr("else_branch", Attribute::GraphValue(std::move(e)));
  absl::Status s = InferShapes(g);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sequence values are not supported"), std::string::npos) << s;
}

//===--- Loop -------------------------------------------------------------===//

// Loop(M, cond, y): y += float(i); scan output y. The body's condition is
// y_out < limit.
struct LoopGraph {
  Graph g;
  Node* node;
  LoopGraph(bool with_m, bool with_cond, float limit) {
    Value* m = with_m ? g.AddInput("M", I64Scalar()) : nullptr;
    Value* cond = with_cond ? g.AddInput("cond", BoolScalar()) : nullptr;
    Value* y = g.AddInput("y", F32({1}));
    node = g.AddNode("Loop", {m, cond, y}, {"y_final", "y_scan"});
    auto body = std::make_unique<Graph>("body", &g);
    Value* it = body->AddInput("i", I64Scalar());
    body->AddInput("c_in", BoolScalar());
    Value* y_in = body->AddInput("y_in", F32({1}));
    Node* cast = body->AddNode("Cast", {it}, {"i_f"});
    cast->SetAttr("to", Attribute::Int(1));
    Node* add = body->AddNode("Add", {y_in, cast->output(0)}, {"y_out"});
    Value* lim = body->AddConstant("limit", F32s({limit}, {1}));
    Node* less = body->AddNode("Less", {add->output(0), lim}, {"lt"});
    Node* squeeze_c = body->AddNode("Identity", {less->output(0)}, {"c_out"});
    Node* scan = body->AddNode("Identity", {add->output(0)}, {"scan_out"});
    body->AddOutput(squeeze_c->output(0));
    body->AddOutput(add->output(0));
    body->AddOutput(scan->output(0));
    node->SetAttr("body", Attribute::GraphValue(std::move(body)));
    g.AddOutput(node->output(0));
    g.AddOutput(node->output(1));
  }
};

TEST(ControlFlow, LoopWithTripCountAndCondition) {
  LoopGraph lg(true, true, 100.f);
  auto r = InferAndRun(lg.g, {Tensor::Scalar<int64_t>(5), Tensor::Scalar<bool>(true), F32s({0}, {1})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{10}));
  EXPECT_EQ((*r)[1].dims(), (Dims{5, 1}));
  EXPECT_EQ(Floats((*r)[1]), (std::vector<float>{0, 1, 3, 6, 10}));
  EXPECT_EQ(lg.node->output(0)->type().ToString(), "f32[1]");
  EXPECT_EQ(lg.node->output(1)->type().ToString(), "f32[?,1]");
}

TEST(ControlFlow, LoopStopsOnBodyCondition) {
  // y: 0, 1, 3, 6 -> 6 is not < 5, so the loop stops after 4 iterations.
  LoopGraph lg(true, true, 5.f);
  auto r = InferAndRun(lg.g, {Tensor::Scalar<int64_t>(100), Tensor::Scalar<bool>(true), F32s({0}, {1})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[1]), (std::vector<float>{0, 1, 3, 6}));
}

TEST(ControlFlow, LoopWhileWithoutTripCount) {
  LoopGraph lg(false, true, 5.f);
  auto r = InferAndRun(lg.g, {Tensor::Scalar<bool>(true), F32s({0}, {1})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{6}));
}

TEST(ControlFlow, LoopForIgnoresBodyCondition) {
  LoopGraph lg(true, false, 0.f);
  auto r = InferAndRun(lg.g, {Tensor::Scalar<int64_t>(3), F32s({0}, {1})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{3}));
}

TEST(ControlFlow, LoopZeroIterations) {
  LoopGraph lg(true, true, 100.f);
  auto r = InferAndRun(lg.g, {Tensor::Scalar<int64_t>(0), Tensor::Scalar<bool>(true), F32s({7}, {1})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{7}));
  EXPECT_EQ((*r)[1].dims(), (Dims{0, 1}));
}

TEST(ControlFlow, LoopStaticTripCountInference) {
  Graph g;
  Value* m = g.AddConstant("M", Tensor::Scalar<int64_t>(4));
  Value* y = g.AddInput("y", F32({1}));
  Node* n = g.AddNode("Loop", {m, nullptr, y}, {"yf", "ys"});
  auto body = std::make_unique<Graph>("body", &g);
  body->AddInput("i", I64Scalar());
  Value* c = body->AddInput("c", BoolScalar());
  Value* yi = body->AddInput("yi", F32({1}));
  body->AddOutput(c);
  body->AddOutput(yi);
  body->AddOutput(yi);
  n->SetAttr("body", Attribute::GraphValue(std::move(body)));
  g.AddOutput(n->output(0));
  g.AddOutput(n->output(1));
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(n->output(1)->type().ToString(), "f32[4,1]");
  Executor ex;
  auto r = ex.Run(g, {F32s({2}, {1})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[1]), (std::vector<float>{2, 2, 2, 2}));
}

TEST(ControlFlow, LoopRejectsBadBodySignature) {
  Graph g;
  Value* y = g.AddInput("y", F32({1}));
  Node* n = g.AddNode("Loop", {nullptr, nullptr, y}, 1);
  auto body = std::make_unique<Graph>("body", &g);
  body->AddInput("i", I64Scalar());
  Value* yi = body->AddInput("yi", F32({1}));
  body->AddOutput(yi);
  n->SetAttr("body", Attribute::GraphValue(std::move(body)));
  absl::Status s = InferShapes(g);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("body takes 2 inputs, expected 3"), std::string::npos) << s;
}

//===--- Scan -------------------------------------------------------------===//

// Scan(init [2], x): state += slice; scan output = state.
struct ScanGraph {
  Graph g;
  Node* node;
  ScanGraph(Type x_type) {
    Value* init = g.AddInput("init", F32({2}));
    Value* x = g.AddInput("x", std::move(x_type));
    node = g.AddNode("Scan", {init, x}, {"final", "scan"});
    auto body = std::make_unique<Graph>("body", &g);
    Value* s = body->AddInput("s", F32({2}));
    Value* e = body->AddInput("e", F32({2}));
    Node* add = body->AddNode("Add", {s, e}, {"s_out"});
    Node* id = body->AddNode("Identity", {add->output(0)}, {"o"});
    body->AddOutput(add->output(0));
    body->AddOutput(id->output(0));
    node->SetAttr("body", Attribute::GraphValue(std::move(body)));
    node->SetAttr("num_scan_inputs", Attribute::Int(1));
    g.AddOutput(node->output(0));
    g.AddOutput(node->output(1));
  }
};

TEST(ControlFlow, ScanSum) {
  ScanGraph sg(F32({3, 2}));
  auto r = InferAndRun(sg.g, {F32s({0, 0}, {2}), F32s({1, 2, 3, 4, 5, 6}, {3, 2})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{9, 12}));
  EXPECT_EQ(Floats((*r)[1]), (std::vector<float>{1, 2, 4, 6, 9, 12}));
  EXPECT_EQ(sg.node->output(1)->type().ToString(), "f32[3,2]");
}

TEST(ControlFlow, ScanAxesAndDirections) {
  // Scan along axis 1 of a [2, 3] input, backwards; stack along axis 1, prepending.
  ScanGraph sg(F32({2, 3}));
  sg.node->SetAttr("scan_input_axes", Attribute::Ints({1}));
  sg.node->SetAttr("scan_input_directions", Attribute::Ints({1}));
  sg.node->SetAttr("scan_output_axes", Attribute::Ints({-1}));
  sg.node->SetAttr("scan_output_directions", Attribute::Ints({1}));
  // x columns: [1,4], [2,5], [3,6]; visited backwards: [3,6], [2,5], [1,4].
  auto r = InferAndRun(sg.g, {F32s({0, 0}, {2}), F32s({1, 2, 3, 4, 5, 6}, {2, 3})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{6, 15}));
  // States after each step: [3,6], [5,11], [6,15]; prepended along axis 1.
  EXPECT_EQ((*r)[1].dims(), (Dims{2, 3}));
  EXPECT_EQ(Floats((*r)[1]), (std::vector<float>{6, 5, 3, 15, 11, 6}));
  EXPECT_EQ(sg.node->output(1)->type().ToString(), "f32[2,3]");
}

TEST(ControlFlow, ScanRejectsMismatchedSequenceLengths) {
  Graph g;
  Value* a = g.AddInput("a", F32({3, 2}));
  Value* b = g.AddInput("b", F32({4, 2}));
  Node* n = g.AddNode("Scan", {a, b}, 1);
  auto body = std::make_unique<Graph>("body", &g);
  Value* ea = body->AddInput("ea", F32({2}));
  body->AddInput("eb", F32({2}));
  body->AddOutput(ea);
  n->SetAttr("body", Attribute::GraphValue(std::move(body)));
  n->SetAttr("num_scan_inputs", Attribute::Int(2));
  absl::Status s = InferShapes(g);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sequence length"), std::string::npos) << s;
}

TEST(ControlFlow, Scan8UpgradeAddsBatchLoop) {
  // Opset-8 form: (sequence_lens = none, init [B, 2], x [B, 3, 2]).
  Graph g;
  Value* init = g.AddInput("init", F32({2, 2}));
  Value* x = g.AddInput("x", F32({2, 3, 2}));
  Node* n = g.AddNode("Scan", {nullptr, init, x}, {"final", "scan"});
  auto body = std::make_unique<Graph>("body", &g);
  Value* s = body->AddInput("s", F32({2}));
  Value* e = body->AddInput("e", F32({2}));
  Node* add = body->AddNode("Add", {s, e}, {"s_out"});
  Node* id = body->AddNode("Identity", {add->output(0)}, {"o"});
  body->AddOutput(add->output(0));
  body->AddOutput(id->output(0));
  n->SetAttr("body", Attribute::GraphValue(std::move(body)));
  n->SetAttr("num_scan_inputs", Attribute::Int(1));
  n->SetAttr("directions", Attribute::Ints({1}));
  g.AddOutput(n->output(0));
  g.AddOutput(n->output(1));
  const OpDef* def = OpRegistry::Global().Find("", "Scan");
  ASSERT_TRUE(def && def->upgrade);
  absl::Status up = def->upgrade(g, n, 8);
  ASSERT_TRUE(up.ok()) << up;
  EXPECT_EQ(n->num_inputs(), 2);
  EXPECT_FALSE(n->has_attr("directions"));
  auto r = InferAndRun(g, {F32s({0, 0, 100, 100}, {2, 2}), F32s({1, 2, 3, 4, 5, 6, 1, 1, 2, 2, 3, 3}, {2, 3, 2})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{9, 12, 106, 106}));
  // Backwards over each batch entry.
  EXPECT_EQ(Floats((*r)[1]), (std::vector<float>{5, 6, 8, 10, 9, 12, 103, 103, 105, 105, 106, 106}));
  EXPECT_EQ(n->output(1)->type().ToString(), "f32[2,3,2]");
}

TEST(ControlFlow, Scan8RejectsSequenceLens) {
  Graph g;
  Value* lens = g.AddInput("lens", Type::Tensor(DType::kI32, Shape({1})));
  Value* x = g.AddInput("x", F32({1, 3, 2}));
  Node* n = g.AddNode("Scan", {lens, x}, 1);
  auto body = std::make_unique<Graph>("body", &g);
  Value* e = body->AddInput("e", F32({2}));
  body->AddOutput(e);
  n->SetAttr("body", Attribute::GraphValue(std::move(body)));
  n->SetAttr("num_scan_inputs", Attribute::Int(1));
  absl::Status s = OpRegistry::Global().Find("", "Scan")->upgrade(g, n, 8);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sequence_lens"), std::string::npos) << s;
}

}  // namespace
}  // namespace kiln
