//===- load_artifact.h - The target that runs an artifact -*- C++ -*-===//
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "target/api/target.h"

namespace kiln::driver {

// The target that recognizes the artifact at `path`, or why none does (a
// missing file, a target not registered, a damaged artifact).
absl::StatusOr<std::unique_ptr<target::Target>> TargetOfArtifact(const std::string& path);

}  // namespace kiln::driver
