//===- composite_expanders.h - Expand composite ops into ONNX ops -*- C++ -*-===//
//
// The inverse of the recognizers: each expander replaces one kiln.* composite
// node with ONNX ops that compute the same, so a target without a whole-op
// mapping can run it:
//
//   kiln.Gelu       Div/Erf/Add/Mul (none) or Mul/Add/Tanh (tanh)
//   kiln.Attention  [Transpose] MatMul, Mul by scale, Add or Where mask,
//                   Where with a lower-triangular keep mask (causal), Softmax,
//                   MatMul
//
//===----------------------------------------------------------------------===//
#pragma once

#include <vector>

#include "graph/ir/graph.h"

namespace kiln::patterns {

// Replaces `n` with ONNX ops; returns false (and changes nothing) when `n`
// cannot be expanded (an Attention mask whose dtype is not known yet).
using ExpandFn = bool (*)(Node* n);

struct CompositeExpander {
  const char* counter;  // statistic counted when it applies ("gelu-expanded")
  const char* op;       // the composite op of domain "kiln"
  ExpandFn apply;
};

// Every expander, one per composite op.
const std::vector<CompositeExpander>& CompositeExpanders();

bool ExpandGelu(Node* n);
bool ExpandAttention(Node* n);

}  // namespace kiln::patterns
