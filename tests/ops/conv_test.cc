// Tests of the conv family: Conv and ConvTranspose against direct loops
// (groups, strides, dilations, pads, auto_pad, 1-D/2-D/3-D, f16), the pools
// (ceil_mode, count_include_pad, Indices with storage_order, LpPool, global
// pools), MaxUnpool, MaxRoiPool, RoiAlign, inference, errors, costs and
// upgraders.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "graph/exec/executor.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"

namespace kiln {
namespace {

Tensor F32T(std::vector<float> v, Dims dims) { return Tensor::FromVector<float>(v, std::move(dims)); }
Tensor I64T(std::vector<int64_t> v, Dims dims) { return Tensor::FromVector<int64_t>(v, std::move(dims)); }
Type TypeOf(const Tensor& t) {
  DimVector d(t.dims().begin(), t.dims().end());
  return Type::Tensor(t.dtype(), Shape(std::move(d)));
}
std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<float>(t.GetDouble(i)));
  return v;
}
std::vector<int64_t> Ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.GetInt(i));
  return v;
}

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
  OneOp& Ints(const char* name, std::vector<int64_t> v) { return Attr(name, Attribute::Ints(std::move(v))); }
  absl::Status Infer() { return InferShapes(g); }
  Type Out(int i = 0) const { return node->output(i)->type(); }
  absl::StatusOr<std::vector<Tensor>> Run() {
    absl::Status s = InferShapes(g);
    if (!s.ok()) return s;
    Executor ex;
    return ex.Run(g, feeds);
  }
};

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-4f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

Tensor Ramp(Dims dims, float scale = 0.37f, float phase = 0) {
  Tensor t(DType::kF32, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::sin(static_cast<float>(i) * scale + phase);
  return t;
}

int64_t Prod(const Dims& d, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < d.size(); ++i) p *= d[i];
  return p;
}

// Decodes a flat index into a multi-index over dims.
Dims Unflatten(int64_t i, const Dims& dims) {
  Dims idx(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    idx[d] = i % dims[d];
    i /= dims[d];
  }
  return idx;
}

struct ConvParams {
  std::vector<int64_t> strides, dilations, pads;  // pads: begin..., end...
  int64_t group = 1;
};

// Direct convolution: one output element at a time.
std::vector<float> NaiveConv(const Tensor& x, const Tensor& w, const Tensor* b, const ConvParams& p, Dims& out_dims) {
  const int nsp = x.rank() - 2;
  const int64_t N = x.dim(0), C = x.dim(1), M = w.dim(0), Cg = C / p.group, Mg = M / p.group;
  out_dims = {N, M};
  for (int d = 0; d < nsp; ++d) {
    int64_t ek = (w.dim(d + 2) - 1) * p.dilations[d] + 1;
    out_dims.push_back((x.dim(d + 2) + p.pads[d] + p.pads[d + nsp] - ek) / p.strides[d] + 1);
  }
  Dims osp(out_dims.begin() + 2, out_dims.end());
  Dims ksp(w.dims().begin() + 2, w.dims().end());
  std::vector<float> y(Prod(out_dims));
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t o = 0; o < Prod(osp); ++o) {
        Dims oi = Unflatten(o, osp);
        double s = b ? b->data<float>()[m] : 0.0;
        int64_t g = m / Mg;
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t k = 0; k < Prod(ksp); ++k) {
            Dims ki = Unflatten(k, ksp);
            int64_t off = 0;
            bool ok = true;
            for (int d = 0; d < nsp; ++d) {
              int64_t pos = oi[d] * p.strides[d] - p.pads[d] + ki[d] * p.dilations[d];
              if (pos < 0 || pos >= x.dim(d + 2)) ok = false;
              off = off * x.dim(d + 2) + pos;
            }
            if (!ok) continue;
            s += static_cast<double>(xp[(n * C + g * Cg + c) * Prod(x.dims(), 2) + off]) *
                 wp[(m * Cg + c) * Prod(ksp) + k];
          }
        y[(n * M + m) * Prod(osp) + o] = static_cast<float>(s);
      }
  return y;
}

void CheckConv(Dims xd, Dims wd, ConvParams p, bool bias) {
  Tensor x = Ramp(xd, 0.37f), w = Ramp(wd, 0.23f, 0.5f), b = Ramp({wd[0]}, 0.9f, 1.0f);
  std::vector<Tensor> ins = {x, w};
  if (bias) ins.push_back(b);
  OneOp op("Conv", ins);
  op.Ints("strides", p.strides).Ints("dilations", p.dilations).Ints("pads", p.pads);
  op.Attr("group", Attribute::Int(p.group));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  Dims od;
  std::vector<float> want = NaiveConv(x, w, bias ? &b : nullptr, p, od);
  EXPECT_EQ((*r)[0].dims(), od);
  ExpectNear(Floats((*r)[0]), want, 1e-3f);
}

TEST(ConvOps, Conv2dMatchesDirectLoops) {
  CheckConv({2, 3, 7, 6}, {4, 3, 3, 2}, {{1, 1}, {1, 1}, {0, 0, 0, 0}}, true);
  CheckConv({1, 4, 9, 8}, {6, 2, 3, 3}, {{2, 1}, {1, 2}, {1, 0, 2, 1}, 2}, true);
  CheckConv({1, 4, 5, 5}, {4, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1, 1, 1}, 4}, false);  // depthwise
  CheckConv({1, 3, 6, 6}, {6, 1, 2, 2}, {{2, 2}, {1, 1}, {0, 0, 1, 1}, 3}, true);   // multiplier 2
}

TEST(ConvOps, Conv1dAnd3d) {
  CheckConv({2, 2, 11}, {3, 2, 3}, {{2}, {2}, {1, 2}}, true);
  CheckConv({1, 2, 5, 4, 6}, {2, 1, 2, 3, 2}, {{1, 2, 1}, {2, 1, 1}, {1, 0, 1, 0, 1, 1}, 2}, true);
}

TEST(ConvOps, ConvLargeUsesChunkedIm2Col) {
  // K = 64*9 = 576 columns per position and 32*30 positions: several chunks.
  CheckConv({1, 64, 32, 30}, {5, 64, 3, 3}, {{1, 1}, {1, 1}, {1, 1, 1, 1}}, true);
  // 1x1 kernels take the direct path.
  CheckConv({2, 8, 5, 7}, {3, 8, 1, 1}, {{1, 1}, {1, 1}, {0, 0, 0, 0}}, true);
  CheckConv({1, 8, 5, 7}, {3, 8, 1, 1}, {{2, 2}, {1, 1}, {0, 0, 0, 0}}, false);
}

TEST(ConvOps, ConvAutoPadAndKernelFromWeights) {
  Tensor x = Ramp({1, 2, 6, 5}), w = Ramp({3, 2, 3, 3}, 0.11f);
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    OneOp op("Conv", {x, w});
    op.Attr("auto_pad", Attribute::String(mode)).Ints("strides", {2, 2});
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    ConvParams p{{2, 2}, {1, 1}, {0, 0, 0, 0}};
    std::string m = mode;
    if (m != "VALID") {
      // out = ceil(in/s): H 6 -> 3, total pad 1; W 5 -> 3, total pad 2.
      if (m == "SAME_UPPER") p.pads = {0, 1, 1, 1};
      else p.pads = {1, 1, 0, 1};
    }
    Dims od;
    std::vector<float> want = NaiveConv(x, w, nullptr, p, od);
    EXPECT_EQ((*r)[0].dims(), od) << mode;
    ExpectNear(Floats((*r)[0]), want, 1e-4f);
  }
}

TEST(ConvOps, ConvF16ComputesInFloat) {
  Tensor x = Ramp({1, 3, 6, 6}), w = Ramp({2, 3, 3, 3}, 0.2f);
  OneOp f32("Conv", {x, w});
  OneOp f16("Conv", {CastTensor(x, DType::kF16), CastTensor(w, DType::kF16)});
  auto a = f32.Run();
  auto b = f16.Run();
  ASSERT_TRUE(a.ok() && b.ok()) << b.status();
  EXPECT_EQ((*b)[0].dtype(), DType::kF16);
  ExpectNear(Floats((*b)[0]), Floats((*a)[0]), 2e-2f);
  OneOp bf("Conv", {CastTensor(x, DType::kBF16), CastTensor(w, DType::kBF16)});
  auto c = bf.Run();
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectNear(Floats((*c)[0]), Floats((*a)[0]), 1.5e-1f);
}

TEST(ConvOps, ConvInferenceKeepsSymbolsAndChecks) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape({Dim::Symbol("N"), Dim(3), Dim(), Dim(10)})));
  Value* w = g.AddInput("w", Type::Tensor(DType::kF32, Shape::Static({8, 3, 3, 3})));
  Node* n = g.AddNode("Conv", {x, w}, 1);
  n->SetAttr("strides", Attribute::Ints({1, 2}));
  g.AddOutput(n->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(n->output(0)->type().ToString(), "f32[N,8,?,4]");

  Graph g2;
  Value* x2 = g2.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({1, 4, 5, 5})));
  Value* w2 = g2.AddInput("w", Type::Tensor(DType::kF32, Shape::Static({8, 3, 3, 3})));
  Node* n2 = g2.AddNode("Conv", {x2, w2}, 1);
  g2.AddOutput(n2->output(0));
  absl::Status s = InferShapes(g2);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("channels"), std::string::npos) << s;

  Graph g3;  // unranked input: unranked output, no crash
  Value* x3 = g3.AddInput("x", Type::Tensor(DType::kF32));
  Value* w3 = g3.AddInput("w", Type());
  Node* n3 = g3.AddNode("Conv", {x3, w3}, 1);
  g3.AddOutput(n3->output(0));
  EXPECT_TRUE(InferShapes(g3).ok());
}

TEST(ConvOps, ConvErrorsAreStatuses) {
  Tensor x = Ramp({1, 4, 3, 3}), w = Ramp({4, 2, 5, 5});
  {
    OneOp op("Conv", {x, w});
    op.Attr("group", Attribute::Int(2));
    EXPECT_FALSE(op.Run().ok());  // kernel larger than input
  }
  {
    OneOp op("Conv", {x, Ramp({4, 2, 1, 1})});
    op.Attr("group", Attribute::Int(3));
    EXPECT_FALSE(op.Run().ok());
  }
  {
    OneOp op("Conv", {x, Ramp({4, 4, 1, 1})});
    op.Ints("strides", {0, 1});
    EXPECT_FALSE(op.Run().ok());
  }
  {
    OneOp op("Conv", {x, Ramp({4, 4, 1, 1}), Ramp({3})});
    EXPECT_FALSE(op.Run().ok());
  }
}

// Direct transposed convolution: scatter every input element.
std::vector<float> NaiveConvTranspose(const Tensor& x, const Tensor& w, const ConvParams& p,
                                      const Dims& out_sp) {
  const int nsp = x.rank() - 2;
  const int64_t N = x.dim(0), C = x.dim(1), Mg = w.dim(1), M = Mg * p.group, Cg = C / p.group;
  Dims isp(x.dims().begin() + 2, x.dims().end());
  Dims ksp(w.dims().begin() + 2, w.dims().end());
  std::vector<double> y(N * M * Prod(out_sp), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < Prod(isp); ++i) {
        Dims ii = Unflatten(i, isp);
        float xv = x.data<float>()[(n * C + c) * Prod(isp) + i];
        int64_t g = c / Cg;
        for (int64_t m = 0; m < Mg; ++m)
          for (int64_t k = 0; k < Prod(ksp); ++k) {
            Dims ki = Unflatten(k, ksp);
            int64_t off = 0;
            bool ok = true;
            for (int d = 0; d < nsp; ++d) {
              int64_t pos = ii[d] * p.strides[d] - p.pads[d] + ki[d] * p.dilations[d];
              if (pos < 0 || pos >= out_sp[d]) ok = false;
              off = off * out_sp[d] + pos;
            }
            if (!ok) continue;
            y[(n * M + g * Mg + m) * Prod(out_sp) + off] += xv * w.data<float>()[(c * Mg + m) * Prod(ksp) + k];
          }
      }
  return std::vector<float>(y.begin(), y.end());
}

TEST(ConvOps, ConvTransposeMatchesScatter) {
  Tensor x = Ramp({2, 4, 3, 4}), w = Ramp({4, 3, 3, 2}, 0.3f);
  OneOp op("ConvTranspose", {x, w});
  op.Ints("strides", {2, 3}).Ints("dilations", {1, 2}).Ints("pads", {1, 0, 0, 2}).Ints("output_padding", {1, 0});
  op.Attr("group", Attribute::Int(2));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  // H: 2*(3-1) + 1 + 3 - 1 - 0 = 7; W: 3*(4-1) + 0 + 3 - 0 - 2 = 10.
  Dims out_sp = {7, 10};
  EXPECT_EQ((*r)[0].dims(), (Dims{2, 6, 7, 10}));
  EXPECT_EQ(op.Out().ToString(), "f32[2,6,7,10]");
  ConvParams p{{2, 3}, {1, 2}, {1, 0, 0, 2}, 2};
  ExpectNear(Floats((*r)[0]), NaiveConvTranspose(x, w, p, out_sp), 1e-4f);
}

TEST(ConvOps, ConvTransposeOutputShapeAndBias) {
  Tensor x = Ramp({1, 2, 3}), w = Ramp({2, 2, 3}, 0.3f), b = F32T({10, 20}, {2});
  OneOp op("ConvTranspose", {x, w, b});
  op.Ints("strides", {2}).Ints("output_shape", {9});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ((*r)[0].dims(), (Dims{1, 2, 9}));
  // Full output is 2*2+3 = 7 wide; the two extra positions hold the bias.
  std::vector<float> want = NaiveConvTranspose(x, w, {{2}, {1}, {0, 0}}, {9});
  for (int64_t m = 0; m < 2; ++m)
    for (int64_t i = 0; i < 9; ++i) want[m * 9 + i] += m == 0 ? 10 : 20;
  ExpectNear(Floats((*r)[0]), want, 1e-4f);
}

//===--- Pools ---===//

TEST(PoolOps, MaxPoolIndicesStorageOrder) {
  // 1x1x3x4, values chosen so the maxima are unique.
  Tensor x = F32T({1, 9, 2, 3, 4, 5, 11, 0, 8, 7, 6, 12}, {1, 1, 3, 4});
  for (int64_t order : {0, 1}) {
    OneOp op("MaxPool", {x}, {}, 2);
    op.Ints("kernel_shape", {2, 2}).Ints("strides", {1, 2});
    op.Attr("storage_order", Attribute::Int(order));
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectNear(Floats((*r)[0]), {9, 11, 8, 12});
    // Maxima at (0,1), (1,2), (2,0), (2,3).
    if (order == 0) EXPECT_EQ(Ints((*r)[1]), (std::vector<int64_t>{1, 6, 8, 11}));
    else EXPECT_EQ(Ints((*r)[1]), (std::vector<int64_t>{3, 7, 2, 11}));
  }
}

TEST(PoolOps, AveragePoolCeilModeAndCountIncludePad) {
  Tensor x = Ramp({1, 1, 5, 5});
  std::vector<float> xv = Floats(x);
  for (int64_t include : {0, 1}) {
    OneOp op("AveragePool", {x});
    op.Ints("kernel_shape", {3, 3}).Ints("strides", {2, 2}).Ints("pads", {1, 1, 1, 1});
    op.Attr("ceil_mode", Attribute::Int(1)).Attr("count_include_pad", Attribute::Int(include));
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    // (5 + 2 - 3) / 2 + 1 = 3 either way; check every window by hand.
    ASSERT_EQ((*r)[0].dims(), (Dims{1, 1, 3, 3}));
    std::vector<float> want;
    for (int oh = 0; oh < 3; ++oh)
      for (int ow = 0; ow < 3; ++ow) {
        double s = 0;
        int n = 0, incl = 0;
        for (int kh = 0; kh < 3; ++kh)
          for (int kw = 0; kw < 3; ++kw) {
            int h = oh * 2 - 1 + kh, w = ow * 2 - 1 + kw;
            if (h < 6 && w < 6) ++incl;  // inside input plus end pad
            if (h < 0 || w < 0 || h >= 5 || w >= 5) continue;
            s += xv[h * 5 + w];
            ++n;
          }
        want.push_back(static_cast<float>(s / (include ? incl : n)));
      }
    ExpectNear(Floats((*r)[0]), want);
  }
  // Ceil mode adds a last, partial window.
  OneOp op("AveragePool", {Ramp({1, 1, 6})});
  op.Ints("kernel_shape", {3}).Ints("strides", {2}).Attr("ceil_mode", Attribute::Int(1));
  ASSERT_TRUE(op.Infer().ok());
  EXPECT_EQ(op.Out().ToString(), "f32[1,1,3]");
}

TEST(PoolOps, LpPoolAndGlobalPools) {
  Tensor x = F32T({1, -2, 3, -4, 5, -6}, {1, 2, 3});
  {
    OneOp op("LpPool", {x});
    op.Ints("kernel_shape", {2});
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectNear(Floats((*r)[0]), {std::sqrt(5.f), std::sqrt(13.f), std::sqrt(41.f), std::sqrt(61.f)});
  }
  {
    OneOp op("LpPool", {x});
    op.Ints("kernel_shape", {3}).Attr("p", Attribute::Int(3));
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectNear(Floats((*r)[0]), {std::cbrt(36.f), std::cbrt(405.f)}, 1e-3f);
  }
  {
    OneOp op("GlobalLpPool", {x});
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].dims(), (Dims{1, 2, 1}));
    ExpectNear(Floats((*r)[0]), {std::sqrt(14.f), std::sqrt(77.f)});
  }
  {
    OneOp op("GlobalMaxPool", {x});
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectNear(Floats((*r)[0]), {3, 5});
  }
  {
    OneOp op("GlobalAveragePool", {x});
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectNear(Floats((*r)[0]), {2.f / 3, -5.f / 3});
  }
}

TEST(PoolOps, PoolInferenceAndErrors) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape({Dim::Symbol("B"), Dim(3), Dim(8), Dim()})));
  Node* n = g.AddNode("MaxPool", {x}, 2);
  n->SetAttr("kernel_shape", Attribute::Ints({2, 2}));
  n->SetAttr("strides", Attribute::Ints({2, 2}));
  g.AddOutput(n->output(0));
  g.AddOutput(n->output(1));
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(n->output(0)->type().ToString(), "f32[B,3,4,?]");
  EXPECT_EQ(n->output(1)->type().ToString(), "i64[B,3,4,?]");

  OneOp bad("MaxPool", {Ramp({1, 1, 4, 4})});
  bad.Ints("kernel_shape", {2});
  EXPECT_FALSE(bad.Run().ok());
  OneOp big("AveragePool", {Ramp({1, 1, 2, 2})});
  big.Ints("kernel_shape", {3, 3});
  EXPECT_FALSE(big.Run().ok());
  OneOp pads("AveragePool", {Ramp({1, 1, 4, 4})});
  pads.Ints("kernel_shape", {2, 2}).Ints("pads", {1, 1});
  EXPECT_FALSE(pads.Run().ok());
}

TEST(PoolOps, MaxPoolInt8) {
  Tensor x = Tensor::FromVector<int8_t>({-5, 3, -128, 127, 0, -1}, {1, 1, 6});
  OneOp op("MaxPool", {x});
  op.Ints("kernel_shape", {2}).Ints("strides", {2});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dtype(), DType::kI8);
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{3, 127, 0}));
}

TEST(PoolOps, MaxUnpoolRoundTripAndErrors) {
  Tensor x = F32T({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor idx = I64T({0, 3, 9, 14}, {1, 1, 2, 2});
  OneOp op("MaxUnpool", {x, idx});
  op.Ints("kernel_shape", {2, 2}).Ints("strides", {2, 2});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {1, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4, 0});
  OneOp bad("MaxUnpool", {x, I64T({0, 3, 9, 16}, {1, 1, 2, 2})});
  bad.Ints("kernel_shape", {2, 2}).Ints("strides", {2, 2});
  EXPECT_FALSE(bad.Run().ok());
}

TEST(PoolOps, MaxRoiPool) {
  Tensor x = Ramp({1, 2, 4, 5});
  std::vector<float> xv = Floats(x);
  Tensor rois = F32T({0, 1, 0, 3, 2}, {1, 5});  // x1=1, y1=0, x2=3, y2=2
  OneOp op("MaxRoiPool", {x, rois});
  op.Ints("pooled_shape", {1, 1});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ((*r)[0].dims(), (Dims{1, 2, 1, 1}));
  for (int c = 0; c < 2; ++c) {
    float m = -1e9f;
    for (int h = 0; h <= 2; ++h)
      for (int w = 1; w <= 3; ++w) m = std::max(m, xv[c * 20 + h * 5 + w]);
    EXPECT_NEAR(Floats((*r)[0])[c], m, 1e-6f);
  }
}

TEST(PoolOps, RoiAlignConstantImage) {
  Tensor x(DType::kF32, {2, 1, 6, 6});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = i < 36 ? 1.0f : 3.0f;
  Tensor rois = F32T({0, 0, 4, 4, 1, 1, 2, 5}, {2, 4});
  Tensor bi = I64T({0, 1}, {2});
  for (const char* ctm : {"half_pixel", "output_half_pixel"}) {
    OneOp op("RoiAlign", {x, rois, bi});
    op.Attr("output_height", Attribute::Int(2)).Attr("output_width", Attribute::Int(3));
    op.Attr("coordinate_transformation_mode", Attribute::String(ctm));
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ((*r)[0].dims(), (Dims{2, 1, 2, 3}));
    std::vector<float> v = Floats((*r)[0]);
    for (int i = 0; i < 6; ++i) EXPECT_NEAR(v[i], 1.0f, 1e-5f) << ctm;
    for (int i = 6; i < 12; ++i) EXPECT_NEAR(v[i], 3.0f, 1e-5f) << ctm;
  }
  OneOp bad("RoiAlign", {x, rois, I64T({0, 2}, {2})});
  EXPECT_FALSE(bad.Run().ok());
  OneOp mode("RoiAlign", {x, rois, bi});
  mode.Attr("mode", Attribute::String("median"));
  EXPECT_FALSE(mode.Run().ok());
}

TEST(ConvOps, EdgeCasesDoNotCrash) {
  {
    OneOp op("Conv", {Tensor(DType::kF32, {0, 2, 5, 5}), Ramp({3, 2, 3, 3})});
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].dims(), (Dims{0, 3, 3, 3}));
  }
  {
    // Windows that lie entirely in the padding.
    OneOp op("MaxPool", {Ramp({1, 1, 2, 2})}, {}, 2);
    op.Ints("kernel_shape", {1, 1}).Ints("pads", {2, 2, 2, 2});
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].dims(), (Dims{1, 1, 6, 6}));
    EXPECT_EQ(Ints((*r)[1])[0], -1);
  }
  {
    OneOp op("ConvTranspose", {Ramp({1, 1, 3}), Ramp({1, 1, 3})});
    op.Ints("output_shape", {int64_t{1} << 40});
    EXPECT_FALSE(op.Run().ok());
  }
  {
    OneOp op("Conv", {Ramp({1, 1, 3}), Ramp({1, 1, 1})});
    op.Ints("dilations", {int64_t{1} << 62});
    EXPECT_FALSE(op.Run().ok());
  }
  const float nan = std::nanf(""), inf = INFINITY;
  {
    OneOp op("RoiAlign", {Ramp({1, 1, 4, 4}), F32T({nan, 0, 2, 2, 0, 0, inf, 3}, {2, 4}), I64T({0, 0}, {2})});
    op.Attr("sampling_ratio", Attribute::Int(2));
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
  }
  {
    OneOp op("RoiAlign", {Ramp({1, 1, 4, 4}), F32T({0, 0, 1e30f, 1e30f}, {1, 4}), I64T({0}, {1})});
    EXPECT_FALSE(op.Run().ok());  // adaptive sampling would need ~1e60 samples
  }
  {
    OneOp op("MaxRoiPool", {Ramp({1, 1, 4, 4}), F32T({nan, 0, 0, 1, 1, 0, -1e30f, nan, 1e30f, inf}, {2, 5})});
    op.Ints("pooled_shape", {2, 2});
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
  }
}

TEST(ConvOps, CostsAndUpgraders) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({2, 4, 8, 8})));
  Value* w = g.AddInput("w", Type::Tensor(DType::kF32, Shape::Static({6, 2, 3, 3})));
  Node* n = g.AddNode("Conv", {x, w}, 1);
  n->SetAttr("group", Attribute::Int(2));
  n->SetAttr("pads", Attribute::Ints({1, 1, 1, 1}));
  g.AddOutput(n->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  OpCost c = NodeCost(*n);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 2 * 6 * 64 * 2 * 9);

  Graph gq;  // QLinearConv's weights are input 3
  auto scalar = [&](DType t) { return gq.AddInput(gq.UniqueName("s"), Type::Tensor(t, Shape::Scalar())); };
  Value* qx = gq.AddInput("qx", Type::Tensor(DType::kU8, Shape::Static({1, 2, 4, 4})));
  Value* qw = gq.AddInput("qw", Type::Tensor(DType::kU8, Shape::Static({3, 2, 3, 3})));
  Node* q = gq.AddNode("QLinearConv", {qx, scalar(DType::kF32), scalar(DType::kU8), qw, scalar(DType::kF32),
                                       scalar(DType::kU8), scalar(DType::kF32), scalar(DType::kU8)}, 1);
  gq.AddOutput(q->output(0));
  ASSERT_TRUE(InferShapes(gq).ok());
  EXPECT_EQ(q->output(0)->type().ToString(), "u8[1,3,2,2]");
  EXPECT_DOUBLE_EQ(NodeCost(*q).flops, 2.0 * 12 * 18);

  Graph g2;
  Value* x2 = g2.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({1, 1, 4, 4})));
  Node* lp = g2.AddNode("LpPool", {x2}, 1);
  lp->SetAttr("kernel_shape", Attribute::Ints({2, 2}));
  lp->SetAttr("p", Attribute::Float(3.0f));
  const OpDef* def = OpRegistry::Global().Find(*lp);
  ASSERT_TRUE(def && def->upgrade);
  ASSERT_TRUE(def->upgrade(g2, lp, 1).ok());
  ASSERT_EQ(lp->attr("p")->kind(), AttrKind::kInt);
  EXPECT_EQ(lp->GetInt("p", 0), 3);

  Node* ra = g2.AddNode("RoiAlign", {x2, x2, x2}, 1);
  const OpDef* rdef = OpRegistry::Global().Find(*ra);
  ASSERT_TRUE(rdef->upgrade(g2, ra, 10).ok());
  EXPECT_EQ(ra->GetString("coordinate_transformation_mode", ""), "output_half_pixel");
}

}  // namespace
}  // namespace kiln
