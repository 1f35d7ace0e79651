//===- placement.cc - Assigning nodes to a target's engines ---------------===//
#include "target/placement/placement.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/ir/printer.h"
#include "graph/ops/op_registry.h"

namespace kiln::target {

const Placement* PlacementPlan::Find(const Node* n) const {
  auto it = index.find(n);
  return it == index.end() ? nullptr : &nodes[it->second].placement;
}

std::string PlacementPlan::Explain() const {
  std::string out;
  for (const NodePlacement& p : nodes) {
    std::string lhs = p.node->num_outputs() ? PrintValueName(p.node->output(0)->name()) : "";
    absl::StrAppend(&out, absl::StrFormat("%-40s %-22s -> %-7s %s\n", lhs, p.node->QualifiedOp(),
                                          p.placement.engine, p.placement.reason));
  }
  double total_flops = 0;
  int64_t total_nodes = 0;
  for (const auto& [e, t] : per_engine) {
    total_flops += t.flops;
    total_nodes += t.nodes;
  }
  absl::StrAppend(&out, "\nengine   nodes        GFLOP   share of FLOPs\n");
  for (const auto& [e, t] : per_engine)
    absl::StrAppend(&out, absl::StrFormat("%-8s %5d %12.4f   %6.2f%%\n", e, t.nodes, t.flops / 1e9,
                                          total_flops > 0 ? 100 * t.flops / total_flops : 0.0));
  absl::StrAppend(&out, absl::StrFormat("%-8s %5d %12.4f\n", "total", total_nodes, total_flops / 1e9));
  return out;
}

absl::StatusOr<PlacementPlan> PlaceGraph(const Graph& graph, const Target& target,
                                         const CompileOptions& options) {
  PlacementPlan plan;
  for (Node* n : graph.nodes()) {
    Placement p = target.Place(*n, options);
    if (p.engine.empty()) {
      std::string label = n->name().empty() ? absl::StrCat("node (", n->QualifiedOp(), ")")
                                            : absl::StrCat("node '", n->name(), "' (", n->QualifiedOp(), ")");
      return absl::UnimplementedError(absl::StrCat(label, ": no engine of target '", target.description().name,
                                                   "' can run it: ", p.reason));
    }
    auto& totals = plan.per_engine[p.engine];
    ++totals.nodes;
    totals.flops += NodeCost(*n).flops;
    plan.index[n] = plan.nodes.size();
    plan.nodes.push_back({n, std::move(p)});
  }
  return plan;
}

bool AllTensorsAre(const Node& n, bool (*pred)(DType)) {
  for (Value* v : n.inputs())
    if (v && v->type().is_tensor() && !pred(v->type().dtype())) return false;
  for (Value* v : n.outputs())
    if (v->type().is_tensor() && !pred(v->type().dtype())) return false;
  return true;
}

bool StaticOutputShapes(const Node& n) {
  for (Value* v : n.outputs())
    if (!v->type().is_tensor() || !v->type().shape().is_static()) return false;
  return true;
}

}  // namespace kiln::target
