// The training step on the PyTorch training models
// (scripts/export_training_models.py, exported by the models.export_training
// fixture): `training-step` and then the default pipeline, run on the
// reference executor, give PyTorch's loss and, for every parameter,
// PyTorch's gradient (torch.autograd.grad of the same loss).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "graph/exec/executor.h"
#include "graph/io/npy.h"
#include "graph/passes/pass_manager.h"
#include "graph/passes/training_step.h"
#include "graph/verifier/verifier.h"
#include "gtest/gtest.h"
#include "tests/models/exported_model.h"
#include "tools/conformance/conformance.h"

namespace kiln {
namespace {

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

class TrainingModel : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainingModel, GradientsMatchPyTorch) {
  auto exported = LoadExportedModel(GetParam());
  ASSERT_TRUE(exported.ok()) << exported.status();
  const std::string dir = absl::StrCat(std::getenv("KILN_MODELS_DIR"), "/", GetParam());
  std::vector<std::string> params = Lines(dir + "/params.txt");
  ASSERT_FALSE(params.empty());
  Model& model = exported->model;
  size_t forward_nodes = model.graph->num_nodes();

  PassOptions options;
  options.training.params = params;
  PassManager pm(options);
  ASSERT_TRUE(pm.AddPipeline("training-step,default").ok());
  auto changed = pm.Run(model);
  ASSERT_TRUE(changed.ok()) << changed.status();
  absl::Status v = VerifyModel(model);
  ASSERT_TRUE(v.ok()) << v;
  std::cout << "[ training ] " << GetParam() << ": " << forward_nodes << " forward nodes -> "
            << model.graph->num_nodes() << " nodes for the step, " << params.size() << " parameters\n";

  absl::Status s;
  // A model in training mode: its BatchNorm running statistics, updated.
  std::vector<std::string> running;
  if (std::filesystem::exists(dir + "/running.txt")) running = Lines(dir + "/running.txt");
  Executor exec;
  auto out = exec.Run(*model.graph, exported->inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1 + 2 * params.size() + running.size());
  for (size_t i = 0; i < running.size(); ++i) {
    auto expected = ReadNpy(absl::StrCat(dir, "/running_", i, ".npy"));
    ASSERT_TRUE(expected.ok()) << expected.status();
    const size_t at = 1 + 2 * params.size() + i;
    EXPECT_EQ(model.graph->outputs()[at]->name(), running[i] + ".next");
    // A running variance follows ONNX (the batch's population variance
    // enters it), PyTorch's the unbiased variance: they differ by
    // (1 - momentum) * var / (M - 1), under 1e-4 of it for these batches.
    const bool var = absl::EndsWith(running[i], "running_var");
    s = CompareTensors(*expected, (*out)[at], /*rtol=*/var ? 5e-4 : 1e-5, /*atol=*/1e-6);
    EXPECT_TRUE(s.ok()) << running[i] << " after the step differs from PyTorch's: " << s;
  }
  s = CompareTensors(exported->expected[0], (*out)[0], /*rtol=*/1e-4, /*atol=*/1e-6);
  EXPECT_TRUE(s.ok()) << "the loss differs from PyTorch's: " << s;
  for (size_t i = 0; i < params.size(); ++i) {
    auto expected = ReadNpy(absl::StrCat(dir, "/grad_", i, ".npy"));
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_EQ(model.graph->outputs()[1 + i]->name(), params[i] + ".grad");
    s = CompareTensors(*expected, (*out)[1 + i], /*rtol=*/1e-3, /*atol=*/1e-6);
    EXPECT_TRUE(s.ok()) << "the gradient of " << params[i] << " differs from PyTorch's: " << s;
  }
}

// TrainingOptions from the key=value words of optimizers.txt (kiln's flag
// names).
TrainingOptions OptionsFrom(const std::vector<std::string>& words) {
  TrainingOptions o;
  for (const std::string& w : words) {
    std::vector<std::string> kv = absl::StrSplit(w, absl::MaxSplits('=', 1));
    EXPECT_EQ(kv.size(), 2u) << w;
    if (kv.size() != 2) continue;
    const std::string& k = kv[0];
    auto number = [&](double* x) { EXPECT_TRUE(absl::SimpleAtod(kv[1], x)) << w; };
    if (k == "optimizer") {
      auto opt = ParseOptimizer(kv[1]);
      EXPECT_TRUE(opt.ok()) << opt.status();
      if (opt.ok()) o.optimizer = *opt;
    } else if (k == "learning-rate") {
      number(&o.learning_rate);
    } else if (k == "momentum") {
      number(&o.momentum);
    } else if (k == "nesterov") {
      o.nesterov = kv[1] == "true";
    } else if (k == "weight-decay") {
      number(&o.weight_decay);
    } else if (k == "epsilon") {
      number(&o.epsilon);
    } else if (k == "betas") {
      std::vector<std::string> b = absl::StrSplit(kv[1], ',');
      EXPECT_EQ(b.size(), 2u) << w;
      EXPECT_TRUE(b.size() == 2 && absl::SimpleAtod(b[0], &o.beta1) && absl::SimpleAtod(b[1], &o.beta2)) << w;
    } else {
      ADD_FAILURE() << "unknown key in optimizers.txt: " << w;
    }
  }
  return o;
}

// Several steps of each torch.optim run in optimizers.txt, on the same
// inputs, by the step graph on the reference executor: after each step
// every output NAME.next replaces the constant NAME (the parameters and the
// optimizer's state), as a training loop does. The parameters must end
// where PyTorch's did.
TEST_P(TrainingModel, OptimizersMatchTorchOptim) {
  const std::string dir = absl::StrCat(std::getenv("KILN_MODELS_DIR"), "/", GetParam());
  std::vector<std::string> runs = Lines(dir + "/optimizers.txt");
  ASSERT_FALSE(runs.empty());
  std::vector<std::string> params = Lines(dir + "/params.txt");
  for (const std::string& line : runs) {
    SCOPED_TRACE(line);
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    ASSERT_GE(words.size(), 3u);
    int steps = 0;
    ASSERT_TRUE(absl::SimpleAtoi(words[1], &steps));
    auto exported = LoadExportedModel(GetParam());
    ASSERT_TRUE(exported.ok()) << exported.status();
    Model& model = exported->model;
    PassOptions options;
    options.training = OptionsFrom({words.begin() + 2, words.end()});
    options.training.params = params;
    PassManager pm(options);
    ASSERT_TRUE(pm.AddPipeline("training-step").ok());
    auto changed = pm.Run(model);
    ASSERT_TRUE(changed.ok()) << changed.status();
    Graph& g = *model.graph;
    int fed_back = 0;
    for (int step = 0; step < steps; ++step) {
      Executor exec;
      auto out = exec.Run(g, exported->inputs);
      ASSERT_TRUE(out.ok()) << out.status();
      fed_back = 0;
      for (size_t i = 0; i < g.outputs().size(); ++i) {
        const std::string& name = g.outputs()[i]->name();
        if (!absl::EndsWith(name, ".next")) continue;
        Value* state = g.Lookup(name.substr(0, name.size() - 5));
        ASSERT_TRUE(state && state->is_constant()) << name;
        state->set_constant((*out)[i]);
        ++fed_back;
      }
    }
    // The parameters, and for each its state (one momentum buffer or two
    // moments), and Adam's step count.
    const bool adam = options.training.optimizer != TrainingOptions::Optimizer::kSgd;
    const int running = std::filesystem::exists(dir + "/running.txt")
                            ? static_cast<int>(Lines(dir + "/running.txt").size()) : 0;
    EXPECT_EQ(fed_back, static_cast<int>(params.size()) * (adam ? 3 : 2) + (adam ? 1 : 0) + running);
    for (size_t i = 0; i < params.size(); ++i) {
      auto expected = ReadNpy(absl::StrCat(dir, "/", words[0], "_", i, ".npy"));
      ASSERT_TRUE(expected.ok()) << expected.status();
      absl::Status s = CompareTensors(*expected, g.Lookup(params[i])->constant(), /*rtol=*/1e-4, /*atol=*/1e-5);
      EXPECT_TRUE(s.ok()) << params[i] << " after " << steps << " steps differs from torch.optim's: " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Exported, TrainingModel,
                         ::testing::Values("cnn_classifier", "mlp_classifier", "bert_mlm", "gpt2_regression",
                                           "cnn_train_bn"));

}  // namespace
}  // namespace kiln
