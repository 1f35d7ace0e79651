//===- simplify_test.cc - simplify against the reference executor ---------===//
//
// Every ONNX backend test model that simplify changes gives the same outputs
// (bit for bit, up to the sign of zero) before and after, and verifies; the
// pass reaches a fixpoint in one run; names of model outputs survive; a graph
// of 100k nodes is simplified in linear time.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/tensor_proto.h"
#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/simplify.h"
#include "graph/verifier/verifier.h"
#include "gtest/gtest.h"
#include "tools/conformance/conformance.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

bool Nondeterministic(const Graph& g) {
  for (const Node* n : g.nodes()) {
    const std::string& op = n->op();
    if (op.rfind("Random", 0) == 0 || op == "Bernoulli" || op == "Multinomial") return true;
    if (op == "Dropout" && n->input(2)) return true;
    for (const Graph* s : n->subgraphs())
      if (Nondeterministic(*s)) return true;
  }
  return false;
}

struct TestModel {
  std::string name;
  Model model;
  std::vector<Tensor> inputs;
};

// The ONNX backend test models that import, with their first data set.
std::vector<TestModel> OnnxTestModels() {
  std::vector<TestModel> out;
  fs::path root = "/usr/share/libonnx-testdata/data";
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"})
    for (const auto& e : fs::directory_iterator(root / suite, ec)) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& dir : dirs) {
    fs::path data = dir / "test_data_set_0";
    if (!fs::exists(dir / "model.onnx") || !fs::exists(data)) continue;
    auto m = onnx_import::ImportFile((dir / "model.onnx").string());
    if (!m.ok() || Nondeterministic(*m->graph)) continue;
    TestModel t{dir.parent_path().filename().string() + "/" + dir.filename().string(), *std::move(m), {}};
    bool ok = true;
    for (int i = 0; ok && fs::exists(data / absl::StrCat("input_", i, ".pb")); ++i) {
      auto in = onnx_import::ReadTensorProtoFile((data / absl::StrCat("input_", i, ".pb")).string());
      ok = in.ok();
      if (ok) t.inputs.push_back(*std::move(in));
    }
    if (ok && t.inputs.size() == t.model.graph->inputs().size()) out.push_back(std::move(t));
  }
  return out;
}

TEST(SimplifyTest, OnnxTestModelsKeepTheirOutputs) {
  if (!fs::exists("/usr/share/libonnx-testdata/data/node")) GTEST_SKIP() << "no ONNX test data";
  std::vector<TestModel> models = OnnxTestModels();
  ASSERT_FALSE(models.empty());
  int changed = 0;
  for (TestModel& t : models) {
    Model after = t.model.Clone();
    PassStatistics stats;
    if (!SimplifyGraph(*after.graph, &stats)) continue;
    SCOPED_TRACE(t.name);
    Executor before_exec;
    auto expected = before_exec.Run(*t.model.graph, t.inputs);
    if (!expected.ok()) continue;  // the model does not run on the reference target
    ++changed;
    absl::Status v = VerifyModel(after);
    ASSERT_TRUE(v.ok()) << v;
    Executor after_exec;
    auto actual = after_exec.Run(*after.graph, t.inputs);
    ASSERT_TRUE(actual.ok()) << actual.status();
    ASSERT_EQ(actual->size(), expected->size());
    for (size_t i = 0; i < actual->size(); ++i) {
      absl::Status s = CompareTensors((*expected)[i], (*actual)[i], 0, 0);
      EXPECT_TRUE(s.ok()) << "output " << i << ": " << s;
    }
    // One run reaches the fixpoint.
    EXPECT_FALSE(SimplifyGraph(*after.graph, nullptr));
  }
  std::cout << "[ simplify ] " << changed << " of " << models.size() << " test models changed\n";
  EXPECT_GT(changed, 20);
}

TEST(SimplifyTest, ModelOutputsKeepTheirNames) {
  auto m = ParseModel(R"(graph @main(%x: f32[2,3]) {
  %r = Relu(%x) : f32[2,3]
  %t1 = Transpose(%r) {perm = [1, 0]} : f32[3,2]
  %y = Transpose(%t1) {perm = [1, 0]} : f32[2,3]
  %z = Identity(%x) : f32[2,3]
  return %y, %z
})",
                      "names.kir");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(SimplifyGraph(*m->graph, nullptr));
  ASSERT_TRUE(VerifyModel(*m).ok());
  const Graph& g = *m->graph;
  // Transpose∘Transpose is gone and Relu's output took the name %y; the
  // Identity of an input stays (an input cannot be renamed).
  ASSERT_EQ(g.num_nodes(), 2u);
  EXPECT_EQ(g.outputs()[0]->name(), "y");
  EXPECT_EQ(g.outputs()[0]->producer()->op(), "Relu");
  EXPECT_EQ(g.outputs()[1]->name(), "z");
}

// A chain of `blocks` x 5 nodes that simplify reduces to `blocks` Relus.
std::unique_ptr<Graph> Chain(int blocks) {
  auto g = std::make_unique<Graph>();
  Value* x = g->AddInput("x", Type::Tensor(DType::kF32, Shape::Static({4, 8})));
  Value* one = g->AddConstant("one", Tensor::Scalar<float>(1.0f));
  for (int i = 0; i < blocks; ++i) {
    Node* id = g->AddNode("Identity", {x}, 1);
    Node* t1 = g->AddNode("Transpose", {id->output(0)}, 1);
    t1->SetAttr("perm", Attribute::Ints({1, 0}));
    Node* t2 = g->AddNode("Transpose", {t1->output(0)}, 1);
    t2->SetAttr("perm", Attribute::Ints({1, 0}));
    Node* mul = g->AddNode("Mul", {t2->output(0), one}, 1);
    Node* relu = g->AddNode("Relu", {mul->output(0)}, 1);
    x = relu->output(0);
  }
  g->AddOutput(x);
  return g;
}

double SimplifySeconds(int blocks, size_t* nodes_after) {
  auto g = Chain(blocks);
  EXPECT_TRUE(InferShapes(*g).ok());
  auto start = std::chrono::steady_clock::now();
  SimplifyGraph(*g, nullptr);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  *nodes_after = g->num_nodes();
  return s;
}

TEST(SimplifyTest, LargeGraphInLinearTime) {
  size_t small_nodes, large_nodes;
  double small = SimplifySeconds(5000, &small_nodes);
  double large = SimplifySeconds(20000, &large_nodes);  // 100k nodes
  EXPECT_EQ(small_nodes, 5000u);
  EXPECT_EQ(large_nodes, 20000u);
  std::cout << "[ simplify ] 25k nodes: " << small << " s, 100k nodes: " << large << " s\n";
  // A quadratic sweep of 100k nodes would take far longer on any machine;
  // the times are reported, not compared, as the machine may be shared.
  EXPECT_LT(large, 60.0);
}

}  // namespace
}  // namespace kiln
