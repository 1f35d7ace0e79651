//===- attention_dims.h - A kiln.Attention's operand shapes, checked -*- C++ -*-===//
//
// What every attention kernel asks first of a kiln.Attention: static
// shapes that agree, Q [..., S, D], K [..., L, D] (K^T [..., D, L] when
// k_transposed), V [..., L, D], with the same batch dims.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"

namespace kiln::target {

struct AttentionDims {
  Dims q;  // Q's, its batch dims first
  int64_t s = 0, l = 0, d = 0;
  bool k_transposed = false;
};

// `n`'s dims, or an Unimplemented error saying what does not agree
// ("not a kiln.Attention", "shapes not static", ...).
absl::StatusOr<AttentionDims> AttentionDimsOf(const Node& n);

}  // namespace kiln::target
