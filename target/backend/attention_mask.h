//===- attention_mask.h - kiln.Attention's bool mask made additive -*- C++ -*-===//
//
// The attention kernels of every target read an additive mask (added to
// the scaled scores); a decoder exported with a bool mask (true: the key
// takes part) gets one in its place before lowering.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "graph/ir/graph.h"

namespace kiln::target {

// Gives kiln.Attention `n` the additive mask the kernels read in place of
// its bool one (mask_value -inf only): Where(mask, 0, -inf) in Q's dtype, a
// node just before `n`, one for every attention that reads the same mask (a
// decoder's layers). Whether it did.
bool MakeAttentionMaskAdditive(Graph& g, Node* n);

}  // namespace kiln::target
