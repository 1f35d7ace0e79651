//===- training_loop_test.cc - Training loops: steps fed by their outputs -===//
//
// runtime/step_loop.h on its own (which output feeds which input, a loop
// through a counting model, errors naming the step), then a training step
// whose parameters and optimizer state are inputs (training-step
// --state=inputs) compiled for npusim and run for several steps: the
// parameters end where the reference executor's loop on the unoptimized
// step ends, and the loss falls; the loop sunk onto the device
// (NpusimRunOptions::feeds) gives what the loop from the host gives.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "graph/exec/executor.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/pass_manager.h"
#include "graph/passes/training_step.h"
#include "graph/support/status.h"
#include "runtime/loaded_model.h"
#include "target/npusim/npusim_executable.h"
#include "runtime/step_loop.h"
#include "target/api/target_registry.h"
#include "target/npusim/npusim_compile.h"
#include "tests/target/target_test_util.h"

namespace kiln {
namespace {

using runtime::RunSteps;
using runtime::StepFeed;
using runtime::StepFeeds;

TEST(StepLoop, FeedsPairEachNextOutputWithItsInput) {
  std::vector<StepFeed> feeds = StepFeeds({"x", "w", "w.m", "t"}, {"loss", "w.next", "w.m.next", "v.next", "t.next"});
  ASSERT_EQ(feeds.size(), 3u);
  EXPECT_EQ(feeds[0].output, 1);
  EXPECT_EQ(feeds[0].input, 1);
  EXPECT_EQ(feeds[1].output, 2);
  EXPECT_EQ(feeds[1].input, 2);
  EXPECT_EQ(feeds[2].output, 4);  // v.next feeds no input
  EXPECT_EQ(feeds[2].input, 3);
  EXPECT_TRUE(StepFeeds({"x"}, {"y", ".next", "x.nex"}).empty());
}

TEST(StepLoop, EachStepReadsThePreviousOutputs) {
  // A model of one counter: (c, x) -> (c + x as "c.next", c * 10 as "seen").
  auto run = [](std::vector<Tensor> in) -> absl::StatusOr<std::vector<Tensor>> {
    const float c = in[0].data<float>()[0], x = in[1].data<float>()[0];
    return std::vector<Tensor>{Tensor::Scalar<float>(c + x), Tensor::Scalar<float>(c * 10)};
  };
  std::vector<StepFeed> feeds = StepFeeds({"c", "x"}, {"c.next", "seen"});
  std::vector<float> seen;
  auto out = RunSteps(4, {Tensor::Scalar<float>(1), Tensor::Scalar<float>(2)}, feeds, run,
                      [&](int step, const std::vector<Tensor>& o) {
                        EXPECT_EQ(step, static_cast<int>(seen.size()) + 1);
                        seen.push_back(o[1].data<float>()[0]);
                      });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(seen, (std::vector<float>{10, 30, 50, 70}));
  EXPECT_EQ((*out)[0].data<float>()[0], 9);
}

TEST(StepLoop, ErrorsNameTheStep) {
  int calls = 0;
  auto failing = [&](std::vector<Tensor> in) -> absl::StatusOr<std::vector<Tensor>> {
    if (++calls == 3) return absl::InvalidArgumentError("out of cycles");
    return std::vector<Tensor>{in[0]};
  };
  auto out = RunSteps(5, {Tensor::Scalar<float>(1)}, StepFeeds({"c"}, {"c.next"}), failing);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "step 3: out of cycles");
  // An output that does not fit the input it feeds.
  auto grows = [](std::vector<Tensor>) -> absl::StatusOr<std::vector<Tensor>> {
    return std::vector<Tensor>{Tensor(DType::kF32, {2})};
  };
  out = RunSteps(2, {Tensor::Scalar<float>(1)}, StepFeeds({"c"}, {"c.next"}), grows);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "step 1: output 0 does not fit input 0 of the next step");
}

using testing_util::Random;

// A regression: y' = tanh(x w + b) v, loss = mean((y' - y)^2).
Model Regression() {
  Model m;
  Graph& g = *m.graph;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({16, 8})));
  Value* y = g.AddInput("y", Type::Tensor(DType::kF32, Shape::Static({16, 1})));
  Value* w = g.AddConstant("w", Random({8, 4}, 1));
  Value* b = g.AddConstant("b", Random({4}, 2));
  Value* v = g.AddConstant("v", Random({4, 1}, 3));
  Value* h = g.AddNode("MatMul", {x, w}, {"h"})->output(0);
  Value* t = g.AddNode("Tanh", {g.AddNode("Add", {h, b}, {"hb"})->output(0)}, {"t"})->output(0);
  Value* pred = g.AddNode("MatMul", {t, v}, {"pred"})->output(0);
  Value* err = g.AddNode("Sub", {pred, y}, {"err"})->output(0);
  Value* sq = g.AddNode("Mul", {err, err}, {"sq"})->output(0);
  Node* mean = g.AddNode("ReduceMean", {sq}, {"loss"});
  mean->SetAttr("keepdims", Attribute::Int(0));
  g.AddOutput(mean->output(0));
  EXPECT_TRUE(InferShapes(g).ok());
  return m;
}

std::vector<std::string> Names(const google::protobuf::RepeatedPtrField<artifact::TensorSignature>& signature) {
  std::vector<std::string> names;
  for (const auto& s : signature) names.push_back(s.name());
  return names;
}

// The regression's training step under `options`, optimized, compiled for
// npusim and loaded; `unoptimized` (if set) receives the step before the
// optimizer.
std::unique_ptr<runtime::LoadedModel> CompiledStep(const TrainingOptions& options, Model* unoptimized = nullptr) {
  Model m = Regression();
  auto r = AppendTrainingStep(*m.graph, options);
  EXPECT_TRUE(r.ok()) << r.status();
  if (unoptimized) *unoptimized = m.Clone();
  PassManager pm;
  EXPECT_TRUE(pm.AddPipeline("default").ok());
  EXPECT_TRUE(pm.Run(m).ok());
  auto loaded = testing_util::CompileAndLoadNpusim(m, {}, "loop.kiln");
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? *std::move(loaded) : nullptr;
}

struct LoopCase {
  const char* name;
  TrainingOptions options;
};

std::vector<LoopCase> Cases() {
  std::vector<LoopCase> cases(3);
  cases[0].name = "sgd";
  cases[0].options.learning_rate = 0.05;
  cases[1].name = "sgd-nesterov";
  cases[1].options.learning_rate = 0.05;
  cases[1].options.momentum = 0.9;
  cases[1].options.nesterov = true;
  cases[1].options.weight_decay = 0.01;
  cases[2].name = "adamw";
  cases[2].options.optimizer = TrainingOptions::Optimizer::kAdamW;
  cases[2].options.learning_rate = 0.02;
  cases[2].options.weight_decay = 0.1;
  for (LoopCase& c : cases) c.options.state_as_inputs = true;
  return cases;
}

// Six steps compiled for npusim against six steps of the unoptimized step
// graph on the reference executor.
TEST(TrainingLoop, NpusimStepsFollowTheReferenceLoop) {
  const int steps = 6;
  const Tensor x = Random({16, 8}, 11), y = Random({16, 1}, 12);
  for (const LoopCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    Model ref;
    std::unique_ptr<runtime::LoadedModel> loaded = CompiledStep(c.options, &ref);
    ASSERT_TRUE(loaded);

    // The inputs: the data, then the variables at their initial values.
    std::vector<Tensor> initial = loaded->InitialValues();
    const std::vector<std::string> in_names = Names(loaded->artifact().inputs());
    const std::vector<std::string> out_names = Names(loaded->artifact().outputs());
    ASSERT_EQ(in_names.size(), ref.graph->inputs().size());
    std::vector<Tensor> inputs = {x, y};
    for (size_t i = 2; i < initial.size(); ++i) {
      ASSERT_TRUE(initial[i].defined()) << in_names[i];
      inputs.push_back(initial[i]);
    }
    std::vector<StepFeed> feeds = StepFeeds(in_names, out_names);
    EXPECT_EQ(feeds.size(), initial.size() - 2);  // every variable is fed

    std::vector<double> npu_losses, ref_losses;
    auto npu = RunSteps(
        steps, inputs, feeds, [&](std::vector<Tensor> in) { return loaded->Run(std::move(in)); },
        [&](int, const std::vector<Tensor>& o) { npu_losses.push_back(o[0].GetDouble(0)); });
    ASSERT_TRUE(npu.ok()) << npu.status();
    Executor exec;
    auto want = RunSteps(
        steps, inputs, feeds, [&](std::vector<Tensor> in) { return exec.Run(*ref.graph, std::move(in)); },
        [&](int, const std::vector<Tensor>& o) { ref_losses.push_back(o[0].GetDouble(0)); });
    ASSERT_TRUE(want.ok()) << want.status();
    for (const StepFeed& f : feeds) {
      const Tensor &a = (*want)[f.output], &b = (*npu)[f.output];
      ASSERT_EQ(a.dims(), b.dims()) << out_names[f.output];
      for (int64_t i = 0; i < a.numel(); ++i)
        ASSERT_NEAR(b.GetDouble(i), a.GetDouble(i), 1e-6 + 1e-4 * std::abs(a.GetDouble(i)))
            << out_names[f.output] << "[" << i << "] after " << steps << " steps";
    }
    for (int i = 0; i < steps; ++i) EXPECT_NEAR(npu_losses[i], ref_losses[i], 1e-4 * ref_losses[i]) << "step " << i + 1;
    EXPECT_LT(npu_losses.back(), 0.8 * npu_losses.front());
  }
}

// The loop sunk onto the device (NpusimRunOptions::feeds: the steps run as
// batches, each NAME.next computed over NAME: the fused Adam update writes
// the parameters and moments in place) against the same artifact run step
// by step from the host: the same losses and final variables, the
// variables over PCIe once each way, and no copy of them between steps.
TEST(TrainingLoop, OnTheDeviceAsFromTheHost) {
  const int steps = 5;
  const Tensor x = Random({16, 8}, 21), y = Random({16, 1}, 22);
  TrainingOptions options;
  options.optimizer = TrainingOptions::Optimizer::kAdam;
  options.learning_rate = 0.02;
  options.state_as_inputs = true;
  std::unique_ptr<runtime::LoadedModel> loaded = CompiledStep(options);
  ASSERT_TRUE(loaded);
  std::vector<Tensor> inputs = loaded->InitialValues();
  inputs[0] = x;
  inputs[1] = y;
  const std::vector<std::string> in_names = Names(loaded->artifact().inputs());
  const std::vector<std::string> out_names = Names(loaded->artifact().outputs());
  std::vector<StepFeed> feeds = StepFeeds(in_names, out_names);
  int64_t variable_bytes = 0, data_bytes = static_cast<int64_t>(x.nbytes() + y.nbytes());
  for (const StepFeed& f : feeds) variable_bytes += static_cast<int64_t>(inputs[f.input].nbytes());

  std::vector<double> host_losses, device_losses;
  auto host = RunSteps(
      steps, inputs, feeds, [&](std::vector<Tensor> in) { return loaded->Run(std::move(in)); },
      [&](int, const std::vector<Tensor>& o) { host_losses.push_back(o[0].GetDouble(0)); });
  ASSERT_TRUE(host.ok()) << host.status();

  target::NpusimRunOptions ro;
  ro.batches = steps;
  ro.feeds = feeds;
  std::vector<bool> fed_seen;
  ro.after_step = [&](int step, const std::vector<Tensor>& o) {
    device_losses.push_back(o[0].GetDouble(0));
    // A fed output comes back to the host only from the last step.
    fed_seen.push_back(o[feeds[0].output].defined());
    EXPECT_EQ(static_cast<int>(device_losses.size()), step);
  };
  auto device = loaded->Run(inputs, ro);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device_losses, host_losses);
  EXPECT_EQ(fed_seen, (std::vector<bool>{false, false, false, false, true}));
  for (const StepFeed& f : feeds)
    EXPECT_TRUE((*host)[f.output].Equals((*device)[f.output])) << out_names[f.output];
  EXPECT_LT(device_losses.back(), device_losses.front());

  const sim::RunStats& stats = target::NpusimOf(*loaded)->summary().stats;
  EXPECT_EQ(stats.h2d_bytes, steps * data_bytes + variable_bytes);
  EXPECT_EQ(stats.d2d_bytes, 0);
  EXPECT_TRUE(target::NpusimOf(*loaded)->summary().loop);
  EXPECT_EQ(target::NpusimOf(*loaded)->summary().donated_bytes, variable_bytes);
  EXPECT_NE(target::NpusimOf(*loaded)->ReportText().find("loop on the device"), std::string::npos);

  // A feed between buffers of different sizes is refused.
  target::NpusimRunOptions bad = ro;
  bad.feeds = {{feeds[0].output, 0}};
  auto refused = loaded->Run(inputs, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("cannot feed input 'x' on the device"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace kiln
