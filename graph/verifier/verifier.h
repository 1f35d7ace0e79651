//===- verifier.h - Structural and semantic checks of the IR ----*- C++ -*-===//
//
// VerifyModel / VerifyGraph check the invariants every pass may rely on and
// every pass must keep:
//
//   [ssa]       each value is defined once: owned by its graph, named
//               uniquely there, and a node output points back to its node
//   [scope]     a nested graph uses only its own values and those of
//               enclosing graphs defined before the node that holds it, and
//               does not redefine (shadow) their names
//   [order]     every use comes after the definition in node order
//   [cycle]     no cycles (reported with the nodes that form one)
//   [uses]      use lists match node inputs and graph outputs exactly
//   [op]        the op is known to the registry
//   [arity]     input and output counts are within the op's bounds, and
//               required inputs are present
//   [attribute] required attributes present, no undeclared ones, kinds as
//               declared
//   [constant]  a constant's type matches its data
//   [type]      where input types are known, the op's inference succeeds and
//               agrees with the declared output types (dtype, rank, static
//               dims; symbolic and unknown dims agree with anything)
//
// Each error is one line naming the graph (its path of graph names from the
// root, "main/body"), the node (index in its graph, name and op) and the rule:
//
//   graph 'main': node 3 '/conv1/Conv' (Conv): [attribute] undeclared attribute 'foo'
//
// All errors found are returned in one InvalidArgument status, one per line
// (up to VerifyOptions::max_errors).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "absl/status/status.h"
#include "graph/ir/graph.h"
#include "graph/ops/op_registry.h"

namespace kiln {

struct VerifyOptions {
  // The registry ops are checked against; null means OpRegistry::Global().
  const OpRegistry* registry = nullptr;
  // Run each op's inference and compare it with the declared output types.
  bool check_types = true;
  // Stop after this many errors.
  int max_errors = 20;
};

absl::Status VerifyModel(const Model& model, const VerifyOptions& options = {});
// Verifies `graph` and the graphs nested in it. A nested graph may be given:
// the values of its enclosing graphs visible to it are then taken into
// account.
absl::Status VerifyGraph(const Graph& graph, const VerifyOptions& options = {});

}  // namespace kiln
