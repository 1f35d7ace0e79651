//===- builtin_targets.h - The targets built into kiln ----------*- C++ -*-===//
//
// The built-in targets are one registration function, handed to
// TargetRegistry::AddTargets by the kiln driver exactly as a plugin's is.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "target/api/target.h"

namespace kiln::target {

class TargetRegistry;

// Registers every built-in target (the table is in builtin_targets.cc).
void RegisterBuiltinTargets(TargetRegistry& r);

// A built-in target by name, from a registry of the built-ins alone (for
// programs other than the driver: tests, benchmarks).
absl::StatusOr<std::unique_ptr<Target>> CreateBuiltinTarget(absl::string_view name);

}  // namespace kiln::target
