//===- expand_composites_test.cc - expand-composites against the kernels ---===//
//
// Each composite node gives the same outputs as its expansion into ONNX ops
// (static and symbolic shapes, every attribute), no kiln.* node is left, and
// recognizing the expansion of a static-shape composite gives the composite
// back with the same attributes.
//
//===----------------------------------------------------------------------===//
#include <random>
#include <string>
#include <vector>

#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "graph/passes/expand_composites.h"
#include "graph/passes/recognize_composites.h"
#include "graph/verifier/verifier.h"
#include "gtest/gtest.h"
#include "tools/conformance/conformance.h"

namespace kiln {
namespace {

struct Case {
  const char* name;
  const char* text;        // a .kir model with one composite
  std::vector<Dims> dims;  // the input dims to run it with
  bool round_trip;         // recognizing the expansion gives the composite back
};

Tensor MakeInput(DType dt, const Dims& dims, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist;
  Tensor t(dt, dims);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::kBool) t.data<bool>()[i] = dims.empty() || rng() % 3 != 0;
    else if (dt == DType::kI64) t.data<int64_t>()[i] = 2;
    else if (dt == DType::kF32) t.data<float>()[i] = static_cast<float>(dist(rng));
    else if (dt == DType::kF16) t.data<Half>()[i] = Half(static_cast<float>(dist(rng)));
    else if (dt == DType::kF64) t.data<double>()[i] = dist(rng);
  }
  return t;
}

std::string CompositeLine(const Graph& g) {
  for (const Node* n : g.nodes())
    if (n->domain() == "kiln") {
      std::string attrs;
      for (const auto& [name, a] : n->attrs()) {
        attrs += name + "=";
        if (a.kind() == AttrKind::kInt) attrs += std::to_string(a.i());
        else if (a.kind() == AttrKind::kFloat) attrs += std::to_string(a.f());
        else if (a.kind() == AttrKind::kString) attrs += a.s();
        attrs += " ";
      }
      return n->QualifiedOp() + "(" + std::to_string(n->num_inputs()) + ") " + attrs;
    }
  return "";
}

void Check(const Case& c) {
  SCOPED_TRACE(c.name);
  auto model = ParseModel(c.text, c.name);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(VerifyModel(*model).ok());
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < model->graph->inputs().size(); ++i)
    inputs.push_back(MakeInput(model->graph->inputs()[i]->type().dtype(), c.dims[i], 100 + i));
  Executor e1;
  auto expected = e1.Run(*model->graph, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status();

  Model expanded = model->Clone();
  PassStatistics stats;
  EXPECT_TRUE(ExpandComposites(*expanded.graph, &stats));
  absl::Status v = VerifyModel(expanded);
  ASSERT_TRUE(v.ok()) << v << "\n" << PrintModel(expanded);
  EXPECT_EQ(CompositeLine(*expanded.graph), "");
  EXPECT_EQ(expanded.graph->outputs()[0]->name(), model->graph->outputs()[0]->name());
  Executor e2;
  auto actual = e2.Run(*expanded.graph, inputs);
  ASSERT_TRUE(actual.ok()) << actual.status() << "\n" << PrintModel(expanded);
  double tol = (*expected)[0].dtype() == DType::kF16 ? 2e-2 : 1e-5;
  absl::Status s = CompareTensors((*expected)[0], (*actual)[0], tol, tol);
  EXPECT_TRUE(s.ok()) << s;

  if (c.round_trip) {
    EXPECT_TRUE(RecognizeComposites(*expanded.graph, nullptr));
    ASSERT_TRUE(VerifyModel(expanded).ok());
    EXPECT_EQ(CompositeLine(*expanded.graph), CompositeLine(*model->graph)) << PrintModel(expanded);
    EXPECT_EQ(expanded.graph->num_nodes(), model->graph->num_nodes()) << PrintModel(expanded);
  }
}

TEST(ExpandCompositesTest, Gelu) {
  Check({"gelu erf", R"(graph @main(%x: f32[3,5]) {
  %y = kiln.Gelu(%x) {approximate = "none"} : f32[3,5]
  return %y
})",
         {{3, 5}}, true});
  Check({"gelu tanh f16", R"(graph @main(%x: f16[n,5]) {
  %y = kiln.Gelu(%x) {approximate = "tanh"} : f16[n,5]
  return %y
})",
         {{4, 5}}, true});
  Check({"gelu default f64", R"(graph @main(%x: f64[7]) {
  %y = kiln.Gelu(%x) : f64[7]
  return %y
})",
         {{7}}, false});
}

TEST(ExpandCompositesTest, Attention) {
  Check({"k layout, scale", R"(graph @main(%q: f32[2,3,4,8], %k: f32[2,3,5,8], %v: f32[2,3,5,6]) {
  %y = kiln.Attention(%q, %k, %v) {k_transposed = 0, scale = 0.25} : f32[2,3,4,6]
  return %y
})",
         {{2, 3, 4, 8}, {2, 3, 5, 8}, {2, 3, 5, 6}}, true});
  Check({"k transposed, float mask", R"(graph @main(%q: f32[2,4,8], %kt: f32[2,8,5], %v: f32[2,5,6], %m: f32[4,5]) {
  %y = kiln.Attention(%q, %kt, %v, %m) {k_transposed = 1, scale = 0.5} : f32[2,4,6]
  return %y
})",
         {{2, 4, 8}, {2, 8, 5}, {2, 5, 6}, {4, 5}}, true});
  Check({"bool mask with fill", R"(graph @main(%q: f32[1,2,4,8], %k: f32[1,2,4,8], %v: f32[1,2,4,8], %b: bool[1,1,4,4]) {
  %y = kiln.Attention(%q, %k, %v, %b) {k_transposed = 0, mask_value = -1000.0, scale = 0.125} : f32[1,2,4,8]
  return %y
})",
         {{1, 2, 4, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}, {1, 1, 4, 4}}, true});
  Check({"causal static", R"(graph @main(%q: f32[1,2,4,8], %k: f32[1,2,4,8], %v: f32[1,2,4,8]) {
  %y = kiln.Attention(%q, %k, %v) {causal = 1, k_transposed = 0, scale = 0.35355338} : f32[1,2,4,8]
  return %y
})",
         {{1, 2, 4, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}}, true});
  Check({"causal and default scale, symbolic", R"(graph @main(%q: f32[b,2,s,d], %k: f32[b,2,t,d], %v: f32[b,2,t,d]) {
  %y = kiln.Attention(%q, %k, %v) {causal = 1} : f32[b,2,s,d]
  return %y
})",
         {{2, 2, 3, 8}, {2, 2, 5, 8}, {2, 2, 5, 8}}, false});
  Check({"unranked k", R"(graph @main(%q: f32[4,8], %k: f32[*], %v: f32[5,8]) {
  %y = kiln.Attention(%q, %k, %v) {scale = 0.5}
  return %y
})",
         {{4, 8}, {5, 8}, {5, 8}}, false});
}

TEST(ExpandCompositesTest, NestedGraphs) {
  Check({"in a Loop body", R"(graph @main(%x: f32[2,3], %n: i64[], %c: bool[]) {
  %r = Loop(%n, %c, %x) {body = graph @body(%i: i64[], %ci: bool[], %a: f32[2,3]) {
    %g = kiln.Gelu(%a) {approximate = "tanh"} : f32[2,3]
    return %ci, %g
  }} : f32[2,3]
  return %r
})",
         {{2, 3}, {}, {}}, false});
}

}  // namespace
}  // namespace kiln
