//===- matmul.h - Facts about matrix ops that passes and targets share -*- C++ -*-===//
#pragma once

#include <cstdint>
#include <vector>

#include "graph/ir/graph.h"

namespace kiln {

// The permutation of a Transpose node (output axis j is input axis
// perm[j]; the reversal of the axes when it has no perm and its input's
// rank is known), or empty when it is not a Transpose or unknown.
std::vector<int64_t> TransposePerm(const Node& n);

// `outer` applied after `inner`: Transpose(Transpose(x, inner), outer) is
// Transpose(x, result), result[j] = inner[outer[j]].
std::vector<int64_t> ComposePerms(const std::vector<int64_t>& inner, const std::vector<int64_t>& outer);

// Whether a MatMul operand that is its source permuted by `perm` can be
// read in place: each matrix's rows (the source's last axis is the
// operand's last) or columns (it is the operand's second last) are runs of
// contiguous elements, every other axis a stride. A matrix unit reads such
// an operand where it lies instead of a transposed copy (attention's K^T
// and its heads).
bool IsMatrixView(const std::vector<int64_t>& perm);

// A Transpose whose permutation IsMatrixView.
bool IsMatrixTranspose(const Node& n);

}  // namespace kiln
