//===- target_test_util.h - Helpers shared by the target tests --*- C++ -*-===//
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/ir/tensor.h"
#include "graph/support/status.h"
#include "runtime/loaded_model.h"
#include "target/npusim/npusim_executable.h"
#include "target/builtin_targets.h"
#include "target/npusim/npusim_compile.h"

namespace kiln::testing_util {

// An f32 tensor of `dims` with seeded values uniform in [-1, 1).
inline Tensor Random(std::vector<int64_t> dims, uint32_t seed) {
  Tensor t(DType::kF32, std::move(dims));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : t.span<float>()) v = u(rng);
  return t;
}

// `m` (optimized, shapes inferred) compiled for npusim and loaded.
inline absl::StatusOr<std::unique_ptr<runtime::LoadedModel>> CompileAndLoadNpusim(
    const Model& m, const target::CompileOptions& options = {}, const std::string& name = "test.kiln") {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<target::Target> t, target::CreateBuiltinTarget("npusim"));
  KILN_ASSIGN_OR_RETURN(artifact::Artifact a, target::CompileForNpusim(m, *t, options));
  return runtime::LoadedModel::FromArtifact(std::move(a), name, target::NpusimModuleLoader());
}

}  // namespace kiln::testing_util
