//===- cuda_copy_kernel.h - Data movement as strided-copy CUDA kernels -*- C++ -*-===//
//
// Ops that only move elements (Transpose, Concat, Split, Slice, Expand,
// Tile, Gather, Identity and inference-mode Dropout)
// need no tile IR: each is a set of *pieces*, a box of elements copied from
// one of the node's inputs to one of its outputs, each side addressed by a
// base and a stride per dimension (Transpose permutes the source strides,
// Concat and Split offset one side along the axis, Slice offsets and
// scales, Expand and Tile read with stride 0 along broadcast dimensions;
// Gather reads one dimension through a table of offsets: constant, or its
// indices input read on the device).
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

namespace kiln::target::cuda {

// A box of elements moved from input `src` to output `dst` of a node.
struct CopyPiece {
  int src = 0, dst = 0;
  int64_t src_base = 0, dst_base = 0;                   // elements
  std::vector<int64_t> dims, src_strides, dst_strides;  // elements; outermost first
  // A dimension read through a table: coordinate i of dimension
  // `table_dim` adds table[i] to the source offset (its src stride is 0).
  int table_dim = -1;
  std::vector<int64_t> table;
  // Gather with indices computed at run time: the table is input
  // `index_input` (i32 or i64 elements of `index_bytes`), each index i
  // normalized into [0, index_extent) and scaled by `index_scale`; the
  // kernel takes it as a third argument.
  int index_input = -1;
  int64_t index_bytes = 8, index_extent = 1, index_scale = 1;
};

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

// True for the ops CopyLaunchesOf takes (not every instance: Slice needs
// constant starts).
bool IsCopyOp(const Node& node);

// The pieces of `node`, or an error that says why it has no copy form.
absl::StatusOr<std::vector<CopyPiece>> CopyPiecesOf(const Node& node);

// Drops unit dimensions and merges dimensions contiguous on both sides.
void SimplifyPiece(CopyPiece& p);

// The launch (kernel source and geometry) of one piece of elements of
// `element_bytes` bytes.
CopyLaunch MakeCopyLaunch(CopyPiece piece, int64_t element_bytes, const std::string& what);

// Every launch of `node`, or an error that says why it has no copy form.
absl::StatusOr<std::vector<CopyLaunch>> CopyLaunchesOf(const Node& node);

// A stable 64-bit FNV-1a hash (the same on every build and machine).
uint64_t StableHash(const std::string& bytes);

}  // namespace kiln::target::cuda
