//===- composite_expanders.cc - Expand composite ops into ONNX ops --------===//
//
// Expansions follow the definitions in graph/ops/composite.cc step by step.
// Constants take the dtype of the composite's input; when that dtype is not
// known, they are f32 constants cast with CastLike. Shapes that are not
// static (the head size for the default scale, [Sq, Sk] for the causal mask)
// are computed at run time with Shape; a causal mask too large to store as
// a constant is built at run time from [Sq, Sk] (ConstantOfShape, Trilu).
//
//===----------------------------------------------------------------------===//
#include "graph/passes/patterns/composite_expanders.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <utility>

#include "graph/ir/dtype.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/patterns/rewrite_util.h"

namespace kiln::patterns {
namespace {

// Adds ONNX nodes before the composite being expanded.
class Builder {
 public:
  explicit Builder(Node* composite) : g_(*composite->owner()), before_(composite) {}

  Value* Op(absl::string_view op, std::vector<Value*> inputs, absl::string_view hint) {
    Node* n = g_.AddNode(op, std::move(inputs), {g_.UniqueName(hint)}, "", before_);
    InferNodeTypes(n);
    return n->output(0);
  }
  // An op with one attribute.
  Value* Op(absl::string_view op, std::vector<Value*> inputs, const char* attr, Attribute a, absl::string_view hint) {
    Node* n = g_.AddNode(op, std::move(inputs), {g_.UniqueName(hint)}, "", before_);
    n->SetAttr(attr, std::move(a));
    InferNodeTypes(n);
    return n->output(0);
  }

  // A scalar of `like`'s dtype.
  Value* Scalar(double v, Value* like) {
    DType dt = KnownDType(like);
    if (IsFloat(dt)) return ScalarConst(g_, dt, v, "c");
    Value* c = ScalarConst(g_, DType::kF32, v, "c");
    return Op("CastLike", {c, like}, "c");
  }

  Value* Const(Tensor t, absl::string_view hint) { return g_.AddConstant(g_.UniqueName(hint), std::move(t)); }

 private:
  Graph& g_;
  Node* before_;
};

// Replaces the composite's output with the expansion's and gives it the
// composite's output name.
void Replace(Node* composite, Value* out) {
  std::string name = composite->output(0)->name();
  const Type& declared = composite->output(0)->type();
  if (!declared.is_none()) {
    auto merged = MergeTypes(declared, out->type());
    out->set_type(merged.ok() ? *merged : declared);
  }
  Value* v = ReplaceNode(composite, {out})[0];
  Node* p = v->producer();
  if (v->name() != name && !p->owner()->NameInUse(name)) RenameOutput(p, 0, name);
}

Attribute Ints(std::vector<int64_t> v) { return Attribute::Ints(std::move(v)); }

}  // namespace

bool ExpandGelu(Node* n) {
  Value* x = n->input(0);
  if (!x || n->num_outputs() != 1) return false;
  std::string approx = n->GetString("approximate", "none");
  if (approx != "none" && approx != "tanh") return false;
  Builder b(n);
  Value* inner;
  if (approx == "none") {
    // x * 0.5 * (1 + erf(x / sqrt(2)))
    Value* e = b.Op("Erf", {b.Op("Div", {x, b.Scalar(std::numbers::sqrt2, x)}, "gelu")}, "gelu");
    inner = b.Op("Add", {e, b.Scalar(1.0, x)}, "gelu");
  } else {
    // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    Value* x3 = b.Op("Mul", {b.Op("Mul", {x, x}, "gelu"), x}, "gelu");
    Value* s = b.Op("Add", {x, b.Op("Mul", {x3, b.Scalar(0.044715, x)}, "gelu")}, "gelu");
    Value* t = b.Op("Tanh", {b.Op("Mul", {s, b.Scalar(std::sqrt(2.0 / std::numbers::pi), x)}, "gelu")}, "gelu");
    inner = b.Op("Add", {t, b.Scalar(1.0, x)}, "gelu");
  }
  Value* y = b.Op("Mul", {b.Op("Mul", {x, inner}, "gelu"), b.Scalar(0.5, x)}, "gelu");
  Replace(n, y);
  return true;
}

bool ExpandAttention(Node* n) {
  Value* q = n->input(0);
  Value* k = n->input(1);
  Value* v = n->input(2);
  Value* mask = n->input(3);
  if (!q || !k || !v || n->num_outputs() != 1) return false;
  // Whether the mask is added or selects depends on its dtype.
  if (mask && KnownDType(mask) == DType::kUndefined) return false;
  Builder b(n);
  // Scores Q @ K^T.
  Value* s;
  if (n->GetInt("k_transposed", 0) != 0) {
    s = b.Op("MatMul", {q, k}, "scores");
  } else if (int r = KnownRank(k); r >= 2) {
    std::vector<int64_t> perm;
    for (int i = 0; i < r; ++i) perm.push_back(i);
    std::swap(perm[r - 1], perm[r - 2]);
    s = b.Op("MatMul", {q, b.Op("Transpose", {k}, "perm", Ints(perm), "kt")}, "scores");
  } else {
    s = b.Op("Einsum", {q, k}, "equation", Attribute::String("...ij,...kj->...ik"), "scores");
  }
  // Scale.
  if (n->has_attr("scale")) {
    double scale = n->GetFloat("scale", 1.0f);
    if (scale != 1.0) s = b.Op("Mul", {s, b.Scalar(scale, q)}, "scores");
  } else {
    const Type& qt = q->type();
    const Dim* d = qt.is_tensor() && qt.shape().ranked() && qt.shape().rank() >= 1
                       ? &qt.shape()[qt.shape().rank() - 1]
                       : nullptr;
    if (d && d->is_static()) {
      s = b.Op("Mul", {s, b.Scalar(1.0 / std::sqrt(static_cast<double>(d->value())), q)}, "scores");
    } else {
      Value* dim = b.Op("Shape", {q}, "start", Attribute::Int(-1), "head_size");
      Value* root = b.Op("Sqrt", {b.Op("CastLike", {dim, q}, "head_size")}, "head_size");
      s = b.Op("Div", {s, root}, "scores");
    }
  }
  // Mask.
  if (mask) {
    if (KnownDType(mask) == DType::kBool) {
      double fill = n->GetFloat("mask_value", -std::numeric_limits<float>::infinity());
      s = b.Op("Where", {mask, s, b.Scalar(fill, q)}, "scores");
    } else {
      s = b.Op("Add", {s, mask}, "scores");
    }
  }
  // Causal: keep key j for query i when j <= i.
  if (n->GetInt("causal", 0) != 0) {
    const Type& st = s->type();
    Value* keep;
    int r = st.is_tensor() && st.shape().ranked() ? st.shape().rank() : -1;
    const bool known = r >= 2 && st.shape()[r - 2].is_static() && st.shape()[r - 1].is_static();
    if (known && st.shape()[r - 2].value() * st.shape()[r - 1].value() <= (int64_t{1} << 22)) {
      int64_t sq = st.shape()[r - 2].value(), sk = st.shape()[r - 1].value();
      Tensor tri(DType::kBool, {sq, sk});
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < sk; ++j) tri.data<bool>()[i * sk + j] = j <= i;
      keep = b.Const(tri, "causal");
    } else {
      Tensor one(DType::kBool, {1});
      one.data<bool>()[0] = true;
      // [Sq, Sk] as a constant when the scores' shape is static (the mask's
      // shape is then known to every pass after), else read at run time.
      Value* dims = known ? b.Const(Tensor::FromVector<int64_t>({st.shape()[r - 2].value(), st.shape()[r - 1].value()},
                                                                {2}),
                                    "causal_dims")
                          : b.Op("Shape", {s}, "start", Attribute::Int(-2), "causal");
      Value* ones = b.Op("ConstantOfShape", {dims}, "value", Attribute::TensorValue(one), "causal");
      keep = b.Op("Trilu", {ones}, "upper", Attribute::Int(0), "causal");
    }
    s = b.Op("Where", {keep, s, b.Scalar(-std::numeric_limits<double>::infinity(), q)}, "scores");
  }
  Value* p = b.Op("Softmax", {s}, "axis", Attribute::Int(-1), "probs");
  Value* y = b.Op("MatMul", {p, v}, "attention");
  Replace(n, y);
  return true;
}

const std::vector<CompositeExpander>& CompositeExpanders() {
  static const std::vector<CompositeExpander> expanders = {
      {"gelu-expanded", "Gelu", ExpandGelu},
      {"attention-expanded", "Attention", ExpandAttention},
  };
  return expanders;
}

}  // namespace kiln::patterns
