// Tests of the matmul family: MatMul (numpy batching, 1-D operands, dtypes,
// blocking), Gemm, Einsum, MatMulInteger, QLinearMatMul and Det.
#include <gtest/gtest.h>

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
std::vector<int64_t> Ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.GetInt(i));
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

Tensor Ramp(Dims dims, float scale = 0.37f) {
  Tensor t(DType::kF32, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::sin(static_cast<float>(i) * scale);
  return t;
}

// Naive reference: C[b] = A[b] x B[b] for row-major [M,K] x [K,N].
std::vector<float> NaiveMatMul(const float* a, const float* b, int64_t M, int64_t K, int64_t N) {
  std::vector<float> c(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += static_cast<double>(a[i * K + k]) * b[k * N + j];
      c[i * N + j] = static_cast<float>(s);
    }
  return c;
}

TEST(MatMulOps, MatMulLargeBlocked) {
  // K and N exceed the block sizes; M is not a multiple of 4.
  const int64_t M = 7, K = 300, N = 1030;
  Tensor a = Ramp({M, K}), b = Ramp({K, N}, 0.011f);
  OneOp op("MatMul", {a, b});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "f32[7,1030]");
  ExpectNear(Floats((*r)[0]), NaiveMatMul(a.data<float>(), b.data<float>(), M, K, N), 1e-3f);
}

TEST(MatMulOps, MatMulBatchBroadcastAndVectors) {
  Tensor a = Ramp({2, 1, 3, 4}), b = Ramp({3, 4, 5}, 0.2f);
  OneOp op("MatMul", {a, b});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "f32[2,3,3,5]");
  const Tensor& y = (*r)[0];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      auto want = NaiveMatMul(a.data<float>() + i * 12, b.data<float>() + j * 20, 3, 4, 5);
      for (int k = 0; k < 15; ++k) EXPECT_NEAR(y.data<float>()[(i * 3 + j) * 15 + k], want[k], 1e-5);
    }

  Tensor v = Ramp({4}), m = Ramp({4, 5}, 0.2f);
  OneOp vm("MatMul", {v, m});
  r = vm.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(vm.Out().ToString(), "f32[5]");
  ExpectNear(Floats((*r)[0]), NaiveMatMul(v.data<float>(), m.data<float>(), 1, 4, 5));

  OneOp mv("MatMul", {Ramp({2, 3, 4}), v});
  r = mv.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(mv.Out().ToString(), "f32[2,3]");

  OneOp dot("MatMul", {v, v});
  r = dot.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(dot.Out().ToString(), "f32[]");
}

TEST(MatMulOps, MatMulSymbolicAndErrors) {
  Graph g;
  Value* a = g.AddInput("a", Type::Tensor(DType::kF32, Shape({Dim::Symbol("b"), Dim::Symbol("s"), 8})));
  Value* w = g.AddInput("w", Type::Tensor(DType::kF32, Shape({8, 16})));
  Node* n = g.AddNode("MatMul", {a, w}, 1);
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(n->output(0)->type().ToString(), "f32[b,s,16]");

  OneOp bad("MatMul", {Ramp({2, 3}), Ramp({4, 5})});
  EXPECT_FALSE(bad.Infer().ok());
  Graph g2;
  Value* x = g2.AddInput("x", Type::Tensor(DType::kF32, Shape()));
  Value* y = g2.AddInput("y", Type::Tensor(DType::kF32, Shape()));
  Node* m = g2.AddNode("MatMul", {x, y}, 1);
  g2.AddOutput(m->output(0));
  ASSERT_TRUE(InferShapes(g2).ok());
  Executor ex;
  EXPECT_FALSE(ex.Run(g2, {Ramp({2, 3}), Ramp({4, 5})}).ok());
}

TEST(MatMulOps, MatMulIntegerAndHalf) {
  OneOp op("MatMul", {Tensor::FromVector<int32_t>({1, 2, 3, 4}, {2, 2}), Tensor::FromVector<int32_t>({5, 6, 7, 8}, {2, 2})});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{19, 22, 43, 50}));

  Tensor a(DType::kF16, {2, 3}), b(DType::kBF16, {3, 2});
  Tensor a16 = CastTensor(Ramp({2, 3}), DType::kF16), b16 = CastTensor(Ramp({3, 2}, 0.5f), DType::kF16);
  OneOp h("MatMul", {a16, b16});
  r = h.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dtype(), DType::kF16);
  Tensor af = CastTensor(a16, DType::kF32), bf = CastTensor(b16, DType::kF32);
  ExpectNear(Floats((*r)[0]), NaiveMatMul(af.data<float>(), bf.data<float>(), 2, 3, 2), 2e-3f);

  OneOp mixed("MatMul", {a, b});
  EXPECT_FALSE(mixed.Infer().ok());
}

TEST(MatMulOps, Gemm) {
  Tensor a = Ramp({4, 3}), b = Ramp({5, 4}, 0.3f), c = Ramp({5}, 0.9f);
  OneOp op("Gemm", {a, b, c});
  op.Attr("transA", Attribute::Int(1)).Attr("transB", Attribute::Int(1))
      .Attr("alpha", Attribute::Float(0.5f)).Attr("beta", Attribute::Float(2.0f));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "f32[3,5]");
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double s = 0;
      for (int k = 0; k < 4; ++k) s += a.data<float>()[k * 3 + i] * b.data<float>()[j * 4 + k];
      EXPECT_NEAR((*r)[0].GetDouble(i * 5 + j), 0.5 * s + 2.0 * c.data<float>()[j], 1e-5);
    }

  OneOp scalar_c("Gemm", {Ramp({2, 3}), Ramp({3, 2})}, {F32T({1.5f}, {})});
  r = scalar_c.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  OneOp no_c("Gemm", {Ramp({2, 3}), Ramp({3, 2})});
  auto r2 = no_c.Run();
  ASSERT_TRUE(r2.ok()) << r2.status();
  for (int i = 0; i < 4; ++i) EXPECT_NEAR((*r)[0].GetDouble(i), (*r2)[0].GetDouble(i) + 1.5, 1e-5);

  OneOp bad_c("Gemm", {Ramp({2, 3}), Ramp({3, 2})}, {Ramp({3})});
  EXPECT_FALSE(bad_c.Infer().ok());
}

TEST(MatMulOps, GemmUpgradeDropsBroadcast) {
  OneOp op("Gemm", {Ramp({2, 3}), Ramp({3, 2}), Ramp({2})});
  op.Attr("broadcast", Attribute::Int(1));
  const OpDef* def = OpRegistry::Global().Find(*op.node);
  ASSERT_TRUE(def->upgrade(op.g, op.node, 6).ok());
  EXPECT_FALSE(op.node->has_attr("broadcast"));
  ASSERT_TRUE(op.Run().ok());
}

absl::StatusOr<std::vector<Tensor>> RunEinsum(const char* eq, std::vector<Tensor> ins, OneOp** keep = nullptr) {
  static std::vector<std::unique_ptr<OneOp>> ops;
  ops.push_back(std::make_unique<OneOp>("Einsum", std::move(ins)));
  ops.back()->Attr("equation", Attribute::String(eq));
  if (keep) *keep = ops.back().get();
  return ops.back()->Run();
}

TEST(MatMulOps, EinsumEquations) {
  Tensor m = Ramp({3, 3});
  const float* pm = m.data<float>();
  OneOp* op = nullptr;
  auto r = RunEinsum("ii->i", {m}, &op);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op->Out().ToString(), "f32[3]");
  ExpectNear(Floats((*r)[0]), {pm[0], pm[4], pm[8]});

  r = RunEinsum("ii", {m}, &op);  // implicit: trace
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op->Out().ToString(), "f32[]");
  ExpectNear(Floats((*r)[0]), {pm[0] + pm[4] + pm[8]});

  r = RunEinsum("ij->ji", {Ramp({2, 3})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dims(), (Dims{3, 2}));
  EXPECT_FLOAT_EQ((*r)[0].data<float>()[1], Ramp({2, 3}).data<float>()[3]);

  Tensor a = Ramp({2, 3}), b = Ramp({3, 4}, 0.2f);
  r = RunEinsum("ij,jk", {a, b}, &op);  // implicit output "ik"
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op->Out().ToString(), "f32[2,4]");
  ExpectNear(Floats((*r)[0]), NaiveMatMul(a.data<float>(), b.data<float>(), 2, 3, 4));

  r = RunEinsum("b i j, b j k -> b i k", {Ramp({2, 2, 3}), Ramp({2, 3, 2}, 0.4f)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dims(), (Dims{2, 2, 2}));

  r = RunEinsum("i,i", {Ramp({5}), Ramp({5})}, &op);
  ASSERT_TRUE(r.ok()) << r.status();
  double dot = 0;
  for (int i = 0; i < 5; ++i) dot += std::pow(std::sin(i * 0.37), 2);
  EXPECT_NEAR((*r)[0].GetDouble(0), dot, 1e-5);

  // Batch diagonal with ellipsis, and ellipsis broadcasting of size-1 dims.
  Tensor bd = Ramp({2, 3, 3});
  r = RunEinsum("...ii->...i", {bd}, &op);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op->Out().ToString(), "f32[2,3]");
  EXPECT_FLOAT_EQ((*r)[0].data<float>()[4], bd.data<float>()[9 + 4]);
  r = RunEinsum("...ij,...jk->...ik", {Ramp({2, 1, 2, 3}), Ramp({4, 3, 2}, 0.3f)}, &op);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op->Out().ToString(), "f32[2,4,2,2]");

  r = RunEinsum("ij->", {Ramp({2, 3})});
  ASSERT_TRUE(r.ok()) << r.status();
  double sum = 0;
  for (int i = 0; i < 6; ++i) sum += std::sin(i * 0.37);
  EXPECT_NEAR((*r)[0].GetDouble(0), sum, 1e-5);

  r = RunEinsum("ij,jk->ik", {Tensor::FromVector<int64_t>({1, 2}, {1, 2}), Tensor::FromVector<int64_t>({3, 4}, {2, 1})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{11}));

  EXPECT_FALSE(RunEinsum("ij,jk->ik", {Ramp({2, 3}), Ramp({4, 2})}).ok());
  EXPECT_FALSE(RunEinsum("ijk->i", {Ramp({2, 3})}).ok());
  EXPECT_FALSE(RunEinsum("ij->q", {Ramp({2, 3})}).ok());
  EXPECT_FALSE(RunEinsum("i.j", {Ramp({2, 3})}).ok());
}

TEST(MatMulOps, MatMulIntegerZeroPoints) {
  Tensor a = Tensor::FromVector<uint8_t>({11, 7, 3, 10, 6, 2}, {2, 3});
  Tensor b = Tensor::FromVector<uint8_t>({1, 4, 2, 5, 3, 6}, {3, 2});
  OneOp op("MatMulInteger", {a, b, Tensor::FromVector<uint8_t>({12, 10}, {2}),
                             Tensor::FromVector<uint8_t>({0, 1}, {2})});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "i32[2,2]");
  // (a - [12;10]) x (b - [0 1])
  int av[2][3] = {{-1, -5, -9}, {0, -4, -8}}, bv[3][2] = {{1, 3}, {2, 4}, {3, 5}};
  std::vector<int64_t> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) want.push_back(av[i][0] * bv[0][j] + av[i][1] * bv[1][j] + av[i][2] * bv[2][j]);
  EXPECT_EQ(Ints((*r)[0]), want);
}

TEST(MatMulOps, QLinearMatMul) {
  // The 2-D case of the ONNX test data.
  Tensor a = Tensor::FromVector<uint8_t>({208, 236, 0, 238, 3, 214, 255, 29}, {2, 4});
  Tensor b = Tensor::FromVector<uint8_t>({152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247}, {4, 3});
  OneOp op("QLinearMatMul", {a, F32T({0.0066f}, {1}), Tensor::FromVector<uint8_t>({113}, {1}), b,
                             F32T({0.00705f}, {1}), Tensor::FromVector<uint8_t>({114}, {1}), F32T({0.0107f}, {1}),
                             Tensor::FromVector<uint8_t>({118}, {1})});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "u8[2,3]");
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{168, 115, 255, 1, 66, 151}));
}

TEST(MatMulOps, Det) {
  OneOp op("Det", {F32T({1, 2, 3, 4, 2, 0, 0, 0, 3, 0, 0, 0, 0, 1, 0, 1, 0, 0}, {2, 3, 3})});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "f32[2]");
  // [[1,2,3],[4,2,0],[0,0,3]] -> 3*(2-8) = -18; [[0,0,0],[0,1,0],[1,0,0]] -> 0
  ExpectNear(Floats((*r)[0]), {-18, 0}, 1e-4f);
  OneOp swap("Det", {F32T({0, 1, 1, 0}, {2, 2})});
  r = swap.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {-1});
  OneOp bad("Det", {Ramp({2, 3})});
  EXPECT_FALSE(bad.Infer().ok());
}

TEST(MatMulOps, EmptyDims) {
  OneOp k0("MatMul", {Tensor(DType::kF32, {2, 0}), Tensor(DType::kF32, {0, 3})});
  auto r = k0.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {0, 0, 0, 0, 0, 0});
  OneOp m0("MatMul", {Tensor(DType::kF32, {0, 4}), Ramp({4, 3})});
  r = m0.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dims(), (Dims{0, 3}));
  OneOp g("Gemm", {Tensor(DType::kF32, {2, 0}), Tensor(DType::kF32, {0, 2}), F32T({1, 2}, {2})});
  r = g.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {1, 2, 1, 2});
  auto e = RunEinsum("ij,jk->ik", {Tensor(DType::kF32, {2, 0}), Tensor(DType::kF32, {0, 2})});
  ASSERT_TRUE(e.ok()) << e.status();
  ExpectNear(Floats((*e)[0]), {0, 0, 0, 0});
  OneOp d("Det", {Tensor(DType::kF32, {2, 0, 0})});
  r = d.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {1, 1});
}

}  // namespace
}  // namespace kiln
