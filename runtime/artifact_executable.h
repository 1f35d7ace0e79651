//===- artifact_executable.h - A .kiln artifact as an Executable -*- C++ -*-===//
//
// The runtime half shared by the targets whose artifacts are .kiln files
// (target/artifact): a LoadedModel — its signature checked on every run,
// one model per gear — behind the Executable interface of the target API.
// A module that runs on a simulated device gives that device's features:
// traces, reports, rooflines, streamed batches, timing-only runs and
// training loops sunk onto the device.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "target/api/executable.h"

namespace kiln::runtime {

// Loads the artifact at `path`, which must have been compiled for target
// `target_name`.
absl::StatusOr<std::unique_ptr<target::Executable>> LoadArtifactExecutable(const std::string& path,
                                                                           const std::string& target_name);

}  // namespace kiln::runtime
