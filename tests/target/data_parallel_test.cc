//===- data_parallel_test.cc - Data-parallel training steps on npusim -----===//
//
// The bucket planner (target/backend/allreduce_buckets.h) against its own
// model, and a data-parallel step (training-step --replicas) compiled for
// npusim and run with sharded inputs against the mean of one-chip steps on
// each shard (the reference executor).
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "graph/exec/executor.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/training_step.h"
#include "graph/support/status.h"
#include "runtime/loaded_model.h"
#include "target/npusim/npusim_executable.h"
#include "sim/machine/machine.h"
#include "target/api/target_registry.h"
#include "target/backend/allreduce_buckets.h"
#include "target/npusim/npusim_compile.h"
#include "tests/target/target_test_util.h"

namespace kiln {
namespace {

using target::AllReduceItem;
using target::PlanBuckets;
using target::PlannedBucket;

constexpr int64_t kMiB = 1 << 20;

std::vector<std::vector<int>> Groups(const std::vector<PlannedBucket>& plan) {
  std::vector<std::vector<int>> out;
  for (const PlannedBucket& b : plan) out.push_back(b.items);
  return out;
}

std::vector<PlannedBucket> Plan(const std::string& strategy, const std::vector<AllReduceItem>& items, int chips = 8) {
  const sim::Machine machine = sim::DefaultMachine();
  auto plan = PlanBuckets(strategy, items, [&](int64_t bytes) { return sim::AllReduceCycles(machine, bytes, chips); });
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : std::vector<PlannedBucket>{};
}

TEST(AllReduceBuckets, RingTimeOnLinkFigures) {
  target::LinkFigures nvlink{100e9, 5e-6, 8e-6, 8};
  // The launch, then 2 (8 - 1) steps of 1 MiB / 8 each: 8 us + 14 x (5 us
  // + 131,072 B / 100 GB/s).
  auto t = target::RingAllReduceSeconds(nvlink, kMiB, 8);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(*t, 8e-6 + 14 * (5e-6 + 131072 / 100e9), 1e-12);
  EXPECT_EQ(*target::RingAllReduceSeconds(nvlink, kMiB, 1), 0.0);
  EXPECT_FALSE(target::RingAllReduceSeconds(nvlink, kMiB, 9).ok());  // the links join 8
  auto none = target::RingAllReduceSeconds(target::LinkFigures{}, kMiB, 2);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(absl::StrContains(none.status().message(), "no links between devices")) << none.status();
  // The planner takes any time rule: with these links, two gradients ready
  // far apart go in two buckets, two ready together in one.
  const target::CollectiveTime ring = [&](int64_t bytes) { return target::RingAllReduceSeconds(nvlink, bytes, 8); };
  auto apart = PlanBuckets("search", {{kMiB, 0}, {kMiB, 1.0}}, ring);
  ASSERT_TRUE(apart.ok());
  EXPECT_EQ(Groups(*apart), (std::vector<std::vector<int>>{{0}, {1}}));
  auto together = PlanBuckets("search", {{kMiB, 0}, {kMiB, 0}}, ring);
  ASSERT_TRUE(together.ok());
  EXPECT_EQ(Groups(*together), (std::vector<std::vector<int>>{{0, 1}}));
}

TEST(AllReduceBuckets, FixedStrategies) {
  std::vector<AllReduceItem> items;
  for (int i = 0; i < 6; ++i) items.push_back({600 << 10, 1000.0 * i});
  using G = std::vector<std::vector<int>>;
  EXPECT_EQ(Groups(Plan("single", items)), (G{{0, 1, 2, 3, 4, 5}}));
  EXPECT_EQ(Groups(Plan("per-tensor", items)), (G{{0}, {1}, {2}, {3}, {4}, {5}}));
  // DDP: the first bucket closes once it holds 1 MiB, the rest at 25 MiB.
  EXPECT_EQ(Groups(Plan("ddp", items)), (G{{0, 1}, {2, 3, 4, 5}}));
  // A cap closes a bucket once it holds that much.
  EXPECT_EQ(Groups(Plan("1.5", items)), (G{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(Groups(Plan("1MiB", items)), (G{{0, 1}, {2, 3}, {4, 5}}));
  // A bucket starts when its last gradient is ready and the links are free,
  // and takes the links' time rule.
  std::vector<PlannedBucket> single = Plan("single", items);
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0].bytes, 6 * (600 << 10));
  EXPECT_EQ(single[0].start, 5000.0);
  EXPECT_DOUBLE_EQ(single[0].end - single[0].start, *sim::AllReduceCycles(sim::DefaultMachine(), 6 * (600 << 10), 8));
  EXPECT_TRUE(Plan("search", {}).empty());
}

TEST(AllReduceBuckets, BadStrategiesAreRefused) {
  for (const char* s : {"foo", "0", "-1", "MiB", ""}) {
    auto p = target::ParseBucketStrategy(s);
    ASSERT_FALSE(p.ok()) << s;
    EXPECT_EQ(p.status().message(), absl::StrCat("--buckets must be search, ddp, single, per-tensor or a size in "
                                                 "MiB, not '", s, "'"));
  }
  EXPECT_EQ(*target::ParseBucketStrategy("25"), "25MiB");
}

// Search's plan ends its last collective no later than any partition of the
// gradients into contiguous buckets (all of them tried).
TEST(AllReduceBuckets, SearchIsOptimalForItsModel) {
  const sim::Machine m = sim::DefaultMachine();
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    const int n = 1 + static_cast<int>(rng() % 8);
    std::vector<AllReduceItem> items;
    double t = 0;
    for (int i = 0; i < n; ++i) {
      t += static_cast<double>(rng() % 20000);
      // From a few bytes (latency-bound) to a few MiB (bandwidth-bound).
      items.push_back({int64_t{1} << (rng() % 23), t});
    }
    std::vector<PlannedBucket> best = Plan("search", items);
    ASSERT_FALSE(best.empty());
    double best_end = std::numeric_limits<double>::infinity();
    for (uint32_t cuts = 0; cuts < (1u << (n - 1)); ++cuts) {
      double links = 0, end = 0;
      int64_t bytes = 0;
      for (int i = 0; i < n; ++i) {
        bytes += items[i].bytes;
        if (i == n - 1 || (cuts >> i & 1)) {
          end = std::max(links, items[i].ready) + *sim::AllReduceCycles(m, bytes, 8);
          links = end;
          bytes = 0;
        }
      }
      best_end = std::min(best_end, end);
    }
    EXPECT_NEAR(best.back().end, best_end, 1e-6) << "round " << round;
  }
}

TEST(AllReduceBuckets, SearchMergesWhatLatencyDominatesAndSplitsWhatOverlaps) {
  // Tiny gradients ready close together: one bucket (each costs mostly the
  // links' latency). Large gradients ready far apart: one collective each,
  // under the compute that follows.
  std::vector<AllReduceItem> tiny;
  for (int i = 0; i < 5; ++i) tiny.push_back({64, 10.0 * i});
  EXPECT_EQ(Plan("search", tiny).size(), 1u);
  std::vector<AllReduceItem> large;
  for (int i = 0; i < 4; ++i) large.push_back({4 * kMiB, 200000.0 * i});
  EXPECT_EQ(Plan("search", large).size(), 4u);
}

using testing_util::Random;

// A two-layer classifier: x [8, 32] -> logits [8, 10] -> cross entropy with
// labels [8] (mean over the batch).
Model Classifier() {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({8, 32})));
  Value* labels = g.AddInput("labels", Type::Tensor(DType::kI64, Shape::Static({8})));
  Value* w1 = g.AddConstant("w1", Random({32, 16}, 1));
  Value* b1 = g.AddConstant("b1", Random({16}, 2));
  Value* w2 = g.AddConstant("w2", Random({16, 10}, 3));
  Value* h = g.AddNode("MatMul", {x, w1}, {"h"})->output(0);
  Value* hb = g.AddNode("Add", {h, b1}, {"hb"})->output(0);
  Value* r = g.AddNode("Relu", {hb}, {"r"})->output(0);
  Value* logits = g.AddNode("MatMul", {r, w2}, {"logits"})->output(0);
  Value* loss = g.AddNode("SoftmaxCrossEntropyLoss", {logits, labels}, {"loss"})->output(0);
  g.AddOutput(loss);
  EXPECT_TRUE(InferShapes(g).ok());
  return m;
}

Model Step(int replicas) {
  Model m = Classifier();
  TrainingOptions options;
  options.replicas = replicas;
  auto r = AppendTrainingStep(*m.graph, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return m;
}

absl::StatusOr<std::unique_ptr<runtime::LoadedModel>> CompileAndLoad(const Model& m, const std::string& buckets) {
  target::CompileOptions options;
  if (!buckets.empty()) options.settings.push_back({"buckets", buckets});
  return testing_util::CompileAndLoadNpusim(m, options, "dp.kiln");
}

// Four chips, each on its own quarter of a batch of 32: every gradient is
// the mean of the one-chip steps' gradients on the quarters, and every
// updated parameter follows from it; the loss is chip 0's.
TEST(DataParallel, ShardedStepAveragesTheChipsGradients) {
  const int chips = 4;
  Model one = Step(1);
  Model dp = Step(chips);
  Tensor x = Random({8 * chips, 32}, 11);
  Tensor labels(DType::kI64, {8 * chips});
  for (int64_t i = 0; i < labels.numel(); ++i) labels.data<int64_t>()[i] = (i * 7) % 10;
  std::vector<std::vector<Tensor>> per_chip;
  Executor exec;
  for (int r = 0; r < chips; ++r) {
    auto out = exec.Run(*one.graph, {x.LeadingRows(8 * r, 8), labels.LeadingRows(8 * r, 8)});
    ASSERT_TRUE(out.ok()) << out.status();
    per_chip.push_back(*out);
  }
  for (const char* buckets : {"search", "single", "per-tensor", "ddp"}) {
    SCOPED_TRACE(buckets);
    auto loaded = CompileAndLoad(dp, buckets);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    auto got = (*loaded)->Run({x, labels});
    ASSERT_TRUE(got.ok()) << got.status();
    const std::vector<std::string> names = {"loss", "w1.grad", "b1.grad", "w2.grad", "w1.next", "b1.next", "w2.next"};
    ASSERT_EQ(got->size(), names.size());
    for (size_t k = 0; k < names.size(); ++k) {
      const Tensor& g = (*got)[k];
      for (int64_t j = 0; j < g.numel(); ++j) {
        double want = 0;
        if (k == 0) {
          want = per_chip[0][0].GetDouble(j);
        } else {
          for (int r = 0; r < chips; ++r) want += per_chip[r][k].GetDouble(j) / chips;
        }
        ASSERT_NEAR(g.GetDouble(j), want, 1e-5 * std::max(1.0, std::fabs(want))) << names[k] << "[" << j << "]";
      }
    }
    const artifact::NpusimModule& mod = (*loaded)->artifact().npusim();
    EXPECT_EQ(mod.replicas(), chips);
    EXPECT_EQ(mod.buckets(), buckets);
    const sim::RunStats& stats = target::NpusimOf(**loaded)->summary().stats;
    EXPECT_EQ(stats.collectives, mod.bucket_plan_size());
    EXPECT_EQ(stats.collective_bytes, (32 * 16 + 16 + 16 * 10) * 4);
    if (std::string(buckets) == "single") {
      EXPECT_EQ(mod.bucket_plan_size(), 1);
    }
    if (std::string(buckets) == "per-tensor") {
      EXPECT_EQ(mod.bucket_plan_size(), 3);
    }
    EXPECT_TRUE(absl::StrContains(target::NpusimOf(**loaded)->ReportText(), "data parallel: 4 chips"));
  }
}

// Inputs of one chip's size: every chip holds the same data, so the step
// equals the one-chip step; a batch that is not a multiple is refused.
TEST(DataParallel, UnshardedInputsAndBadBatches) {
  Model dp = Step(4);
  auto loaded = CompileAndLoad(dp, "");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  Tensor x = Random({8, 32}, 5);
  Tensor labels(DType::kI64, {8});
  for (int64_t i = 0; i < 8; ++i) labels.data<int64_t>()[i] = i;
  auto got = (*loaded)->Run({x, labels});
  ASSERT_TRUE(got.ok()) << got.status();
  Executor exec;
  Model one = Step(1);
  auto want = exec.Run(*one.graph, {x, labels});
  ASSERT_TRUE(want.ok());
  for (size_t k = 0; k < got->size(); ++k)
    for (int64_t j = 0; j < (*got)[k].numel(); ++j)
      EXPECT_NEAR((*got)[k].GetDouble(j), (*want)[k].GetDouble(j), 1e-5) << k;
  auto bad = (*loaded)->Run({Random({24, 32}, 5), labels});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "input 'x': the model expects f32[8,32] (or 4 times its leading dim: one shard per chip), got f32[24,32]");
}

TEST(DataParallel, BucketsNeedAllReduces) {
  auto loaded = CompileAndLoad(Step(1), "ddp");
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(absl::StrContains(loaded.status().message(), "--buckets applies to data-parallel steps"))
      << loaded.status();
}

}  // namespace
}  // namespace kiln
