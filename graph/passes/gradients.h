//===- gradients.h - Reverse-mode differentiation on the graph IR -*- C++ -*-===//
//
// BuildGradients appends to a graph the nodes that compute the gradient of a
// scalar loss with respect to chosen values (parameters), by reverse-mode
// differentiation: nodes are visited from the last to the first, each
// differentiable node on a path from a parameter to the loss turns the
// gradients of its outputs into gradients of its inputs by its op's rule,
// and a value read by several nodes sums their contributions.
//
// The gradient nodes are ordinary ONNX ops (MatMul, Transpose, ReduceSum,
// Where, OneHot, ...), so a training graph runs on the reference executor
// and compiles for every target like any other graph. Shapes on the
// differentiated path must be static (broadcasts are undone by summing over
// the broadcast axes). A node on that path whose op has no rule, or a rule
// that cannot handle its attributes, is an error that names the node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "graph/ir/graph.h"

namespace kiln {

// Appends the gradient of `loss` (a float scalar, or a tensor of one
// element) with respect to each value of `wrt` (float values of `g`) and
// returns them in that order. A value the loss does not depend on gets a
// zero gradient. `g` must have its types inferred.
absl::StatusOr<std::vector<Value*>> BuildGradients(Graph& g, Value* loss, const std::vector<Value*>& wrt);

// Whether `v` can be a loss: a float tensor of one element.
bool IsLossShaped(const Value* v);

// Every value `v` depends on (itself included), through any node of its
// graph.
absl::flat_hash_set<const Value*> Ancestors(const Graph& g, const Value* v);

// False for the float inputs no gradient flows into: statistics and
// bounds (BatchNormalization's running mean and variance, Clip's bounds),
// Pow's exponent, Pad's value, Dropout's ratio, the loss ops' class weights.
bool IsDifferentiableInput(const Node& n, int i);

// The ops BuildGradients has a rule for, sorted.
std::vector<std::string> DifferentiableOps();

}  // namespace kiln
