//===- l2_prefetch_plan_test.cc - Which weights are read into the L2 ahead ===//
//
// The plan of target/npusim/l2_prefetch_plan.h on modules written by hand
// (the tasks' engines, estimates and buffers are all it reads): a GEMV's
// weights are read ahead, as early as the L2 holds what the tasks between
// touch, where those tasks leave HBM idle long enough to fill it, and so
// are a LayerNorm's small constants; a Gather's table and a compute-bound
// kernel's weights are not; a
// weight larger than half the budget is read in part; prefetches are
// issued in order; a machine without an L2 gets none. End to end, a chain
// of GEMVs with vector work between them computes the same numbers with
// the prefetches as without, reads the weights from HBM once either way,
// and takes fewer cycles.
//
//===----------------------------------------------------------------------===//
#include "target/npusim/l2_prefetch_plan.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/machine/machine.h"
#include "tests/target/npusim_test_util.h"

namespace kiln::target::npusim {
namespace {

using artifact::Buffer;

constexpr int64_t kMiB = 1 << 20;

struct Module {
  artifact::NpusimModule m;
  int Buf(const std::string& name, Buffer::Kind kind, int64_t bytes) {
    Buffer* b = m.add_buffers();
    b->set_name(name);
    b->set_kind(kind);
    b->set_bytes(bytes);
    return m.buffers_size() - 1;
  }
  int Task(const std::string& name, const std::string& engine, double cycles, const std::vector<int>& args) {
    artifact::Task* t = m.add_tasks();
    t->set_node(name);
    t->set_engine(engine);
    t->set_estimated_cycles(cycles);
    for (int a : args) t->mutable_kernel()->add_args(a);
    return m.tasks_size() - 1;
  }
  // The prefetches for `task`: their buffers, bytes and starts.
  std::vector<const artifact::L2Prefetch*> For(int task) const {
    std::vector<const artifact::L2Prefetch*> out;
    for (const artifact::L2Prefetch& p : m.prefetches())
      if (p.task() == task) out.push_back(&p);
    return out;
  }
};

// At 1200 B/cycle, a weight streamed at HBM's rate.
double StreamCycles(int64_t bytes) { return static_cast<double>(bytes) / 1200.0; }

TEST(L2PrefetchPlan, AGemvsWeightsAreReadAheadAndAGathersAreNot) {
  sim::Machine machine = sim::DefaultMachine();  // a 32 MiB L2: 24 MiB of budget
  Module mod;
  const int x = mod.Buf("x", Buffer::INTERMEDIATE, 3072), y = mod.Buf("y", Buffer::INTERMEDIATE, 3072);
  const int w1 = mod.Buf("w1", Buffer::CONSTANT, 8 * kMiB), w2 = mod.Buf("w2", Buffer::CONSTANT, 8 * kMiB);
  const int table = mod.Buf("table", Buffer::CONSTANT, 3 * kMiB), small = mod.Buf("wc", Buffer::CONSTANT, 2 * kMiB);
  mod.Task("norm", "vector", 3000, {x, y});  // HBM idle for 3000 cycles: a third of the fill
  const int gemv1 = mod.Task("gemv1", "cube", StreamCycles(8 * kMiB) * 1.3, {y, w1, x});
  const int gather = mod.Task("gather", "vector", 1000, {table, x});
  const int gemv2 = mod.Task("gemv2", "cube", StreamCycles(8 * kMiB) * 1.3, {x, w2, y});
  // Its weights take a tenth of its time: bound by computing.
  const int conv = mod.Task("conv", "cube", StreamCycles(2 * kMiB) * 10, {y, small, x});
  // A LayerNorm's scale: small, read ahead so the kernel does not wait HBM's latency for it.
  const int scale = mod.Buf("scale", Buffer::CONSTANT, 3072);
  const int norm = mod.Task("norm2", "vector", 1500, {x, scale, y});
  PlanL2Prefetches(mod.m, machine);

  ASSERT_EQ(mod.For(gemv1).size(), 1u);
  EXPECT_EQ(mod.For(gemv1)[0]->buffer(), w1);
  EXPECT_EQ(mod.For(gemv1)[0]->bytes(), 8 * kMiB);
  EXPECT_EQ(mod.For(gemv1)[0]->start(), 0);  // with the norm, the first task
  ASSERT_EQ(mod.For(gemv2).size(), 1u);
  EXPECT_EQ(mod.For(gemv2)[0]->bytes(), 8 * kMiB);
  // As early as the budget holds: back to the first task (w1, the table and
  // w2 are 19 MiB), never before the prefetch before it.
  EXPECT_EQ(mod.For(gemv2)[0]->start(), 0);
  EXPECT_TRUE(mod.For(gather).empty());
  EXPECT_TRUE(mod.For(conv).empty());
  ASSERT_EQ(mod.For(norm).size(), 1u);
  EXPECT_EQ(mod.For(norm)[0]->buffer(), scale);
  EXPECT_EQ(mod.For(norm)[0]->bytes(), 3072);

  // Without an L2, none.
  sim::Machine none = machine;
  none.mutable_chip()->set_l2_size_mib(0);
  Module again = mod;
  again.m.clear_prefetches();
  PlanL2Prefetches(again.m, none);
  EXPECT_EQ(again.m.prefetches_size(), 0);
}

TEST(L2PrefetchPlan, TooLittleIdleHbmTimeBeforeItMeansNone) {
  // The task before leaves HBM idle for a tenth of the fill's time: the
  // GEMV would wait for the prefetch's fills rather than make its own.
  sim::Machine machine = sim::DefaultMachine();
  Module mod;
  const int x = mod.Buf("x", Buffer::INTERMEDIATE, 3072), w = mod.Buf("w", Buffer::CONSTANT, 8 * kMiB);
  mod.Task("norm", "vector", StreamCycles(8 * kMiB) / 10, {x});
  mod.Task("gemv", "cube", StreamCycles(8 * kMiB), {x, w});
  PlanL2Prefetches(mod.m, machine);
  EXPECT_EQ(mod.m.prefetches_size(), 0);
}

TEST(L2PrefetchPlan, ItStartsNoEarlierThanTheL2HoldsWhatTheTasksBetweenTouch) {
  sim::Machine machine = sim::DefaultMachine();
  Module mod;
  const int x = mod.Buf("x", Buffer::INTERMEDIATE, 3072);
  const int big = mod.Buf("activations", Buffer::INTERMEDIATE, 20 * kMiB);
  const int w = mod.Buf("w", Buffer::CONSTANT, 6 * kMiB);
  mod.Task("first", "vector", 1000, {x});
  const int wide = mod.Task("wide", "vector", 20000, {big, x});  // 20 MiB: with w, past 24 MiB
  mod.Task("after", "vector", 2000, {x});
  const int gemv = mod.Task("gemv", "cube", StreamCycles(6 * kMiB), {x, w});
  PlanL2Prefetches(mod.m, machine);
  ASSERT_EQ(mod.For(gemv).size(), 1u);
  EXPECT_EQ(mod.For(gemv)[0]->start(), wide + 1);
  EXPECT_EQ(mod.For(gemv)[0]->bytes(), 6 * kMiB);
}

TEST(L2PrefetchPlan, AWeightBeyondHalfTheBudgetIsReadInPart) {
  sim::Machine machine = sim::DefaultMachine();
  Module mod;
  const int x = mod.Buf("x", Buffer::INTERMEDIATE, 3072);
  const int logits = mod.Buf("logits", Buffer::INTERMEDIATE, 200000);
  const int emb = mod.Buf("embedding", Buffer::CONSTANT, 150 * kMiB);
  const int w = mod.Buf("w", Buffer::CONSTANT, 4 * kMiB);
  mod.Task("norm", "vector", 1000, {x});
  mod.Task("gemv", "cube", StreamCycles(4 * kMiB), {x, w});
  mod.Task("norm2", "vector", 5000, {x});
  const int head = mod.Task("head", "cube", StreamCycles(150 * kMiB), {x, emb, logits});
  PlanL2Prefetches(mod.m, machine);
  ASSERT_EQ(mod.For(head).size(), 1u);
  const artifact::L2Prefetch& p = *mod.For(head)[0];
  EXPECT_EQ(p.buffer(), emb);
  // Its first bytes: at least half the budget, and what the budget leaves
  // beside the tasks from its start.
  EXPECT_GE(p.bytes(), 12 * kMiB);
  EXPECT_LE(p.bytes(), 24 * kMiB);
  // In order: no earlier than the prefetch before it.
  ASSERT_EQ(mod.m.prefetches_size(), 2);
  EXPECT_LE(mod.m.prefetches(0).start(), mod.m.prefetches(1).start());
  EXPECT_LT(p.start(), head);
}

// x[1,1024] -> vector work -> MatMul 1024x2048 -> vector work -> MatMul
// 2048x1024 -> Relu: two GEMVs streaming 8 MiB of f32 weights each, after
// kernels that leave HBM idle (a decode layer's LayerNorms and attention).
Model GemvChain() {
  using npusim_test::F32;
  Model m;
  Graph& g = *m.graph;
  Value* v = g.AddInput("x", F32({1, 1024}));
  auto vector_work = [&](const std::string& at) {
    int i = 0;
    for (const char* op : {"Tanh", "Sigmoid", "Abs", "Neg", "Sigmoid", "Tanh"})
      v = g.AddNode(op, {v}, {absl::StrCat(at, i++)})->output(0);
  };
  vector_work("a");
  v = g.AddNode("MatMul", {v, g.AddConstant("w1", testing_util::Random({1024, 2048}, 1))}, {"h"})->output(0);
  vector_work("b");
  v = g.AddNode("MatMul", {v, g.AddConstant("w2", testing_util::Random({2048, 1024}, 2))}, {"y"})->output(0);
  g.AddOutput(g.AddNode("Relu", {v}, {"z"})->output(0));
  EXPECT_TRUE(InferShapes(g).ok());
  return m;
}

TEST(L2PrefetchPlan, AGemvChainRunsFasterWithTheSameNumbers) {
  Model m = GemvChain();
  auto t = npusim_test::Npusim();
  CompileOptions on;
  on.fusion = false;  // each op its own kernel
  CompileOptions off = on;
  off.settings = {{"l2-prefetch", "false"}};
  auto with = CompileForNpusim(m, *t, on);
  auto without = CompileForNpusim(m, *t, off);
  ASSERT_TRUE(with.ok()) << with.status();
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->npusim().prefetches_size(), 0);
  // Both weights, each for its MatMul.
  int64_t ahead = 0;
  for (const artifact::L2Prefetch& p : with->npusim().prefetches()) {
    EXPECT_EQ(with->npusim().tasks(p.task()).engine(), "cube");
    EXPECT_LT(p.start(), p.task());
    ahead += p.bytes();
  }
  EXPECT_GE(ahead, 16 * kMiB);

  const std::vector<Tensor> inputs = {testing_util::Random({1, 1024}, 3)};
  std::vector<Tensor> outs[2];
  sim::RunStats stats[2];
  for (int i = 0; i < 2; ++i) {
    auto loaded = runtime::LoadedModel::FromArtifact(i ? *without : *with, "chain.kiln", NpusimModuleLoader());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    auto got = (*loaded)->Run(inputs);
    ASSERT_TRUE(got.ok()) << got.status();
    outs[i] = *std::move(got);
    stats[i] = NpusimOf(**loaded)->summary().stats;
  }
  ASSERT_EQ(outs[0].size(), 1u);
  ASSERT_EQ(outs[0][0].nbytes(), outs[1][0].nbytes());
  EXPECT_EQ(std::memcmp(outs[0][0].raw(), outs[1][0].raw(), outs[0][0].nbytes()), 0);
  // Most of it by the prefetches (a GEMV that catches up with its
  // prefetch reads the rest itself).
  EXPECT_GT(stats[0].l2_prefetch_bytes, ahead / 2);
  EXPECT_LE(stats[0].l2_prefetch_bytes, ahead);
  EXPECT_EQ(stats[1].l2_prefetch_bytes, 0);
  // The weights cross from HBM once either way (within a few lines the
  // other tasks touch).
  EXPECT_NEAR(static_cast<double>(stats[0].hbm_read_bytes), static_cast<double>(stats[1].hbm_read_bytes), 64 * 1024);
  EXPECT_LT(stats[0].total_cycles, 0.9 * stats[1].total_cycles)
      << stats[0].total_cycles << " cycles with the prefetches, " << stats[1].total_cycles << " without";
  npusim_test::ExpectMatchesReference(m, inputs);
}

// Compiled in process, a value that is not true or false is refused with
// the setting named.
TEST(L2PrefetchPlan, ASettingThatIsNoBooleanIsRefused) {
  Model m = GemvChain();
  auto t = npusim_test::Npusim();
  CompileOptions o;
  o.settings = {{"l2-prefetch", "maybe"}};
  auto a = CompileForNpusim(m, *t, o);
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(a.status())) << a.status();
  EXPECT_NE(a.status().message().find("--l2-prefetch=maybe: "), std::string::npos) << a.status();
  EXPECT_NE(a.status().message().find("true or false"), std::string::npos) << a.status();
}

}  // namespace
}  // namespace kiln::target::npusim
