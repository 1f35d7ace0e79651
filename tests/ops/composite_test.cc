// Tests of kiln's composite ops: kiln.Gelu against its formulas and
// kiln.Attention against the same computation written with ONNX ops
// (MatMul, Transpose, Mul, Add/Where, Softmax), with broadcast batch dims,
// masks, causal masking and the default scale; inference and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <random>

#include "graph/exec/executor.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"

namespace kiln {
namespace {

Type TypeOf(const Tensor& t) {
  DimVector d(t.dims().begin(), t.dims().end());
  return Type::Tensor(t.dtype(), Shape(std::move(d)));
}

Tensor Random(Dims dims, uint32_t seed, DType dt = DType::kF32) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist;
  std::vector<double> v(NumElements(dims));
  for (double& x : v) x = dist(rng);
  return CastTensor(Tensor::FromVector<double>(v, dims), dt);
}

Tensor RandomBool(Dims dims, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t(DType::kBool, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<bool>()[i] = rng() % 4 != 0;
  return t;
}

// A graph whose inputs are the given tensors (run-time data).
struct TestGraph {
  Graph g;
  std::vector<Tensor> feeds;
  Value* In(const Tensor& t) {
    feeds.push_back(t);
    return g.AddInput(g.UniqueName("in"), TypeOf(t));
  }
  Value* Const(const Tensor& t) { return g.AddConstant(g.UniqueName("c"), t); }
  Node* Op(absl::string_view op, std::vector<Value*> ins, absl::string_view domain = "") {
    return g.AddNode(op, std::move(ins), 1, domain);
  }
  absl::StatusOr<Tensor> Run(Value* out) {
    g.AddOutput(out);
    absl::Status s = InferShapes(g);
    if (!s.ok()) return s;
    Executor ex;
    auto r = ex.Run(g, feeds);
    if (!r.ok()) return r.status();
    return (*r)[0];
  }
};

void ExpectNear(const Tensor& a, const Tensor& b, double tol) {
  ASSERT_EQ(a.dims(), b.dims());
  ASSERT_EQ(a.dtype(), b.dtype());
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.GetDouble(i), y = b.GetDouble(i);
    if (std::isnan(x) && std::isnan(y)) continue;
    ASSERT_NEAR(x, y, tol * (1 + std::fabs(y))) << "element " << i;
  }
}

//===--- Gelu -------------------------------------------------------------===//

double GeluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2)); }
double GeluTanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

absl::StatusOr<Tensor> RunGelu(const Tensor& x, const std::string& approximate) {
  TestGraph t;
  Node* n = t.Op("Gelu", {t.In(x)}, "kiln");
  n->SetAttr("approximate", Attribute::String(approximate));
  return t.Run(n->output(0));
}

TEST(GeluTest, MatchesFormulas) {
  std::vector<double> xs = {-6, -3, -1.5, -0.5, -1e-3, 0, 1e-3, 0.5, 1, 2.5, 6, 30};
  Tensor x64 = Tensor::FromVector<double>(xs, {static_cast<int64_t>(xs.size())});
  for (DType dt : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}) {
    Tensor x = CastTensor(x64, dt);
    for (bool tanh : {false, true}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dt), tanh ? " tanh" : " erf"));
      auto y = RunGelu(x, tanh ? "tanh" : "none");
      ASSERT_TRUE(y.ok()) << y.status();
      ASSERT_EQ(y->dtype(), dt);
      double tol = dt == DType::kF64 ? 1e-14 : dt == DType::kF32 ? 1e-6 : dt == DType::kF16 ? 1e-3 : 8e-3;
      for (int64_t i = 0; i < x.numel(); ++i) {
        double v = x.GetDouble(i);
        double want = tanh ? GeluTanh(v) : GeluErf(v);
        EXPECT_NEAR(y->GetDouble(i), want, tol * (1 + std::fabs(want))) << v;
      }
    }
  }
}

TEST(GeluTest, DefaultIsErf) {
  TestGraph t;
  Tensor x = Random({3, 4}, 1);
  Node* n = t.Op("Gelu", {t.In(x)}, "kiln");
  auto y = t.Run(n->output(0));
  ASSERT_TRUE(y.ok()) << y.status();
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(y->GetDouble(i), GeluErf(x.GetDouble(i)), 1e-6);
}

TEST(GeluTest, Errors) {
  EXPECT_FALSE(RunGelu(Random({2}, 1), "fast").ok());
  EXPECT_FALSE(RunGelu(Tensor::FromVector<int32_t>({1, 2}, {2}), "none").ok());
}

TEST(GeluTest, InferenceKeepsSymbolicShape) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF16, Shape({Dim::Symbol("n"), Dim(4)})));
  Node* n = g.AddNode("Gelu", {x}, 1, "kiln");
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(n->output(0)->type().ToString(), "f16[n,4]");
}

//===--- Attention --------------------------------------------------------===//

struct AttentionCase {
  Dims q, k, v;         // k in [.., Sk, D] layout
  std::optional<Tensor> mask = std::nullopt;
  bool k_transposed = false;
  bool causal = false;
  std::optional<float> scale = std::nullopt;
  std::optional<float> mask_value = std::nullopt;
  DType dtype = DType::kF32;
};

std::vector<int64_t> SwapLast(int rank) {
  std::vector<int64_t> p;
  for (int i = 0; i < rank; ++i) p.push_back(i);
  std::swap(p[rank - 1], p[rank - 2]);
  return p;
}

// The composite and the same computation from ONNX ops, on the same data.
void CheckAttention(const AttentionCase& c, double tol = 1e-5) {
  Tensor q = Random(c.q, 11, c.dtype), k = Random(c.k, 12, c.dtype), v = Random(c.v, 13, c.dtype);
  Tensor kin = k;
  if (c.k_transposed) {
    // K^T as data: transpose k with the reference ops.
    TestGraph t;
    Node* tr = t.Op("Transpose", {t.In(k)});
    tr->SetAttr("perm", Attribute::Ints(SwapLast(k.rank())));
    auto r = t.Run(tr->output(0));
    ASSERT_TRUE(r.ok()) << r.status();
    kin = *r;
  }
  float mask_value = c.mask_value.value_or(-std::numeric_limits<float>::infinity());
  double scale = c.scale ? *c.scale : 1.0 / std::sqrt(static_cast<double>(c.q.back()));

  TestGraph composite;
  std::vector<Value*> ins = {composite.In(q), composite.In(kin), composite.In(v)};
  if (c.mask) ins.push_back(composite.In(*c.mask));
  Node* att = composite.Op("Attention", ins, "kiln");
  att->SetAttr("k_transposed", Attribute::Int(c.k_transposed));
  if (c.causal) att->SetAttr("causal", Attribute::Int(1));
  if (c.scale) att->SetAttr("scale", Attribute::Float(*c.scale));
  if (c.mask_value) att->SetAttr("mask_value", Attribute::Float(*c.mask_value));
  auto got = composite.Run(att->output(0));
  ASSERT_TRUE(got.ok()) << got.status();

  TestGraph ref;
  Value* rq = ref.In(q);
  Value* rk = ref.In(k);
  Value* rv = ref.In(v);
  Node* kt = ref.Op("Transpose", {rk});
  kt->SetAttr("perm", Attribute::Ints(SwapLast(k.rank())));
  Value* s = ref.Op("MatMul", {rq, kt->output(0)})->output(0);
  s = ref.Op("Mul", {s, ref.Const(CastTensor(Tensor::Scalar<double>(scale), c.dtype))})->output(0);
  if (c.mask) {
    Value* m = ref.In(*c.mask);
    if (c.mask->dtype() == DType::kBool) {
      s = ref.Op("Where", {m, s, ref.Const(CastTensor(Tensor::Scalar<float>(mask_value), c.dtype))})->output(0);
    } else {
      s = ref.Op("Add", {s, m})->output(0);
    }
  }
  if (c.causal) {
    ASSERT_TRUE(InferShapes(ref.g).ok());
    const Shape& ss = s->type().shape();
    int64_t sq = ss[ss.rank() - 2].value(), sk = ss[ss.rank() - 1].value();
    Tensor keep(DType::kBool, {sq, sk});
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < sk; ++j) keep.data<bool>()[i * sk + j] = j <= i;
    s = ref.Op("Where", {ref.Const(keep), s,
                         ref.Const(CastTensor(Tensor::Scalar<float>(-std::numeric_limits<float>::infinity()), c.dtype))})
            ->output(0);
  }
  Node* sm = ref.Op("Softmax", {s});
  sm->SetAttr("axis", Attribute::Int(-1));
  auto want = ref.Run(ref.Op("MatMul", {sm->output(0), rv})->output(0));
  ASSERT_TRUE(want.ok()) << want.status();
  ExpectNear(*got, *want, tol);
  EXPECT_EQ(att->output(0)->type().shape().StaticDims(), want->dims());
}

TEST(AttentionTest, PlainHeads) { CheckAttention({{2, 3, 4, 8}, {2, 3, 5, 8}, {2, 3, 5, 6}, {}, false, false, 0.3f}); }

TEST(AttentionTest, KTransposed) { CheckAttention({{2, 3, 4, 8}, {2, 3, 5, 8}, {2, 3, 5, 6}, {}, true, false, 0.3f}); }

TEST(AttentionTest, DefaultScaleIsInverseSqrtHeadSize) {
  CheckAttention({{1, 4, 16}, {1, 6, 16}, {1, 6, 16}, {}, false, false, std::nullopt});
}

TEST(AttentionTest, BroadcastBatchAndFloatMask) {
  CheckAttention({{2, 1, 4, 8}, {1, 3, 5, 8}, {3, 5, 6}, Random({4, 5}, 21), false, false, 0.5f});
}

TEST(AttentionTest, MaskBroadcastsOverQueries) {
  // A [Sq, Sk] mask against scores with Sq = 1 widens the output to Sq rows,
  // as Add followed by Softmax and MatMul would.
  CheckAttention({{2, 1, 8}, {2, 5, 8}, {2, 5, 3}, Random({4, 5}, 22), false, false, 1.0f});
}

TEST(AttentionTest, BoolMaskWithFill) {
  CheckAttention({{2, 2, 4, 8}, {2, 2, 5, 8}, {2, 2, 5, 6}, RandomBool({2, 1, 4, 5}, 23), false, false, 0.25f, -1e4f});
  CheckAttention({{2, 2, 4, 8}, {2, 2, 5, 8}, {2, 2, 5, 6}, RandomBool({1, 5}, 24), true, false, 0.25f});
}

TEST(AttentionTest, Causal) {
  CheckAttention({{1, 2, 5, 8}, {1, 2, 5, 8}, {1, 2, 5, 8}, {}, false, true, 0.35f});
  CheckAttention({{1, 2, 3, 8}, {1, 2, 5, 8}, {1, 2, 5, 8}, {}, true, true, 0.35f});
  CheckAttention({{1, 2, 5, 8}, {1, 2, 5, 8}, {1, 2, 5, 8}, Random({5, 5}, 25), false, true, 0.35f});
}

TEST(AttentionTest, HalfPrecision) {
  CheckAttention({{1, 2, 4, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}, {}, false, true, 0.35f, std::nullopt, DType::kF16}, 2e-2);
}

TEST(AttentionTest, FullyMaskedRowIsNaN) {
  Tensor mask(DType::kBool, {2, 3});  // every key masked
  TestGraph t;
  Node* n = t.Op("Attention", {t.In(Random({2, 4}, 1)), t.In(Random({3, 4}, 2)), t.In(Random({3, 4}, 3)), t.In(mask)},
                 "kiln");
  auto y = t.Run(n->output(0));
  ASSERT_TRUE(y.ok()) << y.status();
  for (int64_t i = 0; i < y->numel(); ++i) EXPECT_TRUE(std::isnan(y->GetDouble(i)));
}

absl::StatusOr<Type> InferAttention(std::vector<Type> types, int64_t k_transposed = 0) {
  Graph g;
  std::vector<Value*> ins;
  for (Type& t : types) ins.push_back(g.AddInput(g.UniqueName("in"), t));
  Node* n = g.AddNode("Attention", ins, 1, "kiln");
  n->SetAttr("k_transposed", Attribute::Int(k_transposed));
  const OpDef* def = OpRegistry::Global().Find(*n);
  if (!def) return absl::NotFoundError("kiln.Attention is not registered");
  auto out = InferNode(*def, *n);
  if (!out.ok()) return out.status();
  return (*out)[0];
}

Type F32(DimVector d) { return Type::Tensor(DType::kF32, Shape(std::move(d))); }

TEST(AttentionTest, Inference) {
  Dim b = Dim::Symbol("b"), s = Dim::Symbol("s");
  auto t = InferAttention({F32({b, 4, s, 8}), F32({b, 4, s, 8}), F32({b, 4, s, 16})});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ToString(), "f32[b,4,s,16]");
  t = InferAttention({F32({2, 3, 4, 8}), F32({3, 8, 5}), F32({5, 6})}, 1);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ToString(), "f32[2,3,4,6]");
  t = InferAttention({F32({2, 1, 8}), F32({2, 5, 8}), F32({2, 5, 3}), Type::Tensor(DType::kBool, Shape::Static({4, 5}))});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ToString(), "f32[2,4,3]");
  t = InferAttention({F32({2, 4, 8}), Type::Tensor(DType::kF32, Shape()), F32({2, 5, 3})});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->shape().ranked());
}

TEST(AttentionTest, InferenceErrors) {
  EXPECT_FALSE(InferAttention({F32({8}), F32({5, 8}), F32({5, 8})}).ok());                 // rank 1 Q
  EXPECT_FALSE(InferAttention({F32({4, 8}), F32({5, 7}), F32({5, 8})}).ok());              // head sizes
  EXPECT_FALSE(InferAttention({F32({4, 8}), F32({5, 8}), F32({6, 8})}).ok());              // key lengths
  EXPECT_FALSE(InferAttention({F32({2, 4, 8}), F32({3, 5, 8}), F32({5, 8})}).ok());        // batch dims
  EXPECT_FALSE(InferAttention({F32({4, 8}), Type::Tensor(DType::kF16, Shape::Static({5, 8})), F32({5, 8})}).ok());
  EXPECT_FALSE(InferAttention({F32({4, 8}), F32({5, 8}), F32({5, 8}), Type::Tensor(DType::kI32, Shape::Static({4, 5}))})
                   .ok());
  EXPECT_FALSE(InferAttention({Type::Tensor(DType::kI32, Shape::Static({4, 8})), F32({5, 8}), F32({5, 8})}).ok());
}

TEST(AttentionTest, KernelErrors) {
  auto run = [](std::vector<Tensor> ins) {
    Graph g;
    std::vector<Value*> vs;
    std::vector<const Tensor*> ptrs;
    for (Tensor& t : ins) {
      vs.push_back(g.AddInput(g.UniqueName("in"), Type()));
      ptrs.push_back(&t);
    }
    Node* n = g.AddNode("Attention", vs, 1, "kiln");
    KernelContext ctx(*n, ptrs);
    return OpRegistry::Global().Find(*n)->kernel(ctx);
  };
  EXPECT_FALSE(run({Random({8}, 1), Random({5, 8}, 2), Random({5, 8}, 3)}).ok());
  EXPECT_FALSE(run({Random({4, 8}, 1), Random({5, 7}, 2), Random({5, 8}, 3)}).ok());
  EXPECT_FALSE(run({Random({4, 8}, 1), Random({5, 8}, 2), Random({6, 8}, 3)}).ok());
  EXPECT_FALSE(run({Random({2, 4, 8}, 1), Random({3, 5, 8}, 2), Random({5, 8}, 3)}).ok());
  EXPECT_FALSE(run({Random({4, 8}, 1), Random({5, 8}, 2), Random({5, 8}, 3), Random({3, 5}, 4)}).ok());
  EXPECT_FALSE(run({Random({4, 8}, 1), Random({5, 8}, 2, DType::kF64), Random({5, 8}, 3)}).ok());
  EXPECT_FALSE(run({Random({4, 8}, 1), Random({5, 8}, 2)}).ok());
  EXPECT_TRUE(run({Random({4, 8}, 1), Random({5, 8}, 2), Random({5, 8}, 3)}).ok());
}

TEST(AttentionTest, Cost) {
  Graph g;
  Value* q = g.AddInput("q", F32({2, 4, 16, 8}));
  Value* k = g.AddInput("k", F32({2, 4, 32, 8}));
  Value* v = g.AddInput("v", F32({2, 4, 32, 8}));
  Node* n = g.AddNode("Attention", {q, k, v}, 1, "kiln");
  ASSERT_TRUE(InferShapes(g).ok());
  OpCost c = NodeCost(*n);
  double scores = 2.0 * 4 * 16 * 32;
  EXPECT_DOUBLE_EQ(c.flops, 2 * scores * 8 + 2 * (2.0 * 4 * 16 * 8) * 32 + 5 * scores);
  EXPECT_DOUBLE_EQ(c.bytes_read, 4.0 * (2 * 4 * 16 * 8 + 2 * 2 * 4 * 32 * 8));
  EXPECT_DOUBLE_EQ(c.bytes_written, 4.0 * 2 * 4 * 16 * 8);
}

}  // namespace
}  // namespace kiln
