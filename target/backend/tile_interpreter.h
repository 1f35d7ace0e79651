//===- tile_interpreter.h - Tile kernels run on the host, statement by statement -*- C++ -*-===//
//
// The reference meaning of the tile IR: RunTileKernel executes a TileKernel
// on the CPU the way docs/tile-ir.md defines it, so a kernel that a lowering
// makes can be checked against kiln's reference executor without the device
// it is meant for.
//
//  - grid, group, serial and pipelined loops all run in order (the first
//    variable of a loop outermost); pipelining and multi-copy buffers change
//    no values, so every buffer has one copy. Statements inside a group loop
//    run once per group: for the copies and fills that the groups of a unit
//    share that is the cooperative result; a shared statement that
//    accumulates without using a group variable is refused.
//  - every value is held as a double and rounded to its buffer's or
//    tensor's dtype whenever it is stored (f16/bf16 with kiln's own
//    conversions, integers with ONNX Cast's rules); copies convert dtypes,
//    `add` adds into the destination, ew and reduce steps compute in double.
//  - global references follow numpy alignment: missing leading starts are
//    0, extra leading tensor dimensions have extent 1, dimensions of extent
//    1 broadcast on reads; reads past a tensor's end give 0 and writes past
//    it are dropped. `im2col` copies read the virtual convolution matrix of
//    tile_ir.h's Im2col, which broadcasts nothing: its rows and columns
//    past the virtual extent are zero, as tile_ir.h says.
//  - a buffer holds NaN until it is written, so a kernel that reads what it
//    never wrote shows it in its results; an `out` argument that a copy
//    writes with `add` is zeroed first, as a launch does.
//
// The interpreter does not need Verify: a kernel it cannot run (an unknown
// name or loop variable, a reference of the wrong rank, a local tile outside
// its buffer, a global tile starting before its tensor, shapes that do not
// agree) is an InvalidArgument error naming the statement.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "graph/ir/tensor.h"
#include "target/backend/tile_ir.h"

namespace kiln::target::tile {

// Runs `k` with args[i] as its argument i. Each tensor has the argument's
// dtype and as many elements as its declared shape (its own dims may
// differ: an argument declared with a view of the tensor reads the same
// elements in the declared shape). `in` and `const` tensors are only read;
// `out` and `workspace` tensors are written in place (elements the kernel
// does not write keep their values).
absl::Status RunTileKernel(const TileKernel& k, absl::Span<Tensor* const> args);

}  // namespace kiln::target::tile
