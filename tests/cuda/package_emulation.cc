//===- package_emulation.cc - The exported models' cuda packages, emulated ===//
//
// Its own test binary (cuda_emulation_tests), run by the ctest
// cuda.emulate.exported_models with KILN_MODELS_DIR naming the models that
// scripts/export_models.py wrote.
//
//===----------------------------------------------------------------------===//
#include <chrono>
#include <cstdlib>
#include <iostream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
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

}  // namespace
}  // namespace kiln
