//===- vector_internal.h - The vector kernel families -------------*- C++ -*-===//
//
// One generator per family of ops; GenerateVectorKernel (vector_dispatch.cc)
// picks the family by op name. Each returns Unimplemented (or
// FailedPrecondition) with the reason when it cannot run a node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "target/npusim/kernels/kernel.h"

namespace kiln::target::npusim::vec {

// The Unimplemented status of a node a family cannot run: "OP: why".
absl::Status Unimpl(const Node& n, absl::string_view why);
// The program name of a node's kernel: vec_OP, as an identifier.
std::string KernelName(const Node& n);

// Unary math and activations, Identity, Dropout (inference), kiln.Gelu.
bool IsUnaryOp(const Node& n);
absl::StatusOr<GeneratedKernel> GenerateUnary(const KernelRequest& req);
// Add, Sub, Mul, Div, Max, Min, Pow (constant scalar exponent), Sum/Mean of two.
bool IsBinaryOp(const Node& n);
absl::StatusOr<GeneratedKernel> GenerateBinary(const KernelRequest& req);
// Cast, CastLike.
absl::StatusOr<GeneratedKernel> GenerateCast(const KernelRequest& req);
// ReduceSum/Mean/Max/Min over the innermost axes.
bool IsReduceOp(const Node& n);
absl::StatusOr<GeneratedKernel> GenerateReduce(const KernelRequest& req);
// The same over middle axes: input merged to [A, R, B], reduced over R
// (vector_reduce_outer.cc); kind is "add", "max" or "min".
absl::StatusOr<GeneratedKernel> GenerateReduceOuter(const KernelRequest& req, int64_t A, int64_t R, int64_t B,
                                                    const std::string& kind, bool mean);
// Softmax / LogSoftmax over the last axis.
absl::StatusOr<GeneratedKernel> GenerateSoftmax(const KernelRequest& req);
// ArgMax / ArgMin over the last axis to i64 (vector_argmax.cc).
absl::StatusOr<GeneratedKernel> GenerateArgMax(const KernelRequest& req);
// LayerNormalization over the last axes.
absl::StatusOr<GeneratedKernel> GenerateLayerNorm(const KernelRequest& req);
// BatchNormalization (inference).
absl::StatusOr<GeneratedKernel> GenerateBatchNorm(const KernelRequest& req);

// MaxPool / AveragePool, 2-D NCHW (vector_pool.cc).
bool IsPoolOp(const Node& n);
absl::StatusOr<GeneratedKernel> GeneratePool(const KernelRequest& req);

// Equal/Less/Greater/LessOrEqual/GreaterOrEqual to bool, Where, Not/And/Or/Xor
// (vector_compare.cc).
bool IsCompareOp(const Node& n);
absl::StatusOr<GeneratedKernel> GenerateCompare(const KernelRequest& req);

// A kiln.Fused memory-bound group (kind "elementwise" or "reduction"), its
// steps those of the shared lowering (vector_fused.cc).
bool IsFusedGroup(const Node& n);
absl::StatusOr<GeneratedKernel> GenerateFused(const KernelRequest& req);
// npusim's own generator of a single node (not a fused group): the family
// of its op above.
absl::StatusOr<GeneratedKernel> GenerateOwn(const KernelRequest& req);
// Any node the shared lowering takes (tile::LowerVectorNode: one elementwise
// or row op, or such a group), its steps run on the skeletons as a fused
// group's are; Unimplemented with the reason otherwise.
absl::StatusOr<GeneratedKernel> GenerateFromTileSteps(const KernelRequest& req);

}  // namespace kiln::target::npusim::vec
