//===- cube_attention_geometry.h - What a kiln.Attention asks of its kernel -*- C++ -*-===//
//
// The shapes, scale and mask of a kiln.Attention node as the attention
// kernels read them (cube_attention.cc: FlashAttention's schedule for whole
// row tiles; cube_attention_decode.cc: one query row against a cache), or
// an Unimplemented status saying what they do not run.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/ir/graph.h"

namespace kiln::target::npusim {

inline constexpr int64_t kAttTile = 64;  // rows of Q and keys per tile

// "fused attention: WHY", Unimplemented.
absl::Status Refuse(absl::string_view why);

struct Geometry {
  int64_t bh = 1, s = 0, l = 0, d = 0;  // batch x heads, query rows, keys, head size
  int64_t es = 2;                       // bytes of an element of Q, K, V and Y (f16 2, f32 4)
  int64_t heads = 1;                    // the last batch dim (the mask's head axis)
  int64_t nq = 0, nk = 0;               // tiles of Q rows and of keys
  bool causal = false;
  double scale = 1;
  // An additive mask: its dtype's size (0: none), the elements between its
  // rows (0: one row for all), per batch item and per head (0: broadcast).
  int64_t mask_es = 0, mask_row = 0, mask_b = 0, mask_h = 0;
};

// `narrow_later`: Q, K and V may still be f32 (the driver narrows the node
// for --precision before generating), and a bool mask may still stand
// (the driver makes it additive, MakeAttentionMaskAdditive). `decode`: the
// decode kernel's rules (one query row; head size 64 or 128); otherwise the
// row tiles' (lengths multiples of 64, head size a multiple of 16 up to
// 128). Both take f16 or f32 Q, K, V and Y of one dtype.
absl::StatusOr<Geometry> GeometryOf(const Node& n, bool narrow_later, bool decode);

}  // namespace kiln::target::npusim
