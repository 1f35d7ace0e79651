//===- precision.h - Narrowing a graph as --precision asks ------*- C++ -*-===//
//
// kiln's side of CompileOptions::narrow: the precision passes
// (graph/passes/narrow_precision.h) bound to what the command line asked.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/passes/narrow_precision.h"
#include "target/api/target.h"

namespace kiln::target {

// Narrows a graph under `precision`: nothing under fp32, NarrowMatrixOps
// under fp16 and bf16, MixPrecision with `mixed` under mixed.
std::function<absl::StatusOr<bool>(Graph&)> NarrowingFor(Precision precision, MixedPrecisionOptions mixed = {});

// options.narrow when set, NarrowingFor(options.precision) otherwise.
absl::StatusOr<bool> NarrowForPrecision(Graph& g, const CompileOptions& options);

}  // namespace kiln::target
