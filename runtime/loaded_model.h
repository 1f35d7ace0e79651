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
#include "target/artifact/artifact.pb.h"

namespace kiln::runtime {

class LoadedModel {
 public:
  static absl::StatusOr<std::unique_ptr<LoadedModel>> Load(const std::string& path);

  const artifact::Artifact& artifact() const { return artifact_; }
  // Inputs in signature order; outputs in signature order.
  absl::StatusOr<std::vector<Tensor>> Run(std::vector<Tensor> inputs);

 private:
  std::string path_;
  artifact::Artifact artifact_;
  Model model_;  // the graph part (reference target, host/AICPU work)
};

}  // namespace kiln::runtime
