//===- vector_internal.h - The vector kernel families -------------*- C++ -*-===//
//
// One generator per family of ops; GenerateVectorKernel (vector_dispatch.cc)
// picks the family by op name. Each returns Unimplemented (or
// FailedPrecondition) with the reason when it cannot run a node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "absl/status/statusor.h"
#include "target/npusim/kernels/kernel.h"

namespace kiln::target::npusim::vec {

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
// Softmax / LogSoftmax over the last axis.
absl::StatusOr<GeneratedKernel> GenerateSoftmax(const KernelRequest& req);
// LayerNormalization over the last axes.
absl::StatusOr<GeneratedKernel> GenerateLayerNorm(const KernelRequest& req);
// BatchNormalization (inference).
absl::StatusOr<GeneratedKernel> GenerateBatchNorm(const KernelRequest& req);

}  // namespace kiln::target::npusim::vec
