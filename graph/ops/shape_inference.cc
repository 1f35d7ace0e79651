//===- shape_inference.cc - Type and shape inference over a graph ---------===//
#include "graph/ops/shape_inference.h"

#include "graph/ops/op_registry.h"
#include "graph/support/status.h"

namespace kiln {

static Dim MergeDim(const Dim& a, const Dim& b, bool* conflict) {
  if (a.is_static() && b.is_static()) {
    if (a.value() != b.value()) *conflict = true;
    return a;
  }
  if (a.is_static()) return a;
  if (b.is_static()) return b;
  if (a.is_symbolic()) return a;
  return b;
}

absl::StatusOr<Type> MergeTypes(const Type& declared, const Type& inferred) {
  if (declared.is_none()) return inferred;
  if (inferred.is_none()) return declared;
  if (declared.kind() != inferred.kind())
    return InvalidArgument("declared type ", declared.ToString(), " contradicts inferred ", inferred.ToString());
  if (!declared.is_tensor()) {
    KILN_ASSIGN_OR_RETURN(Type elem, MergeTypes(declared.element(), inferred.element()));
    return declared.kind() == Type::Kind::kSequence ? Type::Sequence(elem) : Type::Optional(elem);
  }
  DType dt = declared.dtype();
  if (dt == DType::kUndefined) dt = inferred.dtype();
  else if (inferred.dtype() != DType::kUndefined && inferred.dtype() != dt)
    return InvalidArgument("declared type ", declared.ToString(), " contradicts inferred ", inferred.ToString());
  const Shape& a = declared.shape();
  const Shape& b = inferred.shape();
  if (!a.ranked()) return Type::Tensor(dt, b);
  if (!b.ranked()) return Type::Tensor(dt, a);
  if (a.rank() != b.rank())
    return InvalidArgument("declared type ", declared.ToString(), " contradicts inferred ", inferred.ToString());
  bool conflict = false;
  DimVector dims;
  for (int i = 0; i < a.rank(); ++i) dims.push_back(MergeDim(a[i], b[i], &conflict));
  if (conflict)
    return InvalidArgument("declared type ", declared.ToString(), " contradicts inferred ", inferred.ToString());
  return Type::Tensor(dt, Shape(std::move(dims)));
}

absl::Status InferShapes(Graph& g) {
  const OpRegistry& registry = OpRegistry::Global();
  for (Node* n : g.NodeList()) {
    for (Graph* sub : n->subgraphs()) KILN_RETURN_IF_ERROR(InferShapes(*sub));
    const OpDef* def = registry.Find(*n);
    if (!def) {
      return InvalidArgument("node '", n->name(), "': unknown op '", n->QualifiedOp(), "'");
    }
    auto inferred = InferNode(*def, *n);
    if (!inferred.ok()) return inferred.status();
    for (int i = 0; i < n->num_outputs() && i < static_cast<int>(inferred->size()); ++i) {
      Value* out = n->output(i);
      auto merged = MergeTypes(out->type(), (*inferred)[i]);
      if (!merged.ok()) {
        std::string label = n->name().empty() ? absl::StrCat("node (", n->QualifiedOp(), ")")
                                              : absl::StrCat("node '", n->name(), "' (", n->QualifiedOp(), ")");
        return InvalidArgument(label, ": output '", out->name(), "': ", merged.status().message());
      }
      out->set_type(*std::move(merged));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
