//===- op_tables.cc - One placement ladder, driven by a target's tables ---===//
#include "target/placement/op_tables.h"

#include "absl/strings/str_cat.h"
#include "graph/ops/op_registry.h"
#include "graph/passes/rewrite_helpers.h"
#include "target/placement/placement.h"

namespace kiln::target {

Placement PlaceByTables(const Node& n, const OpTables& t) {
  const OpDef* def = OpRegistry::Global().Find(n);
  if (!def) return {"", absl::StrCat("op '", n.QualifiedOp(), "' is unknown to kiln")};
  const std::function<Placement(std::string)> fallback = [&](std::string why) -> Placement {
    if (!def->kernel) return {"", absl::StrCat("op '", n.QualifiedOp(), "' has no kernel on any engine")};
    return {t.fallback_engine, std::move(why)};
  };
  const bool kiln_domain = n.domain() == "kiln";
  if (!n.domain().empty() && !kiln_domain)
    return fallback(absl::StrCat("domain '", n.domain(), "' has no ", t.kernel_kind, " kernels"));
  if (kiln_domain && n.op() == "AllReduce") {
    if (t.links_engine.empty()) return {"", t.links_refusal};
    return {t.links_engine, absl::StrCat("a collective over ", t.links_where, ": the mean over ",
                                         n.GetInt("replicas", 1), " ", t.device_kind, "s")};
  }
  const bool fused = kiln_domain && n.op() == "Fused";
  if (!n.subgraphs().empty() && !fused) return fallback(absl::StrCat("control flow runs on ", t.fallback_where));
  if (!StaticOutputShapes(n)) return fallback("output shape is not static (data-dependent or symbolic)");
  if (t.gate)
    if (std::optional<Placement> p = t.gate(n, fallback)) return *p;
  if (IsOneOf(n, kViewOps)) return {t.vector_engine, "a view: no data moves"};
  if (t.copies)
    if (std::optional<Placement> p = t.copies(n, fallback)) return *p;
  if (t.matrix_ops.contains(n.op())) {
    if (t.matrix_dtype && !AllTensorsAre(n, t.matrix_dtype)) return fallback(t.matrix_dtype_refusal);
    if (t.matrix)
      if (std::optional<Placement> p = t.matrix(n, fallback)) return *p;
    return {t.matrix_engine, absl::StrCat("matrix work on ", t.matrix_where)};
  }
  if (fused) {
    if (t.fused)
      if (std::optional<Placement> p = t.fused(n, fallback)) return *p;
    const std::string kind = n.GetString("kind", "");
    if (kind == "matmul-epilogue" || kind == "conv-epilogue")
      return {t.matrix_engine, "matrix op with fused epilogue"};
    return {t.vector_engine, absl::StrCat("fused memory-bound group on ", t.vector_where)};
  }
  if (t.vector_ops.contains(n.op())) {
    if (t.vector_dtype && !AllTensorsAre(n, t.vector_dtype)) return fallback(t.vector_dtype_refusal);
    return {t.vector_engine, def->op_class == OpClass::kElementwise
                                 ? absl::StrCat("elementwise on ", t.vector_where)
                                 : absl::StrCat(OpClassName(def->op_class), " on ", t.vector_where)};
  }
  return fallback(absl::StrCat("no ", t.kernel_kind, " kernel for ", n.QualifiedOp()));
}

}  // namespace kiln::target
