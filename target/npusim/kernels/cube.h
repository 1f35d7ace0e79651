//===- cube.h - npusim cube kernels ----------------------------*- C++ -*-===//
//
// Matrix work on the cube: MatMul, Gemm, Conv (and the matmuls of attention),
// with their epilogues.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "sim/machine/machine.pb.h"
#include "target/npusim/kernels/kernel.h"

namespace kiln::target::npusim {

// A kernel for req.node, or an error whose message says why this engine
// cannot run it (the driver records it as the AICPU fallback reason).
absl::StatusOr<GeneratedKernel> GenerateCubeKernel(const KernelRequest& req);

// kiln.Attention as one kernel (cube_attention.cc): FlashAttention's
// schedule, the cube's two products and the vector unit's online softmax
// overlapping; an error says what it does not run (the driver splits the
// node back).
absl::StatusOr<GeneratedKernel> GenerateCubeAttention(const KernelRequest& req);
// One query row against a cache (a decode step), any of f16 and f32, on the
// vector unit alone (cube_attention_decode.cc); GenerateCubeAttention's for it.
absl::StatusOr<GeneratedKernel> GenerateDecodeAttention(const KernelRequest& req);
// Whether kiln.Attention `n` runs as one of those kernels on `m` once the
// driver has narrowed it to f16 (--precision) and made a bool mask additive;
// and whether it does at the dtype it has (its bool mask made additive).
bool AttentionRunsFused(const Node& n, const sim::Machine& m);
bool AttentionRunsAsIs(const Node& n);
// Whether it runs as the decode kernel (one query row), which reads its f32
// cache as it is under any precision: narrowing it would convert the whole
// cache every step.
bool AttentionRunsAsDecode(const Node& n);

// Whether `candidate` may join the fusion group of a matrix op whose members
// so far are `group` (the anchor first): what the cube's fused kernels take
// (GemmSpecOf: a MatMul's operand Transposes, then a Mul by a scalar,
// two Adds (a bias, a residual), one Relu, a Cast of a narrow result to f32
// and an f32 residual after it; ConvOperandsOf: Relu, Clip and one Add), so
// that a group does not grow past what its kernel runs and get split back
// whole.
bool CubeTakesGroupMember(const std::vector<const Node*>& group, const Node& candidate);

}  // namespace kiln::target::npusim
