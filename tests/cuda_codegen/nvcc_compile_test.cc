//===- nvcc_compile_test.cc - Generated CUDA compiles for sm_80 and sm_90a -===//
//
// Every canonical form (GEMMs of each operand layout, dtype, batch, split-K
// and epilogue; elementwise kernels; row reductions) is emitted into one
// translation unit after the prelude and compiled with nvcc (warnings as
// errors, ptxas included) for sm_80 and sm_90a; the PTX of every GEMM uses
// cp.async, ldmatrix and mma.sync (sm_80) or wgmma (sm_90a variant).
//
//===----------------------------------------------------------------------===//
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "target/cuda/codegen/cuda_codegen.h"
#include "tests/cuda_codegen/kernels.h"
#include "tests/cuda_codegen/nvcc.h"

namespace kiln::target::cuda {
namespace {

using testing::GemmSpec;

std::vector<GemmSpec> Gemms() {
  std::vector<GemmSpec> v;
  {
    GemmSpec s;
    s.name = "gemm_f16_bias_relu";
    s.epilogue = {"bias_row", "relu"};
    v.push_back(s);
  }
  {
    GemmSpec s;
    s.name = "gemm_bf16_ragged_gelu";
    s.in = "bf16";
    s.out = "bf16";
    s.M = 300, s.N = 200, s.K = 72;
    s.bm = 64, s.bn = 128, s.gm = 32, s.gn = 64, s.tk = 16;
    s.epilogue = {"residual", "gelu"};
    v.push_back(s);
  }
  {
    GemmSpec s;
    s.name = "gemm_f16_trans_a";
    s.trans_a = true;
    s.M = 256, s.N = 256, s.K = 128;
    s.bk = 64;
    s.epilogue = {"bias_col", "sigmoid"};
    v.push_back(s);
  }
  {
    GemmSpec s;
    s.name = "gemm_f16_trans_b_batched";
    s.trans_b = true;
    s.batch = {2, 3};
    s.b_broadcasts_batch = true;
    s.M = 128, s.N = 96, s.K = 64;
    s.bm = 128, s.bn = 32, s.gm = 32, s.gn = 32, s.bk = 32;
    s.epilogue = {"scale", "tanh"};
    v.push_back(s);
  }
  {
    GemmSpec s;
    s.name = "gemm_tf32";
    s.in = "f32";
    s.out = "f32";
    s.M = 256, s.N = 128, s.K = 100;
    s.bm = 128, s.bn = 128, s.bk = 32, s.gm = 64, s.gn = 32;
    s.stages = 2;
    s.epilogue = {"relu"};
    v.push_back(s);
  }
  {
    GemmSpec s;
    s.name = "gemm_tf32_trans_b";
    s.in = "f32";
    s.out = "f32";
    s.trans_b = true;
    s.M = 128, s.N = 128, s.K = 64;
    s.bm = 128, s.bn = 128, s.bk = 32, s.gm = 64, s.gn = 64;
    s.stages = 2;
    v.push_back(s);
  }
  {
    GemmSpec s;
    s.name = "gemm_tf32_trans_a";
    s.in = "f32";
    s.out = "f32";
    s.trans_a = true;
    s.M = 64, s.N = 64, s.K = 64;
    s.bm = 64, s.bn = 64, s.bk = 16, s.gm = 32, s.gn = 32;
    s.stages = 1;
    v.push_back(s);
  }
  {
    GemmSpec s;
    s.name = "gemm_f16_split_k";
    s.out = "f32";
    s.M = 64, s.N = 64, s.K = 4096;
    s.bm = 64, s.bn = 64, s.gm = 32, s.gn = 32, s.bk = 64;
    s.splits = 4;
    v.push_back(s);
  }
  {
    GemmSpec s;
    s.name = "gemm_f16_odd";
    s.M = 100, s.N = 99, s.K = 100;  // N odd: element loads of B; K*2 = 200 bytes: 8-byte cp.async of A
    s.bm = 64, s.bn = 64, s.gm = 32, s.gn = 32, s.bk = 32;
    s.stages = 4;
    v.push_back(s);
  }
  return v;
}

std::vector<std::string> Vectors() {
  using testing::EwText;
  std::vector<std::string> v;
  v.push_back(EwText("ew_add_relu_f16", "f16", 512, 1024, 16, 1024, {"ew add %x <- %x, %bb", "ew relu %x <- %x"}));
  v.push_back(EwText("ew_ragged_f32", "f32", 100, 300, 8, 128,
                     {"ew mul %x <- %x, %cc", "ew sigmoid %x <- %x", "ew cmp_gt %m <- %x, 0.25",
                      "ew select %x <- %m, %x, %bb", "ew pow %x <- %x, 2"}));
  // Softmax over rows of 1000 (one warp per row).
  v.push_back(R"(kernel @softmax_f32 {
  arg %X : f32[64,1000] in
  arg %Y : f32[64,1000] out
  grid %r = 16 {
    buffer %x : f32[4,1000] vector
    buffer %mx : f32[4,1] vector
    buffer %s : f32[4,1] vector
    copy %X[%r*4, 0] -> %x
    reduce max %mx <- %x axis 1
    ew sub %x <- %x, %mx
    ew exp %x <- %x
    reduce sum %s <- %x axis 1
    ew div %x <- %x, %s
    copy %x -> %Y[%r*4, 0]
  }
}
)");
  // LayerNorm over rows of 4096 f16 (one block per row), gamma/beta rows.
  v.push_back(R"(kernel @layernorm_f16 {
  arg %X : f16[33,4096] in
  arg %g : f16[1,4096] in
  arg %b : f16[1,4096] in
  arg %Y : f16[33,4096] out
  grid %r = 33 {
    buffer %x : f32[1,4096] vector
    buffer %gg : f32[1,4096] vector
    buffer %bb : f32[1,4096] vector
    buffer %t : f32[1,4096] vector
    buffer %mu : f32[1,1] vector
    buffer %var : f32[1,1] vector
    copy %X[%r, 0] -> %x
    copy %g -> %gg
    copy %b -> %bb
    reduce sum %mu <- %x axis 1
    ew mul %mu <- %mu, 0.000244140625
    ew sub %x <- %x, %mu
    ew mul %t <- %x, %x
    reduce sum %var <- %t axis 1
    ew mul %var <- %var, 0.000244140625
    ew add %var <- %var, 1e-05
    ew rsqrt %var <- %var
    ew mul %x <- %x, %var
    ew mul %x <- %x, %gg
    ew add %x <- %x, %bb
    copy %x -> %Y[%r, 0]
  }
}
)");
  // ReduceMean over rows of 77 (no vector loads), keepdims output [rows, 1].
  v.push_back(R"(kernel @reduce_mean_odd {
  arg %X : bf16[10,77] in
  arg %Y : bf16[10,1] out
  grid %r = 5 {
    buffer %x : f32[2,77] vector
    buffer %s : f32[2,1] vector
    copy %X[%r*2, 0] -> %x
    reduce sum %s <- %x axis 1
    ew mul %s <- %s, 0.012987012987012988
    copy %s -> %Y[%r*2, 0]
  }
}
)");
  // A 3x3 MaxPool with padding (fill -inf), windows of 2 channels x 32 positions.
  v.push_back(R"(kernel @maxpool {
  arg %X : f16[2,6,9,9] in
  arg %Y : f16[2,6,1,25] out
  grid %b0 = 2, %c = 3, %n = 1 {
    buffer %win : f32[2,9,32] vector
    buffer %acc : f32[2,1,32] vector
    copy %X[%b0, %c*2, 0, %n*32] -> %win im2col kernel=[3,3] stride=[2,2] pad=[1,1] dilation=[1,1] out=[5,5] groups=6 fill=-inf
    reduce max %acc <- %win axis 1
    copy %acc -> %Y[%b0, %c*2, 0, %n*32]
  }
}
)");
  // A depthwise 3x3 convolution with its bias and a Relu6 clip.
  v.push_back(R"(kernel @depthwise {
  arg %X : f32[1,8,7,7] in
  arg %W : f32[8,9,1] in
  arg %B : f32[1,8,1,1] in
  arg %Y : f32[1,8,1,49] out
  grid %c = 4, %n = 1 {
    buffer %win : f32[2,9,64] vector
    buffer %wt : f32[2,9,1] vector
    buffer %acc : f32[2,1,64] vector
    buffer %e0 : f32[2,1,1] vector
    copy %X[0, %c*2, 0, %n*64] -> %win im2col kernel=[3,3] stride=[1,1] pad=[1,1] dilation=[1,1] out=[7,7] groups=8
    copy %W[%c*2, 0, 0] -> %wt
    ew mul %win <- %win, %wt
    reduce sum %acc <- %win axis 1
    copy %B[0, %c*2, 0, 0] -> %e0
    ew add %acc <- %acc, %e0
    ew max %acc <- %acc, 0
    ew min %acc <- %acc, 6
    copy %acc -> %Y[0, %c*2, 0, %n*64]
  }
}
)");
  return v;
}

// Convolutions as implicit GEMMs: B gathered from X through im2col (f32:
// 4-byte cp.async; f16: element loads), grouped with a grid variable per group.
std::vector<std::string> Convs() {
  std::vector<std::string> v;
  for (const char* dt : {"f32", "f16"}) {
    const bool f32 = std::string(dt) == "f32";
    v.push_back(absl::StrCat(R"(kernel @conv_)", dt, R"( {
  arg %X : )", dt, R"([2,16,14,14] in
  arg %W : )", dt, R"([2,32,72] in
  arg %Y : )", dt, R"([2,2,32,49] out
  grid %b0 = 2, %b1 = 2, %m = 1, %n = 1 {
    buffer %As : )", dt, R"([32,)", f32 ? 8 : 16, R"(] stage x2
    buffer %Bs : )", dt, R"([)", f32 ? 8 : 16, R"(,64] stage x2
    group %wm = 1, %wn = 2 {
      buffer %Aa : )", dt, R"([32,)", f32 ? 8 : 16, R"(] operand_a
      buffer %Bb : )", dt, R"([)", f32 ? 8 : 16, R"(,32] operand_b
      buffer %acc : f32[32,32] accumulator
      fill %acc, 0
      pipelined(2) %k = )", f32 ? 9 : 5, R"( {
        copy %W[%b1, %m*32, %k*)", f32 ? 8 : 16, R"(] -> %As
        copy %X[%b0, %b1, %k*)", f32 ? 8 : 16, R"(, %n*64] -> %Bs im2col kernel=[3,3] stride=[2,2] pad=[1,1] dilation=[1,1] out=[7,7] groups=2
        sync global -> stage
        copy %As[%wm*32, 0] -> %Aa
        copy %Bs[0, %wn*32] -> %Bb
        sync stage -> operand_a
        mma %acc += %Aa * %Bb
      }
      ew relu %acc <- %acc
      copy %acc -> %Y[%b0, %b1, %m*32 + %wm*32, %n*64 + %wn*32]
    }
  }
}
)"));
  }
  return v;
}

TEST(CudaCodegenNvcc, EveryFormCompilesForSm80AndSm90a) {
  if (!testing::HaveNvcc()) GTEST_SKIP() << "no " << testing::kNvcc;
  std::string source = CudaPrelude();
  std::vector<CudaKernel> gemms, others;
  for (const GemmSpec& s : Gemms()) {
    tile::TileKernel k = testing::ParseVerified(testing::GemmText(s));
    auto ck = EmitCudaKernel(k, CudaArch{});
    ASSERT_TRUE(ck.ok()) << ck.status();
    source += ck->source;
    gemms.push_back(*ck);
  }
  for (const std::string& text : Convs()) {
    tile::TileKernel k = testing::ParseVerified(text);
    auto ck = EmitCudaKernel(k, CudaArch{});
    ASSERT_TRUE(ck.ok()) << ck.status();
    source += ck->source;
    gemms.push_back(*ck);
  }
  for (const std::string& text : Vectors()) {
    tile::TileKernel k = testing::ParseVerified(text);
    auto ck = EmitCudaKernel(k, CudaArch{});
    ASSERT_TRUE(ck.ok()) << ck.status();
    source += ck->source;
    others.push_back(*ck);
  }
  for (const std::string arch : {"sm_80", "sm_90a"}) {
    testing::NvccResult r = testing::CompileCuda(source, arch, "forms");
    ASSERT_TRUE(r.ok) << arch << ":\n" << r.log << "\nsource in " << r.dir;
    for (const CudaKernel& k : gemms) {
      SCOPED_TRACE(k.name + " " + arch);
      ASSERT_TRUE(k.matrix);
      std::string ptx = testing::EntryPtx(r.ptx, k.name + "_sm80");
      ASSERT_FALSE(ptx.empty());
      EXPECT_NE(ptx.find("mma.sync.aligned.m16n8k"), std::string::npos);
      // tf32 operands stored MN-major (A transposed, B not) take 32-bit
      // shared loads: ldmatrix cannot transpose 32-bit elements.
      if (k.name != "gemm_tf32_trans_a") {
        EXPECT_NE(ptx.find("ldmatrix.sync.aligned"), std::string::npos);
      }
      if (k.name != "gemm_f16_odd") {
        EXPECT_NE(ptx.find("cp.async"), std::string::npos);
      }
      if (k.variants.size() > 1 && arch == "sm_90a") {
        std::string h = testing::EntryPtx(r.ptx, k.variants[1].function);
        ASSERT_FALSE(h.empty());
        EXPECT_NE(h.find("wgmma.mma_async.sync.aligned"), std::string::npos);
        if (!k.variants[1].tma.empty()) {
          // Stage tiles by TMA boxes, counted in by the slots' mbarriers.
          EXPECT_NE(h.find("cp.async.bulk.tensor"), std::string::npos);
          EXPECT_NE(h.find("mbarrier.arrive.expect_tx"), std::string::npos);
          EXPECT_NE(h.find("mbarrier.try_wait.parity"), std::string::npos);
        } else {
          EXPECT_EQ(h.find("cp.async.bulk"), std::string::npos);
          EXPECT_NE(h.find("cp.async"), std::string::npos);
        }
      }
    }
    for (const CudaKernel& k : others) {
      SCOPED_TRACE(k.name + " " + arch);
      EXPECT_FALSE(testing::EntryPtx(r.ptx, k.name).empty());
    }
  }
}

}  // namespace
}  // namespace kiln::target::cuda
