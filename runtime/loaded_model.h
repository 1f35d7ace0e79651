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
#include "graph/ir/graph.h"
#include "runtime/npusim_executable.h"
#include "target/artifact/artifact.pb.h"

namespace kiln::runtime {

class LoadedModel {
 public:
  static absl::StatusOr<std::unique_ptr<LoadedModel>> Load(const std::string& path);
  // An artifact already in memory; `name` stands for the file in errors.
  static absl::StatusOr<std::unique_ptr<LoadedModel>> FromArtifact(artifact::Artifact artifact,
                                                                   const std::string& name);

  const artifact::Artifact& artifact() const { return artifact_; }
  // Inputs in signature order; outputs in signature order. `options`
  // applies to npusim artifacts (the reference target ignores it).
  absl::StatusOr<std::vector<Tensor>> Run(std::vector<Tensor> inputs, const NpusimRunOptions& options = {});

  // The npusim device of an npusim artifact (null for other targets): its
  // last run's statistics, trace and report.
  const NpusimExecutable* npusim() const { return npusim_.get(); }

 private:
  std::string path_;
  artifact::Artifact artifact_;
  Model model_;  // the graph part (reference target, host/AICPU work)
  std::unique_ptr<NpusimExecutable> npusim_;
};

}  // namespace kiln::runtime
