//===- placement.h - Assigning nodes to a target's engines ------*- C++ -*-===//
//
// Asks the target where each node of an optimized graph runs (its op-support
// table answers an engine and a reason), and summarizes the answer: nodes and
// FLOPs per engine. `kiln compile --explain-placement` prints it. A node that
// no engine supports fails placement with the node and the reason named.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "target/api/target.h"

namespace kiln::target {

struct NodePlacement {
  const Node* node;
  Placement placement;
};

struct PlacementPlan {
  std::vector<NodePlacement> nodes;  // top-level nodes, in graph order
  struct EngineTotals {
    int64_t nodes = 0;
    double flops = 0;
  };
  std::map<std::string, EngineTotals> per_engine;
  absl::flat_hash_map<const Node*, size_t> index;  // node -> position in `nodes`

  const Placement* Find(const Node* n) const;
  // One line per node ("%y = Conv  ->  cube: ...") then the summary.
  std::string Explain() const;
};

absl::StatusOr<PlacementPlan> PlaceGraph(const Graph& graph, const Target& target,
                                         const CompileOptions& options);

// Questions a target's op-support table asks of a node.
// True when every tensor the node reads or writes has a dtype `pred` takes.
bool AllTensorsAre(const Node& n, bool (*pred)(DType));
// True when every output is a tensor of a static shape.
bool StaticOutputShapes(const Node& n);

}  // namespace kiln::target
