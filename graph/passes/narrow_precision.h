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
//    holds, and a Cast to the narrow type of a widened value is the value;
//  - a Split or a view of a narrow value whose results are all read
//    through Casts to f32 takes one such Cast before it instead (the same
//    values): a chain passes it up to a matrix op's result, where a fused
//    GEMM writes f32 in its epilogue, not a Cast kernel per part.
//
// mixed-precision (`--precision=mixed`) decides op by op from four lists,
// in the manner of automatic mixed precision:
//
//  - allow (MatMul, Gemm, Conv): computed narrow as above when the work it
//    saves outweighs the Cast kernels it needs: at least min_macs_per_cast
//    multiply-adds per element those convert. Only an operand that is a
//    graph input or another matrix op's result (through views) needs a
//    Cast kernel of its own: constants convert at compile time, a
//    memory-bound op's result in that op's fused kernel, the matrix op's
//    result in its epilogue. Otherwise it stays f32;
//  - infer (Add, Sub, Mul, average pools, LayerNormalization, Softmax,
//    kiln.Gelu: ops that round once): narrow when their float operands are
//    narrow, as the widening Casts sink past them above;
//  - clear (Relu, Clip, Max, Min, max pools, views, Transpose, Split,
//    Gather, Where: ops exact in the narrow type): the same, and also
//    backwards: a clear op with one float operand, whose results are only
//    read through Casts to the narrow type and hold as many elements as its
//    operand, takes the Cast before it (a Transpose feeding a GEMM copies
//    half the bytes);
//  - deny: every other op, and any of the above the user moves there,
//    computes f32 (the Casts stay around it).
//
// Nodes are decided in order, so a matrix op knows which operands arrive
// narrow. Edits move ops between the lists (an op kiln has no narrow
// kernels for cannot be moved to allow, infer or clear).
//
// The top graph only; the f32 originals of converted constants are left for
// dce.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

// Narrows the matrix ops of `g` to `narrow` (f16 or bf16) as above; whether
// anything changed. `also` adds nodes a target computes narrow as it does
// matrix ops (a composite it runs as one narrow kernel, such as npusim's
// fused kiln.Attention): their f32 inputs arrive through Casts, other
// inputs (a bool mask) as they are, and their result converts back.
absl::StatusOr<bool> NarrowMatrixOps(Graph& g, DType narrow,
                                     const std::function<bool(const Node&)>& also = nullptr);

// Checks the list edits of `options`: every op named is one the lists know
// (allow only takes matrix ops), and none is named twice.
absl::Status CheckMixedPrecision(const MixedPrecisionOptions& options);

// mixed-precision as above; whether anything changed. Statistics, when
// given: matrix-ops-narrowed, matrix-ops-kept-f32, denied-ops-kept-f32,
// casts-hoisted.
absl::StatusOr<bool> MixPrecision(Graph& g, const MixedPrecisionOptions& options,
                                  PassStatistics* stats = nullptr);

std::unique_ptr<Pass> CreateNarrowFp16Pass();
std::unique_ptr<Pass> CreateMixedPrecisionPass();
std::unique_ptr<Pass> CreateNarrowBf16Pass();

}  // namespace kiln
