//===- recognize_composites.h - Recognize composite subgraphs ---*- C++ -*-===//
//
// recognize-composites replaces decomposed LayerNorm, GELU, Softmax,
// LogSoftmax and scaled-dot-product attention subgraphs with one node each
// (patterns/composite_recognizers.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>

#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

// Runs every composite recognizer on every node of `graph` and the graphs
// nested in it; returns whether anything changed. Counts go to `stats` when
// it is not null.
bool RecognizeComposites(Graph& graph, PassStatistics* stats);

std::unique_ptr<Pass> CreateRecognizeCompositesPass();

}  // namespace kiln
