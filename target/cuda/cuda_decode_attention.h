//===- cuda_decode_attention.h - One query row against a KV cache on cuda -*- C++ -*-===//
//
// A decode step's kiln.Attention (one query row per batch item and head
// against a cache of L keys) as two kernels, the split-K schedule of
// flash-decoding: the tensor cores would waste 15 of their 16 rows on it.
//
//  1. A block per (batch x head, chunk of 64 keys): a warp per key at a
//     time, its lanes across the head size (coalesced rows of K and V), the
//     score by a warp reduction, an online softmax over the warp's keys
//     (running max, sum, and O in the lanes' registers), the block's four
//     warps merged through shared memory into one partial (m, l, O) in a
//     workspace. A key the additive mask sets to -inf is skipped before
//     its K and V are read, so a static cache masked past its position is
//     read only up to it; the cache is read in its own dtype (an f32 cache
//     stays f32 under --precision=fp16: converting it would cost a pass
//     over the whole cache a step).
//  2. A block per batch x head merges its chunks' partials (rescaled to
//     their common maximum) and writes Y = O / l.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"

namespace kiln::target::cuda {

// What the two kernels compute.
struct DecodeAttention {
  int64_t items = 1;              // batch x heads
  int64_t l = 1, d = 64;          // keys, head size
  int64_t chunks = 1;             // chunks of kChunk keys
  double scale = 1;
  DType dtype = DType::kF32;      // of Q, K, V and Y
  DType mask = DType::kUndefined;  // an additive mask's, or none
  // The mask's element offset of item i's key j: (i / mask_div % mask_mod) * mask_item + j.
  int64_t mask_div = 1, mask_mod = 1, mask_item = 0;
  int64_t WorkspaceBytes() const { return items * chunks * (d + 2) * 4; }
};

struct DecodeAttentionLaunch {
  DecodeAttention what;
  std::string partial, combine;  // the two __global__ functions
  std::string source;            // both
  int64_t threads = 128;
};

// Whether `node` is a kiln.Attention these kernels take: one query row
// (S = 1) of f32, f16 or bf16 against K and V of Q's dtype (K not
// transposed) and batch dims, a head size that is a multiple of 32 up to
// 256, not causal, no mask or an additive one broadcast over batch items,
// heads or both.
absl::Status DecodeAttentionTakes(const Node& node);
absl::StatusOr<DecodeAttentionLaunch> MakeDecodeAttentionLaunch(const Node& node);
// The same on the host, for emulating the launches: the partials into
// `workspace`, then Y.
void DecodeAttentionPartialOnHost(const DecodeAttention& what, const void* q, const void* k, const void* v,
                                  const void* mask, float* workspace);
void DecodeAttentionCombineOnHost(const DecodeAttention& what, const float* workspace, void* y);

}  // namespace kiln::target::cuda
