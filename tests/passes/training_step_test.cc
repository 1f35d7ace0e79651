//===- training_step_test.cc - Gradients against finite differences -------===//
//
// Every gradient rule, checked numerically: a small f64 graph per rule whose
// elided constants are the parameters (filled with seeded random values),
// reduced to a scalar loss (a weighted sum of its output, unless the output
// is a loss already); the gradients the training-step pass appends, run on
// the reference executor, must match central finite differences of the
// loss to 1e-6. Then the SGD step, the pass's choice of loss and
// parameters, and its errors.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "graph/passes/gradients.h"
#include "graph/passes/pass_manager.h"
#include "graph/passes/training_step.h"
#include "graph/verifier/verifier.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// Parses `body` as the graph @main() and fills its elided constants with
// seeded random values: in [0.5, 1.5] for names starting with "pos", else
// in [-1, 1]. An output of more than one element becomes the loss
// sum(y * r) for a random r of its shape.
Model MakeModel(const std::string& body, uint32_t seed = 1) {
  auto m = ParseModel("graph @main() {\n" + body + "\n}\n");
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return Model();
  Graph& g = *m->graph;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> any(-1.0, 1.0), pos(0.5, 1.5);
  auto fill = [&](const Type& t, bool positive) {
    Tensor data(DType::kF64, t.shape().StaticDims());
    for (double& x : data.span<double>()) x = positive ? pos(rng) : any(rng);
    return data;
  };
  for (Value* c = g.first_constant(); c; c = g.NextConstant(c))
    if (!c->constant().defined()) c->set_constant(fill(c->type(), c->name().rfind("pos", 0) == 0));
  {
    PassManager pm;
    EXPECT_TRUE(pm.AddPipeline("infer-shapes").ok());
    EXPECT_TRUE(pm.Run(*m).ok());
  }
  if (g.outputs().size() > 1 || g.outputs()[0]->type().shape().NumElements() != 1) {
    // loss = sum over the outputs y of sum(y * r_y).
    Value* loss = nullptr;
    for (Value* y : g.outputs()) {
      Value* r = g.AddConstant(g.UniqueName("r"), fill(y->type(), false));
      Value* prod = g.AddNode("Mul", {y, r}, 1)->output(0);
      Value* sum = g.AddNode("ReduceSum", {prod}, 1)->output(0);
      loss = loss ? g.AddNode("Add", {loss, sum}, 1)->output(0) : sum;
    }
    Node* named = g.AddNode("Identity", {loss}, std::vector<std::string>{"objective"});
    g.ClearOutputs();
    g.AddOutput(named->output(0));
    PassManager pm;
    EXPECT_TRUE(pm.AddPipeline("infer-shapes").ok());
    EXPECT_TRUE(pm.Run(*m).ok());
  }
  return *std::move(m);
}

double Loss(const Model& m) {
  Executor e;
  auto out = e.Run(*m.graph, {});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0].GetDouble(0) : NAN;
}

// The pass's gradients of `params` against central differences.
void ExpectGradientsMatch(const std::string& body, const std::vector<std::string>& params) {
  SCOPED_TRACE(body);
  Model m = MakeModel(body);
  Model train = m.Clone();
  TrainingOptions options;
  options.params = params;
  auto report = AppendTrainingStep(*train.graph, options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(VerifyModel(train).ok()) << VerifyModel(train);
  Executor e;
  auto out = e.Run(*train.graph, {});
  ASSERT_TRUE(out.ok()) << out.status();
  // The loss, each gradient, each step, then any running statistics a
  // training-mode BatchNormalization updates.
  ASSERT_GE(out->size(), 1 + 2 * params.size());
  EXPECT_NEAR((*out)[0].GetDouble(0), Loss(m), 1e-12);
  const double eps = 1e-6;
  for (size_t k = 0; k < params.size(); ++k) {
    const Tensor& grad = (*out)[1 + k];
    const Tensor& base = m.graph->Lookup(params[k])->constant();
    ASSERT_EQ(grad.dims(), base.dims()) << params[k];
    for (int64_t j = 0; j < base.numel(); ++j) {
      double at[2];
      for (int s = 0; s < 2; ++s) {
        Model probe = m.Clone();
        Value* c = probe.graph->Lookup(params[k]);
        Tensor t = c->constant().Clone();
        t.data<double>()[j] += s == 0 ? eps : -eps;
        c->set_constant(t);
        at[s] = Loss(probe);
      }
      double fd = (at[0] - at[1]) / (2 * eps);
      EXPECT_NEAR(grad.GetDouble(j), fd, 1e-6 * std::max(1.0, std::fabs(fd))) << params[k] << "[" << j << "]";
    }
  }
}

TEST(Gradients, Elementwise) {
  ExpectGradientsMatch(R"(
  %a = const f64[3,1] elided
  %b = const f64[1,4] elided
  %pos = const f64[4] elided
  %s = Sub(%a, %b)
  %m = Mul(%s, %b)
  %d = Div(%m, %pos)
  %n = Neg(%d)
  %q = Add(%n, %a)
  return %q)", {"a", "b", "pos"});
}

TEST(Gradients, Activations) {
  ExpectGradientsMatch(R"(
  %x = const f64[2,5] elided
  %s = Sigmoid(%x)
  %t = Tanh(%x)
  %r = Relu(%x)
  %l = LeakyRelu(%x) {alpha = 0.2}
  %e = Erf(%x)
  %x2 = Exp(%x)
  %a1 = Add(%s, %t)
  %a2 = Add(%a1, %r)
  %a3 = Add(%a2, %l)
  %a4 = Add(%a3, %e)
  %a5 = Add(%a4, %x2)
  return %a5)", {"x"});
}

TEST(Gradients, PositiveDomain) {
  ExpectGradientsMatch(R"(
  %pos = const f64[6] elided
  %three = const f64[] dense [3.0]
  %l = Log(%pos)
  %s = Sqrt(%pos)
  %r = Reciprocal(%pos)
  %p = Pow(%pos, %three)
  %a1 = Add(%l, %s)
  %a2 = Add(%a1, %r)
  %a3 = Add(%a2, %p)
  return %a3)", {"pos"});
}

TEST(Gradients, MatMulAndGemm) {
  ExpectGradientsMatch(R"(
  %a = const f64[2,3,4] elided
  %b = const f64[4,5] elided
  %mm = MatMul(%a, %b)
  return %mm)", {"a", "b"});
  ExpectGradientsMatch(R"(
  %a = const f64[4,3] elided
  %b = const f64[5,4] elided
  %c = const f64[5] elided
  %g = Gemm(%a, %b, %c) {alpha = 0.5, beta = 2.0, transA = 1, transB = 1}
  return %g)", {"a", "b", "c"});
  ExpectGradientsMatch(R"(
  %a = const f64[3,4] elided
  %b = const f64[4,2] elided
  %c = const f64[3,1] elided
  %g = Gemm(%a, %b, %c)
  return %g)", {"a", "b", "c"});
}

TEST(Gradients, ShapesAndMovement) {
  ExpectGradientsMatch(R"(
  %x = const f64[2,3,4] elided
  %y = const f64[2,1,4] elided
  %shape = const i64[2] dense [6, 4]
  %axes = const i64[1] dense [0]
  %r = Reshape(%x, %shape)
  %t = Transpose(%r) {perm = [1, 0]}
  %f = Flatten(%x) {axis = 2}
  %u = Unsqueeze(%f, %axes)
  %sq = Squeeze(%u, %axes)
  %c = Concat(%x, %y) {axis = 1}
  %p0, %p1 = Split(%c) {axis = 1}
  %i = Identity(%t)
  %eshape = const i64[3] dense [2, 4, 6]
  %z = Expand(%i, %eshape)
  %same = Cast(%p1) {to = 11}
  %dropped = Dropout(%same)
  return %z, %sq, %dropped)", {"x", "y"});
}

TEST(Gradients, Reductions) {
  ExpectGradientsMatch(R"(
  %x = const f64[2,3,4] elided
  %axes = const i64[2] dense [0, -1]
  %s = ReduceSum(%x, %axes) {keepdims = 0}
  %m = ReduceMean(%x) {axes = [1], keepdims = 1}
  %all = ReduceSum(%x)
  %ms = Mul(%m, %all)
  %t = Transpose(%ms) {perm = [1, 0, 2]}
  %a = ReduceSum(%t) {keepdims = 0}
  %b = Mul(%s, %a)
  return %b)", {"x"});
}

TEST(Gradients, SoftmaxFamily) {
  ExpectGradientsMatch(R"(
  %x = const f64[2,3,4] elided
  %s = Softmax(%x) {axis = 1}
  %l = LogSoftmax(%x) {axis = -1}
  %a = Add(%s, %l)
  return %a)", {"x"});
}

TEST(Gradients, LossOps) {
  ExpectGradientsMatch(R"(
  %x = const f64[4,3] elided
  %labels = const i64[4] dense [0, 2, 1, 2]
  %loss = SoftmaxCrossEntropyLoss(%x, %labels)
  return %loss)", {"x"});
  ExpectGradientsMatch(R"(
  %x = const f64[2,3,2] elided
  %labels = const i64[2,2] dense [0, 2, 1, 1]
  %loss = SoftmaxCrossEntropyLoss(%x, %labels) {reduction = "none"}
  return %loss)", {"x"});
  ExpectGradientsMatch(R"(
  %x = const f64[3,4] elided
  %labels = const i64[3] dense [3, 0, 1]
  %lp = LogSoftmax(%x) {axis = 1}
  %loss = NegativeLogLikelihoodLoss(%lp, %labels) {reduction = "sum"}
  return %loss)", {"x"});
  // Ignored labels (in range of the classes, too) neither contribute nor count.
  ExpectGradientsMatch(R"(
  %x = const f64[5,3] elided
  %labels = const i64[5] dense [1, -100, 2, 1, 0]
  %loss = SoftmaxCrossEntropyLoss(%x, %labels) {ignore_index = -100}
  return %loss)", {"x"});
  ExpectGradientsMatch(R"(
  %x = const f64[4,3] elided
  %labels = const i64[4] dense [1, 2, 2, 0]
  %lp = LogSoftmax(%x) {axis = 1}
  %loss = NegativeLogLikelihoodLoss(%lp, %labels) {ignore_index = 2}
  return %loss)", {"x"});
}

TEST(Gradients, LayerNormGatherWhere) {
  ExpectGradientsMatch(R"(
  %x = const f64[2,3,4] elided
  %scale = const f64[4] elided
  %bias = const f64[4] elided
  %y = LayerNormalization(%x, %scale, %bias) {axis = -1, epsilon = 0.001}
  return %y)", {"x", "scale", "bias"});
  ExpectGradientsMatch(R"(
  %x = const f64[2,12] elided
  %scale = const f64[3,4] elided
  %shape = const i64[3] dense [2, 3, 4]
  %r = Reshape(%x, %shape)
  %y = LayerNormalization(%r, %scale) {axis = 1}
  return %y)", {"x", "scale"});
  ExpectGradientsMatch(R"(
  %table = const f64[5,3] elided
  %ids = const i64[2,3] dense [0, 4, 4, -1, 2, 0]
  %e = Gather(%table, %ids)
  return %e)", {"table"});
  ExpectGradientsMatch(R"(
  %a = const f64[2,3] elided
  %b = const f64[3] elided
  %cond = const bool[2,3] dense [true, false, true, false, false, true]
  %w = Where(%cond, %a, %b)
  return %w)", {"a", "b"});
}

TEST(Gradients, Convolutions) {
  // Strides, asymmetric pads and a size the stride does not divide (the
  // weight gradient's convolution overshoots the kernel and is cut).
  ExpectGradientsMatch(R"(
  %x = const f64[2,3,7,6] elided
  %w = const f64[4,3,3,2] elided
  %b = const f64[4] elided
  %y = Conv(%x, %w, %b) {pads = [1, 0, 2, 1], strides = [2, 2]}
  return %y)", {"x", "w", "b"});
  // Groups and dilations.
  ExpectGradientsMatch(R"(
  %x = const f64[1,4,6,6] elided
  %w = const f64[6,2,2,2] elided
  %y = Conv(%x, %w) {dilations = [2, 1], group = 2, pads = [1, 1, 1, 1]}
  return %y)", {"x", "w"});
  // Depthwise, 1-D.
  ExpectGradientsMatch(R"(
  %x = const f64[2,3,9] elided
  %w = const f64[3,1,3] elided
  %y = Conv(%x, %w) {group = 3, pads = [1, 1], strides = [2]}
  return %y)", {"x", "w"});
}

TEST(Gradients, NormalizationPoolingClip) {
  ExpectGradientsMatch(R"(
  %x = const f64[2,3,2,2] elided
  %scale = const f64[3] elided
  %bias = const f64[3] elided
  %mean = const f64[3] elided
  %posvar = const f64[3] elided
  %y = BatchNormalization(%x, %scale, %bias, %mean, %posvar) {epsilon = 0.01}
  return %y)", {"x", "scale", "bias"});
  // Training mode: the batch's own statistics, through which x's gradient
  // flows too; the updated running statistics are outputs the loss does not
  // read.
  ExpectGradientsMatch(R"(
  %x = const f64[4,3,2,3] elided
  %scale = const f64[3] elided
  %bias = const f64[3] elided
  %mean = const f64[3] elided
  %posvar = const f64[3] elided
  %y, %rm, %rv = BatchNormalization(%x, %scale, %bias, %mean, %posvar) {epsilon = 0.01, momentum = 0.8, training_mode = 1}
  %r = Relu(%y)
  return %r)", {"x", "scale", "bias"});
  ExpectGradientsMatch(R"(
  %x = const f64[5,2] elided
  %scale = const f64[2] elided
  %bias = const f64[2] elided
  %mean = const f64[2] elided
  %posvar = const f64[2] elided
  %y = BatchNormalization(%x, %scale, %bias, %mean, %posvar) {training_mode = 1}
  return %y)", {"x", "scale"});
  // Overlapping windows: an input that is the maximum of two windows gets
  // both gradients.
  ExpectGradientsMatch(R"(
  %x = const f64[1,2,5,5] elided
  %y = MaxPool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]}
  return %y)", {"x"});
  ExpectGradientsMatch(R"(
  %x = const f64[2,3,4,4] elided
  %a = AveragePool(%x) {kernel_shape = [2, 3], strides = [2, 1]}
  %p = AveragePool(%x) {count_include_pad = 1, kernel_shape = [3, 3], pads = [1, 1, 1, 1]}
  %g = GlobalAveragePool(%x)
  return %a, %p, %g)", {"x"});
  ExpectGradientsMatch(R"(
  %x = const f64[12] elided
  %lo = const f64[] dense [-0.5]
  %hi = const f64[] dense [0.4]
  %c = Clip(%x, %lo, %hi)
  %d = Clip(%x, _, %hi)
  return %c, %d)", {"x"});
  ExpectGradientsMatch(R"(
  %x = const f64[2,3] elided
  %pads = const i64[4] dense [1, 0, 0, 2]
  %v = const f64[] dense [-2.0]
  %p = Pad(%x, %pads, %v)
  return %p)", {"x"});
}

// The SGD step: P.next = P - learning_rate * P.grad, after the gradients.
TEST(TrainingStep, AppendsGradientsThenTheStep) {
  Model m = MakeModel(R"(
  %w = const f64[2,2] elided
  %b = const f64[2] elided
  %mm = MatMul(%w, %w)
  %y = Add(%mm, %b)
  return %y)");
  TrainingOptions options;
  options.params = {"w", "b"};
  options.learning_rate = 0.5;
  auto report = AppendTrainingStep(*m.graph, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->params, (std::vector<std::string>{"w", "b"}));
  std::vector<std::string> names;
  for (Value* v : m.graph->outputs()) names.push_back(v->name());
  EXPECT_EQ(names, (std::vector<std::string>{"objective", "w.grad", "b.grad", "w.next", "b.next"}));
  Executor e;
  auto out = e.Run(*m.graph, {});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& w = m.graph->Lookup("w")->constant();
  for (int64_t j = 0; j < 4; ++j)
    EXPECT_DOUBLE_EQ((*out)[3].GetDouble(j), w.GetDouble(j) - 0.5 * (*out)[1].GetDouble(j));
}

// Loss scaling on a step whose scaled loss overflows f32 at first: a
// dynamic scale skips those steps (no parameter, moment or step count
// moves; the scale halves) until the scaled loss is finite, then steps as
// the unscaled step does; after `growth_interval` finite steps in a row
// the scale doubles. A static scale gives the unscaled gradients.
TEST(TrainingStep, LossScaling) {
  const char* text = R"(graph @main() {
  %x = const f32[3,2] dense [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  %y = const f32[3,1] dense [1.0, 2.0, 3.0]
  %w = const f32[2,1] dense [0.5, -0.5]
  %p = MatMul(%x, %w)
  %e = Sub(%p, %y)
  %sq = Mul(%e, %e)
  %loss = ReduceMean(%sq) {keepdims = 0}
  return %loss
}
)";
  // Steps of `options` from the step graph's own state: the outputs of each
  // step, each NAME.next fed back into the constant NAME.
  auto run = [&](const TrainingOptions& options, int steps) {
    auto m = ParseModel(text);
    EXPECT_TRUE(m.ok()) << m.status();
    EXPECT_TRUE(AppendTrainingStep(*m->graph, options).ok());
    Graph& g = *m->graph;
    std::vector<std::vector<Tensor>> all;
    for (int s = 0; s < steps; ++s) {
      Executor e;
      auto out = e.Run(g, {});
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) break;
      for (size_t i = 0; i < g.outputs().size(); ++i) {
        const std::string& name = g.outputs()[i]->name();
        if (name.size() > 5 && name.compare(name.size() - 5, 5, ".next") == 0)
          g.Lookup(name.substr(0, name.size() - 5))->set_constant((*out)[i]);
      }
      all.push_back(*out);
    }
    std::vector<std::string> names;
    for (Value* v : g.outputs()) names.push_back(v->name());
    return std::make_pair(names, all);
  };
  TrainingOptions plain;
  plain.params = {"w"};
  plain.optimizer = TrainingOptions::Optimizer::kAdam;
  plain.learning_rate = 0.1;
  const auto [plain_names, plain_steps] = run(plain, 2);

  TrainingOptions dynamic = plain;
  dynamic.loss_scaling = TrainingOptions::LossScaling::kDynamic;
  dynamic.loss_scale = 9e37;  // the scaled loss, 6.9 * 9e37, overflows f32
  dynamic.loss_scale_growth_interval = 2;
  const auto [names, steps] = run(dynamic, 7);
  EXPECT_EQ(names, (std::vector<std::string>{"loss", "w.grad", "w.next", "w.exp_avg.next", "w.exp_avg_sq.next",
                                             "optimizer.step.next", "loss_scale.next", "loss_scale.good_steps.next"}));
  ASSERT_EQ(steps.size(), 7u);
  // Scales 9e37, 4.5e37 and 2.25e37 overflow; 1.125e37 does not.
  const double want_scale[] = {4.5e37, 2.25e37, 1.125e37, 1.125e37, 2.25e37, 2.25e37, 4.5e37};
  const double want_good[] = {0, 0, 0, 1, 0, 1, 0};
  for (int s = 0; s < 7; ++s) {
    SCOPED_TRACE(s + 1);
    EXPECT_FLOAT_EQ(steps[s][6].GetDouble(0), want_scale[s]);
    EXPECT_EQ(steps[s][7].GetDouble(0), want_good[s]);
    const bool skipped = s < 3;
    // Adam's step count moves only on the steps kept.
    EXPECT_EQ(steps[s][5].GetDouble(0), skipped ? 0 : s - 2);
    if (skipped) {
      EXPECT_EQ(steps[s][2].GetDouble(0), 0.5);  // w unchanged
      EXPECT_EQ(steps[s][3].GetDouble(0), 0.0);  // its moments too
      EXPECT_EQ(steps[s][4].GetDouble(0), 0.0);
    }
  }
  // The first kept step is the unscaled step's first, the next its second.
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < 2; ++j) {
      EXPECT_NEAR(steps[3 + k][2].GetDouble(j), plain_steps[k][2].GetDouble(j), 1e-6) << "w after kept step " << k + 1;
      EXPECT_NEAR(steps[3 + k][1].GetDouble(j), plain_steps[k][1].GetDouble(j), 1e-5) << "w.grad of kept step " << k + 1;
    }

  TrainingOptions fixed = plain;
  fixed.loss_scaling = TrainingOptions::LossScaling::kStatic;
  fixed.loss_scale = 1024;  // a power of two: the unscaled gradient exactly
  const auto [fixed_names, fixed_steps] = run(fixed, 2);
  EXPECT_EQ(fixed_names, plain_names);
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < 2; ++j) EXPECT_EQ(fixed_steps[k][1].GetDouble(j), plain_steps[k][1].GetDouble(j));

  // Bad values.
  for (double bad : {0.0, -1.0, 1e39, std::nan("")}) {
    auto m = ParseModel(text);
    ASSERT_TRUE(m.ok());
    TrainingOptions o = dynamic;
    o.loss_scale = bad;
    auto r = AppendTrainingStep(*m->graph, o);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(), "training-step: the loss scale (--loss-scale) must be positive and below 1e38");
  }
}

// A gradient of more than 4096 elements is checked as rows, then their
// sums: a non-finite element anywhere still skips the step.
TEST(TrainingStep, LossScalingChecksLargeGradientsByRows) {
  Model m;
  Graph& g = *m.graph;
  const int64_t n = 5000;
  std::vector<float> xs(2 * n), ws(n, 0.01f);
  for (int64_t i = 0; i < 2 * n; ++i) xs[i] = static_cast<float>(i % 7 + 1);
  Value* x = g.AddConstant("x", Tensor::FromVector<float>(xs, {2, n}));
  Value* w = g.AddConstant("w", Tensor::FromVector<float>(ws, {n, 1}));
  Value* p = g.AddNode("MatMul", {x, w}, {"p"})->output(0);
  Value* sq = g.AddNode("Mul", {p, p}, {"sq"})->output(0);
  Node* mean = g.AddNode("ReduceMean", {sq}, {"loss"});
  mean->SetAttr("keepdims", Attribute::Int(0));
  g.AddOutput(mean->output(0));
  for (double scale : {1e36, 1.0}) {
    SCOPED_TRACE(scale);
    Model step = m.Clone();
    TrainingOptions o;
    o.params = {"w"};
    o.loss_scaling = TrainingOptions::LossScaling::kDynamic;
    o.loss_scale = scale;
    ASSERT_TRUE(AppendTrainingStep(*step.graph, o).ok());
    bool rows = false;
    for (const Node* node : step.graph->nodes())
      rows |= node->op() == "Reshape" && node->output(0)->type().shape().StaticDims() == std::vector<int64_t>{2, 2500};
    EXPECT_TRUE(rows) << "the check sums rows of 2500";
    Executor e;
    auto out = e.Run(*step.graph, {});
    ASSERT_TRUE(out.ok()) << out.status();
    // outputs: loss, w.grad, w.next, loss_scale.next, loss_scale.good_steps.next
    const bool skipped = scale > 1;  // the scaled loss, about 4e4 * 1e36, overflows
    EXPECT_NEAR((*out)[2].GetDouble(0), skipped ? 0.01 : 0.01 - 0.01 * (*out)[1].GetDouble(0), 1e-5);
    EXPECT_FLOAT_EQ((*out)[3].GetDouble(0), skipped ? scale / 2 : scale);
  }
}

// A data-parallel step: one kiln.AllReduce per gradient, right after the
// gradient's producer; the updates run in the order the gradients are ready
// in; run alone (peers holding the same data) the step equals the
// single-replica one.
TEST(TrainingStep, DataParallelAveragesEachGradient) {
  const char* body = R"(
  %w1 = const f64[3,4] elided
  %w2 = const f64[4,2] elided
  %x = const f64[5,3] elided
  %h = MatMul(%x, %w1)
  %t = Tanh(%h)
  %y = MatMul(%t, %w2)
  return %y)";
  Model one = MakeModel(body);
  Model dp = one.Clone();
  TrainingOptions options;
  options.params = {"w1", "w2"};
  ASSERT_TRUE(AppendTrainingStep(*one.graph, options).ok());
  options.replicas = 8;
  auto report = AppendTrainingStep(*dp.graph, options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(VerifyModel(dp).ok()) << VerifyModel(dp);
  std::vector<const Node*> reduces;
  std::vector<std::string> update_order;
  for (const Node* n : dp.graph->nodes()) {
    if (n->QualifiedOp() == "kiln.AllReduce") {
      reduces.push_back(n);
      EXPECT_EQ(n->GetInt("replicas", 0), 8);
      ASSERT_EQ(n->num_inputs(), 1);
      EXPECT_EQ(n->prev(), n->input(0)->producer()) << "the AllReduce follows its gradient's producer";
    }
    if (n->op() == "Sub" && n->input(0)->is_constant() && n->input(0)->name()[0] == 'w')
      update_order.push_back(n->input(0)->name());
  }
  EXPECT_EQ(reduces.size(), 2u);
  // w2's gradient is ready first (the backward pass starts at the loss).
  EXPECT_EQ(update_order, (std::vector<std::string>{"w2", "w1"}));
  Executor e;
  auto a = e.Run(*one.graph, {});
  auto b = e.Run(*dp.graph, {});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i)
    for (int64_t j = 0; j < (*a)[i].numel(); ++j) EXPECT_EQ((*a)[i].GetDouble(j), (*b)[i].GetDouble(j)) << i;
  options.replicas = 0;
  Model bad = MakeModel(body);
  auto r = AppendTrainingStep(*bad.graph, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "training-step: replicas must be between 1 and 4096, not 0");
}

// The default parameters are the float constants of rank >= 1 the loss
// depends on: not scalars, not integer constants, not unused ones.
TEST(TrainingStep, DefaultParametersAndLoss) {
  Model m = MakeModel(R"(
  %w = const f64[3] elided
  %unused = const f64[3] elided
  %k = const f64[] dense [2.0]
  %axes = const i64[1] dense [0]
  %y = Mul(%w, %k)
  %s = ReduceSum(%y, %axes) {keepdims = 0}
  return %s)");
  auto report = AppendTrainingStep(*m.graph, TrainingOptions());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->params, std::vector<std::string>{"w"});
}

TEST(TrainingStep, Errors) {
  auto error = [](const std::string& body, TrainingOptions options = {}) {
    auto m = ParseModel("graph @main(%x: f64[2,3]) {\n" + body + "\n}\n");
    EXPECT_TRUE(m.ok()) << m.status();
    auto r = AppendTrainingStep(*m->graph, options);
    EXPECT_FALSE(r.ok());
    return std::string(r.status().message());
  };
  const char* two = R"(
  %w = const f64[2,3] elided
  %a = Mul(%x, %w)
  %b = ReduceSum(%a)
  %c = ReduceMean(%a)
  return %b, %c)";
  EXPECT_EQ(error(two), "training-step: outputs 'b' and 'c' could both be the loss: name it with --loss");
  TrainingOptions named;
  named.loss = "z";
  EXPECT_EQ(error(two, named), "training-step: --loss='z' is not a graph output (outputs: b, c)");
  named.loss = "b";
  named.params = {"x"};
  EXPECT_EQ(error(two, named), "training-step: --params: 'x' is not a constant of the graph");
  EXPECT_EQ(error(R"(
  %w = const f64[2,3] elided
  %a = Mul(%x, %w)
  return %a)"), "training-step: no graph output is a float tensor of one element: name the loss with --loss");
  EXPECT_EQ(error(R"(
  %w = const f64[2,3] elided
  %a = Mul(%x, %w)
  %t = Abs(%a)
  %s = ReduceSum(%t)
  return %s)"), "training-step: cannot differentiate node 't' (Abs): the op has no gradient rule");
}

// Shapes between the parameters and the loss must be static: the first
// value that is not is named.
TEST(TrainingStep, SymbolicShapesAreNamed) {
  auto m = ParseModel(R"(graph @main(%x: f64[batch,3]) {
  %w = const f64[3,2] dense [1, 2, 3, 4, 5, 6]
  %h = MatMul(%x, %w)
  %t = Tanh(%h)
  %s = ReduceSum(%t) {keepdims = 0}
  return %s
}
)");
  ASSERT_TRUE(m.ok()) << m.status();
  auto r = AppendTrainingStep(*m->graph, TrainingOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "training-step: 'h' lies between a parameter and the loss but its shape is not static (pin the input "
            "dims first)");
}

TEST(Gradients, EveryRuleIsTested) {
  // The rules the tests above exercise; a new rule needs a check here.
  std::vector<std::string> tested = {
      "Add", "AveragePool", "BatchNormalization", "Cast", "Clip", "Concat", "Conv", "Div", "Dropout", "Erf",
      "Exp", "Expand", "Flatten", "Gather", "Gemm", "GlobalAveragePool", "Identity", "LayerNormalization",
      "LeakyRelu", "Log", "LogSoftmax", "MatMul", "MaxPool", "Mul", "Neg", "NegativeLogLikelihoodLoss", "Pad",
      "Pow", "Reciprocal", "ReduceMean", "ReduceSum", "Relu", "Reshape", "Sigmoid", "Softmax",
      "SoftmaxCrossEntropyLoss", "Split", "Sqrt", "Squeeze", "Sub", "Tanh", "Transpose", "Unsqueeze", "Where"};
  EXPECT_EQ(DifferentiableOps(), tested);
}

}  // namespace
}  // namespace kiln
