//===- rewrite_util.cc - Helpers for matching and rewriting subgraphs -----===//
//
// Constants are read through EvaluateConstant so that a pattern sees a value
// such as Pow(32, 0.5) or Cast(Not(Trilu(c))) as the constant it is, whether
// or not fold-constants ran first. Rewrites keep the names of the top-level
// graph's outputs, which callers of a model refer to.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/patterns/rewrite_util.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/rewrite_helpers.h"

namespace kiln::patterns {

namespace {

bool IsNondeterministic(const Node& n) {
  const std::string& op = n.op();
  return op.rfind("Random", 0) == 0 || op == "Bernoulli" || op == "Multinomial" || op == "Dropout";
}

int64_t StaticElements(const Value* v) {
  if (!v->type().is_tensor()) return -1;
  return v->type().shape().NumElements();
}

}  // namespace

std::optional<Tensor> EvaluateConstant(const Value* v, int max_depth, int64_t max_elements) {
  if (!v) return std::nullopt;
  if (const Tensor* t = ConstantData(v)) {
    if (t->numel() > max_elements) return std::nullopt;
    return *t;
  }
  Node* p = v->producer();
  if (!p || max_depth <= 0 || HasSubgraphs(p) || IsNondeterministic(*p)) return std::nullopt;
  int64_t n = StaticElements(v);
  if (n > max_elements) return std::nullopt;
  const OpDef* def = OpRegistry::Global().Find(*p);
  if (!def || !def->kernel) return std::nullopt;
  std::vector<Tensor> held(p->num_inputs());
  std::vector<const Tensor*> ptrs(p->num_inputs(), nullptr);
  for (int i = 0; i < p->num_inputs(); ++i) {
    if (!p->input(i)) continue;
    auto t = EvaluateConstant(p->input(i), max_depth - 1, max_elements);
    if (!t) return std::nullopt;
    held[i] = *std::move(t);
    ptrs[i] = &held[i];
  }
  KernelContext ctx(*p, std::move(ptrs));
  if (!def->kernel(ctx).ok()) return std::nullopt;
  if (v->producer_index() >= static_cast<int>(ctx.outputs().size())) return std::nullopt;
  Tensor out = ctx.outputs()[v->producer_index()];
  if (!out.defined() || out.numel() > max_elements) return std::nullopt;
  return out;
}

std::optional<double> ScalarConstant(const Value* v) {
  auto t = EvaluateConstant(v, 6, 1);
  if (!t || t->numel() != 1 || !IsNumeric(t->dtype())) return std::nullopt;
  return t->GetDouble(0);
}

bool IsConstantFilledWith(const Value* v, double x) {
  auto t = EvaluateConstant(v);
  if (!t || !IsNumeric(t->dtype())) return false;
  for (int64_t i = 0; i < t->numel(); ++i)
    if (t->GetDouble(i) != x) return false;
  return true;
}

std::optional<std::vector<int64_t>> ConstantInts(const Value* v) {
  auto t = EvaluateConstant(v, 6, int64_t{1} << 16);
  if (!t || !IsInteger(t->dtype())) return std::nullopt;
  std::vector<int64_t> out(t->numel());
  for (int64_t i = 0; i < t->numel(); ++i) out[i] = t->GetInt(i);
  return out;
}

Node* ProducerOf(const Value* v, absl::string_view op) {
  if (!v || !v->producer()) return nullptr;
  Node* p = v->producer();
  return p->domain().empty() && p->op() == op ? p : nullptr;
}

Node* SingleUser(const Value* v) {
  if (!v || v->uses().size() != 1) return nullptr;
  return v->uses()[0].user;
}

bool OnlyUsedBy(const Value* v, const std::vector<Node*>& nodes) {
  for (const Use& u : v->uses())
    if (!u.user || std::find(nodes.begin(), nodes.end(), u.user) == nodes.end()) return false;
  return true;
}

bool IsGraphOutput(const Value* v) {
  for (const Use& u : v->uses())
    if (!u.user) return true;
  return false;
}

int KnownRank(const Value* v) {
  if (!v || !v->type().is_tensor() || !v->type().shape().ranked()) return -1;
  return v->type().shape().rank();
}

DType KnownDType(const Value* v) {
  if (!v || !v->type().is_tensor()) return DType::kUndefined;
  return v->type().dtype();
}

bool ProvablySameShape(const Shape& a, const Shape& b) {
  if (!a.ranked() || !b.ranked() || a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i) {
    const Dim& x = a[i];
    const Dim& y = b[i];
    if (x.is_static() && y.is_static() && x.value() == y.value()) continue;
    if (x.is_symbolic() && y.is_symbolic() && x.symbol() == y.symbol()) continue;
    return false;
  }
  return true;
}

bool BroadcastsInto(const Dims& c, const Shape& x) {
  if (!x.ranked() || static_cast<int>(c.size()) > x.rank()) return false;
  int off = x.rank() - static_cast<int>(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i] == 1) continue;
    const Dim& d = x[off + static_cast<int>(i)];
    if (!d.is_static() || d.value() != c[i]) return false;
  }
  return true;
}

bool NearlyEqual(double a, double b, DType dtype) {
  double tol = 1e-5;
  if (dtype == DType::kF16) tol = 2e-3;
  if (dtype == DType::kBF16) tol = 1e-2;
  if (a == b) return true;
  if (!std::isfinite(a) || !std::isfinite(b)) return false;
  return std::fabs(a - b) <= tol * std::max(std::fabs(a), std::fabs(b));
}

bool HasSubgraphs(const Node* n) {
  for (const auto& [name, a] : n->attrs())
    if (a.kind() == AttrKind::kGraph || a.kind() == AttrKind::kGraphs) return true;
  return false;
}

bool CanReplace(const Value* from, const Value* to) {
  if (from == to) return false;
  if (!to) return !from->has_uses();
  if (!IsRootGraphOutput(from)) return true;
  Node* p = to->producer();
  return p && to->owner() == from->owner() && p->num_outputs() == 1 && !HasSubgraphs(p) && !IsGraphOutput(to);
}

absl::InlinedVector<Value*, 2> ReplaceNode(Node* node, absl::Span<Value* const> with) {
  absl::InlinedVector<Value*, 2> result(with.begin(), with.end());
  result.resize(node->num_outputs(), nullptr);
  std::vector<std::pair<int, std::string>> renames;
  for (int i = 0; i < node->num_outputs(); ++i) {
    Value* from = node->output(i);
    Value* to = result[i];
    if (!to) continue;
    if (IsRootGraphOutput(from)) renames.emplace_back(i, from->name());
    from->ReplaceAllUsesWith(to);
  }
  EraseWithDeadInputs(node);
  std::vector<Value*> done;
  for (auto& [i, name] : renames) {
    Value* to = result[i];
    if (std::find(done.begin(), done.end(), to) != done.end()) continue;  // one name per value
    Value* renamed = RenameOutput(to->producer(), 0, name)->output(0);
    for (Value*& r : result)
      if (r == to) r = renamed;
    done.push_back(renamed);
  }
  return result;
}

namespace {

// A set of pointers that stays in place (a linear scan) while small, as
// nearly every node's operands are, and hashes once it grows.
template <typename T>
class SmallPtrSet {
 public:
  // Whether `p` was not in the set (and now is).
  bool Insert(const T* p) {
    if (!hashed_.empty()) return hashed_.insert(p).second;
    if (std::find(small_.begin(), small_.end(), p) != small_.end()) return false;
    if (small_.size() < kSmall) {
      small_.push_back(p);
      return true;
    }
    hashed_.insert(small_.begin(), small_.end());
    return hashed_.insert(p).second;
  }

 private:
  static constexpr size_t kSmall = 8;
  absl::InlinedVector<const T*, kSmall> small_;
  absl::flat_hash_set<const T*> hashed_;
};

}  // namespace

void EraseWithDeadInputs(Node* n) {
  // A node is queued once: when the last reader of its outputs is erased
  // (by the one node reading them last, which may read several of them).
  absl::InlinedVector<Node*, 4> work{n};
  while (!work.empty()) {
    Node* m = work.back();
    work.pop_back();
    absl::InlinedVector<Value*, 4> inputs;
    SmallPtrSet<Value> seen;
    for (Value* v : m->inputs())
      if (v && seen.Insert(v)) inputs.push_back(v);
    m->owner()->EraseNode(m);
    SmallPtrSet<Node> queued;
    for (Value* v : inputs) {
      if (v->has_uses()) continue;
      if (v->is_constant()) {
        v->owner()->EraseValue(v);
        continue;
      }
      Node* p = v->producer();
      if (!p || HasSubgraphs(p)) continue;
      bool dead = true;
      for (Value* o : p->outputs())
        if (o->has_uses()) dead = false;
      if (dead && queued.Insert(p)) work.push_back(p);
    }
  }
}

Node* RenameOutput(Node* n, int index, const std::string& name) {
  Graph& g = *n->owner();
  std::vector<std::string> names;
  for (int i = 0; i < n->num_outputs(); ++i) names.push_back(i == index ? name : g.UniqueName(n->output(i)->name()));
  Node* m = g.AddNode(n->op(), n->inputs(), names, n->domain(), n);
  for (const auto& [attr_name, a] : n->attrs()) m->SetAttr(attr_name, a.Clone(&g));
  m->set_name(n->name());
  for (int i = 0; i < n->num_outputs(); ++i) {
    m->output(i)->set_type(n->output(i)->type());
    n->output(i)->ReplaceAllUsesWith(m->output(i));
  }
  g.EraseNode(n);
  return m;
}

void InferNodeTypes(Node* n) {
  const OpDef* def = OpRegistry::Global().Find(*n);
  if (!def) return;
  auto inferred = InferNode(*def, *n);
  if (!inferred.ok()) return;
  for (int i = 0; i < n->num_outputs() && i < static_cast<int>(inferred->size()); ++i) {
    const Type& t = (*inferred)[i];
    if (t.is_none()) continue;
    auto merged = MergeTypes(n->output(i)->type(), t);
    n->output(i)->set_type(merged.ok() ? *merged : t);
  }
}

Value* ScalarConst(Graph& g, DType dtype, double x, absl::string_view hint) {
  return g.AddConstant(g.UniqueName(hint), CastTensor(Tensor::Scalar<double>(x), dtype));
}

}  // namespace kiln::patterns
