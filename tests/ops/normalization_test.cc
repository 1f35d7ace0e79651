// Tests of the normalization family: Softmax/LogSoftmax (and their opset<13
// upgrade), BatchNormalization, InstanceNormalization, LayerNormalization,
// LpNormalization, LRN and MeanVarianceNormalization.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "graph/exec/executor.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"

namespace kiln {
namespace {

Tensor F32T(std::vector<float> v, Dims dims) { return Tensor::FromVector<float>(v, std::move(dims)); }
Type TypeOf(const Tensor& t) {
  DimVector d(t.dims().begin(), t.dims().end());
  return Type::Tensor(t.dtype(), Shape(std::move(d)));
}
std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<float>(t.GetDouble(i)));
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

Tensor Ramp(Dims dims, float scale = 0.37f, float offset = -1.1f) {
  Tensor t(DType::kF32, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::sin(static_cast<float>(i) * scale) * 2 + offset;
  return t;
}

TEST(NormalizationOps, SoftmaxMiddleAxis) {
  Tensor x = Ramp({2, 3, 4});
  OneOp op("Softmax", {x});
  op.Attr("axis", Attribute::Int(1));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  const float* p = x.data<float>();
  std::vector<float> want(24);
  for (int o = 0; o < 2; ++o)
    for (int j = 0; j < 4; ++j) {
      double s = 0;
      for (int k = 0; k < 3; ++k) s += std::exp(p[(o * 3 + k) * 4 + j]);
      for (int k = 0; k < 3; ++k) want[(o * 3 + k) * 4 + j] = static_cast<float>(std::exp(p[(o * 3 + k) * 4 + j]) / s);
    }
  ExpectNear(Floats((*r)[0]), want);
}

TEST(NormalizationOps, LogSoftmaxLargeNumbers) {
  OneOp op("LogSoftmax", {F32T({1000, 1001, 1002, -1000, 0, 1000}, {2, 3})});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  double l = std::log(1 + std::exp(-1.0) + std::exp(-2.0));
  ExpectNear(Floats((*r)[0]), {static_cast<float>(-2 - l), static_cast<float>(-1 - l), static_cast<float>(-l),
                               -2000, -1000, 0}, 1e-4f);
}

TEST(NormalizationOps, SoftmaxUpgradeCoercesTo2D) {
  // Opset 11, axis 1 on [2,3,4]: softmax over the 12 elements of each batch.
  Tensor x = Ramp({2, 3, 4});
  OneOp op("Softmax", {x});
  op.Attr("axis", Attribute::Int(1));
  std::string out_name = op.node->output(0)->name();
  const OpDef* def = OpRegistry::Global().Find(*op.node);
  ASSERT_TRUE(def->upgrade(op.g, op.node, 11).ok());
  EXPECT_GT(op.g.num_nodes(), 1u);
  EXPECT_EQ(op.g.outputs()[0]->name(), out_name);
  ASSERT_TRUE(InferShapes(op.g).ok());
  Executor ex;
  auto r = ex.Run(op.g, op.feeds);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dims(), (Dims{2, 3, 4}));
  const float* p = x.data<float>();
  std::vector<float> want(24);
  for (int o = 0; o < 2; ++o) {
    double s = 0;
    for (int k = 0; k < 12; ++k) s += std::exp(p[o * 12 + k]);
    for (int k = 0; k < 12; ++k) want[o * 12 + k] = static_cast<float>(std::exp(p[o * 12 + k]) / s);
  }
  ExpectNear(Floats((*r)[0]), want);
}

TEST(NormalizationOps, SoftmaxUpgradeDefaultAxisOnMatrix) {
  OneOp op("LogSoftmax", {Ramp({3, 5})});
  const OpDef* def = OpRegistry::Global().Find(*op.node);
  ASSERT_TRUE(def->upgrade(op.g, op.node, 1).ok());
  EXPECT_EQ(op.g.num_nodes(), 1u);
  EXPECT_EQ(op.node->GetInt("axis", -1), 1);
}

TEST(NormalizationOps, SoftmaxHalf) {
  Tensor h(DType::kF16, {4});
  for (int i = 0; i < 4; ++i) h.data<Half>()[i] = Half(static_cast<float>(i));
  OneOp op("Softmax", {h});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  double s = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR((*r)[0].GetDouble(3), std::exp(3.0) / s, 1e-3);
}

TEST(NormalizationOps, SoftmaxBadAxis) {
  OneOp op("Softmax", {Ramp({2, 3})});
  op.Attr("axis", Attribute::Int(2));
  EXPECT_FALSE(op.Infer().ok());
  OneOp ints("Softmax", {Tensor(DType::kI32, {3})});
  EXPECT_FALSE(ints.Infer().ok());
}

TEST(NormalizationOps, BatchNormInference) {
  Tensor x = Ramp({2, 3, 2});
  Tensor s = F32T({1, 2, 0.5f}, {3}), b = F32T({0, 1, -1}, {3}), m = F32T({0.1f, -0.2f, 0.3f}, {3}),
         v = F32T({1, 0.5f, 2}, {3});
  OneOp op("BatchNormalization", {x, s, b, m, v});
  op.Attr("epsilon", Attribute::Float(1e-3f));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<float> want(12);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 2; ++i) {
        int k = (n * 3 + c) * 2 + i;
        want[k] = static_cast<float>(s.data<float>()[c] * (x.data<float>()[k] - m.data<float>()[c]) /
                                         std::sqrt(v.data<float>()[c] + 1e-3) + b.data<float>()[c]);
      }
  ExpectNear(Floats((*r)[0]), want);
}

TEST(NormalizationOps, BatchNormTraining) {
  Tensor x = Ramp({2, 2, 3});
  Tensor s = F32T({1, 2}, {2}), b = F32T({0, 1}, {2}), m = F32T({0.5f, -0.5f}, {2}), v = F32T({1, 2}, {2});
  OneOp op("BatchNormalization", {x, s, b, m, v}, {}, 3);
  op.Attr("training_mode", Attribute::Int(1)).Attr("momentum", Attribute::Float(0.8f));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out(1).ToString(), "f32[2]");
  const float* p = x.data<float>();
  for (int c = 0; c < 2; ++c) {
    double mean = 0, var = 0;
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 3; ++i) mean += p[(n * 2 + c) * 3 + i];
    mean /= 6;
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 3; ++i) var += std::pow(p[(n * 2 + c) * 3 + i] - mean, 2);
    var /= 6;
    EXPECT_NEAR((*r)[1].GetDouble(c), m.data<float>()[c] * 0.8 + mean * 0.2, 1e-5);
    EXPECT_NEAR((*r)[2].GetDouble(c), v.data<float>()[c] * 0.8 + var * 0.2, 1e-5);
    int k = (1 * 2 + c) * 3 + 2;
    EXPECT_NEAR((*r)[0].GetDouble(k), s.data<float>()[c] * (p[k] - mean) / std::sqrt(var + 1e-5) + b.data<float>()[c],
                1e-4);
  }
}

TEST(NormalizationOps, BatchNormUpgradeFromOpset6) {
  Tensor x = Ramp({1, 2, 2});
  Tensor s = F32T({1, 1}, {2}), b = F32T({0, 0}, {2}), m = F32T({0, 0}, {2}), v = F32T({1, 1}, {2});
  OneOp op("BatchNormalization", {x, s, b, m, v});
  op.Attr("is_test", Attribute::Int(1)).Attr("spatial", Attribute::Int(1));
  const OpDef* def = OpRegistry::Global().Find(*op.node);
  ASSERT_TRUE(def->upgrade(op.g, op.node, 6).ok());
  EXPECT_FALSE(op.node->has_attr("is_test"));
  EXPECT_FALSE(op.node->has_attr("spatial"));
  EXPECT_FALSE(op.node->has_attr("training_mode"));
  ASSERT_TRUE(op.Run().ok());
}

TEST(NormalizationOps, BatchNormUpgradeNonSpatial) {
  // spatial=0: per-activation statistics of shape (C, D).
  Tensor x = Ramp({2, 2, 3});
  Tensor s = Ramp({2, 3}, 0.5f, 1.5f), b = Ramp({2, 3}, 0.2f, 0.f), m = Ramp({2, 3}, 0.9f, 0.f),
         v = Ramp({2, 3}, 0.3f, 2.5f);
  OneOp op("BatchNormalization", {x, s, b, m, v});
  op.Attr("spatial", Attribute::Int(0)).Attr("is_test", Attribute::Int(1));
  const OpDef* def = OpRegistry::Global().Find(*op.node);
  ASSERT_TRUE(def->upgrade(op.g, op.node, 6).ok());
  ASSERT_TRUE(InferShapes(op.g).ok());
  Executor ex;
  auto r = ex.Run(op.g, op.feeds);
  ASSERT_TRUE(r.ok()) << r.status();
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 6; ++k) {
      int i = n * 6 + k;
      double want = (x.data<float>()[i] - m.data<float>()[k]) / std::sqrt(v.data<float>()[k] + 1e-5) *
                        s.data<float>()[k] + b.data<float>()[k];
      EXPECT_NEAR((*r)[0].GetDouble(i), want, 1e-4);
    }
}

TEST(NormalizationOps, BatchNormChecksParams) {
  OneOp op("BatchNormalization", {Ramp({2, 3, 2}), F32T({1, 1}, {2}), F32T({0, 0, 0}, {3}), F32T({0, 0, 0}, {3}),
                                  F32T({1, 1, 1}, {3})});
  EXPECT_FALSE(op.Infer().ok());
}

TEST(NormalizationOps, InstanceNorm) {
  Tensor x = Ramp({2, 2, 3});
  OneOp op("InstanceNormalization", {x, F32T({1, 2}, {2}), F32T({0, 1}, {2})});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  const float* p = x.data<float>();
  for (int g = 0; g < 4; ++g) {
    int c = g % 2;
    double mean = (p[g * 3] + p[g * 3 + 1] + p[g * 3 + 2]) / 3.0, var = 0;
    for (int i = 0; i < 3; ++i) var += std::pow(p[g * 3 + i] - mean, 2) / 3.0;
    EXPECT_NEAR((*r)[0].GetDouble(g * 3 + 1), (c + 1) * (p[g * 3 + 1] - mean) / std::sqrt(var + 1e-5) + c, 1e-4);
  }
}

TEST(NormalizationOps, LayerNorm) {
  Tensor x = Ramp({2, 3, 4});
  Tensor scale = Ramp({3, 4}, 0.3f, 1.0f), bias = Ramp({4}, 0.7f, 0.0f);
  OneOp op("LayerNormalization", {x, scale, bias}, {}, 3);
  op.Attr("axis", Attribute::Int(1));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out(1).ToString(), "f32[2,1,1]");
  EXPECT_EQ(op.Out(2).ToString(), "f32[2,1,1]");
  const float* p = x.data<float>();
  for (int row = 0; row < 2; ++row) {
    double mean = 0, var = 0;
    for (int j = 0; j < 12; ++j) mean += p[row * 12 + j] / 12.0;
    for (int j = 0; j < 12; ++j) var += std::pow(p[row * 12 + j] - mean, 2) / 12.0;
    double inv = 1 / std::sqrt(var + 1e-5);
    EXPECT_NEAR((*r)[1].GetDouble(row), mean, 1e-5);
    EXPECT_NEAR((*r)[2].GetDouble(row), inv, 1e-4);
    for (int j = 0; j < 12; ++j)
      EXPECT_NEAR((*r)[0].GetDouble(row * 12 + j),
                  (p[row * 12 + j] - mean) * inv * scale.data<float>()[j] + bias.data<float>()[j % 4], 1e-4);
  }
  OneOp bad("LayerNormalization", {x, Ramp({5})});
  EXPECT_FALSE(bad.Run().ok());
}

TEST(NormalizationOps, LpNormalization) {
  OneOp op("LpNormalization", {F32T({3, 4, -1, 1}, {2, 2})});
  op.Attr("axis", Attribute::Int(0)).Attr("p", Attribute::Int(1));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {0.75f, 0.8f, -0.25f, 0.2f});
  OneOp l2("LpNormalization", {F32T({3, 4}, {1, 2})});
  r = l2.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {0.6f, 0.8f});
  OneOp bad("LpNormalization", {F32T({3, 4}, {1, 2})});
  bad.Attr("p", Attribute::Int(3));
  EXPECT_FALSE(bad.Infer().ok());
}

TEST(NormalizationOps, LRN) {
  Tensor x = Ramp({1, 5, 2});
  OneOp op("LRN", {x});
  op.Attr("size", Attribute::Int(3)).Attr("alpha", Attribute::Float(0.1f)).Attr("beta", Attribute::Float(0.5f));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  const float* p = x.data<float>();
  for (int c = 0; c < 5; ++c)
    for (int s = 0; s < 2; ++s) {
      double sq = 0;
      for (int k = std::max(0, c - 1); k <= std::min(4, c + 1); ++k) sq += p[k * 2 + s] * p[k * 2 + s];
      EXPECT_NEAR((*r)[0].GetDouble(c * 2 + s), p[c * 2 + s] / std::pow(1 + 0.1 / 3 * sq, 0.5), 1e-5);
    }
  OneOp missing("LRN", {x});
  EXPECT_FALSE(missing.Infer().ok());
}

TEST(NormalizationOps, MeanVarianceNormalization) {
  Tensor x = Ramp({2, 3, 2, 1});
  OneOp op("MeanVarianceNormalization", {x});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  const float* p = x.data<float>();
  for (int c = 0; c < 3; ++c) {
    double mean = 0, sq = 0;
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 2; ++i) {
        double v = p[(n * 3 + c) * 2 + i];
        mean += v / 4;
        sq += v * v / 4;
      }
    double sd = std::sqrt(sq - mean * mean);
    int k = (1 * 3 + c) * 2 + 1;
    EXPECT_NEAR((*r)[0].GetDouble(k), (p[k] - mean) / (sd + 1e-9), 1e-4);
  }
}

TEST(NormalizationOps, EmptyInputs) {
  for (const char* op : {"Softmax", "LogSoftmax", "LpNormalization", "MeanVarianceNormalization"}) {
    OneOp o(op, {Tensor(DType::kF32, {0, 3, 1, 1})});
    auto r = o.Run();
    ASSERT_TRUE(r.ok()) << op << ": " << r.status();
    EXPECT_EQ((*r)[0].numel(), 0);
  }
  OneOp ln("LayerNormalization", {Tensor(DType::kF32, {2, 0}), Tensor(DType::kF32, {0})}, {}, 3);
  auto r = ln.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[1].dims(), (Dims{2, 1}));
  OneOp lrn("LRN", {Tensor(DType::kF32, {1, 0, 2})});
  lrn.Attr("size", Attribute::Int(3));
  ASSERT_TRUE(lrn.Run().ok());
}

}  // namespace
}  // namespace kiln
