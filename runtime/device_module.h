//===- device_module.h - The device part of a .kiln artifact ----*- C++ -*-===//
//
// A .kiln artifact holds its graph (which the reference executor runs, and
// which serves the tasks its fallback engine and the host run) and, for a
// device target, a module of that target's own: programs, buffers, tasks.
// The target that compiled the artifact loads the module into a
// DeviceModule (LoadedModel's loader); the runtime runs it and asks it for
// what its runs give (target/api's run features and reports) without
// knowing which target it is.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "target/api/executable.h"
#include "target/artifact/artifact.pb.h"

namespace kiln::runtime {

class DeviceModule {
 public:
  virtual ~DeviceModule() = default;
  // Inputs in signature order (already checked); outputs in signature order.
  virtual absl::StatusOr<std::vector<Tensor>> Run(std::vector<Tensor> inputs, const target::RunOptions& options) = 0;
  virtual target::RunFeatures features() const { return {}; }
  // A data-parallel module's chips: an input may then hold one shard per
  // chip (a leading dim `replicas` times the signature's).
  virtual int replicas() const { return 1; }
  // What a run with `options` does, one line ("simulating 12 tasks x 1
  // batch on MACHINE..."); empty for nothing to say.
  virtual std::string Describe(const target::RunOptions& options) const { return ""; }
  virtual absl::StatusOr<std::string> Report(target::ReportKind kind, const std::string& title) const {
    return absl::UnimplementedError("this artifact's runs have no reports");
  }
  virtual std::vector<std::string> Warnings() const { return {}; }
  virtual std::vector<std::pair<std::string, int64_t>> TasksPerEngine() const { return {}; }
};

// Loads the module of `artifact` (its parsed graph is `model`); null when
// the artifact has none and its graph runs on the reference executor.
using ModuleLoader =
    std::function<absl::StatusOr<std::unique_ptr<DeviceModule>>(const artifact::Artifact& artifact, const Model* model)>;

}  // namespace kiln::runtime
