//===- pipeline_conformance.h - The ONNX test data through a pipeline -*- C++ -*-===//
//
// What the pass tests share to check a pipeline against the ONNX backend
// test data: the conformance report of every model run after `pipeline`
// (verified after it), and the names of the failing tests in a report.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "graph/exec/executor.h"
#include "graph/passes/pass_manager.h"
#include "graph/verifier/verifier.h"
#include "tools/conformance/conformance.h"

namespace kiln {

// Names of the failing tests in a conformance report.
inline std::set<std::string> Failures(const std::string& report) {
  std::set<std::string> out;
  std::istringstream in(report);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("FAIL ", 0) == 0) out.insert(line.substr(5, line.find(':') - 5));
  return out;
}

// The report of the ONNX test data with every model run on the reference
// executor after `pipeline` ("" for none).
inline absl::StatusOr<std::string> ConformanceReport(const std::string& pipeline) {
  ConformanceOptions options;
  options.progress = false;
  ModelRunner runner = [pipeline](const Model& m, std::vector<Tensor> inputs) -> absl::StatusOr<std::vector<Tensor>> {
    Model copy = m.Clone();
    if (!pipeline.empty()) {
      PassManager pm;
      absl::Status s = pm.AddPipeline(pipeline);
      if (!s.ok()) return s;
      auto changed = pm.Run(copy);
      if (!changed.ok()) return changed.status();
      s = VerifyModel(copy);
      if (!s.ok()) return absl::InternalError(absl::StrCat("invalid after ", pipeline, ": ", s.message()));
    }
    Executor exec;
    return exec.Run(*copy.graph, std::move(inputs));
  };
  std::ostringstream out;
  auto summary = RunConformance(options, runner, out);
  if (!summary.ok()) return summary.status();
  return out.str();
}

}  // namespace kiln
