// Tests of the misc family: Resize/Upsample, TopK, NonMaxSuppression,
// NonZero, Unique, quantization, StringNormalizer, TfIdfVectorizer, signal
// ops, GridSample and the training optimizers. Kernels, inference, upgraders
// and error cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "graph/exec/executor.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"

namespace kiln {
namespace {

Type F32(DimVector dims) { return Type::Tensor(DType::kF32, Shape(std::move(dims))); }
Tensor F32s(std::vector<float> v, Dims dims) { return Tensor::FromVector<float>(v, std::move(dims)); }
Tensor I64s(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())}); }

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

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

// One node whose inputs are graph inputs (runtime tensors) or constants.
struct Op {
  Graph g;
  Node* node = nullptr;
  std::vector<Tensor> feeds;
  // `inputs`: (tensor, constant?) pairs; a missing tensor is an omitted input.
  Op(absl::string_view op, std::vector<std::pair<std::optional<Tensor>, bool>> inputs, int outputs = 1,
     absl::string_view domain = "") {
    std::vector<Value*> ins;
    for (auto& [t, constant] : inputs) {
      if (!t) {
        ins.push_back(nullptr);
      } else if (constant) {
        ins.push_back(g.AddConstant(g.UniqueName("c"), *t));
      } else {
        ins.push_back(g.AddInput(g.UniqueName("in"), Type::Of(*t)));
        feeds.push_back(*t);
      }
    }
    node = g.AddNode(op, ins, outputs, domain);
    for (int i = 0; i < outputs; ++i) g.AddOutput(node->output(i));
  }
  Op& Attr(const std::string& name, Attribute a) {
    node->SetAttr(name, std::move(a));
    return *this;
  }
  absl::Status Infer() { return InferShapes(g); }
  std::string OutType(int i = 0) const { return node->output(i)->type().ToString(); }
  absl::StatusOr<std::vector<Tensor>> Run() {
    absl::Status s = InferShapes(g);
    if (!s.ok()) return s;
    Executor ex;
    return ex.Run(g, feeds);
  }
};

std::pair<std::optional<Tensor>, bool> In(Tensor t) { return {std::move(t), false}; }
std::pair<std::optional<Tensor>, bool> Const(Tensor t) { return {std::move(t), true}; }
std::pair<std::optional<Tensor>, bool> None() { return {std::nullopt, false}; }

//===--- Resize -----------------------------------------------------------===//

TEST(MiscOps, ResizeNearestUpsample) {
  Op op("Resize", {In(F32s({1, 2, 3, 4}, {1, 1, 2, 2})), None(), Const(F32s({1, 1, 2, 3}, {4}))});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.OutType(), "f32[1,1,4,6]");
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                                                 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}));
}

TEST(MiscOps, ResizeLinearHalfPixel) {
  Op op("Resize", {In(F32s({1, 2, 3, 4}, {1, 1, 2, 2})), None(), Const(F32s({1, 1, 2, 2}, {4}))});
  op.Attr("mode", Attribute::String("linear"));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
}

TEST(MiscOps, ResizeCubicKeepsConstants) {
  std::vector<float> v(16, 7.f);
  Op op("Resize", {In(F32s(v, {1, 1, 4, 4})), None(), None(), Const(I64s({1, 1, 3, 5}))});
  op.Attr("mode", Attribute::String("cubic")).Attr("exclude_outside", Attribute::Int(1));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dims(), (Dims{1, 1, 3, 5}));
  ExpectNear(Floats((*r)[0]), std::vector<float>(15, 7.f));
}

TEST(MiscOps, ResizeTfCropAndResizeExtrapolates) {
  Op op("Resize", {In(F32s({1, 2, 3, 4}, {1, 1, 2, 2})), Const(F32s({0, 0, 0, 0, 1, 1, 1, 2}, {8})), None(),
                   Const(I64s({1, 1, 2, 3}))});
  op.Attr("mode", Attribute::String("linear"))
      .Attr("coordinate_transformation_mode", Attribute::String("tf_crop_and_resize"))
      .Attr("extrapolation_value", Attribute::Float(-9));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  // Columns sample x = 0, 1, 2 of a width-2 input: the last is outside.
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{1, 2, -9, 3, 4, -9}));
}

TEST(MiscOps, ResizeIntegerInputs) {
  Tensor x = Tensor::FromVector<uint8_t>({0, 255}, {1, 2});
  Op op("Resize", {In(x), None(), Const(F32s({1, 2}, {2}))});
  op.Attr("mode", Attribute::String("linear")).Attr("coordinate_transformation_mode", Attribute::String("align_corners"));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dtype(), DType::kU8);
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{0, 85, 170, 255}));
}

TEST(MiscOps, ResizeInferenceKeepsSymbolicDims) {
  Graph g;
  Value* x = g.AddInput("x", F32({Dim::Symbol("n"), 3, 8, 8}));
  Value* s = g.AddConstant("s", F32s({1, 1, 0.5, 2}, {4}));
  Node* n = g.AddNode("Resize", {x, nullptr, s}, 1);
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(n->output(0)->type().ToString(), "f32[n,3,4,16]");
}

TEST(MiscOps, ResizeRejectsScalesAndSizesTogether) {
  Op op("Resize", {In(F32s({1, 2}, {1, 2})), None(), Const(F32s({1, 2}, {2})), Const(I64s({1, 4}))});
  auto r = op.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exactly one of 'scales' and 'sizes'"), std::string::npos) << r.status();
}

TEST(MiscOps, ResizeRejectsBadRank) {
  Op op("Resize", {In(F32s({1, 2}, {1, 2})), None(), Const(F32s({1, 1, 2}, {3}))});
  auto r = op.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rank"), std::string::npos) << r.status();
}

TEST(MiscOps, Resize10UpgradeIsAsymmetric) {
  Op op("Resize", {In(F32s({1, 2, 3, 4}, {1, 1, 2, 2})), Const(F32s({1, 1, 1, 2}, {4}))});
  op.Attr("mode", Attribute::String("linear"));
  const OpDef* def = OpRegistry::Global().Find("", "Resize");
  ASSERT_TRUE(def->upgrade(op.g, op.node, 10).ok());
  EXPECT_EQ(op.node->num_inputs(), 3);
  EXPECT_EQ(op.node->input(1), nullptr);
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectNear(Floats((*r)[0]), {1, 1.5, 2, 2, 3, 3.5, 4, 4});
}

TEST(MiscOps, Upsample7UpgradesToResize) {
  Graph g;
  Value* x = g.AddInput("x", F32({1, 1, 2, 2}));
  Node* n = g.AddNode("Upsample", {x}, {"y"});
  n->SetAttr("scales", Attribute::Floats({1, 1, 2, 2}));
  n->SetAttr("mode", Attribute::String("nearest"));
  const OpDef* def = OpRegistry::Global().Find("", "Upsample");
  ASSERT_TRUE(def->upgrade(g, n, 7).ok());
  ASSERT_EQ(g.num_nodes(), 1u);
  Node* resize = *g.nodes().begin();
  EXPECT_EQ(resize->op(), "Resize");
  EXPECT_EQ(resize->output(0)->name(), "y");
  g.AddOutput(resize->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  Executor ex;
  auto r = ex.Run(g, {F32s({1, 2, 3, 4}, {1, 1, 2, 2})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(MiscOps, UpsampleKernelWithoutUpgrade) {
  Op op("Upsample", {In(F32s({1, 2}, {1, 2})), Const(F32s({1, 3}, {2}))});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{1, 1, 1, 2, 2, 2}));
}

//===--- TopK -------------------------------------------------------------===//

TEST(MiscOps, TopKTiesPreferLowerIndex) {
  Op op("TopK", {In(F32s({3, 1, 3, 2, 5, 5, 0, 5}, {2, 4})), Const(I64s({2}))}, 2);
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.OutType(0), "f32[2,2]");
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{3, 3, 5, 5}));
  EXPECT_EQ(Ints((*r)[1]), (std::vector<int64_t>{0, 2, 0, 1}));
}

TEST(MiscOps, TopKSmallestAlongAxis0) {
  Op op("TopK", {In(F32s({3, 1, 2, 0, 2, 5}, {3, 2})), Const(I64s({2}))}, 2);
  op.Attr("axis", Attribute::Int(0)).Attr("largest", Attribute::Int(0));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{2, 0, 2, 1}));
  EXPECT_EQ(Ints((*r)[1]), (std::vector<int64_t>{1, 1, 2, 0}));
}

TEST(MiscOps, TopKNaNRanksHighest) {
  Op op("TopK", {In(F32s({1, NAN, 2}, {3})), Const(I64s({2}))}, 2);
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints((*r)[1]), (std::vector<int64_t>{1, 2}));
}

TEST(MiscOps, TopK1Upgrade) {
  Op op("TopK", {In(F32s({1, 4, 2}, {3}))}, 2);
  op.Attr("k", Attribute::Int(1));
  ASSERT_TRUE(OpRegistry::Global().Find("", "TopK")->upgrade(op.g, op.node, 1).ok());
  EXPECT_FALSE(op.node->has_attr("k"));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{4}));
}

TEST(MiscOps, TopKRejectsTooLargeK) {
  Op op("TopK", {In(F32s({1, 4, 2}, {3})), In(I64s({4}))}, 2);
  auto r = op.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("out of range"), std::string::npos) << r.status();
  Op op2("TopK", {In(F32s({1, 4, 2}, {3})), Const(I64s({4}))}, 2);
  EXPECT_FALSE(op2.Infer().ok());
}

//===--- NonMaxSuppression, NonZero, Unique -------------------------------===//

TEST(MiscOps, NonMaxSuppressionPerClass) {
  // Boxes 0 and 1 overlap heavily; box 2 is apart.
  Tensor boxes = F32s({0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 10, 1, 11}, {1, 3, 4});
  Tensor scores = F32s({0.9f, 0.8f, 0.7f, 0.1f, 0.2f, 0.3f}, {1, 2, 3});
  Op op("NonMaxSuppression", {In(boxes), In(scores), Const(I64s({3})), Const(F32s({0.5f}, {1})),
                              Const(F32s({0.15f}, {1}))});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.OutType(), "i64[?,3]");
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{0, 0, 0, 0, 0, 2, 0, 1, 2, 0, 1, 1}));
}

// Greedy NMS as the ONNX operator states it, every kept box tested
// against every candidate: what the kernel's grid of kept boxes must equal.
std::vector<int64_t> BruteForceNms(const std::vector<float>& b, const std::vector<float>& s, int64_t classes,
                                   int64_t n, int64_t max_out, double iou, bool center) {
  auto corners = [&](int64_t i) {
    const float* x = &b[4 * i];
    if (center) return std::array<double, 4>{x[1] - x[3] / 2.0, x[0] - x[2] / 2.0, x[1] + x[3] / 2.0, x[0] + x[2] / 2.0};
    return std::array<double, 4>{std::min<double>(x[0], x[2]), std::min<double>(x[1], x[3]),
                                 std::max<double>(x[0], x[2]), std::max<double>(x[1], x[3])};
  };
  auto suppresses = [&](const std::array<double, 4>& a, const std::array<double, 4>& c) {
    double inter = std::max(0.0, std::min(a[2], c[2]) - std::max(a[0], c[0])) *
                   std::max(0.0, std::min(a[3], c[3]) - std::max(a[1], c[1]));
    if (inter <= 0) return false;
    double aa = (a[2] - a[0]) * (a[3] - a[1]), ac = (c[2] - c[0]) * (c[3] - c[1]), u = aa + ac - inter;
    if (aa <= 0 || ac <= 0 || u <= 0) return false;
    return inter / u > iou;
  };
  std::vector<int64_t> out;
  for (int64_t c = 0; c < classes; ++c) {
    std::vector<int64_t> cand(n), kept;
    std::iota(cand.begin(), cand.end(), 0);
    std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) { return s[c * n + i] > s[c * n + j]; });
    for (int64_t i : cand) {
      if (static_cast<int64_t>(kept.size()) >= max_out) break;
      bool keep = true;
      for (int64_t k : kept) keep = keep && !suppresses(corners(k), corners(i));
      if (!keep) continue;
      kept.push_back(i);
      out.insert(out.end(), {0, c, i});
    }
  }
  return out;
}

// Many boxes, some per class offset far apart as torchvision's batched NMS
// does, some huge, empty, inverted or not finite, in both box encodings:
// the kernel keeps exactly the boxes the brute force keeps.
TEST(MiscOps, NonMaxSuppressionEqualsTheBruteForce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0, 1);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE(trial);
    const int64_t n = 50 + trial * 37, classes = 1 + trial % 3;
    const bool center = trial % 5 == 4;
    std::vector<float> b(4 * n), s(classes * n);
    for (int64_t i = 0; i < n; ++i) {
      const float offset = trial % 2 ? static_cast<float>(i % 7) * 1000.f : 0.f;  // groups apart
      float y = u(rng) * 100 + offset, x = u(rng) * 100 + offset, h = u(rng) * 20, w = u(rng) * 20;
      if (i % 53 == 0) h = w = 5000;                            // covers many cells
      if (i % 61 == 0) h = 0;                                   // empty
      if (i % 67 == 0) h = -h;                                  // inverted
      if (i % 71 == 0) y = std::numeric_limits<float>::infinity();
      if (i % 73 == 0) x = std::numeric_limits<float>::quiet_NaN();
      if (center) b[4 * i] = x, b[4 * i + 1] = y, b[4 * i + 2] = w, b[4 * i + 3] = h;
      else b[4 * i] = y, b[4 * i + 1] = x, b[4 * i + 2] = y + h, b[4 * i + 3] = x + w;
    }
    for (float& v : s) v = std::floor(u(rng) * 50) / 50;  // ties, which the stable order breaks
    for (int64_t i = 0; i < n; i += 53) s[i] = 1;  // a box over many cells kept first, suppressing
    const int64_t max_out = trial % 4 == 3 ? 5 : n;
    const float iou = trial % 3 == 0 ? 0.f : 0.5f;
    Op op("NonMaxSuppression", {In(F32s(b, {1, n, 4})), In(F32s(s, {1, classes, n})), Const(I64s({max_out})),
                                Const(F32s({iou}, {1}))});
    op.Attr("center_point_box", Attribute::Int(center ? 1 : 0));
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Ints((*r)[0]), BruteForceNms(b, s, classes, n, max_out, iou, center));
  }
}

TEST(MiscOps, NonZeroRowMajor) {
  Op op("NonZero", {In(F32s({1, 0, 0, 3, 0, 2}, {2, 3}))});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dims(), (Dims{2, 3}));
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{0, 1, 1, 0, 0, 2}));
}

TEST(MiscOps, UniqueUnsortedWithAxis) {
  Op op("Unique", {In(F32s({2, 2, 1, 1, 2, 2, 0, 0}, {4, 2}))}, 4);
  op.Attr("axis", Attribute::Int(0)).Attr("sorted", Attribute::Int(0));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{2, 2, 1, 1, 0, 0}));
  EXPECT_EQ(Ints((*r)[1]), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(Ints((*r)[2]), (std::vector<int64_t>{0, 1, 0, 2}));
  EXPECT_EQ(Ints((*r)[3]), (std::vector<int64_t>{2, 1, 1}));
}

TEST(MiscOps, UniqueSortedStrings) {
  Tensor x = Tensor::FromVector<std::string>({"b", "a", "b", "c"}, {4});
  Op op("Unique", {In(x)}, 4);
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].data<std::string>()[0], "a");
  EXPECT_EQ((*r)[0].numel(), 3);
  EXPECT_EQ(Ints((*r)[2]), (std::vector<int64_t>{1, 0, 1, 2}));
}

//===--- Quantization -----------------------------------------------------===//

TEST(MiscOps, QuantizeLinearPerAxisRoundsHalfToEven) {
  Op op("QuantizeLinear", {In(F32s({2.5f, 3, -1, 300}, {2, 2})), Const(F32s({1, 0.5f}, {2})),
                           Const(Tensor::FromVector<int8_t>({0, 10}, {2}))});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dtype(), DType::kI8);
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{2, 16, -1, 127}));
}

TEST(MiscOps, DequantizeLinearPerAxis) {
  Op op("DequantizeLinear", {In(Tensor::FromVector<uint8_t>({10, 20, 30, 40}, {2, 2})), Const(F32s({2, 0.5f}, {2})),
                             Const(Tensor::FromVector<uint8_t>({10, 0}, {2}))});
  op.Attr("axis", Attribute::Int(0));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{0, 20, 15, 20}));
}

TEST(MiscOps, QuantizeRejectsMismatchedScale) {
  Op op("QuantizeLinear", {In(F32s({1, 2, 3}, {3})), Const(F32s({1, 2}, {2}))});
  op.Attr("axis", Attribute::Int(0));
  auto r = op.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("scale has 2 values"), std::string::npos) << r.status();
}

TEST(MiscOps, DynamicQuantizeLinear) {
  Op op("DynamicQuantizeLinear", {In(F32s({0, 2, -3, -2.5f, 1.34f, 0.5f}, {6}))}, 3);
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ints((*r)[0]), (std::vector<int64_t>{153, 255, 0, 26, 221, 179}));
  EXPECT_NEAR((*r)[1].GetDouble(0), 0.0196078, 1e-6);
  EXPECT_EQ((*r)[2].GetInt(0), 153);
  Op zeros("DynamicQuantizeLinear", {In(F32s({0, 0}, {2}))}, 3);
  auto z = zeros.Run();
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(Ints((*z)[0]), (std::vector<int64_t>{0, 0}));
}

//===--- Strings ----------------------------------------------------------===//

TEST(MiscOps, StringNormalizerCaseInsensitiveUtf8) {
  Tensor x = Tensor::FromVector<std::string>({"\xC3\x89mile", "THE", "Caf\xC3\xA9"}, {1, 3});
  Op op("StringNormalizer", {In(x)});
  op.Attr("stopwords", Attribute::Strings({"the"})).Attr("case_change_action", Attribute::String("UPPER"));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dims(), (Dims{1, 2}));
  EXPECT_EQ((*r)[0].data<std::string>()[0], "\xC3\x89MILE");
  EXPECT_EQ((*r)[0].data<std::string>()[1], "CAF\xC3\x89");
}

TEST(MiscOps, TfIdfStringsTfIdfMode) {
  Tensor x = Tensor::FromVector<std::string>({"a", "b", "a", "b", "c"}, {5});
  Op op("TfIdfVectorizer", {In(x)});
  op.Attr("min_gram_length", Attribute::Int(1)).Attr("max_gram_length", Attribute::Int(2))
      .Attr("max_skip_count", Attribute::Int(0)).Attr("mode", Attribute::String("TFIDF"))
      .Attr("ngram_counts", Attribute::Ints({0, 2})).Attr("ngram_indexes", Attribute::Ints({2, 0, 1}))
      .Attr("pool_strings", Attribute::Strings({"a", "c", "a", "b"}))
      .Attr("weights", Attribute::Floats({0.5f, 3.f, 10.f}));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.OutType(), "f32[3]");
  // a: 2 x 0.5 at index 2; c: 1 x 3 at index 0; "a b": 2 x 10 at index 1.
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{3, 20, 1}));
}

TEST(MiscOps, TfIdfRejectsBadCounts) {
  Op op("TfIdfVectorizer", {In(I64s({1, 2}))});
  op.Attr("min_gram_length", Attribute::Int(1)).Attr("max_gram_length", Attribute::Int(2))
      .Attr("max_skip_count", Attribute::Int(0)).Attr("mode", Attribute::String("TF"))
      .Attr("ngram_counts", Attribute::Ints({0, 1})).Attr("ngram_indexes", Attribute::Ints({0, 1}))
      .Attr("pool_int64s", Attribute::Ints({1, 2}));
  absl::Status s = op.Infer();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("whole 2-grams"), std::string::npos) << s;
}

//===--- Signal -----------------------------------------------------------===//

TEST(MiscOps, DftOfNonPowerOfTwoAndPowerOfTwo) {
  Op three("DFT", {In(F32s({1, 2, 3}, {1, 3, 1}))});
  auto r = three.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(three.OutType(), "f32[1,3,2]");
  ExpectNear(Floats((*r)[0]), {6, 0, -1.5f, 0.8660254f, -1.5f, -0.8660254f});
  Op four("DFT", {In(F32s({1, 2, 3, 4}, {1, 4, 1}))});
  four.Attr("onesided", Attribute::Int(1));
  auto f = four.Run();
  ASSERT_TRUE(f.ok()) << f.status();
  ExpectNear(Floats((*f)[0]), {10, 0, -2, 2, -2, 0});
}

TEST(MiscOps, DftLongOddLengthMatchesDirectSum) {
  // 67 and 100 take the chirp-z path; compare with the defining sum.
  for (int64_t n : {67, 100}) {
    std::vector<float> re(n), parts;
    for (int64_t i = 0; i < n; ++i) re[i] = static_cast<float>((i * 37) % 11) - 5.f;
    Op op("DFT", {In(F32s(re, {1, n, 1}))});
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<float> got = Floats((*r)[0]);
    for (int64_t k = 0; k < n; ++k) {
      double sr = 0, si = 0;
      for (int64_t j = 0; j < n; ++j) {
        double ang = -2 * M_PI * static_cast<double>((j * k) % n) / static_cast<double>(n);
        sr += re[j] * std::cos(ang);
        si += re[j] * std::sin(ang);
      }
      EXPECT_NEAR(got[2 * k], sr, 1e-3) << "n " << n << " k " << k;
      EXPECT_NEAR(got[2 * k + 1], si, 1e-3) << "n " << n << " k " << k;
    }
  }
}

TEST(MiscOps, DftInverseRoundTripsWithPadding) {
  Op op("DFT", {In(F32s({1, 0, 2, 1, 3, -1}, {1, 3, 2})), Const(Tensor::Scalar<int64_t>(5))});
  op.Attr("inverse", Attribute::Int(1));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.OutType(), "f32[1,5,2]");
  Op back("DFT", {In((*r)[0])});
  auto b = back.Run();
  ASSERT_TRUE(b.ok()) << b.status();
  ExpectNear(Floats((*b)[0]), {1, 0, 2, 1, 3, -1, 0, 0, 0, 0});
}

TEST(MiscOps, StftFramesMatchDft) {
  std::vector<float> sig(10);
  for (int i = 0; i < 10; ++i) sig[i] = static_cast<float>(i * i % 7);
  Op op("STFT", {In(F32s(sig, {1, 10, 1})), Const(Tensor::Scalar<int64_t>(3)), None(), Const(Tensor::Scalar<int64_t>(4))});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.OutType(), "f32[1,3,3,2]");
  // Frame 1 is sig[3..7).
  Op dft("DFT", {In(F32s({sig[3], sig[4], sig[5], sig[6]}, {1, 4, 1}))});
  dft.Attr("onesided", Attribute::Int(1));
  auto d = dft.Run();
  ASSERT_TRUE(d.ok()) << d.status();
  std::vector<float> all = Floats((*r)[0]);
  ExpectNear(std::vector<float>(all.begin() + 6, all.begin() + 12), Floats((*d)[0]));
}

TEST(MiscOps, MelWeightMatrixShape) {
  Op op("MelWeightMatrix", {Const(Tensor::Scalar<int32_t>(8)), Const(Tensor::Scalar<int32_t>(16)),
                            Const(Tensor::Scalar<int32_t>(8192)), Const(Tensor::Scalar<float>(0)),
                            Const(Tensor::Scalar<float>(4096))});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.OutType(), "f32[9,8]");
  std::vector<float> w = Floats((*r)[0]);
  EXPECT_EQ(w[0], 1.f);
  EXPECT_EQ(w[1], 1.f);
}

//===--- GridSample -------------------------------------------------------===//

TEST(MiscOps, GridSampleNearestBorder) {
  Tensor x = F32s({0, 1, 2, 3}, {1, 1, 2, 2});
  // (x, y) pairs: the corners with align_corners, and one far outside.
  Tensor grid = F32s({-1, -1, 1, -1, 1, 1, 5, -5}, {1, 1, 4, 2});
  Op op("GridSample", {In(x), In(grid)});
  op.Attr("mode", Attribute::String("nearest")).Attr("padding_mode", Attribute::String("border"))
      .Attr("align_corners", Attribute::Int(1));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(op.OutType(), "f32[1,1,1,4]");
  EXPECT_EQ(Floats((*r)[0]), (std::vector<float>{0, 1, 3, 1}));
}

TEST(MiscOps, GridSampleBilinearZeros) {
  Tensor x = F32s({0, 1, 2, 3}, {1, 1, 2, 2});
  Tensor grid = F32s({0, 0, -1, -1}, {1, 1, 2, 2});
  Op op("GridSample", {In(x), In(grid)});
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  // The centre averages all four; the corner (-0.5, -0.5) sees a quarter of pixel 0.
  ExpectNear(Floats((*r)[0]), {1.5f, 0});
}

TEST(MiscOps, GridSampleFarAwayAndNaNReadPadding) {
  Tensor x = F32s({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor grid = F32s({1e30f, 0, NAN, 0, -1e30f, -1e30f}, {1, 1, 3, 2});
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    Op op("GridSample", {In(x), In(grid)});
    op.Attr("mode", Attribute::String(mode));
    auto r = op.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].numel(), 3);
  }
}

//===--- Guards -----------------------------------------------------------===//

TEST(MiscOps, OversizedOutputsAreErrors) {
  Op resize("Resize", {In(F32s({1, 2}, {1, 2})), None(), None(), In(I64s({1 << 20, 1 << 20}))});
  auto r = resize.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too large"), std::string::npos) << r.status();
  Op mel("MelWeightMatrix", {Const(Tensor::Scalar<int32_t>(4)), Const(Tensor::Scalar<int32_t>(16)),
                             Const(Tensor::Scalar<int32_t>(8)), Const(Tensor::Scalar<float>(0)),
                             Const(Tensor::Scalar<float>(3e38f))});
  EXPECT_FALSE(mel.Run().ok());
  Op dq("DynamicQuantizeLinear", {In(F32s({1, INFINITY}, {2}))}, 3);
  EXPECT_FALSE(dq.Run().ok());
}

//===--- Training ---------------------------------------------------------===//

TEST(MiscOps, MomentumNesterov) {
  Op op("Momentum", {In(Tensor::Scalar<float>(0.1f)), In(Tensor::Scalar<int64_t>(1)), In(F32s({1.2f}, {1})),
                     In(F32s({-0.94f}, {1})), In(F32s({1.7f}, {1}))}, 2, "ai.onnx.preview.training");
  op.Attr("norm_coefficient", Attribute::Float(0.01f)).Attr("alpha", Attribute::Float(0.95f))
      .Attr("beta", Attribute::Float(0.1f)).Attr("mode", Attribute::String("nesterov"));
  auto r = op.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  double g = 0.01 * 1.2 - 0.94;
  double v = 0.95 * 1.7 + 0.1 * g;
  ExpectNear(Floats((*r)[0]), {static_cast<float>(1.2 - 0.1 * (g + 0.95 * v))});
  ExpectNear(Floats((*r)[1]), {static_cast<float>(v)});
}

TEST(MiscOps, AdagradRejectsMismatchedState) {
  Op op("Adagrad", {In(Tensor::Scalar<float>(0.1f)), In(Tensor::Scalar<int64_t>(0)), In(F32s({1, 2}, {2})),
                    In(F32s({1, 2}, {2})), In(F32s({1}, {1}))}, 2, "ai.onnx.preview.training");
  auto r = op.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("belongs to"), std::string::npos) << r.status();
}

TEST(MiscOps, GradientHasNoKernel) {
  Graph g;
  Value* a = g.AddInput("a", F32({2}));
  Value* b = g.AddInput("b", F32({2}));
  Node* add = g.AddNode("Add", {a, b}, {"c"});
  Node* grad = g.AddNode("Gradient", {a, b}, 2, "ai.onnx.preview.training");
  grad->SetAttr("xs", Attribute::Strings({"a", "b"}));
  grad->SetAttr("y", Attribute::String("c"));
  g.AddOutput(add->output(0));
  g.AddOutput(grad->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(grad->output(0)->type().ToString(), "f32[2]");
  Executor ex;
  auto r = ex.Run(g, {F32s({1, 2}, {2}), F32s({3, 4}, {2})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no reference kernel"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace kiln
