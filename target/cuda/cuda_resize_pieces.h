//===- cuda_resize_pieces.h - Nearest-neighbour Resize as one copy piece -*- C++ -*-===//
//
// A Resize in mode "nearest" that scales only the last two dimensions
// (scales or sizes constant, no crop) moves elements and computes none:
// each output pixel is one input pixel of its plane. It becomes one copy
// piece (target/backend/copy_pieces.h) over [planes, H_out x W_out] whose
// table gives each output pixel's source offset in its plane, found by
// running the reference kernel itself on an image of plane offsets, so
// every coordinate mode and rounding rule is the reference's. Tables past
// kMaxResizeTable entries (a large upsampling) stay with the host.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "target/backend/copy_pieces.h"

namespace kiln::target::cuda {

// The largest table a Resize piece carries (output pixels per plane).
constexpr int64_t kMaxResizeTable = 65536;

bool IsResizeCopy(const Node& node);  // a Resize the GPU may run as a copy
// Why `node`'s form rules out a copy piece ("" when it does not): read
// from its attributes and shapes alone, without running the reference.
std::string ResizeCopyBlocker(const Node& node);
// Its piece, or why it has none (then it runs on the host).
absl::StatusOr<std::vector<CopyPiece>> ResizePiecesOf(const Node& node);

}  // namespace kiln::target::cuda
