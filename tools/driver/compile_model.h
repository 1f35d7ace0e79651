//===- compile_model.h - A model through the optimizer and a target -*- C++ -*-===//
//
// What `kiln compile` and the Python module share: a model verified, run
// through its pipeline, placed on the target's engines and compiled into an
// artifact, and the built-in targets and plugins registered (exactly as a
// plugin registers). Nothing here reads a command line.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/passes/pass_manager.h"
#include "target/api/target.h"

namespace kiln::driver {

// Registers the built-in targets (through the path plugins take) and kiln's
// host kernels, then the plugins on KILN_PLUGIN_PATH (one that cannot be
// added is a warning through `warn`: kiln goes on without it) and those in
// `plugins` (one that cannot be added is an error). Once per process.
absl::Status SetUpTargets(const std::vector<std::string>& plugins,
                          const std::function<void(const std::string&)>& warn);

// Loads a model from .onnx (imported) or .kir (parsed, with its .blobs side
// file when present).
absl::StatusOr<Model> LoadModel(const std::string& path);

// The optimizer pipeline a target asks for, without the fusion pass when
// `fusion` is false.
std::string PipelineFor(const target::TargetDescription& description, bool fusion);

// Runs `passes` ("none" or empty: nothing) over `model` with `options`.
absl::Status RunPipeline(Model& model, const std::string& passes, const PassOptions& options);

// One compilation: the model (named `model_name` in errors) through
// `run_pipeline` with `pipeline`, verified, placed and compiled by `target`
// into `path`. With `explain`, `explanation` receives the placement (or,
// for a target that explains its artifacts, the artifact's tasks).
struct CompileJob {
  std::string model_name;
  target::Target* target = nullptr;
  target::CompileOptions options;
  std::string pipeline;
  std::function<absl::Status(Model&, const std::string& pipeline)> run_pipeline;
  bool explain = false;
};
absl::Status CompileModelInto(Model& model, const CompileJob& job, const std::string& path, std::string* explanation);

}  // namespace kiln::driver
