// PyTorch-exported models (scripts/export_models.py, random weights) run on
// the reference executor and match PyTorch's outputs.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "frontend/onnx/importer.h"
#include "graph/exec/executor.h"
#include "graph/io/npy.h"
#include "gtest/gtest.h"
#include "tools/conformance/conformance.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

class TorchModel : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchModel, MatchesPyTorch) {
  const char* root = std::getenv("KILN_MODELS_DIR");
  ASSERT_NE(root, nullptr) << "KILN_MODELS_DIR is not set";
  fs::path dir = fs::path(root) / GetParam();
  auto model = onnx_import::ImportFile((dir / "model.onnx").string());
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < model->graph->inputs().size(); ++i) {
    auto t = ReadNpy((dir / ("input_" + std::to_string(i) + ".npy")).string());
    ASSERT_TRUE(t.ok()) << t.status();
    inputs.push_back(*t);
  }
  Executor exec;
  auto outputs = exec.Run(*model->graph, std::move(inputs));
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  for (size_t i = 0; i < outputs->size(); ++i) {
    auto expected = ReadNpy((dir / ("expected_" + std::to_string(i) + ".npy")).string());
    ASSERT_TRUE(expected.ok()) << expected.status();
    absl::Status s = CompareTensors(*expected, (*outputs)[i], /*rtol=*/1e-3, /*atol=*/1e-5);
    EXPECT_TRUE(s.ok()) << "output " << i << ": " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Exported, TorchModel,
                         ::testing::Values("tiny_cnn", "mlp", "bert_encoder", "gpt2_block", "resnet18",
                                           "resnet50", "mobilenet_v2"));

}  // namespace
}  // namespace kiln
