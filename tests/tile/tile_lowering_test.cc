//===- tile_lowering_test.cc - Figures, the GEMM cost model and lowering ---===//
//
// FiguresOf on the npusim description, the cost model's properties in its
// own terms (bigger tiles move fewer global bytes, a tiling that overflows
// a scope is rejected, a large square GEMM is matrix-bound, split-K for a
// skinny K-heavy GEMM on many units; on the cuda figures, stages hiding a
// load's latency and the bounds on a group's stage tiles), GemmProblemOf on MatMul/Gemm/fusion
// groups, and the kernels LowerGemm and LowerVectorNode make of small
// graphs parsed from .kir text.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_lowering.h"
#include "target/cuda/cuda_target.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph/ir/parser.h"
#include "tests/tile/tile_test_targets.h"

namespace kiln::target::tile {
namespace {

using ::testing::HasSubstr;

// A tiling: block tile bm x bn x bk, group tile gm x gn, operand step tk.
GemmTiling Tiling(int64_t bm, int64_t bn, int64_t bk, int64_t gm, int64_t gn, int64_t tk) {
  GemmTiling t;
  t.bm = bm, t.bn = bn, t.bk = bk, t.gm = gm, t.gn = gn, t.tk = tk;
  return t;
}

GemmProblem Square(int64_t n, DType input) {
  GemmProblem p;
  p.name = "g";
  p.M = p.N = p.K = n;
  p.input = input;
  p.output = DType::kF32;
  p.args = {TileArg{"A", input, {n, n}, TileArg::Role::kIn}, TileArg{"B", input, {n, n}, TileArg::Role::kIn},
            TileArg{"Y", DType::kF32, {n, n}, TileArg::Role::kOut}};
  return p;
}

TEST(TileFigures, NpusimDescription) {
  TileCostFigures f = FiguresOf(NpusimLike());
  EXPECT_EQ(f.target.name, "npusim");
  EXPECT_EQ(f.target.capacity.at(Scope::kStage), 1 << 20);
  EXPECT_EQ(f.target.capacity.at(Scope::kOperandA), 64 << 10);
  EXPECT_EQ(f.target.capacity.at(Scope::kAccumulator), 256 << 10);
  EXPECT_EQ(f.target.capacity.at(Scope::kVector), 256 << 10);
  EXPECT_EQ(f.target.capacity.count(Scope::kGlobal), 0u);
  EXPECT_EQ(f.compute_units, 32);
  EXPECT_DOUBLE_EQ(f.global_bytes_per_cycle, 1200);
  EXPECT_DOUBLE_EQ(f.stage_bytes_per_cycle, 256);
  EXPECT_DOUBLE_EQ(f.operand_bytes_per_cycle, 512);
  EXPECT_DOUBLE_EQ(f.MacsPerCycle(DType::kF16), 4096);
  EXPECT_DOUBLE_EQ(f.MacsPerCycle(DType::kF32), 1024);
  ASSERT_EQ(f.target.mma.size(), 2u);
  EXPECT_EQ(f.target.mma[1].k, 8);
  EXPECT_EQ(f.max_group, 1);
  EXPECT_EQ(f.target.max_group, 1);
  EXPECT_EQ(f.cache_bytes, 0);
}

TEST(TileCostModel, BiggerTilesMoveFewerGlobalBytes) {
  TileCostFigures f = FiguresOf(NpusimLike());
  GemmProblem p = Square(2048, DType::kF16);
  GemmTiling small = Tiling(64, 64, 32, 64, 64, 32), big = Tiling(128, 128, 32, 128, 128, 32);
  ASSERT_TRUE(EstimateGemm(p, f, &small).ok());
  ASSERT_TRUE(EstimateGemm(p, f, &big).ok());
  EXPECT_LT(big.global_cycles, small.global_cycles);
}

TEST(TileCostModel, OverflowingTilingIsRejected) {
  TileCostFigures f = FiguresOf(NpusimLike());
  GemmProblem p = Square(2048, DType::kF16);
  GemmTiling t = Tiling(256, 256, 64, 256, 256, 64);  // operand_a/b: 32 KiB each; accumulator 256 KiB: fits
  EXPECT_TRUE(EstimateGemm(p, f, &t).ok());
  t.bn = t.gn = 512;  // operand_b 64 KiB still fits; accumulator 256 x 512 x 4 = 512 KiB > 256 KiB
  absl::Status s = EstimateGemm(p, f, &t);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("bytes of accumulator"));
}

TEST(TileCostModel, LargeSquareGemmIsMatrixBound) {
  // f32 matrices (npusim's default precision): 1024 MACs per cycle per core.
  TileCostFigures f = FiguresOf(NpusimLike());
  auto t = ChooseGemmTiling(Square(4096, DType::kF32), f);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->bound, "matrix") << t->Describe();
  EXPECT_EQ(t->split_k, 1);
  EXPECT_GE(t->compute_cycles, 0.8 * t->estimated_cycles) << t->Describe();
}

TEST(TileCostModel, SkinnyKHeavyGemmSplitsK) {
  TargetDescription d = NpusimLike();
  d.name = "many";
  d.compute_units = 128;
  TileCostFigures f = FiguresOf(d);
  GemmProblem p = Square(128, DType::kF16);
  p.K = 65536;
  p.args[0].shape = {128, 65536};
  p.args[1].shape = {65536, 128};
  auto t = ChooseGemmTiling(p, f);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GT(t->split_k, 1) << t->Describe();
  // No split-K when the result needs an epilogue.
  p.epilogue.push_back(EpilogueStep{EwOp::kRelu});
  auto e = ChooseGemmTiling(p, f);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->split_k, 1);
}

// The cuda description's figures (target/cuda/cuda_target.cc): an H100's
// 132 SMs, shared memory and register scopes, a 50 MiB L2.
TargetDescription CudaLike() {
  TargetDescription d;
  d.name = "cuda";
  d.memory = {{"HBM3", int64_t{80} << 30, 64, "global"}, {"L2", 50 << 20, 64, ""},
              {"smem", 227 << 10, 128, "stage"},          {"regs.a", 32 << 10, 128, "operand_a"},
              {"regs.b", 32 << 10, 128, "operand_b"},     {"regs.acc", 128 << 10, 128, "accumulator"},
              {"regs.vector", 64 << 10, 512, "vector"}};
  d.mma = {{16, 8, 16, DType::kF16, DType::kF32, 1893}, {16, 8, 8, DType::kF32, DType::kF32, 946}};
  d.compute_units = 132;
  d.clock_ghz = 1.98;
  d.global_bytes_per_second = 3.35e12;
  d.vector_bytes_per_cycle = 512;
  d.tiling = CudaDescription().tiling;
  return d;
}

// The cost model reads a target's tiling figures from its description,
// never from its name: a plugin brings its own.
TEST(TileCostModel, TilingFiguresComeFromTheDescription) {
  TargetDescription named_cuda = CudaLike();
  named_cuda.tiling = TilingFigures();
  EXPECT_EQ(FiguresOf(named_cuda).max_group, 1);
  EXPECT_EQ(FiguresOf(named_cuda).max_stages, 2);
  TargetDescription plugin = CudaLike();
  plugin.name = "a-plugin";
  plugin.tiling.max_stages = 6;
  plugin.tiling.global_latency_cycles = 900;
  const TileCostFigures f = FiguresOf(plugin);
  EXPECT_EQ(f.max_group, 8);
  EXPECT_EQ(f.max_stages, 6);
  EXPECT_EQ(f.target.max_group, 8);
  EXPECT_DOUBLE_EQ(f.global_latency_cycles, 900);
}

GemmTiling Staged(GemmTiling t, int stages) {
  t.stages = stages;
  return t;
}

TEST(TileCostModel, StagesInFlightHideTheLoadLatency) {
  // 128x256x32 tiles: one stage's MMAs (about 550 cycles) do not cover a
  // load's 600-cycle latency, so two stages wait on it and three do not.
  TileCostFigures f = FiguresOf(CudaLike());
  GemmProblem p = Square(4096, DType::kF16);
  GemmTiling two = Staged(Tiling(128, 256, 32, 64, 64, 32), 2), three = Staged(Tiling(128, 256, 32, 64, 64, 32), 3);
  ASSERT_TRUE(EstimateGemm(p, f, &two).ok());
  ASSERT_TRUE(EstimateGemm(p, f, &three).ok());
  EXPECT_EQ(two.bound, "pipeline latency") << two.Describe();
  EXPECT_LT(three.estimated_cycles, 0.8 * two.estimated_cycles) << three.Describe() << " vs " << two.Describe();
}

TEST(TileCostModel, LargeGemmOnCudaTakesDeepStages) {
  // Measured on an H100 (benchmarks/RESULTS.md): 128x256 or 256x128 tiles
  // with 64 or more of K in flight per stage beyond the one being read.
  auto t = ChooseGemmTiling(Square(8192, DType::kF16), FiguresOf(CudaLike()));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->bm * t->bn, 256 * 128) << t->Describe();
  EXPECT_GE(t->bk * (t->stages - 1), 64) << t->Describe();
  EXPECT_EQ(t->split_k, 1);
}

TEST(TileCostModel, StagesBeyondTheKStepsBuyNothing) {
  // A 16x384x128 GEMM (a GPT-2 block's projection at sequence 16) in
  // 16x8x128 tiles has one K step: the prologue issues its only load, so a
  // pipeline deeper than two stages hides no more latency and only takes
  // buffer space; the choice takes no more stages than it can fill.
  TileCostFigures f = FiguresOf(CudaLike());
  GemmProblem p = Square(128, DType::kF16);
  p.M = 16, p.N = 384;
  p.args = {TileArg{"A", DType::kF16, {16, 128}, TileArg::Role::kIn},
            TileArg{"B", DType::kF16, {128, 384}, TileArg::Role::kIn},
            TileArg{"Y", DType::kF32, {16, 384}, TileArg::Role::kOut}};
  GemmTiling two = Staged(Tiling(16, 8, 128, 16, 8, 128), 2), four = Staged(Tiling(16, 8, 128, 16, 8, 128), 4);
  ASSERT_TRUE(EstimateGemm(p, f, &two).ok());
  ASSERT_TRUE(EstimateGemm(p, f, &four).ok());
  EXPECT_LE(two.estimated_cycles, four.estimated_cycles) << two.Describe() << " vs " << four.Describe();
  auto t = ChooseGemmTiling(p, f);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_LE(t->stages, (p.K + t->bk - 1) / t->bk / t->split_k + 1) << t->Describe();
}

TEST(TileCostModel, StageTilesPerGroupAreBounded) {
  TileCostFigures f = FiguresOf(CudaLike());
  GemmProblem p = Square(512, DType::kF16);
  GemmTiling deep = Staged(Tiling(16, 16, 256, 16, 16, 256), 2);  // 8192 elements for one warp
  absl::Status s = EstimateGemm(p, f, &deep);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("per group at most"));
  GemmTiling shallow = Staged(Tiling(16, 16, 64, 16, 16, 64), 2);
  EXPECT_TRUE(EstimateGemm(p, f, &shallow).ok());
  // An im2col operand is gathered element by element: a tighter bound.
  p.im2col.emplace();
  s = EstimateGemm(p, f, &shallow);
  EXPECT_THAT(s.message(), HasSubstr("gathered elements"));
  GemmTiling gather = Staged(Tiling(16, 16, 32, 16, 16, 32), 2);
  EXPECT_TRUE(EstimateGemm(p, f, &gather).ok());
  // npusim's cube loads whole tiles: neither bound.
  GemmTiling npu = Staged(Tiling(16, 16, 256, 16, 16, 256), 2);
  EXPECT_TRUE(EstimateGemm(p, FiguresOf(NpusimLike()), &npu).ok());
}

// Parses `kir` and returns its model (the graph's nodes are what the tests lower).
Model ParseKir(absl::string_view kir) {
  auto m = ParseModel(kir);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(*m);
}

const Node& NodeNamed(const Model& m, absl::string_view output) {
  for (const Node* n : m.graph->nodes()) {
    if (n->output(0)->name() == output) return *n;
  }
  ADD_FAILURE() << "no node " << output;
  return **m.graph->nodes().begin();
}

TEST(TileGemmProblem, GemmWithTransposesAlphaBetaAndColumnC) {
  Model m = ParseKir(R"(graph @main(%a: f32[64,32], %b: f32[48,64], %c: f32[32,1]) {
  %y = Gemm(%a, %b, %c) {alpha = 2.0, beta = 0.5, transA = 1, transB = 1} : f32[32,48]
  return %y
})");
  auto p = GemmProblemOf(NodeNamed(m, "y"), DType::kF16);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->M, 32);
  EXPECT_EQ(p->N, 48);
  EXPECT_EQ(p->K, 64);
  EXPECT_TRUE(p->trans_a);
  EXPECT_TRUE(p->trans_b);
  EXPECT_EQ(p->input, DType::kF16);
  EXPECT_DOUBLE_EQ(p->alpha, 4.0);
  ASSERT_EQ(p->epilogue.size(), 2u);
  EXPECT_EQ(p->epilogue[0].operand, EpilogueStep::Operand::kCol);
  EXPECT_EQ(p->epilogue[0].arg, 2);
  EXPECT_EQ(p->epilogue[1].op, EwOp::kMul);
  EXPECT_DOUBLE_EQ(p->epilogue[1].scalar, 0.5);
  EXPECT_EQ(p->y_arg, 3);
}

TEST(TileGemmProblem, BatchedMatMulBroadcasts) {
  Model m = ParseKir(R"(graph @main(%a: f16[3,1,16,32], %b: f16[4,32,8]) {
  %y = MatMul(%a, %b) : f16[3,4,16,8]
  return %y
})");
  auto p = GemmProblemOf(NodeNamed(m, "y"), DType::kF32);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->batch, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(p->a_batch_stride, (std::vector<int64_t>{512, 0}));
  EXPECT_EQ(p->b_batch_stride, (std::vector<int64_t>{0, 256}));
  EXPECT_EQ(p->input, DType::kF16);
  TileCostFigures f = FiguresOf(NpusimLike());
  auto k = LowerNode(NodeNamed(m, "y"), DType::kF32, f);
  ASSERT_TRUE(k.ok()) << k.status();
  const std::string text = Print(*k);
  EXPECT_THAT(text, HasSubstr("grid %b0 = 3, %b1 = 4, %m = 1, %n = 1 {"));
  EXPECT_THAT(text, HasSubstr("copy %a[%b0, 0, %m*16, %k*"));
  EXPECT_THAT(text, HasSubstr("copy %b[%b1, %k*"));
}

TEST(TileGemmProblem, OtherNodesSayWhy) {
  Model m = ParseKir(R"(graph @main(%a: i32[4,4], %x: f32[4]) {
  %y = MatMul(%a, %a) : i32[4,4]
  %z = Relu(%x) : f32[4]
  return %y, %z
})");
  EXPECT_THAT(GemmProblemOf(NodeNamed(m, "y"), DType::kF32).status().message(), HasSubstr("not i32"));
  EXPECT_THAT(GemmProblemOf(NodeNamed(m, "z"), DType::kF32).status().message(), HasSubstr("is no MatMul, Gemm or Conv"));
}

// Attention's heads: Q [B, S, H, D] read as [B, H, S, D] and K as its
// transpose [B, H, D, S] through the fused body's leading Transposes. The
// problem reads the sources where they lie: Q's rows H*D apart, K a
// transposed B with the same row stride, each batch axis the source's stride.
TEST(TileGemmProblem, LeadingTransposesAreStridedViews) {
  Model m = ParseKir(R"(graph @main(%q: f16[2,5,3,8], %k: f16[2,5,3,8]) {
  %y = kiln.Fused(%q, %k) {anchor = "MatMul", body = graph @body(%bq: f16[2,5,3,8], %bk: f16[2,5,3,8]) {
    %tq = Transpose(%bq) {perm = [0, 2, 1, 3]} : f16[2,3,5,8]
    %tk = Transpose(%bk) {perm = [0, 2, 3, 1]} : f16[2,3,8,5]
    %s = MatMul(%tq, %tk) : f16[2,3,5,5]
    return %s
  }, kind = "matmul-epilogue"} : f16[2,3,5,5]
  return %y
})");
  auto p = GemmProblemOf(NodeNamed(m, "y"), DType::kF32);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->M, 5);
  EXPECT_EQ(p->N, 5);
  EXPECT_EQ(p->K, 8);
  EXPECT_EQ(p->a_perm, (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(p->b_perm, (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_FALSE(p->trans_a);
  EXPECT_TRUE(p->trans_b);
  EXPECT_EQ(p->lda, 24);  // H*D between Q's rows
  EXPECT_EQ(p->ldb, 24);
  EXPECT_EQ(p->a_batch_stride, (std::vector<int64_t>{120, 8}));
  EXPECT_EQ(p->b_batch_stride, (std::vector<int64_t>{120, 8}));
  // The arguments are the sources as declared.
  EXPECT_EQ(p->args[p->a_arg].shape, (std::vector<int64_t>{2, 5, 3, 8}));
  // The tile IR has no strided views yet: the lowering says so.
  auto k = LowerNode(NodeNamed(m, "y"), DType::kF32, FiguresOf(NpusimLike()));
  EXPECT_THAT(k.status().message(), HasSubstr("read through Transposes"));
}

TEST(TileGemmProblem, ATransposeThatIsNoMatrixViewIsDeclined) {
  // [B, S, H, D] read as [B, D, S, H]: neither matrix axis is contiguous.
  Model m = ParseKir(R"(graph @main(%q: f16[2,5,3,8], %w: f16[3,4]) {
  %y = kiln.Fused(%q, %w) {anchor = "MatMul", body = graph @body(%bq: f16[2,5,3,8], %bw: f16[3,4]) {
    %tq = Transpose(%bq) {perm = [0, 3, 1, 2]} : f16[2,8,5,3]
    %s = MatMul(%tq, %bw) : f16[2,8,5,4]
    return %s
  }, kind = "matmul-epilogue"} : f16[2,8,5,4]
  return %y
})");
  auto p = GemmProblemOf(NodeNamed(m, "y"), DType::kF32);
  EXPECT_THAT(p.status().message(), HasSubstr("no matrix view"));
}

// A rank-1 operand is the matrix numpy promotes it to: A [K] a row, B [K]
// a column; the arguments and Y are declared with those views (the tile
// sweep runs such kernels against the reference).
TEST(TileGemmProblem, RankOneOperandsAreRowsAndColumns) {
  Model m = ParseKir(R"(graph @main(%v: f32[32], %b: f32[3,32,16], %a: f32[24,32], %u: f32[32]) {
  %y = MatMul(%v, %b) : f32[3,16]
  %z = MatMul(%a, %u) : f32[24]
  return %y, %z
})");
  auto y = GemmProblemOf(NodeNamed(m, "y"), DType::kF32);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->M, 1);
  EXPECT_EQ(y->N, 16);
  EXPECT_EQ(y->batch, (std::vector<int64_t>{3}));
  EXPECT_EQ(y->args[y->a_arg].shape, (std::vector<int64_t>{1, 32}));
  EXPECT_EQ(y->args[y->y_arg].shape, (std::vector<int64_t>{3, 1, 16}));
  auto z = GemmProblemOf(NodeNamed(m, "z"), DType::kF32);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z->N, 1);
  EXPECT_EQ(z->args[z->b_arg].shape, (std::vector<int64_t>{32, 1}));
  EXPECT_EQ(z->args[z->y_arg].shape, (std::vector<int64_t>{24, 1}));
  EXPECT_TRUE(LowerNode(NodeNamed(m, "y"), DType::kF32, FiguresOf(NpusimLike())).ok());
}

constexpr char kFusedGemm[] = R"(graph @main(%x: f16[64,128], %w: f16[128,256], %res: f16[64,256]) {
  %y = kiln.Fused(%x, %w, %res) {anchor = "MatMul", body = graph @body(%bx: f16[64,128], %bw: f16[128,256], %br: f16[64,256]) {
    %bias = const f16[256] elided
    %half = const f16[] dense [0.5]
    %mm = MatMul(%bx, %bw) : f16[64,256]
    %a1 = Add(%mm, %bias) : f16[64,256]
    %a2 = Mul(%half, %a1) : f16[64,256]
    %a3 = Sub(%br, %a2) : f16[64,256]
    %a4 = Sigmoid(%a3) : f16[64,256]
    return %a4
  }, kind = "matmul-epilogue"} : f16[64,256]
  return %y
})";

TEST(TileLowerGemm, FusedEpilogueGoldenText) {
  Model m = ParseKir(kFusedGemm);
  TileCostFigures f = FiguresOf(NpusimLike());
  auto p = GemmProblemOf(NodeNamed(m, "y"), DType::kF32);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->epilogue.size(), 4u);
  EXPECT_EQ(p->epilogue[0].operand, EpilogueStep::Operand::kRow);
  EXPECT_EQ(p->epilogue[0].arg, 4);  // the body constant, after the output
  EXPECT_EQ(p->epilogue[1].operand, EpilogueStep::Operand::kScalar);
  EXPECT_EQ(p->epilogue[2].operand, EpilogueStep::Operand::kFull);
  EXPECT_TRUE(p->epilogue[2].operand_first);
  GemmTiling t = Tiling(64, 128, 64, 64, 128, 32);
  auto k = LowerGemm(*p, t, f);
  ASSERT_TRUE(k.ok()) << k.status();
  k->plan.clear();
  EXPECT_EQ(Print(*k), R"(kernel @y {
  arg %x : f16[64,128] in
  arg %w : f16[128,256] in
  arg %res : f16[64,256] in
  arg %y : f16[64,256] out
  arg %bias : f16[256] const
  grid %m = 1, %n = 2 {
    buffer %As : f16[64,64] stage x2
    buffer %Bs : f16[64,128] stage x2
    group %wm = 1, %wn = 1 {
      buffer %Aa : f16[64,32] operand_a
      buffer %Bb : f16[32,128] operand_b
      buffer %acc : f32[64,128] accumulator
      buffer %e0 : f32[1,128] vector
      buffer %e2 : f32[64,128] vector
      fill %acc, 0
      pipelined(2) %k = 2 {
        copy %x[%m*64, %k*64] -> %As
        copy %w[%k*64, %n*128] -> %Bs
        sync global -> stage
        pipelined(1) %kk = 2 {
          copy %As[%wm*64, %kk*32] -> %Aa
          copy %Bs[%kk*32, %wn*128] -> %Bb
          sync stage -> operand_a
          mma %acc += %Aa * %Bb
        }
      }
      copy %bias[%n*128 + %wn*128] -> %e0
      copy %res[%m*64 + %wm*64, %n*128 + %wn*128] -> %e2
      ew add %acc <- %acc, %e0
      ew mul %acc <- 0.5, %acc
      ew sub %acc <- %e2, %acc
      ew sigmoid %acc <- %acc
      copy %acc -> %y[%m*64 + %wm*64, %n*128 + %wn*128]
    }
  }
}
)");
}

TEST(TileLowerGemm, SplitKAddsIntoY) {
  TargetDescription d = NpusimLike();
  d.compute_units = 128;
  TileCostFigures f = FiguresOf(d);
  GemmProblem p = Square(128, DType::kF32);
  p.K = 4096;
  p.args[0].shape = {128, 4096};
  p.args[1].shape = {4096, 128};
  GemmTiling t = Tiling(128, 128, 64, 128, 128, 64);
  t.split_k = 4;
  auto k = LowerGemm(p, t, f);
  ASSERT_TRUE(k.ok()) << k.status();
  const std::string text = Print(*k);
  EXPECT_THAT(text, HasSubstr("grid %m = 1, %n = 1, %s = 4 {"));
  EXPECT_THAT(text, HasSubstr("copy %A[%m*128, %s*1024 + %k*64] -> %As"));
  EXPECT_THAT(text, HasSubstr("copy %acc -> %Y[%m*128 + %wm*128, %n*128 + %wn*128] add"));
  EXPECT_THAT(k->plan, HasSubstr("split-K 4"));
}

TEST(TileLowerVector, ElementwiseChainWithRowAndScalar) {
  Model m = ParseKir(R"(graph @main(%x: f32[8,16,64], %g: f32[64]) {
  %y = kiln.Fused(%x, %g) {anchor = "Mul", body = graph @body(%bx: f32[8,16,64], %bg: f32[64]) {
    %two = const f32[] dense [2.0]
    %t = Mul(%bx, %bg) : f32[8,16,64]
    %u = Add(%t, %two) : f32[8,16,64]
    %v = Tanh(%u) : f32[8,16,64]
    return %v
  }, kind = "elementwise"} : f32[8,16,64]
  return %y
})");
  TileCostFigures f = FiguresOf(NpusimLike());
  auto k = LowerVectorNode(NodeNamed(m, "y"), f);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(Print(*k), R"(kernel @y {
  plan "elementwise over [128, 64], tiles 4x64"
  arg %x : f32[128,64] in
  arg %g : f32[1,64] in
  arg %y : f32[128,64] out
  grid %r = 32, %c = 1 {
    buffer %t_x : f32[4,64] vector
    buffer %t_g : f32[1,64] vector
    buffer %t_t : f32[4,64] vector
    buffer %t_u : f32[4,64] vector
    buffer %t_v : f32[4,64] vector
    copy %x[%r*4, %c*64] -> %t_x
    copy %g[0, %c*64] -> %t_g
    ew mul %t_t <- %t_x, %t_g
    ew add %t_u <- %t_t, 2
    ew tanh %t_v <- %t_u
    copy %t_v -> %y[%r*4, %c*64]
  }
}
)");
}

TEST(TileLowerVector, ReductionsKeepdimsEitherWay) {
  Model m = ParseKir(R"(graph @main(%x: f32[4,6,10]) {
  %s = ReduceMean(%x) {axes = [-1], keepdims = 0} : f32[4,6]
  %t = ReduceMax(%x) {axes = [1, 2]} : f32[4,1,1]
  return %s, %t
})");
  TileCostFigures f = FiguresOf(NpusimLike());
  auto mean = LowerVectorNode(NodeNamed(m, "s"), f);
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(Print(*mean), R"(kernel @s {
  plan "row reduction over [24, 10], tiles 1x10"
  arg %x : f32[24,10] in
  arg %s_2 : f32[24,1] out
  grid %r = 24 {
    buffer %t_x : f32[1,10] vector
    buffer %t_s : f32[1,1] vector
    copy %x[%r, 0] -> %t_x
    reduce sum %t_s <- %t_x axis 1
    ew mul %t_s <- %t_s, 0.1
    copy %t_s -> %s_2[%r, 0]
  }
}
)");
  auto max = LowerVectorNode(NodeNamed(m, "t"), f);
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_THAT(max->plan, HasSubstr("row reduction over [4, 60]"));
}

TEST(TileLowerVector, LayerNormAndErrors) {
  Model m = ParseKir(R"(graph @main(%x: f32[2,8,32], %g: f32[32], %b: f32[32]) {
  %y = LayerNormalization(%x, %g, %b) {axis = -1, epsilon = 0.001} : f32[2,8,32]
  %s = ReduceSum(%x) {axes = [0]} : f32[1,8,32]
  %c = Concat(%x, %x) {axis = 0} : f32[4,8,32]
  return %y, %s, %c
})");
  TileCostFigures f = FiguresOf(NpusimLike());
  auto ln = LowerNode(NodeNamed(m, "y"), DType::kF32, f);
  ASSERT_TRUE(ln.ok()) << ln.status();
  const std::string text = Print(*ln);
  EXPECT_THAT(text, HasSubstr("arg %g : f32[1,32] in"));
  EXPECT_THAT(text, HasSubstr("ew rsqrt"));
  EXPECT_THAT(LowerNode(NodeNamed(m, "s"), DType::kF32, f).status().message(),
              HasSubstr("only the innermost axes have a row form"));
  EXPECT_THAT(LowerNode(NodeNamed(m, "c"), DType::kF32, f).status().message(),
              HasSubstr("Concat has no elementwise or row-reduction form"));
}

}  // namespace
}  // namespace kiln::target::tile
