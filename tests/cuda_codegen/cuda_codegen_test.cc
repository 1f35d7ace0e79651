//===- cuda_codegen_test.cc - Host-side checks of the CUDA code generator --===//
//
// Launch geometry (grid from the grid loop, threads from the group loop x
// 32, shared memory from the stage buffers x stages), the variants and
// split-K bookkeeping, the readable header of each kernel, and the errors
// for kernels in no canonical form. No nvcc needed.
//
//===----------------------------------------------------------------------===//
#include <string>

#include "gtest/gtest.h"
#include "target/cuda/codegen/cuda_codegen.h"
#include "tests/cuda_codegen/kernels.h"

namespace kiln::target::cuda {
namespace {

using testing::GemmSpec;
using testing::GemmText;
using testing::ParseVerified;

TEST(CudaCodegen, PreludeHasTheHelpers) {
  const std::string p = CudaPrelude();
  for (const char* s : {"#include <cuda_fp16.h>", "#include <cuda_bf16.h>", "cp.async.cg.shared.global", "ldmatrix.sync.aligned",
                        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
                        "cvt.rna.tf32.f32", "wgmma.fence.sync.aligned", "__CUDA_ARCH_FEAT_SM90_ALL", "tile_offset",
                        "cp.async.bulk.tensor.2d", "cp.async.bulk.tensor.5d", "mbarrier.try_wait.parity",
                        "fence.mbarrier_init", "mbarrier.arrive.shared::cta.b64", "setmaxnreg.dec.sync.aligned.u32",
                        "setmaxnreg.inc.sync.aligned.u32"}) {
    EXPECT_NE(p.find(s), std::string::npos) << s;
  }
}

TEST(CudaCodegen, GemmLaunchGeometry) {
  GemmSpec s;  // 512x1024x256, 128x128x32 tiles, 2x2 warps, 3 stages
  s.epilogue = {"bias_row", "relu"};
  auto k = EmitCudaKernel(ParseVerified(GemmText(s)), CudaArch{});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(k->matrix);
  EXPECT_EQ(k->name, "gemm");
  ASSERT_EQ(k->variants.size(), 2u);
  const CudaVariant& v = k->variants[0];
  EXPECT_EQ(v.function, "gemm_sm80");
  EXPECT_EQ(v.min_sm, 80);
  EXPECT_EQ(v.max_sm, 0);
  EXPECT_EQ(v.grid, (std::array<int64_t, 3>{4 * 8, 1, 1}));
  EXPECT_EQ(v.block_threads, 4 * 32);
  // (A 128x32 f16 = 8 KiB + B 32x128 f16 = 8 KiB) x 3 stages + 1 KiB for alignment.
  EXPECT_EQ(v.shared_bytes, (8192 + 8192) * 3 + 1024);
  const CudaVariant& h = k->variants[1];
  EXPECT_EQ(h.function, "gemm_sm90a");
  EXPECT_EQ(h.min_sm, 90);
  EXPECT_EQ(h.max_sm, 90);
  // Warp-specialized and persistent: as many work items as sm_80 has
  // blocks, a producer warpgroup beside the computing one.
  EXPECT_EQ(h.grid, v.grid);
  EXPECT_TRUE(h.persistent);
  EXPECT_FALSE(v.persistent);
  EXPECT_EQ(h.block_threads, v.block_threads + 128);
  EXPECT_TRUE(k->zero_args.empty());
  EXPECT_EQ(k->workspace_bytes, 0);
  // A readable header: what it computes, the tiles and why.
  EXPECT_NE(k->source.find("// @gemm: mma.sync.m16n8k16 (f16) GEMM for sm_80+; 4 warps, each a 64x64 tile"), std::string::npos);
  EXPECT_NE(k->source.find("block tile 128x128x32 (4x8 tiles), 3-stage cp.async pipeline over 8 K tiles"), std::string::npos);
  EXPECT_NE(k->source.find("epilogue in registers: add, relu"), std::string::npos);
  EXPECT_NE(k->source.find("plan: test kernel"), std::string::npos);
  EXPECT_NE(k->source.find("extern \"C\" __global__ void __launch_bounds__(128) gemm_sm80(const __half* __restrict__ A, "
                           "const __half* __restrict__ B, const __half* __restrict__ bias, __half* __restrict__ Y)"),
            std::string::npos);
  EXPECT_NE(k->plan.find("sm_90a wgmma m64n128k16"), std::string::npos) << k->plan;
}

TEST(CudaCodegen, NoHopperVariantWhenNotAsked) {
  GemmSpec s;
  auto k = EmitCudaKernel(ParseVerified(GemmText(s)), CudaArch{80, false});
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_EQ(k->variants.size(), 1u);
  EXPECT_EQ(k->source.find("wgmma"), std::string::npos);
}

// f32 products of 2 x 3 batch items, 64x64x2048 each, K split 4 ways.
GemmSpec BatchedSplitK() {
  GemmSpec s;
  s.name = "bsk";
  s.out = "f32";
  s.batch = {2, 3};
  s.M = 64, s.N = 64, s.K = 2048;
  s.bm = 64, s.bn = 64, s.gm = 32, s.gn = 32, s.bk = 64;
  s.splits = 4;
  return s;
}

TEST(CudaCodegen, BatchedSplitKGeometry) {
  auto k = EmitCudaKernel(ParseVerified(GemmText(BatchedSplitK())), CudaArch{});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->variants[0].grid, (std::array<int64_t, 3>{1, 4, 6}));
  ASSERT_EQ(k->zero_args.size(), 1u);
  EXPECT_EQ(k->zero_args[0], 2);  // %Y
  EXPECT_NE(k->source.find("kiln::atomic_add(&Y["), std::string::npos);
  EXPECT_NE(k->source.find("const int b1 = blockIdx.z / 1 % 3;"), std::string::npos);
  EXPECT_NE(k->source.find("const int b0 = blockIdx.z / 3 % 2;"), std::string::npos);
  EXPECT_NE(k->source.find("const int s = blockIdx.y;"), std::string::npos);
}

TEST(CudaCodegen, HopperVariantLoadsStageTilesByTma) {
  GemmSpec s;  // A f16[512,256] x B f16[256,1024]; stage tiles As [128,32], Bs [32,128]; 3 stages
  CudaArch uniform;
  uniform.warp_specialized = false;  // --sm90a-gemm=uniform: every warp computes
  auto k = EmitCudaKernel(ParseVerified(GemmText(s)), uniform);
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_EQ(k->variants.size(), 2u);
  EXPECT_TRUE(k->variants[0].tma.empty());  // sm_80: cp.async
  const CudaVariant& h = k->variants[1];
  ASSERT_EQ(h.tma.size(), 2u);
  // A: 64-byte lines (32 f16), one 64B-swizzled panel of 128 lines per tile.
  const TmaMap& a = h.tma[0];
  EXPECT_EQ(a.arg, 0);
  EXPECT_EQ(a.dtype, DType::kF16);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{256, 512}));
  EXPECT_EQ(a.strides, (std::vector<int64_t>{512}));
  EXPECT_EQ(a.box, (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(a.swizzle_bytes, 64);
  // B: 256-byte lines, two 128B-swizzled panels of 64 elements x 32 lines.
  const TmaMap& b = h.tma[1];
  EXPECT_EQ(b.arg, 1);
  EXPECT_EQ(b.dims, (std::vector<int64_t>{1024, 256}));
  EXPECT_EQ(b.strides, (std::vector<int64_t>{2048}));
  EXPECT_EQ(b.box, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(b.swizzle_bytes, 128);
  // The slots, 1 KiB for alignment, and an 8-byte mbarrier per slot.
  EXPECT_EQ(h.shared_bytes, (8192 + 8192) * 3 + 1024 + 8 * 3);
  EXPECT_NE(k->plan.find("sm_90a wgmma m64n128k16 with TMA loads"), std::string::npos) << k->plan;
  EXPECT_NE(k->source.find("const __grid_constant__ CUtensorMap kiln_tma_a, const __grid_constant__ CUtensorMap kiln_tma_b"),
            std::string::npos);
  EXPECT_NE(k->source.find("constexpr uint32_t kTxBytes = 16384;"), std::string::npos);
  // Box coordinates, innermost first: A at (k*32, m*128); B's panels at (n*128 + p*64, k*32).
  EXPECT_NE(k->source.find("kiln_tma_a, bar, k * 32 + p * 32, m * 128);"), std::string::npos);
  EXPECT_NE(k->source.find("kiln_tma_b, bar, n * 128 + p * 64, k * 32);"), std::string::npos);
  EXPECT_NE(k->source.find("kiln::mbar_wait(smem_base + bars + 8 * (k % kStages), (k / kStages) & 1);"), std::string::npos);
  EXPECT_NE(k->source.find("3-stage TMA pipeline over 8 K tiles"), std::string::npos);
}

TEST(CudaCodegen, WarpSpecializedHopperVariant) {
  GemmSpec s;  // 256x128 tiles, 8 warps: two consumer warpgroups of 128 rows
  s.M = 1024, s.N = 1024, s.K = 1024, s.bm = 256, s.bk = 64;
  auto k = EmitCudaKernel(ParseVerified(GemmText(s)), CudaArch{});
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_EQ(k->variants.size(), 2u);
  const CudaVariant& h = k->variants[1];
  EXPECT_TRUE(h.persistent);
  EXPECT_EQ(h.grid, (std::array<int64_t, 3>{4 * 8, 1, 1}));  // work items: the tiles
  EXPECT_EQ(h.block_threads, 3 * 128);
  ASSERT_EQ(h.tma.size(), 2u);
  // One block fills an SM at the plan's 3 stages of 48 KiB, so the ring
  // takes what 227 KiB holds: 4 slots, 1 KiB for alignment, two mbarriers each.
  EXPECT_EQ(h.shared_bytes, 49152 * 4 + 1024 + 16 * 4);
  EXPECT_NE(k->plan.find("sm_90a wgmma m64n128k16 warp-specialized, persistent, 4 TMA stages"), std::string::npos)
      << k->plan;
  for (const char* want : {
           "__launch_bounds__(384, 1) gemm_sm90a(",
           "kiln::mbar_init(smem_base + empties + 8 * slot, 2);",  // both consumer warpgroups release a slot
           "if (warp < 4) {  // the producer warpgroup",
           "kiln::setmaxnreg_dec<40>();",
           "kiln::setmaxnreg_inc<232>();",
           "for (int work = blockIdx.x; work < kWork; work += gridDim.x) {",
           "const int tile_id = work % kTiles;",
           "kiln::mbar_wait(smem_base + empties + 8 * slot, ((it / kStages) & 1) ^ 1);",
           "kiln::mbar_wait(smem_base + bars + 8 * (it % kStages), (it / kStages) & 1);",
           "kiln::wgmma_wait<1>();",
           "if (k > 0 && threadIdx.x % 128 == 0) kiln::mbar_arrive(smem_base + empties + 8 * ((it + kStages - 1) % kStages));",
           "const int wg = warp / 4 - 1;",
       }) {
    EXPECT_NE(k->source.find(want), std::string::npos) << want;
  }
  // The producer's loads and the consumers' reads step through one ring.
  EXPECT_EQ(k->source.find("__syncthreads();  // ...and every warpgroup"), std::string::npos);
}

TEST(CudaCodegen, WarpSpecializedBatchedSplitKWorkItems) {
  auto k = EmitCudaKernel(ParseVerified(GemmText(BatchedSplitK())), CudaArch{});
  ASSERT_TRUE(k.ok()) << k.status();
  const CudaVariant& h = k->variants[1];
  ASSERT_TRUE(h.persistent) << k->plan;
  EXPECT_EQ(h.grid, (std::array<int64_t, 3>{1 * 4 * 6, 1, 1}));  // tiles x slices x batch items
  EXPECT_EQ(h.block_threads, 2 * 128);                          // one consumer warpgroup: no register moves
  EXPECT_EQ(k->source.find("setmaxnreg"), std::string::npos);
  EXPECT_NE(k->source.find("const int s = work / kTiles % kSplits;"), std::string::npos);
  EXPECT_NE(k->source.find("const int b1 = (work / kTiles / kSplits) / 1 % 3;"), std::string::npos);
  EXPECT_NE(k->source.find("const int b0 = (work / kTiles / kSplits) / 3 % 2;"), std::string::npos);
}

TEST(CudaCodegen, TmaBoxesOfBatchedAndBroadcastOperands) {
  GemmSpec s;
  s.name = "bt";
  s.batch = {3};
  s.b_broadcasts_batch = true;  // B f16[1,256,1024]: every batch item reads item 0
  s.trans_a = true;             // A f16[3,256,512], its tiles transposed into the stage
  auto k = EmitCudaKernel(ParseVerified(GemmText(s)), CudaArch{});
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_EQ(k->variants.size(), 2u);
  const CudaVariant& h = k->variants[1];
  ASSERT_EQ(h.tma.size(), 2u) << k->plan;
  // A's tile lines run along K (MN-major): 128 elements of M per line, 32 lines.
  EXPECT_EQ(h.tma[0].dims, (std::vector<int64_t>{512, 256, 3}));
  EXPECT_EQ(h.tma[0].strides, (std::vector<int64_t>{1024, 262144}));
  EXPECT_EQ(h.tma[0].box, (std::vector<int64_t>{64, 32, 1}));
  EXPECT_EQ(h.tma[1].dims, (std::vector<int64_t>{1024, 256, 1}));
  EXPECT_NE(k->source.find("kiln_tma_a, bar, m * 128 + p * 64, k * 32, b0);"), std::string::npos);
  EXPECT_NE(k->source.find("kiln_tma_b, bar, n * 128 + p * 64, k * 32, 0);"), std::string::npos);
}

TEST(CudaCodegen, HopperVariantKeepsCpAsyncWhereTmaCannotLoad) {
  GemmSpec s;
  s.K = 250;  // A's rows are 500 bytes: no 16-byte chunks, no tensor map
  auto k = EmitCudaKernel(ParseVerified(GemmText(s)), CudaArch{});
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_EQ(k->variants.size(), 2u);
  EXPECT_TRUE(k->variants[1].tma.empty());
  EXPECT_EQ(k->variants[1].shared_bytes, k->variants[0].shared_bytes);
  EXPECT_NE(k->plan.find("with cp.async loads (no TMA: A rows or tile starts not in 16-byte chunks)"), std::string::npos)
      << k->plan;
  EXPECT_EQ(k->source.find("CUtensorMap"), std::string::npos);
}

TEST(CudaCodegen, HopperVariantNeedsWarpgroups) {
  GemmSpec s;
  s.bm = 64, s.bn = 64, s.gm = 32, s.gn = 64;  // 2 warps: no warpgroup
  auto k = EmitCudaKernel(ParseVerified(GemmText(s)), CudaArch{});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->variants.size(), 1u);
  EXPECT_NE(k->plan.find("no wgmma variant: the block's warps do not form warpgroups of 4"), std::string::npos) << k->plan;
}

TEST(CudaCodegen, ElementwiseGeometryAndVectorWidth) {
  auto k = EmitCudaKernel(ParseVerified(testing::EwText("ew", "f16", 512, 1024, 16, 1024, {"ew add %x <- %x, %bb"})),
                          CudaArch{});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_FALSE(k->matrix);
  ASSERT_EQ(k->variants.size(), 1u);
  EXPECT_EQ(k->variants[0].function, "ew");
  EXPECT_EQ(k->variants[0].block_threads, 256);
  EXPECT_EQ(k->variants[0].grid, (std::array<int64_t, 3>{512 * 1024 / 8 / 256, 1, 1}));
  EXPECT_EQ(k->variants[0].shared_bytes, 0);
  EXPECT_NE(k->source.find("kiln::load_vec<__half, 8>("), std::string::npos);
  EXPECT_NE(k->source.find("kiln::store_vec<__half, 8>("), std::string::npos);
  // Columns of 300 f32: 4 elements (16 bytes) per step.
  auto k2 = EmitCudaKernel(ParseVerified(testing::EwText("ew2", "f32", 100, 300, 8, 128, {"ew relu %x <- %x"})), CudaArch{});
  ASSERT_TRUE(k2.ok()) << k2.status();
  EXPECT_NE(k2->source.find("kiln::load_vec<float, 4>("), std::string::npos);
  // Odd columns: element by element.
  auto k3 = EmitCudaKernel(ParseVerified(testing::EwText("ew3", "f32", 10, 33, 8, 33, {"ew relu %x <- %x"})), CudaArch{});
  ASSERT_TRUE(k3.ok()) << k3.status();
  EXPECT_EQ(k3->source.find("load_vec"), std::string::npos);
}

constexpr char kSoftmax[] = R"(kernel @softmax {
  arg %X : f32[64,N] in
  arg %Y : f32[64,N] out
  grid %r = 16 {
    buffer %x : f32[4,N] vector
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
)";

std::string Softmax(int n) {
  std::string t = kSoftmax;
  for (size_t at; (at = t.find('N')) != std::string::npos;) t.replace(at, 1, std::to_string(n));
  return t;
}

TEST(CudaCodegen, RowReductionWarpOrBlockPerRow) {
  auto k = EmitCudaKernel(ParseVerified(Softmax(1000)), CudaArch{});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->variants[0].block_threads, 128);             // 4 rows per block, a warp each
  EXPECT_EQ(k->variants[0].grid, (std::array<int64_t, 3>{16, 1, 1}));  // 64 rows / 4
  EXPECT_NE(k->source.find("kiln::warp_allreduce<kiln::MaxOp>"), std::string::npos);
  EXPECT_NE(k->source.find("one warp per row"), std::string::npos);
  auto big = EmitCudaKernel(ParseVerified(Softmax(8192)), CudaArch{});
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->variants[0].block_threads, 256);  // 2048 chunks of 4, 8 per thread
  EXPECT_EQ(big->variants[0].grid, (std::array<int64_t, 3>{64, 1, 1}));
  EXPECT_NE(big->source.find("kiln::block_allreduce<kiln::SumOp, 8>"), std::string::npos);
  // Rows too long for registers are refused (the node falls back).
  auto huge = EmitCudaKernel(ParseVerified(Softmax(1 << 20)), CudaArch{});
  EXPECT_FALSE(huge.ok());
}

TEST(CudaCodegen, RejectsKernelsInNoCanonicalForm) {
  // A GEMM without a group loop.
  auto k = tile::Parse(R"(kernel @nogroup {
  arg %A : f16[64,64] in
  arg %B : f16[64,64] in
  arg %Y : f16[64,64] out
  grid %m = 1, %n = 1 {
    buffer %As : f16[64,32] stage x2
    buffer %Bs : f16[32,64] stage x2
    buffer %Aa : f16[64,32] operand_a
    buffer %Bb : f16[32,64] operand_b
    buffer %acc : f32[64,64] accumulator
    fill %acc, 0
    pipelined(2) %k = 2 {
      copy %A[%m*64, %k*32] -> %As
      copy %B[%k*32, %n*64] -> %Bs
      sync global -> stage
      copy %As -> %Aa
      copy %Bs -> %Bb
      sync stage -> operand_a
      mma %acc += %Aa * %Bb
    }
    copy %acc -> %Y[%m*64, %n*64]
  }
}
)");
  ASSERT_TRUE(k.ok()) << k.status();
  auto r = EmitCudaKernel(*k, CudaArch{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(std::string(r.status().message()),
            "kernel @nogroup has no CUDA form: `fill %acc, 0` in the grid loop outside the group loop");

  // Integer tensors have no CUDA form.
  auto ki = tile::Parse(R"(kernel @ints {
  arg %X : i32[8,8] in
  arg %Y : i32[8,8] out
  grid %r = 1 {
    buffer %x : i32[8,8] vector
    copy %X -> %x
    copy %x -> %Y
  }
}
)");
  ASSERT_TRUE(ki.ok()) << ki.status();
  auto ri = EmitCudaKernel(*ki, CudaArch{});
  ASSERT_FALSE(ri.ok());
  EXPECT_NE(ri.status().message().find("dtype i32 has no CUDA form"), std::string::npos) << ri.status();

  // A reduction over the first axis.
  auto kr = tile::Parse(R"(kernel @colsum {
  arg %X : f32[8,8] in
  arg %Y : f32[1,8] out
  grid %r = 1 {
    buffer %x : f32[8,8] vector
    buffer %s : f32[1,8] vector
    copy %X -> %x
    reduce sum %s <- %x axis 0
    copy %s -> %Y
  }
}
)");
  ASSERT_TRUE(kr.ok()) << kr.status();
  auto rr = EmitCudaKernel(*kr, CudaArch{});
  ASSERT_FALSE(rr.ok());
  EXPECT_NE(rr.status().message().find("does not reduce the last axis"), std::string::npos) << rr.status();

  // Before sm_80.
  GemmSpec s;
  auto old = EmitCudaKernel(ParseVerified(GemmText(s)), CudaArch{75, false});
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("need sm_80 or newer"), std::string::npos);
}

}  // namespace
}  // namespace kiln::target::cuda
