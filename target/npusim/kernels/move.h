//===- move.h - npusim data-movement kernels ----------------------*- C++ -*-===//
//
// Ops that only move bytes run on the DMA engines alone: MTE2 reads strided
// bursts from global memory into the unified buffer, MTE3 writes them back
// out with the destination's strides, ping-ponging two UB buffers so reads
// and writes overlap, with the transfers split evenly across AI cores.
//
// Every such op is a set of copy pieces (target/backend/copy_pieces.h: a
// box of elements copied from one input to one output, each side addressed
// by a base and a stride per dimension; a constant gather table becomes one
// piece per index). Contiguous inner runs become
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
// Unsqueeze, Dropout in inference) of any dtype: the ops with copy pieces
// (HasCopyPieces), where the DMA can do them. Gather along axis 0 by
// indices read at run time too: the scalar unit reads them from UB (`ld`)
// and addresses each row's DMA.
// ScatterElements (no reduction) by indices read at run time, too: data
// copied to the output (unless KernelRequest::in_place), then each update
// written where its index says; where the indices are an Expand that
// repeats one index along the trailing axes (a KV cache's new positions),
// each index moves a whole run of updates.
absl::StatusOr<GeneratedKernel> GenerateMoveKernel(const KernelRequest& req);

// The moves without copy pieces GenerateMoveKernel also runs (ScatterElements).
bool IsIndexedMove(const Node& n);
// ScatterElements' kernel (move_scatter.cc); GenerateMoveKernel's for it.
absl::StatusOr<GeneratedKernel> GenerateScatterKernel(const KernelRequest& req);


}  // namespace kiln::target::npusim
