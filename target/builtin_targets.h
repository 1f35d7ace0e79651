//===- builtin_targets.h - The targets built into kiln ----------*- C++ -*-===//
#pragma once

namespace kiln::target {

class TargetRegistry;

// Registers every built-in target (the table is in builtin_targets.cc).
void RegisterBuiltinTargets(TargetRegistry& r);

}  // namespace kiln::target
