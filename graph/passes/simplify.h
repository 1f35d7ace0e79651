//===- simplify.h - Algebraic simplification --------------------*- C++ -*-===//
//
// simplify runs the algebraic patterns of patterns/algebraic.h over every
// node, nested graphs included, and counts each pattern that applies.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

// Applies the algebraic patterns to every node of `graph` and the graphs
// nested in it, in node order; returns whether anything changed. Counts go
// to `stats` (one counter per pattern) when it is not null.
// `kinds`, when not null, gets the kinds of change made (Pass::NoteChange).
// `settled`, when not null, is cleared unless a second sweep straight after
// is known to find nothing: every rewrite of this one handed a used node's
// readers a value of the same type (kForwarded) and erased that node alone.
bool SimplifyGraph(Graph& graph, PassStatistics* stats, ChangeKinds* kinds = nullptr, bool* settled = nullptr);

std::unique_ptr<Pass> CreateSimplifyPass();

}  // namespace kiln
