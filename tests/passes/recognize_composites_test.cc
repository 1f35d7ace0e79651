//===- recognize_composites_test.cc - recognize-composites on real models ---===//
//
// The PyTorch-exported transformer models (bert_encoder, gpt2_block, mlp)
// give PyTorch's outputs (rtol 1e-4) with their LayerNorms, GELUs and
// attention blocks recognized, after the default pipeline, after expanding
// the composites again and after recognizing the expansion; the ONNX test
// models that the pass changes keep their outputs; the FileCheck inputs of
// simplify, fold-batchnorm, recognize-composites and expand-composites keep
// what they compute; a graph of 100k nodes is matched in linear time.
//
//===----------------------------------------------------------------------===//
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/tensor_proto.h"
#include "graph/exec/executor.h"
#include "graph/io/npy.h"
#include "graph/ir/parser.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/pass_manager.h"
#include "graph/passes/recognize_composites.h"
#include "graph/verifier/verifier.h"
#include "gtest/gtest.h"
#include "tools/conformance/conformance.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string RepoRoot() {
  return KILN_SOURCE_DIR;  // set by tests/CMakeLists.txt
}

// Ops (qualified) of a graph and its nested graphs, counted.
std::map<std::string, int> OpCounts(const Graph& g) {
  std::map<std::string, int> out;
  for (const Node* n : g.nodes()) {
    ++out[n->QualifiedOp()];
    for (const Graph* s : n->subgraphs())
      for (auto& [op, c] : OpCounts(*s)) out[op] += c;
  }
  return out;
}

int Count(const std::map<std::string, int>& m, const std::string& op) {
  auto it = m.find(op);
  return it == m.end() ? 0 : it->second;
}

absl::Status RunPipeline(Model& m, const std::string& pipeline) {
  PassManager pm;
  absl::Status s = pm.AddPipeline(pipeline);
  if (!s.ok()) return s;
  auto changed = pm.Run(m);
  if (!changed.ok()) return changed.status();
  return VerifyModel(m);
}

//===--- PyTorch transformer models ---------------------------------------===//

struct TorchModel {
  std::string name;
  Model model;
  std::vector<Tensor> inputs;
  std::vector<Tensor> expected;
};

class TransformerModelsTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new std::vector<TorchModel>();
    // KILN_TEST_NO_TORCH=1 skips the PyTorch models on machines with torch.
    if (const char* no = std::getenv("KILN_TEST_NO_TORCH"); no && *no && *no != '0') return;
    if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) return;
    char tmpl[] = "/tmp/kiln-composites-XXXXXX";
    if (!mkdtemp(tmpl)) return;
    dir_ = new std::string(tmpl);
    std::string cmd = absl::StrCat("/usr/bin/python3 ", RepoRoot(), "/scripts/export_models.py ", *dir_,
                                   " bert_encoder gpt2_block mlp >", *dir_, "/export.log 2>&1");
    if (std::system(cmd.c_str()) != 0) return;
    for (const char* name : {"bert_encoder", "gpt2_block", "mlp"}) {
      fs::path d = fs::path(*dir_) / name;
      auto m = onnx_import::ImportFile((d / "model.onnx").string());
      if (!m.ok()) continue;
      TorchModel t{name, *std::move(m), {}, {}};
      for (int i = 0; fs::exists(d / absl::StrCat("input_", i, ".npy")); ++i)
        if (auto x = ReadNpy((d / absl::StrCat("input_", i, ".npy")).string()); x.ok()) t.inputs.push_back(*x);
      for (int i = 0; fs::exists(d / absl::StrCat("expected_", i, ".npy")); ++i)
        if (auto x = ReadNpy((d / absl::StrCat("expected_", i, ".npy")).string()); x.ok()) t.expected.push_back(*x);
      models_->push_back(std::move(t));
    }
  }
  static void TearDownTestSuite() {
    if (dir_) {
      std::error_code ec;
      fs::remove_all(*dir_, ec);
    }
    delete dir_;
    dir_ = nullptr;
    delete models_;
    models_ = nullptr;
  }

  // Runs `pipeline` on a copy of the model, checks PyTorch's outputs and
  // returns the op counts of the result.
  static std::map<std::string, int> Check(const TorchModel& t, const std::string& pipeline) {
    SCOPED_TRACE(absl::StrCat(t.name, " with ", pipeline));
    Model m = t.model.Clone();
    absl::Status s = RunPipeline(m, pipeline);
    EXPECT_TRUE(s.ok()) << s;
    Executor exec;
    auto out = exec.Run(*m.graph, t.inputs);
    EXPECT_TRUE(out.ok()) << out.status();
    if (out.ok()) {
      EXPECT_EQ(out->size(), t.expected.size());
      for (size_t i = 0; i < out->size() && i < t.expected.size(); ++i) {
        absl::Status c = CompareTensors(t.expected[i], (*out)[i], 1e-4, 1e-5);
        EXPECT_TRUE(c.ok()) << "output " << i << ": " << c;
      }
    }
    std::map<std::string, int> ops = OpCounts(*m.graph);
    int nodes = 0;
    for (auto& [op, c] : ops) nodes += c;
    std::cout << "[ models   ] " << t.name << " " << pipeline << ": " << t.model.graph->num_nodes() << " -> " << nodes
              << " nodes\n";
    return ops;
  }

  static const TorchModel* Find(const std::string& name) {
    for (const TorchModel& t : *models_)
      if (t.name == name) return &t;
    return nullptr;
  }

  static std::vector<TorchModel>* models_;
  static std::string* dir_;
};

std::vector<TorchModel>* TransformerModelsTest::models_ = nullptr;
std::string* TransformerModelsTest::dir_ = nullptr;

struct Expected {
  int layernorm, gelu, attention;
};

const std::map<std::string, Expected>& ExpectedComposites() {
  static const auto* m = new std::map<std::string, Expected>{
      {"bert_encoder", {5, 2, 2}}, {"gpt2_block", {2, 1, 1}}, {"mlp", {0, 1, 0}}};
  return *m;
}

void ExpectComposites(const std::string& name, const std::map<std::string, int>& ops) {
  const Expected& e = ExpectedComposites().at(name);
  EXPECT_EQ(Count(ops, "LayerNormalization"), e.layernorm) << name;
  EXPECT_EQ(Count(ops, "kiln.Gelu"), e.gelu) << name;
  EXPECT_EQ(Count(ops, "kiln.Attention"), e.attention) << name;
  EXPECT_EQ(Count(ops, "ReduceMean"), 0) << name;
  EXPECT_EQ(Count(ops, "Erf"), 0) << name;
  if (name != "mlp") {
    EXPECT_EQ(Count(ops, "Tanh"), 0) << name;  // mlp has a Tanh activation
  }
  EXPECT_EQ(Count(ops, "Softmax"), 0) << name;
}

TEST_F(TransformerModelsTest, RecognizedAlone) {
  if (models_->empty()) GTEST_SKIP() << "no torch";
  for (const TorchModel& t : *models_) ExpectComposites(t.name, Check(t, "recognize-composites"));
}

TEST_F(TransformerModelsTest, DefaultPipeline) {
  if (models_->empty()) GTEST_SKIP() << "no torch";
  for (const TorchModel& t : *models_) ExpectComposites(t.name, Check(t, "default"));
}

TEST_F(TransformerModelsTest, GptAttentionIsCausal) {
  const TorchModel* t = Find("gpt2_block");
  if (!t) GTEST_SKIP() << "no torch";
  Model m = t->model.Clone();
  ASSERT_TRUE(RunPipeline(m, "default").ok());
  int found = 0;
  for (const Node* n : m.graph->nodes()) {
    if (n->QualifiedOp() == "kiln.Gelu") {
      EXPECT_EQ(n->GetString("approximate", ""), "tanh");
    }
    if (n->QualifiedOp() != "kiln.Attention") continue;
    ++found;
    EXPECT_EQ(n->GetInt("causal", 0), 1);
    EXPECT_EQ(n->num_inputs(), 3);  // the mask became the causal flag
    EXPECT_EQ(n->GetInt("k_transposed", 1), 0);
    EXPECT_NEAR(n->GetFloat("scale", 0), 1 / std::sqrt(32.0), 1e-7);
  }
  EXPECT_EQ(found, 1);
}

TEST_F(TransformerModelsTest, ExpandedAndRecognizedAgain) {
  if (models_->empty()) GTEST_SKIP() << "no torch";
  for (const TorchModel& t : *models_) {
    std::map<std::string, int> expanded = Check(t, "default,expand-composites");
    EXPECT_EQ(Count(expanded, "kiln.Gelu") + Count(expanded, "kiln.Attention"), 0) << t.name;
    ExpectComposites(t.name, Check(t, "default,expand-composites,recognize-composites"));
  }
}

//===--- ONNX test data ---------------------------------------------------===//

TEST(RecognizeCompositesTest, OnnxTestModelsKeepTheirOutputs) {
  fs::path root = "/usr/share/libonnx-testdata/data";
  if (!fs::exists(root / "node")) GTEST_SKIP() << "no ONNX test data";
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"})
    for (const auto& e : fs::directory_iterator(root / suite, ec)) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  int changed = 0;
  for (const fs::path& dir : dirs) {
    fs::path data = dir / "test_data_set_0";
    if (!fs::exists(dir / "model.onnx") || !fs::exists(data)) continue;
    auto model = onnx_import::ImportFile((dir / "model.onnx").string());
    if (!model.ok()) continue;
    Model after = model->Clone();
    if (!RecognizeComposites(*after.graph, nullptr)) continue;
    SCOPED_TRACE(dir.string());
    std::vector<Tensor> inputs;
    for (int i = 0; fs::exists(data / absl::StrCat("input_", i, ".pb")); ++i) {
      auto in = onnx_import::ReadTensorProtoFile((data / absl::StrCat("input_", i, ".pb")).string());
      ASSERT_TRUE(in.ok()) << in.status();
      inputs.push_back(*std::move(in));
    }
    Executor e1;
    auto expected = e1.Run(*model->graph, inputs);
    if (!expected.ok()) continue;
    ++changed;
    ASSERT_TRUE(VerifyModel(after).ok());
    Executor e2;
    auto actual = e2.Run(*after.graph, inputs);
    ASSERT_TRUE(actual.ok()) << actual.status();
    for (size_t i = 0; i < actual->size(); ++i) {
      absl::Status s = CompareTensors((*expected)[i], (*actual)[i], 1e-4, 1e-5);
      EXPECT_TRUE(s.ok()) << "output " << i << ": " << s;
    }
  }
  std::cout << "[ composite] " << changed << " ONNX test models changed by recognize-composites\n";
}

//===--- The FileCheck inputs keep their meaning --------------------------===//

// Symbolic dims are 2, unknown ones 3; floats pseudo-random, integers 1,
// booleans alternate.
Tensor MakeInput(const Type& type, uint32_t* seed) {
  Dims dims;
  if (type.shape().ranked())
    for (const Dim& d : type.shape().dims()) dims.push_back(d.is_static() ? d.value() : d.is_symbolic() ? 2 : 3);
  Tensor t(type.dtype(), dims);
  for (int64_t i = 0; i < t.numel(); ++i) {
    *seed = *seed * 1664525u + 1013904223u;
    double r = static_cast<double>(*seed >> 8) / (1 << 24) * 4 - 2;
    switch (type.dtype()) {
      case DType::kF32: t.data<float>()[i] = static_cast<float>(r); break;
      case DType::kF64: t.data<double>()[i] = r; break;
      case DType::kF16: t.data<Half>()[i] = Half(static_cast<float>(r)); break;
      case DType::kI64: t.data<int64_t>()[i] = 1; break;
      case DType::kBool: t.data<bool>()[i] = (*seed >> 12) & 1; break;
      default: break;
    }
  }
  return t;
}

std::string PipelineOf(const std::string& text) {
  size_t at = text.find("--passes=");
  if (at == std::string::npos) return "";
  size_t end = text.find_first_of(" \n", at);
  std::string spec = text.substr(at + 9, end - at - 9);
  // A pipeline with a group is quoted for the shell.
  if (spec.size() >= 2 && spec.front() == '\'' && spec.back() == '\'') spec = spec.substr(1, spec.size() - 2);
  return spec;
}

TEST(KirTestsTest, OurPassesKeepWhatTheTestGraphsCompute) {
  const char* mine[] = {"simplify-", "fold-batchnorm", "recognize-composites-", "expand-composites"};
  int checked = 0;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(RepoRoot()) / "tests" / "passes"))
    if (entry.path().extension() == ".kir") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& path : files) {
    std::string file = path.filename().string();
    bool ours = false;
    for (const char* p : mine) ours |= file.rfind(p, 0) == 0;
    if (!ours) continue;
    SCOPED_TRACE(file);
    std::ifstream in(path);
    std::stringstream buf;
    buf << in.rdbuf();
    auto model = ParseModel(buf.str(), file);
    ASSERT_TRUE(model.ok()) << model.status();
    uint32_t seed = 7;
    std::vector<Tensor> inputs;
    for (const Value* v : model->graph->inputs()) inputs.push_back(MakeInput(v->type(), &seed));
    Executor e1;
    auto expected = e1.Run(*model->graph, inputs);
    if (!expected.ok()) continue;  // the graph needs other dims than these
    Model after = model->Clone();
    ASSERT_TRUE(RunPipeline(after, PipelineOf(buf.str())).ok());
    Executor e2;
    auto actual = e2.Run(*after.graph, inputs);
    ASSERT_TRUE(actual.ok()) << actual.status();
    ASSERT_EQ(actual->size(), expected->size());
    for (size_t i = 0; i < actual->size(); ++i) {
      const Tensor& want = (*expected)[i];
      double tol = want.dtype() == DType::kF16 ? 1e-2 : 1e-4;
      absl::Status s = CompareTensors(want, (*actual)[i], tol, 1e-5);
      EXPECT_TRUE(s.ok()) << "output " << i << ": " << s;
    }
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

//===--- Scaling ----------------------------------------------------------===//

// `blocks` erf-GELUs (PyTorch's 5-node form) separated by Relu: 6 nodes each.
std::unique_ptr<Graph> GeluChain(int blocks) {
  auto g = std::make_unique<Graph>();
  Value* x = g->AddInput("x", Type::Tensor(DType::kF32, Shape::Static({4, 8})));
  Value* sqrt2 = g->AddConstant("sqrt2", Tensor::Scalar<float>(1.4142135f));
  Value* one = g->AddConstant("one", Tensor::Scalar<float>(1.0f));
  Value* half = g->AddConstant("half", Tensor::Scalar<float>(0.5f));
  for (int i = 0; i < blocks; ++i) {
    Node* d = g->AddNode("Div", {x, sqrt2}, 1);
    Node* e = g->AddNode("Erf", {d->output(0)}, 1);
    Node* a = g->AddNode("Add", {e->output(0), one}, 1);
    Node* m = g->AddNode("Mul", {x, a->output(0)}, 1);
    Node* h = g->AddNode("Mul", {m->output(0), half}, 1);
    x = g->AddNode("Relu", {h->output(0)}, 1)->output(0);
  }
  g->AddOutput(x);
  return g;
}

double RecognizeSeconds(int blocks, int* gelus) {
  auto g = GeluChain(blocks);
  EXPECT_TRUE(InferShapes(*g).ok());
  PassStatistics stats;
  auto start = std::chrono::steady_clock::now();
  RecognizeComposites(*g, &stats);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto it = stats.counters().find("gelu-recognized");
  *gelus = it == stats.counters().end() ? 0 : static_cast<int>(it->second);
  return s;
}

TEST(RecognizeCompositesTest, LargeGraphInLinearTime) {
  int small_count, large_count;
  double small = RecognizeSeconds(4000, &small_count);
  double large = RecognizeSeconds(16000, &large_count);  // 96k nodes
  EXPECT_EQ(small_count, 4000);
  EXPECT_EQ(large_count, 16000);
  std::cout << "[ composite] 24k nodes: " << small << " s, 96k nodes: " << large << " s\n";
  // A quadratic sweep of 100k nodes would take far longer on any machine;
  // the times are reported, not compared, as the machine may be shared.
  EXPECT_LT(large, 60.0);
}

}  // namespace
}  // namespace kiln
