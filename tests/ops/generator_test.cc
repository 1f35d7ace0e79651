// Tests of the generator family. Random ops are checked for shapes, dtypes,
// ranges and determinism only.
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

// An op whose inputs are all constants.
struct ConstOp {
  Graph g;
  Node* node = nullptr;
  ConstOp(absl::string_view op, std::vector<Tensor> ins) {
    std::vector<Value*> vs;
    for (Tensor& t : ins) vs.push_back(g.AddConstant(g.UniqueName("c"), t));
    node = g.AddNode(op, vs, 1);
    g.AddOutput(node->output(0));
  }
  ConstOp& Attr(const char* name, Attribute a) {
    node->SetAttr(name, std::move(a));
    return *this;
  }
  Type Out() const { return node->output(0)->type(); }
  absl::StatusOr<Tensor> Run() {
    absl::Status s = InferShapes(g);
    if (!s.ok()) return s;
    Executor ex;
    auto r = ex.Run(g, {});
    if (!r.ok()) return r.status();
    return (*r)[0];
  }
};

TEST(GeneratorOps, ConstantForms) {
  ConstOp ints("Constant", {});
  ints.Attr("value_ints", Attribute::Ints({3, 4}));
  auto r = ints.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(ints.Out().ToString(), "i64[2]");
  EXPECT_EQ(r->GetInt(1), 4);
  ConstOp f("Constant", {});
  f.Attr("value_float", Attribute::Float(2.5f));
  auto rf = f.Run();
  ASSERT_TRUE(rf.ok()) << rf.status();
  EXPECT_EQ(f.Out().ToString(), "f32[]");
  ConstOp t("Constant", {});
  t.Attr("value", Attribute::TensorValue(Tensor::FromVector<int32_t>({1, 2, 3, 4}, {2, 2})));
  auto rt = t.Run();
  ASSERT_TRUE(rt.ok()) << rt.status();
  EXPECT_EQ(t.Out().ToString(), "i32[2,2]");
  ConstOp two("Constant", {});
  two.Attr("value_int", Attribute::Int(1)).Attr("value_float", Attribute::Float(1));
  EXPECT_FALSE(two.Run().ok());
  ConstOp none("Constant", {});
  EXPECT_FALSE(none.Run().ok());
}

TEST(GeneratorOps, ConstantOfShape) {
  ConstOp op("ConstantOfShape", {Tensor::FromVector<int64_t>({2, 3}, {2})});
  op.Attr("value", Attribute::TensorValue(Tensor::FromVector<int32_t>({7}, {1})));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "i32[2,3]");
  EXPECT_EQ(r->GetInt(5), 7);
  ConstOp dflt("ConstantOfShape", {Tensor::FromVector<int64_t>({}, {0})});
  auto rd = dflt.Run();
  ASSERT_TRUE(rd.ok()) << rd.status();
  EXPECT_EQ(dflt.Out().ToString(), "f32[]");
  ConstOp neg("ConstantOfShape", {Tensor::FromVector<int64_t>({-1}, {1})});
  EXPECT_FALSE(neg.Run().ok());
}

TEST(GeneratorOps, Range) {
  ConstOp op("Range", {Tensor::Scalar<int32_t>(1), Tensor::Scalar<int32_t>(10), Tensor::Scalar<int32_t>(3)});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "i32[3]");
  EXPECT_EQ(Doubles(*r), (std::vector<double>{1, 4, 7}));
  ConstOp f("Range", {Tensor::Scalar<float>(5), Tensor::Scalar<float>(-3), Tensor::Scalar<float>(-2.5f)});
  auto rf = f.Run();
  ASSERT_TRUE(rf.ok()) << rf.status();
  EXPECT_EQ(Doubles(*rf), (std::vector<double>{5, 2.5, 0, -2.5}));
  ConstOp zero("Range", {Tensor::Scalar<int64_t>(0), Tensor::Scalar<int64_t>(3), Tensor::Scalar<int64_t>(0)});
  EXPECT_FALSE(zero.Run().ok());
  ConstOp huge("Range", {Tensor::Scalar<int64_t>(0), Tensor::Scalar<int64_t>(INT64_MAX), Tensor::Scalar<int64_t>(1)});
  EXPECT_FALSE(huge.Run().ok());
}

TEST(GeneratorOps, EyeLike) {
  ConstOp op("EyeLike", {Tensor(DType::kF32, {3, 4})});
  op.Attr("k", Attribute::Int(1)).Attr("dtype", Attribute::Int(7));  // int64
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "i64[3,4]");
  EXPECT_EQ(Doubles(*r), (std::vector<double>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
}

TEST(GeneratorOps, OneHot) {
  ConstOp op("OneHot", {Tensor::FromVector<float>({1, -1, 5}, {3}), Tensor::Scalar<float>(3),
                        Tensor::FromVector<int64_t>({0, 9}, {2})});
  op.Attr("axis", Attribute::Int(0));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.Out().ToString(), "i64[3,3]");
  // Columns are the indices: 1 -> row 1, -1 -> row 2, 5 -> all off.
  EXPECT_EQ(Doubles(*r), (std::vector<double>{0, 0, 0, 9, 0, 0, 0, 9, 0}));
}

TEST(GeneratorOps, Windows) {
  ConstOp hann("HannWindow", {Tensor::Scalar<int64_t>(5)});
  hann.Attr("periodic", Attribute::Int(0));
  auto r = hann.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(hann.Out().ToString(), "f32[5]");
  std::vector<double> want = {0, 0.5, 1, 0.5, 0};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(r->GetDouble(i), want[i], 1e-6);
  ConstOp bl("BlackmanWindow", {Tensor::Scalar<int32_t>(4)});
  bl.Attr("output_datatype", Attribute::Int(11));  // double
  auto rb = bl.Run();
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(bl.Out().ToString(), "f64[4]");
  EXPECT_NEAR(rb->GetDouble(2), 0.42 + 0.5 + 0.08, 1e-12);
}

TEST(GeneratorOps, RandomShapesAndDeterminism) {
  ConstOp u("RandomUniform", {});
  u.Attr("shape", Attribute::Ints({2, 3})).Attr("low", Attribute::Float(2)).Attr("high", Attribute::Float(3));
  u.Attr("seed", Attribute::Float(1));
  auto a = u.Run();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(u.Out().ToString(), "f32[2,3]");
  for (double v : Doubles(*a)) {
    EXPECT_GE(v, 2.0);
    EXPECT_LT(v, 3.0);
  }
  auto b = u.Run();
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(a->Equals(*b));

  ConstOp n("RandomNormalLike", {Tensor(DType::kF16, {4})});
  auto rn = n.Run();
  ASSERT_TRUE(rn.ok()) << rn.status();
  EXPECT_EQ(n.Out().ToString(), "f16[4]");

  ConstOp bad("RandomUniformLike", {Tensor(DType::kI32, {4})});
  EXPECT_FALSE(bad.Run().ok());

  ConstOp be("Bernoulli", {Tensor::FromVector<double>({0, 1, 0, 1}, {4})});
  be.Attr("dtype", Attribute::Int(9));  // bool
  auto rbe = be.Run();
  ASSERT_TRUE(rbe.ok()) << rbe.status();
  EXPECT_EQ(be.Out().ToString(), "bool[4]");
  EXPECT_EQ(Doubles(*rbe), (std::vector<double>{0, 1, 0, 1}));

  ConstOp m("Multinomial", {Tensor::FromVector<float>({0, -INFINITY, -INFINITY, 0, 0, 0}, {2, 3})});
  m.Attr("sample_size", Attribute::Int(5)).Attr("dtype", Attribute::Int(7));
  auto rm = m.Run();
  ASSERT_TRUE(rm.ok()) << rm.status();
  EXPECT_EQ(m.Out().ToString(), "i64[2,5]");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(rm->GetInt(i), 0);
  for (int i = 5; i < 10; ++i) EXPECT_LT(rm->GetInt(i), 3);
}

}  // namespace
}  // namespace kiln
