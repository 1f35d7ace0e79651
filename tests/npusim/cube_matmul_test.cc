//===- cube_matmul_test.cc - Cube GEMM kernels on the SystemC model ------===//
//
// MatMul and Gemm kernels from GenerateCubeKernel run on the simulated NPU
// and are compared with the reference kernels (f32 within 1e-4 relative,
// f16/bf16 within 1e-2); the timing tests state their bounds in the
// machine's own terms (the cube's peak rate, the cost model's estimate).
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/isa/asm.h"
#include "sim/machine/machine.h"
#include "sim/model/exec.h"
#include "target/npusim/kernels/cube.h"
#include "target/npusim/kernels/cube_matmul.h"
#include "target/npusim/kernels/cube_figures.h"
#include "tests/npusim/kernel_harness.h"

namespace kiln::testing {
namespace {

using target::npusim::GeneratedKernel;
using target::npusim::KernelRequest;

struct Case {
  std::string op = "MatMul";
  DType dt = DType::kF16;
  Dims a, b, c;  // c empty: no C
  bool has_c = false;
  bool trans_a = false, trans_b = false;
  float alpha = 1, beta = 1;
  bool const_b = false;
  int max_blocks = 0;
};

// The cube kernel for `n` on machine `m`.
absl::StatusOr<GeneratedKernel> GenerateCube(const Node* n, const sim::Machine& m, int max_blocks = 0,
                                             bool want_tile_ir = false) {
  KernelRequest req;
  req.node = n;
  req.machine = &m;
  req.max_blocks = max_blocks;
  req.want_tile_ir = want_tile_ir;
  return target::npusim::GenerateCubeKernel(req);
}

std::string Describe(const Case& k) {
  std::string s = absl::StrCat(k.op, " ", DTypeName(k.dt), " [", absl::StrJoin(k.a, ","), "]x[",
                               absl::StrJoin(k.b, ","), "]");
  if (k.has_c) absl::StrAppend(&s, " C[", absl::StrJoin(k.c, ","), "]");
  if (k.trans_a) absl::StrAppend(&s, " transA");
  if (k.trans_b) absl::StrAppend(&s, " transB");
  if (k.alpha != 1) absl::StrAppend(&s, " alpha=", k.alpha);
  if (k.beta != 1) absl::StrAppend(&s, " beta=", k.beta);
  if (k.const_b) absl::StrAppend(&s, " const B");
  if (k.max_blocks) absl::StrAppend(&s, " max_blocks=", k.max_blocks);
  return s;
}

// Builds the node, infers its output, generates and runs the kernel, and
// compares with the reference.
void RunCase(const Case& k, uint32_t seed = 1) {
  SCOPED_TRACE(Describe(k));
  Graph g;
  absl::flat_hash_map<const Value*, Tensor> inputs;
  Value* a = g.AddInput("a", Type::Tensor(k.dt, Shape::Static(k.a)));
  inputs[a] = RandomTensor(k.dt, k.a, seed);
  Value* b = nullptr;
  Tensor bt = RandomTensor(k.dt, k.b, seed + 1);
  if (k.const_b) {
    b = g.AddConstant("b", bt);
  } else {
    b = g.AddInput("b", Type::Tensor(k.dt, Shape::Static(k.b)));
    inputs[b] = bt;
  }
  std::vector<Value*> ins = {a, b};
  if (k.has_c) {
    Value* c = g.AddInput("c", Type::Tensor(k.dt, Shape::Static(k.c)));
    inputs[c] = RandomTensor(k.dt, k.c, seed + 2);
    ins.push_back(c);
  }
  Node* n = g.AddNode(k.op, ins, 1);
  if (k.op == "Gemm") {
    n->SetAttr("transA", Attribute::Int(k.trans_a));
    n->SetAttr("transB", Attribute::Int(k.trans_b));
    n->SetAttr("alpha", Attribute::Float(k.alpha));
    n->SetAttr("beta", Attribute::Float(k.beta));
  }
  // The output shape from the reference itself.
  auto ref = RunNodeOnReference(*n, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  n->output(0)->set_type(Type::Tensor(k.dt, Shape::Static((*ref)[0].dims())));
  sim::Machine m = sim::DefaultMachine();
  auto kernel = GenerateCube(n, m, k.max_blocks, /*want_tile_ir=*/true);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->engine, "cube");
  EXPECT_FALSE(kernel->plan.empty());
  EXPECT_GT(kernel->estimated_cycles, 0);
  // The program's tiling as tile IR: the shared canonical GEMM (every GEMM
  // but those with a 1-D operand or K = 1, an outer product), which parses
  // back, prints the same and verifies against the machine's buffers.
  const int64_t K = k.op == "Gemm" && k.trans_a ? k.a[0] : k.a.back();
  if (k.a.size() > 1 && k.b.size() > 1 && K > 1) {
    EXPECT_FALSE(kernel->tile_ir.empty());
  }
  if (!kernel->tile_ir.empty()) {
    auto tk = target::tile::Parse(kernel->tile_ir);
    ASSERT_TRUE(tk.ok()) << tk.status();
    EXPECT_EQ(target::tile::Print(*tk), kernel->tile_ir);
    EXPECT_EQ(tk->plan, kernel->plan);
    absl::Status verified = target::tile::Verify(*tk, target::npusim::CubeFiguresOf(m).target);
    EXPECT_TRUE(verified.ok()) << verified;
  }
  auto run = RunKernelOnSim(*kernel, *n, inputs, m);
  ASSERT_TRUE(run.ok()) << run.status() << "\n" << kernel->plan;
  double tol = k.dt == DType::kF32 ? 1e-4 : 1e-2;
  EXPECT_LE(MaxRelativeError(run->outputs[0], (*ref)[0]), tol) << kernel->plan;
}

class CubeMatMulDTypes : public ::testing::TestWithParam<DType> {};

TEST_P(CubeMatMulDTypes, TwoDimensional) {
  const DType dt = GetParam();
  for (auto [a, b] : std::vector<std::pair<Dims, Dims>>{
           {{1, 1}, {1, 1}},
           {{16, 16}, {16, 16}},
           {{17, 33}, {33, 5}},
           {{1, 300}, {300, 70}},
           {{5, 7}, {7, 1}},
           {{130, 200}, {200, 270}},
           {{64, 1000}, {1000, 48}},
           {{200, 96}, {96, 530}},
       }) {
    Case k;
    k.dt = dt;
    k.a = a;
    k.b = b;
    RunCase(k);
  }
}

TEST_P(CubeMatMulDTypes, OneDimensionalOperands) {
  const DType dt = GetParam();
  for (auto [a, b] : std::vector<std::pair<Dims, Dims>>{{{300}, {300, 40}}, {{20, 30}, {30}}, {{40}, {40}}}) {
    Case k;
    k.dt = dt;
    k.a = a;
    k.b = b;
    RunCase(k);
  }
}

TEST_P(CubeMatMulDTypes, BatchedWithBroadcast) {
  const DType dt = GetParam();
  for (auto [a, b] : std::vector<std::pair<Dims, Dims>>{
           {{3, 20, 40}, {40, 24}},            // B shared: one tall GEMM
           {{4, 50, 64}, {1, 64, 80}},
           {{2, 1, 20, 40}, {3, 40, 24}},      // both broadcast
           {{2, 3, 33, 17}, {2, 3, 17, 9}},
           {{40}, {2, 40, 18}},                // 1-D A against a batch
           {{5, 16, 32}, {32, 8}},             // B 2-D, A batched
       }) {
    Case k;
    k.dt = dt;
    k.a = a;
    k.b = b;
    RunCase(k);
  }
}

TEST_P(CubeMatMulDTypes, ConstantB) {
  // Constant B is read as its fractal image (laid out by the harness as the
  // driver does), transposed or not, with ragged edges and several tiles.
  Case k;
  k.dt = GetParam();
  k.a = {37, 90};
  k.b = {90, 50};
  k.const_b = true;
  RunCase(k);
  k.a = {300, 130};
  k.b = {130, 290};
  k.max_blocks = 3;
  RunCase(k);
  k.op = "Gemm";
  k.a = {45, 100};
  k.b = {70, 100};
  k.trans_b = true;
  k.has_c = true;
  k.c = {70};
  k.max_blocks = 0;
  RunCase(k);
}

TEST(CubeMatMul, ConstantOperandsAreReadAsFractals) {
  Graph g;
  Value* a = g.AddInput("a", Type::Tensor(DType::kF16, Shape::Static({64, 96})));
  Value* b = g.AddConstant("w", Tensor(DType::kF16, {128, 96}));  // Gemm transB: [N, K]
  Node* n = g.AddNode("Gemm", {a, b}, 1);
  n->SetAttr("transB", Attribute::Int(1));
  n->output(0)->set_type(Type::Tensor(DType::kF16, Shape::Static({64, 128})));
  sim::Machine m = sim::DefaultMachine();
  auto kernel = GenerateCube(n, m);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ASSERT_EQ(kernel->fractal_constants.size(), 1u);
  const target::npusim::FractalConstant& f = kernel->fractal_constants[0];
  EXPECT_EQ(f.arg, 1);
  EXPECT_EQ(f.rows, 96);  // op(B) is [K, N]
  EXPECT_EQ(f.cols, 128);
  EXPECT_TRUE(f.transpose);
  EXPECT_NE(kernel->plan.find("B as fractals"), std::string::npos) << kernel->plan;
  // B arrives by copy_gm_l1 of whole bands, A still by nd2nz.
  int copies = 0, nd2nz = 0;
  for (const sim::Inst& in : kernel->program.insts) {
    copies += in.op == sim::Op::kCopyGmL1;
    nd2nz += in.op == sim::Op::kNd2Nz;
  }
  EXPECT_GT(copies, 0);
  EXPECT_GT(nd2nz, 0);
  // A runtime B stays row-major.
  Value* b2 = g.AddInput("b2", Type::Tensor(DType::kF16, Shape::Static({128, 96})));
  n->SetInput(1, b2);
  auto plain = GenerateCube(n, m);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->fractal_constants.empty());
}

TEST(FractalImage, LaysOutAMatrixAsNd2nzWould) {
  // [20, 10] f32 (K0 = 8): 2 x 2 fractals of 16 x 8, zero-padded.
  Tensor t(DType::kF32, {20, 10});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i + 1);
  Tensor img = target::npusim::FractalImage(t, {0, 20, 10, false});
  EXPECT_EQ(img.dims(), (Dims{2, 2, 16, 8}));
  auto at = [&](int64_t i, int64_t j) { return img.data<float>()[(((i / 16) * 2 + j / 8) * 16 + i % 16) * 8 + j % 8]; };
  EXPECT_EQ(at(0, 0), 1);
  EXPECT_EQ(at(3, 9), 3 * 10 + 9 + 1);
  EXPECT_EQ(at(19, 7), 19 * 10 + 7 + 1);
  EXPECT_EQ(at(19, 12), 0);  // padding columns
  EXPECT_EQ(at(25, 0), 0);   // padding rows
  // transpose: the constant holds [cols, rows].
  Tensor tt = target::npusim::FractalImage(t, {0, 10, 20, true});
  EXPECT_EQ(tt.dims(), (Dims{1, 3, 16, 8}));
  EXPECT_EQ(tt.data<float>()[((0 * 3 + 1) * 16 + 2) * 8 + 1], t.data<float>()[9 * 10 + 2]);  // op(B)[2][9] = t[9][2]
}

// A Conv weight [Cout, Cin, KH, KW] as img2col's B: row
// ((c1*KH + kh)*KW + kw)*k0 + c0 holds channel c1*k0 + c0 at tap (kh, kw)
// (zero past Cin), column co output channel co; f32 in L0B's own form,
// 16-bit dtypes as nd2nz's fractals. Every element checked, padding too.
TEST(FractalImage, LaysOutAConvWeightAsImg2colsB) {
  for (DType dt : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dt));
    const int64_t co = 20, ci = 11, kh = 3, kw = 2, taps = kh * kw;
    const int64_t k0 = dt == DType::kF32 ? 8 : 16, c1n = (ci + k0 - 1) / k0, rows = c1n * taps * k0;
    Tensor w(dt, {co, ci, kh, kw});
    for (int64_t i = 0; i < w.numel(); ++i) {
      if (dt == DType::kF32) w.data<float>()[i] = static_cast<float>(i + 1);
      else w.data<uint16_t>()[i] = static_cast<uint16_t>(i + 1);
    }
    target::npusim::FractalConstant f{0, rows, co, false, true};
    Tensor img = target::npusim::FractalImage(w, f);
    const int64_t es = static_cast<int64_t>(DTypeSize(dt));
    EXPECT_EQ(img.dims(), target::npusim::FractalConstantDims(f, static_cast<int>(es)));
    const int64_t ncol = img.dim(1);
    auto value = [&](int64_t at) {
      return dt == DType::kF32 ? static_cast<int64_t>(img.data<float>()[at]) : img.data<uint16_t>()[at];
    };
    const int64_t grid_rows = img.dim(0) * (dt == DType::kF32 ? 8 : 16), grid_cols = ncol * 16;
    for (int64_t i = 0; i < grid_rows; ++i)
      for (int64_t j = 0; j < grid_cols; ++j) {
        const int64_t c = i / k0 / taps * k0 + i % k0, tap = i / k0 % taps;
        const int64_t want = i < rows && j < co && c < ci ? (j * ci + c) * taps + tap + 1 : 0;
        const int64_t at = dt == DType::kF32 ? (((i / 8) * ncol + j / 16) * 16 + j % 16) * 8 + i % 8
                                             : (((i / 16) * ncol + j / 16) * 16 + i % 16) * 16 + j % 16;
        ASSERT_EQ(value(at), want) << "row " << i << " column " << j;
      }
  }
}

TEST_P(CubeMatMulDTypes, GemmTransposesAlphaBeta) {
  const DType dt = GetParam();
  const int64_t M = 45, N = 70, K = 100;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Case k;
      k.op = "Gemm";
      k.dt = dt;
      k.a = ta ? Dims{K, M} : Dims{M, K};
      k.b = tb ? Dims{N, K} : Dims{K, N};
      k.trans_a = ta;
      k.trans_b = tb;
      k.has_c = true;
      k.c = {N};
      RunCase(k);
    }
  for (Dims c : std::vector<Dims>{{N}, {1, N}, {M, N}, {M, 1}, {1}, {}}) {
    for (auto [alpha, beta] : std::vector<std::pair<float, float>>{{1, 1}, {0.5f, 2.0f}, {1, 0.25f}}) {
      Case k;
      k.op = "Gemm";
      k.dt = dt;
      k.a = {M, K};
      k.b = {N, K};
      k.trans_b = true;
      k.has_c = true;
      k.c = c;
      k.alpha = alpha;
      k.beta = beta;
      RunCase(k);
    }
  }
  Case k;
  k.op = "Gemm";
  k.dt = dt;
  k.a = {M, K};
  k.b = {K, N};
  k.alpha = 1.5f;
  RunCase(k);
}

TEST_P(CubeMatMulDTypes, ManyTilesOnFewBlocks) {
  Case k;
  k.dt = GetParam();
  k.a = {300, 130};
  k.b = {130, 290};
  k.max_blocks = 3;
  RunCase(k);
  k.op = "Gemm";
  k.has_c = true;
  k.c = {1, 290};
  RunCase(k);
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, CubeMatMulDTypes, ::testing::Values(DType::kF16, DType::kBF16, DType::kF32),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(DTypeName(i.param)); });

TEST(CubeMatMul, RejectsWhatTheCubeDoesNotRun) {
  Graph g;
  Value* a = g.AddInput("a", Type::Tensor(DType::kI32, Shape::Static({4, 4})));
  Value* b = g.AddInput("b", Type::Tensor(DType::kI32, Shape::Static({4, 4})));
  Node* n = g.AddNode("MatMul", {a, b}, 1);
  n->output(0)->set_type(Type::Tensor(DType::kI32, Shape::Static({4, 4})));
  sim::Machine m = sim::DefaultMachine();
  auto k = GenerateCube(n, m);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("i32"), std::string::npos) << k.status();
}

// A GEMM node of static shape for the timing tests.
struct GemmNode {
  Graph g;
  Node* n = nullptr;
  absl::flat_hash_map<const Value*, Tensor> inputs;
};

std::unique_ptr<GemmNode> MakeGemm(int64_t M, int64_t N, int64_t K, DType dt, bool const_b = false) {
  auto r = std::make_unique<GemmNode>();
  Value* a = r->g.AddInput("a", Type::Tensor(dt, Shape::Static({M, K})));
  Value* b = const_b ? r->g.AddConstant("b", Tensor(dt, {K, N}))
                     : r->g.AddInput("b", Type::Tensor(dt, Shape::Static({K, N})));
  r->n = r->g.AddNode("MatMul", {a, b}, 1);
  r->n->output(0)->set_type(Type::Tensor(dt, Shape::Static({M, N})));
  r->inputs[a] = Tensor(dt, {M, K});
  if (!const_b) r->inputs[b] = Tensor(dt, {K, N});
  return r;
}

struct Timing {
  double cycles = 0, estimate = 0, cube_util = 0;
  std::string plan;
};

Timing TimeGemm(int64_t M, int64_t N, int64_t K, DType dt, int max_blocks, bool const_b = false,
                const sim::Machine& m = sim::DefaultMachine()) {
  auto gn = MakeGemm(M, N, K, dt, const_b);
  auto kernel = GenerateCube(gn->n, m, max_blocks);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return {};
  auto run = RunKernelOnSim(*kernel, *gn->n, gn->inputs, m, /*functional=*/false);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return {};
  Timing t;
  t.cycles = static_cast<double>(run->stats.total_cycles);
  t.estimate = kernel->estimated_cycles;
  double macs = static_cast<double>(M) * N * K;
  int64_t cores = max_blocks ? max_blocks : m.chip().ai_cores();
  double rate = dt == DType::kF32 ? m.core().cube_fp32_macs_per_cycle() : m.core().cube_fp16_macs_per_cycle();
  t.cube_util = macs / (t.cycles * rate * static_cast<double>(cores));
  t.plan = kernel->plan;
  return t;
}

TEST(CubeMatMulTiming, Fp16Gemm1024OnOneCoreReachesTheCubesPeak) {
  Timing t = TimeGemm(1024, 1024, 1024, DType::kF16, 1);
  std::printf("1024^3 f16, one core: %.0f cycles, %.1f%% of peak, estimate %.0f (%s)\n", t.cycles,
              100 * t.cube_util, t.estimate, t.plan.c_str());
  EXPECT_GE(t.cube_util, 0.85) << t.plan;
  // The cost model within 10% of the simulation where the cube bounds.
  EXPECT_LE(t.estimate, 1.10 * t.cycles);
  EXPECT_GE(t.estimate, t.cycles / 1.10);
}

TEST(CubeMatMulTiming, ConstantWeightsAsFractalsTakeFewerBursts) {
  // On a machine with 2-cycle DMA bursts, tiles 64 columns wide over
  // B [1024, 1024] f32: row-major, each K stage of a tile is 256 rows of
  // 256 bytes, 256 bursts (docs/npu.md: a DMA of n
  // bursts moves at most bytes / (n * mte_burst_cycles) per cycle, here
  // 128 B/cycle); as the fractal image it is 16 bands of 8 fractals, 16
  // bursts at the pipe's 256 B/cycle. The loads bound this tiling, so the
  // fractal image makes it faster.
  auto gn = MakeGemm(16, 1024, 1024, DType::kF32, /*const_b=*/true);
  sim::Machine m = sim::DefaultMachine();
  m.mutable_core()->set_mte_burst_cycles(2);
  auto spec = target::npusim::GemmSpecOfNode(*gn->n, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  target::tile::GemmTiling t;
  t.bm = t.gm = 16, t.bn = t.gn = 64, t.tk = 64, t.bk = 256, t.accumulator_stages = 2;
  t.blocks = 1;
  double cycles[2] = {0, 0};
  int64_t b_bursts[2] = {0, 0};
  for (int fractal = 0; fractal < 2; ++fractal) {
    target::npusim::GemmSpec s = *spec;
    target::npusim::GeneratedKernel k;
    if (fractal) k.fractal_constants = target::npusim::UseFractalConstants(s, t);
    ASSERT_EQ(k.fractal_constants.size(), static_cast<size_t>(fractal));
    auto text = target::npusim::GemmKasm(s, t, m);
    ASSERT_TRUE(text.ok()) << text.status();
    auto file = sim::Assemble(*text, "gemm.kasm");
    ASSERT_TRUE(file.ok()) << file.status();
    k.program = std::move(file->program);
    for (const sim::Inst& in : k.program.insts)
      if ((in.op == sim::Op::kNd2Nz || in.op == sim::Op::kCopyGmL1) && in.ops[1].arg == 1)
        b_bursts[fractal] = std::max(b_bursts[fractal], sim::GmRuns(in));
    auto run = RunKernelOnSim(k, *gn->n, gn->inputs, m, /*functional=*/false);
    ASSERT_TRUE(run.ok()) << run.status();
    cycles[fractal] = static_cast<double>(run->stats.total_cycles);
  }
  std::printf("16x1024x1024 f32, 16x64 tiles, K stages of 256: B row-major %.0f cycles (%lld bursts per stage), "
              "as fractals %.0f (%lld)\n",
              cycles[0], static_cast<long long>(b_bursts[0]), cycles[1], static_cast<long long>(b_bursts[1]));
  EXPECT_EQ(b_bursts[0], 256);
  EXPECT_EQ(b_bursts[1], 16);
  EXPECT_LT(cycles[1], 0.9 * cycles[0]);
}

TEST(CubeMatMulTiming, Fp16Gemm1024OnAllCoresMatchesTheEstimate) {
  Timing t = TimeGemm(1024, 1024, 1024, DType::kF16, 0);
  std::printf("1024^3 f16, all cores: %.0f cycles, %.1f%% of peak, estimate %.0f (%s)\n", t.cycles,
              100 * t.cube_util, t.estimate, t.plan.c_str());
  // HBM-bound (the cores share 1,200 B/cycle): the estimate within 20%.
  EXPECT_LE(t.estimate, 1.2 * t.cycles);
  EXPECT_GE(t.estimate, t.cycles / 1.2);
  EXPECT_GE(t.cube_util, 0.3);
}

}  // namespace
}  // namespace kiln::testing
