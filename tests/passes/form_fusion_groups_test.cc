//===- form_fusion_groups_test.cc - Fusion groups against the reference executor ---===//
//
// form-fusion-groups never changes what a graph computes: random graphs
// (chains, diamonds, long edges, values read by nested graphs, matmuls,
// reductions, casts) and the ONNX backend test data give bit-identical
// results before and after it, every result verifies, and the partition is
// deterministic. kiln.Fused reports the cost of its body less the
// intermediates it keeps out of memory.
//
//===----------------------------------------------------------------------===//
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/form_fusion_groups.h"
#include "graph/passes/fusion/outline.h"
#include "graph/passes/pass_manager.h"
#include "graph/verifier/verifier.h"
#include "gtest/gtest.h"
#include "tests/passes/pipeline_conformance.h"
#include "tools/conformance/conformance.h"

namespace kiln {
namespace {

// A small deterministic generator (the same sequence on every machine).
struct Rng {
  uint64_t s;
  uint32_t Next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(s >> 33);
  }
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint32_t>(n)); }
};

Tensor RandomTensor(DType dt, const Dims& dims, Rng& rng) {
  Tensor t(dt, dims);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = static_cast<float>(rng.Below(2001) - 1000) / 500.0f;
    if (dt == DType::kF32) t.data<float>()[i] = v;
  }
  return t;
}

// A random graph of about `n` nodes over f32[4,4] values, with broadcast
// operands, reductions kept to rank 2, casts through f16, matmuls,
// transposes, softmax, and every so often an If whose branches read values
// of the main graph.
Model RandomModel(uint64_t seed, int n) {
  Rng rng{seed};
  Model m;
  Graph& g = *m.graph;
  std::vector<Value*> square = {g.AddInput("a", Type::Tensor(DType::kF32, Shape::Static({4, 4}))),
                                g.AddInput("b", Type::Tensor(DType::kF32, Shape::Static({4, 4})))};
  std::vector<Value*> rows = {g.AddInput("r", Type::Tensor(DType::kF32, Shape::Static({4, 1})))};
  Value* vec = g.AddConstant("v", Tensor::FromVector<float>({0.5f, -1.0f, 2.0f, 0.25f}, {4}));
  Value* w = g.AddConstant("w", RandomTensor(DType::kF32, {4, 4}, rng));
  Value* two = g.AddConstant("two", Tensor::Scalar<float>(2.0f));
  auto pick = [&](const std::vector<Value*>& pool) {
    // Mostly recent values (chains), sometimes any (long edges, diamonds).
    int k = static_cast<int>(pool.size());
    if (rng.Below(3) != 0) return pool[k - 1 - rng.Below(std::min(k, 3))];
    return pool[rng.Below(k)];
  };
  auto add = [&](const char* op, std::vector<Value*> ins) { return g.AddNode(op, std::move(ins), 1); };
  for (int i = 0; i < n; ++i) {
    Value* x = pick(square);
    Node* node = nullptr;
    switch (rng.Below(16)) {
      case 0: node = add("Relu", {x}); break;
      case 1: node = add("Neg", {x}); break;
      case 2: node = add("Tanh", {x}); break;
      case 3: node = add("Add", {x, pick(square)}); break;
      case 4: node = add("Mul", {x, pick(square)}); break;
      case 5: node = add("Sub", {x, vec}); break;
      case 6: node = add("Mul", {x, two}); break;
      case 7: node = add("Add", {x, pick(rows)}); break;
      case 8: {
        Node* h = add("Cast", {x});
        h->SetAttr("to", Attribute::Int(static_cast<int64_t>(10)));  // f16
        node = add("Cast", {h->output(0)});
        node->SetAttr("to", Attribute::Int(1));
        break;
      }
      case 9: node = add("MatMul", {x, rng.Below(2) ? w : pick(square)}); break;
      case 10: node = add("Gemm", {x, w, vec}); break;
      case 11:
        node = add("Transpose", {x});
        node->SetAttr("perm", Attribute::Ints({1, 0}));
        break;
      case 12:
        node = add("Softmax", {x});
        node->SetAttr("axis", Attribute::Int(-1));
        break;
      case 13: {
        Node* r = add(rng.Below(2) ? "ReduceMean" : "ReduceMax", {x});
        r->SetAttr("axes", Attribute::Ints({1}));
        rows.push_back(r->output(0));
        continue;
      }
      case 14: node = add("Sigmoid", {x}); break;
      case 15: {
        // An If reading values of this graph from both branches.
        Value* c = g.AddConstant(absl::StrCat("c", i), Tensor::Scalar<bool>(rng.Below(2) != 0));
        node = add("If", {c});
        auto then_g = std::make_unique<Graph>(absl::StrCat("then", i), &g);
        then_g->AddOutput(then_g->AddNode("Neg", {x}, 1)->output(0));
        auto else_g = std::make_unique<Graph>(absl::StrCat("else", i), &g);
        Node* e = else_g->AddNode("Add", {pick(square), x}, 1);
        Node* e2 = else_g->AddNode("Relu", {e->output(0)}, 1);
        else_g->AddOutput(e2->output(0));
        node->SetAttr("then_branch", Attribute::GraphValue(std::move(then_g)));
        node->SetAttr("else_branch", Attribute::GraphValue(std::move(else_g)));
        break;
      }
    }
    square.push_back(node->output(0));
  }
  // The last value, and a few others.
  std::set<Value*> outs = {square.back()};
  for (int i = 0; i < 3; ++i) outs.insert(square[2 + rng.Below(static_cast<int>(square.size()) - 2)]);
  outs.insert(rows.back());
  for (Value* v : square)
    if (outs.count(v)) g.AddOutput(v);
  if (outs.count(rows.back())) g.AddOutput(rows.back());
  return m;
}

std::vector<Tensor> InputsFor(const Graph& g, uint64_t seed) {
  Rng rng{seed};
  std::vector<Tensor> inputs;
  for (const Value* in : g.inputs()) inputs.push_back(RandomTensor(DType::kF32, in->type().shape().StaticDims(), rng));
  return inputs;
}

int CountOp(const Graph& g, const std::string& op) {
  int c = 0;
  for (const Node* n : g.nodes()) {
    c += n->op() == op;
    if (n->op() == "Fused") continue;
    for (const Graph* s : n->subgraphs()) c += CountOp(*s, op);
  }
  return c;
}

TEST(FormFusionGroupsTest, RandomGraphsComputeTheSameBitForBit) {
  int groups = 0, duplicated = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    Model m = RandomModel(seed, 12 + static_cast<int>(seed % 50));
    ASSERT_TRUE(InferShapes(*m.graph).ok());
    ASSERT_TRUE(VerifyModel(m).ok()) << VerifyModel(m);
    std::vector<Tensor> inputs = InputsFor(*m.graph, seed);
    Executor before;
    auto expected = before.Run(*m.graph, inputs);
    ASSERT_TRUE(expected.ok()) << expected.status();

    Model twin = m.Clone();
    FusionReport r = FormFusionGroups(*m.graph);
    FormFusionGroups(*twin.graph);
    groups += static_cast<int>(r.total_groups());
    duplicated += static_cast<int>(r.nodes_duplicated);
    absl::Status v = VerifyModel(m);
    ASSERT_TRUE(v.ok()) << v << "\n" << PrintModel(m);
    EXPECT_EQ(PrintModel(m), PrintModel(twin)) << "the partition is not deterministic";
    EXPECT_EQ(CountOp(*m.graph, "Fused"), r.total_groups());

    Executor after;
    auto actual = after.Run(*m.graph, inputs);
    ASSERT_TRUE(actual.ok()) << actual.status() << "\n" << PrintModel(m);
    ASSERT_EQ(actual->size(), expected->size());
    for (size_t i = 0; i < actual->size(); ++i)
      EXPECT_TRUE((*actual)[i].Equals((*expected)[i])) << "output " << i << "\n" << PrintModel(m);

    // A second run finds nothing left to fuse inside kiln.Fused bodies and
    // changes nothing it fused already.
    std::string once = PrintModel(m);
    FusionReport again = FormFusionGroups(*m.graph);
    EXPECT_TRUE(VerifyModel(m).ok());
    if (again.total_groups() == 0) {
      EXPECT_EQ(PrintModel(m), once);
    }
  }
  std::cout << "[ fusion   ] random graphs: " << groups << " groups, " << duplicated << " duplicated nodes\n";
  EXPECT_GT(groups, 300);
  EXPECT_GT(duplicated, 0);
}

TEST(FormFusionGroupsTest, TextRoundTripsAndReparsedGraphRuns) {
  Model m = RandomModel(7, 40);
  ASSERT_TRUE(InferShapes(*m.graph).ok());
  FormFusionGroups(*m.graph);
  PrintOptions po;
  po.inline_all_constants = true;
  std::string text = PrintModel(m, po);
  auto parsed = ParseModel(text, "fused.kir");
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(PrintModel(*parsed, po), text);
  ASSERT_TRUE(VerifyModel(*parsed).ok()) << VerifyModel(*parsed);
  std::vector<Tensor> inputs = InputsFor(*m.graph, 7);
  Executor a, b;
  auto x = a.Run(*m.graph, inputs);
  auto y = b.Run(*parsed->graph, inputs);
  ASSERT_TRUE(x.ok() && y.ok());
  for (size_t i = 0; i < x->size(); ++i) EXPECT_TRUE((*x)[i].Equals((*y)[i]));
}

// Splitting every group back gives the graph it was formed from, names
// included: the group's outputs and the values inside it are named as they
// were, with no fresh suffixes.
TEST(FormFusionGroupsTest, SplittingBackRestoresTheNames) {
  const char* kText = R"(graph @main(%x: f32[4,8], %w: f32[8,16], %r: f32[4,16]) {
  %mm = MatMul(%x, %w) : f32[4,16]
  %sum = Add(%mm, %r) : f32[4,16]
  %b = Relu(%sum) : f32[4,16]
  %y = Neg(%b) : f32[4,16]
  %z = Exp(%b) : f32[4,16]
  return %y, %z
})";
  auto original = ParseModel(kText);
  auto m = ParseModel(kText);
  ASSERT_TRUE(original.ok() && m.ok()) << m.status();
  ASSERT_GT(FormFusionGroups(*m->graph).total_groups(), 0);
  ASSERT_TRUE(fusion::SplitBackKilnNodes(*m->graph, [](Node*) { return false; }));
  EXPECT_EQ(PrintModel(*m), PrintModel(*original));
}

TEST(FormFusionGroupsTest, FusedCostIsTheBodyLessTheIntermediates) {
  auto m = ParseModel(R"(graph @main(%x: f32[4,8], %w: f32[8,16]) {
  %mm = MatMul(%x, %w) : f32[4,16]
  %b = Relu(%mm) : f32[4,16]
  %y = Neg(%b) : f32[4,16]
  return %y
})");
  ASSERT_TRUE(m.ok()) << m.status();
  double flops = 0, read = 0, written = 0;
  for (const Node* n : m->graph->nodes()) {
    OpCost c = NodeCost(*n);
    flops += c.flops;
    read += c.bytes_read;
    written += c.bytes_written;
  }
  FusionReport r = FormFusionGroups(*m->graph);
  ASSERT_EQ(r.groups[static_cast<int>(fusion::GroupKind::kMatMulEpilogue)], 1);
  ASSERT_EQ(m->graph->num_nodes(), 1u);
  OpCost fused = NodeCost(**m->graph->nodes().begin());
  // %mm and %b (4x16 f32 each) are neither written nor read back.
  double intermediate = 2 * 4 * 16 * 4;
  EXPECT_DOUBLE_EQ(fused.flops, flops);
  EXPECT_DOUBLE_EQ(fused.bytes_written, written - intermediate);
  EXPECT_DOUBLE_EQ(fused.bytes_read, read - intermediate);
  EXPECT_DOUBLE_EQ(fused.bytes_read, (4 * 8 + 8 * 16) * 4);
  EXPECT_DOUBLE_EQ(fused.bytes_written, 4 * 16 * 4);
}

TEST(FormFusionGroupsTest, FusedInferenceRejectsAMismatchedBody) {
  auto m = ParseModel(R"(graph @main(%x: f32[4]) {
  %y = kiln.Fused(%x, %x) {anchor = "Neg", body = graph @b(%p: f32[4]) {
    %q = Neg(%p) : f32[4]
    return %q
  }, kind = "elementwise"}
  return %y
})");
  ASSERT_TRUE(m.ok()) << m.status();
  absl::Status s = InferShapes(*m->graph);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("the node has 2 inputs but its body takes 1"), std::string::npos) << s;
}

TEST(FormFusionGroupsTest, ScalesToAHundredThousandNodes) {
  // Chains of elementwise nodes between matmuls, with a reduction every so
  // often and long edges back to earlier values.
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({8, 8})));
  Value* w = g.AddConstant("w", Tensor(DType::kF32, {8, 8}));
  Value* cur = x;
  std::vector<Value*> earlier = {x};
  for (int i = 0; g.num_nodes() < 100000; ++i) {
    cur = g.AddNode(i % 7 == 0 ? "MatMul" : (i % 3 ? "Relu" : "Add"),
                    i % 7 == 0 ? std::vector<Value*>{cur, w}
                               : (i % 3 ? std::vector<Value*>{cur} : std::vector<Value*>{cur, earlier[i % earlier.size()]}),
                    1)
              ->output(0);
    if (i % 50 == 0) earlier.push_back(cur);
  }
  g.AddOutput(cur);
  ASSERT_TRUE(InferShapes(g).ok());
  auto start = std::chrono::steady_clock::now();
  FusionReport r = FormFusionGroups(g);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ scaling  ] form-fusion-groups: " << seconds * 1e3 << " ms, " << r.total_groups() << " groups\n";
  EXPECT_GT(r.total_groups(), 10000);
  EXPECT_TRUE(VerifyModel(m).ok());
}

//===--- The ONNX backend test data -------------------------------------===//


TEST(FormFusionGroupsTest, OnnxTestDataGivesTheSameResults) {
  if (!std::filesystem::exists("/usr/share/libonnx-testdata/data/node")) GTEST_SKIP() << "no ONNX test data";
  auto base = ConformanceReport("infer-shapes");
  auto fused = ConformanceReport("infer-shapes,form-fusion-groups");
  ASSERT_TRUE(base.ok() && fused.ok());
  std::set<std::string> before = Failures(*base);
  for (const std::string& id : Failures(*fused)) EXPECT_TRUE(before.count(id)) << "newly failing with fusion: " << id;
}

}  // namespace
}  // namespace kiln
