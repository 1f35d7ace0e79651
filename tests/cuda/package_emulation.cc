//===- package_emulation.cc - The exported models' cuda packages, emulated ===//
//
// Its own test binary (cuda_emulation_tests), run by the ctest
// cuda.emulate.exported_models with KILN_MODELS_DIR naming the models that
// scripts/export_models.py wrote, and by cuda.emulate.decoder_generation
// with KILN_DECODERS_DIR naming scripts/export_decoders.py's.
//
//===----------------------------------------------------------------------===//
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "graph/io/npy.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/models/exported_model.h"

namespace kiln {
namespace {

// The exported models compiled for cuda and emulated on the host (every
// kernel through the tile IR interpreter) against PyTorch's outputs: the
// whole package (lowering, argument binding, memory plan, launch order),
// short of the CUDA C++ itself. About a minute; ResNet-50 is left out (its
// 4 GMACs through the interpreter would add as much again per precision).
TEST(CudaEmulation, ExportedModels) {
  ASSERT_NE(std::getenv("KILN_MODELS_DIR"), nullptr) << "KILN_MODELS_DIR must name the exported models";
  for (const char* name : {"tiny_cnn", "mlp", "bert_encoder", "gpt2_block", "mobilenet_v2", "resnet18"}) {
    for (const bool fp16 : {false, true}) {
      SCOPED_TRACE(absl::StrCat(name, fp16 ? " fp16" : " fp32"));
      auto m = LoadExportedModel(name);
      ASSERT_TRUE(m.ok()) << m.status();
      target::CompileOptions o;
      o.precision = fp16 ? target::Precision::kFp16 : target::Precision::kFp32;
      ASSERT_TRUE(cuda_test::Optimize(m->model, *cuda_test::CudaTarget()).ok());
      auto p = cuda_test::Package(m->model, o);
      ASSERT_TRUE(p.ok()) << p.status();
      auto start = std::chrono::steady_clock::now();
      auto got = cuda_test::Emulate(*p, m->inputs);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), m->expected.size());
      for (size_t i = 0; i < got->size(); ++i) {
        EXPECT_TRUE(cuda_test::Near((*got)[i], m->expected[i], fp16 ? 1e-2 : 1e-4)) << "output " << i;
      }
      std::cout << name << (fp16 ? " fp16" : " fp32") << ": " << p->kernels.size() << " kernels emulated in "
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s\n";
    }
  }
}

// torchvision's SSDlite detector: the backbone and heads as kernels, the
// post-processing (per-class score threshold, top-k and NMS) as host tasks
// over values sized at run time, against PyTorch's detections: as many,
// and the same up to the first tied score (scores within a millionth of
// each other, which top-k and NMS may order either way: random weights
// leave many positions with identical features).
TEST(CudaEmulation, Detector) {
  ASSERT_NE(std::getenv("KILN_MODELS_DIR"), nullptr) << "KILN_MODELS_DIR must name the exported models";
  auto m = LoadExportedModel("ssdlite");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(cuda_test::Optimize(m->model, *cuda_test::CudaTarget()).ok());
  auto p = cuda_test::Package(m->model, {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_GT(p->num_host_tasks(), 0);
  const auto start = std::chrono::steady_clock::now();
  auto got = cuda_test::Emulate(*p, m->inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 3u);
  const Tensor &boxes = (*got)[0], &scores = (*got)[1], &labels = (*got)[2];
  const Tensor &want_boxes = m->expected[0], &want_scores = m->expected[1], &want_labels = m->expected[2];
  ASSERT_EQ(scores.dims(), want_scores.dims());
  ASSERT_EQ(boxes.dims(), want_boxes.dims());
  ASSERT_EQ(labels.dims(), want_labels.dims());
  const int64_t n = want_scores.numel();
  int64_t tie = n;
  for (int64_t i = 1; i < n && tie == n; ++i)
    if (std::abs(want_scores.GetDouble(i) - want_scores.GetDouble(i - 1)) <= 1e-6 * std::abs(want_scores.GetDouble(i)))
      tie = i - 1;
  EXPECT_GE(tie, 5) << "the detections tie too early to compare";
  for (int64_t i = 0; i < tie; ++i) {
    SCOPED_TRACE(absl::StrCat("detection ", i));
    EXPECT_NEAR(scores.GetDouble(i), want_scores.GetDouble(i), 1e-4);
    EXPECT_EQ(labels.GetDouble(i), want_labels.GetDouble(i));
    for (int64_t j = 0; j < 4; ++j) EXPECT_NEAR(boxes.GetDouble(4 * i + j), want_boxes.GetDouble(4 * i + j), 0.05);
  }
  std::cout << "ssdlite: " << n << " detections, the first " << tie << " before a tie; " << p->kernels.size()
            << " kernels and " << p->num_host_tasks() << " host tasks emulated in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s\n";
}

// Greedy generation with a static KV cache on the cuda target: the tiny
// decoder's prefill and decode steps as packages, emulated on the host, one
// step after another (each step's token.next, pos.next and caches feed the
// next), token for token against PyTorch's at fp32 and fp16.
TEST(CudaEmulation, DecoderGeneration) {
  const char* root = std::getenv("KILN_DECODERS_DIR");
  ASSERT_NE(root, nullptr) << "KILN_DECODERS_DIR must name the decoders (scripts/export_decoders.py)";
  const std::filesystem::path dir = std::filesystem::path(root) / "tiny_decoder";
  auto npy = [&](const char* f) {
    auto t = ReadNpy((dir / f).string());
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *std::move(t) : Tensor();
  };
  const Tensor expected = npy("tokens.npy");
  for (const bool fp16 : {false, true}) {
    SCOPED_TRACE(fp16 ? "fp16" : "fp32");
    target::CompileOptions o;
    o.precision = fp16 ? target::Precision::kFp16 : target::Precision::kFp32;
    std::vector<target::cuda::CudaPackage> steps;
    for (const char* file : {"prefill.onnx", "decode.onnx"}) {
      auto p = cuda_test::CompileOnnx((dir / file).string(), o);
      ASSERT_TRUE(p.ok()) << p.status();
      steps.push_back(*std::move(p));
    }
    // Inputs token, pos, then each layer's k and v; outputs token.next,
    // generated, pos.next, then the caches.
    const Tensor cache = npy("cache0.npy");
    std::vector<Tensor> in = {npy("prompt.npy"), npy("pos0.npy")};
    const size_t caches = steps[0].inputs.size() - 2;
    for (size_t i = 0; i < caches; ++i) in.push_back(cache);
    std::vector<int64_t> tokens;
    for (int64_t step = 0; step < expected.numel(); ++step) {
      auto out = cuda_test::Emulate(steps[step == 0 ? 0 : 1], in);
      ASSERT_TRUE(out.ok()) << out.status();
      tokens.push_back(static_cast<int64_t>((*out)[1].GetDouble(0)));
      in = {(*out)[0], (*out)[2]};
      for (size_t i = 0; i < caches; ++i) in.push_back((*out)[3 + i]);
    }
    std::vector<int64_t> want(expected.numel());
    for (int64_t i = 0; i < expected.numel(); ++i) want[i] = static_cast<int64_t>(expected.GetDouble(i));
    EXPECT_EQ(tokens, want);
  }
}

}  // namespace
}  // namespace kiln
