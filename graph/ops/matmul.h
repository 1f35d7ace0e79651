//===- matmul.h - Facts about matrix ops that passes and targets share -*- C++ -*-===//
#pragma once

#include "graph/ir/graph.h"

namespace kiln {

// A Transpose that swaps the last two axes and keeps the others (or, with no
// perm, reverses a 2-D tensor): each matrix of its input, transposed. A
// MatMul reading it can read the input as a transposed operand instead.
bool IsMatrixTranspose(const Node& n);

}  // namespace kiln
