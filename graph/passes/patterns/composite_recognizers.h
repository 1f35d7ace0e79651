//===- composite_recognizers.h - Find composite ops in decomposed graphs -*- C++ -*-===//
//
// Each recognizer looks at one node as the last node of a decomposed
// subgraph and, when the subgraph is exactly the composite, replaces it with
// one node:
//
//   LayerNorm   ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div[/Mul][/Add]
//               (PyTorch's export at opset < 17) -> LayerNormalization
//   GELU        x*0.5*(1+erf(x/sqrt(2))) and
//               0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))), in any operand
//               order and association -> kiln.Gelu
//   Softmax     Exp(t)/ReduceSum(Exp(t)), t = x or x - ReduceMax(x)
//               -> Softmax; Log of that, or t - Log(ReduceSum(Exp(t)))
//               -> LogSoftmax
//   Attention   MatMul(Q, K^T) [Div|Mul by a constant] [Add mask | Where
//               mask] Softmax MatMul(.., V) -> kiln.Attention (causal when
//               the mask is a constant lower-triangular -inf mask)
//
// Every intermediate value must be used only inside the subgraph, and every
// constant must have the expected value (within the precision of its dtype).
// A recognizer does not match a node whose only user would extend the same
// composite (the user is matched when it is visited).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <vector>

#include "graph/ir/graph.h"

namespace kiln::patterns {

// Replaces the subgraph ending at `root` with the composite node and returns
// that node, or returns null and leaves the graph as it is.
using RecognizeFn = Node* (*)(Node* root);

struct CompositeRecognizer {
  const char* counter;  // statistic counted when it applies ("layernorm-recognized")
  const char* op;       // the root op (default domain) it looks at
  RecognizeFn apply;
  // Ops of which every subgraph it recognizes holds at least one (null
  // past the last): where the graph has none of them, it cannot apply.
  const char* needs[2];
};

// Every recognizer, in the order recognize-composites tries them.
const std::vector<CompositeRecognizer>& CompositeRecognizers();

Node* RecognizeLayerNorm(Node* root);         // root: Add, Mul or Div
Node* RecognizeGelu(Node* root);              // root: Mul or Div
Node* RecognizeSoftmax(Node* root);           // root: Div
Node* RecognizeLogSoftmax(Node* root);        // root: Log or Sub
Node* RecognizeAttention(Node* root);         // root: MatMul

}  // namespace kiln::patterns
