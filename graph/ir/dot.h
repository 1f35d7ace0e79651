//===- dot.h - Graphviz export of a graph -----------------------*- C++ -*-===//
//
// ToDot writes a graph as a Graphviz `digraph`: graph inputs as ellipses,
// constants as small boxes, nodes as rounded boxes labelled with their op,
// node name and output types, graph outputs as dashed ellipses, and the
// graphs nested in node attributes as clusters (values they use from
// enclosing graphs come in as dashed edges; their outputs feed the holding
// node with dotted edges). The output depends only on the graph, never on
// pointer values: the same graph always gives the same text.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "graph/ir/graph.h"

namespace kiln {

std::string ToDot(const Graph& graph);

}  // namespace kiln
