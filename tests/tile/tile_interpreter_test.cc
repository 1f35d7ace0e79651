//===- tile_interpreter_test.cc - The tile IR interpreter, and lowered kernels against the reference ---===//
//
// Hand-written kernels in the text form with known results (ragged edges,
// broadcasting, extra leading dimensions, transposes, `add`, dtype
// conversion, im2col with padding/stride/dilation/groups and a fill, MMA,
// every ew op, reductions, the causal mask, group loops) and malformed kernels refused with
// an error; then small graphs (MatMul, Gemm, Conv, fused groups from the
// cuda pipeline, elementwise chains, Softmax, LayerNormalization,
// reductions) lowered for the cuda and npusim figures, f32 and f16 matrix
// inputs, run on the interpreter and compared with the reference executor.
//
//===----------------------------------------------------------------------===//
#include "target/builtin_targets.h"
#include "target/backend/tile_interpreter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "graph/ir/parser.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/pass_manager.h"
#include "tests/tile/tile_check.h"

namespace kiln::target::tile {
namespace {

using ::testing::HasSubstr;

Tensor F32(std::vector<float> v, Dims dims) { return Tensor::FromVector<float>(v, std::move(dims)); }

// Parses `text` and runs it with `args` in argument order.
absl::Status RunText(absl::string_view text, std::vector<Tensor*> args) {
  auto k = Parse(text);
  if (!k.ok()) return k.status();
  return RunTileKernel(*k, args);
}

TEST(TileInterpreter, RaggedEdgesReadZeroAndDropWrites) {
  constexpr char kText[] = R"(kernel @ragged {
  arg %x : f32[5,7] in
  arg %y : f32[5,7] out
  arg %s : f32[5,2] out
  grid %r = 2, %c = 2 {
    buffer %t : f32[4,4] vector
    buffer %u : f32[4,1] vector
    copy %x[%r*4, %c*4] -> %t
    reduce sum %u <- %t axis 1
    ew add %t <- %t, 1
    copy %t -> %y[%r*4, %c*4]
    copy %u -> %s[%r*4, %c]
  }
}
)";
  Tensor x(DType::kF32, {5, 7}), y(DType::kF32, {5, 7}), s(DType::kF32, {5, 2});
  for (int i = 0; i < 35; ++i) x.data<float>()[i] = static_cast<float>(i);
  ASSERT_TRUE(RunText(kText, {&x, &y, &s}).ok()) << RunText(kText, {&x, &y, &s});
  for (int i = 0; i < 35; ++i) EXPECT_EQ(y.data<float>()[i], i + 1.0f) << i;
  for (int r = 0; r < 5; ++r) {
    // Columns 0..3, then 4..6 (the eighth column of the tile is past the end: 0).
    EXPECT_EQ(s.data<float>()[r * 2], 4 * (7 * r) + 6.0f) << r;
    EXPECT_EQ(s.data<float>()[r * 2 + 1], 3 * (7 * r) + 15.0f) << r;
  }
}

TEST(TileInterpreter, BroadcastReadsAndOperands) {
  constexpr char kText[] = R"(kernel @bcast {
  arg %bias : f32[4] in
  arg %row : f32[1,4] in
  arg %col : f32[3,1] in
  arg %one : f32[1] in
  arg %y : f32[3,4] out
  grid %g = 1 {
    buffer %a : f32[3,4] vector
    buffer %b : f32[3,4] vector
    buffer %c : f32[3,4] vector
    buffer %d : f32[3,4] vector
    buffer %r : f32[1,4] vector
    buffer %k : f32[3,1] vector
    copy %bias -> %a
    copy %row -> %b
    copy %col -> %c
    copy %one -> %d
    copy %bias -> %r
    copy %col -> %k
    ew add %a <- %a, %b
    ew add %a <- %a, %c
    ew mul %a <- %a, %d
    ew add %a <- %a, %r
    ew sub %a <- %a, %k
    copy %a -> %y[0, 0]
  }
}
)";
  Tensor bias = F32({1, 2, 3, 4}, {4}), row = F32({10, 20, 30, 40}, {1, 4}), col = F32({100, 200, 300}, {3, 1}),
         one = F32({2}, {1}), y(DType::kF32, {3, 4});
  absl::Status st = RunText(kText, {&bias, &row, &col, &one, &y});
  ASSERT_TRUE(st.ok()) << st;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      const float b = j + 1.0f, r = 10.0f * (j + 1), c = 100.0f * (i + 1);
      EXPECT_EQ(y.data<float>()[i * 4 + j], (b + r + c) * 2 + b - c) << i << "," << j;
    }
  }
}

TEST(TileInterpreter, LeadingDimensionsAndTransposes) {
  constexpr char kText[] = R"(kernel @tr {
  arg %A : f32[2,3,4] in
  arg %Y : f32[2,4,3] out
  arg %Z : f32[2,3,4] out
  grid %b = 2 {
    buffer %t : f32[4,3] vector
    copy %A[%b, 0, 0] -> %t transpose
    copy %t -> %Y[%b, 0, 0]
    copy %t -> %Z[%b, 0, 0] transpose
  }
}
)";
  Tensor a(DType::kF32, {2, 3, 4}), y(DType::kF32, {2, 4, 3}), z(DType::kF32, {2, 3, 4});
  for (int i = 0; i < 24; ++i) a.data<float>()[i] = static_cast<float>(i);
  absl::Status st = RunText(kText, {&a, &y, &z});
  ASSERT_TRUE(st.ok()) << st;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) {
        EXPECT_EQ(y.data<float>()[b * 12 + j * 3 + i], a.data<float>()[b * 12 + i * 4 + j]);
        EXPECT_EQ(z.data<float>()[b * 12 + i * 4 + j], a.data<float>()[b * 12 + i * 4 + j]);
      }
}

TEST(TileInterpreter, AddAccumulatesIntoZeroedOutputs) {
  constexpr char kText[] = R"(kernel @acc {
  arg %x : f32[2,3] in
  arg %y : f32[2,3] out
  arg %z : f32[2,3] out
  grid %g = 1 {
    buffer %u : f32[2,3] vector
    fill %u, 0.5
    serial %i = 3 {
      buffer %t : f32[2,3] vector
      copy %x -> %t
      ew mul %t <- %t, 2
      copy %t -> %y[0, 0] add
      copy %t -> %u add
    }
    copy %u -> %z[0, 0]
  }
}
)";
  Tensor x = F32({1, 2, 3, 4, 5, 6}, {2, 3}), y = F32({100, 100, 100, 100, 100, 100}, {2, 3}), z(DType::kF32, {2, 3});
  absl::Status st = RunText(kText, {&x, &y, &z});
  ASSERT_TRUE(st.ok()) << st;
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(y.data<float>()[i], 6.0f * (i + 1)) << "an out argument written with add starts at 0";
    EXPECT_EQ(z.data<float>()[i], 0.5f + 6.0f * (i + 1));
  }
}

TEST(TileInterpreter, CopiesConvertDtypes) {
  constexpr char kText[] = R"(kernel @cvt {
  arg %x : f32[5] in
  arg %h : f32[5] out
  arg %b : f32[5] out
  arg %i : i32[5] out
  arg %q : bool[5] out
  grid %g = 1 {
    buffer %th : f16[5] vector
    buffer %tb : bf16[5] vector
    buffer %ti : i32[5] vector
    buffer %tf : f32[5] vector
    copy %x -> %th
    copy %x -> %tb
    copy %x -> %ti
    copy %th -> %h[0]
    copy %tb -> %b[0]
    copy %ti -> %i[0]
    ew cmp_gt %tf <- %th, 0.5
    copy %tf -> %q[0]
  }
}
)";
  const std::vector<float> v = {1.0001f, 70000.0f, -2.7f, 0.1f, 3.14159f};
  Tensor x = F32(v, {5}), h(DType::kF32, {5}), b(DType::kF32, {5}), i(DType::kI32, {5}), q(DType::kBool, {5});
  absl::Status st = RunText(kText, {&x, &h, &b, &i, &q});
  ASSERT_TRUE(st.ok()) << st;
  for (int e = 0; e < 5; ++e) {
    EXPECT_EQ(h.data<float>()[e], static_cast<float>(Half(v[e]))) << e;
    EXPECT_EQ(b.data<float>()[e], static_cast<float>(BFloat16(v[e]))) << e;
    EXPECT_EQ(i.data<int32_t>()[e], static_cast<int32_t>(v[e])) << e;  // truncation toward zero
    EXPECT_EQ(q.data<bool>()[e], static_cast<float>(Half(v[e])) > 0.5f) << e;
  }
  EXPECT_TRUE(std::isinf(h.data<float>()[1])) << "70000 overflows f16";
  EXPECT_EQ(h.data<float>()[0], 1.0f) << "1.0001 rounds to 1 in f16";
}

// X [2, 4, 5, 6] read as the im2col matrix of a 3x2 window, stride [2, 1],
// leading pads [1, 1], dilation [1, 2], 2 groups, fill -inf: the virtual
// tensor [2, 2, 12, 18] copied out in 8x8 tiles (ragged in both dims).
TEST(TileInterpreter, Im2colPaddingStrideDilationGroupsFill) {
  constexpr char kText[] = R"(kernel @im2col {
  arg %x : f32[2,4,5,6] in
  arg %y : f32[2,2,12,18] out
  grid %n = 2, %g = 2, %r = 2, %c = 3 {
    buffer %t : f32[8,8] vector
    copy %x[%n, %g, %r*8, %c*8] -> %t im2col kernel=[3,2] stride=[2,1] pad=[1,1] dilation=[1,2] out=[3,6] groups=2 fill=-inf
    copy %t -> %y[%n, %g, %r*8, %c*8]
  }
}
)";
  Tensor x = tile_check::Random(DType::kF32, {2, 4, 5, 6}, 7), y(DType::kF32, {2, 2, 12, 18});
  absl::Status st = RunText(kText, {&x, &y});
  ASSERT_TRUE(st.ok()) << st;
  auto X = [&](int n, int c, int h, int w) { return x.data<float>()[((n * 4 + c) * 5 + h) * 6 + w]; };
  auto Y = [&](int n, int g, int row, int col) { return y.data<float>()[((n * 2 + g) * 12 + row) * 18 + col]; };
  int padded = 0;
  for (int n = 0; n < 2; ++n)
    for (int g = 0; g < 2; ++g)
      for (int c = 0; c < 2; ++c)
        for (int r = 0; r < 3; ++r)
          for (int s = 0; s < 2; ++s)
            for (int oh = 0; oh < 3; ++oh)
              for (int ow = 0; ow < 6; ++ow) {
                const int h = oh * 2 - 1 + r, w = ow * 1 - 1 + s * 2;
                const bool inside = h >= 0 && h < 5 && w >= 0 && w < 6;
                const float want = inside ? X(n, g * 2 + c, h, w) : -INFINITY;
                padded += !inside;
                ASSERT_EQ(Y(n, g, (c * 3 + r) * 2 + s, oh * 6 + ow), want)
                    << "n " << n << " g " << g << " c " << c << " r " << r << " s " << s << " oh " << oh << " ow "
                    << ow;
              }
  EXPECT_GT(padded, 0);
  // By hand: row (c=1, r=2, s=1) = 11 of group 1, column (oh=1, ow=2) = 8
  // reads X[n, 3, 1*2 - 1 + 2, 2 - 1 + 2] = X[n, 3, 3, 3].
  EXPECT_EQ(Y(1, 1, 11, 8), X(1, 3, 3, 3));
  EXPECT_EQ(Y(0, 0, 0, 0), -INFINITY);  // h = -1

  // A virtual extent of 1 does not broadcast: the rows past it are zero.
  constexpr char kOneRow[] = R"(kernel @one_row {
  arg %x : f32[1,2,2,2] in
  arg %y : f32[1,2,4,4] out
  grid %g = 2 {
    buffer %t : f32[4,4] vector
    copy %x[0, %g, 0, 0] -> %t im2col kernel=[1,1] stride=[1,1] pad=[0,0] dilation=[1,1] out=[2,2] groups=2
    copy %t -> %y[0, %g, 0, 0]
  }
}
)";
  Tensor x1 = F32({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 2, 2}), y1(DType::kF32, {1, 2, 4, 4});
  st = RunText(kOneRow, {&x1, &y1});
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(y1.span<float>(), ::testing::ElementsAre(1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                                       5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
}

TEST(TileInterpreter, MmaThroughStageAndOperandScopes) {
  constexpr char kText[] = R"(kernel @mm {
  arg %A : f16[2,3] in
  arg %B : f16[3,2] in
  arg %C : f32[2,2] out
  grid %g = 1 {
    buffer %As : f16[2,3] stage
    buffer %Bs : f16[3,2] stage
    buffer %Aa : f16[2,3] operand_a
    buffer %Bb : f16[3,2] operand_b
    buffer %acc : f32[2,2] accumulator
    copy %A[0, 0] -> %As
    copy %B[0, 0] -> %Bs
    sync global -> stage
    copy %As -> %Aa
    copy %Bs -> %Bb
    sync stage -> operand_a
    mma %acc = %Aa * %Bb
    mma %acc += %Aa * %Bb
    copy %acc -> %C[0, 0]
  }
}
)";
  Tensor a = CastTensor(F32({1, 2, 3, 4, 5, 6}, {2, 3}), DType::kF16);
  Tensor b = CastTensor(F32({7, 8, 9, 10, 11, 12}, {3, 2}), DType::kF16);
  Tensor c(DType::kF32, {2, 2});
  absl::Status st = RunText(kText, {&a, &b, &c});
  ASSERT_TRUE(st.ok()) << st;
  // [[58, 64], [139, 154]], twice.
  EXPECT_EQ(c.data<float>()[0], 116);
  EXPECT_EQ(c.data<float>()[1], 128);
  EXPECT_EQ(c.data<float>()[2], 278);
  EXPECT_EQ(c.data<float>()[3], 308);
}

// A GEMM with two groups: the stage tiles are shared (copied by every
// group, the same values), each group multiplies its own rows.
TEST(TileInterpreter, GroupLoopsShareStageTiles) {
  constexpr char kText[] = R"(kernel @groups {
  arg %A : f32[4,6] in
  arg %B : f32[6,3] in
  arg %Y : f32[4,3] out
  grid %m = 1 {
    buffer %As : f32[4,2] stage x2
    buffer %Bs : f32[2,3] stage x2
    group %wm = 2 {
      buffer %Aa : f32[2,2] operand_a
      buffer %Bb : f32[2,3] operand_b
      buffer %acc : f32[2,3] accumulator
      fill %acc, 0
      pipelined(2) %k = 3 {
        copy %A[0, %k*2] -> %As
        copy %B[%k*2, 0] -> %Bs
        sync global -> stage
        copy %As[%wm*2, 0] -> %Aa
        copy %Bs -> %Bb
        mma %acc += %Aa * %Bb
      }
      copy %acc -> %Y[%wm*2, 0]
    }
  }
}
)";
  Tensor a = tile_check::Random(DType::kF32, {4, 6}, 1), b = tile_check::Random(DType::kF32, {6, 3}, 2);
  Tensor y(DType::kF32, {4, 3});
  absl::Status st = RunText(kText, {&a, &b, &y});
  ASSERT_TRUE(st.ok()) << st;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) {
      double want = 0;
      for (int k = 0; k < 6; ++k) want += double{a.data<float>()[i * 6 + k]} * b.data<float>()[k * 3 + j];
      EXPECT_NEAR(y.data<float>()[i * 3 + j], want, 1e-5);
    }
}

// Every ew op on six values against the C library, operands as buffers and
// as scalars.
TEST(TileInterpreter, EveryEwOp) {
  const std::vector<float> a = {-2, -0.5f, 0, 0.5f, 1.5f, 3}, b = {1, 2, -1, 0.5f, 1.5f, -3},
                           c = {1, 0, 0, 1, 2, 0};
  struct Case {
    EwOp op;
    std::function<double(double, double, double)> f;
  };
  const std::vector<Case> cases = {
      {EwOp::kCopy, [](double x, double, double) { return x; }},
      {EwOp::kCast, [](double x, double, double) { return x; }},
      {EwOp::kAdd, [](double x, double y, double) { return x + y; }},
      {EwOp::kSub, [](double x, double y, double) { return x - y; }},
      {EwOp::kMul, [](double x, double y, double) { return x * y; }},
      {EwOp::kDiv, [](double x, double y, double) { return x / y; }},
      {EwOp::kMax, [](double x, double y, double) { return std::max(x, y); }},
      {EwOp::kMin, [](double x, double y, double) { return std::min(x, y); }},
      {EwOp::kPow, [](double x, double y, double) { return std::pow(x, y); }},
      {EwOp::kNeg, [](double x, double, double) { return -x; }},
      {EwOp::kAbs, [](double x, double, double) { return std::fabs(x); }},
      {EwOp::kRelu, [](double x, double, double) { return x > 0 ? x : 0; }},
      {EwOp::kExp, [](double x, double, double) { return std::exp(x); }},
      {EwOp::kLog, [](double x, double, double) { return std::log(x); }},
      {EwOp::kSqrt, [](double x, double, double) { return std::sqrt(x); }},
      {EwOp::kRsqrt, [](double x, double, double) { return 1 / std::sqrt(x); }},
      {EwOp::kRecip, [](double x, double, double) { return 1 / x; }},
      {EwOp::kTanh, [](double x, double, double) { return std::tanh(x); }},
      {EwOp::kSigmoid, [](double x, double, double) { return 1 / (1 + std::exp(-x)); }},
      {EwOp::kErf, [](double x, double, double) { return std::erf(x); }},
      {EwOp::kGelu, [](double x, double, double) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); }},
      {EwOp::kGeluTanh,
       [](double x, double, double) {
         const double pi = std::acos(-1.0);
         return x / 2 * (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * std::pow(x, 3))));
       }},
      {EwOp::kSelect, [](double x, double y, double z) { return x != 0 ? y : z; }},
      {EwOp::kCmpLt, [](double x, double y, double) { return x < y; }},
      {EwOp::kCmpLe, [](double x, double y, double) { return x <= y; }},
      {EwOp::kCmpGt, [](double x, double y, double) { return x > y; }},
      {EwOp::kCmpGe, [](double x, double y, double) { return x >= y; }},
      {EwOp::kCmpEq, [](double x, double y, double) { return x == y; }},
  };
  ASSERT_EQ(cases.size(), 28u) << "every EwOp";
  for (const Case& t : cases) {
    const int arity = EwOpArity(t.op);
    // select reads its condition from %c; the others read a, b.
    const std::string operands = t.op == EwOp::kSelect ? "%tc, %ta, %tb" : arity == 2 ? "%ta, %tb" : "%ta";
    for (bool scalar : {false, true}) {
      if (scalar && arity != 2) continue;
      const std::string text = absl::StrCat(R"(kernel @ew {
  arg %a : f32[6] in
  arg %b : f32[6] in
  arg %c : f32[6] in
  arg %y : f32[6] out
  grid %g = 1 {
    buffer %ta : f32[6] vector
    buffer %tb : f32[6] vector
    buffer %tc : f32[6] vector
    buffer %ty : f32[6] vector
    copy %a -> %ta
    copy %b -> %tb
    copy %c -> %tc
    ew )", EwOpName(t.op), " %ty <- ", scalar ? "%ta, 1.5" : operands, R"(
    copy %ty -> %y[0]
  }
}
)");
      Tensor ta = F32(a, {6}), tb = F32(b, {6}), tc = F32(c, {6}), y(DType::kF32, {6});
      absl::Status st = RunText(text, {&ta, &tb, &tc, &y});
      ASSERT_TRUE(st.ok()) << st << "\n" << text;
      for (int e = 0; e < 6; ++e) {
        const double want = static_cast<float>(
            t.op == EwOp::kSelect ? t.f(c[e], a[e], b[e]) : t.f(a[e], scalar ? 1.5 : b[e], 0));
        const double got = y.data<float>()[e];
        if (std::isnan(want) || std::isinf(want)) {
          EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want) << EwOpName(t.op) << " element " << e;
        } else {
          EXPECT_NEAR(got, want, 1e-6 * (1 + std::fabs(want))) << EwOpName(t.op) << " element " << e;
        }
      }
    }
  }
  // Known values: gelu(1) (the erf form) and sigmoid(0).
  Tensor one = F32({1, 0, 0, 0, 0, 0}, {6}), y(DType::kF32, {6});
  constexpr char kGelu[] = R"(kernel @g {
  arg %a : f32[6] in
  arg %y : f32[6] out
  grid %g = 1 {
    buffer %t : f32[6] vector
    copy %a -> %t
    ew gelu %t <- %t
    copy %t -> %y[0]
  }
}
)";
  ASSERT_TRUE(RunText(kGelu, {&one, &y}).ok());
  EXPECT_NEAR(y.data<float>()[0], 0.8413447460685429, 1e-7);
  // ... and its tanh form, gelu_tanh(1).
  std::string tanh_form = kGelu;
  tanh_form.replace(tanh_form.find("ew gelu"), 7, "ew gelu_tanh");
  ASSERT_TRUE(RunText(tanh_form, {&one, &y}).ok());
  EXPECT_NEAR(y.data<float>()[0], 0.8411919906082768, 1e-7);
  // NaN propagates through max and min, as in the reference kernels.
  Tensor nan = F32({NAN, 1, 2, 3, 4, 5}, {6});
  constexpr char kMax[] = R"(kernel @m {
  arg %a : f32[6] in
  arg %y : f32[6] out
  grid %g = 1 {
    buffer %t : f32[6] vector
    copy %a -> %t
    ew max %t <- %t, 0
    copy %t -> %y[0]
  }
}
)";
  ASSERT_TRUE(RunText(kMax, {&nan, &y}).ok());
  EXPECT_TRUE(std::isnan(y.data<float>()[0]));
}

TEST(TileInterpreter, ReductionsKeepTheAxis) {
  constexpr char kText[] = R"(kernel @red {
  arg %x : f32[2,3] in
  arg %s : f32[1,3] out
  arg %mx : f32[2,1] out
  arg %mn : f32[2,1] out
  arg %p : f32[2,1] out
  grid %g = 1 {
    buffer %t : f32[2,3] vector
    buffer %c : f32[1,3] vector
    buffer %r : f32[2,1] vector
    copy %x -> %t
    reduce sum %c <- %t axis 0
    copy %c -> %s[0, 0]
    reduce max %r <- %t axis 1
    copy %r -> %mx[0, 0]
    reduce min %r <- %t axis 1
    copy %r -> %mn[0, 0]
    reduce prod %r <- %t axis 1
    copy %r -> %p[0, 0]
  }
}
)";
  Tensor x = F32({1, -2, 3, 4, 5, -6}, {2, 3}), s(DType::kF32, {1, 3}), mx(DType::kF32, {2, 1}),
         mn(DType::kF32, {2, 1}), p(DType::kF32, {2, 1});
  absl::Status st = RunText(kText, {&x, &s, &mx, &mn, &p});
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(s.span<float>(), ::testing::ElementsAre(5, 3, -3));
  EXPECT_THAT(mx.span<float>(), ::testing::ElementsAre(3, 5));
  EXPECT_THAT(mn.span<float>(), ::testing::ElementsAre(-2, -6));
  EXPECT_THAT(p.span<float>(), ::testing::ElementsAre(-6, -120));
}

// `causal` masks the scores whose key comes after their row, at the
// tile's place in the whole score matrix.
TEST(TileInterpreter, CausalMasksKeysPastTheRow) {
  constexpr char kText[] = R"(kernel @causal {
  arg %y : f32[4,4] out
  grid %i = 2, %j = 2 {
    buffer %t : f32[2,2] vector
    fill %t, 1
    causal %t, %i*2, %j*2
    copy %t -> %y[%i*2, %j*2]
  }
}
)";
  Tensor y(DType::kF32, {4, 4});
  absl::Status st = RunText(kText, {&y});
  ASSERT_TRUE(st.ok()) << st;
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_THAT(y.span<float>(), ::testing::ElementsAre(1, -inf, -inf, -inf, 1, 1, -inf, -inf, 1, 1, 1, -inf, 1, 1, 1, 1));
}

TEST(TileInterpreter, BuffersAreNaNUntilWritten) {
  constexpr char kText[] = R"(kernel @unwritten {
  arg %y : f32[2] out
  grid %g = 1 {
    buffer %t : f32[2] vector
    copy %t -> %y[0]
  }
}
)";
  Tensor y(DType::kF32, {2});
  ASSERT_TRUE(RunText(kText, {&y}).ok());
  EXPECT_TRUE(std::isnan(y.data<float>()[0]));
}

// Malformed kernels and bad arguments are errors naming the statement, never crashes.
TEST(TileInterpreter, MalformedKernelsAreErrors) {
  auto kernel = [](absl::string_view body) {
    return absl::StrCat(R"(kernel @bad {
  arg %x : f32[5,7] in
  arg %y : f32[5,7] out
  grid %r = 2 {
    buffer %t : f32[4,4] vector
    buffer %u : f32[4,4] vector
    buffer %w : f32[3,1] vector
    buffer %v : f32[4] vector
)", body, "\n  }\n}\n");
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"copy %nope -> %t", "%nope is no argument or buffer in scope"},
      {"copy %x[%q, 0] -> %t", "%q is no enclosing loop's variable"},
      {"copy %t[0] -> %u", "%t has 2 dimensions, the reference 1"},
      {"copy %t[1, 0] -> %u", "dimension 0 of %t spans 1 .. 4, the buffer has 4"},
      {"copy %x[%r*5, 0] -> %t", "dimension 0 of %x starts at 5, the tensor has 5"},
      {"copy %x[0, 0, 0] -> %t", "%x has 2 dimensions, the reference 3"},
      {"copy %t -> %x[0, 0]", "copies write only out and workspace arguments"},
      {"copy %v -> %t", "local copies keep the rank"},
      {"ew add %t <- %t, %w", "%w does not broadcast to %t"},
      {"ew add %x <- %t, 1", "only copies address those"},
      {"ew add %t[1, 0] <- %t, 1", "%t is not referenced whole"},
      {"mma %t += %u * %w", "mma shapes disagree"},
      {"reduce sum %w <- %t axis 1", "the destination should be [4,1]"},
      {"reduce sum %w <- %t axis 2", "axis 2 is no dimension of %t"},
      {"buffer %t : f32[2] vector", "%t is declared twice"},
      {"buffer %h : f32[100000,100000] vector", "the buffer is too large"},
      {"serial %r = 2 {\n    }", "%r is declared twice"},
      {"copy %t -> %y[0, 0] transpose\n    copy %x[0] -> %t im2col kernel=[1,1] stride=[1,1] pad=[0,0] "
       "dilation=[1,1] out=[1,1]",
       "im2col reads a 4-D tensor"},
  };
  for (const auto& [body, want] : cases) {
    Tensor x(DType::kF32, {5, 7}), y(DType::kF32, {5, 7});
    auto k = Parse(kernel(body));
    ASSERT_TRUE(k.ok()) << k.status() << "\n" << kernel(body);
    absl::Status st = RunTileKernel(*k, {&x, &y});
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_THAT(st.message(), HasSubstr(want)) << body;
    EXPECT_THAT(st.message(), HasSubstr("tile kernel @bad: '")) << body;
  }

  // Arguments that do not fit the declarations.
  auto k = Parse(kernel("copy %x[%r*4, 0] -> %t"));
  ASSERT_TRUE(k.ok());
  Tensor x(DType::kF32, {5, 7}), y(DType::kF32, {5, 7}), small(DType::kF32, {5, 6}), i(DType::kI32, {5, 7});
  EXPECT_THAT(RunTileKernel(*k, {&x}).message(), HasSubstr("2 arguments declared, 1 tensors given"));
  EXPECT_THAT(RunTileKernel(*k, {&x, &small}).message(), HasSubstr("%y is [5,7], its tensor has 30 elements"));
  EXPECT_THAT(RunTileKernel(*k, {&i, &y}).message(), HasSubstr("%x is f32, its tensor i32"));
  EXPECT_THAT(RunTileKernel(*k, {&x, nullptr}).message(), HasSubstr("no tensor for %y"));
  Tensor view = x.Reshaped({35});
  EXPECT_TRUE(RunTileKernel(*k, {&view, &y}).ok()) << "a view of the same elements";

  // Statements built in code with the wrong operands.
  TileKernel bad;
  bad.name = "built";
  bad.args = {TileArg{"y", DType::kF32, {2}, TileArg::Role::kOut}};
  bad.body.push_back(MakeBuffer("t", DType::kF32, {2}, Scope::kVector));
  bad.body.push_back(MakeEw(EwOp::kAdd, Whole("t", 1), {Operand{Whole("t", 1)}}));
  Tensor y2(DType::kF32, {2});
  EXPECT_THAT(RunTileKernel(bad, {&y2}).message(), HasSubstr("add takes 2 operands, given 1"));
  bad.body.pop_back();
  auto copy = std::make_unique<Stmt>(Stmt::Kind::kCopy);
  copy->dst = Whole("y", 1);
  bad.body.push_back(std::move(copy));
  EXPECT_THAT(RunTileKernel(bad, {&y2}).message(), HasSubstr("a copy reads one tile"));
  bad.body.pop_back();
  bad.body.push_back(MakeLoop(Stmt::LoopKind::kGrid, {}));
  EXPECT_THAT(RunTileKernel(bad, {&y2}).message(), HasSubstr("a loop without variables"));
}

TEST(TileInterpreter, SharedAccumulationInAGroupLoopIsRefused) {
  constexpr char kText[] = R"(kernel @shared {
  arg %y : f32[2] out
  grid %g = 1 {
    buffer %t : f32[2] vector
    fill %t, 1
    group %w = 2 {
      copy %t -> %y[0] add
    }
  }
}
)";
  Tensor y(DType::kF32, {2});
  absl::Status st = RunText(kText, {&y});
  EXPECT_THAT(st.message(), HasSubstr("the groups share %y"));
}

//===----------------------------------------------------------------------===//
// Lowered kernels against the reference executor
//===----------------------------------------------------------------------===//

using tile_check::Config;

const std::vector<Config>& Configs() {
  static const auto* configs = [] {
    const TileCostFigures cuda = tile_check::FiguresOfTarget("cuda"), npu = tile_check::FiguresOfTarget("npusim");
    return new std::vector<Config>{{"cuda f32", cuda, DType::kF32, 1e-4},
                                   {"cuda f16", cuda, DType::kF16, 1e-2},
                                   {"npusim f32", npu, DType::kF32, 1e-4},
                                   {"npusim f16", npu, DType::kF16, 1e-2}};
  }();
  return *configs;
}

// Lowering bugs the interpreter shows, by the output the node computes:
// their kernels must still disagree with the reference (remove an entry
// when its bug is fixed).
const std::map<std::string, std::string>& KnownBugs() {
  static const auto* known = new std::map<std::string, std::string>{
  };
  return *known;
}

// Parses `kir` (shapes inferred), optionally runs the cuda target's
// pipeline, runs it on random inputs and checks every node's kernel under
// every configuration; `want` ops (a kiln.Fused group by its kind) must be
// among the kernels checked, once per configuration each.
void ExpectKernelsMatch(const std::string& kir, const std::vector<std::string>& want, bool optimize = false) {
  auto m = ParseModel(kir);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::Status inferred = InferShapes(*m->graph);
  ASSERT_TRUE(inferred.ok()) << inferred;
  if (optimize) {
    auto t = CreateBuiltinTarget("cuda");
    ASSERT_TRUE(t.ok());
    PassManager pm;
    ASSERT_TRUE(pm.AddPipeline((*t)->description().pipeline).ok());
    ASSERT_TRUE(pm.Run(*m).ok());
  }
  std::vector<Tensor> inputs;
  uint32_t seed = 11;
  for (const Value* v : m->graph->inputs()) {
    ASSERT_TRUE(v->type().shape().is_static()) << v->name();
    inputs.push_back(tile_check::Random(v->type().dtype(), v->type().shape().StaticDims(), seed++));
  }
  auto r = tile_check::CheckGraph(*m->graph, inputs, Configs());
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<std::string> failing;
  for (const auto& mm : r->mismatches) {
    failing.insert(mm.value);
    if (!KnownBugs().count(mm.value)) ADD_FAILURE() << mm.text;
  }
  for (const auto& [value, why] : KnownBugs()) {
    bool here = false;
    for (const Value* v : m->graph->outputs()) here = here || v->name() == value;
    if (here) {
      EXPECT_TRUE(failing.count(value)) << "'" << value << "' agrees now; remove it from KnownBugs: " << why;
    }
  }
  for (const std::string& op : want) {
    auto it = r->lowered_ops.find(op);
    EXPECT_TRUE(it != r->lowered_ops.end() && it->second % static_cast<int>(Configs().size()) == 0)
        << op << " was not lowered under every configuration (" << (it == r->lowered_ops.end() ? 0 : it->second)
        << " kernels): " << r->why_not[op];
  }
}

TEST(TileLoweringNumerics, MatMul) {
  ExpectKernelsMatch(R"(graph @main(%a: f32[37,29], %b: f32[29,53]) {
  %y = MatMul(%a, %b)
  return %y
})", {"MatMul"});
  // Batched, broadcasting, and long K (several k steps).
  ExpectKernelsMatch(R"(graph @main(%a: f32[2,3,20,17], %b: f32[2,3,17,9], %c: f32[3,1,16,300], %d: f32[4,300,8]) {
  %y = MatMul(%a, %b)
  %z = MatMul(%c, %d)
  return %y, %z
})", {"MatMul"});
  // Edge extents: one row, one column, K of 1 (an outer product).
  ExpectKernelsMatch(R"(graph @main(%a: f32[1,40], %b: f32[40,24], %c: f32[13,40], %d: f32[40,1], %e: f32[9,1], %f: f32[1,11]) {
  %y = MatMul(%a, %b)
  %z = MatMul(%c, %d)
  %outer = MatMul(%e, %f)
  return %y, %z, %outer
})", {"MatMul"});
}

TEST(TileLoweringNumerics, Gemm) {
  ExpectKernelsMatch(R"(graph @main(%a: f32[20,33], %b: f32[33,18], %cn: f32[18], %cm: f32[20,1], %cf: f32[20,18], %cs: f32[1]) {
  %y0 = Gemm(%a, %b)
  %y1 = Gemm(%a, %b, %cn) {alpha = 0.5, beta = 2.0}
  %y2 = Gemm(%a, %b, %cm) {beta = -1.0}
  %y3 = Gemm(%a, %b, %cf) {alpha = 1.5}
  %y4 = Gemm(%a, %b, %cs) {beta = 0.25}
  return %y0, %y1, %y2, %y3, %y4
})", {"Gemm"});
  ExpectKernelsMatch(R"(graph @main(%a: f32[33,20], %b: f32[18,33], %c: f32[20,18]) {
  %y0 = Gemm(%a, %b, %c) {transA = 1, transB = 1, alpha = 2.0, beta = 0.5}
  %y1 = Gemm(%a, %a) {transA = 1}
  %y2 = Gemm(%b, %b) {transB = 1}
  return %y0, %y1, %y2
})", {"Gemm"});
}

TEST(TileLoweringNumerics, Conv) {
  ExpectKernelsMatch(R"(graph @main(%x: f32[2,8,9,7], %w1: f32[12,8,1,1], %w3: f32[6,8,3,3], %b: f32[6]) {
  %pointwise = Conv(%x, %w1)
  %pad1 = Conv(%x, %w3, %b) {pads = [1, 1, 1, 1]}
  %stride2 = Conv(%x, %w3) {strides = [2, 2], pads = [1, 1, 1, 1]}
  %dilated = Conv(%x, %w3, %b) {dilations = [2, 2], pads = [2, 2, 2, 2]}
  %asym = Conv(%x, %w3) {pads = [0, 1, 2, 1]}
  %same = Conv(%x, %w3) {auto_pad = "SAME_UPPER", strides = [2, 2]}
  return %pointwise, %pad1, %stride2, %dilated, %asym, %same
})", {"Conv"});
  ExpectKernelsMatch(R"(graph @main(%x: f32[1,8,6,6], %wg: f32[6,4,3,3], %wd: f32[8,1,3,3], %bd: f32[8]) {
  %groups = Conv(%x, %wg) {group = 2, pads = [1, 1, 1, 1]}
  %depthwise = Conv(%x, %wd, %bd) {group = 8, pads = [1, 1, 1, 1]}
  %strided_depthwise = Conv(%x, %wd) {group = 8, strides = [2, 2]}
  return %groups, %depthwise, %strided_depthwise
})", {"Conv"});
  // Depthwise 1x1 (K of 1): plain and strided.
  ExpectKernelsMatch(R"(graph @main(%x: f32[1,8,6,6], %w: f32[8,1,1,1]) {
  %dw1 = Conv(%x, %w) {group = 8}
  %dw1s = Conv(%x, %w) {group = 8, strides = [2, 2]}
  return %dw1, %dw1s
})", {"Conv"});
  // 1-D: pointwise, windowed with padding and stride.
  ExpectKernelsMatch(R"(graph @main(%x: f32[2,5,30], %w1: f32[7,5,1], %w3: f32[7,5,3], %b: f32[7]) {
  %p = Conv(%x, %w1, %b)
  %c = Conv(%x, %w3, %b) {pads = [1, 1], strides = [2]}
  return %p, %c
})", {"Conv"});
}

TEST(TileLoweringNumerics, FusedGroupsFromTheCudaPipeline) {
  // Conv + bias + Relu, MatMul + bias + Relu, a residual Add after a GEMM.
  ExpectKernelsMatch(R"(graph @main(%x: f32[1,8,10,10], %w: f32[16,8,3,3], %cb: f32[16], %a: f32[40,64], %m: f32[64,48], %mb: f32[48], %r: f32[40,48]) {
  %c = Conv(%x, %w) {pads = [1, 1, 1, 1]}
  %shape = const i64[3] dense [16, 1, 1]
  %cbr = Reshape(%cb, %shape)
  %cy = Add(%c, %cbr)
  %crelu = Relu(%cy)
  %mm = MatMul(%a, %m)
  %mba = Add(%mm, %mb)
  %mrelu = Relu(%mba)
  %res = Add(%mrelu, %r)
  return %crelu, %res
})", {"conv-epilogue", "matmul-epilogue"}, /*optimize=*/true);
}

TEST(TileLoweringNumerics, ElementwiseChains) {
  ExpectKernelsMatch(R"(graph @main(%x: f32[6,10,33], %g: f32[33], %c: f32[6,10,1]) {
  %t = Mul(%x, %g)
  %u = Add(%t, %c)
  %v = Tanh(%u)
  %w = Sigmoid(%v)
  %s = Sub(%w, %x)
  %e = Exp(%s)
  %d = Div(%e, %g)
  %m = Max(%d, %c)
  %l = Less(%m, %x)
  %wh = Where(%l, %m, %x)
  %lo = const f32[] dense [-0.5]
  %hi = const f32[] dense [0.5]
  %cl = Clip(%wh, %lo, %hi)
  %lr = LeakyRelu(%cl) {alpha = 0.2}
  return %lr, %l
})", {"Mul", "Where", "LeakyRelu"});
  // The same chain as one fused group (the cuda pipeline).
  ExpectKernelsMatch(R"(graph @main(%x: f32[6,10,33], %g: f32[33], %c: f32[6,10,1]) {
  %t = Mul(%x, %g)
  %u = Add(%t, %c)
  %v = Tanh(%u)
  %w = Sigmoid(%v)
  %e = Erf(%w)
  %a = Abs(%e)
  %q = Sqrt(%a)
  %r = Relu(%q)
  return %r
})", {"elementwise"}, /*optimize=*/true);
}

TEST(TileLoweringNumerics, HardSigmoidAndHardSwish) {
  // MobileNetV3's activations, alone and in a fused group; inputs span
  // both clamps (x from -1 to 1, scaled by 6).
  ExpectKernelsMatch(R"(graph @main(%x: f32[4,50]) {
  %six = const f32[] dense [6.0]
  %s = Mul(%x, %six)
  %h = HardSigmoid(%s) {alpha = 0.25, beta = 0.4}
  %w = HardSwish(%s)
  return %h, %w
})", {"Mul", "HardSigmoid", "HardSwish"});
  ExpectKernelsMatch(R"(graph @main(%x: f32[4,50]) {
  %six = const f32[] dense [6.0]
  %s = Mul(%x, %six)
  %h = HardSigmoid(%s)
  %m = Mul(%s, %h)
  return %m
})", {"elementwise"}, /*optimize=*/true);
}

TEST(TileLoweringNumerics, F16Tensors) {
  ExpectKernelsMatch(R"(graph @main(%a: f16[24,40], %b: f16[40,30], %c: f16[30], %x: f16[5,30]) {
  %mm = MatMul(%a, %b)
  %y = Add(%mm, %c)
  %s = Softmax(%y) {axis = -1}
  %e = Mul(%x, %c)
  %t = Tanh(%e)
  %ln = LayerNormalization(%t, %c, %c) {axis = -1}
  return %s, %ln
})", {"MatMul", "Softmax", "Mul", "LayerNormalization"});
}

TEST(TileLoweringNumerics, RowReductions) {
  ExpectKernelsMatch(R"(graph @main(%x: f32[3,7,50], %g: f32[50], %b: f32[50], %y: f32[4,6,2,10], %g2: f32[2,10]) {
  %sm = Softmax(%x) {axis = -1}
  %lsm = LogSoftmax(%x) {axis = 2}
  %ln = LayerNormalization(%x, %g, %b) {axis = -1, epsilon = 0.001}
  %ln2 = LayerNormalization(%y, %g2) {axis = 2}
  %last = const i64[1] dense [-1]
  %inner = const i64[2] dense [2, 3]
  %rs = ReduceSum(%x, %last)
  %rs0 = ReduceSum(%y, %inner) {keepdims = 0}
  %rm = ReduceMean(%x) {axes = [2], keepdims = 0}
  %rmax = ReduceMax(%y) {axes = [-1]}
  %rmin = ReduceMin(%x) {axes = [1, 2]}
  %rp = ReduceProd(%y) {axes = [3]}
  return %sm, %lsm, %ln, %ln2, %rs, %rs0, %rm, %rmax, %rmin, %rp
})", {"Softmax", "LogSoftmax", "LayerNormalization", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
      "ReduceProd"});
}

}  // namespace
}  // namespace kiln::target::tile
