//===- algebraic.h - Algebraic simplification patterns ----------*- C++ -*-===//
//
// Local rewrites that remove work without changing any value: identities
// (Identity, inference Dropout, x*1, x+0, x-0, x/1), chains that cancel or
// compose (Transpose∘Transpose, Reshape∘Reshape, round-trip Casts,
// Unsqueeze/Squeeze pairs) and ops that do nothing for their arguments
// (Reshape/Flatten/Expand to the same shape, single-input Concat, a Slice
// that takes everything, Pad with zero pads, Resize to the same size).
//
// Each pattern looks at one node (and its producers) and either leaves the
// graph untouched or rewrites it; the simplify pass runs them all, and a
// target may run any of them on its own.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <vector>

#include "graph/ir/graph.h"

namespace kiln::patterns {

enum class RewriteResult {
  kNoMatch,    // nothing changed
  kRewritten,  // the node was changed in place and still exists
  kErased,     // the node was replaced and erased
  // The node's one output was replaced by a value the graph already had,
  // of the same type and not a constant (the same data: a merge), and the
  // node was erased with what that left unused.
  kForwarded,
};

using RewriteFn = RewriteResult (*)(Node* node);

struct AlgebraicPattern {
  const char* counter;  // statistic counted when it applies ("identity-removed")
  const char* op;       // the op (default domain) it looks at
  RewriteFn apply;
  // Whether it asks how many readers a value has: erasing or merging
  // readers elsewhere can then make it apply where it did not.
  bool reads_use_counts = false;
};

// Every algebraic pattern, in the order the simplify pass tries them.
const std::vector<AlgebraicPattern>& AlgebraicPatterns();

RewriteResult RemoveIdentity(Node* n);           // Identity(x) -> x
RewriteResult RemoveInferenceDropout(Node* n);   // Dropout(x) outside training -> x (mask: ones)
RewriteResult RemoveMulByOne(Node* n);           // x*1, 1*x -> x
RewriteResult RemoveAddZero(Node* n);            // x+0, 0+x -> x
RewriteResult RemoveSubZero(Node* n);            // x-0 -> x
RewriteResult RemoveDivByOne(Node* n);           // x/1 -> x
RewriteResult ComposeTransposes(Node* n);        // Transpose(Transpose(x, p), q) -> Transpose(x, p∘q)
RewriteResult RemoveIdentityTranspose(Node* n);  // Transpose(x, identity) -> x
RewriteResult CollapseReshapes(Node* n);         // Reshape(Reshape(x, a), b) -> Reshape(x, b)
RewriteResult RemoveSameShapeReshape(Node* n);   // Reshape/Flatten to the input's shape -> x
RewriteResult RemoveSameDTypeCast(Node* n);      // Cast(x: T, to T) -> x
RewriteResult RemoveRoundTripCast(Node* n);      // Cast(Cast(x: T, wider), T) -> x
RewriteResult CollapseCasts(Node* n);            // Cast(Cast(x, wider), U) -> Cast(x, U)
RewriteResult RemoveSqueezeOfUnsqueeze(Node* n); // Squeeze(Unsqueeze(x, a), a) -> x
RewriteResult RemoveUnsqueezeOfSqueeze(Node* n); // Unsqueeze(Squeeze(x, a), a) -> x (dims a are 1)
RewriteResult RemoveSameShapeExpand(Node* n);    // Expand(x, shape x already has) -> x
RewriteResult RemoveSingleConcat(Node* n);       // Concat(x) -> x
RewriteResult RemoveFullSlice(Node* n);          // Slice taking every element -> x
RewriteResult RemoveZeroPad(Node* n);            // Pad(x, zeros) -> x
// Resize(x) to x's own static shape -> x: every coordinate mode but
// tf_crop_and_resize maps each output position onto the same input
// position, where nearest, linear and cubic all give the input element (a
// detector's transform resizing its input to the size it already has).
RewriteResult RemoveSameSizeResize(Node* n);
// Transpose(MatMul(a, b)) of 2-D operands, the MatMul used only there ->
// MatMul(b^T, a^T), a Transpose of an operand that is itself a Transpose
// cancelling: the product comes out transposed with no copy of it (a weight
// gradient dW^T = (x^T dy)^T = dy^T x), and matrix units read transposed
// operands in place (graph/ops/matmul.h).
RewriteResult SwapTransposedMatMul(Node* n);

// True when every value of dtype `from` converts to `to` and back exactly
// (f32 -> f64, f16 -> f32, i8 -> i32, u8 -> f16, bool -> anything numeric).
bool IsLosslessCast(DType from, DType to);

}  // namespace kiln::patterns
