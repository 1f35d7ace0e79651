//===- expand_composites.h - Expand composite ops into ONNX ops -*- C++ -*-===//
//
// expand-composites replaces every kiln.* composite node (kiln.Gelu,
// kiln.Attention) with the ONNX ops it stands for
// (patterns/composite_expanders.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>

#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

// Expands every composite node of `graph` and the graphs nested in it;
// returns whether anything changed. Counts go to `stats` when not null.
bool ExpandComposites(Graph& graph, PassStatistics* stats);

std::unique_ptr<Pass> CreateExpandCompositesPass();

}  // namespace kiln
