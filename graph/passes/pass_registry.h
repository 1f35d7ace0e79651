//===- pass_registry.h - The table of passes by name ------------*- C++ -*-===//
//
// Every pass is listed once in pass_table.cc with its name, a one-line
// summary and a factory. Named pipelines ("default") are defined there too.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "graph/passes/pass.h"

namespace kiln {

struct PassInfo {
  const char* name;
  const char* summary;
  std::unique_ptr<Pass> (*create)();
};

struct PipelineInfo {
  const char* name;
  const char* summary;
  const char* spec;  // in the syntax PassManager::AddPipeline reads
};

// Every registered pass, in table order.
const std::vector<PassInfo>& RegisteredPasses();
const PassInfo* FindPass(absl::string_view name);
// Every named pipeline ("default", ...).
const std::vector<PipelineInfo>& RegisteredPipelines();
const PipelineInfo* FindPipeline(absl::string_view name);

}  // namespace kiln
