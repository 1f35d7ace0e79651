//===- cuda_copy_kernel.h - Data movement as strided-copy CUDA kernels -*- C++ -*-===//
//
// Ops that only move elements run as strided copies of the node's copy
// pieces (target/backend/copy_pieces.h: a box of elements from one input to
// one output, a base and a stride per dimension on each side, a gather
// table where there is one).
//
// Each piece becomes one launch of a CUDA kernel specialized to it: a
// grid-stride loop over the piece's elements that splits the flat index
// into coordinates with constant divisors and copies one element (moved as
// an unsigned integer of the element's width, so every dtype shares the
// code). Unit dimensions are dropped and dimensions contiguous on both
// sides merged first. A kernel is named after a stable hash of its body,
// so identical pieces of one package (or of many) share one kernel.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "target/backend/copy_pieces.h"

namespace kiln::target::cuda {

// One launch of a copy kernel.
struct CopyLaunch {
  CopyPiece piece;
  int64_t element_bytes = 4;
  int64_t elements = 0;
  std::string function;  // the __global__ function (kiln_copy_<hash>)
  std::string source;    // its CUDA C++ (a table, when it has one, first)
  int64_t blocks = 1;
  int64_t threads = 256;
};

// True for the ops that run as copy kernels (not every instance: Slice
// needs constant starts): those with copy pieces (target/backend/copy_pieces.h)
// but the reshapes, which are views on the GPU, and ScatterElements.
bool IsCopyOp(const Node& node);

// The pieces of a copy op: ScatterPiecesOf for ScatterElements, else CopyPiecesOf.
absl::StatusOr<std::vector<CopyPiece>> DevicePiecesOf(const Node& node);

// The launch (kernel source and geometry) of one piece of elements of
// `element_bytes` bytes.
CopyLaunch MakeCopyLaunch(CopyPiece piece, int64_t element_bytes, const std::string& what);

// The bytes of one element `node` copies, or why the device does not hold them.
absl::StatusOr<int64_t> CopyElementBytes(const Node& node);

// A stable 64-bit FNV-1a hash (the same on every build and machine).
uint64_t StableHash(const std::string& bytes);

}  // namespace kiln::target::cuda
