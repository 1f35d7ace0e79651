//===- composite_recognizers.cc - Find composite ops in decomposed graphs --===//
//
// Matching walks backwards from the root through producers. A value inside
// the subgraph must be used only by nodes of the subgraph (so erasing the
// subgraph loses nothing); the values the composite reads (x, scale, Q, ...)
// must come from outside it. Constants are read with EvaluateConstant, so
// Pow(32, 0.5) or Cast(Not(Trilu(c))) count as the constants they are.
//
// Products (GELU) are matched as a whole: a tree of single-use Mul nodes,
// Div by constants and Pow by 2 or 3 is flattened into its non-constant
// factors and one constant coefficient, so every operand order and
// association of the same formula matches.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/patterns/composite_recognizers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>

#include "graph/passes/patterns/rewrite_util.h"

namespace kiln::patterns {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool IsOp(const Node* n, absl::string_view op) { return n && n->domain().empty() && n->op() == op; }

Node* ProducerNode(const Value* v) { return v ? v->producer() : nullptr; }

bool Contains(const std::vector<Node*>& nodes, const Node* n) {
  return std::find(nodes.begin(), nodes.end(), n) != nodes.end();
}

// Every node of the subgraph but the root feeds only nodes of the subgraph.
bool Contained(const std::vector<Node*>& nodes, const Node* root) {
  for (Node* n : nodes) {
    if (n == root) continue;
    for (Value* o : n->outputs())
      if (!OnlyUsedBy(o, nodes)) return false;
  }
  return true;
}

// `v` is not computed inside the subgraph.
bool External(const Value* v, const std::vector<Node*>& nodes) { return !v || !Contains(nodes, v->producer()); }

struct Scalar {
  double value;
  int rank;
};

// A one-element constant (of `dtype` unless that is undefined).
std::optional<Scalar> ScalarOperand(const Value* v, DType dtype = DType::kUndefined) {
  auto t = EvaluateConstant(v, 6, 1);
  if (!t || t->numel() != 1 || !IsNumeric(t->dtype())) return std::nullopt;
  if (dtype != DType::kUndefined && t->dtype() != dtype) return std::nullopt;
  return Scalar{t->GetDouble(0), t->rank()};
}

// Axes normalized into [0, rank), sorted, without repeats.
std::optional<std::vector<int64_t>> Normalized(std::vector<int64_t> axes, int rank) {
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return std::nullopt;
  return axes;
}

// Axes of a Reduce* node with the `axes` attribute and keepdims = 1.
std::optional<std::vector<int64_t>> AttrReduceAxes(const Node* n, int rank) {
  if (n->num_inputs() != 1 || n->GetInt("keepdims", 1) != 1) return std::nullopt;
  std::vector<int64_t> axes = n->GetInts("axes", {});
  if (!n->has_attr("axes"))
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  return Normalized(axes, rank);
}

// The one axis of a ReduceSum (axes as input) with keepdims = 1.
std::optional<int64_t> ReduceSumAxis(const Node* n, int rank) {
  if (n->GetInt("keepdims", 1) != 1) return std::nullopt;
  std::vector<int64_t> axes;
  if (n->input(1)) {
    auto a = ConstantInts(n->input(1));
    if (!a) return std::nullopt;
    axes = *a;
  }
  if (axes.empty()) {
    if (n->GetInt("noop_with_empty_axes", 0) != 0 || rank != 1) return std::nullopt;
    axes = {0};
  }
  auto norm = Normalized(axes, rank);
  if (!norm || norm->size() != 1) return std::nullopt;
  return (*norm)[0];
}

// Gives the composite the root's place: its node name, output type and
// output name; the subgraph is erased.
Node* Finish(Node* root, Node* composite) {
  composite->set_name(root->name());
  composite->output(0)->set_type(root->output(0)->type());
  InferNodeTypes(composite);
  std::string name = root->output(0)->name();
  Value* out = ReplaceNode(root, {composite->output(0)})[0];
  Node* n = out->producer();
  if (out->name() != name && !n->owner()->NameInUse(name)) n = RenameOutput(n, 0, name);
  return n;
}

//===--- LayerNorm --------------------------------------------------------===//

struct LayerNormMatch {
  Value* x = nullptr;
  Value* scale = nullptr;
  Value* bias = nullptr;
  int64_t axis = 0;
  double eps = 0;
  std::vector<Node*> nodes;
};

// Div(d, Sqrt(Add(ReduceMean(d^2), eps))) with d = Sub(x, ReduceMean(x)),
// both means over the same trailing axes.
bool MatchLayerNormCore(Node* div, LayerNormMatch* m) {
  if (!IsOp(div, "Div")) return false;
  Value* d = div->input(0);
  Node* sub = ProducerOf(d, "Sub");
  Node* sqrt = ProducerOf(div->input(1), "Sqrt");
  if (!sub || !sqrt) return false;
  Value* x = sub->input(0);
  Node* mean = ProducerOf(sub->input(1), "ReduceMean");
  Node* add = ProducerOf(sqrt->input(0), "Add");
  if (!x || !mean || !add || mean->input(0) != x) return false;
  int r = KnownRank(x);
  DType dt = KnownDType(x);
  if (r < 1 || !IsFloat(dt)) return false;
  Node* var = nullptr;
  std::optional<Scalar> eps;
  for (int i = 0; i < 2 && !var; ++i) {
    Node* v = ProducerOf(add->input(i), "ReduceMean");
    if (!v) continue;
    eps = ScalarOperand(add->input(1 - i), dt);
    if (eps && eps->rank <= r && eps->value >= 0) var = v;
  }
  if (!var) return false;
  Node* sq = ProducerNode(var->input(0));
  bool squares = false;
  if (IsOp(sq, "Pow") && sq->input(0) == d) {
    auto e = ScalarOperand(sq->input(1));
    squares = e && e->value == 2 && e->rank <= r;
  } else if (IsOp(sq, "Mul")) {
    squares = sq->input(0) == d && sq->input(1) == d;
  }
  if (!squares) return false;
  auto am = AttrReduceAxes(mean, r);
  auto av = AttrReduceAxes(var, r);
  if (!am || !av || *am != *av || am->empty()) return false;
  int64_t k = static_cast<int64_t>(am->size());
  for (int64_t i = 0; i < k; ++i)
    if ((*am)[i] != r - k + i) return false;
  m->x = x;
  m->axis = r - k;
  m->eps = eps->value;
  m->nodes = {div, sqrt, add, var, sq, sub, mean};
  return true;
}

// Mul(core, scale) (either order) or the core alone.
bool MatchScaledCore(Node* n, LayerNormMatch* m) {
  if (MatchLayerNormCore(n, m)) return true;
  if (!IsOp(n, "Mul")) return false;
  for (int i = 0; i < 2; ++i) {
    LayerNormMatch t;
    Node* c = ProducerNode(n->input(i));
    if (c && MatchLayerNormCore(c, &t)) {
      t.scale = n->input(1 - i);
      t.nodes.push_back(n);
      *m = std::move(t);
      return true;
    }
  }
  return false;
}

// A scale or bias that broadcasts the way Mul/Add did: the dtype of x, at
// most as many dims as are normalized, each 1 or x's dim.
bool ParamFits(const Value* p, const Value* x, int64_t axis) {
  if (KnownDType(p) != KnownDType(x) || KnownRank(p) < 0) return false;
  const Shape& ps = p->type().shape();
  const Shape& xs = x->type().shape();
  if (ps.rank() > xs.rank() - axis) return false;
  for (int i = 0; i < ps.rank(); ++i) {
    const Dim& pd = ps[i];
    const Dim& xd = xs[xs.rank() - ps.rank() + i];
    if (pd.is_static() && pd.value() == 1) continue;
    if (pd.is_static() && xd.is_static() && pd.value() == xd.value()) continue;
    if (pd.is_symbolic() && xd.is_symbolic() && pd.symbol() == xd.symbol()) continue;
    return false;
  }
  return true;
}

// The normalized dims of x (from `axis` on) when they are all static.
std::optional<Dims> NormalizedDims(const Value* x, int64_t axis) {
  const Shape& xs = x->type().shape();
  Dims dims;
  for (int i = static_cast<int>(axis); i < xs.rank(); ++i) {
    if (!xs[i].is_static()) return std::nullopt;
    dims.push_back(xs[i].value());
  }
  return dims;
}

// LayerNormalization's Scale and B have the normalized shape: a parameter
// that has it is used as it is, a smaller constant is broadcast to it.
enum class ParamUse { kNo, kAsIs, kBroadcast };

ParamUse FitParam(const Value* p, const Value* x, int64_t axis) {
  if (!ParamFits(p, x, axis)) return ParamUse::kNo;
  const Shape& xs = x->type().shape();
  if (ProvablySameShape(p->type().shape(),
                        Shape(DimVector(xs.dims().begin() + axis, xs.dims().end()))))
    return ParamUse::kAsIs;
  if (ConstantData(p) && NormalizedDims(x, axis)) return ParamUse::kBroadcast;
  return ParamUse::kNo;
}

// `t` broadcast to `dims` (which it broadcasts into).
Tensor BroadcastTo(const Tensor& t, const Dims& dims) {
  std::vector<double> src(t.numel()), out(NumElements(dims));
  for (int64_t i = 0; i < t.numel(); ++i) src[i] = t.GetDouble(i);
  Dims strides(dims.size(), 0);
  int off = static_cast<int>(dims.size() - t.dims().size());
  for (int64_t i = t.rank() - 1, s = 1; i >= 0; --i) {
    strides[off + i] = t.dim(static_cast<int>(i)) == 1 ? 0 : s;
    s *= t.dim(static_cast<int>(i));
  }
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < dims.size(); ++d) o += idx[d] * strides[d];
    out[i] = src[o];
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0 && ++idx[d] == dims[d]; --d) idx[d] = 0;
  }
  return CastTensor(Tensor::FromVector<double>(out, dims), t.dtype());
}

std::optional<LayerNormMatch> MatchLayerNorm(Node* root) {
  LayerNormMatch m;
  if (!MatchScaledCore(root, &m)) {
    if (!IsOp(root, "Add")) return std::nullopt;
    bool found = false;
    for (int i = 0; i < 2 && !found; ++i) {
      LayerNormMatch t;
      Node* c = ProducerNode(root->input(i));
      if (c && MatchScaledCore(c, &t)) {
        t.bias = root->input(1 - i);
        t.nodes.push_back(root);
        m = std::move(t);
        found = true;
      }
    }
    if (!found) return std::nullopt;
  }
  for (Value* p : {m.scale, m.bias})
    if (p && (FitParam(p, m.x, m.axis) == ParamUse::kNo || !External(p, m.nodes))) return std::nullopt;
  // Without a scale, one of ones over the normalized dims is created.
  if (!m.scale && !NormalizedDims(m.x, m.axis)) return std::nullopt;
  if (!Contained(m.nodes, root)) return std::nullopt;
  return m;
}

//===--- GELU -------------------------------------------------------------===//

// A product flattened into its non-constant factors and a coefficient.
struct Product {
  std::vector<Value*> factors;
  double coef = 1;
  int const_rank = 0;  // the largest rank of a constant in it
  std::vector<Node*> nodes;
  bool ok = true;
};

void Flatten(Value* v, bool is_root, DType dt, Product& p, int depth = 0) {
  if (!v || depth > 12 || p.nodes.size() > 24) {
    p.ok = false;
    return;
  }
  Node* n = v->producer();
  bool open = n && n->domain().empty() && (is_root || SingleUser(v));
  if (open && n->op() == "Mul" && n->num_inputs() == 2) {
    p.nodes.push_back(n);
    Flatten(n->input(0), false, dt, p, depth + 1);
    Flatten(n->input(1), false, dt, p, depth + 1);
    return;
  }
  if (open && n->op() == "Div" && n->num_inputs() == 2) {
    auto c = ScalarOperand(n->input(1), dt);
    if (c && c->value != 0) {
      p.nodes.push_back(n);
      p.coef /= c->value;
      p.const_rank = std::max(p.const_rank, c->rank);
      Flatten(n->input(0), false, dt, p, depth + 1);
      return;
    }
  }
  if (open && n->op() == "Pow" && n->num_inputs() == 2) {
    auto e = ScalarOperand(n->input(1));
    if (e && (e->value == 2 || e->value == 3)) {
      p.nodes.push_back(n);
      p.const_rank = std::max(p.const_rank, e->rank);
      for (int i = 0; i < static_cast<int>(e->value); ++i) p.factors.push_back(n->input(0));
      return;
    }
  }
  if (auto c = ScalarOperand(v, dt)) {
    p.coef *= c->value;
    p.const_rank = std::max(p.const_rank, c->rank);
    return;
  }
  p.factors.push_back(v);
}

struct GeluMatch {
  Value* x = nullptr;
  bool tanh = false;
  std::vector<Node*> nodes;
};

// 1 + f(u) (either order) with f = Erf or Tanh; returns f.
Node* MatchOnePlus(Value* a, DType dt, int* const_rank, Node** add_out) {
  Node* add = ProducerOf(a, "Add");
  if (!add || !SingleUser(a)) return nullptr;
  for (int j = 0; j < 2; ++j) {
    auto one = ScalarOperand(add->input(j), dt);
    if (!one || !NearlyEqual(one->value, 1.0, dt)) continue;
    Value* t = add->input(1 - j);
    Node* f = ProducerNode(t);
    if (!(IsOp(f, "Erf") || IsOp(f, "Tanh")) || SingleUser(t) != add) continue;
    *const_rank = std::max(*const_rank, one->rank);
    *add_out = add;
    return f;
  }
  return nullptr;
}

std::optional<GeluMatch> MatchGeluWith(Node* root, const Product& top, Value* a, Value* x, DType dt) {
  GeluMatch m;
  int const_rank = top.const_rank;
  Node* add = nullptr;
  Node* f = MatchOnePlus(a, dt, &const_rank, &add);
  if (!f) return std::nullopt;
  Value* u = f->input(0);
  if (!SingleUser(u)) return std::nullopt;
  Product pu;
  Flatten(u, false, dt, pu);
  if (!pu.ok || pu.factors.size() != 1) return std::nullopt;
  const_rank = std::max(const_rank, pu.const_rank);
  m.nodes = top.nodes;
  m.nodes.push_back(add);
  m.nodes.push_back(f);
  m.nodes.insert(m.nodes.end(), pu.nodes.begin(), pu.nodes.end());
  if (IsOp(f, "Erf")) {
    // erf(x / sqrt(2))
    if (pu.factors[0] != x || !NearlyEqual(pu.coef, 1.0 / std::numbers::sqrt2, dt)) return std::nullopt;
  } else {
    // tanh(sqrt(2/pi) * (x + 0.044715 * x^3))
    if (!NearlyEqual(pu.coef, std::sqrt(2.0 / std::numbers::pi), dt)) return std::nullopt;
    Value* s = pu.factors[0];
    Node* sa = ProducerOf(s, "Add");
    if (!sa || !SingleUser(s)) return std::nullopt;
    Value* w = sa->input(0) == x ? sa->input(1) : sa->input(1) == x ? sa->input(0) : nullptr;
    if (!w || w == x || !SingleUser(w)) return std::nullopt;
    Product pw;
    Flatten(w, false, dt, pw);
    if (!pw.ok || pw.factors.size() != 3 || !NearlyEqual(pw.coef, 0.044715, dt)) return std::nullopt;
    for (Value* v : pw.factors)
      if (v != x) return std::nullopt;
    const_rank = std::max(const_rank, pw.const_rank);
    m.nodes.push_back(sa);
    m.nodes.insert(m.nodes.end(), pw.nodes.begin(), pw.nodes.end());
    m.tanh = true;
  }
  int r = KnownRank(x);
  if (const_rank > std::max(r, 0)) return std::nullopt;
  m.x = x;
  if (!External(x, m.nodes) || !Contained(m.nodes, root)) return std::nullopt;
  return m;
}

std::optional<GeluMatch> MatchGelu(Node* root) {
  if ((!IsOp(root, "Mul") && !IsOp(root, "Div")) || root->num_outputs() != 1) return std::nullopt;
  DType dt = KnownDType(root->output(0));
  if (!IsFloat(dt)) return std::nullopt;
  Product top;
  Flatten(root->output(0), true, dt, top);
  if (!top.ok || top.factors.size() != 2 || !NearlyEqual(top.coef, 0.5, dt)) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    Value* x = top.factors[1 - i];
    if (KnownDType(x) != dt) continue;
    if (auto m = MatchGeluWith(root, top, top.factors[i], x, dt)) return m;
  }
  return std::nullopt;
}

//===--- Softmax and LogSoftmax -------------------------------------------===//

struct SoftmaxMatch {
  Value* x = nullptr;
  int64_t axis = -1;
  std::vector<Node*> nodes;
};

// t = Sub(x, ReduceMax(x, axis)) read only by `readers` gives x (the shift
// along the axis does not change a softmax); any other t is x itself.
Value* StripMaxShift(Value* t, int64_t axis, const std::vector<Node*>& readers, std::vector<Node*>& nodes) {
  Node* sub = ProducerOf(t, "Sub");
  if (!sub || !sub->input(0) || !OnlyUsedBy(t, readers)) return t;
  Node* mx = ProducerOf(sub->input(1), "ReduceMax");
  if (!mx || mx->input(0) != sub->input(0)) return t;
  auto axes = AttrReduceAxes(mx, KnownRank(sub->input(0)));
  if (!axes || axes->size() != 1 || (*axes)[0] != axis) return t;
  nodes.push_back(sub);
  nodes.push_back(mx);
  return sub->input(0);
}

// Div(Exp(t), ReduceSum(Exp(t), axis)).
std::optional<SoftmaxMatch> MatchSoftmaxCore(Node* div) {
  if (!IsOp(div, "Div")) return std::nullopt;
  Value* e = div->input(0);
  Node* exp = ProducerOf(e, "Exp");
  Node* rs = ProducerOf(div->input(1), "ReduceSum");
  if (!exp || !rs || rs->input(0) != e) return std::nullopt;
  Value* t = exp->input(0);
  int r = KnownRank(t);
  if (r < 1 || !IsFloat(KnownDType(t))) return std::nullopt;
  auto axis = ReduceSumAxis(rs, r);
  if (!axis) return std::nullopt;
  SoftmaxMatch m;
  m.nodes = {div, rs, exp};
  m.x = StripMaxShift(t, *axis, {exp}, m.nodes);
  m.axis = *axis;
  if (KnownRank(m.x) != r) return std::nullopt;
  return m;
}

std::optional<SoftmaxMatch> MatchSoftmax(Node* root) {
  auto m = MatchSoftmaxCore(root);
  if (!m || !External(m->x, m->nodes) || !Contained(m->nodes, root)) return std::nullopt;
  return m;
}

std::optional<SoftmaxMatch> MatchLogSoftmax(Node* root) {
  std::optional<SoftmaxMatch> m;
  if (IsOp(root, "Log")) {
    Value* in = root->input(0);
    Node* p = ProducerNode(in);
    if (!p || SingleUser(in) != root) return std::nullopt;
    if (IsOp(p, "Softmax")) {
      int r = KnownRank(p->input(0));
      if (r < 1) return std::nullopt;
      auto axis = Normalized({p->GetInt("axis", -1)}, r);
      if (!axis) return std::nullopt;
      m = SoftmaxMatch{p->input(0), (*axis)[0], {p}};
    } else {
      m = MatchSoftmaxCore(p);
    }
    if (!m) return std::nullopt;
    m->nodes.push_back(root);
  } else if (IsOp(root, "Sub")) {
    // t - Log(ReduceSum(Exp(t), axis))
    Value* t = root->input(0);
    Node* lg = ProducerOf(root->input(1), "Log");
    Node* rs = lg ? ProducerOf(lg->input(0), "ReduceSum") : nullptr;
    Node* exp = rs ? ProducerOf(rs->input(0), "Exp") : nullptr;
    if (!exp || !t || exp->input(0) != t) return std::nullopt;
    int r = KnownRank(t);
    if (r < 1 || !IsFloat(KnownDType(t))) return std::nullopt;
    auto axis = ReduceSumAxis(rs, r);
    if (!axis) return std::nullopt;
    m = SoftmaxMatch{};
    m->nodes = {root, lg, rs, exp};
    m->x = StripMaxShift(t, *axis, {exp, root}, m->nodes);
    m->axis = *axis;
  } else {
    return std::nullopt;
  }
  if (!External(m->x, m->nodes) || !Contained(m->nodes, root)) return std::nullopt;
  return m;
}

//===--- Attention --------------------------------------------------------===//

struct AttentionMatch {
  Value* q = nullptr;
  Value* kt = nullptr;  // the MatMul's second operand: K^T
  Value* v = nullptr;
  Value* mask = nullptr;
  bool bool_mask = false;
  bool invert_mask = false;  // Where(mask, fill, scores): true marks masked keys
  double mask_value = -kInf;
  double scale = 1;
  Node* scores = nullptr;  // MatMul(Q, K^T)
  std::vector<Node*> nodes;
};

// [Div|Mul by a constant](MatMul(Q, K^T)); `user` is the node reading it.
bool MatchScores(Value* s, Node* user, AttentionMatch* m) {
  if (!s || SingleUser(s) != user) return false;
  Node* n = s->producer();
  double scale = 1;
  Node* scale_node = nullptr;
  Value* s0 = s;
  std::optional<Scalar> c;
  if (IsOp(n, "Div") && (c = ScalarOperand(n->input(1))) && c->value != 0) {
    scale = 1 / c->value;
    scale_node = n;
    s0 = n->input(0);
  } else if (IsOp(n, "Mul")) {
    for (int i = 0; i < 2 && !scale_node; ++i) {
      if ((c = ScalarOperand(n->input(i))) && IsOp(ProducerNode(n->input(1 - i)), "MatMul")) {
        scale = c->value;
        scale_node = n;
        s0 = n->input(1 - i);
      }
    }
  }
  Node* mm = ProducerOf(s0, "MatMul");
  if (!mm || (scale_node && SingleUser(s0) != scale_node)) return false;
  int rq = KnownRank(mm->input(0)), rk = KnownRank(mm->input(1));
  if (rq < 2 || rk < 2) return false;
  if (scale_node && c->rank > std::max(rq, rk)) return false;
  m->q = mm->input(0);
  m->kt = mm->input(1);
  m->scale = scale;
  m->scores = mm;
  m->nodes.push_back(mm);
  if (scale_node) m->nodes.push_back(scale_node);
  return true;
}

std::optional<AttentionMatch> MatchAttention(Node* root) {
  if (!IsOp(root, "MatMul")) return std::nullopt;
  Value* p = root->input(0);
  Node* sm = ProducerOf(p, "Softmax");
  if (!sm || SingleUser(p) != root) return std::nullopt;
  Value* s2 = sm->input(0);
  int rs = KnownRank(s2);
  if (rs < 2 || (sm->GetInt("axis", -1) != -1 && sm->GetInt("axis", -1) != rs - 1)) return std::nullopt;
  AttentionMatch m;
  m.v = root->input(1);
  m.nodes = {root, sm};
  Node* mn = ProducerNode(s2);
  if (SingleUser(s2) != sm) return std::nullopt;
  bool matched = false;
  if (IsOp(mn, "Add")) {
    for (int i = 0; i < 2 && !matched; ++i) {
      AttentionMatch t = m;
      if (MatchScores(mn->input(i), mn, &t)) {
        t.mask = mn->input(1 - i);
        t.nodes.push_back(mn);
        m = std::move(t);
        matched = true;
      }
    }
  } else if (IsOp(mn, "Where")) {
    for (int i = 1; i <= 2 && !matched; ++i) {
      AttentionMatch t = m;
      auto fill = ScalarOperand(mn->input(3 - i), KnownDType(s2));
      if (fill && fill->rank <= rs && MatchScores(mn->input(i), mn, &t)) {
        t.mask = mn->input(0);
        t.bool_mask = true;
        t.invert_mask = i == 2;
        t.mask_value = fill->value;
        t.nodes.push_back(mn);
        m = std::move(t);
        matched = true;
      }
    }
  }
  if (!matched && !MatchScores(s2, sm, &m)) return std::nullopt;
  DType dt = KnownDType(m.q);
  if (!IsFloat(dt) || KnownDType(m.kt) != dt || KnownDType(m.v) != dt || KnownRank(m.v) < 2) return std::nullopt;
  if (m.mask && KnownDType(m.mask) != (m.bool_mask ? DType::kBool : dt)) return std::nullopt;
  for (Value* in : {m.q, m.kt, m.v, m.mask})
    if (!External(in, m.nodes)) return std::nullopt;
  if (!Contained(m.nodes, root)) return std::nullopt;
  return m;
}

// The permutation of a Transpose, or nullopt.
std::optional<std::vector<int64_t>> TransposePerm(const Node* t) {
  int r = KnownRank(t->input(0));
  if (r < 0) return std::nullopt;
  std::vector<int64_t> perm;
  if (t->has_attr("perm")) {
    perm = t->GetInts("perm");
  } else {
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != r) return std::nullopt;
  auto n = Normalized(perm, r);
  if (!n || static_cast<int>(n->size()) != r) return std::nullopt;
  return perm;
}

// A mask of shape [1.., Sq, Sk] that keeps key j for query i exactly when
// j <= i: bool (true keeps) or additive (0 keeps, -inf masks).
bool IsCausalMask(const Tensor& t, bool additive) {
  if (t.rank() < 2) return false;
  for (int i = 0; i < t.rank() - 2; ++i)
    if (t.dim(i) != 1) return false;
  int64_t sq = t.dim(t.rank() - 2), sk = t.dim(t.rank() - 1);
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j) {
      double v = t.GetDouble(i * sk + j);
      bool keep = j <= i;
      if (additive ? (keep ? v != 0 : v != -kInf) : (keep ? v == 0 : v != 0)) return false;
    }
  return true;
}

Node* ApplyAttention(Node* root, AttentionMatch& m) {
  Graph& g = *root->owner();
  // K: undo a Transpose that swaps the last two axes into K^T.
  Value* k = m.kt;
  bool k_transposed = true;
  Node* t = ProducerOf(m.kt, "Transpose");
  if (t && SingleUser(m.kt) == m.scores) {
    if (auto perm = TransposePerm(t)) {
      std::swap((*perm)[perm->size() - 1], (*perm)[perm->size() - 2]);
      bool identity = true;
      for (size_t i = 0; i < perm->size(); ++i)
        if ((*perm)[i] != static_cast<int64_t>(i)) identity = false;
      if (identity) {
        k = t->input(0);
      } else {
        Node* nt = g.AddNode("Transpose", {t->input(0)}, {g.UniqueName("k")}, "", root);
        nt->SetAttr("perm", Attribute::Ints(*perm));
        InferNodeTypes(nt);
        k = nt->output(0);
      }
      k_transposed = false;
    }
  }
  // The mask: a constant causal mask becomes the causal flag when the scores
  // have exactly its [Sq, Sk] (no broadcast).
  Value* mask = m.mask;
  bool causal = false;
  if (mask) {
    int max_rank = KnownRank(m.scores->output(0));
    auto c = EvaluateConstant(mask, 6, int64_t{1} << 24);
    if (c && m.bool_mask && m.invert_mask) {
      Tensor inv(DType::kBool, c->dims());
      for (int64_t i = 0; i < c->numel(); ++i) inv.data<bool>()[i] = c->GetDouble(i) == 0;
      *c = inv;
    }
    const Type& st = m.scores->output(0)->type();
    if (c && c->rank() >= 2 && c->rank() <= max_rank && (!m.bool_mask || m.mask_value == -kInf) &&
        IsCausalMask(*c, !m.bool_mask)) {
      const Dim& sq = st.shape()[max_rank - 2];
      const Dim& sk = st.shape()[max_rank - 1];
      causal = sq.is_static() && sk.is_static() && sq.value() == c->dim(c->rank() - 2) &&
               sk.value() == c->dim(c->rank() - 1);
    }
    if (causal) {
      mask = nullptr;
    } else if (m.bool_mask && m.invert_mask) {
      if (c) {
        mask = g.AddConstant(g.UniqueName("keep"), *c);
      } else {
        Node* nn = g.AddNode("Not", {m.mask}, {g.UniqueName("keep")}, "", root);
        InferNodeTypes(nn);
        mask = nn->output(0);
      }
    }
  }
  std::vector<Value*> ins = {m.q, k, m.v};
  if (mask) ins.push_back(mask);
  Node* att = g.AddNode("Attention", ins, 1, "kiln", root);
  att->SetAttr("scale", Attribute::Float(static_cast<float>(m.scale)));
  att->SetAttr("k_transposed", Attribute::Int(k_transposed ? 1 : 0));
  if (causal) att->SetAttr("causal", Attribute::Int(1));
  if (mask && m.bool_mask && m.mask_value != -kInf)
    att->SetAttr("mask_value", Attribute::Float(static_cast<float>(m.mask_value)));
  return Finish(root, att);
}

}  // namespace

Node* RecognizeLayerNorm(Node* root) {
  auto m = MatchLayerNorm(root);
  if (!m) return nullptr;
  if (Node* u = SingleUser(root->output(0)); u && MatchLayerNorm(u)) return nullptr;
  Graph& g = *root->owner();
  Value* scale = m->scale;
  Value* bias = m->bias;
  if (!scale) {
    Dims dims = *NormalizedDims(m->x, m->axis);
    std::vector<double> ones(NumElements(dims), 1.0);
    scale = g.AddConstant(g.UniqueName("ln_scale"),
                          CastTensor(Tensor::FromVector<double>(ones, dims), KnownDType(m->x)));
  }
  for (Value** p : {&scale, &bias}) {
    if (*p && FitParam(*p, m->x, m->axis) == ParamUse::kBroadcast)
      *p = g.AddConstant(g.UniqueName((*p)->name()), BroadcastTo(*ConstantData(*p), *NormalizedDims(m->x, m->axis)));
  }
  std::vector<Value*> ins = {m->x, scale};
  if (bias) ins.push_back(bias);
  Node* ln = g.AddNode("LayerNormalization", ins, 1, "", root);
  ln->SetAttr("axis", Attribute::Int(m->axis));
  ln->SetAttr("epsilon", Attribute::Float(static_cast<float>(m->eps)));
  return Finish(root, ln);
}

Node* RecognizeGelu(Node* root) {
  auto m = MatchGelu(root);
  if (!m) return nullptr;
  if (Node* u = SingleUser(root->output(0)); u && MatchGelu(u)) return nullptr;
  Graph& g = *root->owner();
  Node* gelu = g.AddNode("Gelu", {m->x}, 1, "kiln", root);
  gelu->SetAttr("approximate", Attribute::String(m->tanh ? "tanh" : "none"));
  return Finish(root, gelu);
}

Node* RecognizeSoftmax(Node* root) {
  auto m = MatchSoftmax(root);
  if (!m) return nullptr;
  if (Node* u = SingleUser(root->output(0)); u && MatchLogSoftmax(u)) return nullptr;
  Graph& g = *root->owner();
  Node* sm = g.AddNode("Softmax", {m->x}, 1, "", root);
  sm->SetAttr("axis", Attribute::Int(m->axis));
  return Finish(root, sm);
}

Node* RecognizeLogSoftmax(Node* root) {
  auto m = MatchLogSoftmax(root);
  if (!m) return nullptr;
  Graph& g = *root->owner();
  Node* sm = g.AddNode("LogSoftmax", {m->x}, 1, "", root);
  sm->SetAttr("axis", Attribute::Int(m->axis));
  return Finish(root, sm);
}

Node* RecognizeAttention(Node* root) {
  auto m = MatchAttention(root);
  if (!m) return nullptr;
  return ApplyAttention(root, *m);
}

const std::vector<CompositeRecognizer>& CompositeRecognizers() {
  static const std::vector<CompositeRecognizer> recognizers = {
      {"layernorm-recognized", "Add", RecognizeLayerNorm, {"ReduceMean"}},
      {"layernorm-recognized", "Mul", RecognizeLayerNorm, {"ReduceMean"}},
      {"layernorm-recognized", "Div", RecognizeLayerNorm, {"ReduceMean"}},
      {"gelu-recognized", "Mul", RecognizeGelu, {"Erf", "Tanh"}},
      {"gelu-recognized", "Div", RecognizeGelu, {"Erf", "Tanh"}},
      {"softmax-recognized", "Div", RecognizeSoftmax, {"Exp"}},
      {"logsoftmax-recognized", "Log", RecognizeLogSoftmax, {"Log"}},
      {"logsoftmax-recognized", "Sub", RecognizeLogSoftmax, {"Log"}},
      // A Softmax op, or one recognized from Exp earlier in the same sweep.
      {"attention-recognized", "MatMul", RecognizeAttention, {"Softmax", "Exp"}},
  };
  return recognizers;
}

}  // namespace kiln::patterns
