//===- artifact_executable.h - A .kiln artifact as an Executable -*- C++ -*-===//
//
// The runtime half shared by the targets whose artifacts are .kiln files
// (target/artifact): a LoadedModel — its signature checked on every run,
// one model per gear — behind the Executable interface of the target API.
// The run features and reports are the device module's (DeviceModule), of
// the gear that ran.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/device_module.h"
#include "target/api/executable.h"

namespace kiln::runtime {

// Loads the artifact at `path`, which must have been compiled for target
// `target_name`; `loader` loads its device module (null: its graph runs on
// the reference executor).
absl::StatusOr<std::unique_ptr<target::Executable>> LoadArtifactExecutable(const std::string& path,
                                                                           const std::string& target_name,
                                                                           ModuleLoader loader = nullptr);

}  // namespace kiln::runtime
