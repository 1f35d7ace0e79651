//===- split_reductions.h - Reductions the vector unit runs in two ---*- C++ -*-===//
//
// npusim's vector unit reduces the innermost axes of a tensor ([rows,
// cols] -> [rows]) or one contiguous block of axes between kept ones ([A,
// R, B] -> [A, B]). A reduction over axes that are neither, such as the
// per-channel sums of a convolution's or a BatchNorm's gradient (axes {0,
// 2, 3} of NCHW), becomes two that are: the innermost reduced axes first
// (kept as size 1), then the others with the original keepdims. Sums, means
// (every group has the same count), maxima and minima split exactly.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graph/ir/graph.h"

namespace kiln::target::npusim {

// Splits such reductions of `g`'s top level; returns how many.
int SplitReductionsForVector(Graph& g);

}  // namespace kiln::target::npusim
