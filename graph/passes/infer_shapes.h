//===- infer_shapes.h - type and shape inference, Loop/Scan bodies to a fixpoint ---*- C++ -*-===//
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

// How many times a Loop or Scan body is re-inferred before its loop-carried
// types are given up on (made as general as the body's declarations allow).
inline constexpr int kLoopInferenceCap = 16;

struct InferShapesReport {
  bool changed = false;     // some type became more precise
  int types_refined = 0;    // values whose type became more precise
  int loops_capped = 0;     // Loop/Scan bodies that hit kLoopInferenceCap
  int body_iterations = 0;  // body inferences run, all bodies together
};

// Infers every type of `g` and its nested graphs (kiln::InferShapes), with
// Loop and Scan bodies inferred to a fixpoint of their loop-carried types.
absl::StatusOr<InferShapesReport> InferShapesWithLoops(Graph& g);

std::unique_ptr<Pass> CreateInferShapesPass();

}  // namespace kiln
