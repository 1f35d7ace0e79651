//===- narrow_precision.h - Matrix work in fp16/bf16 -------------*- C++ -*-===//
//
// narrow-fp16 (narrow-bf16) makes the matrix ops of an f32 graph compute in
// fp16 (bf16) with fp32 accumulation, what --precision=fp16/bf16 asks of a
// device target, while the graph's inputs and outputs keep their types:
//
//  - each f32 MatMul, Gemm and Conv with a static result reads its operands
//    in the narrow type: constant operands (weights, biases) converted once,
//    others through a Cast inserted before it (a Transpose feeding only this
//    MatMul is narrowed instead, so the GEMM still reads it transposed); its
//    result is narrow, and a Cast back to f32 follows it for its users;
//  - activations then stay narrow between matrix ops: a widening Cast sinks
//    past each op that computes in the narrow type what the f32 op computes
//    (Relu, Clip, Max, Min, pools, views, Add, Sub, Mul, Transpose, Split,
//    LayerNormalization, Softmax, GELU, Gather, Where; see KeepsNarrow) when
//    its other float operands are such Casts or constants the narrow type
//    holds, and a Cast to the narrow type of a widened value is the value.
//
// The top graph only; the f32 originals of converted constants are left for
// dce.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

// Narrows the matrix ops of `g` to `narrow` (f16 or bf16) as above; whether
// anything changed.
absl::StatusOr<bool> NarrowMatrixOps(Graph& g, DType narrow);

std::unique_ptr<Pass> CreateNarrowFp16Pass();
std::unique_ptr<Pass> CreateNarrowBf16Pass();

}  // namespace kiln
