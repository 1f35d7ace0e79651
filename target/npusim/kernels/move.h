//===- move.h - npusim data-movement kernels ----------------------*- C++ -*-===//
//
// Ops that only move bytes run on the DMA engines alone: MTE2 reads strided
// bursts from global memory into the unified buffer, MTE3 writes them back
// out with the destination's strides, ping-ponging two UB buffers so reads
// and writes overlap, with the transfers split evenly across AI cores.
//
// Every such op is a set of *pieces*: a box of elements copied from one
// argument to another, each side addressed by a base and a stride per
// dimension (Transpose permutes the source strides, Concat and Split offset
// one side along the axis, Slice offsets and scales, Expand and Tile read
// with stride 0 along broadcast dimensions). Contiguous inner runs become
// bursts; a source whose last dimension is not contiguous (a transpose that
// moves the innermost axis) is copied element by element, which the
// generator accepts only for small tensors.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "absl/status/statusor.h"
#include "target/npusim/kernels/kernel.h"

namespace kiln::target::npusim {

// Transpose, Concat, Split, Slice (positive steps), Expand, Tile, Gather
// with constant indices, and copies (Identity, Reshape, Flatten, Squeeze,
// Unsqueeze, Dropout in inference) of any dtype.
absl::StatusOr<GeneratedKernel> GenerateMoveKernel(const KernelRequest& req);

// True for the ops GenerateMoveKernel knows.
bool IsMoveOp(const Node& node);

}  // namespace kiln::target::npusim
