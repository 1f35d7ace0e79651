//===- gears_test.cc - Static-shape gears on the reference executor ---===//
//
// A graph compiled for gears computes what it computed before for inputs of
// every gear, through the variant its inputs fit; an input of another shape
// is an error naming the gears. After the default pipeline each variant is
// static and its shape plumbing is folded away.
//
//===----------------------------------------------------------------------===//
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "graph/passes/gears.h"
#include "graph/passes/pass_manager.h"
#include "graph/verifier/verifier.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// PyTorch-style dynamic export: the batch is read back from the input's
// shape to build a Reshape target.
constexpr const char* kModel = R"(graph @main(%x: f32[batch,6], %len: f32[batch,seq]) {
  %w = const f32[6,4] dense [1.0, 0.5, 0.0, 0.0, 0.0, 1.0, 0.5, 0.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 2.0, 0.0, 2.0]
  %i0 = const i64[1] dense [0]
  %tail = const i64[1] dense [2]
  %two = const i64[1] dense [2]
  %shp = Shape(%x) : i64[2]
  %b = Gather(%shp, %i0) {axis = 0} : i64[1]
  %target = Concat(%b, %tail, %two) {axis = 0} : i64[3]
  %mm = MatMul(%x, %w) : f32[batch,4]
  %r = Reshape(%mm, %target) : f32[batch,2,2]
  %y = Relu(%r) : f32[batch,2,2]
  %s = ReduceSum(%len) {keepdims = 0} : f32[]
  return %y, %s
})";

Tensor Filled(Dims dims, float start) {
  Tensor t(DType::kF32, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + 0.25f * static_cast<float>(i % 13) - 1.0f;
  return t;
}

absl::StatusOr<std::vector<Tensor>> RunModel(const Model& m, int64_t batch, int64_t seq) {
  Executor exec;
  return exec.Run(*m.graph, {Filled({batch, 6}, 0.5f), Filled({batch, seq}, 1.0f)});
}

Model Parsed() {
  auto m = ParseModel(kModel, "gears.kir");
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(*m);
}

TEST(GearsTest, EveryGearComputesWhatTheGraphComputed) {
  Model original = Parsed();
  Model geared = Parsed();
  PassOptions options;
  options.dynamic_batch = {1, 2, 8};
  options.dynamic_dims = {{"seq", {3, 5}}};
  PassManager pm(options);
  ASSERT_TRUE(pm.AddPipeline("gears,default").ok());
  auto changed = pm.Run(geared);
  ASSERT_TRUE(changed.ok()) << changed.status();
  ASSERT_TRUE(*changed);
  ASSERT_TRUE(VerifyModel(geared).ok()) << VerifyModel(geared);

  // The interface is unchanged; the body is one dispatch over 6 variants.
  ASSERT_EQ(geared.graph->num_nodes(), 1u);
  const Node* dispatch = *geared.graph->nodes().begin();
  EXPECT_EQ(dispatch->QualifiedOp(), "kiln.GearDispatch");
  EXPECT_EQ(dispatch->attr("variants")->graphs().size(), 6u);
  EXPECT_EQ(geared.graph->inputs()[0]->type().ToString(), "f32[batch,6]");
  EXPECT_EQ(geared.graph->outputs()[0]->name(), "y");
  for (const auto& v : dispatch->attr("variants")->graphs()) {
    for (const Value* in : v->inputs()) EXPECT_TRUE(in->type().shape().is_static()) << v->name();
    for (const Node* n : v->nodes()) {
      EXPECT_NE(n->op(), "Shape") << v->name() << ": shape plumbing left";
      EXPECT_NE(n->op(), "Gather") << v->name() << ": shape plumbing left";
      EXPECT_NE(n->op(), "Concat") << v->name() << ": shape plumbing left";
      // The Reshape's target is a constant now.
      if (n->op() == "Reshape") {
        EXPECT_TRUE(n->input(1)->is_constant()) << v->name();
      }
    }
  }

  for (int64_t batch : {1, 2, 8}) {
    for (int64_t seq : {3, 5}) {
      SCOPED_TRACE(absl::StrCat("batch ", batch, " seq ", seq));
      auto want = RunModel(original, batch, seq);
      auto got = RunModel(geared, batch, seq);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), want->size());
      for (size_t i = 0; i < got->size(); ++i) EXPECT_TRUE((*got)[i].Equals((*want)[i])) << "output " << i;
    }
  }
}

TEST(GearsTest, AnInputOfNoGearIsAnErrorNamingTheGears) {
  Model geared = Parsed();
  auto r = CompileGears(*geared.graph, {{1, 2, 4, 8}, {}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->variants, 4);
  auto out = RunModel(geared, 3, 5);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "input 'x' has shape [3,6]; the model was compiled for batch 1, 2, 4, 8");
  // Every shape of a gear still runs, any seq (seq has no gears).
  EXPECT_TRUE(RunModel(geared, 4, 7).ok());
}

TEST(GearsTest, InputsOfDifferentGearsAreAnError) {
  // Each input alone fits a gear (seq 2 and seq 4), but not the same one.
  auto m = ParseModel(R"(graph @main(%a: f32[n,seq], %b: f32[seq]) {
  %c = Add(%a, %b) : f32[n,seq]
  return %c
})");
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(CompileGears(*m->graph, {{}, {{"seq", {2, 4}}}}).ok());
  Executor exec;
  auto out = exec.Run(*m->graph, {Filled({1, 2}, 0), Filled({4}, 0)});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "inputs 'a' [1,2], 'b' [4] fit no single gear; the model was compiled for seq 2, 4");
}

TEST(GearsTest, NothingToDoWithoutGears) {
  Model m = Parsed();
  std::string before = PrintModel(m);
  auto r = CompileGears(*m.graph, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->variants, 0);
  EXPECT_EQ(PrintModel(m), before);
}

TEST(GearsTest, ErrorsAUserCanCause) {
  Model m = Parsed();
  std::string before = PrintModel(m);
  auto many = CompileGears(*m.graph, {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {{"seq", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}}});
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.status().message(), "gears: 110 variants requested (batch: 11 x seq: 10 values); at most 100 are allowed");
  auto zero = CompileGears(*m.graph, {{0}, {}});
  EXPECT_FALSE(zero.ok());
  auto unknown = CompileGears(*m.graph, {{}, {{"heads", {2}}}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(std::string(unknown.status().message()).find("'heads'"), std::string::npos);
  // A variant whose inference fails names the gear; the graph is untouched.
  auto bad = ParseModel(R"(graph @main(%x: f32[n,4]) {
  %t = const i64[2] dense [2, 4]
  %r = Reshape(%x, %t) : f32[2,4]
  return %r
})");
  ASSERT_TRUE(bad.ok());
  std::string bad_before = PrintModel(*bad);
  auto r = CompileGears(*bad->graph, {{2, 3}, {}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("gears: variant batch3: "), std::string::npos) << r.status();
  EXPECT_EQ(PrintModel(*bad), bad_before);
  EXPECT_EQ(PrintModel(m), before);
}

TEST(GearsTest, NestedGraphsAreSpecializedToo) {
  auto m = ParseModel(R"(graph @main(%x: f32[batch,3], %c: bool[]) {
  %r = If(%c) {else_branch = graph @else() {
    %n = Neg(%x) : f32[batch,3]
    return %n
  }, then_branch = graph @then() {
    return %x
  }} : f32[batch,3]
  return %r
})");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(CompileGears(*m->graph, {{2}, {}}).ok());
  ASSERT_TRUE(VerifyModel(*m).ok()) << VerifyModel(*m);
  std::string text = PrintModel(*m);
  EXPECT_NE(text.find("%n = Neg(%x.0) : f32[2,3]"), std::string::npos) << text;
  Executor exec;
  Tensor cond = Tensor::Scalar<bool>(false);
  auto out = exec.Run(*m->graph, {Filled({2, 3}, 0), cond});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[0], -Filled({2, 3}, 0).data<float>()[0]);
}

// The standalone variants a target compiles one by one: the same gears in
// the same order as the dispatch, value names kept, every type static where
// the gear fixes the symbols, and each computing what the graph computed.
TEST(GearsTest, SpecializedGearsAreStandaloneCopies) {
  Model original = Parsed();
  auto gears = SpecializeGears(*original.graph, GearsRequest{{1, 8}, {{"seq", {3, 5}}}});
  ASSERT_TRUE(gears.ok()) << gears.status();
  EXPECT_EQ(gears->symbols, (std::vector<std::string>{"batch", "seq"}));
  ASSERT_EQ(gears->gears.size(), 4u);
  const std::vector<std::vector<int64_t>> values = {{1, 3}, {1, 5}, {8, 3}, {8, 5}};
  for (size_t i = 0; i < gears->gears.size(); ++i) {
    const GearVariant& gear = gears->gears[i];
    EXPECT_EQ(gear.values, values[i]);
    Model m;
    m.opsets = original.opsets;
    m.graph = original.graph->Clone();
    Model variant;
    variant.opsets = original.opsets;
    variant.graph = gear.graph->Clone();
    ASSERT_TRUE(VerifyModel(variant).ok()) << VerifyModel(variant);
    EXPECT_EQ(variant.graph->name(), "main");
    EXPECT_EQ(variant.graph->parent(), nullptr);
    EXPECT_EQ(variant.graph->inputs()[0]->name(), "x");
    EXPECT_EQ(variant.graph->outputs()[0]->name(), "y");
    EXPECT_EQ(variant.graph->inputs()[0]->type().ToString(), absl::StrCat("f32[", values[i][0], ",6]"));
    EXPECT_EQ(variant.graph->outputs()[0]->type().ToString(), absl::StrCat("f32[", values[i][0], ",2,2]"));
    auto want = RunModel(m, values[i][0], values[i][1]);
    auto got = RunModel(variant, values[i][0], values[i][1]);
    ASSERT_TRUE(want.ok() && got.ok());
    for (size_t k = 0; k < want->size(); ++k) EXPECT_TRUE((*want)[k].Equals((*got)[k])) << "gear " << i << " out " << k;
  }
  // The original is untouched, and requests are checked as for the pass.
  EXPECT_EQ(original.graph->inputs()[0]->type().ToString(), "f32[batch,6]");
  EXPECT_FALSE(SpecializeGears(*original.graph, GearsRequest{{2, 2}, {}}).ok());
  EXPECT_FALSE(SpecializeGears(*original.graph, GearsRequest{{}, {{"nosuch", {2}}}}).ok());
  auto none = SpecializeGears(*original.graph, GearsRequest{});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->gears.empty());
}

}  // namespace
}  // namespace kiln
