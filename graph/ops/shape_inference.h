//===- shape_inference.h - Type and shape inference over a graph -*- C++ -*-===//
//
// Runs each node's inference in order, nested graphs first, and merges the
// result with the types the graph already declares (from ONNX value_info or
// an earlier run): a static dim beats a symbolic one, a symbolic one beats an
// unknown one, and a contradiction (different dtypes, ranks or static dims)
// is an error naming the node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/ir/graph.h"

namespace kiln {

// Infers the type of every node output in `g` and the graphs nested in it.
absl::Status InferShapes(Graph& g);

// Merges two descriptions of one value's type; errors when they contradict.
absl::StatusOr<Type> MergeTypes(const Type& declared, const Type& inferred);

}  // namespace kiln
