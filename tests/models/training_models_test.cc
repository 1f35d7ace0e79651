// The training step on the PyTorch training models
// (scripts/export_training_models.py, exported by the models.export_training
// fixture): `training-step` and then the default pipeline, run on the
// reference executor, give PyTorch's loss and, for every parameter,
// PyTorch's gradient (torch.autograd.grad of the same loss).
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/exec/executor.h"
#include "graph/io/npy.h"
#include "graph/passes/pass_manager.h"
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

  Executor exec;
  auto out = exec.Run(*model.graph, exported->inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1 + 2 * params.size());
  absl::Status s = CompareTensors(exported->expected[0], (*out)[0], /*rtol=*/1e-4, /*atol=*/1e-6);
  EXPECT_TRUE(s.ok()) << "the loss differs from PyTorch's: " << s;
  for (size_t i = 0; i < params.size(); ++i) {
    auto expected = ReadNpy(absl::StrCat(dir, "/grad_", i, ".npy"));
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_EQ(model.graph->outputs()[1 + i]->name(), params[i] + ".grad");
    s = CompareTensors(*expected, (*out)[1 + i], /*rtol=*/1e-3, /*atol=*/1e-6);
    EXPECT_TRUE(s.ok()) << "the gradient of " << params[i] << " differs from PyTorch's: " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Exported, TrainingModel,
                         ::testing::Values("cnn_classifier", "mlp_classifier", "bert_mlm", "gpt2_regression"));

}  // namespace
}  // namespace kiln
