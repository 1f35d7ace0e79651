//===- algebraic.cc - Algebraic simplification patterns -------------------===//
//
// Every pattern here is exact: the rewritten graph computes the same values,
// bit for bit, as the original (x + 0 -> x only differs for x = -0.0, whose
// sum with +0.0 is +0.0). A pattern that needs a fact it cannot prove from
// constants and static shapes (a dim that may be 1, a shape input that is not
// constant) leaves the graph alone. Patterns read only constants that are in
// the graph already; folding is fold-constants' work.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/patterns/algebraic.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "graph/ir/tensor.h"
#include "graph/passes/patterns/rewrite_util.h"
#include "graph/passes/rewrite_helpers.h"

namespace kiln::patterns {
namespace {

// Values at or beyond this bound mean "to the end" in Slice for any extent.
constexpr int64_t kHugeIndex = int64_t{1} << 62;

RewriteResult ReplaceWith(Node* n, Value* x) {
  if (!x || n->num_outputs() != 1 || !CanReplace(n->output(0), x)) return RewriteResult::kNoMatch;
  // Not a plain merge: a constant for a node's output (folding may now
  // reach its readers), another type (inference may refine them), or an
  // interface output renamed onto another node.
  const Value* out = n->output(0);
  bool merge = !x->is_constant() && x->type() == out->type() && !IsRootGraphOutput(out);
  ReplaceNode(n, {x});
  return merge ? RewriteResult::kForwarded : RewriteResult::kErased;
}

// Erases `v` when nothing uses it any more (a constant, or the node making it).
void DropIfDead(Value* v) {
  if (!v || v->has_uses()) return;
  if (v->is_constant()) {
    v->owner()->EraseValue(v);
    return;
  }
  Node* p = v->producer();
  if (!p || HasSubgraphs(p)) return;
  for (Value* o : p->outputs())
    if (o->has_uses()) return;
  EraseWithDeadInputs(p);
}

// The integer data of a constant input (not evaluated).
std::optional<std::vector<int64_t>> Ints(const Value* v) {
  const Tensor* t = ConstantData(v);
  if (!t || !IsInteger(t->dtype())) return std::nullopt;
  std::vector<int64_t> out(t->numel());
  for (int64_t i = 0; i < t->numel(); ++i) out[i] = t->GetInt(i);
  return out;
}

// Axes normalized into [0, rank), sorted; nullopt when out of range or
// repeated.
std::optional<std::vector<int64_t>> NormalizedAxes(std::vector<int64_t> axes, int rank) {
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return std::nullopt;
  return axes;
}

const Shape* RankedShape(const Value* v) {
  if (!v || !v->type().is_tensor() || !v->type().shape().ranked()) return nullptr;
  return &v->type().shape();
}

// x op c -> x where c is a constant of the same dtype filled with `neutral`
// whose broadcast leaves x's shape as it is.
RewriteResult RemoveNeutralOperand(Node* n, int const_index, double neutral) {
  if (n->num_inputs() != 2) return RewriteResult::kNoMatch;
  Value* c = n->input(const_index);
  Value* x = n->input(1 - const_index);
  const Tensor* t = ConstantData(c);
  if (!x || !t || !IsNumeric(t->dtype()) || KnownDType(x) != t->dtype()) return RewriteResult::kNoMatch;
  if (!BroadcastsInto(t->dims(), x->type().shape())) return RewriteResult::kNoMatch;
  for (int64_t i = 0; i < t->numel(); ++i)
    if (t->GetDouble(i) != neutral) return RewriteResult::kNoMatch;
  return ReplaceWith(n, x);
}

// The permutation of a Transpose (its default reverses the axes).
std::optional<std::vector<int64_t>> PermOf(const Node* t) {
  int r = KnownRank(t->input(0));
  std::vector<int64_t> perm;
  if (const Attribute* a = t->attr("perm")) {
    if (a->kind() != AttrKind::kInts) return std::nullopt;
    perm = a->ints();
  } else {
    if (r < 0) return std::nullopt;
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  }
  if (r >= 0 && static_cast<int>(perm.size()) != r) return std::nullopt;
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[p]) return std::nullopt;
    seen[p] = true;
  }
  return perm;
}

bool IsIdentityPerm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

std::optional<DType> CastTarget(const Node* n) { return DTypeFromOnnx(n->GetInt("to", 0)); }

int MantissaBits(DType t) {
  switch (t) {
    case DType::kF16: return 11;
    case DType::kBF16: return 8;
    case DType::kF32: return 24;
    case DType::kF64: return 53;
    default: return 0;
  }
}

}  // namespace

bool IsLosslessCast(DType from, DType to) {
  if (from == to) return true;
  if (!IsNumeric(from) || !IsNumeric(to)) return false;
  if (from == DType::kBool) return true;
  if (to == DType::kBool) return false;
  if (IsFloat(from)) {
    if (!IsFloat(to)) return false;
    if (from == DType::kF16 || from == DType::kBF16) return to == DType::kF32 || to == DType::kF64;
    return from == DType::kF32 && to == DType::kF64;
  }
  // Integers.
  int bits = static_cast<int>(DTypeSize(from)) * 8;
  bool is_signed = IsSigned(from);
  if (IsFloat(to)) return (is_signed ? bits - 1 : bits) <= MantissaBits(to);
  int to_bits = static_cast<int>(DTypeSize(to)) * 8;
  if (is_signed) return IsSigned(to) && to_bits > bits;
  return to_bits > bits;
}

RewriteResult RemoveIdentity(Node* n) { return ReplaceWith(n, n->input(0)); }

RewriteResult RemoveInferenceDropout(Node* n) {
  Value* x = n->input(0);
  if (!x) return RewriteResult::kNoMatch;
  if (Value* training = n->input(2)) {
    const Tensor* t = ConstantData(training);
    if (!t || t->numel() != 1 || t->GetDouble(0) != 0) return RewriteResult::kNoMatch;
  }
  if (!CanReplace(n->output(0), x)) return RewriteResult::kNoMatch;
  std::vector<Value*> with = {x};
  if (n->num_outputs() > 1 && n->output(1)->has_uses()) {
    Value* mask = n->output(1);
    const Type& xt = x->type();
    if (IsGraphOutput(mask) || !xt.is_tensor() || !xt.shape().is_static()) return RewriteResult::kNoMatch;
    Graph& g = *n->owner();
    Tensor ones(DType::kBool, xt.shape().StaticDims());
    std::fill_n(ones.data<bool>(), ones.numel(), true);
    with.push_back(g.AddConstant(g.UniqueName("dropout_mask"), ones));
  }
  ReplaceNode(n, with);
  return RewriteResult::kErased;
}

RewriteResult RemoveMulByOne(Node* n) {
  RewriteResult r = RemoveNeutralOperand(n, 1, 1.0);
  return r != RewriteResult::kNoMatch ? r : RemoveNeutralOperand(n, 0, 1.0);
}

RewriteResult RemoveAddZero(Node* n) {
  RewriteResult r = RemoveNeutralOperand(n, 1, 0.0);
  return r != RewriteResult::kNoMatch ? r : RemoveNeutralOperand(n, 0, 0.0);
}

RewriteResult RemoveSubZero(Node* n) { return RemoveNeutralOperand(n, 1, 0.0); }

RewriteResult RemoveDivByOne(Node* n) { return RemoveNeutralOperand(n, 1, 1.0); }

RewriteResult ComposeTransposes(Node* n) {
  Value* in = n->input(0);
  Node* inner = ProducerOf(in, "Transpose");
  if (!inner || !inner->input(0)) return RewriteResult::kNoMatch;
  auto p1 = PermOf(inner);
  auto p2 = PermOf(n);
  if (!p1 || !p2 || p1->size() != p2->size()) return RewriteResult::kNoMatch;
  // out[i] = mid[p2[i]] = x[p1[p2[i]]].
  std::vector<int64_t> perm(p2->size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = (*p1)[(*p2)[i]];
  Value* x = inner->input(0);
  if (IsIdentityPerm(perm)) return ReplaceWith(n, x);
  n->SetInput(0, x);
  n->SetAttr("perm", Attribute::Ints(perm));
  DropIfDead(in);
  return RewriteResult::kRewritten;
}

RewriteResult RemoveIdentityTranspose(Node* n) {
  auto p = PermOf(n);
  if (!p || !IsIdentityPerm(*p)) return RewriteResult::kNoMatch;
  return ReplaceWith(n, n->input(0));
}

RewriteResult CollapseReshapes(Node* n) {
  Value* in = n->input(0);
  Node* inner = in ? in->producer() : nullptr;
  if (!inner || !inner->domain().empty() || !inner->input(0) || inner->num_outputs() != 1) return RewriteResult::kNoMatch;
  const std::string& op = inner->op();
  if (op != "Reshape" && op != "Flatten" && op != "Squeeze" && op != "Unsqueeze") return RewriteResult::kNoMatch;
  // The target shape must not depend on the intermediate's dims (no 0 that
  // copies a dim of it); -1 only depends on the element count, which every
  // op of the chain keeps.
  bool allowzero = n->GetInt("allowzero", 0) != 0;
  auto s = Ints(n->input(1));
  Value* new_shape = nullptr;
  if (!s || (!allowzero && std::find(s->begin(), s->end(), 0) != s->end())) {
    const Type& out = n->output(0)->type();
    if (!out.is_tensor() || !out.shape().is_static()) return RewriteResult::kNoMatch;
    std::vector<int64_t> dims = out.shape().StaticDims();
    if (std::find(dims.begin(), dims.end(), 0) != dims.end()) return RewriteResult::kNoMatch;
    Graph& g = *n->owner();
    new_shape = g.AddConstant(g.UniqueName("shape"),
                              Tensor::FromVector<int64_t>(dims, {static_cast<int64_t>(dims.size())}));
  }
  n->SetInput(0, inner->input(0));
  if (new_shape) {
    Value* old = n->input(1);
    n->SetInput(1, new_shape);
    DropIfDead(old);
  }
  DropIfDead(in);
  return RewriteResult::kRewritten;
}

RewriteResult RemoveSameShapeReshape(Node* n) {
  Value* x = n->input(0);
  const Shape* xs = RankedShape(x);
  if (!xs) return RewriteResult::kNoMatch;
  if (n->op() == "Flatten") {
    int r = xs->rank();
    int64_t axis = n->GetInt("axis", 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r || r != 2) return RewriteResult::kNoMatch;
    if (axis == 1) return ReplaceWith(n, x);
    // axis 0 gives [1, d0*d1], axis 2 gives [d0*d1, 1].
    const Dim& unit = axis == 0 ? (*xs)[0] : (*xs)[1];
    if (unit.is_static() && unit.value() == 1) return ReplaceWith(n, x);
    return RewriteResult::kNoMatch;
  }
  bool allowzero = n->GetInt("allowzero", 0) != 0;
  if (auto s = Ints(n->input(1))) {
    if (static_cast<int>(s->size()) != xs->rank()) return RewriteResult::kNoMatch;
    int inferred = 0;
    for (int i = 0; i < xs->rank(); ++i) {
      int64_t v = (*s)[i];
      const Dim& d = (*xs)[i];
      if (v == 0 && !allowzero) continue;
      if (v == -1) {
        ++inferred;
        continue;
      }
      if (d.is_static() && d.value() == v) continue;
      return RewriteResult::kNoMatch;
    }
    // With every other dim kept, a single -1 is the remaining dim itself.
    if (inferred > 1) return RewriteResult::kNoMatch;
    return ReplaceWith(n, x);
  }
  const Type& out = n->output(0)->type();
  if (xs->is_static() && out.is_tensor() && out.shape().is_static() && out.shape() == *xs) return ReplaceWith(n, x);
  return RewriteResult::kNoMatch;
}

// A Transpose that moves only axes of extent 1 keeps the elements' order:
// a Reshape (a view on every target), as a decode step's head split of one
// token ([1, 1, H, D] -> [1, H, 1, D]) is.
RewriteResult UnitAxesTransposeToReshape(Node* n) {
  auto p = PermOf(n);
  const Shape* xs = RankedShape(n->input(0));
  const Type& out = n->output(0)->type();
  if (!p || !xs || IsIdentityPerm(*p) || !out.is_tensor() || !out.shape().is_static() || !xs->is_static())
    return RewriteResult::kNoMatch;
  int64_t last = -1;
  for (int64_t axis : *p) {
    if ((*xs)[static_cast<int>(axis)].value() == 1) continue;
    if (axis < last) return RewriteResult::kNoMatch;
    last = axis;
  }
  Graph& g = *n->owner();
  const std::vector<int64_t> dims = out.shape().StaticDims();
  Value* shape = g.AddConstant(g.UniqueName("shape"),
                               Tensor::FromVector<int64_t>(dims, {static_cast<int64_t>(dims.size())}));
  Node* r = g.AddNode("Reshape", {n->input(0), shape}, 1);
  r->set_name(n->name());
  r->output(0)->set_type(out);
  g.MoveNode(r, n);
  if (!CanReplace(n->output(0), r->output(0))) {
    g.EraseNode(r);
    DropIfDead(shape);
    return RewriteResult::kNoMatch;
  }
  ReplaceNode(n, {r->output(0)});
  // The Reshape is before the node the sweep stands on: it meets the views
  // it reads now, or a later sweep would find more to do.
  if (CollapseReshapes(r) != RewriteResult::kErased) RemoveSameShapeReshape(r);
  return RewriteResult::kErased;
}


RewriteResult RemoveSameDTypeCast(Node* n) {
  auto to = CastTarget(n);
  DType from = KnownDType(n->input(0));
  if (!to || from == DType::kUndefined || from != *to) return RewriteResult::kNoMatch;
  return ReplaceWith(n, n->input(0));
}

RewriteResult RemoveRoundTripCast(Node* n) {
  Node* inner = ProducerOf(n->input(0), "Cast");
  if (!inner || !inner->input(0)) return RewriteResult::kNoMatch;
  Value* x = inner->input(0);
  auto mid = CastTarget(inner);
  auto to = CastTarget(n);
  DType from = KnownDType(x);
  if (!mid || !to || from == DType::kUndefined || *to != from || !IsLosslessCast(from, *mid))
    return RewriteResult::kNoMatch;
  return ReplaceWith(n, x);
}

RewriteResult CollapseCasts(Node* n) {
  Value* in = n->input(0);
  Node* inner = ProducerOf(in, "Cast");
  if (!inner || !inner->input(0)) return RewriteResult::kNoMatch;
  Value* x = inner->input(0);
  auto mid = CastTarget(inner);
  auto to = CastTarget(n);
  DType from = KnownDType(x);
  // Converting the same value from the wider type or from the original gives
  // the same result, except for strings (which print the wider type's digits).
  if (!mid || !to || from == DType::kUndefined || *to == from || *to == DType::kString ||
      !IsLosslessCast(from, *mid))
    return RewriteResult::kNoMatch;
  n->SetInput(0, x);
  DropIfDead(in);
  return RewriteResult::kRewritten;
}

RewriteResult RemoveSqueezeOfUnsqueeze(Node* n) {
  Node* inner = ProducerOf(n->input(0), "Unsqueeze");
  if (!inner || !inner->input(0)) return RewriteResult::kNoMatch;
  Value* x = inner->input(0);
  int r = KnownRank(x);
  auto au = Ints(inner->input(1));
  if (r < 0 || !au) return RewriteResult::kNoMatch;
  int out_rank = r + static_cast<int>(au->size());
  auto nu = NormalizedAxes(*au, out_rank);
  if (!nu) return RewriteResult::kNoMatch;
  if (n->input(1)) {
    auto as = Ints(n->input(1));
    if (!as) return RewriteResult::kNoMatch;
    auto ns = NormalizedAxes(*as, out_rank);
    if (!ns || *ns != *nu) return RewriteResult::kNoMatch;
  } else {
    // Squeeze without axes removes every unit dim: only the inserted ones
    // when x has no dim that may be 1.
    for (const Dim& d : x->type().shape().dims())
      if (!d.is_static() || d.value() == 1) return RewriteResult::kNoMatch;
  }
  return ReplaceWith(n, x);
}

RewriteResult RemoveUnsqueezeOfSqueeze(Node* n) {
  Node* inner = ProducerOf(n->input(0), "Squeeze");
  if (!inner || !inner->input(0) || !inner->input(1)) return RewriteResult::kNoMatch;
  Value* x = inner->input(0);
  const Shape* xs = RankedShape(x);
  auto as = Ints(inner->input(1));
  auto au = Ints(n->input(1));
  if (!xs || !as || !au) return RewriteResult::kNoMatch;
  auto ns = NormalizedAxes(*as, xs->rank());
  auto nu = NormalizedAxes(*au, xs->rank());
  if (!ns || !nu || *ns != *nu) return RewriteResult::kNoMatch;
  for (int64_t a : *ns) {
    const Dim& d = (*xs)[static_cast<int>(a)];
    if (!d.is_static() || d.value() != 1) return RewriteResult::kNoMatch;
  }
  return ReplaceWith(n, x);
}

RewriteResult RemoveSameShapeExpand(Node* n) {
  Value* x = n->input(0);
  const Shape* xs = RankedShape(x);
  auto s = Ints(n->input(1));
  if (!xs || !s) return RewriteResult::kNoMatch;
  if (!BroadcastsInto(*s, *xs)) return RewriteResult::kNoMatch;
  return ReplaceWith(n, x);
}

RewriteResult RemoveSingleConcat(Node* n) {
  if (n->num_inputs() != 1) return RewriteResult::kNoMatch;
  return ReplaceWith(n, n->input(0));
}

RewriteResult RemoveFullSlice(Node* n) {
  Value* x = n->input(0);
  const Shape* xs = RankedShape(x);
  auto starts = Ints(n->input(1));
  auto ends = Ints(n->input(2));
  if (!xs || !starts || !ends || starts->size() != ends->size()) return RewriteResult::kNoMatch;
  size_t k = starts->size();
  std::vector<int64_t> axes(k), steps(k, 1);
  std::iota(axes.begin(), axes.end(), 0);
  if (n->input(3)) {
    auto a = Ints(n->input(3));
    if (!a || a->size() != k) return RewriteResult::kNoMatch;
    axes = *a;
  }
  if (n->input(4)) {
    auto s = Ints(n->input(4));
    if (!s || s->size() != k) return RewriteResult::kNoMatch;
    steps = *s;
  }
  if (!NormalizedAxes(axes, xs->rank())) return RewriteResult::kNoMatch;
  for (size_t i = 0; i < k; ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + xs->rank() : axes[i];
    const Dim& d = (*xs)[static_cast<int>(axis)];
    int64_t start = (*starts)[i], end = (*ends)[i];
    if (steps[i] != 1) return RewriteResult::kNoMatch;
    bool from_start = start == 0 || start <= -kHugeIndex || (start < 0 && d.is_static() && start <= -d.value());
    bool to_end = end >= kHugeIndex || (d.is_static() && end >= d.value());
    if (!from_start || !to_end) return RewriteResult::kNoMatch;
  }
  return ReplaceWith(n, x);
}

RewriteResult RemoveZeroPad(Node* n) {
  auto pads = Ints(n->input(1));
  if (!pads || n->num_inputs() > 3) return RewriteResult::kNoMatch;
  for (int64_t p : *pads)
    if (p != 0) return RewriteResult::kNoMatch;
  return ReplaceWith(n, n->input(0));
}

RewriteResult SwapTransposedMatMul(Node* n) {
  auto perm = PermOf(n);
  Node* mm = ProducerOf(n->input(0), "MatMul");
  if (!perm || *perm != std::vector<int64_t>{1, 0} || !mm || mm->output(0)->uses().size() != 1)
    return RewriteResult::kNoMatch;
  Graph& g = *n->owner();
  if (mm->owner() != &g) return RewriteResult::kNoMatch;
  Value* a = mm->input(0);
  Value* b = mm->input(1);
  const Shape* sa = RankedShape(a);
  const Shape* sb = RankedShape(b);
  if (!sa || !sb || sa->rank() != 2 || sb->rank() != 2 || !n->output(0)->type().is_tensor())
    return RewriteResult::kNoMatch;
  // x^T: the source of a transposing Transpose, else a new Transpose.
  auto transposed = [&](Value* x) {
    if (Node* t = ProducerOf(x, "Transpose"); t && PermOf(t) == std::vector<int64_t>{1, 0}) return t->input(0);
    Node* t = g.AddNode("Transpose", {x}, 1);
    t->SetAttr("perm", Attribute::Ints({1, 0}));
    const Shape& s = x->type().shape();
    t->output(0)->set_type(Type::Tensor(x->type().dtype(), Shape({s[1], s[0]})));
    g.MoveNode(t, n);
    return t->output(0);
  };
  Value* bt = transposed(b);
  Value* at = transposed(a);
  Node* swapped = g.AddNode("MatMul", {bt, at}, 1);
  swapped->set_name(mm->name());
  swapped->output(0)->set_type(n->output(0)->type());
  g.MoveNode(swapped, n);
  if (!CanReplace(n->output(0), swapped->output(0))) {
    g.EraseNode(swapped);
    return RewriteResult::kNoMatch;
  }
  ReplaceNode(n, {swapped->output(0)});
  return RewriteResult::kErased;
}

RewriteResult RemoveSameSizeResize(Node* n) {
  Value* x = n->input(0);
  const Shape* xs = RankedShape(x);
  const Shape* ys = RankedShape(n->output(0));
  if (!xs || !ys || !xs->is_static() || !(*xs == *ys)) return RewriteResult::kNoMatch;
  if (n->GetString("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize")
    return RewriteResult::kNoMatch;
  return ReplaceWith(n, x);
}

const std::vector<AlgebraicPattern>& AlgebraicPatterns() {
  static const std::vector<AlgebraicPattern> patterns = {
      {"identity-removed", "Identity", RemoveIdentity},
      {"dropout-removed", "Dropout", RemoveInferenceDropout, /*reads_use_counts=*/true},
      {"mul-by-one-removed", "Mul", RemoveMulByOne},
      {"add-zero-removed", "Add", RemoveAddZero},
      {"sub-zero-removed", "Sub", RemoveSubZero},
      {"div-by-one-removed", "Div", RemoveDivByOne},
      {"transposes-composed", "Transpose", ComposeTransposes},
      {"identity-transpose-removed", "Transpose", RemoveIdentityTranspose},
      {"unit-axes-transpose-to-reshape", "Transpose", UnitAxesTransposeToReshape},
      {"transposed-matmul-swapped", "Transpose", SwapTransposedMatMul, /*reads_use_counts=*/true},
      {"reshapes-collapsed", "Reshape", CollapseReshapes},
      {"same-shape-reshape-removed", "Reshape", RemoveSameShapeReshape},
      {"same-shape-flatten-removed", "Flatten", RemoveSameShapeReshape},
      {"same-dtype-cast-removed", "Cast", RemoveSameDTypeCast},
      {"round-trip-cast-removed", "Cast", RemoveRoundTripCast},
      {"casts-collapsed", "Cast", CollapseCasts},
      {"unsqueeze-squeeze-removed", "Squeeze", RemoveSqueezeOfUnsqueeze},
      {"squeeze-unsqueeze-removed", "Unsqueeze", RemoveUnsqueezeOfSqueeze},
      {"same-shape-expand-removed", "Expand", RemoveSameShapeExpand},
      {"single-input-concat-removed", "Concat", RemoveSingleConcat},
      {"full-slice-removed", "Slice", RemoveFullSlice},
      {"zero-pad-removed", "Pad", RemoveZeroPad},
      {"same-size-resize-removed", "Resize", RemoveSameSizeResize},
  };
  return patterns;
}

}  // namespace kiln::patterns
