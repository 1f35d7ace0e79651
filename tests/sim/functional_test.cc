//===- functional_test.cc - NPU programs against plain C++ references -----===//
//
// The model's values equal a reference computed here with the documented
// arithmetic (fp16/bf16 rounded to nearest even after each instruction, fp32
// accumulation in k order in the cube), bit for bit.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "graph/support/float16.h"
#include "gtest/gtest.h"
#include "tests/sim/sim_test_util.h"

namespace kiln::sim {
namespace {

using testing::Load;

float H(uint16_t bits) { return HalfBitsToFloat(bits); }
uint16_t ToH(float f) { return FloatToHalfBits(f); }

TEST(FunctionalTest, TiledGemmMatchesReferenceBitForBit) {
  auto l = Load(testing::ReadSource("examples/npu/gemm_double_buffer.kasm"));
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  auto A = l->Values<uint16_t>("A");
  auto B = l->Values<uint16_t>("B");
  auto C = l->Values<float>("C");
  const int M = 256, K = 512, N = 256;
  int mismatches = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float acc = 0;
      for (int k = 0; k < K; ++k) acc += H(A[i * K + k]) * H(B[k * N + j]);
      if (std::memcmp(&acc, &C[i * N + j], 4) != 0 && ++mismatches < 5)
        ADD_FAILURE() << "C[" << i << "," << j << "] = " << C[i * N + j] << ", reference " << acc;
    }
  EXPECT_EQ(mismatches, 0);
}

TEST(FunctionalTest, VectorKernelMatchesReference) {
  auto l = Load(testing::ReadSource("examples/npu/vector_sigmoid.kasm"));
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  auto a = l->Values<uint16_t>("a");
  auto b = l->Values<uint16_t>("b");
  auto y = l->Values<uint16_t>("y");
  for (size_t i = 0; i < y.size(); ++i) {
    float t = H(ToH(H(a[i]) + H(b[i])));
    t = H(ToH(1.0f / (1.0f + std::exp(-t))));
    uint16_t want = ToH(t * 2.0f);
    ASSERT_EQ(y[i], want) << "y[" << i << "]";
  }
}

// Casts, reductions, compare/select, broadcast, masks and strides on one tile.
TEST(FunctionalTest, VectorOpsCastsReductionsSelect) {
  auto l = Load(R"(.program t
.regs 2
.arg x f32[128] init=random(3)
.arg y f32[128] init=random(4)
.arg h f16[128]
.arg s f32[24]
.arg sel f32[128]
.arg b f32[64]
.arg i s32[64]
  copy_gm_ub UB[0], x[0], len=512
  copy_gm_ub UB[512], y[0], len=512
  set_flag MTE2, VECTOR, 0
  wait_flag MTE2, VECTOR, 0
  vconv.f16.f32 UB[1024], UB[0], repeat=2
  vcadd.f32 UB[1536], UB[0], repeat=2
  vcmax.f32 UB[1568], UB[0], repeat=2, mask=10
  vcmin.f32 UB[1600], UB[0], repeat=1, src0_rep_stride=0
  vcmp.f32 UB[2048], UB[0], UB[512], repeat=2, cmp=gt
  vsel.f32 UB[2560], UB[2048], UB[0], UB[512], repeat=2
  vbrcb.f32 UB[3072], UB[0]
  vmuls.f32 UB[4096], UB[0], 3.0, mask=16, dst_blk_stride=2
  vconv.s32.f32 UB[3328], UB[4096], round=floor
  set_flag VECTOR, MTE3, 0
  wait_flag VECTOR, MTE3, 0
  copy_ub_gm h[0], UB[1024], len=256
  copy_ub_gm s[0], UB[1536], len=96
  copy_ub_gm sel[0], UB[2560], len=512
  copy_ub_gm b[0], UB[3072], len=256
  copy_ub_gm i[0], UB[3328], len=256
)");
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  auto x = l->Values<float>("x");
  auto y = l->Values<float>("y");
  auto h = l->Values<uint16_t>("h");
  for (int e = 0; e < 128; ++e) ASSERT_EQ(h[e], ToH(x[e])) << e;
  auto s = l->Values<float>("s");
  for (int rep = 0; rep < 2; ++rep) {
    float sum = 0, mx = x[rep * 64];
    for (int e = 0; e < 64; ++e) sum += x[rep * 64 + e];
    for (int e = 0; e < 10; ++e) mx = std::max(mx, x[rep * 64 + e]);
    EXPECT_EQ(s[rep], sum);
    EXPECT_EQ(s[8 + rep], mx);
  }
  float mn = x[0];
  for (int e = 0; e < 64; ++e) mn = std::min(mn, x[e]);
  EXPECT_EQ(s[16], mn);
  auto sel = l->Values<float>("sel");
  for (int e = 0; e < 128; ++e) ASSERT_EQ(sel[e], x[e] > y[e] ? x[e] : y[e]) << e;
  auto b = l->Values<float>("b");
  for (int blk = 0; blk < 8; ++blk)
    for (int e = 0; e < 8; ++e) ASSERT_EQ(b[blk * 8 + e], x[blk]);
  // vmuls with mask 16 and dst block stride 2 wrote blocks 0 and 2 (elements 0-7 and 16-23).
  auto iv = l->Values<int32_t>("i");
  for (int e = 0; e < 8; ++e) {
    EXPECT_EQ(iv[e], static_cast<int32_t>(std::floor(x[e] * 3.0f)));
    EXPECT_EQ(iv[16 + e], static_cast<int32_t>(std::floor(x[8 + e] * 3.0f)));
  }
}

TEST(FunctionalTest, FixpEpilogueAddsBiasAppliesReluAndRounds) {
  auto l = Load(R"(.program t
.arg A f16[16,16] init=random(5)
.arg B f16[16,16] init=random(6)
.arg bias f32[16] init=random(7)
.arg C f16[16,16]
  nd2nz.f16 L1[0], A[0], rows=16, cols=16
  nd2nz.f16 L1[512], B[0], rows=16, cols=16
  copy_gm_ub UB[0], bias[0], len=64
  set_flag MTE2, MTE1, 0
  wait_flag MTE2, MTE1, 0
  load_l0a.f16 L0A[0], L1[0]
  load_l0b.f16 L0B[0], L1[512], transpose=1
  set_flag MTE1, CUBE, 0
  wait_flag MTE1, CUBE, 0
  mmad.f16 L0C[0], L0A[0], L0B[0], m=1, k=1, n=1, init=1
  set_flag CUBE, FIXP, 0
  wait_flag CUBE, FIXP, 0
  set_flag MTE2, FIXP, 0
  wait_flag MTE2, FIXP, 0
  fixp.f16.f32 C[0], L0C[0], UB[0], m=1, n=1, relu=1
)");
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  auto A = l->Values<uint16_t>("A");
  auto B = l->Values<uint16_t>("B");
  auto bias = l->Values<float>("bias");
  auto C = l->Values<uint16_t>("C");
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float acc = 0;
      for (int k = 0; k < 16; ++k) acc += H(A[i * 16 + k]) * H(B[k * 16 + j]);
      ASSERT_EQ(C[i * 16 + j], ToH(std::max(acc + bias[j], 0.0f))) << i << "," << j;
    }
}

// A 3x3 convolution, padding 1, through img2col: 16 channels in and out on a 6x6 image.
TEST(FunctionalTest, Img2ColConvolutionMatchesDirectConvolution) {
  auto l = Load(R"(.program conv
.arg x f16[6,6,16] init=random(8)
.arg w f16[144,16] init=random(9)
.arg y f32[48,16]
  copy_gm_l1 L1[0], x[0], len=1152
  nd2nz.f16 L1[2048], w[0], rows=144, cols=16
  set_flag MTE2, MTE1, 0
  wait_flag MTE2, MTE1, 0
  img2col.f16 L0A[0], L1[0], h=6, w=6, c1=1, kh=3, kw=3, pad_top=1, pad_bottom=1, pad_left=1, pad_right=1, m=3, k=9
  load_l0b.f16 L0B[0], L1[2048], cols=9, transpose=1
  set_flag MTE1, CUBE, 0
  wait_flag MTE1, CUBE, 0
  mmad.f16 L0C[0], L0A[0], L0B[0], m=3, k=9, n=1, init=1
  set_flag CUBE, FIXP, 0
  wait_flag CUBE, FIXP, 0
  fixp.f32.f32 y[0], L0C[0], m=3, n=1
)");
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  auto x = l->Values<uint16_t>("x");
  auto w = l->Values<uint16_t>("w");
  auto y = l->Values<float>("y");
  for (int p = 0; p < 48; ++p)
    for (int co = 0; co < 16; ++co) {
      float acc = 0;
      if (p < 36) {
        int oy = p / 6, ox = p % 6;
        for (int kh = 0; kh < 3; ++kh)
          for (int kw = 0; kw < 3; ++kw)
            for (int c = 0; c < 16; ++c) {
              int iy = oy - 1 + kh, ix = ox - 1 + kw;
              float xv = (iy >= 0 && iy < 6 && ix >= 0 && ix < 6) ? H(x[(iy * 6 + ix) * 16 + c]) : 0.0f;
              acc += xv * H(w[((kh * 3 + kw) * 16 + c) * 16 + co]);
            }
      }
      ASSERT_EQ(y[p * 16 + co], acc) << "pixel " << p << " channel " << co;
    }
}

// vtranspose turns 16 channel rows of 48 pixels (NCHW, one c1 group) into
// the [pixel][channel] blocks of C1HWC0 and back: three 16x16 matrices,
// source rows 3 blocks apart.
TEST(FunctionalTest, VtransposeConvertsChannelRowsToPixelBlocksAndBack) {
  auto l = Load(R"(.program t
.arg x f16[16,48] init=random(5)
.arg y f16[48,16]
.arg z bf16[16,48]
  copy_gm_ub UB[0], x[0], len=1536
  set_flag MTE2, VECTOR, 0
  wait_flag MTE2, VECTOR, 0
  vtranspose.f16 UB[2048], UB[0], repeat=3, src0_blk_stride=3, src0_rep_stride=1
  vtranspose.bf16 UB[4096], UB[2048], repeat=3, dst_blk_stride=3, dst_rep_stride=1
  set_flag VECTOR, MTE3, 0
  wait_flag VECTOR, MTE3, 0
  copy_ub_gm y[0], UB[2048], len=1536
  copy_ub_gm z[0], UB[4096], len=1536
)");
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  auto x = l->Values<uint16_t>("x");
  auto y = l->Values<uint16_t>("y");
  auto z = l->Values<uint16_t>("z");
  for (int c = 0; c < 16; ++c)
    for (int p = 0; p < 48; ++p) {
      ASSERT_EQ(y[p * 16 + c], x[c * 48 + p]) << "pixel " << p << " channel " << c;
      ASSERT_EQ(z[c * 48 + p], x[c * 48 + p]) << "pixel " << p << " channel " << c;
    }
}

// vtranspose.f32 turns 8 channel rows of 24 pixels into the [pixel][8
// channels] blocks of C1HWC0 for 4-byte elements and back: three 8x8
// matrices, source rows 3 blocks apart.
TEST(FunctionalTest, VtransposeF32ConvertsChannelRowsToPixelBlocksAndBack) {
  auto l = Load(R"(.program t
.arg x f32[8,24] init=random(5)
.arg y f32[24,8]
.arg z f32[8,24]
  copy_gm_ub UB[0], x[0], len=768
  set_flag MTE2, VECTOR, 0
  wait_flag MTE2, VECTOR, 0
  vtranspose.f32 UB[1024], UB[0], repeat=3, src0_blk_stride=3, src0_rep_stride=1
  vtranspose.f32 UB[2048], UB[1024], repeat=3, dst_blk_stride=3, dst_rep_stride=1
  set_flag VECTOR, MTE3, 0
  wait_flag VECTOR, MTE3, 0
  copy_ub_gm y[0], UB[1024], len=768
  copy_ub_gm z[0], UB[2048], len=768
)");
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  auto x = l->Values<uint32_t>("x");
  auto y = l->Values<uint32_t>("y");
  auto z = l->Values<uint32_t>("z");
  for (int c = 0; c < 8; ++c)
    for (int p = 0; p < 24; ++p) {
      ASSERT_EQ(y[p * 8 + c], x[c * 24 + p]) << "pixel " << p << " channel " << c;
      ASSERT_EQ(z[c * 24 + p], x[c * 24 + p]) << "pixel " << p << " channel " << c;
    }
}

// img2col of f32: C0 = 8 channels a block, so a k-fractal is one tap's 8
// channels. A 3x3 convolution, stride 2, padding 1, of 16 channels (two
// c1 planes) on a 5x5 image: 9 output pixels in one m-fractal, 18
// k-fractals, the weights in L0B by a 32-bit transposing load.
TEST(FunctionalTest, Img2ColF32ConvolutionMatchesDirectConvolution) {
  auto l = Load(R"(.program conv
.arg x f32[2,5,5,8] init=random(8)
.arg w f32[144,16] init=random(9)
.arg y f32[16,16]
  copy_gm_l1 L1[0], x[0], len=1600
  nd2nz.f32 L1[2048], w[0], rows=144, cols=16
  set_flag MTE2, MTE1, 0
  wait_flag MTE2, MTE1, 0
  img2col.f32 L0A[0], L1[0], h=5, w=5, c1=2, kh=3, kw=3, stride_h=2, stride_w=2, pad_top=1, pad_bottom=1, pad_left=1, pad_right=1, m=1, k=18
  load_l0b.f32 L0B[0], L1[2048], rows=9, cols=1, src_row_stride=2, transpose=1
  set_flag MTE1, CUBE, 0
  wait_flag MTE1, CUBE, 0
  mmad.f32 L0C[0], L0A[0], L0B[0], m=1, k=18, n=1, init=1
  set_flag CUBE, FIXP, 0
  wait_flag CUBE, FIXP, 0
  fixp.f32.f32 y[0], L0C[0], m=1, n=1
)");
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  auto x = l->Values<float>("x");
  auto w = l->Values<float>("w");
  auto y = l->Values<float>("y");
  for (int p = 0; p < 16; ++p)
    for (int co = 0; co < 16; ++co) {
      double acc = 0, mag = 0;
      if (p < 9) {
        int oy = p / 3, ox = p % 3;
        for (int c1 = 0; c1 < 2; ++c1)
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw)
              for (int c0 = 0; c0 < 8; ++c0) {
                int iy = oy * 2 - 1 + kh, ix = ox * 2 - 1 + kw;
                double xv = (iy >= 0 && iy < 5 && ix >= 0 && ix < 5) ? x[((c1 * 5 + iy) * 5 + ix) * 8 + c0] : 0.0;
                double t = xv * w[(((c1 * 3 + kh) * 3 + kw) * 8 + c0) * 16 + co];
                acc += t;
                mag += std::abs(t);
              }
      }
      ASSERT_NEAR(y[p * 16 + co], acc, 1e-6 * mag + 1e-12) << "pixel " << p << " channel " << co;
    }
}

// The scalar unit reads words of UB that MTE2 brought in (after a flag it
// awaits) and addresses DMA with them: a gather of table rows by indices
// read at run time, negative ones counting from the end.
TEST(FunctionalTest, LdReadsIndicesThatAddressDma) {
  auto l = Load(R"(.program t
.arg idx s32[8] init=random(2)
.arg table f32[8,8] init=random(3)
.arg y f32[8,8]
  copy_gm_ub UB[0], idx[0], len=32
  set_flag MTE2, SCALAR, 0
  wait_flag MTE2, SCALAR, 0
  mov r1, 0
loop:
  bge r1, 8, done
  mul r2, r1, 4
  ld.s32 r3, UB[r2]
  bge r3, 0, positive
  add r3, r3, 8
positive:
  mul r3, r3, 32
  mul r4, r1, 32
  copy_gm_ub UB[r4 + 1024], table[r3], len=32
  add r1, r1, 1
  jmp loop
done:
  set_flag MTE2, MTE3, 0
  wait_flag MTE2, MTE3, 0
  copy_ub_gm y[0], UB[1024], len=256
)");
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  auto idx = l->Values<int32_t>("idx");
  auto table = l->Values<float>("table");
  auto y = l->Values<float>("y");
  bool negative = false;
  for (int j = 0; j < 8; ++j) {
    negative |= idx[j] < 0;
    int row = (idx[j] + 8) % 8;
    for (int c = 0; c < 8; ++c) ASSERT_EQ(y[j * 8 + c], table[row * 8 + c]) << "index " << j << " = " << idx[j];
  }
  EXPECT_TRUE(negative);  // the seed exercises the wrap
}

// A word outside UB is a run-time error naming the instruction, not a crash.
TEST(FunctionalTest, LdOutsideUbFails) {
  auto l = Load(R"(.program t
  mov r1, 1048576
  ld.s32 r2, UB[r1]
)");
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ld.s32"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("not a word inside UB"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace kiln::sim

namespace kiln::sim {
namespace {

// The blocks of a launch exchange data through GM across `sync_all`: each
// writes its part of x (the others late, after a scalar loop), and block 0
// copies all of x out after the barrier. Without the barrier block 0 copies
// x before the others have written it.
std::string Exchange(bool barrier) {
  return absl::StrCat(R"(.program exchange
.block_dim 4
.arg src f32[32] init=random(3)
.arg x f32[32]
.arg y f32[32]
  block_idx r0
  mul r1, r0, 32
  beq r0, 0, copy
  mov r2, 0
late:
  add r2, r2, 1
  blt r2, 500, late
copy:
  copy_gm_ub UB[0], src[r1 + 0], len=32
  set_flag MTE2, MTE3, 0
  wait_flag MTE2, MTE3, 0
  copy_ub_gm x[r1 + 0], UB[0], len=32
)",
                      barrier ? "  sync_all\n" : "", R"(  bne r0, 0, done
  copy_gm_ub UB[64], x[0], len=128
  set_flag MTE2, MTE3, 0
  wait_flag MTE2, MTE3, 0
  copy_ub_gm y[0], UB[64], len=128
done:
)");
}

TEST(FunctionalTest, BlocksExchangeDataThroughGmAcrossSyncAll) {
  for (bool barrier : {true, false}) {
    SCOPED_TRACE(barrier ? "sync_all" : "no barrier");
    auto l = testing::Load(Exchange(barrier));
    ASSERT_TRUE(l);
    RunOptions o;
    o.functional = true;
    auto r = l->Run(o);
    ASSERT_TRUE(r.ok()) << r.status();
    const std::vector<float> src = l->Values<float>("src"), y = l->Values<float>("y");
    int same = 0;  // of the late blocks' parts
    for (size_t i = 8; i < src.size(); ++i) same += y[i] == src[i];
    EXPECT_EQ(same, barrier ? 24 : 0);
  }
}

}  // namespace
}  // namespace kiln::sim
