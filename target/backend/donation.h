//===- donation.h - Step outputs computed in their inputs' place -*- C++ -*-===//
//
// Buffer donation (input-output aliasing, as XLA's): a step's output
// NAME.next that a loop feeds into its input NAME (a KV cache, a counter)
// can be written over NAME's bytes instead of into a buffer of its own,
// when the node that computes it can write its output over that input (a
// ScatterElements writes only the elements it updates) and nothing reads
// NAME's bytes after that node. The loop then needs no copy from step to
// step, and the node moves only what changes.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "graph/ir/graph.h"

namespace kiln::target {

struct Donation {
  const Value* input = nullptr;   // the graph input NAME, whose bytes are donated
  const Value* output = nullptr;  // the graph output NAME.next, computed in them
  const Node* writer = nullptr;   // the node that computes it, writing over its input `input_index`
  int input_index = 0;
};

// The donations of `g` among `feeds` (graph input, graph output) pairs:
// each output (of any of its producer's outputs: a fused optimizer update
// writes a parameter and its moments) whose producer reads the input as
// exactly one of its inputs
// (the index `writes_in_place` is asked about and accepts), where the two
// have one static type and every other reader of the input's bytes
// (through the views `is_view` names, too) comes before the writer in node
// order. An input that is also a graph output, or is read inside a nested
// graph, is never donated.
std::vector<Donation> FindDonations(const Graph& g, const std::vector<std::pair<const Value*, const Value*>>& feeds,
                                    const std::function<bool(const Node&)>& is_view,
                                    const std::function<bool(const Node&, int input)>& writes_in_place);

}  // namespace kiln::target
