//===- default_pipeline_test.cc - The optimizer against the reference executor ---===//
//
// Every PyTorch-exported model (scripts/export_models.py, when /usr/bin/python3
// has torch; else the ONNX test data's pytorch-converted models) gives the
// same outputs after the `default` pipeline as before it, and no shape
// plumbing (Shape, Gather of a shape), Identity or constant-only node
// survives in it. The transformers are also exported with dynamic axes and
// then pinned to static input dims, so their Shape -> Gather -> Unsqueeze ->
// Concat -> Reshape chains are in the graph to begin with. The ONNX backend test data gives the same results after
// each of the folding and cleanup passes as without them. Each of those
// passes stays fast on a graph of 100k nodes.
//
//===----------------------------------------------------------------------===//
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/tensor_proto.h"
#include "graph/exec/executor.h"
#include "graph/io/npy.h"
#include "graph/ir/parser.h"
#include "graph/passes/pass_manager.h"
#include "graph/verifier/verifier.h"
#include "gtest/gtest.h"
#include "tests/passes/group_settles.h"
#include "tests/passes/pipeline_conformance.h"
#include "tools/conformance/conformance.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// One model with its inputs, from either source.
struct ModelCase {
  std::string name;
  std::string model_path;
  std::vector<std::string> input_files;  // .npy or .pb, in graph-input order
};

std::string RepoRoot() {
  return KILN_SOURCE_DIR;  // set by tests/CMakeLists.txt
}

bool HaveTorch() {
  // KILN_TEST_NO_TORCH=1 takes the ONNX test data path on machines with torch.
  if (const char* no = std::getenv("KILN_TEST_NO_TORCH"); no && *no && *no != '0') return false;
  if (!fs::exists("/usr/bin/python3")) return false;
  return std::system("/usr/bin/python3 -c 'import torch, torchvision, onnx' >/dev/null 2>&1") == 0;
}

absl::StatusOr<Tensor> ReadInput(const std::string& path) {
  if (path.size() > 4 && path.substr(path.size() - 4) == ".npy") return ReadNpy(path);
  return onnx_import::ReadTensorProtoFile(path);
}

// Exports scripts/export_models.py's transformers with dynamic batch and
// sequence axes, then pins the input dims: usage SCRIPT SCRIPTS_DIR OUT_DIR.
constexpr const char* kPinnedExport = R"(
import os, sys
import numpy as np, onnx, torch
sys.path.insert(0, sys.argv[1])
import export_models as em
out = sys.argv[2]
for name in ["gpt2_block", "bert_encoder"]:
    ctor, make_inputs, opset = em.MODELS[name]
    torch.manual_seed(0)
    model = ctor().eval()
    inputs = make_inputs()
    with torch.no_grad():
        expected = model(*inputs)
    d = os.path.join(out, name + "_pinned")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    torch.onnx.export(model, tuple(inputs), path, opset_version=opset, input_names=["input_0"],
                      output_names=["output_0"], do_constant_folding=False,
                      dynamic_axes={"input_0": {0: "batch", 1: "seq"}, "output_0": {0: "batch", 1: "seq"}})
    m = onnx.load(path)
    for dim, v in zip(m.graph.input[0].type.tensor_type.shape.dim, inputs[0].shape):
        dim.ClearField("dim_param")
        dim.dim_value = v
    for o in m.graph.output:
        for dim in o.type.tensor_type.shape.dim:
            dim.ClearField("dim_param")
    onnx.save(m, path)
    np.save(os.path.join(d, "input_0.npy"), inputs[0].numpy())
    np.save(os.path.join(d, "expected_0.npy"), expected.numpy())
    with open(os.path.join(d, "inputs.txt"), "w") as f:
        f.write("input_0\n")
)";

class DefaultPipelineTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    cases_ = new std::vector<ModelCase>();
    if (HaveTorch()) {
      char tmpl[] = "/tmp/kiln-pipeline-models-XXXXXX";
      if (char* dir = mkdtemp(tmpl)) {
        dir_ = new std::string(dir);
        std::string cmd = absl::StrCat("/usr/bin/python3 ", RepoRoot(), "/scripts/export_models.py ", *dir_,
                                       " >", *dir_, "/export.log 2>&1");
        bool exported = std::system(cmd.c_str()) == 0;
        // The transformers again, exported with dynamic batch and sequence
        // axes (so their shape arithmetic is in the graph) and then pinned
        // to static input dims.
        std::string script = absl::StrCat(*dir_, "/export_pinned.py");
        std::ofstream(script) << kPinnedExport;
        cmd = absl::StrCat("/usr/bin/python3 ", script, " ", RepoRoot(), "/scripts ", *dir_, " >>", *dir_,
                           "/export.log 2>&1");
        exported &= std::system(cmd.c_str()) == 0;
        if (exported) {
          for (const auto& entry : fs::directory_iterator(*dir_)) {
            if (!entry.is_directory()) continue;
            ModelCase c;
            c.name = entry.path().filename().string();
            c.model_path = (entry.path() / "model.onnx").string();
            std::ifstream names(entry.path() / "inputs.txt");
            std::string line;
            for (int i = 0; std::getline(names, line); ++i)
              if (!line.empty()) c.input_files.push_back((entry.path() / absl::StrCat("input_", i, ".npy")).string());
            cases_->push_back(std::move(c));
          }
        }
      }
    }
    if (cases_->empty()) {
      // The ONNX test data's PyTorch-converted models.
      fs::path root = "/usr/share/libonnx-testdata/data/pytorch-converted";
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(root, ec)) {
        fs::path data = entry.path() / "test_data_set_0";
        if (!fs::exists(entry.path() / "model.onnx") || !fs::exists(data)) continue;
        ModelCase c;
        c.name = entry.path().filename().string();
        c.model_path = (entry.path() / "model.onnx").string();
        for (int i = 0; fs::exists(data / absl::StrCat("input_", i, ".pb")); ++i)
          c.input_files.push_back((data / absl::StrCat("input_", i, ".pb")).string());
        cases_->push_back(std::move(c));
      }
    }
    std::sort(cases_->begin(), cases_->end(),
              [](const ModelCase& a, const ModelCase& b) { return a.name < b.name; });
  }

  static void TearDownTestSuite() {
    if (dir_) {
      std::error_code ec;
      fs::remove_all(*dir_, ec);
    }
    delete dir_;
    dir_ = nullptr;
    delete cases_;
    cases_ = nullptr;
  }

  static std::vector<ModelCase>* cases_;
  static std::string* dir_;
};

std::vector<ModelCase>* DefaultPipelineTest::cases_ = nullptr;
std::string* DefaultPipelineTest::dir_ = nullptr;

bool StaticInputs(const Graph& g) {
  for (const Value* v : g.inputs())
    if (!v->type().is_tensor() || !v->type().shape().ranked() || !v->type().shape().is_static()) return false;
  return true;
}

// Whether `v` has a shape known when compiling (a Shape or Size of it folds).
bool StaticShape(const Value* v) {
  return v && v->type().is_tensor() && v->type().shape().ranked() && v->type().shape().is_static();
}

bool IsShapeDerived(const Value* v) {
  const Node* p = v ? v->producer() : nullptr;
  return p && (p->op() == "Shape" || p->op() == "Size") && StaticShape(p->input(0));
}

// What must not survive `default` in a model with static input shapes
// (the shape of a value whose size depends on the data, a detector's
// boxes after NMS, is known only when it is computed).
std::vector<std::string> Leftovers(const Graph& g) {
  std::vector<std::string> out;
  for (const Node* n : g.nodes()) {
    std::string label = absl::StrCat(n->QualifiedOp(), " '", n->name(), "'");
    if ((n->op() == "Shape" || n->op() == "Size") && StaticShape(n->input(0)))
      out.push_back(absl::StrCat("shape op ", label));
    if (n->op() == "Gather" && IsShapeDerived(n->input(0))) out.push_back(absl::StrCat("gather of a shape ", label));
    if (n->op() == "Identity") out.push_back(absl::StrCat("identity ", label));
    bool all_constant = n->subgraphs().empty();
    for (const Value* v : n->inputs()) all_constant &= !v || v->is_constant();
    if (all_constant && n->op().rfind("Random", 0) != 0 && n->op() != "Bernoulli" && n->op() != "Multinomial")
      out.push_back(absl::StrCat("constant-only ", label));
    for (const Graph* s : n->subgraphs())
      for (std::string& l : Leftovers(*s)) out.push_back(std::move(l));
  }
  return out;
}

int CountNodes(const Graph& g) {
  int count = 0;
  for (const Node* n : g.nodes()) {
    ++count;
    for (const Graph* s : n->subgraphs()) count += CountNodes(*s);
  }
  return count;
}

TEST_F(DefaultPipelineTest, SameOutputsAndNoShapePlumbing) {
  ASSERT_FALSE(cases_->empty()) << "no models: neither torch nor the ONNX test data is installed";
  for (const ModelCase& c : *cases_) {
    SCOPED_TRACE(c.name);
    auto model = onnx_import::ImportFile(c.model_path);
    ASSERT_TRUE(model.ok()) << model.status();
    std::vector<Tensor> inputs;
    for (const std::string& f : c.input_files) {
      auto t = ReadInput(f);
      ASSERT_TRUE(t.ok()) << t.status();
      inputs.push_back(*std::move(t));
    }
    Executor before_exec;
    auto expected = before_exec.Run(*model->graph, inputs);
    ASSERT_TRUE(expected.ok()) << expected.status();

    int nodes_before = CountNodes(*model->graph);
    PassManager pm;
    ASSERT_TRUE(pm.AddPipeline("default").ok());
    auto changed = pm.Run(*model);
    ASSERT_TRUE(changed.ok()) << changed.status();
    absl::Status v = VerifyModel(*model);
    ASSERT_TRUE(v.ok()) << v;
    std::cout << "[ models   ] " << c.name << ": " << nodes_before << " -> " << CountNodes(*model->graph)
              << " nodes\n";

    Executor after_exec;
    auto actual = after_exec.Run(*model->graph, inputs);
    ASSERT_TRUE(actual.ok()) << actual.status();
    ASSERT_EQ(actual->size(), expected->size());
    for (size_t i = 0; i < actual->size(); ++i) {
      absl::Status s = CompareTensors((*expected)[i], (*actual)[i], 1e-4, 1e-5);
      EXPECT_TRUE(s.ok()) << "output " << i << ": " << s;
    }
    if (StaticInputs(*model->graph)) {
      std::vector<std::string> left = Leftovers(*model->graph);
      EXPECT_TRUE(left.empty()) << left.size() << " nodes survive, the first: " << left[0];
    }
  }
}

//===--- The ONNX backend test data, pass by pass -------------------------===//


class PassConformanceTest : public testing::TestWithParam<const char*> {
 protected:
  static const std::string& Baseline() {
    static const std::string* baseline = [] {
      auto r = ConformanceReport("");
      return new std::string(r.ok() ? *r : "");
    }();
    return *baseline;
  }
};

TEST_P(PassConformanceTest, SameResultsAsUnoptimized) {
  if (!fs::exists("/usr/share/libonnx-testdata/data/node")) GTEST_SKIP() << "no ONNX test data";
  auto report = ConformanceReport(GetParam());
  ASSERT_TRUE(report.ok()) << report.status();
  std::set<std::string> before = Failures(Baseline());
  std::set<std::string> after = Failures(*report);
  std::istringstream lines(*report);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("FAIL ", 0) != 0) continue;
    std::string id = line.substr(5, line.find(':') - 5);
    EXPECT_TRUE(before.count(id)) << "newly failing with " << GetParam() << ": " << line;
  }
  for (const std::string& id : before)
    EXPECT_TRUE(after.count(id)) << id << " fails without the passes but passes with " << GetParam()
                                 << " (the baseline is suspect)";
}

INSTANTIATE_TEST_SUITE_P(Pipelines, PassConformanceTest,
                         testing::Values("infer-shapes", "fold-constants", "infer-shapes,fold-constants,dce", "cse",
                                         "dce", "eliminate-dead-branches",
                                         "infer-shapes,eliminate-dead-branches,dce", "dedup-constants", "cleanup",
                                         "default"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

//===--- The FileCheck inputs keep their meaning ----------------------------===//

// A tensor for a graph input: symbolic dims are 2, unknown ones 3; floats
// are pseudo-random, integers 2 (trip counts), booleans true.
Tensor MakeInput(const Type& type, uint32_t* seed) {
  Dims dims;
  if (type.shape().ranked()) {
    for (const Dim& d : type.shape().dims()) dims.push_back(d.is_static() ? d.value() : d.is_symbolic() ? 2 : 3);
  } else {
    dims = {3};
  }
  Tensor t(type.dtype(), dims);
  for (int64_t i = 0; i < t.numel(); ++i) {
    *seed = *seed * 1664525u + 1013904223u;
    double r = static_cast<double>(*seed >> 8) / (1 << 24) * 2 - 1;
    switch (type.dtype()) {
      case DType::kF32: t.data<float>()[i] = static_cast<float>(r); break;
      case DType::kF64: t.data<double>()[i] = r; break;
      case DType::kI64: t.data<int64_t>()[i] = 2; break;
      case DType::kI32: t.data<int32_t>()[i] = 2; break;
      case DType::kBool: t.data<bool>()[i] = true; break;
      default: break;
    }
  }
  return t;
}

// The pipeline of a FileCheck test's first RUN line.
std::string PipelineOf(const std::string& text) {
  size_t at = text.find("--passes=");
  if (at == std::string::npos) return "";
  size_t end = text.find_first_of(" \n", at);
  return text.substr(at + 9, end - at - 9);
}

TEST(KirTestsTest, PassesKeepWhatTheTestGraphsCompute) {
  const char* mine[] = {"infer-shapes", "fold-constants", "cse", "dce", "prune", "eliminate-dead-branches",
                        "dedup-constants"};
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(RepoRoot()) / "tests" / "passes")) {
    std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".kir") continue;
    bool ours = false;
    for (const char* p : mine) ours |= file.rfind(p, 0) == 0;
    if (!ours) continue;
    SCOPED_TRACE(file);
    std::ifstream in(entry.path());
    std::stringstream buf;
    buf << in.rdbuf();
    auto model = ParseModel(buf.str(), file);
    ASSERT_TRUE(model.ok()) << model.status();
    std::string pipeline = PipelineOf(buf.str());
    ASSERT_FALSE(pipeline.empty());
    uint32_t seed = 1;
    std::vector<Tensor> inputs;
    for (const Value* v : model->graph->inputs()) inputs.push_back(MakeInput(v->type(), &seed));
    Executor before_exec;
    auto expected = before_exec.Run(*model->graph, inputs);
    if (!expected.ok()) continue;  // a graph that fails on purpose
    PassOptions options;
    if (pipeline == "prune") options.outputs = {model->graph->outputs()[0]->name()};
    PassManager pm(options);
    ASSERT_TRUE(pm.AddPipeline(pipeline).ok());
    auto changed = pm.Run(*model);
    if (!changed.ok()) continue;  // an error test
    absl::Status v = VerifyModel(*model);
    ASSERT_TRUE(v.ok()) << v;
    Executor after_exec;
    auto actual = after_exec.Run(*model->graph, inputs);
    ASSERT_TRUE(actual.ok()) << actual.status();
    ASSERT_LE(actual->size(), expected->size());
    for (size_t i = 0; i < actual->size(); ++i) {
      absl::Status s = CompareTensors((*expected)[i], (*actual)[i], 0, 0);
      EXPECT_TRUE(s.ok()) << "output " << i << " after " << pipeline << ": " << s;
    }
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

//===--- What a fixpoint group skips has nothing to do ---------------------===//

TEST(FixpointGroupTest, SkippedPassesHaveNothingToDo) {
  int graphs = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(RepoRoot()) / "tests" / "passes")) {
    if (entry.path().extension() != ".kir") continue;
    std::ifstream in(entry.path());
    std::stringstream buf;
    buf << in.rdbuf();
    auto model = ParseModel(buf.str(), entry.path().filename().string());
    if (!model.ok()) continue;  // a parser error test
    graphs += CheckGroupSettles(*model, entry.path().filename().string()) > 0;
  }
  EXPECT_GE(graphs, 40);
}

//===--- Scaling ----------------------------------------------------------===//

// A chain of `n` nodes over one input with a constant-only side chain every
// few nodes, a duplicated node, a dead branch and an If on a constant: work
// for every pass.
Model BigModel(int n) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({4})));
  Value* c = g.AddConstant("c", Tensor::FromVector<float>({1, 2, 3, 4}, {4}));
  Value* cur = x;
  for (int i = 0; i < n / 4; ++i) {
    Value* k = g.AddConstant(absl::StrCat("k", i), Tensor::FromVector<float>({1, 2, 3, 4}, {4}));
    Value* folded = g.AddNode("Mul", {c, k}, 1)->output(0);
    Value* a = g.AddNode("Add", {cur, folded}, 1)->output(0);
    Value* b = g.AddNode("Relu", {a}, 1)->output(0);
    g.AddNode("Relu", {a}, 1);  // dead duplicate
    cur = b;
    if (i % 100 == 0) {  // an If on a constant
      Value* t = g.AddConstant(absl::StrCat("t", i), Tensor::Scalar<bool>(true));
      Node* f = g.AddNode("If", {t}, 1);
      auto then_g = std::make_unique<Graph>(absl::StrCat("then", i), &g);
      then_g->AddOutput(then_g->AddNode("Neg", {cur}, 1)->output(0));
      auto else_g = std::make_unique<Graph>(absl::StrCat("else", i), &g);
      else_g->AddOutput(cur);
      f->SetAttr("then_branch", Attribute::GraphValue(std::move(then_g)));
      f->SetAttr("else_branch", Attribute::GraphValue(std::move(else_g)));
      cur = f->output(0);
    }
  }
  g.AddOutput(cur);
  return m;
}

TEST(FixpointGroupTest, SkippedPassesHaveNothingToDoOnAGeneratedGraph) {
  Model m = BigModel(3000);
  EXPECT_EQ(CheckGroupSettles(m, "BigModel(3000)"), 6);
}

TEST(PassScalingTest, HundredThousandNodes) {
  const char* pipelines[] = {"infer-shapes", "fold-constants", "cse", "dce", "eliminate-dead-branches",
                             "dedup-constants", "cleanup"};
  for (const char* p : pipelines) {
    Model m = BigModel(100000);
    PassManager pm;
    ASSERT_TRUE(pm.AddPipeline(p).ok());
    auto start = std::chrono::steady_clock::now();
    auto changed = pm.Run(m);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(changed.ok()) << p << ": " << changed.status();
    // Speed is measured in benchmarks/ (optimizer_bench); here the pipeline
    // must only complete correctly on a large graph.
    std::cout << "[ scaling  ] " << p << ": " << seconds * 1e3 << " ms, " << m.graph->num_nodes() << " nodes left\n";
  }
}

}  // namespace
}  // namespace kiln
