//===- copy_pieces.h - Data movement as boxes of strided copies -*- C++ -*-===//
//
// Ops that only move elements (Identity, inference-mode Dropout, Reshape,
// Flatten, Squeeze, Unsqueeze, Transpose, Expand, Tile, Concat, Split,
// Slice, Gather) need no arithmetic and no tile IR: each is a set of
// *pieces*, a box of elements copied from one of the node's inputs to one of
// its outputs, each side addressed by a base and a stride per dimension
// (Transpose permutes the source strides, Concat and Split offset one side
// along the axis, Slice offsets and scales, negative steps included, Expand
// and Tile read with stride 0 along broadcast dimensions, Gather reads one
// dimension through a table of offsets: constant, or its indices input read
// at run time; ScatterElements writes its updates through its indices).
// Every target's data-movement code starts from them: a target turns
// pieces into its own transfers (DMA through a vector unit's buffer,
// strided-copy kernels).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"

namespace kiln::target {

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
  // ScatterElements: the run-time index moves the destination instead, one
  // index per element of the box (input `index_input` has the box's shape,
  // row-major): element i adds index[i], normalized, times index_scale to
  // its destination offset (table_dim is -1).
  bool scatter = false;

  int64_t elements() const;  // the product of dims
};

// True for the ops CopyPiecesOf takes (not every instance: Slice needs
// constant starts, for example).
bool HasCopyPieces(const Node& node);

// The pieces of `node`, or an error that says why it has no copy form.
absl::StatusOr<std::vector<CopyPiece>> CopyPiecesOf(const Node& node);

// ScatterElements without a reduction as two pieces, in order: the data
// copied whole into the output, then the updates written at the indices
// (a `scatter` piece). An error says why a node has no such form.
bool IsScatterCopy(const Node& node);
absl::StatusOr<std::vector<CopyPiece>> ScatterPiecesOf(const Node& node);

// Drops unit dimensions and merges dimensions contiguous on both sides
// (never a table dimension).
void SimplifyPiece(CopyPiece& p);

// One piece for two copies in a row: `reader` reads a tensor (or a view
// of its bytes) that `writer` wrote whole, row-major from its first
// element; the result moves reader's box straight from writer's source
// (src and the source side from writer, dst and the destination side from
// reader). Empty when that is not one box of strides: a table or run-time
// index on either side, or a reader stride that does not step along one
// dimension of writer's box without carrying into the next.
std::optional<CopyPiece> ComposePieces(const CopyPiece& reader, const CopyPiece& writer);

}  // namespace kiln::target
