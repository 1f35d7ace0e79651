//===- fold_batchnorm.h - Fold BatchNormalization into Conv/Gemm -*- C++ -*-===//
//
// fold-batchnorm folds an inference BatchNormalization into the Conv,
// ConvTranspose, Gemm or MatMul (with a constant weight) that feeds it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>

#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

// Folds `bn` (a BatchNormalization) into the node producing its input when
// that is possible; returns the op folded into ("Conv", ...) or "" when
// nothing changed. `bn` is erased when it was folded.
std::string FoldBatchNormIntoProducer(Node* bn);

// Folds every BatchNormalization of `graph` (nested graphs included) that can
// be folded; counts go to `stats` when it is not null.
bool FoldBatchNorms(Graph& graph, PassStatistics* stats);

std::unique_ptr<Pass> CreateFoldBatchNormPass();

}  // namespace kiln
