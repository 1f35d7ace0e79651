//===- cube_attention_test.cc - kiln.Attention as one fused kernel --------===//
//
// The fused attention kernel (cube_attention.cc) against the reference
// kernel of kiln.Attention: head sizes 64 and 128, plain, causal (the
// diagonal tile's triangle, row tiles of different lengths) and an
// additive mask (per head, and one key-padding row for all queries); the
// scores never reach global memory beyond the per-block workspace; the
// cube and the vector unit overlap; and what the kernel does not run is
// refused with a reason.
//
//===----------------------------------------------------------------------===//
#include <iostream>
#include <limits>

#include <gtest/gtest.h>

#include "graph/support/status.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/cube.h"
#include "tests/npusim/kernel_harness.h"

namespace kiln::testing {
namespace {

struct Case {
  int64_t b = 1, h = 2, s = 128, l = 128, d = 64;
  bool causal = false;
  Dims mask = {};  // empty: none
  DType dt = DType::kF16;
  int64_t live = -1;  // >= 0: the mask keeps keys 0 .. live only (a cache masked beyond the position)
};

struct Built {
  Graph g;
  Node* node = nullptr;
  absl::flat_hash_map<const Value*, Tensor> inputs;
};

std::unique_ptr<Built> Build(const Case& c) {
  auto b = std::make_unique<Built>();
  Graph& g = b->g;
  const Dims qd = {c.b, c.h, c.s, c.d}, kd = {c.b, c.h, c.l, c.d};
  Value* q = g.AddInput("q", Type::Tensor(c.dt, Shape::Static(qd)));
  Value* k = g.AddInput("k", Type::Tensor(c.dt, Shape::Static(kd)));
  Value* v = g.AddInput("v", Type::Tensor(c.dt, Shape::Static(kd)));
  std::vector<Value*> ins = {q, k, v};
  b->inputs = {{q, RandomTensor(c.dt, qd, 1)}, {k, RandomTensor(c.dt, kd, 2)}, {v, RandomTensor(c.dt, kd, 3)}};
  if (!c.mask.empty()) {
    Value* m = g.AddInput("mask", Type::Tensor(c.dt, Shape::Static(c.mask)));
    ins.push_back(m);
    Tensor mt = UniformTensor(c.dt, c.mask, -4, 0, 4);
    if (c.live >= 0) {
      const int64_t cols = c.mask.back();
      Tensor f(DType::kF32, c.mask);
      for (int64_t i = 0; i < f.numel(); ++i)
        f.data<float>()[i] = i % cols <= c.live ? mt.GetDouble(i) : -std::numeric_limits<float>::infinity();
      mt = CastTensor(f, c.dt);
    }
    b->inputs[m] = mt;
  }
  b->node = g.AddNode("Attention", ins, 1, "kiln");
  if (c.causal) b->node->SetAttr("causal", Attribute::Int(1));
  b->node->output(0)->set_type(Type::Tensor(c.dt, Shape::Static(qd)));
  return b;
}

// The attention kernel of `b`'s node on `m` (at most `max_blocks` blocks; 0: every core).
absl::StatusOr<target::npusim::GeneratedKernel> Generate(const Built& b, const sim::Machine& m, int max_blocks = 0) {
  target::npusim::KernelRequest req;
  req.node = b.node;
  req.machine = &m;
  req.max_blocks = max_blocks;
  return target::npusim::GenerateCubeAttention(req);
}

void Check(const Case& c) {
  SCOPED_TRACE(::testing::Message() << "s " << c.s << " l " << c.l << " d " << c.d << " causal " << c.causal
                                    << " mask rank " << c.mask.size());
  auto b = Build(c);
  sim::Machine m = sim::DefaultMachine();
  auto k = Generate(*b, m);
  ASSERT_TRUE(k.ok()) << k.status();
  auto run = RunKernelOnSim(*k, *b->node, b->inputs, m);
  ASSERT_TRUE(run.ok()) << run.status() << "\n" << k->plan;
  auto want = RunNodeOnReference(*b->node, b->inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  // P is rounded to f16 before P V, as on the chip.
  EXPECT_LT(MaxRelativeError(run->outputs[0], (*want)[0]), c.dt == DType::kF32 ? 1e-4 : 4e-3) << k->plan;
  // The scores stay on chip: HBM carries Q, K, V, the mask and Y (and at
  // most the workspace's P tiles, which the L2 absorbs).
  const sim::KernelStats& ks = run->stats.kernels.at(0);
  const int64_t qkvy = 2 * (2 * c.b * c.h * c.s * c.d + 2 * c.b * c.h * c.l * c.d);
  EXPECT_LT(ks.hbm_read_bytes + ks.hbm_write_bytes, qkvy + 4 * c.s * c.l * 4 * c.b * c.h / 8 + (1 << 20));
}

TEST(CubeAttention, MatchesTheReference) {
  Check({});
  Check({.s = 128, .l = 256, .d = 128});
  Check({.b = 2, .h = 1, .s = 192, .l = 192, .d = 32});
}

TEST(CubeAttention, Fp32OnTheCube) {
  Check({.dt = DType::kF32});
  Check({.h = 1, .s = 128, .l = 192, .d = 128, .causal = true, .dt = DType::kF32});
  Check({.b = 2, .h = 1, .s = 64, .l = 128, .d = 32, .mask = {2, 1, 1, 128}, .dt = DType::kF32});
}

TEST(CubeAttention, Causal) {
  Check({.s = 256, .l = 256, .causal = true});
  Check({.h = 1, .s = 192, .l = 192, .d = 128, .causal = true});
}

TEST(CubeAttention, AdditiveMasks) {
  Check({.b = 2, .h = 2, .s = 128, .l = 128, .mask = {2, 2, 128, 128}});
  Check({.b = 2, .h = 2, .s = 128, .l = 192, .mask = {2, 1, 1, 192}});
  Check({.b = 1, .h = 2, .s = 128, .l = 128, .causal = true, .mask = {128, 128}});
}

// The pipes work at once: the kernel is shorter than its pipes' busy
// cycles added up, and the vector unit (its bound on this machine: the
// softmax's passes over each 64 x 64 tile outweigh the cube's two products)
// is busy most of the time, the cube's products, the loads and P's round
// trip through the workspace hidden behind it.
TEST(CubeAttention, PipesOverlapAndTheVectorUnitBounds) {
  Case c{.b = 1, .h = 1, .s = 64, .l = 2048, .d = 128};
  auto b = Build(c);
  sim::Machine m = sim::DefaultMachine();
  auto k = Generate(*b, m, /*max_blocks=*/1);
  ASSERT_TRUE(k.ok()) << k.status();
  auto run = RunKernelOnSim(*k, *b->node, b->inputs, m, /*functional=*/false);
  ASSERT_TRUE(run.ok()) << run.status();
  const sim::KernelStats& ks = run->stats.kernels.at(0);
  auto busy = [&](sim::Pipe p) { return ks.pipes[static_cast<int>(p)].busy_cycles; };
  const double length = ks.end_cycle - ks.start_cycle;
  double all = 0;
  for (sim::Pipe p : {sim::Pipe::kMte1, sim::Pipe::kMte2, sim::Pipe::kMte3, sim::Pipe::kCube, sim::Pipe::kVector,
                      sim::Pipe::kFixp})
    all += busy(p);
  EXPECT_LT(length, 0.8 * all) << "pipes busy " << all << " in " << length;
  EXPECT_GT(busy(sim::Pipe::kVector), 0.75 * length) << "vector " << busy(sim::Pipe::kVector) << " of " << length;
}

// More keys than queries under a mask (a prefill into a static cache,
// masked beyond the prompt): each row tile finds its last live key tile
// from the mask and runs the body that ends there. The results match the
// reference, with the mask one row for all or a row per query, f16 or f32;
// the cache past the live keys is not read, and the cycles follow the live
// keys.
TEST(CubeAttention, PrefillRunsOnlyUpToTheLastLiveKeyTile) {
  sim::Machine m = sim::DefaultMachine();
  for (DType dt : {DType::kF32, DType::kF16})
    for (Dims mask : {Dims{1, 1, 128, 1024}, Dims{1, 1024}}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " mask rank " << mask.size());
      auto run = [&](int64_t live) {
        Case c{.b = 1, .h = 2, .s = 128, .l = 1024, .d = 64, .mask = mask, .dt = dt, .live = live};
        Check(c);
        auto b = Build(c);
        auto k = Generate(*b, m);
        EXPECT_TRUE(k.ok()) << k.status();
        if (!k.ok()) return std::make_pair(int64_t{-1}, -1.0);
        EXPECT_NE(k->plan.find("only up to the last key tile the mask leaves live"), std::string::npos) << k->plan;
        auto r = RunKernelOnSim(*k, *b->node, b->inputs, m);
        EXPECT_TRUE(r.ok()) << r.status();
        if (!r.ok()) return std::make_pair(int64_t{-1}, -1.0);
        const sim::KernelStats& ks = r->stats.kernels.at(0);
        return std::make_pair(ks.l2_miss_bytes + ks.l2_hit_bytes, r->stats.total_cycles);
      };
      const auto [few_bytes, few_cycles] = run(100);   // key tiles 0 and 1
      const auto [all_bytes, all_cycles] = run(1023);  // all 16
      // The 14 key tiles past the live ones are not read: of each head's
      // two row tiles, their K and V (8 KiB each at f16, 16 at f32).
      const int64_t tile = 64 * 64 * (dt == DType::kF32 ? 4 : 2);
      EXPECT_GT(all_bytes, 2 * 2 * 16 * 2 * tile);
      EXPECT_GT(all_bytes - few_bytes, 2 * 2 * 14 * 2 * tile);
      EXPECT_LT(few_cycles, 0.4 * all_cycles);
    }
}

// A decode step's attention (one query row) runs on the vector unit, f32 or
// f16, and reads only the tiles its mask leaves live.
TEST(CubeAttention, DecodeMatchesTheReference) {
  for (DType dt : {DType::kF32, DType::kF16}) {
    Check({.b = 1, .h = 3, .s = 1, .l = 256, .d = 64, .dt = dt});
    Check({.b = 2, .h = 2, .s = 1, .l = 192, .d = 128, .mask = {2, 1, 1, 192}, .dt = dt});
    Check({.b = 1, .h = 2, .s = 1, .l = 1024, .d = 64, .mask = {1, 1024}, .dt = dt, .live = 70});
  }
}

TEST(CubeAttention, DecodeReadsOnlyTheLiveCache) {
  sim::Machine m = sim::DefaultMachine();
  int64_t blocks = 0;
  auto hbm_read = [&](int64_t live) {
    Case c{.b = 1, .h = 4, .s = 1, .l = 1024, .d = 64, .mask = {1, 1024}, .dt = DType::kF32, .live = live};
    auto b = Build(c);
    auto k = Generate(*b, m);
    EXPECT_TRUE(k.ok()) << k.status();
    blocks = k.ok() ? k->block_dim : 0;
    auto run = RunKernelOnSim(*k, *b->node, b->inputs, m);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? run->stats.kernels.at(0).l2_miss_bytes + run->stats.kernels.at(0).l2_hit_bytes : 0;
  };
  // Keys 0 .. 70: two of the sixteen tiles of K and V per head (16 KiB
  // each), and each block's query (256 B) and mask row (4 KiB), which every
  // block that shares a row reads to find the live tiles.
  const int64_t two_tiles = hbm_read(70);
  EXPECT_GE(blocks, 4);
  EXPECT_LT(two_tiles, 4 * 2 * 2 * 16384 + blocks * (256 + 4096) + 4096);
  const int64_t all = hbm_read(1023);
  EXPECT_GT(all, 4 * 16 * 2 * 16384);
}

// With fewer query rows than cores, each row's live tiles are split among
// blocks (flash-decoding): partial softmaxes into the workspace, a
// `sync_all`, and the row's first block combining them. The results match
// the reference (the split path for 16 and 4 live tiles, the row's first
// block alone for 2), and a long cache's row takes a fraction of the
// cycles it takes on one block.
TEST(CubeAttention, DecodeSplitsARowsLiveTilesAcrossBlocks) {
  sim::Machine m = sim::DefaultMachine();
  for (DType dt : {DType::kF32, DType::kF16})
    for (int64_t live : {1000, 200, 100}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " live " << live);
      Case c{.b = 1, .h = 2, .s = 1, .l = 1024, .d = 64, .mask = {1, 1024}, .dt = dt, .live = live};
      Check(c);
      auto b = Build(c);
      auto split = Generate(*b, m), one = Generate(*b, m, /*max_blocks=*/2);
      ASSERT_TRUE(split.ok() && one.ok());
      EXPECT_NE(split->plan.find("3 live tiles or more split among 8 blocks"), std::string::npos) << split->plan;
      EXPECT_EQ(split->block_dim, 16);
      EXPECT_EQ(one->block_dim, 2);
      auto cycles = [&](const target::npusim::GeneratedKernel& k) {
        auto run = RunKernelOnSim(k, *b->node, b->inputs, m, /*functional=*/false);
        EXPECT_TRUE(run.ok()) << run.status();
        return run.ok() ? run->stats.total_cycles : -1.0;
      };
      const double with_split = cycles(*split), without = cycles(*one);
      std::cout << DTypeName(dt) << " live " << live << ": " << with_split << " cycles split, " << without
                << " on one block a row\n";
      if (live == 1000) {
        EXPECT_LT(with_split, 0.5 * without);
      }
      if (live == 100) {
        EXPECT_LT(with_split, without + 10);  // the few scalar instructions that find the row's first block alone
      }
    }
}

// Its control flow reads the mask (the live tiles): a timing-only run
// computes it, and reads the same cache as a functional run.
TEST(CubeAttention, DecodeReadsTheLiveCacheInATimingOnlyRunToo) {
  sim::Machine m = sim::DefaultMachine();
  Case c{.b = 1, .h = 4, .s = 1, .l = 1024, .d = 64, .mask = {1, 1024}, .dt = DType::kF32, .live = 70};
  auto b = Build(c);
  auto k = Generate(*b, m);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->steering_inputs, std::vector<int>{3});  // the mask
  auto read = [&](bool functional) {
    auto run = RunKernelOnSim(*k, *b->node, b->inputs, m, functional);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? std::make_pair(run->stats.kernels.at(0).l2_miss_bytes + run->stats.kernels.at(0).l2_hit_bytes,
                                     run->stats.total_cycles)
                    : std::make_pair(int64_t{-1}, -1.0);
  };
  EXPECT_EQ(read(false), read(true));
  // Without a mask nothing steers: every tile is read in either run.
  Case plain{.b = 1, .h = 4, .s = 1, .l = 1024, .d = 64, .dt = DType::kF32};
  auto bp = Build(plain);
  auto kp = Generate(*bp, m);
  ASSERT_TRUE(kp.ok()) << kp.status();
  EXPECT_TRUE(kp->steering_inputs.empty());
}

TEST(CubeAttention, RefusesWhatItDoesNotRun) {
  sim::Machine m = sim::DefaultMachine();
  auto refused = [&](const Case& c) {
    auto b = Build(c);
    auto k = Generate(*b, m);
    EXPECT_TRUE(absl::IsUnimplemented(k.status())) << k.status();
    return std::string(k.status().message());
  };
  EXPECT_NE(refused({.s = 100}).find("multiples of 64"), std::string::npos);
  EXPECT_NE(refused({.d = 256}).find("head size"), std::string::npos);
  EXPECT_NE(refused({.mask = {2, 128, 64}}).find("a column per key"), std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
