//===- infer_shapes.cc - type and shape inference, Loop/Scan bodies to a fixpoint ---===//
//
// Every value gets the most precise type the ops' inference rules derive from
// the graph inputs, and a Loop or Scan body is inferred with loop-carried
// types that hold on every iteration.
//
// Nodes are inferred in order, nested graphs before the node that holds them,
// and each result is merged with the type the value already declares
// (kiln::MergeTypes: a static dim beats a symbolic one, a symbolic one an
// unknown one; a contradiction is an error naming the node). A Loop or Scan
// body is different: its loop-carried inputs start from the types of the
// initial values, the body is inferred, and each carried output's type is
// joined with its input's (a dim that differs between iterations becomes
// unknown, one that stays - static or symbolic - stays); this repeats until
// the carried types stop changing. Each round starts from the types the body
// had before, so nothing learnt from a too-precise round survives. A body that
// has not settled after kLoopInferenceCap rounds gets carried values of
// unknown shape (keeping their dtypes when one more round confirms them, else
// their declared types), counted as "loop-fixpoint-capped". Symbolic dims
// pass through as the ops' rules give them (`batch` stays `batch`).
//
// A node that was inferred before and whose inputs, their types and data,
// attributes and output types have not changed since is not inferred again
// (Node::types_current): a run after a pass that changed a few nodes infers
// those and what their changes reach.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/infer_shapes.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

std::string NodeText(const Node& n) {
  return n.name().empty() ? absl::StrCat("node (", n.QualifiedOp(), ")")
                          : absl::StrCat("node '", n.name(), "' (", n.QualifiedOp(), ")");
}

// The least type that covers both: dims that differ become unknown, ranks
// that differ make the shape unranked, kinds or dtypes that differ leave
// nothing known.
Type JoinTypes(const Type& a, const Type& b) {
  if (a == b) return a;
  if (a.is_none() || b.is_none() || a.kind() != b.kind()) return Type();
  if (!a.is_tensor()) {
    Type e = JoinTypes(a.element(), b.element());
    if (e.is_none()) return Type();
    return a.kind() == Type::Kind::kSequence ? Type::Sequence(e) : Type::Optional(e);
  }
  if (a.dtype() != b.dtype()) return Type();
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  if (!sa.ranked() || !sb.ranked() || sa.rank() != sb.rank()) return Type::Tensor(a.dtype(), Shape());
  DimVector dims;
  dims.reserve(sa.rank());
  for (int i = 0; i < sa.rank(); ++i) dims.push_back(sa[i] == sb[i] ? sa[i] : Dim());
  return Type::Tensor(a.dtype(), Shape(std::move(dims)));
}

// The types of every graph input and node output of `g` and its nested
// graphs, in a fixed traversal order.
using TypeSnapshot = std::vector<std::pair<Value*, Type>>;

void Snapshot(Graph& g, TypeSnapshot* out) {
  for (Value* v : g.inputs()) out->push_back({v, v->type()});
  for (Node* n : g.nodes()) {
    for (Graph* s : n->subgraphs()) Snapshot(*s, out);
    for (Value* o : n->outputs()) out->push_back({o, o->type()});
  }
}

void Restore(const TypeSnapshot& snap) {
  for (const auto& [v, t] : snap) v->set_type(t);
}

Graph* BodyOf(const Node& n) {
  if (!n.may_hold_graphs()) return nullptr;
  const Attribute* a = n.attr("body");
  return a && a->kind() == AttrKind::kGraph ? a->g() : nullptr;
}

// One loop-carried value: body input, body output, and the type it starts
// with.
struct Carried {
  int body_input;
  int body_output;
  Type initial;
};

class LoopAwareInference {
 public:
  absl::Status InferGraph(Graph& g) {
    for (Node* n : g.nodes()) KILN_RETURN_IF_ERROR(InferOneNode(n));
    return absl::OkStatus();
  }

  InferShapesReport report;

 private:
  absl::Status InferOneNode(Node* n) {
    // Inferred before, and nothing it reads has changed since: inferring it
    // again would give the types its outputs hold.
    if (n->types_current()) return absl::OkStatus();
    Graph* body = BodyOf(*n);
    bool default_domain = n->domain().empty() || n->domain() == "ai.onnx";
    if (body && default_domain && n->op() == "Loop") {
      KILN_RETURN_IF_ERROR(InferLoopBody(*n, *body));
    } else if (body && default_domain && n->op() == "Scan") {
      KILN_RETURN_IF_ERROR(InferScanBody(*n, *body));
    } else {
      for (Graph* s : n->subgraphs()) KILN_RETURN_IF_ERROR(InferGraph(*s));
    }
    const OpDef* def = OpRegistry::Global().Find(*n);
    if (!def) return InvalidArgument(NodeText(*n), ": unknown op '", n->QualifiedOp(), "'");
    auto inferred = InferNode(*def, *n);
    if (!inferred.ok()) return inferred.status();
    for (int i = 0; i < n->num_outputs() && i < static_cast<int>(inferred->size()); ++i) {
      Value* out = n->output(i);
      if ((*inferred)[i] == out->type()) continue;  // nothing new (the common case)
      auto merged = MergeTypes(out->type(), (*inferred)[i]);
      if (!merged.ok())
        return InvalidArgument(NodeText(*n), ": output '", out->name(), "': ", merged.status().message());
      // Outside a loop body's rounds each value is inferred once: count it
      // here. A body's values are compared once its fixpoint is reached.
      if (fixpoint_depth_ == 0 && *merged != out->type()) ++report.types_refined;
      out->set_type(*std::move(merged));
    }
    n->MarkTypesCurrent();
    return absl::OkStatus();
  }

  // Runs FixpointRounds and counts the body values whose type it changed.
  absl::Status Fixpoint(const Node& n, Graph& body, const std::vector<std::pair<int, Type>>& fixed,
                        const std::vector<Carried>& carried) {
    TypeSnapshot before;
    if (fixpoint_depth_ == 0) Snapshot(body, &before);
    ++fixpoint_depth_;
    absl::Status s = FixpointRounds(n, body, fixed, carried);
    --fixpoint_depth_;
    if (fixpoint_depth_ == 0) {
      for (const auto& [v, t] : before)
        if (v->type() != t) ++report.types_refined;
    }
    return s;
  }

  int fixpoint_depth_ = 0;  // > 0 inside a loop body's rounds

  // Loop body: (iteration, condition, carried...) -> (condition, carried..., scans...).
  absl::Status InferLoopBody(const Node& n, Graph& body) {
    int num_carried = std::max(n.num_inputs() - 2, 0);
    if (static_cast<int>(body.inputs().size()) != 2 + num_carried ||
        static_cast<int>(body.outputs().size()) < 1 + num_carried)
      return InferGraph(body);  // the node's own inference reports the mismatch
    std::vector<std::pair<int, Type>> fixed = {{0, Type::Tensor(DType::kI64, Shape::Scalar())},
                                               {1, Type::Tensor(DType::kBool, Shape::Scalar())}};
    std::vector<Carried> carried;
    for (int i = 0; i < num_carried; ++i) {
      Value* init = n.input(2 + i);
      carried.push_back({2 + i, 1 + i, init ? init->type() : Type()});
    }
    return Fixpoint(n, body, fixed, carried);
  }

  // Scan body: (states..., scan slices...) -> (states..., scan output slices...).
  absl::Status InferScanBody(const Node& n, Graph& body) {
    int64_t num_scan = n.GetInt("num_scan_inputs", -1);
    int num_states = n.num_inputs() - static_cast<int>(num_scan);
    if (num_scan < 1 || num_states < 0 ||
        static_cast<int>(body.inputs().size()) != n.num_inputs() ||
        static_cast<int>(body.outputs().size()) < num_states)
      return InferGraph(body);
    std::vector<int64_t> axes = n.GetInts("scan_input_axes", std::vector<int64_t>(num_scan, 0));
    std::vector<std::pair<int, Type>> fixed;
    for (int j = 0; j < num_scan; ++j) {
      Value* x = n.input(num_states + j);
      Type slice;
      if (x && x->type().is_tensor()) {
        const Type& t = x->type();
        slice = Type::Tensor(t.dtype(), Shape());
        if (t.shape().ranked() && j < static_cast<int>(axes.size())) {
          int64_t rank = t.shape().rank();
          int64_t axis = axes[j] < 0 ? axes[j] + rank : axes[j];
          if (axis >= 0 && axis < rank) {
            DimVector dims = t.shape().dims();
            dims.erase(dims.begin() + axis);
            slice = Type::Tensor(t.dtype(), Shape(std::move(dims)));
          }
        }
      }
      fixed.push_back({num_states + j, std::move(slice)});
    }
    std::vector<Carried> carried;
    for (int i = 0; i < num_states; ++i) {
      Value* init = n.input(i);
      carried.push_back({i, i, init ? init->type() : Type()});
    }
    return Fixpoint(n, body, fixed, carried);
  }

  absl::Status FixpointRounds(const Node& n, Graph& body, const std::vector<std::pair<int, Type>>& fixed,
                              const std::vector<Carried>& carried) {
    std::vector<Type> declared;
    for (Value* v : body.inputs()) declared.push_back(v->type());
    TypeSnapshot snap;
    Snapshot(body, &snap);

    auto merge = [&](int input, const Type& t) -> absl::StatusOr<Type> {
      auto m = MergeTypes(declared[input], t);
      if (!m.ok())
        return InvalidArgument(NodeText(n), ": body input '", body.inputs()[input]->name(), "': ",
                               m.status().message());
      return m;
    };
    // Iteration counters, conditions and scan slices: a declaration that
    // contradicts them is left for the node's inference to report.
    std::vector<std::pair<int, Type>> fixed_types;
    for (const auto& [input, t] : fixed) {
      auto m = MergeTypes(declared[input], t);
      fixed_types.push_back({input, m.ok() ? *m : declared[input]});
    }
    std::vector<Type> current;
    for (const Carried& c : carried) {
      KILN_ASSIGN_OR_RETURN(Type t, merge(c.body_input, c.initial));
      current.push_back(std::move(t));
    }
    auto bind_inputs = [&] {
      Restore(snap);
      for (const auto& [input, t] : fixed_types) body.inputs()[input]->set_type(t);
      for (size_t k = 0; k < carried.size(); ++k) body.inputs()[carried[k].body_input]->set_type(current[k]);
    };

    for (int round = 0; round < kLoopInferenceCap; ++round) {
      bind_inputs();
      ++report.body_iterations;
      KILN_RETURN_IF_ERROR(InferGraph(body));
      bool settled = true;
      for (size_t k = 0; k < carried.size(); ++k) {
        const Type& out = body.outputs()[carried[k].body_output]->type();
        KILN_ASSIGN_OR_RETURN(Type next, merge(carried[k].body_input, JoinTypes(current[k], out)));
        if (next != current[k]) {
          settled = false;
          current[k] = std::move(next);
        }
      }
      if (settled) return absl::OkStatus();
    }
    // Not settled: give up the shapes of the carried values but keep their
    // dtypes when one more round confirms them; else keep the declarations.
    ++report.loops_capped;
    for (size_t k = 0; k < carried.size(); ++k) {
      const Type& t = current[k];
      Type general = t.is_tensor() && t.dtype() != DType::kUndefined ? Type::Tensor(t.dtype(), Shape()) : Type();
      auto m = MergeTypes(declared[carried[k].body_input], general);
      current[k] = m.ok() ? *m : declared[carried[k].body_input];
    }
    bind_inputs();
    ++report.body_iterations;
    KILN_RETURN_IF_ERROR(InferGraph(body));
    bool dtypes_hold = true;
    for (size_t k = 0; k < carried.size(); ++k) {
      const Type& out = body.outputs()[carried[k].body_output]->type();
      const Type& in = current[k];
      if (in.is_tensor() && in.dtype() != DType::kUndefined && (!out.is_tensor() || out.dtype() != in.dtype()))
        dtypes_hold = false;
    }
    if (dtypes_hold) return absl::OkStatus();
    for (size_t k = 0; k < carried.size(); ++k) current[k] = declared[carried[k].body_input];
    bind_inputs();
    ++report.body_iterations;
    return InferGraph(body);
  }
};

}  // namespace

absl::StatusOr<InferShapesReport> InferShapesWithLoops(Graph& g) {
  LoopAwareInference inference;
  KILN_RETURN_IF_ERROR(inference.InferGraph(g));
  InferShapesReport report = inference.report;
  report.changed = report.types_refined > 0;
  return report;
}

namespace {

class InferShapesPass : public Pass {
 public:
  absl::string_view name() const override { return "infer-shapes"; }
  // Erasing what nothing reads, and merging values of one type and data,
  // leave every inference rule's inputs as they were.
  ChangeKinds woken_by(const Graph&) const override { return kChangeOther; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    KILN_ASSIGN_OR_RETURN(InferShapesReport report, InferShapesWithLoops(graph));
    if (report.loops_capped) stats().Add("loop-fixpoint-capped", report.loops_capped);
    if (report.body_iterations) stats().Add("loop-body-inferences", report.body_iterations);
    if (report.types_refined) stats().Add("types-refined", report.types_refined);
    // Inference in order reaches every type it can refine in one run; a
    // capped loop body may still move.
    if (!report.loops_capped) NoteSettled();
    return report.changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateInferShapesPass() { return std::make_unique<InferShapesPass>(); }

}  // namespace kiln
