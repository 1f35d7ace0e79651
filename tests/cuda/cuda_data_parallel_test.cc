//===- cuda_data_parallel_test.cc - Data-parallel steps on cuda -----------===//
//
// A training step of --replicas=4 compiled for cuda: its AllReduces as
// NCCL collectives in buckets (target/cuda/cuda_collectives.h), emulated
// as four ranks on their own shards of a batch against the reference
// executor's one-rank steps: each rank's gradients are the mean of the
// four, its updated parameters follow from them, its loss is its own. And
// the package's tables, its build linking NCCL, and what a step without
// collectives refuses.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/training_step.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using cuda_test::Package;
using cuda_test::Random;
using target::cuda::CudaPackage;
using target::cuda::PackageBucket;
using target::cuda::PackageTask;

// Weights from a seed, scaled so the logits stay moderate.
Tensor Weights(std::vector<int64_t> dims, uint32_t seed) {
  Tensor w = Random(DType::kF32, std::move(dims), seed);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] *= 0.2f;
  return w;
}

// A two-layer classifier, x [8, 32] -> logits [8, 10] -> cross entropy,
// and its training step, `replicas` > 1 averaging its gradients.
Model Step(int replicas) {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({8, 32})));
  Value* labels = g.AddInput("labels", Type::Tensor(DType::kI64, Shape::Static({8})));
  Value* w1 = g.AddConstant("w1", Weights({32, 16}, 1));
  Value* b1 = g.AddConstant("b1", Weights({16}, 2));
  Value* w2 = g.AddConstant("w2", Weights({16, 10}, 3));
  Value* h = g.AddNode("MatMul", {x, w1}, {"h"})->output(0);
  Value* hb = g.AddNode("Add", {h, b1}, {"hb"})->output(0);
  Value* r = g.AddNode("Relu", {hb}, {"r"})->output(0);
  Value* logits = g.AddNode("MatMul", {r, w2}, {"logits"})->output(0);
  g.AddOutput(g.AddNode("SoftmaxCrossEntropyLoss", {logits, labels}, {"loss"})->output(0));
  EXPECT_TRUE(InferShapes(g).ok());
  TrainingOptions options;
  options.replicas = replicas;
  auto step = AppendTrainingStep(g, options);
  EXPECT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(InferShapes(g).ok());
  return m;
}

// The one-rank step against the reference. Its SGD updates are fused
// groups that the split-back of another group leaves for simplification
// and CSE to merge their constants: kernels built before that named values
// since erased (b1.next read freed memory), until they were built again.
TEST(CudaDataParallel, OneRankStepMatchesTheReference) {
  Model one = Step(1);
  Tensor labels(DType::kI64, {8});
  for (int64_t i = 0; i < 8; ++i) labels.data<int64_t>()[i] = (i * 3) % 10;
  const std::vector<Tensor> in = {Random(DType::kF32, {8, 32}, 5), labels};
  auto p = Package(one);
  ASSERT_TRUE(p.ok()) << p.status();
  auto got = cuda_test::Emulate(*p, in);
  ASSERT_TRUE(got.ok()) << got.status();
  Executor exec;
  auto want = exec.Run(*one.graph, in);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(got->size(), want->size());
  for (size_t k = 0; k < got->size(); ++k) EXPECT_TRUE(cuda_test::Near((*got)[k], (*want)[k], 1e-5)) << "output " << k;
}

TEST(CudaDataParallel, RanksAverageTheirGradients) {
  const int ranks = 4;
  Model one = Step(1);
  Model dp = Step(ranks);
  Tensor x = Random(DType::kF32, {8 * ranks, 32}, 11);
  Tensor labels(DType::kI64, {8 * ranks});
  for (int64_t i = 0; i < labels.numel(); ++i) labels.data<int64_t>()[i] = (i * 7) % 10;
  std::vector<std::vector<Tensor>> shards, want;
  Executor exec;
  for (int r = 0; r < ranks; ++r) {
    shards.push_back({x.LeadingRows(8 * r, 8), labels.LeadingRows(8 * r, 8)});
    auto out = exec.Run(*one.graph, shards.back());
    ASSERT_TRUE(out.ok()) << out.status();
    want.push_back(*out);
  }
  for (const char* buckets : {"search", "single", "per-tensor"}) {
    SCOPED_TRACE(buckets);
    target::CompileOptions o;
    o.settings.push_back({"buckets", buckets});
    auto p = Package(dp, o);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->replicas, ranks);
    EXPECT_EQ(p->buckets, buckets);
    ASSERT_TRUE(p->collectives());
    if (std::string(buckets) == "single") {
      EXPECT_EQ(p->bucket_plan.size(), 1u);
    }
    if (std::string(buckets) == "per-tensor") {
      EXPECT_EQ(p->bucket_plan.size(), 3u);
    }
    int64_t bytes = 0;
    for (const PackageBucket& b : p->bucket_plan) bytes += b.bytes;
    EXPECT_EQ(bytes, (32 * 16 + 16 + 16 * 10) * 4);
    auto got = cuda_test::EmulateReplicas(*p, shards);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::vector<std::string> names = {"loss", "w1.grad", "b1.grad", "w2.grad", "w1.next", "b1.next", "w2.next"};
    for (int r = 0; r < ranks; ++r) {
      ASSERT_EQ((*got)[r].size(), names.size());
      for (size_t k = 0; k < names.size(); ++k) {
        const Tensor& g = (*got)[r][k];
        for (int64_t j = 0; j < g.numel(); ++j) {
          double expected = 0;
          if (k == 0) {
            expected = want[r][0].GetDouble(j);  // each rank's own loss
          } else {
            for (int q = 0; q < ranks; ++q) expected += want[q][k].GetDouble(j) / ranks;
          }
          ASSERT_NEAR(g.GetDouble(j), expected, 1e-5 * std::max(1.0, std::fabs(expected)))
              << "rank " << r << " " << names[k] << "[" << j << "]";
        }
      }
    }
  }
}

TEST(CudaDataParallel, BucketsSpanFromTheirGradientsToTheirFirstReader) {
  for (const char* buckets : {"search", "per-tensor"}) {
    SCOPED_TRACE(buckets);
    target::CompileOptions o;
    o.settings.push_back({"buckets", buckets});
    auto p = Package(Step(4), o);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_FALSE(p->bucket_plan.empty());
    const int num_tasks = static_cast<int>(p->tasks.size());
    auto root = [&](int b) {
      while (p->buffers[b].alias_of >= 0) b = p->buffers[b].alias_of;
      return b;
    };
    // Whether task t's launches or host copies touch buffer root r.
    auto touches = [&](int t, int r) {
      for (const PackageTask::Launch& l : p->tasks[t].launches)
        for (int a : l.args)
          if (root(a) == r) return true;
      for (int v : p->tasks[t].host_inputs)
        if (p->values[v].buffer >= 0 && root(p->values[v].buffer) == r) return true;
      for (int v : p->tasks[t].host_outputs)
        if (p->values[v].buffer >= 0 && root(p->values[v].buffer) == r) return true;
      return false;
    };
    for (const PackageBucket& b : p->bucket_plan) {
      ASSERT_FALSE(b.tasks.empty());
      // It starts once the last task that makes one of its gradients has
      // run, and the first task that reads one of its means waits for it.
      int made = -1, first_read = num_tasks;
      for (int t : b.tasks) {
        EXPECT_EQ(p->tasks[t].kind, PackageTask::Kind::kCollective);
        EXPECT_EQ(p->tasks[t].engine, "nccl");
        for (const target::cuda::CollectiveItem& c : p->tasks[t].collective) {
          for (int u = 0; u < t; ++u)
            if (touches(u, root(c.input))) made = std::max(made, u);
          for (int u = t + 1; u < num_tasks; ++u)
            if (touches(u, root(c.output))) first_read = std::min(first_read, u);
        }
      }
      EXPECT_EQ(b.after, made);
      EXPECT_EQ(b.before, first_read == num_tasks ? -1 : first_read);
      // Its gradients live until it has read them, its means from when it may write them.
      for (int t : b.tasks)
        for (const target::cuda::CollectiveItem& c : p->tasks[t].collective) {
          EXPECT_GE(p->buffers[root(c.input)].last, first_read);
          EXPECT_LE(p->buffers[root(c.output)].first, std::max(made, 0));
        }
    }
  }
  auto p = Package(Step(4));
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string explain = p->Explain();
  EXPECT_TRUE(absl::StrContains(explain, "w2.allreduce = kiln.AllReduce  ->  nccl: a collective over NVLink through "
                                         "NCCL: the mean over 4 GPUs"))
      << explain;
  EXPECT_TRUE(absl::StrContains(explain, "data parallel: made for 4 GPUs (any number runs it); AllReduce buckets "
                                         "(search), NCCL on the links stream:\n  bucket 0: "))
      << explain;
  // The package links NCCL and its launcher calls it; one rank alone runs
  // through a communicator of its own.
  auto files = p->Files();
  EXPECT_TRUE(absl::StrContains(files["build.sh"], " -lnccl")) << files["build.sh"];
  EXPECT_TRUE(absl::StrContains(files["CMakeLists.txt"], "find_library(KILN_NCCL nccl")) << files["CMakeLists.txt"];
  EXPECT_TRUE(absl::StrContains(files["model.cc"], "#define KILN_NCCL 1"));
  EXPECT_TRUE(absl::StrContains(files["README.md"], "kiln_model_run_replicas(ranks, N, inputs, outputs"));
  EXPECT_TRUE(absl::StrContains(files["model.cc"], "static const int kNumBuckets = "));
  EXPECT_TRUE(absl::StrContains(files["model.cc"], "{KILN_TASK_COLLECTIVE, \"w2.allreduce\""));
  // A step without collectives links nothing more.
  auto single = Package(Step(1));
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_FALSE(single->collectives());
  EXPECT_FALSE(absl::StrContains(single->Files()["build.sh"], "nccl"));
  EXPECT_TRUE(absl::StrContains(single->Files()["model.cc"], "#define KILN_NCCL 0"));
}

TEST(CudaDataParallel, BucketsNeedAllReduces) {
  target::CompileOptions o;
  o.settings.push_back({"buckets", "ddp"});
  auto p = Package(Step(1), o);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::StrContains(p.status().message(), "--buckets applies to data-parallel steps")) << p.status();
  // Nine GPUs are more than NVLink joins in one node.
  auto nine = Package(Step(9));
  ASSERT_FALSE(nine.ok());
  EXPECT_TRUE(absl::StrContains(nine.status().message(), "the links join 8 devices, not 9")) << nine.status();
}

}  // namespace
}  // namespace kiln
