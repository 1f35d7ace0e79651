//===- fold_constants_test.cc - fold-constants options and results ---------===//
#include "graph/passes/fold_constants.h"

#include "absl/strings/str_cat.h"
#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "graph/passes/pass_manager.h"
#include "graph/verifier/verifier.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

Model Parse(const std::string& text) {
  auto m = ParseModel(text, "<test>");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : Model();
}

int CountOp(const Graph& g, absl::string_view op) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op() == op;
  return n;
}

constexpr const char* kTiles = R"(
graph @main(%x: f32[2]) {
  %two = const f32[2] dense [1.0, 2.0]
  %r2 = const i64[1] dense [2]
  %r3 = const i64[1] dense [3]
  %small = Tile(%two, %r2)
  %large = Tile(%two, %r3)
  %y = Add(%x, %two)
  return %small, %large, %y
}
)";

TEST(FoldConstantsTest, MaxElementsLimitsWhatFolds) {
  Model m = Parse(kTiles);
  PassOptions options;
  options.fold_max_elements = 4;
  PassManager pm(options);
  ASSERT_TRUE(pm.AddPipeline("fold-constants").ok());
  auto changed = pm.Run(m);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(CountOp(*m.graph, "Tile"), 1);  // the 6-element one stays
  EXPECT_NE(pm.StatsReport().find("folds-skipped-size"), std::string::npos) << pm.StatsReport();
  EXPECT_TRUE(VerifyModel(m).ok());
}

// Views of a constant (Identity, Reshape) share its bytes: they fold
// whatever their size.
TEST(FoldConstantsTest, ViewsFoldPastTheLimit) {
  Model m = Parse(R"(
graph @main(%x: f32[6]) {
  %six = const f32[6] dense [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  %shape = const i64[2] dense [2, 3]
  %id = Identity(%six)
  %r = Reshape(%six, %shape)
  %n = Neg(%six)
  %y = Add(%x, %id)
  return %y, %r, %n
}
)");
  FoldReport r = FoldConstants(*m.graph, 4);
  EXPECT_EQ(r.nodes_removed, 2);
  EXPECT_EQ(r.skipped_size, 1);  // Neg would create 6 new elements
  EXPECT_EQ(CountOp(*m.graph, "Neg"), 1);
  EXPECT_TRUE(m.graph->outputs()[1]->is_constant());
  EXPECT_TRUE(m.graph->outputs()[1]->constant().SharesStorageWith(m.graph->Lookup("six")->constant()));
  EXPECT_TRUE(VerifyModel(m).ok());
}

TEST(FoldConstantsTest, FreeFunctionReportsCounts) {
  Model m = Parse(kTiles);
  FoldReport r = FoldConstants(*m.graph, 1 << 20);
  EXPECT_EQ(r.nodes_removed, 2);
  EXPECT_EQ(r.constants_folded, 2);
  EXPECT_EQ(r.skipped_size, 0);
  // The folded outputs keep their names: they are graph outputs.
  EXPECT_EQ(m.graph->outputs()[0]->name(), "small");
  EXPECT_TRUE(m.graph->outputs()[0]->is_constant());
  EXPECT_EQ(m.graph->outputs()[1]->name(), "large");
  Executor exec;
  auto out = exec.Run(*m.graph, {Tensor::FromVector<float>({1, 1}, {2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[1].numel(), 6);
  EXPECT_EQ((*out)[1].data<float>()[5], 2.0f);
}

// Folding in a Loop body: the body's constant-only node becomes a constant
// of the body, and the loop still runs the same.
TEST(FoldConstantsTest, FoldsInsideBodiesAndKeepsResults) {
  const char* text = R"(
graph @main(%n: i64[], %x: f32[2]) {
  %true = const bool[] dense [true]
  %a = const f32[2] dense [1.0, 2.0]
  %l = Loop(%n, %true, %x) {body = graph @body(%i: i64[], %c: bool[], %v: f32[2]) {
    %k = Mul(%a, %a)
    %w = Add(%v, %k)
    return %c, %w
  }}
  return %l
}
)";
  Model m = Parse(text);
  std::vector<Tensor> inputs = {Tensor::Scalar<int64_t>(3), Tensor::FromVector<float>({0.5f, 0.25f}, {2})};
  Executor before;
  auto expected = before.Run(*m.graph, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status();
  FoldReport r = FoldConstants(*m.graph, 1 << 20);
  EXPECT_EQ(r.nodes_removed, 1);
  ASSERT_TRUE(VerifyModel(m).ok()) << VerifyModel(m);
  Executor after;
  auto actual = after.Run(*m.graph, inputs);
  ASSERT_TRUE(actual.ok()) << actual.status();
  EXPECT_TRUE((*expected)[0].Equals((*actual)[0]));
}

}  // namespace
}  // namespace kiln
