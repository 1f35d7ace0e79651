//===- fold_batchnorm_test.cc - fold-batchnorm against the reference executor ---===//
//
// BatchNormalization after Conv (grouped, depthwise, 1-D/2-D, with and
// without bias), ConvTranspose (grouped, strided), Gemm (transB, every bias
// shape, alpha/beta) and MatMul folds away and the outputs stay the same;
// PyTorch models exported with their BatchNorms kept (TrainingMode.PRESERVE)
// give PyTorch's outputs after folding.
//
//===----------------------------------------------------------------------===//
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/onnx/importer.h"
#include "graph/exec/executor.h"
#include "graph/io/npy.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/fold_batchnorm.h"
#include "graph/verifier/verifier.h"
#include "gtest/gtest.h"
#include "tools/conformance/conformance.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

Tensor Random(Dims dims, uint32_t seed, double lo = -1, double hi = 1, DType dt = DType::kF32) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(NumElements(dims));
  for (double& x : v) x = dist(rng);
  return CastTensor(Tensor::FromVector<double>(v, dims), dt);
}

int CountOp(const Graph& g, absl::string_view op) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op() == op;
  return n;
}

struct Case {
  std::string name;
  std::string op;
  Dims x;                 // input
  Dims w;                 // weight
  std::optional<Dims> b;  // bias (Gemm: C)
  int64_t channels;
  std::vector<std::pair<std::string, Attribute>> attrs;
  DType dtype = DType::kF32;
};

Attribute Ints(std::vector<int64_t> v) { return Attribute::Ints(std::move(v)); }

// op -> BatchNormalization -> Relu, random weights and statistics.
void CheckFold(const Case& c) {
  SCOPED_TRACE(c.name);
  Graph g;
  Tensor x = Random(c.x, 1, -1, 1, c.dtype);
  Value* in = g.AddInput("x", Type::Tensor(c.dtype, Shape::Static(c.x)));
  std::vector<Value*> ins = {in, g.AddConstant("w", Random(c.w, 2, -1, 1, c.dtype))};
  if (c.b) ins.push_back(g.AddConstant("b", Random(*c.b, 3, -1, 1, c.dtype)));
  Node* op = g.AddNode(c.op, ins, 1);
  for (const auto& [name, a] : c.attrs) op->SetAttr(name, a.Clone(&g));
  int64_t ch = c.channels;
  Node* bn = g.AddNode("BatchNormalization",
                       {op->output(0), g.AddConstant("gamma", Random({ch}, 4, 0.5, 2, c.dtype)),
                        g.AddConstant("beta", Random({ch}, 5, -1, 1, c.dtype)),
                        g.AddConstant("mean", Random({ch}, 6, -1, 1, c.dtype)),
                        g.AddConstant("var", Random({ch}, 7, 0.1, 3, c.dtype))},
                       1);
  bn->SetAttr("epsilon", Attribute::Float(1e-3f));
  Node* relu = g.AddNode("Relu", {bn->output(0)}, 1);
  g.AddOutput(relu->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  Executor e1;
  auto before = e1.Run(g, {x});
  ASSERT_TRUE(before.ok()) << before.status();

  PassStatistics stats;
  EXPECT_TRUE(FoldBatchNorms(g, &stats));
  EXPECT_EQ(CountOp(g, "BatchNormalization"), 0);
  EXPECT_EQ(stats.counters().at("batchnorms-folded"), 1);
  ASSERT_TRUE(VerifyGraph(g).ok());
  Executor e2;
  auto after = e2.Run(g, {x});
  ASSERT_TRUE(after.ok()) << after.status();
  double tol = c.dtype == DType::kF64 ? 1e-12 : 1e-5;
  absl::Status s = CompareTensors((*before)[0], (*after)[0], tol, tol);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(FoldBatchNormTest, Conv) {
  CheckFold({"conv2d", "Conv", {2, 3, 7, 7}, {8, 3, 3, 3}, Dims{8}, 8, {}});
  CheckFold({"conv2d no bias", "Conv", {1, 4, 9, 9}, {6, 4, 3, 3}, std::nullopt, 6, {}});
  CheckFold({"conv1d", "Conv", {2, 3, 11}, {4, 3, 5}, Dims{4}, 4, {}});
  CheckFold({"conv2d f64", "Conv", {1, 3, 5, 5}, {4, 3, 3, 3}, Dims{4}, 4, {}, DType::kF64});
}

TEST(FoldBatchNormTest, ConvWithAttributes) {
  Case c{"conv2d pads strides", "Conv", {1, 3, 9, 9}, {5, 3, 3, 3}, Dims{5}, 5, {}};
  c.attrs.emplace_back("pads", Ints({1, 1, 1, 1}));
  c.attrs.emplace_back("strides", Ints({2, 2}));
  CheckFold(c);
  Case d{"depthwise", "Conv", {1, 6, 8, 8}, {6, 1, 3, 3}, Dims{6}, 6, {}};
  d.attrs.emplace_back("group", Attribute::Int(6));
  CheckFold(d);
  Case m{"depthwise multiplier, no bias", "Conv", {1, 5, 6, 6}, {10, 1, 3, 3}, std::nullopt, 10, {}};
  m.attrs.emplace_back("group", Attribute::Int(5));
  CheckFold(m);
  Case e{"groups", "Conv", {1, 4, 6, 6}, {6, 2, 3, 3}, Dims{6}, 6, {}};
  e.attrs.emplace_back("group", Attribute::Int(2));
  CheckFold(e);
}

TEST(FoldBatchNormTest, ConvTranspose) {
  CheckFold({"convtranspose", "ConvTranspose", {1, 3, 5, 5}, {3, 4, 3, 3}, Dims{4}, 4, {}});
  Case g{"convtranspose groups stride", "ConvTranspose", {1, 4, 5, 5}, {4, 3, 2, 2}, std::nullopt, 6, {}};
  g.attrs.emplace_back("group", Attribute::Int(2));
  g.attrs.emplace_back("strides", Ints({2, 2}));
  CheckFold(g);
  CheckFold({"convtranspose 1d", "ConvTranspose", {2, 2, 7}, {2, 5, 3}, Dims{5}, 5, {}});
}

TEST(FoldBatchNormTest, Gemm) {
  CheckFold({"gemm", "Gemm", {5, 4}, {4, 3}, std::nullopt, 3, {}});
  Case t{"gemm transB", "Gemm", {5, 4}, {3, 4}, Dims{3}, 3, {}};
  t.attrs.emplace_back("transB", Attribute::Int(1));
  CheckFold(t);
  for (Dims c : {Dims{1, 3}, Dims{5, 3}, Dims{5, 1}, Dims{}}) {
    Case b{absl::StrCat("gemm C rank ", c.size()), "Gemm", {5, 4}, {4, 3}, c, 3, {}};
    b.attrs.emplace_back("alpha", Attribute::Float(2.0f));
    b.attrs.emplace_back("beta", Attribute::Float(0.5f));
    CheckFold(b);
  }
  Case ta{"gemm transA", "Gemm", {4, 5}, {4, 3}, Dims{3}, 3, {}};
  ta.attrs.emplace_back("transA", Attribute::Int(1));
  CheckFold(ta);
}

TEST(FoldBatchNormTest, MatMulBecomesGemm) {
  CheckFold({"matmul", "MatMul", {5, 4}, {4, 3}, std::nullopt, 3, {}});
}

//===--- PyTorch models with their BatchNorms -----------------------------===//

const char* kExportScript = R"(
import sys, numpy as np, torch, torch.nn as nn, torchvision
torch.manual_seed(0)
out = sys.argv[1]
def randomize(m):
    for mod in m.modules():
        if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
            mod.running_mean.uniform_(-0.5, 0.5); mod.running_var.uniform_(0.5, 2)
            mod.weight.data.uniform_(0.5, 1.5); mod.bias.data.uniform_(-0.5, 0.5)
    return m.eval()
class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1); self.b1 = nn.BatchNorm2d(8)
        self.t = nn.ConvTranspose2d(8, 4, 2, stride=2, groups=2); self.b2 = nn.BatchNorm2d(4)
        self.l = nn.Linear(4 * 16 * 16, 10); self.b3 = nn.BatchNorm1d(10)
    def forward(self, x):
        x = torch.relu(self.b1(self.c(x)))
        x = self.b2(self.t(x))
        return self.b3(self.l(x.flatten(1)))
for name, m, shape in [('resnet18', torchvision.models.resnet18(), (1, 3, 64, 64)), ('mixed', Mixed(), (2, 3, 8, 8))]:
    m = randomize(m)
    x = torch.randn(*shape)
    torch.onnx.export(m, x, f'{out}/{name}.onnx', training=torch.onnx.TrainingMode.PRESERVE, opset_version=14)
    np.save(f'{out}/{name}_in.npy', x.numpy())
    np.save(f'{out}/{name}_out.npy', m(x).detach().numpy())
)";

TEST(FoldBatchNormTest, PyTorchModelsKeepTheirOutputs) {
  if (const char* no = std::getenv("KILN_TEST_NO_TORCH"); no && *no && *no != '0') GTEST_SKIP() << "KILN_TEST_NO_TORCH";
  if (std::system("/usr/bin/python3 -c 'import torch, torchvision' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no torch";
  char tmpl[] = "/tmp/kiln-fold-batchnorm-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  {
    std::ofstream script(dir + "/export.py");
    script << kExportScript;
  }
  std::string cmd = absl::StrCat("/usr/bin/python3 ", dir, "/export.py ", dir, " >", dir, "/export.log 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "export failed, see " << dir << "/export.log";
  for (const char* name : {"resnet18", "mixed"}) {
    SCOPED_TRACE(name);
    auto model = onnx_import::ImportFile(absl::StrCat(dir, "/", name, ".onnx"));
    ASSERT_TRUE(model.ok()) << model.status();
    auto x = ReadNpy(absl::StrCat(dir, "/", name, "_in.npy"));
    auto expected = ReadNpy(absl::StrCat(dir, "/", name, "_out.npy"));
    ASSERT_TRUE(x.ok() && expected.ok());
    int bns = CountOp(*model->graph, "BatchNormalization");
    size_t nodes = model->graph->num_nodes();
    PassStatistics stats;
    EXPECT_TRUE(FoldBatchNorms(*model->graph, &stats));
    ASSERT_TRUE(VerifyModel(*model).ok());
    EXPECT_EQ(CountOp(*model->graph, "BatchNormalization"), 0);
    std::cout << "[ fold-bn  ] " << name << ": " << bns << " BatchNormalization folded, " << nodes << " -> "
              << model->graph->num_nodes() << " nodes\n";
    Executor exec;
    auto actual = exec.Run(*model->graph, {*x});
    ASSERT_TRUE(actual.ok()) << actual.status();
    absl::Status s = CompareTensors(*expected, (*actual)[0], 1e-4, 1e-4);
    EXPECT_TRUE(s.ok()) << s;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace kiln
