// Tests of the data movement family: kernels against numpy results,
// inference, error paths and upgraders.
#include <gtest/gtest.h>

#include <random>

#include "graph/exec/executor.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"

namespace kiln {
namespace {

Tensor I64(std::vector<int64_t> v, Dims dims = {}) {
  if (dims.empty()) dims = {static_cast<int64_t>(v.size())};
  return Tensor::FromVector<int64_t>(v, dims);
}
Tensor Iota(Dims dims, DType dt = DType::kF32) {
  Tensor t(DType::kI64, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = i;
  return CastTensor(t, dt);
}
std::vector<int64_t> Ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.GetInt(i));
  return v;
}

// One op whose inputs are graph inputs (fed at run time, declared with the
// tensor's static type) or constants; a missing optional input is nullopt.
struct Arg {
  Tensor t;
  bool constant = false;
  bool missing = false;
};
Arg In(Tensor t) { return {std::move(t), false, false}; }
Arg Const(Tensor t) { return {std::move(t), true, false}; }
Arg None() { return {Tensor(), false, true}; }

struct OneOp {
  Graph g;
  Node* node = nullptr;
  std::vector<Tensor> feeds;
  OneOp(absl::string_view op, std::vector<Arg> args, int outputs = 1) {
    std::vector<Value*> ins;
    for (size_t i = 0; i < args.size(); ++i) {
      Arg& a = args[i];
      if (a.missing) {
        ins.push_back(nullptr);
      } else if (a.constant) {
        ins.push_back(g.AddConstant(g.UniqueName("c"), a.t));
      } else {
        ins.push_back(g.AddInput(absl::StrCat("in", i), Type::Of(a.t)));
        feeds.push_back(a.t);
      }
    }
    node = g.AddNode(op, ins, outputs);
    for (int i = 0; i < outputs; ++i) g.AddOutput(node->output(i));
  }
  OneOp& Attr(const char* name, Attribute a) {
    node->SetAttr(name, std::move(a));
    return *this;
  }
  Type Out(int i = 0) const { return node->output(i)->type(); }
  absl::StatusOr<std::vector<Tensor>> Run() {
    absl::Status s = InferShapes(g);
    if (!s.ok()) return s;
    Executor ex;
    return ex.Run(g, feeds);
  }
  // Runs and returns output 0 as ints, failing the test on error.
  std::vector<int64_t> RunInts(Dims* dims = nullptr) {
    auto r = Run();
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    if (dims) *dims = (*r)[0].dims();
    return Ints((*r)[0]);
  }
};

TEST(MovementOps, Transpose) {
  OneOp op("Transpose", {In(Iota({2, 3}))});
  Dims d;
  EXPECT_EQ(op.RunInts(&d), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(d, (Dims{3, 2}));
  OneOp op3("Transpose", {In(Iota({2, 3, 4}, DType::kI16))});
  op3.Attr("perm", Attribute::Ints({1, 0, 2}));
  auto v = op3.RunInts(&d);
  EXPECT_EQ(d, (Dims{3, 2, 4}));
  EXPECT_EQ(v[4], 12);
  OneOp bad("Transpose", {In(Iota({2, 3}))});
  bad.Attr("perm", Attribute::Ints({0, 0}));
  EXPECT_FALSE(bad.Run().ok());
}

TEST(MovementOps, TransposeSymbolic) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape({Dim::Symbol("b"), 3})));
  Node* n = g.AddNode("Transpose", {x}, 1);
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(n->output(0)->type().ToString(), "f32[3,b]");
}

TEST(MovementOps, Concat) {
  OneOp op("Concat", {In(Iota({2, 1})), In(Iota({2, 2}))});
  op.Attr("axis", Attribute::Int(-1));
  Dims d;
  EXPECT_EQ(op.RunInts(&d), (std::vector<int64_t>{0, 0, 1, 1, 2, 3}));
  EXPECT_EQ(op.Out().ToString(), "f32[2,3]");
  OneOp bad("Concat", {In(Iota({2, 1})), In(Iota({3, 2}))});
  bad.Attr("axis", Attribute::Int(1));
  EXPECT_FALSE(bad.Run().ok());
}

TEST(MovementOps, Split) {
  OneOp op("Split", {In(Iota({2, 5})), Const(I64({2, 3}))}, 2);
  op.Attr("axis", Attribute::Int(1));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{0, 1, 5, 6}));
  EXPECT_EQ(Ints((*r)[1]), (std::vector<int64_t>{2, 3, 4, 7, 8, 9}));
  EXPECT_EQ(op.Out(1).ToString(), "f32[2,3]");
  OneOp eq("Split", {In(Iota({6}))}, 3);
  auto r2 = eq.Run();
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(Ints((*r2)[2]), (std::vector<int64_t>{4, 5}));
  OneOp uneven("Split", {In(Iota({5}))}, 2);
  EXPECT_FALSE(uneven.Run().ok());
}

TEST(MovementOps, SplitUpgrade) {
  OneOp op("Split", {In(Iota({6}))}, 2);
  op.Attr("split", Attribute::Ints({2, 4}));
  ASSERT_TRUE(OpRegistry::Global().Find(*op.node)->upgrade(op.g, op.node, 2).ok());
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[1].dims(), (Dims{4}));
}

TEST(MovementOps, SliceNegativeSteps) {
  // x[1::-1, ::2, -1:0:-2] of arange(24).reshape(2,3,4)
  OneOp op("Slice", {In(Iota({2, 3, 4})), Const(I64({1, 0, -1})),
                     Const(I64({INT64_MIN, INT64_MAX, 0})), Const(I64({0, 1, 2})), Const(I64({-1, 2, -2}))});
  Dims d;
  EXPECT_EQ(op.RunInts(&d), (std::vector<int64_t>{15, 13, 23, 21, 3, 1, 11, 9}));
  EXPECT_EQ(d, (Dims{2, 2, 2}));
  EXPECT_EQ(op.Out().ToString(), "f32[2,2,2]");
}

TEST(MovementOps, SliceClampsAndEmpty) {
  OneOp op("Slice", {In(Iota({4})), Const(I64({10})), Const(I64({20}))});
  Dims d;
  op.RunInts(&d);
  EXPECT_EQ(d, (Dims{0}));
  OneOp zero_step("Slice", {In(Iota({4})), Const(I64({0})), Const(I64({2})), None(), Const(I64({0}))});
  EXPECT_FALSE(zero_step.Run().ok());
}

TEST(MovementOps, SliceSymbolic) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape({Dim::Symbol("b"), 10})));
  Value* s = g.AddConstant("s", I64({0, 2}));
  Value* e = g.AddConstant("e", I64({INT64_MAX, 5}));
  Node* n = g.AddNode("Slice", {x, s, e}, 1);
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(n->output(0)->type().ToString(), "f32[b,3]");
}

TEST(MovementOps, SliceUpgrade) {
  OneOp op("Slice", {In(Iota({2, 4}))});
  op.Attr("starts", Attribute::Ints({1})).Attr("ends", Attribute::Ints({3})).Attr("axes", Attribute::Ints({1}));
  ASSERT_TRUE(OpRegistry::Global().Find(*op.node)->upgrade(op.g, op.node, 1).ok());
  EXPECT_EQ(op.RunInts(), (std::vector<int64_t>{1, 2, 5, 6}));
}

TEST(MovementOps, GatherNegativeAndOutOfRange) {
  OneOp op("Gather", {In(Iota({3, 2})), In(I64({-1, 0}, {2}))});
  EXPECT_EQ(op.RunInts(), (std::vector<int64_t>{4, 5, 0, 1}));
  OneOp ax("Gather", {In(Iota({2, 3})), Const(I64({2, 1, 0, 0}, {2, 2}))});
  ax.Attr("axis", Attribute::Int(1));
  Dims d;
  EXPECT_EQ(ax.RunInts(&d), (std::vector<int64_t>{2, 1, 0, 0, 5, 4, 3, 3}));
  EXPECT_EQ(d, (Dims{2, 2, 2}));
  OneOp bad("Gather", {In(Iota({3, 2})), In(I64({3}))});
  EXPECT_FALSE(bad.Run().ok());
}

TEST(MovementOps, GatherStrings) {
  Tensor s(DType::kString, {3});
  s.data<std::string>()[0] = "a";
  s.data<std::string>()[1] = "bb";
  s.data<std::string>()[2] = "ccc";
  OneOp op("Gather", {In(s), In(I64({2, 0}))});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].data<std::string>()[0], "ccc");
  EXPECT_EQ((*r)[0].data<std::string>()[1], "a");
}

TEST(MovementOps, GatherElements) {
  OneOp op("GatherElements", {In(Iota({2, 2})), In(I64({0, 0, 1, -2}, {2, 2}))});
  op.Attr("axis", Attribute::Int(1));
  EXPECT_EQ(op.RunInts(), (std::vector<int64_t>{0, 0, 3, 2}));
  OneOp bad("GatherElements", {In(Iota({2, 2})), In(I64({0, 2}, {1, 2}))});
  EXPECT_FALSE(bad.Run().ok());
}

TEST(MovementOps, GatherNDBatchDims) {
  OneOp op("GatherND", {In(Iota({2, 3, 4})), In(I64({0, 1, 2, 0, 1, 1, 0, 2}, {2, 2, 2}))});
  op.Attr("batch_dims", Attribute::Int(1));
  Dims d;
  EXPECT_EQ(op.RunInts(&d), (std::vector<int64_t>{1, 8, 17, 14}));
  EXPECT_EQ(d, (Dims{2, 2}));
  EXPECT_EQ(op.Out().ToString(), "f32[2,2]");
  OneOp slices("GatherND", {In(Iota({2, 2})), In(I64({1, 0}, {2, 1}))});
  EXPECT_EQ(slices.RunInts(), (std::vector<int64_t>{2, 3, 0, 1}));
}

TEST(MovementOps, ScatterElementsReductions) {
  OneOp op("ScatterElements", {In(Iota({1, 5})), In(I64({1, 3, 1}, {1, 3})), In(Iota({1, 3}))});
  op.Attr("axis", Attribute::Int(1)).Attr("reduction", Attribute::String("add"));
  EXPECT_EQ(op.RunInts(), (std::vector<int64_t>{0, 3, 2, 4, 4}));
  OneOp none("ScatterElements", {In(Iota({3}, DType::kF16)), In(I64({-1})), In(Iota({1}, DType::kF16))});
  EXPECT_EQ(none.RunInts(), (std::vector<int64_t>{0, 1, 0}));
  OneOp old("Scatter", {In(Iota({3})), In(I64({0})), In(Iota({1}))});
  EXPECT_EQ(old.RunInts(), (std::vector<int64_t>{0, 1, 2}));
  OneOp bad("ScatterElements", {In(Iota({3})), In(I64({3})), In(Iota({1}))});
  EXPECT_FALSE(bad.Run().ok());
}

TEST(MovementOps, ScatterND) {
  OneOp op("ScatterND", {In(Iota({4, 2})), In(I64({3, 1}, {2, 1})), In(Iota({2, 2}))});
  op.Attr("reduction", Attribute::String("mul"));
  EXPECT_EQ(op.RunInts(), (std::vector<int64_t>{0, 1, 4, 9, 4, 5, 0, 7}));
  OneOp mx("ScatterND", {In(Iota({4})), In(I64({0, 3}, {2, 1})), In(I64({5, 1}, {2}))});
  EXPECT_FALSE(mx.Run().ok());  // dtype mismatch: f32 data, i64 updates
}

TEST(MovementOps, PadModes) {
  OneOp refl("Pad", {In(Iota({2, 3}, DType::kI32)), Const(I64({1, 2, 1, 2}))});
  refl.Attr("mode", Attribute::String("reflect"));
  EXPECT_EQ(refl.RunInts(), (std::vector<int64_t>{5, 4, 3, 4, 5, 4, 3, 2, 1, 0, 1, 2, 1, 0,
                                                 5, 4, 3, 4, 5, 4, 3, 2, 1, 0, 1, 2, 1, 0}));
  OneOp edge("Pad", {In(Iota({2, 3}, DType::kI32)), Const(I64({0, 1, 1, 0}))});
  edge.Attr("mode", Attribute::String("edge"));
  EXPECT_EQ(edge.RunInts(), (std::vector<int64_t>{0, 0, 1, 2, 3, 3, 4, 5, 3, 3, 4, 5}));
  OneOp cst("Pad", {In(Iota({2, 2})), Const(I64({0, 1, 0, -1})), Const(Tensor::Scalar<float>(7))});
  EXPECT_EQ(cst.RunInts(), (std::vector<int64_t>{7, 0, 7, 2}));
  EXPECT_EQ(cst.Out().ToString(), "f32[2,2]");
}

TEST(MovementOps, PadUpgradeFromOpset2) {
  OneOp op("Pad", {In(Iota({2}))});
  op.Attr("pads", Attribute::Ints({1, 1})).Attr("value", Attribute::Float(9));
  ASSERT_TRUE(OpRegistry::Global().Find(*op.node)->upgrade(op.g, op.node, 2).ok());
  EXPECT_FALSE(op.node->has_attr("value"));
  EXPECT_EQ(op.RunInts(), (std::vector<int64_t>{9, 0, 1, 9}));
}

TEST(MovementOps, Tile) {
  OneOp op("Tile", {In(Iota({2, 3})), Const(I64({2, 2}))});
  Dims d;
  EXPECT_EQ(op.RunInts(&d), (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5,
                                                  0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
  EXPECT_EQ(op.Out().ToString(), "f32[4,6]");
}

TEST(MovementOps, DepthToSpaceAndBack) {
  OneOp dcr("DepthToSpace", {In(Iota({1, 8, 1, 2}))});
  dcr.Attr("blocksize", Attribute::Int(2));
  EXPECT_EQ(dcr.RunInts(), (std::vector<int64_t>{0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15}));
  EXPECT_EQ(dcr.Out().ToString(), "f32[1,2,2,4]");
  OneOp crd("DepthToSpace", {In(Iota({1, 8, 1, 2}))});
  crd.Attr("blocksize", Attribute::Int(2)).Attr("mode", Attribute::String("CRD"));
  EXPECT_EQ(crd.RunInts(), (std::vector<int64_t>{0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15}));
  OneOp s2d("SpaceToDepth", {In(Iota({1, 1, 4, 4}))});
  s2d.Attr("blocksize", Attribute::Int(2));
  EXPECT_EQ(s2d.RunInts(), (std::vector<int64_t>{0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15}));
  EXPECT_EQ(s2d.Out().ToString(), "f32[1,4,2,2]");
}

TEST(MovementOps, Compress) {
  Tensor cond = Tensor::FromVector<bool>({false, true, true}, {3});
  OneOp op("Compress", {In(Iota({3, 2})), In(cond)});
  op.Attr("axis", Attribute::Int(0));
  EXPECT_EQ(op.RunInts(), (std::vector<int64_t>{2, 3, 4, 5}));
  OneOp flat("Compress", {In(Iota({3, 2})), Const(cond)});
  Dims d;
  EXPECT_EQ(flat.RunInts(&d), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(flat.Out().ToString(), "f32[2]");
}

TEST(MovementOps, ReverseSequence) {
  OneOp op("ReverseSequence", {In(Iota({4, 4})), In(I64({1, 2, 3, 4}))});
  op.Attr("time_axis", Attribute::Int(1)).Attr("batch_axis", Attribute::Int(0));
  EXPECT_EQ(op.RunInts(), (std::vector<int64_t>{0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12}));
  OneOp t0("ReverseSequence", {In(Iota({4, 4})), In(I64({4, 3, 2, 1}))});
  EXPECT_EQ(t0.RunInts(), (std::vector<int64_t>{12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15}));
}

TEST(MovementOps, Trilu) {
  OneOp up("Trilu", {In(Iota({3, 3})), Const(Tensor::Scalar<int64_t>(1))});
  EXPECT_EQ(up.RunInts(), (std::vector<int64_t>{0, 1, 2, 0, 0, 5, 0, 0, 0}));
  OneOp lo("Trilu", {In(Iota({2, 3}))});
  lo.Attr("upper", Attribute::Int(0));
  EXPECT_EQ(lo.RunInts(), (std::vector<int64_t>{0, 0, 0, 3, 4, 0}));
}

}  // namespace
}  // namespace kiln

//===--- Robustness: random inputs and attributes for every op of the shape,
// movement and generator families. Inference and kernels must return errors
// rather than crash, and when both succeed the kernel's result must fit the
// inferred type.

namespace kiln {
namespace {

std::vector<Tensor> TensorPool() {
  std::vector<Tensor> p;
  p.push_back(Iota({2, 3}));
  p.push_back(Tensor::Scalar<float>(1.5f));
  p.push_back(Tensor(DType::kF32, {0, 3}));
  p.push_back(I64({1, -1}));
  p.push_back(I64({0, 5, -7}));
  p.push_back(Tensor::Scalar<int64_t>(2));
  p.push_back(I64({INT64_MAX}));
  p.push_back(I64({INT64_MIN, 3}));
  p.push_back(Tensor::FromVector<int32_t>({0, 1, 1, 0}, {2, 2}));
  p.push_back(Tensor::FromVector<bool>({true, false, true}, {3}));
  Tensor s(DType::kString, {2});
  s.data<std::string>()[0] = "x";
  p.push_back(s);
  p.push_back(I64({1, 1, 1, 1}));
  p.push_back(I64({0, 1, 0, 1, 1, 0}));
  p.push_back(Iota({1, 4, 2, 2}, DType::kF16));
  p.push_back(I64({1, 0, 1, 1}, {2, 2}));
  p.push_back(Iota({2, 2}, DType::kF64));
  return p;
}

// Small index-like tensors, drawn more often for inputs after the first.
std::vector<Tensor> IndexPool() {
  return {I64({1, -1}), I64({0}), I64({1}), Tensor::Scalar<int64_t>(1), I64({0, 2}), I64({2, 3}),
          I64({1, 0}, {2, 1}), I64({-1, 0}, {1, 2}), Tensor::Scalar<float>(3.0f), I64({2, 1, 2, 1}),
          Tensor::FromVector<bool>({true, true}, {2}), Iota({2, 3}), Iota({1, 2})};
}

std::vector<Type> TypePool() {
  return {Type(),
          Type::Tensor(DType::kF32),
          Type::Tensor(DType::kF32, Shape({Dim::Symbol("b"), 3})),
          Type::Tensor(DType::kI64, Shape({Dim()})),
          Type::Tensor(DType::kI64, Shape::Static({2})),
          Type::Tensor(DType::kUndefined, Shape({Dim(), 4})),
          Type::Tensor(DType::kF32, Shape::Scalar()),
          Type::Sequence(Type::Tensor(DType::kF32))};
}

Attribute RandomAttr(AttrKind kind, std::mt19937& rng) {
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  switch (kind) {
    case AttrKind::kInt: {
      const int64_t v[] = {0, 1, -1, 2, 3, 5, -100, 7, 9};
      return Attribute::Int(v[pick(9)]);
    }
    case AttrKind::kInts: {
      const std::vector<int64_t> v[] = {{}, {0}, {1, 0}, {0, 1, 2}, {-1}, {2, 2}, {3, 3}};
      return Attribute::Ints(v[pick(7)]);
    }
    case AttrKind::kFloat: return Attribute::Float(static_cast<float>(pick(3)) - 1.0f);
    case AttrKind::kString: {
      const char* v[] = {"", "constant", "reflect", "edge", "wrap", "add", "mul", "max", "DCR", "CRD", "bogus"};
      return Attribute::String(v[pick(11)]);
    }
    case AttrKind::kTensor: {
      const Tensor v[] = {Tensor::Scalar<float>(2), I64({4}), Tensor(DType::kString, {1}), I64({1, 2})};
      return Attribute::TensorValue(v[pick(4)]);
    }
    case AttrKind::kFloats: return Attribute::Floats({1, 2});
    case AttrKind::kStrings: return Attribute::Strings({"a"});
    default: return Attribute::Int(0);
  }
}

const char* const kFamilyOps[] = {
    "Shape", "Size", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Expand", "Transpose", "Concat", "Split",
    "Slice", "Gather", "GatherElements", "GatherND", "Scatter", "ScatterElements", "ScatterND", "Pad", "Tile",
    "DepthToSpace", "SpaceToDepth", "Compress", "ReverseSequence", "Trilu", "Constant", "ConstantOfShape",
    "Range", "EyeLike", "OneHot", "HannWindow", "HammingWindow", "BlackmanWindow", "RandomUniform",
    "RandomUniformLike", "RandomNormal", "RandomNormalLike", "Bernoulli", "Multinomial"};

TEST(FamilyRobustness, RandomInputsAndAttributes) {
  std::vector<Tensor> tensors = TensorPool();
  std::vector<Tensor> indices = IndexPool();
  std::vector<Type> types = TypePool();
  std::mt19937 rng(12345);
  for (const char* op : kFamilyOps) {
    const OpDef* def = OpRegistry::Global().Find("", op);
    ASSERT_NE(def, nullptr) << op;
    int max_in = def->max_inputs < 0 ? 3 : std::min(def->max_inputs, 5);
    for (int trial = 0; trial < 1000; ++trial) {
      Graph g;
      int n_in = def->min_inputs + static_cast<int>(rng() % (max_in - def->min_inputs + 1));
      bool constant = trial % 2 == 0;
      std::vector<Value*> ins;
      std::vector<const Tensor*> kin;
      for (int i = 0; i < n_in; ++i) {
        if (i > 0 && rng() % 8 == 0) {  // omitted input
          ins.push_back(nullptr);
          kin.push_back(nullptr);
          continue;
        }
        const Tensor& t = i > 0 && rng() % 2 ? indices[rng() % indices.size()] : tensors[rng() % tensors.size()];
        if (constant) {
          ins.push_back(g.AddConstant(g.UniqueName("c"), t));
        } else {
          ins.push_back(g.AddInput(g.UniqueName("i"), types[rng() % types.size()]));
        }
        kin.push_back(&t);
      }
      int n_out = def->max_outputs < 0 ? 1 + static_cast<int>(rng() % 3) : def->min_outputs;
      Node* node = g.AddNode(op, ins, n_out);
      for (const AttrDef& a : def->attrs)
        if (a.required || rng() % 2) node->SetAttr(a.name, RandomAttr(a.kind, rng));
      absl::StatusOr<std::vector<Type>> inferred = InferNode(*def, *node);
      if (!constant) continue;
      KernelContext kctx(*node, kin);
      absl::Status ks = def->kernel(kctx);
      if (!ks.ok() || !inferred.ok()) continue;
      for (int i = 0; i < n_out; ++i) {
        if (!kctx.output(i).defined()) continue;
        absl::Status c = CheckTensorMatchesType(kctx.output(i), (*inferred)[i], "output");
        EXPECT_TRUE(c.ok()) << op << " trial " << trial << ": " << c;
      }
    }
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Python's slice.indices(), the reference for Slice on one axis, with the
// one difference the ONNX spec makes: with a negative step, a start before
// the beginning is clamped to 0 (numpy gives an empty slice).
std::vector<int64_t> PySlice(int64_t start, int64_t stop, int64_t step, int64_t n) {
  int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
  auto fix = [&](int64_t v, bool is_start) {
    if (v < 0) {
      v += n;
      if (is_start && step < 0 && n > 0) v = std::max<int64_t>(v, 0);
      else if (v < lower) v = lower;
    } else if (v > upper) {
      v = upper;
    }
    return v;
  };
  start = fix(start, true);
  stop = fix(stop, false);
  std::vector<int64_t> out;
  for (__int128 i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(static_cast<int64_t>(i));
  return out;
}

TEST(MovementOps, SliceMatchesPythonSlicing) {
  std::mt19937 rng(7);
  const int64_t edge[] = {INT64_MIN, INT64_MAX, INT32_MAX, -INT32_MAX};
  auto pick = [&]() -> int64_t {
    if (rng() % 6 == 0) return edge[rng() % 4];
    return static_cast<int64_t>(rng() % 15) - 7;
  };
  for (int trial = 0; trial < 500; ++trial) {
    int64_t n = rng() % 6;
    int64_t start = pick(), stop = pick(), step = static_cast<int64_t>(rng() % 7) - 3;
    if (step == 0) step = 1;
    if (rng() % 8 == 0) step = rng() % 2 ? INT64_MAX : INT64_MIN;
    OneOp op("Slice", {In(Iota({2, n}, DType::kI64)), Const(I64({start})), Const(I64({stop})), Const(I64({-1})),
                       Const(I64({step}))});
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<int64_t> want;
    for (int row = 0; row < 2; ++row)
      for (int64_t i : PySlice(start, stop, step, n)) want.push_back(row * n + i);
    EXPECT_EQ(Ints((*r)[0]), want) << "n=" << n << " slice(" << start << "," << stop << "," << step << ")";
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(MovementOps, SliceReversedSymbolicAxis) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape({Dim::Symbol("b"), 10})));
  Node* n = g.AddNode("Slice", {x, g.AddConstant("s", I64({-1})), g.AddConstant("e", I64({INT64_MIN})),
                                g.AddConstant("a", I64({0})), g.AddConstant("st", I64({-1}))}, 1);
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(n->output(0)->type().ToString(), "f32[b,10]");
}

TEST(MovementOps, SplitUpgradeFromOpset1FloatSplitInput) {
  OneOp op("Split", {In(Iota({5})), Const(Tensor::FromVector<float>({2, 3}, {2}))}, 2);
  ASSERT_TRUE(OpRegistry::Global().Find(*op.node)->upgrade(op.g, op.node, 1).ok());
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[1].dims(), (Dims{3}));
}

// Gather and Slice read what they write (plus their indices), not the whole
// data input: the AICPU's time for an embedding lookup follows the tokens,
// not the vocabulary. Transpose reads everything it writes.
TEST(MovementOps, SelectionsCostWhatTheyRead) {
  Graph g;
  Value* table = g.AddInput("table", Type::Tensor(DType::kF32, Shape::Static({1000, 128})));
  Value* ids = g.AddInput("ids", Type::Tensor(DType::kI64, Shape::Static({2, 32})));
  Node* gather = g.AddNode("Gather", {table, ids}, 1);
  Node* transpose = g.AddNode("Transpose", {table}, 1);
  g.AddOutput(gather->output(0));
  g.AddOutput(transpose->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  OpCost c = NodeCost(*gather);
  EXPECT_DOUBLE_EQ(c.bytes_written, 64.0 * 128 * 4);
  EXPECT_DOUBLE_EQ(c.bytes_read, 64.0 * 128 * 4 + 64 * 8);
  EXPECT_DOUBLE_EQ(NodeCost(*transpose).bytes_read, 1000.0 * 128 * 4);
}

}  // namespace
}  // namespace kiln
