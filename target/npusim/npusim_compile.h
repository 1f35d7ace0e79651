//===- npusim_compile.h - Compiling a model for the simulated NPU -*- C++ -*-===//
//
// The npusim target's code generation: every node of the optimized graph
// becomes a task — an AI-core kernel (cube or vector, from the generators in
// kernels/), a view (a reshape of a buffer in place), or an AICPU task that
// runs the reference kernel on the device's AICPU cluster. A node placed on
// a core engine whose kernel cannot be generated (an unsupported attribute,
// a shape that does not fit) falls back to the AICPU with the generator's
// reason recorded; a fused group whose kernel cannot be generated is split
// back into its members first. Device buffers are placed by liveness
// (target/backend/memory_plan.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "target/api/target.h"
#include "target/artifact/artifact.pb.h"

namespace kiln::target {

// Compiles `model` (optimized, shapes inferred) with `target`'s placement;
// the options' "machine" setting names the machine description file.
absl::StatusOr<artifact::Artifact> CompileForNpusim(const Model& model, const Target& target,
                                                    const CompileOptions& options);

// The tile IR of the kernel npusim generates for `node` as `target` places
// it under `options` (cube GEMMs: the shared lowering's canonical form with
// the cube program's own tiling); NotFound when npusim's kernel for the
// node is generated without one (vector and data-movement kernels, convolutions).
absl::StatusOr<std::string> NpusimTileIr(const Node& node, const Target& target, const CompileOptions& options);

// One line per task and a summary per engine: what `kiln compile
// --explain-placement` prints for npusim after code generation.
std::string ExplainNpusimTasks(const artifact::Artifact& artifact);

}  // namespace kiln::target
