// Tests of the elementwise family: kernels (broadcasting, integer semantics,
// f16 rounding, NaN handling), inference, costs and the opset upgraders.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "graph/exec/executor.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"

namespace kiln {
namespace {

std::vector<double> Doubles(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.GetDouble(i));
  return v;
}
std::vector<int64_t> Ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.GetInt(i));
  return v;
}

Tensor F32(std::vector<float> v, Dims d) { return Tensor::FromVector<float>(v, std::move(d)); }
Tensor I32(std::vector<int32_t> v, Dims d) { return Tensor::FromVector<int32_t>(v, std::move(d)); }
Tensor I64(std::vector<int64_t> v, Dims d) { return Tensor::FromVector<int64_t>(v, std::move(d)); }
Tensor Bools(std::vector<bool> v, Dims d) {
  Tensor t(DType::kBool, std::move(d));
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
  return t;
}
Tensor F16(std::vector<float> v, Dims d) {
  Tensor t(DType::kF16, std::move(d));
  for (size_t i = 0; i < v.size(); ++i) t.data<Half>()[i] = Half(v[i]);
  return t;
}

// One node whose inputs are graph inputs fed with the given tensors.
struct OneOp {
  Graph g;
  Node* node = nullptr;
  std::vector<Tensor> feeds;
  OneOp(absl::string_view op, std::vector<Tensor> ins, int outputs = 1) {
    std::vector<Value*> vs;
    for (Tensor& t : ins) {
      if (!t.defined()) {
        vs.push_back(nullptr);
        continue;
      }
      vs.push_back(g.AddInput(g.UniqueName("x"), Type::Of(t)));
      feeds.push_back(t);
    }
    node = g.AddNode(op, vs, outputs);
    for (int i = 0; i < outputs; ++i) g.AddOutput(node->output(i));
  }
  OneOp& Attr(const char* name, Attribute a) {
    node->SetAttr(name, std::move(a));
    return *this;
  }
  Type Out(int i = 0) const { return node->output(i)->type(); }
  absl::StatusOr<std::vector<Tensor>> RunAll() {
    absl::Status s = InferShapes(g);
    if (!s.ok()) return s;
    Executor ex;
    return ex.Run(g, feeds);
  }
  absl::StatusOr<Tensor> Run() {
    auto r = RunAll();
    if (!r.ok()) return r.status();
    return (*r)[0];
  }
};

//===--- Broadcasting and arithmetic --------------------------------------===//

TEST(ElementwiseOps, AddBroadcastsBothWays) {
  OneOp op("Add", {F32({1, 2}, {2, 1}), F32({10, 20, 30}, {1, 3})});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "f32[2,3]");
  EXPECT_EQ(Doubles(*r), (std::vector<double>{11, 21, 31, 12, 22, 32}));
}

TEST(ElementwiseOps, SubBroadcastMiddleDim) {
  // [2,1,3] - [4,1]: neither operand is contiguous in the output.
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<float> b = {0, 10, 20, 30};
  OneOp op("Sub", {F32(a, {2, 1, 3}), F32(b, {4, 1})});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->dims(), (Dims{2, 4, 3}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(r->GetDouble((i * 4 + j) * 3 + k), a[i * 3 + k] - b[j]);
}

TEST(ElementwiseOps, EmptyAndScalarBroadcast) {
  OneOp op("Mul", {F32({}, {0, 3}), F32({2}, {})});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dims(), (Dims{0, 3}));
  OneOp bad("Mul", {F32({1, 2}, {2}), F32({1, 2, 3}, {3})});
  EXPECT_FALSE(bad.Run().ok());
}

TEST(ElementwiseOps, IntegerArithmeticWraps) {
  int32_t mx = std::numeric_limits<int32_t>::max();
  int32_t mn = std::numeric_limits<int32_t>::min();
  OneOp add("Add", {I32({mx}, {1}), I32({1}, {1})});
  auto r = add.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->GetInt(0), mn);
  OneOp mul("Mul", {Tensor::FromVector<uint16_t>({65535}, {1}), Tensor::FromVector<uint16_t>({65535}, {1})});
  auto m = mul.Run();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->GetInt(0), 1);
  OneOp neg("Neg", {I32({mn, 5}, {2})});
  auto n = neg.Run();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(Ints(*n), (std::vector<int64_t>{mn, -5}));
}

TEST(ElementwiseOps, IntegerDivTruncatesAndRejectsZero) {
  OneOp div("Div", {I32({-7, 7, -7, std::numeric_limits<int32_t>::min()}, {4}), I32({2, -2, -2, -1}, {4})});
  auto r = div.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints(*r), (std::vector<int64_t>{-3, -3, 3, std::numeric_limits<int32_t>::min()}));
  OneOp zero("Div", {I32({1, 2}, {2}), I32({1, 0}, {2})});
  EXPECT_FALSE(zero.Run().ok());
  OneOp fzero("Div", {F32({1, -1}, {2}), F32({0, 0}, {2})});
  auto f = fzero.Run();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(std::isinf(f->GetDouble(0)) && f->GetDouble(0) > 0);
}

TEST(ElementwiseOps, Mod) {
  OneOp py("Mod", {I32({-4, 7, 5, 4, -7, 8}, {6}), I32({2, -3, 8, -2, 3, 5}, {6})});
  auto r = py.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints(*r), (std::vector<int64_t>{0, -2, 5, 0, 2, 3}));
  OneOp c("Mod", {I64({-4, 7, 5, 4, -7, 8}, {6}), I64({2, -3, 8, -2, 3, 5}, {6})});
  c.Attr("fmod", Attribute::Int(1));
  auto rc = c.Run();
  ASSERT_TRUE(rc.ok()) << rc.status();
  EXPECT_EQ(Ints(*rc), (std::vector<int64_t>{0, 1, 5, 0, -1, 3}));
  OneOp f("Mod", {F32({-4.5f, 4.5f}, {2}), F32({2, -2}, {2})});
  f.Attr("fmod", Attribute::Int(1));
  auto rf = f.Run();
  ASSERT_TRUE(rf.ok()) << rf.status();
  EXPECT_EQ(Doubles(*rf), (std::vector<double>{-0.5, 0.5}));
  OneOp bad("Mod", {I32({1}, {1}), I32({1}, {1})});
  bad.Attr("fmod", Attribute::Int(2));
  EXPECT_FALSE(bad.Run().ok());
  OneOp zero("Mod", {I32({1}, {1}), I32({0}, {1})});
  EXPECT_FALSE(zero.Run().ok());
}

TEST(ElementwiseOps, PowTypes) {
  OneOp ii("Pow", {I64({3, 2, -2, 5}, {4}), I64({20, -1, 3, 0}, {4})});
  auto r = ii.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints(*r), (std::vector<int64_t>{3486784401LL, 0, -8, 1}));
  OneOp mixed("Pow", {I32({4, 2}, {2}), F32({0.5f, 3}, {2})});
  auto m = mixed.Run();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(mixed.Out().ToString(), "i32[2]");
  EXPECT_EQ(Ints(*m), (std::vector<int64_t>{2, 8}));
  OneOp fi("Pow", {F32({2, 9}, {2}), Tensor::FromVector<uint8_t>({10, 2}, {2})});
  auto f = fi.Run();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(Doubles(*f), (std::vector<double>{1024, 81}));
  OneOp bad("Pow", {Tensor::FromVector<uint8_t>({1}, {1}), F32({1}, {1})});
  EXPECT_FALSE(bad.Run().ok());
}

TEST(ElementwiseOps, HalfRoundsOnceOnStore) {
  // 2048 + 1 is not representable in f16 (ties to even: 2048); 1 + 1/4096
  // rounds to 1; the sum of three f16 values is formed in float.
  OneOp add("Add", {F16({2048, 1}, {2}), F16({1, 1.0f / 4096}, {2})});
  auto r = add.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Doubles(*r), (std::vector<double>{2048, 1}));
  OneOp sum("Sum", {F16({2048}, {1}), F16({1}, {1}), F16({1}, {1})});
  auto s = sum.Run();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->GetDouble(0), 2050);
  OneOp mean("Mean", {F16({1}, {1}), F16({2}, {1}), F16({4}, {1})});
  auto m = mean.Run();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->GetDouble(0), static_cast<float>(Half(7.0f / 3)));
}

TEST(ElementwiseOps, VariadicBroadcastAndNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  OneOp mx("Max", {F32({1, nan, 3}, {3}), F32({2}, {1}), F32({0, 0, 5, 1, 1, 1}, {2, 3})});
  auto r = mx.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(mx.Out().ToString(), "f32[2,3]");
  std::vector<double> v = Doubles(*r);
  EXPECT_EQ(v[0], 2);
  EXPECT_TRUE(std::isnan(v[1]) && std::isnan(v[4]));
  EXPECT_EQ(v[2], 5);
  EXPECT_EQ(v[5], 3);
  OneOp mn("Min", {Tensor::FromVector<uint64_t>({5, 1}, {2}), Tensor::FromVector<uint64_t>({3}, {1})});
  auto m = mn.Run();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Ints(*m), (std::vector<int64_t>{3, 1}));
  OneOp one("Sum", {F32({1, 2}, {2})});
  auto o = one.Run();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(Doubles(*o), (std::vector<double>{1, 2}));
  OneOp mixed("Max", {F32({1}, {1}), I32({1}, {1})});
  EXPECT_FALSE(mixed.Run().ok());
}

//===--- Unary math and activations ---------------------------------------===//

TEST(ElementwiseOps, RoundHalfToEven) {
  OneOp op("Round", {F32({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, -2.6f}, {7})});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Doubles(*r), (std::vector<double>{0, 2, 2, -0.0, -2, 2, -3}));
}

TEST(ElementwiseOps, AbsSignOnIntegers) {
  OneOp abs("Abs", {Tensor::FromVector<int8_t>({-128, -3, 4}, {3})});
  auto a = abs.Run();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Ints(*a), (std::vector<int64_t>{-128, 3, 4}));
  OneOp sign("Sign", {I64({-9, 0, 7}, {3})});
  auto s = sign.Run();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Ints(*s), (std::vector<int64_t>{-1, 0, 1}));
  OneOp fsign("Sign", {F32({-0.5f, std::numeric_limits<float>::quiet_NaN()}, {2})});
  auto fs = fsign.Run();
  ASSERT_TRUE(fs.ok()) << fs.status();
  EXPECT_EQ(fs->GetDouble(0), -1);
  EXPECT_TRUE(std::isnan(fs->GetDouble(1)));
}

TEST(ElementwiseOps, ActivationsAtExtremes) {
  float inf = std::numeric_limits<float>::infinity();
  OneOp sig("Sigmoid", {F32({-1000, 0, 1000}, {3})});
  auto s = sig.Run();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Doubles(*s), (std::vector<double>{0, 0.5, 1}));
  OneOp sp("Softplus", {F32({-inf, 0, 100}, {3})});
  auto p = sp.Run();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->GetDouble(0), 0);
  EXPECT_NEAR(p->GetDouble(1), std::log(2.0), 1e-6);
  EXPECT_EQ(p->GetDouble(2), 100);
  OneOp hs("HardSwish", {F32({-4, 0, 1, 4}, {4})});
  auto h = hs.Run();
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_NEAR(h->GetDouble(2), 1.0 * (1.0 / 6 + 0.5), 1e-6);
  EXPECT_EQ(h->GetDouble(0), 0);
  EXPECT_EQ(h->GetDouble(3), 4);
  OneOp relu("Relu", {Tensor::FromVector<int8_t>({-3, 3}, {2})});
  auto rl = relu.Run();
  ASSERT_TRUE(rl.ok()) << rl.status();
  EXPECT_EQ(Ints(*rl), (std::vector<int64_t>{0, 3}));
  OneOp celu("Celu", {F32({1}, {1})});
  celu.Attr("alpha", Attribute::Float(0));
  EXPECT_FALSE(celu.Run().ok());
}

TEST(ElementwiseOps, ShrinkOnIntegers) {
  OneOp op("Shrink", {Tensor::FromVector<int8_t>({-5, -1, 0, 1, 5}, {5})});
  op.Attr("lambd", Attribute::Float(1.5f)).Attr("bias", Attribute::Float(2));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints(*r), (std::vector<int64_t>{-3, 0, 0, 0, 3}));
}

TEST(ElementwiseOps, IsInfIsNaN) {
  float inf = std::numeric_limits<float>::infinity();
  Tensor x = F32({-inf, inf, 1, std::numeric_limits<float>::quiet_NaN()}, {4});
  OneOp pos("IsInf", {x});
  pos.Attr("detect_negative", Attribute::Int(0));
  auto p = pos.Run();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(pos.Out().ToString(), "bool[4]");
  EXPECT_EQ(Ints(*p), (std::vector<int64_t>{0, 1, 0, 0}));
  OneOp nan("IsNaN", {x});
  auto n = nan.Run();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(Ints(*n), (std::vector<int64_t>{0, 0, 0, 1}));
}

TEST(ElementwiseOps, RejectsWrongDTypes) {
  EXPECT_FALSE(OneOp("Sqrt", {I32({4}, {1})}).Run().ok());
  EXPECT_FALSE(OneOp("Add", {Bools({true}, {1}), Bools({true}, {1})}).Run().ok());
  EXPECT_FALSE(OneOp("Add", {F32({1}, {1}), I32({1}, {1})}).Run().ok());
  EXPECT_FALSE(OneOp("Not", {F32({1}, {1})}).Run().ok());
  EXPECT_FALSE(OneOp("Neg", {Tensor::FromVector<uint8_t>({1}, {1})}).Run().ok());
  OneOp shift("BitShift", {I32({1}, {1}), I32({1}, {1})});
  shift.Attr("direction", Attribute::String("LEFT"));
  EXPECT_FALSE(shift.Run().ok());
}

//===--- Logic, comparison, bit shifts ------------------------------------===//

TEST(ElementwiseOps, ComparisonsAndLogic) {
  OneOp ge("GreaterOrEqual", {F32({1, 2, 3}, {3}), F32({2}, {1})});
  auto r = ge.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(ge.Out().ToString(), "bool[3]");
  EXPECT_EQ(Ints(*r), (std::vector<int64_t>{0, 1, 1}));
  OneOp x("Xor", {Bools({true, false}, {2, 1}), Bools({true, false}, {1, 2})});
  auto xr = x.Run();
  ASSERT_TRUE(xr.ok()) << xr.status();
  EXPECT_EQ(Ints(*xr), (std::vector<int64_t>{0, 1, 1, 0}));
  Tensor s(DType::kString, {2});
  s.data<std::string>()[0] = "a";
  s.data<std::string>()[1] = "b";
  Tensor t(DType::kString, {1});
  t.data<std::string>()[0] = "b";
  OneOp eq("Equal", {s, t});
  auto er = eq.Run();
  ASSERT_TRUE(er.ok()) << er.status();
  EXPECT_EQ(Ints(*er), (std::vector<int64_t>{0, 1}));
}

TEST(ElementwiseOps, BitShift) {
  OneOp l("BitShift", {Tensor::FromVector<uint8_t>({1, 255, 3}, {3}), Tensor::FromVector<uint8_t>({7, 1, 8}, {3})});
  l.Attr("direction", Attribute::String("LEFT"));
  auto r = l.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints(*r), (std::vector<int64_t>{128, 254, 0}));
  OneOp rr("BitShift", {Tensor::FromVector<uint64_t>({1ULL << 63}, {1}), Tensor::FromVector<uint64_t>({63}, {1})});
  rr.Attr("direction", Attribute::String("RIGHT"));
  auto rs = rr.Run();
  ASSERT_TRUE(rs.ok()) << rs.status();
  EXPECT_EQ(rs->GetInt(0), 1);
  OneOp bad("BitShift", {Tensor::FromVector<uint8_t>({1}, {1}), Tensor::FromVector<uint8_t>({1}, {1})});
  bad.Attr("direction", Attribute::String("UP"));
  EXPECT_FALSE(bad.Run().ok());
}

//===--- Where, Clip, PRelu -----------------------------------------------===//

TEST(ElementwiseOps, WhereBroadcastsStrings) {
  Tensor a(DType::kString, {1});
  a.data<std::string>()[0] = "yes";
  Tensor b(DType::kString, {2, 1});
  b.data<std::string>()[0] = "n0";
  b.data<std::string>()[1] = "n1";
  OneOp op("Where", {Bools({true, false}, {2}), a, b});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "str[2,2]");
  const std::string* p = r->data<std::string>();
  EXPECT_EQ(p[0], "yes");
  EXPECT_EQ(p[1], "n0");
  EXPECT_EQ(p[2], "yes");
  EXPECT_EQ(p[3], "n1");
  EXPECT_FALSE(OneOp("Where", {Bools({true}, {1}), F32({1}, {1}), I32({1}, {1})}).Run().ok());
  EXPECT_FALSE(OneOp("Where", {F32({1}, {1}), F32({1}, {1}), F32({1}, {1})}).Run().ok());
}

TEST(ElementwiseOps, Clip) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  OneOp f("Clip", {F32({-2, 0, 2, nan}, {4}), F32({-1}, {}), F32({1}, {})});
  auto r = f.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<double> v = Doubles(*r);
  EXPECT_EQ(v[0], -1);
  EXPECT_EQ(v[2], 1);
  EXPECT_TRUE(std::isnan(v[3]));
  OneOp only_max("Clip", {Tensor::FromVector<int8_t>({-128, 0, 127}, {3}), Tensor(), Tensor::FromVector<int8_t>({0}, {})});
  auto m = only_max.Run();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Ints(*m), (std::vector<int64_t>{-128, 0, 0}));
  OneOp crossed("Clip", {F32({-5, 5}, {2}), F32({3}, {}), F32({1}, {})});
  auto c = crossed.Run();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(Doubles(*c), (std::vector<double>{1, 1}));
  EXPECT_FALSE(OneOp("Clip", {F32({1}, {1}), F32({0, 1}, {2})}).Run().ok());
  EXPECT_FALSE(OneOp("Clip", {F32({1}, {1}), Tensor::FromVector<double>({0}, {})}).Run().ok());
}

TEST(ElementwiseOps, PRelu) {
  OneOp op("PRelu", {F32({-1, -2, 3, -4}, {2, 2}), F32({0.5f, 2}, {2})});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Doubles(*r), (std::vector<double>{-0.5, -4, 3, -8}));
  // The slope broadcasts to X, never the other way.
  EXPECT_FALSE(OneOp("PRelu", {F32({-1, 2}, {2}), F32({1, 2, 3, 4}, {2, 2})}).Run().ok());
}

//===--- Dropout, Identity, Cast ------------------------------------------===//

TEST(ElementwiseOps, DropoutInference) {
  OneOp op("Dropout", {F32({1, 2, 3}, {3}), F32({0.9f}, {})}, 2);
  auto r = op.RunAll();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out(1).ToString(), "bool[3]");
  EXPECT_EQ(Doubles((*r)[0]), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(Ints((*r)[1]), (std::vector<int64_t>{1, 1, 1}));
}

TEST(ElementwiseOps, DropoutTrainingMatchesNumpySeed) {
  // numpy: np.random.seed(0); np.random.uniform(0, 1, 5) =
  // [0.5488, 0.7152, 0.6028, 0.5449, 0.4237]; kept where >= 0.5.
  OneOp op("Dropout", {F32({1, 2, 3, 4, 5}, {5}), F32({0.5f}, {}), Bools({true}, {})}, 2);
  op.Attr("seed", Attribute::Int(0));
  auto r = op.RunAll();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Doubles((*r)[0]), (std::vector<double>{2, 4, 6, 8, 0}));
  EXPECT_EQ(Ints((*r)[1]), (std::vector<int64_t>{1, 1, 1, 1, 0}));
  OneOp one("Dropout", {F32({1}, {1}), F32({1}, {}), Bools({true}, {})});
  EXPECT_FALSE(one.Run().ok());
}

TEST(ElementwiseOps, CastAndCastLike) {
  OneOp cast("Cast", {F32({-1.7f, 2.5f, 300}, {3})});
  cast.Attr("to", Attribute::Int(3));  // INT8
  auto r = cast.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(cast.Out().ToString(), "i8[3]");
  EXPECT_EQ(Ints(*r), (std::vector<int64_t>{-1, 2, 127}));
  OneOp like("CastLike", {I32({1, 0}, {2}), Bools({false}, {1})});
  auto l = like.Run();
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(like.Out().ToString(), "bool[2]");
  EXPECT_EQ(Ints(*l), (std::vector<int64_t>{1, 0}));
  OneOp bad("Cast", {F32({1}, {1})});
  bad.Attr("to", Attribute::Int(99));
  EXPECT_FALSE(bad.Run().ok());
}

TEST(ElementwiseOps, IdentitySharesData) {
  Tensor x = I64({1, 2, 3}, {3});
  OneOp op("Identity", {x});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->Equals(x));
}

//===--- Inference --------------------------------------------------------===//

TEST(ElementwiseOps, InferenceKeepsSymbolsAndToleratesUnknowns) {
  Graph g;
  Value* a = g.AddInput("a", Type::Tensor(DType::kF32, Shape({Dim::Symbol("batch"), Dim(1), Dim(4)})));
  Value* b = g.AddInput("b", Type::Tensor(DType::kF32, Shape({Dim(3), Dim(1)})));
  Value* u = g.AddInput("u", Type());
  Value* s = g.AddInput("s", Type::Sequence(Type::Tensor(DType::kF32)));
  Node* add = g.AddNode("Add", {a, b}, 1);
  auto r = InferNode(*OpRegistry::Global().Find(*add), *add);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].ToString(), "f32[batch,3,4]");
  Node* lt = g.AddNode("Less", {a, u}, 1);
  r = InferNode(*OpRegistry::Global().Find(*lt), *lt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].ToString(), "bool[*]");
  Node* unk = g.AddNode("Exp", {u}, 1);
  r = InferNode(*OpRegistry::Global().Find(*unk), *unk);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)[0].is_none());
  Node* seq = g.AddNode("Exp", {s}, 1);
  EXPECT_FALSE(InferNode(*OpRegistry::Global().Find(*seq), *seq).ok());
  Node* id = g.AddNode("Identity", {s}, 1);
  r = InferNode(*OpRegistry::Global().Find(*id), *id);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0], s->type());
  Value* i = g.AddInput("i", Type::Tensor(DType::kI32, Shape::Static({3, 4})));
  Node* mixed = g.AddNode("Mul", {b, i}, 1);
  auto bad = InferNode(*OpRegistry::Global().Find(*mixed), *mixed);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("input 1 has dtype i32"), std::string::npos) << bad.status();
  Node* nb = g.AddNode("Add", {a, g.AddInput("c", Type::Tensor(DType::kF32, Shape::Static({2, 5})))}, 1);
  EXPECT_FALSE(InferNode(*OpRegistry::Global().Find(*nb), *nb).ok());
}

TEST(ElementwiseOps, Costs) {
  Graph g;
  Type t = Type::Tensor(DType::kF32, Shape::Static({10, 10}));
  Value* a = g.AddInput("a", t);
  Value* b = g.AddInput("b", t);
  Value* c = g.AddInput("c", t);
  Node* sum = g.AddNode("Sum", {a, b, c}, 1);
  Node* mean = g.AddNode("Mean", {a, b, c}, 1);
  Node* id = g.AddNode("Identity", {a}, 1);
  Node* add = g.AddNode("Add", {a, b}, 1);
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(NodeCost(*sum).flops, 200);
  EXPECT_EQ(NodeCost(*sum).bytes_read, 1200);
  EXPECT_EQ(NodeCost(*mean).flops, 300);
  EXPECT_EQ(NodeCost(*id).flops, 0);
  EXPECT_EQ(NodeCost(*id).bytes_written, 400);
  EXPECT_EQ(NodeCost(*add).flops, 100);
}

//===--- Upgraders --------------------------------------------------------===//

absl::Status Upgrade(Graph& g, Node* n, int64_t opset) {
  const OpDef* def = OpRegistry::Global().Find(*n);
  if (!def || !def->upgrade) return absl::OkStatus();
  return def->upgrade(g, n, opset);
}

TEST(ElementwiseUpgrade, LegacyBroadcastWithAxisReshapesConstant) {
  Graph g;
  Value* a = g.AddInput("a", Type::Tensor(DType::kF32, Shape::Static({2, 3, 2})));
  Value* b = g.AddConstant("b", F32({10, 20, 30}, {3}));
  Node* add = g.AddNode("Add", {a, b}, 1);
  add->SetAttr("broadcast", Attribute::Int(1));
  add->SetAttr("axis", Attribute::Int(1));
  add->SetAttr("consumed_inputs", Attribute::Ints({0, 0}));
  g.AddOutput(add->output(0));
  ASSERT_TRUE(Upgrade(g, add, 5).ok());
  EXPECT_TRUE(add->attrs().empty());
  EXPECT_EQ(add->input(1)->type().ToString(), "f32[3,1]");
  ASSERT_TRUE(InferShapes(g).ok());
  Executor ex;
  auto r = ex.Run(g, {F32({0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}, {2, 3, 2})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Doubles((*r)[0]), (std::vector<double>{10, 10, 20, 20, 30, 30, 11, 11, 21, 21, 31, 31}));
}

TEST(ElementwiseUpgrade, LegacyBroadcastWithAxisUnsqueezesValue) {
  Graph g;
  Value* a = g.AddInput("a", Type::Tensor(DType::kF32, Shape::Static({2, 3, 4, 5})));
  Value* b = g.AddInput("b", Type::Tensor(DType::kF32, Shape::Static({3})));
  Node* mul = g.AddNode("Mul", {a, b}, 1);
  mul->SetAttr("broadcast", Attribute::Int(1));
  mul->SetAttr("axis", Attribute::Int(1));
  ASSERT_TRUE(Upgrade(g, mul, 6).ok());
  Node* unsq = mul->input(1)->producer();
  ASSERT_NE(unsq, nullptr);
  EXPECT_EQ(unsq->op(), "Unsqueeze");
  EXPECT_EQ(Ints(unsq->input(1)->constant()), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(mul->input(1)->type().ToString(), "f32[3,1,1]");
  // Without an axis, legacy broadcasting is numpy's suffix rule.
  Node* sub = g.AddNode("Sub", {a, b}, 1);
  sub->SetAttr("broadcast", Attribute::Int(1));
  ASSERT_TRUE(Upgrade(g, sub, 6).ok());
  EXPECT_EQ(sub->input(1), b);
  EXPECT_TRUE(sub->attrs().empty());
}

TEST(ElementwiseUpgrade, LegacyBroadcastInfersProducerRanks) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({2, 3, 4})));
  Node* e = g.AddNode("Exp", {x}, 1);  // output type not inferred yet
  Value* b = g.AddConstant("b", F32({1, 2, 3}, {3}));
  Node* add = g.AddNode("Add", {e->output(0), b}, 1);
  add->SetAttr("broadcast", Attribute::Int(1));
  add->SetAttr("axis", Attribute::Int(1));
  ASSERT_TRUE(Upgrade(g, add, 6).ok());
  EXPECT_EQ(add->input(1)->type().ToString(), "f32[3,1]");
  Node* bad = g.AddNode("Add", {x, g.AddConstant("big", F32({1, 2, 3, 4}, {2, 2}))}, 1);
  bad->SetAttr("broadcast", Attribute::Int(1));
  bad->SetAttr("axis", Attribute::Int(2));
  EXPECT_FALSE(Upgrade(g, bad, 6).ok());
}

TEST(ElementwiseUpgrade, PReluPerChannelSlope) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({1, 2, 2})));
  Node* p = g.AddNode("PRelu", {x, g.AddConstant("s", F32({0.5f, 2}, {2}))}, 1);
  g.AddOutput(p->output(0));
  ASSERT_TRUE(Upgrade(g, p, 6).ok());
  ASSERT_TRUE(InferShapes(g).ok());
  Executor ex;
  auto r = ex.Run(g, {F32({-1, -1, -1, 1}, {1, 2, 2})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Doubles((*r)[0]), (std::vector<double>{-0.5, -0.5, -2, 1}));
}

TEST(ElementwiseUpgrade, ClipAttributesBecomeInputs) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF16, Shape::Static({3})));
  Node* c = g.AddNode("Clip", {x}, 1);
  c->SetAttr("max", Attribute::Float(0.5f));
  g.AddOutput(c->output(0));
  ASSERT_TRUE(Upgrade(g, c, 6).ok());
  EXPECT_TRUE(c->attrs().empty());
  ASSERT_EQ(c->num_inputs(), 3);
  EXPECT_EQ(c->input(1), nullptr);
  EXPECT_EQ(c->input(2)->type().ToString(), "f16[]");
  ASSERT_TRUE(InferShapes(g).ok());
  Executor ex;
  auto r = ex.Run(g, {F16({-3, 0.25f, 3}, {3})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Doubles((*r)[0]), (std::vector<double>{-3, 0.25, 0.5}));
}

TEST(ElementwiseUpgrade, DropoutRatioAndFloatMask) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF64, Shape::Static({2})));
  Node* d = g.AddNode("Dropout", {x}, 2);
  d->SetAttr("ratio", Attribute::Float(0.3f));
  d->SetAttr("is_test", Attribute::Int(1));
  g.AddOutput(d->output(0));
  g.AddOutput(d->output(1));
  ASSERT_TRUE(Upgrade(g, d, 7).ok());
  // The node was replaced by Dropout + Cast of the mask to f64.
  ASSERT_EQ(g.num_nodes(), 2u);
  Node* nd = g.outputs()[0]->producer();
  Node* cast = g.outputs()[1]->producer();
  EXPECT_EQ(nd->op(), "Dropout");
  EXPECT_TRUE(nd->attrs().empty());
  EXPECT_EQ(nd->input(1)->constant().GetDouble(0), 0.3f);
  EXPECT_EQ(cast->op(), "Cast");
  // Upgrading the new node again changes nothing.
  ASSERT_TRUE(Upgrade(g, nd, 7).ok());
  EXPECT_EQ(g.num_nodes(), 2u);
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(g.outputs()[1]->type().ToString(), "f64[2]");
  Executor ex;
  auto r = ex.Run(g, {Tensor::FromVector<double>({4, 5}, {2})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Doubles((*r)[0]), (std::vector<double>{4, 5}));
  EXPECT_EQ(Doubles((*r)[1]), (std::vector<double>{1, 1}));
}

TEST(ElementwiseUpgrade, DropoutMaskKeepsNamesWhileImporting) {
  // The importer upgrades a node before later nodes refer to its outputs
  // by name, so the replacement must keep them.
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({2})));
  Node* d = g.AddNode("Dropout", {x}, {"y", "m"});
  d->output(1)->set_type(Type::Tensor(DType::kF32, Shape::Static({2})));
  Node* after = g.AddNode("Exp", {x}, {"e"});
  ASSERT_TRUE(Upgrade(g, d, 9).ok());
  Value* y = g.Lookup("y");
  Value* m = g.Lookup("m");
  ASSERT_NE(y, nullptr);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(y->producer()->op(), "Dropout");
  EXPECT_EQ(m->producer()->op(), "Cast");
  EXPECT_EQ(m->producer()->input(0), y->producer()->output(1));
  std::vector<Node*> order = g.NodeList();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[2], after);
  g.AddOutput(g.AddNode("Add", {y, m}, 1)->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  Executor ex;
  auto r = ex.Run(g, {F32({1, 2}, {2})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Doubles((*r)[0]), (std::vector<double>{2, 3}));
}

TEST(ElementwiseUpgrade, CastStringTypeAndSeluDefaults) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({1})));
  Node* c = g.AddNode("Cast", {x}, 1);
  c->SetAttr("to", Attribute::String("DOUBLE"));
  ASSERT_TRUE(Upgrade(g, c, 1).ok());
  EXPECT_EQ(c->GetInt("to", 0), 11);
  Node* bad = g.AddNode("Cast", {x}, 1);
  bad->SetAttr("to", Attribute::String("FLOAT128"));
  EXPECT_FALSE(Upgrade(g, bad, 1).ok());
  Node* s = g.AddNode("Selu", {x}, 1);
  s->SetAttr("consumed_inputs", Attribute::Ints({0}));
  ASSERT_TRUE(Upgrade(g, s, 1).ok());
  EXPECT_FALSE(s->has_attr("consumed_inputs"));
  EXPECT_FLOAT_EQ(s->GetFloat("alpha", 0), 1.6732f);
}

}  // namespace
}  // namespace kiln
