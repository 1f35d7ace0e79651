// PyTorch-exported models (scripts/export_models.py, random weights) run on
// the reference executor and match PyTorch's outputs.
#include "graph/exec/executor.h"
#include "gtest/gtest.h"
#include "tests/models/exported_model.h"
#include "tools/conformance/conformance.h"

namespace kiln {
namespace {

class TorchModel : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchModel, MatchesPyTorch) {
  auto m = LoadExportedModel(GetParam());
  ASSERT_TRUE(m.ok()) << m.status();
  Executor exec;
  auto outputs = exec.Run(*m->model.graph, m->inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), m->expected.size());
  for (size_t i = 0; i < outputs->size(); ++i) {
    absl::Status s = CompareTensors(m->expected[i], (*outputs)[i], /*rtol=*/1e-3, /*atol=*/1e-5);
    EXPECT_TRUE(s.ok()) << "output " << i << ": " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Exported, TorchModel,
                         ::testing::Values("tiny_cnn", "mlp", "bert_encoder", "gpt2_block", "resnet18",
                                           "resnet50", "mobilenet_v2"));

}  // namespace
}  // namespace kiln
