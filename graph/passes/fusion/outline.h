//===- outline.h - Fusion groups become kiln.Fused nodes --------*- C++ -*-===//
//
// Rewrites one graph after its partition: each group becomes one node
// `kiln.Fused` whose `body` holds copies of the members (self-contained: the
// values the group reads from outside are the node's inputs, constants of
// at most kInlineConstantElements elements are copied in) and whose outputs
// are the members' results that something outside the group still reads.
// Those outputs keep their names, so graph outputs keep theirs; values
// inside a body get fresh names where an outer name would be redefined.
// Duplicated originals that no one reads any more are erased, and the nodes
// take the partition's order.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>

#include "graph/ir/graph.h"
#include "graph/passes/fusion/partition.h"
#include "graph/passes/rewrite_helpers.h"

namespace kiln::fusion {

inline constexpr int64_t kInlineConstantElements = 16;

struct OutlineReport {
  int64_t groups[4] = {0, 0, 0, 0};  // by GroupKind
  int64_t nodes_fused = 0;           // members computed only inside a group
  int64_t nodes_duplicated = 0;      // copies of nodes that stay for other users
  int64_t duplicates_erased = 0;     // originals every user of which reads a copy
  int64_t bytes_saved = 0;           // intermediate writes and reads no longer made (static shapes)
};

// `body_count` numbers the bodies across a whole graph nest.
OutlineReport OutlineGroups(Graph& g, const Partition& partition, NameTable& names, int* body_count);

// The inverse for one node: replaces kiln.Fused node `n` of `g` by copies of
// its body's members (body constants become constants of `g`), for a target
// that cannot generate the group's kernel and runs its members one by one.
void InlineFused(Graph& g, Node* n);

// For a target's code generator: every kiln node of `g`'s top level (a
// kiln.Fused group or a composite such as kiln.Attention) for which `keep`
// answers false is split back into its members, or expanded into the ONNX
// ops it stands for, so that the parts can still run on the target's
// engines. True when anything changed (the new nodes' shapes then need
// inferring).
bool SplitBackKilnNodes(Graph& g, const std::function<bool(Node*)>& keep);

}  // namespace kiln::fusion
