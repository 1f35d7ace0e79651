//===- loaded_model.h - Loading and running compiled artifacts --*- C++ -*-===//
//
// A LoadedModel is a .kiln artifact ready to run: its signature is checked
// against the inputs of every run (a wrong shape or dtype names the expected
// and the actual signature), and the work goes to the device of the target
// that compiled it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/ir/graph.h"
#include "graph/ir/printer.h"
#include "runtime/device_module.h"
#include "target/artifact/artifact.pb.h"

namespace kiln::runtime {

class LoadedModel {
 public:
  // `loader` loads the device module of the artifact (of each gear); null:
  // the graph runs on the reference executor.
  static absl::StatusOr<std::unique_ptr<LoadedModel>> Load(const std::string& path, ModuleLoader loader = nullptr);
  // An artifact already in memory; `name` stands for the file in errors.
  static absl::StatusOr<std::unique_ptr<LoadedModel>> FromArtifact(artifact::Artifact artifact,
                                                                   const std::string& name,
                                                                   ModuleLoader loader = nullptr);

  const artifact::Artifact& artifact() const { return artifact_; }
  // The inputs' initial values, in signature order (undefined for an input
  // that every run must give): what a run reads for an input it leaves out.
  std::vector<Tensor> InitialValues() const;
  // Inputs in signature order; outputs in signature order. `options`
  // applies to a device module (the reference executor ignores it).
  absl::StatusOr<std::vector<Tensor>> Run(std::vector<Tensor> inputs, const target::RunOptions& options = {});

  // The device module (null when the graph runs on the reference executor):
  // its last run's statistics, trace and report. For an artifact with gears,
  // the module of the gear that ran last (of the first gear before any run).
  const DeviceModule* module() const { return current().module_.get(); }

  // An artifact compiled with gears (--dynamic-batch, --dynamic-dims) holds
  // one model per gear: Run runs the first whose input signature the inputs
  // fit. GearFor says which that is (this model itself when there are no
  // gears), or why none fits, naming the gears.
  int num_gears() const { return static_cast<int>(gears_.size()); }
  absl::StatusOr<const LoadedModel*> GearFor(const std::vector<Tensor>& inputs) const;
  // "batch=4" for the model of a gear; empty otherwise.
  const std::string& gear_label() const { return gear_label_; }

 private:
  // `section`: the constants as the artifact's file holds them, in a
  // mapping that `owner` keeps and their tensors borrow (empty for an
  // artifact in memory, whose constants are the message's). `shared`: the
  // blobs of a gear bundle, for a gear without constants of its own.
  static absl::StatusOr<std::unique_ptr<LoadedModel>> Build(artifact::Artifact artifact, absl::string_view section,
                                                            std::shared_ptr<const void> owner,
                                                            const std::string& name, const BlobStore* shared,
                                                            const ModuleLoader& loader);
  const LoadedModel& current() const { return gears_.empty() ? *this : *gears_[current_gear_]; }
  absl::Status CheckInputs(const std::vector<Tensor>& inputs) const;
  // The first gear the inputs fit, or an error naming the gears.
  absl::StatusOr<size_t> GearIndex(const std::vector<Tensor>& inputs) const;

  std::string path_;
  artifact::Artifact artifact_;
  Model model_;  // the graph part (the reference executor's; a device's fallback-engine and host work)
  std::unique_ptr<DeviceModule> module_;
  std::vector<std::unique_ptr<LoadedModel>> gears_;
  size_t current_gear_ = 0;
  std::string gear_label_;
};

}  // namespace kiln::runtime
