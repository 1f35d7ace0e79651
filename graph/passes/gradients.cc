//===- gradients.cc - Reverse-mode differentiation on the graph IR --------===//
//
// A node is differentiated when one of its outputs is active (depends on a
// parameter and the loss depends on it) and has a gradient. Its rule reads
// the forward values it needs (inputs, outputs, attributes, static shapes)
// and gives each active input its share; Give() undoes broadcasting by
// summing the gradient over the axes the input was broadcast along.
//
// The rules follow the ONNX operator definitions (opset 17, kiln's canonical
// form): for y = f(x), dx = dy * f'(x), with f' written in ONNX ops.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/gradients.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <numeric>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "graph/ops/window_attrs.h"
#include "graph/passes/patterns/rewrite_util.h"
#include "graph/passes/rewrite_helpers.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

using patterns::ConstantInts;
using patterns::InferNodeTypes;

class Differentiator;
using Rule = absl::Status (*)(Differentiator&, Node&);

const std::map<std::string, Rule>& Rules();

std::string NodeLabel(const Node& n) {
  return absl::StrCat("node '", n.name().empty() ? n.output(0)->name() : n.name(), "' (", n.QualifiedOp(), ")");
}

// The normalized axis `a` of a rank-`rank` tensor.
int64_t Axis(int64_t a, int rank) { return a < 0 ? a + rank : a; }

class Differentiator {
 public:
  explicit Differentiator(Graph& g) : g_(g) {}

  absl::StatusOr<std::vector<Value*>> Run(Value* loss, const std::vector<Value*>& wrt);

  // The gradient of output i of `n` (null when none reached it).
  Value* Dy(const Node& n, int i) const {
    auto it = grad_.find(n.output(i));
    return it == grad_.end() ? nullptr : it->second;
  }
  // Whether input i of `n` needs a gradient.
  bool Needs(const Node& n, int i) const { return n.input(i) && active_.contains(n.input(i)); }
  // Adds `dv` (of the shape of `dv`'s type, which broadcasts to `v`'s) to
  // the gradient of `v`.
  absl::Status Give(const Node& n, Value* v, Value* dv);

  // A node appended to the graph computing `op` of `ins`; its output.
  Value* Emit(const char* op, std::vector<Value*> ins,
              std::initializer_list<std::pair<const char*, Attribute>> attrs = {});
  // A node of `num_outputs` outputs appended to the graph (types not
  // inferred yet).
  Node* EmitNode(const char* op, std::vector<Value*> ins, int num_outputs);
  Value* Ints(const std::vector<int64_t>& v);
  Value* CastTo(Value* v, DType t) { return Emit("Cast", {v}, {{"to", Attribute::Int(DTypeToOnnx(t))}}); }
  Value* Scalar(DType dtype, double x) { return patterns::ScalarConst(g_, dtype, x, "grad.c"); }
  // A tensor of `v`'s type filled with `x`.
  Value* Filled(const Value* v, double x);
  Value* ZerosLike(const Value* v) { return Filled(v, 0); }
  // `x` with its last two axes swapped.
  Value* SwapLastTwo(Value* x);
  Dims DimsOf(const Value* v) const { return v->type().shape().StaticDims(); }
  absl::Status Unsupported(const Node& n, absl::string_view why) const {
    return absl::InvalidArgumentError(absl::StrCat("training-step: cannot differentiate ", NodeLabel(n), ": ", why));
  }

 private:
  absl::Status MarkActive(Value* loss, const std::vector<Value*>& wrt);
  Value* Unbroadcast(Value* dv, const Dims& from, const Dims& to);

  Graph& g_;
  // Gradient values are named after the forward node they differentiate
  // ("h.grad.7"); gradient nodes after its name ("/fc1/MatMul.grad").
  std::string prefix_ = "loss";
  std::string node_name_;
  absl::flat_hash_map<const Value*, Value*> grad_;
  absl::flat_hash_set<const Value*> active_;
};

Node* Differentiator::EmitNode(const char* op, std::vector<Value*> ins, int num_outputs) {
  std::vector<std::string> names;
  for (int i = 0; i < num_outputs; ++i) names.push_back(g_.UniqueName(prefix_ + ".grad"));
  Node* n = g_.AddNode(op, ins, names);
  if (!node_name_.empty()) n->set_name(node_name_ + ".grad");
  return n;
}

Value* Differentiator::Emit(const char* op, std::vector<Value*> ins,
                            std::initializer_list<std::pair<const char*, Attribute>> attrs) {
  Node* n = EmitNode(op, std::move(ins), 1);
  for (const auto& [name, a] : attrs) n->SetAttr(name, a.Clone(&g_));
  InferNodeTypes(n);
  return n->output(0);
}

Value* Differentiator::Ints(const std::vector<int64_t>& v) {
  return g_.AddConstant(g_.UniqueName("grad.ints"),
                        Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())}));
}

Value* Differentiator::Filled(const Value* v, double x) {
  Tensor value = CastTensor(Tensor::FromVector<double>({x}, {1}), v->type().dtype());
  return Emit("ConstantOfShape", {Ints(DimsOf(v))}, {{"value", Attribute::TensorValue(value)}});
}

Value* Differentiator::SwapLastTwo(Value* x) {
  int rank = x->type().shape().rank();
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return Emit("Transpose", {x}, {{"perm", Attribute::Ints(perm)}});
}

Value* Differentiator::Unbroadcast(Value* dv, const Dims& from, const Dims& to) {
  if (from == to) return dv;
  size_t lead = from.size() - to.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < from.size(); ++i)
    if (i < lead || (to[i - lead] == 1 && from[i] != 1)) axes.push_back(static_cast<int64_t>(i));
  if (!axes.empty()) dv = Emit("ReduceSum", {dv, Ints(axes)}, {{"keepdims", Attribute::Int(1)}});
  return Emit("Reshape", {dv, Ints(to)});
}

absl::Status Differentiator::Give(const Node& n, Value* v, Value* dv) {
  if (!active_.contains(v)) return absl::OkStatus();
  if (!dv->type().is_tensor() || !dv->type().shape().is_static())
    return absl::InternalError(absl::StrCat("training-step: the gradient of ", NodeLabel(n), " has no static shape"));
  Dims from = DimsOf(dv), to = DimsOf(v);
  if (from.size() < to.size()) return Unsupported(n, "a gradient has a lower rank than its input");
  dv = Unbroadcast(dv, from, to);
  if (dv->type().dtype() != v->type().dtype())
    dv = CastTo(dv, v->type().dtype());
  auto [it, fresh] = grad_.try_emplace(v, dv);
  if (!fresh) it->second = Emit("Add", {it->second, dv});
  return absl::OkStatus();
}

// Active values: float tensors that depend on a parameter and that the loss
// depends on. Both walks follow node order (producers before users).
absl::Status Differentiator::MarkActive(Value* loss, const std::vector<Value*>& wrt) {
  absl::flat_hash_set<const Value*> depends(wrt.begin(), wrt.end());
  for (Node* n : g_.nodes()) {
    bool any = false;
    for (Value* v : n->inputs()) any |= v && depends.contains(v);
    if (!any) continue;
    for (Value* o : n->outputs())
      if (o->type().is_tensor() && IsFloat(o->type().dtype())) depends.insert(o);
  }
  absl::flat_hash_set<const Value*> reaches = Ancestors(g_, loss);
  // In graph order, so that an error names the first such value.
  std::vector<const Value*> order(wrt.begin(), wrt.end());
  for (Node* n : g_.nodes())
    for (Value* o : n->outputs()) order.push_back(o);
  for (const Value* v : order) {
    if (!depends.contains(v) || !reaches.contains(v) || !active_.insert(v).second) continue;
    if (!v->type().is_tensor() || !v->type().shape().is_static())
      return absl::InvalidArgumentError(
          absl::StrCat("training-step: '", v->name(), "' lies between a parameter and the loss but its shape is not "
                       "static (pin the input dims first)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value*>> Differentiator::Run(Value* loss, const std::vector<Value*>& wrt) {
  KILN_RETURN_IF_ERROR(MarkActive(loss, wrt));
  prefix_ = loss->name();
  // The node list is walked from the last node that existed before any
  // gradient node was appended.
  Node* last = g_.last_node();
  if (active_.contains(loss)) grad_[loss] = Filled(loss, 1);  // d loss / d loss
  for (Node* n = last; n; n = n->prev()) {
    bool any = false;
    for (int i = 0; i < n->num_outputs(); ++i) any |= Dy(*n, i) != nullptr;
    if (!any) continue;
    bool needed = false;
    for (int i = 0; i < n->num_inputs(); ++i) needed |= Needs(*n, i);
    if (!needed) continue;
    if (n->may_hold_graphs() && !n->subgraphs().empty()) return Unsupported(*n, "control flow is not differentiated");
    prefix_ = n->output(0)->name();
    node_name_ = n->name();
    const auto& rules = Rules();
    auto it = n->domain().empty() ? rules.find(n->op()) : rules.end();
    if (it == rules.end()) return Unsupported(*n, "the op has no gradient rule");
    KILN_RETURN_IF_ERROR(it->second(*this, *n));
  }
  prefix_ = "zero";
  node_name_.clear();
  std::vector<Value*> out;
  for (Value* w : wrt) {
    auto it = grad_.find(w);
    out.push_back(it != grad_.end() ? it->second : ZerosLike(w));
  }
  return out;
}

//===--- Rules -------------------------------------------------------------===//

using D = Differentiator;

// x -> x under another shape (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, inference Dropout): the gradient takes the input's shape back.
absl::Status ReshapeRule(D& d, Node& n) {
  Value* dy = d.Dy(n, 0);
  if (!dy) return absl::OkStatus();
  Value* x = n.input(0);
  Value* dx = d.DimsOf(dy) == d.DimsOf(x) ? dy : d.Emit("Reshape", {dy, d.Ints(d.DimsOf(x))});
  return d.Give(n, x, dx);
}

absl::Status DropoutRule(D& d, Node& n) {
  if (IsNondeterministicOp(n)) return d.Unsupported(n, "Dropout in training mode is random");
  return ReshapeRule(d, n);
}

absl::Status ExpandRule(D& d, Node& n) { return d.Give(n, n.input(0), d.Dy(n, 0)); }

absl::Status AddRule(D& d, Node& n) {
  Value* dy = d.Dy(n, 0);
  KILN_RETURN_IF_ERROR(d.Give(n, n.input(0), dy));
  return d.Give(n, n.input(1), dy);
}

absl::Status SubRule(D& d, Node& n) {
  Value* dy = d.Dy(n, 0);
  KILN_RETURN_IF_ERROR(d.Give(n, n.input(0), dy));
  if (d.Needs(n, 1)) KILN_RETURN_IF_ERROR(d.Give(n, n.input(1), d.Emit("Neg", {dy})));
  return absl::OkStatus();
}

absl::Status MulRule(D& d, Node& n) {
  Value* dy = d.Dy(n, 0);
  if (d.Needs(n, 0)) KILN_RETURN_IF_ERROR(d.Give(n, n.input(0), d.Emit("Mul", {dy, n.input(1)})));
  if (d.Needs(n, 1)) KILN_RETURN_IF_ERROR(d.Give(n, n.input(1), d.Emit("Mul", {dy, n.input(0)})));
  return absl::OkStatus();
}

// y = a / b: da = dy / b, db = -dy * y / b.
absl::Status DivRule(D& d, Node& n) {
  Value* dy = d.Dy(n, 0);
  Value* b = n.input(1);
  if (d.Needs(n, 0)) KILN_RETURN_IF_ERROR(d.Give(n, n.input(0), d.Emit("Div", {dy, b})));
  if (d.Needs(n, 1)) {
    Value* t = d.Emit("Div", {d.Emit("Mul", {dy, n.output(0)}), b});
    KILN_RETURN_IF_ERROR(d.Give(n, b, d.Emit("Neg", {t})));
  }
  return absl::OkStatus();
}

absl::Status NegRule(D& d, Node& n) { return d.Give(n, n.input(0), d.Emit("Neg", {d.Dy(n, 0)})); }

// dx = dy where x > 0, else 0.
absl::Status ReluRule(D& d, Node& n) {
  Value* x = n.input(0);
  DType t = x->type().dtype();
  Value* zero = d.Scalar(t, 0);
  Value* pos = d.Emit("Greater", {x, zero});
  return d.Give(n, x, d.Emit("Where", {pos, d.Dy(n, 0), zero}));
}

absl::Status LeakyReluRule(D& d, Node& n) {
  Value* x = n.input(0);
  DType t = x->type().dtype();
  Value* dy = d.Dy(n, 0);
  Value* pos = d.Emit("Greater", {x, d.Scalar(t, 0)});
  Value* neg = d.Emit("Mul", {dy, d.Scalar(t, n.GetFloat("alpha", 0.01f))});
  return d.Give(n, x, d.Emit("Where", {pos, dy, neg}));
}

// y = sigmoid(x): dx = dy * y * (1 - y).
absl::Status SigmoidRule(D& d, Node& n) {
  Value* y = n.output(0);
  Value* one_minus = d.Emit("Sub", {d.Scalar(y->type().dtype(), 1), y});
  return d.Give(n, n.input(0), d.Emit("Mul", {d.Emit("Mul", {d.Dy(n, 0), y}), one_minus}));
}

// y = tanh(x): dx = dy * (1 - y^2).
absl::Status TanhRule(D& d, Node& n) {
  Value* y = n.output(0);
  Value* one_minus = d.Emit("Sub", {d.Scalar(y->type().dtype(), 1), d.Emit("Mul", {y, y})});
  return d.Give(n, n.input(0), d.Emit("Mul", {d.Dy(n, 0), one_minus}));
}

absl::Status ExpRule(D& d, Node& n) { return d.Give(n, n.input(0), d.Emit("Mul", {d.Dy(n, 0), n.output(0)})); }

absl::Status LogRule(D& d, Node& n) { return d.Give(n, n.input(0), d.Emit("Div", {d.Dy(n, 0), n.input(0)})); }

// y = sqrt(x): dx = dy / (2 y).
absl::Status SqrtRule(D& d, Node& n) {
  Value* y = n.output(0);
  return d.Give(n, n.input(0), d.Emit("Div", {d.Dy(n, 0), d.Emit("Mul", {y, d.Scalar(y->type().dtype(), 2)})}));
}

// y = 1 / x: dx = -dy * y^2.
absl::Status ReciprocalRule(D& d, Node& n) {
  Value* y = n.output(0);
  return d.Give(n, n.input(0), d.Emit("Neg", {d.Emit("Mul", {d.Dy(n, 0), d.Emit("Mul", {y, y})})}));
}

// y = erf(x): dx = dy * 2/sqrt(pi) * exp(-x^2).
absl::Status ErfRule(D& d, Node& n) {
  Value* x = n.input(0);
  DType t = x->type().dtype();
  Value* e = d.Emit("Exp", {d.Emit("Neg", {d.Emit("Mul", {x, x})})});
  Value* k = d.Scalar(t, 2.0 / std::sqrt(M_PI));
  return d.Give(n, x, d.Emit("Mul", {d.Dy(n, 0), d.Emit("Mul", {e, k})}));
}

// y = x^p, p not differentiated: dx = dy * p * x^(p-1).
absl::Status PowRule(D& d, Node& n) {
  if (d.Needs(n, 1)) return d.Unsupported(n, "the exponent depends on a parameter");
  Value* x = n.input(0);
  Value* p = n.input(1);
  DType t = x->type().dtype();
  Value* pf = p->type().dtype() == t ? p : d.CastTo(p, t);
  Value* pm1 = d.Emit("Sub", {pf, d.Scalar(t, 1)});
  Value* grad = d.Emit("Mul", {d.Dy(n, 0), d.Emit("Mul", {pf, d.Emit("Pow", {x, pm1})})});
  return d.Give(n, x, grad);
}

absl::Status CastRule(D& d, Node& n) {
  Value* x = n.input(0);
  if (!IsFloat(x->type().dtype())) return absl::OkStatus();
  return d.Give(n, x, d.Dy(n, 0));  // Give casts back to the input's dtype
}

absl::Status TransposeRule(D& d, Node& n) {
  int rank = n.input(0)->type().shape().rank();
  std::vector<int64_t> perm = n.GetInts("perm");
  if (perm.empty())
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  std::vector<int64_t> inverse(rank);
  for (int i = 0; i < rank; ++i) inverse[perm[i]] = i;
  return d.Give(n, n.input(0), d.Emit("Transpose", {d.Dy(n, 0)}, {{"perm", Attribute::Ints(inverse)}}));
}

// y = a @ b (rank >= 2; batch dims broadcast): da = dy @ b^T, db = a^T @ dy,
// each summed over the batch dims its input was broadcast along.
absl::Status MatMulRule(D& d, Node& n) {
  Value* a = n.input(0);
  Value* b = n.input(1);
  if (a->type().shape().rank() < 2 || b->type().shape().rank() < 2)
    return d.Unsupported(n, "a 1-D operand (only matrices and batches of them)");
  Value* dy = d.Dy(n, 0);
  if (d.Needs(n, 0)) KILN_RETURN_IF_ERROR(d.Give(n, a, d.Emit("MatMul", {dy, d.SwapLastTwo(b)})));
  if (d.Needs(n, 1)) KILN_RETURN_IF_ERROR(d.Give(n, b, d.Emit("MatMul", {d.SwapLastTwo(a), dy})));
  return absl::OkStatus();
}

// y = alpha op(a) op(b) + beta c.
absl::Status GemmRule(D& d, Node& n) {
  Value* a = n.input(0);
  Value* b = n.input(1);
  Value* dy = d.Dy(n, 0);
  bool ta = n.GetInt("transA", 0) != 0, tb = n.GetInt("transB", 0) != 0;
  double alpha = n.GetFloat("alpha", 1.0f), beta = n.GetFloat("beta", 1.0f);
  DType t = dy->type().dtype();
  Value* g = alpha == 1.0 ? dy : d.Emit("Mul", {dy, d.Scalar(t, alpha)});
  if (d.Needs(n, 0)) {
    // op(a)' = g op(b)^T; a' is its transpose when transA.
    Value* opb_t = tb ? b : d.SwapLastTwo(b);
    Value* da = d.Emit("MatMul", {g, opb_t});
    KILN_RETURN_IF_ERROR(d.Give(n, a, ta ? d.SwapLastTwo(da) : da));
  }
  if (d.Needs(n, 1)) {
    Value* opa_t = ta ? a : d.SwapLastTwo(a);
    Value* db = d.Emit("MatMul", {opa_t, g});
    KILN_RETURN_IF_ERROR(d.Give(n, b, tb ? d.SwapLastTwo(db) : db));
  }
  if (d.Needs(n, 2)) {
    Value* dc = beta == 1.0 ? dy : d.Emit("Mul", {dy, d.Scalar(t, beta)});
    KILN_RETURN_IF_ERROR(d.Give(n, n.input(2), dc));
  }
  return absl::OkStatus();
}

// The reduced axes of a Reduce* node, normalized and sorted; nullopt when
// they are not constant.
std::optional<std::vector<int64_t>> ReducedAxes(const Node& n, bool axes_input) {
  int rank = n.input(0)->type().shape().rank();
  std::vector<int64_t> axes;
  if (axes_input) {
    if (n.input(1)) {
      auto c = ConstantInts(n.input(1));
      if (!c) return std::nullopt;
      axes = *c;
    }
  } else {
    axes = n.GetInts("axes");
  }
  if (axes.empty()) {
    if (axes_input && n.GetInt("noop_with_empty_axes", 0) != 0) return axes;
    axes.resize(rank);
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t& a : axes) a = Axis(a, rank);
  std::sort(axes.begin(), axes.end());
  return axes;
}

// y = sum (or mean) of x over axes: dx = dy (with the reduced axes kept as
// 1) expanded to x's shape, divided by the count for the mean.
absl::Status ReduceRule(D& d, Node& n, bool mean) {
  bool axes_input = n.op() == "ReduceSum";
  auto axes = ReducedAxes(n, axes_input);
  if (!axes) return d.Unsupported(n, "its axes are not constant");
  Value* x = n.input(0);
  Dims xd = d.DimsOf(x);
  if (axes->empty()) return d.Give(n, x, d.Dy(n, 0));  // noop_with_empty_axes
  Dims kept = xd;
  int64_t count = 1;
  for (int64_t a : *axes) {
    count *= xd[a];
    kept[a] = 1;
  }
  Value* g = d.Emit("Reshape", {d.Dy(n, 0), d.Ints(kept)});
  g = d.Emit("Expand", {g, d.Ints(xd)});
  if (mean) g = d.Emit("Div", {g, d.Scalar(x->type().dtype(), static_cast<double>(count))});
  return d.Give(n, x, g);
}
absl::Status ReduceSumRule(D& d, Node& n) { return ReduceRule(d, n, false); }
absl::Status ReduceMeanRule(D& d, Node& n) { return ReduceRule(d, n, true); }

// y = softmax(x) along axis: dx = y * (dy - sum(dy * y, axis)).
absl::Status SoftmaxRule(D& d, Node& n) {
  Value* y = n.output(0);
  int64_t axis = Axis(n.GetInt("axis", -1), y->type().shape().rank());
  Value* dy = d.Dy(n, 0);
  Value* s = d.Emit("ReduceSum", {d.Emit("Mul", {dy, y}), d.Ints({axis})}, {{"keepdims", Attribute::Int(1)}});
  return d.Give(n, n.input(0), d.Emit("Mul", {y, d.Emit("Sub", {dy, s})}));
}

// y = log_softmax(x) along axis: dx = dy - exp(y) * sum(dy, axis).
absl::Status LogSoftmaxRule(D& d, Node& n) {
  Value* y = n.output(0);
  int64_t axis = Axis(n.GetInt("axis", -1), y->type().shape().rank());
  Value* dy = d.Dy(n, 0);
  Value* s = d.Emit("ReduceSum", {dy, d.Ints({axis})}, {{"keepdims", Attribute::Int(1)}});
  return d.Give(n, n.input(0), d.Emit("Sub", {dy, d.Emit("Mul", {d.Emit("Exp", {y}), s})}));
}

// The loss ops (no class weights): the gradient of the scores is
// (softmax(scores) - onehot(labels)) for SoftmaxCrossEntropyLoss and
// -onehot(labels) for NegativeLogLikelihoodLoss, along axis 1, times dy (per
// element for reduction "none", divided by the count of labels for "mean").
// Labels equal to ignore_index contribute nothing and are not counted.
absl::Status LossRule(D& d, Node& n, bool softmax) {
  if (n.input(2)) return d.Unsupported(n, "class weights");
  if (n.num_outputs() > 1 && d.Dy(n, 1)) return d.Unsupported(n, "its log_prob output is differentiated");
  if (!d.Needs(n, 0)) return absl::OkStatus();
  Value* x = n.input(0);
  Dims xd = d.DimsOf(x);
  if (xd.size() < 2) return d.Unsupported(n, "scores of rank below 2");
  DType t = x->type().dtype();
  Value* labels = n.input(1);
  DType lt = labels->type().dtype();
  Value* counted = nullptr;  // 1 where a label counts, 0 where it is ignored
  if (n.has_attr("ignore_index")) {
    Value* ignored = d.Emit("Equal", {labels, d.CastTo(d.Ints({n.GetInt("ignore_index", 0)}), lt)});
    labels = d.Emit("Where", {ignored, d.CastTo(d.Ints({0}), lt), labels});
    counted = d.CastTo(d.Emit("Not", {ignored}), t);
  }
  Value* values = d.CastTo(d.Ints({0, 1}), t);
  Value* onehot = d.Emit("OneHot", {labels, d.Ints({xd[1]}), values}, {{"axis", Attribute::Int(1)}});
  Value* g = softmax ? d.Emit("Sub", {d.Emit("Softmax", {x}, {{"axis", Attribute::Int(1)}}), onehot})
                     : d.Emit("Neg", {onehot});
  if (counted) g = d.Emit("Mul", {g, d.Emit("Unsqueeze", {counted, d.Ints({1})})});
  Value* dy = d.Dy(n, 0);
  std::string reduction = n.GetString("reduction", "mean");
  if (reduction == "none") {
    dy = d.Emit("Unsqueeze", {dy, d.Ints({1})});
  } else if (reduction == "mean") {
    Value* count;
    if (counted) {
      count = d.Emit("ReduceSum", {counted}, {{"keepdims", Attribute::Int(0)}});
    } else {
      int64_t c = 1;
      for (size_t i = 0; i < xd.size(); ++i)
        if (i != 1) c *= xd[i];
      count = d.Scalar(t, static_cast<double>(c));
    }
    dy = d.Emit("Div", {dy, count});
  } else if (reduction != "sum") {
    return d.Unsupported(n, "reduction '" + reduction + "'");
  }
  return d.Give(n, x, d.Emit("Mul", {g, dy}));
}
absl::Status SoftmaxCrossEntropyRule(D& d, Node& n) { return LossRule(d, n, true); }
absl::Status NllRule(D& d, Node& n) { return LossRule(d, n, false); }

// The gradient of each input is its slice of dy along the axis.
absl::Status ConcatRule(D& d, Node& n) {
  Value* dy = d.Dy(n, 0);
  int rank = dy->type().shape().rank();
  int64_t axis = Axis(n.GetInt("axis", 0), rank);
  int64_t start = 0;
  for (int i = 0; i < n.num_inputs(); ++i) {
    int64_t len = d.DimsOf(n.input(i))[axis];
    if (d.Needs(n, i)) {
      Value* s = d.Emit("Slice", {dy, d.Ints({start}), d.Ints({start + len}), d.Ints({axis})});
      KILN_RETURN_IF_ERROR(d.Give(n, n.input(i), s));
    }
    start += len;
  }
  return absl::OkStatus();
}

// The gradient of the input is the outputs' gradients joined again (zeros
// for outputs nothing differentiated).
absl::Status SplitRule(D& d, Node& n) {
  int rank = n.input(0)->type().shape().rank();
  int64_t axis = Axis(n.GetInt("axis", 0), rank);
  std::vector<Value*> parts;
  for (int i = 0; i < n.num_outputs(); ++i) {
    Value* g = d.Dy(n, i);
    parts.push_back(g ? g : d.ZerosLike(n.output(i)));
  }
  return d.Give(n, n.input(0), d.Emit("Concat", parts, {{"axis", Attribute::Int(axis)}}));
}

absl::Status WhereRule(D& d, Node& n) {
  Value* dy = d.Dy(n, 0);
  Value* zero = d.Scalar(dy->type().dtype(), 0);
  if (d.Needs(n, 1)) KILN_RETURN_IF_ERROR(d.Give(n, n.input(1), d.Emit("Where", {n.input(0), dy, zero})));
  if (d.Needs(n, 2)) KILN_RETURN_IF_ERROR(d.Give(n, n.input(2), d.Emit("Where", {n.input(0), zero, dy})));
  return absl::OkStatus();
}

// y = gather(data, indices) along axis 0: the rows of dy are added into a
// zero tensor of data's shape at their indices (repeated indices sum).
absl::Status GatherRule(D& d, Node& n) {
  if (!d.Needs(n, 0)) return absl::OkStatus();
  if (Axis(n.GetInt("axis", 0), n.input(0)->type().shape().rank()) != 0)
    return d.Unsupported(n, "a gather along an axis other than 0");
  Value* data = n.input(0);
  Value* idx = n.input(1);
  if (idx->type().dtype() != DType::kI64)
    idx = d.CastTo(idx, DType::kI64);
  // Negative indices count from the end.
  Value* rows = d.Ints({d.DimsOf(data)[0]});
  Value* neg = d.Emit("Less", {idx, d.Ints({0})});
  idx = d.Emit("Where", {neg, d.Emit("Add", {idx, rows}), idx});
  Value* where = d.Emit("Unsqueeze", {idx, d.Ints({-1})});
  Value* g = d.Emit("ScatterND", {d.ZerosLike(data), where, d.Dy(n, 0)}, {{"reduction", Attribute::String("add")}});
  return d.Give(n, data, g);
}

// y = (x - mean) / sqrt(var + eps) * scale + bias over the axes from
// `axis` on (LayerNormalization, opset 17; only output 0 differentiated):
//   xhat = (x - mean) * r, r = 1 / sqrt(var + eps), g = dy * scale
//   dx = r * (g - mean(g) - xhat * mean(g * xhat))
//   dscale = sum(dy * xhat), dbias = sum(dy) over the other axes.
// x normalized over `axes` by its own statistics, as LayerNormalization and
// a training-mode BatchNormalization do: xhat = (x - mean) * r with r =
// 1 / sqrt(var + eps), both means over `axes` kept as size 1.
struct Normalized {
  std::vector<int64_t> axes;
  Value* xhat = nullptr;
  Value* r = nullptr;
};

Value* MeanOver(D& d, Value* v, const std::vector<int64_t>& axes) {
  return d.Emit("ReduceMean", {v}, {{"axes", Attribute::Ints(axes)}, {"keepdims", Attribute::Int(1)}});
}

Normalized NormalizeOver(D& d, Value* x, std::vector<int64_t> axes, Value* eps) {
  Value* xc = d.Emit("Sub", {x, MeanOver(d, x, axes)});
  Value* var = MeanOver(d, d.Emit("Mul", {xc, xc}), axes);
  Value* r = d.Emit("Reciprocal", {d.Emit("Sqrt", {d.Emit("Add", {var, eps})})});
  return {std::move(axes), d.Emit("Mul", {xc, r}), r};
}

// The input's gradient of such a normalization is r times this, from g =
// dy * scale: g - mean(g) - xhat * mean(g * xhat). (A scale constant over
// the normalized axes, BatchNorm's per-channel one, may multiply it after.)
Value* NormalizedGradientCore(D& d, const Normalized& nz, Value* g) {
  return d.Emit("Sub", {d.Emit("Sub", {g, MeanOver(d, g, nz.axes)}),
                        d.Emit("Mul", {nz.xhat, MeanOver(d, d.Emit("Mul", {g, nz.xhat}), nz.axes)})});
}

absl::Status LayerNormRule(D& d, Node& n) {
  for (int i = 1; i < n.num_outputs(); ++i)
    if (d.Dy(n, i)) return d.Unsupported(n, "its mean or inverse deviation is differentiated");
  Value* x = n.input(0);
  Value* dy = d.Dy(n, 0);
  DType t = x->type().dtype();
  int rank = x->type().shape().rank();
  int64_t axis = Axis(n.GetInt("axis", -1), rank);
  std::vector<int64_t> norm_axes;
  for (int64_t i = axis; i < rank; ++i) norm_axes.push_back(i);
  const Normalized nz = NormalizeOver(d, x, norm_axes, d.Scalar(t, n.GetFloat("epsilon", 1e-5f)));
  Value* xhat = nz.xhat;
  if (d.Needs(n, 0)) {
    Value* core = NormalizedGradientCore(d, nz, d.Emit("Mul", {dy, n.input(1)}));
    KILN_RETURN_IF_ERROR(d.Give(n, x, d.Emit("Mul", {nz.r, core})));
  }
  // Give() sums over the leading axes the scale and bias were broadcast along.
  if (d.Needs(n, 1)) KILN_RETURN_IF_ERROR(d.Give(n, n.input(1), d.Emit("Mul", {dy, xhat})));
  if (d.Needs(n, 2)) KILN_RETURN_IF_ERROR(d.Give(n, n.input(2), dy));
  return absl::OkStatus();
}

// The window of a Conv or pool node whose input `x` has static dims `xd`
// (graph/ops/window_attrs.h), VALID resolved into pads; SAME_* padding is
// refused.
absl::StatusOr<WindowAttrs> WindowOf(D& d, const Node& n, const Dims& xd, const std::vector<int64_t>* kernel_from_w) {
  WindowAttrs a;
  absl::Status s = ReadWindowAttrs(n, static_cast<int>(xd.size()) - 2, kernel_from_w, /*require_kernel=*/true, a);
  if (!s.ok()) return d.Unsupported(n, s.message());
  if (a.auto_pad != "NOTSET" && a.auto_pad != "VALID") return d.Unsupported(n, "auto_pad other than NOTSET or VALID");
  s = WindowOutDims(a, Dims(xd.begin() + 2, xd.end())).status();
  if (!s.ok()) return d.Unsupported(n, s.message());
  return a;
}

// dy through the transpose of window `a`: a ConvTranspose by `kernel`
// whose output_padding makes the result x's dims `xd`.
Value* TransposeWindow(D& d, Value* dy, Value* kernel, const WindowAttrs& a, const Dims& xd, int64_t group) {
  Dims yd = d.DimsOf(dy);
  std::vector<int64_t> out_pad(a.nsp);
  for (int i = 0; i < a.nsp; ++i)
    out_pad[i] = xd[2 + i] - (a.strides[i] * (yd[2 + i] - 1) + (a.kernel[i] - 1) * a.dilations[i] + 1 - a.pads[i] -
                              a.pads[a.nsp + i]);
  return d.Emit("ConvTranspose", {dy, kernel},
                {{"strides", Attribute::Ints(a.strides)},
                 {"dilations", Attribute::Ints(a.dilations)},
                 {"pads", Attribute::Ints(a.pads)},
                 {"output_padding", Attribute::Ints(out_pad)},
                 {"group", Attribute::Int(group)}});
}

// The axes of an [N, C, S...] tensor of `rank` but the channels: {0, 2, ...}.
std::vector<int64_t> AllButChannels(int rank) {
  std::vector<int64_t> axes = {0};
  for (int i = 2; i < rank; ++i) axes.push_back(i);
  return axes;
}

// `v` [N, C, S...] summed over every axis but the channels: [C].
Value* SumOverAllButChannels(D& d, Value* v) {
  return d.Emit("ReduceSum", {v, d.Ints(AllButChannels(v->type().shape().rank()))}, {{"keepdims", Attribute::Int(0)}});
}

// y = conv(x, w) + b (groups, strides, dilations, explicit pads):
//   dx = ConvTranspose(dy, w) with the same window, output_padding making
//        it x's size;
//   dw = a convolution of x (channels of a group as the batch, the batch as
//        channels) by dy (the same), strides and dilations swapped, cut to
//        the kernel's size and transposed back to w's layout;
//   db = dy summed over every axis but the channels.
absl::Status ConvRule(D& d, Node& n) {
  Value* x = n.input(0);
  Value* w = n.input(1);
  Value* dy = d.Dy(n, 0);
  Dims xd = d.DimsOf(x), wd = d.DimsOf(w);
  int sp = static_cast<int>(xd.size()) - 2;
  if (sp < 1) return d.Unsupported(n, "a convolution without spatial dims");
  std::vector<int64_t> kernel(wd.begin() + 2, wd.end());
  KILN_ASSIGN_OR_RETURN(WindowAttrs win, WindowOf(d, n, xd, &kernel));
  int64_t group = n.GetInt("group", 1);
  if (d.Needs(n, 0)) KILN_RETURN_IF_ERROR(d.Give(n, x, TransposeWindow(d, dy, w, win, xd, group)));
  if (d.Needs(n, 1)) {
    int64_t batch = xd[0], cin_g = xd[1] / group;
    // x [N, C, S...] -> [C/g, g*N, S...]: a group's channels as the batch.
    Dims split = {batch, group, cin_g};
    split.insert(split.end(), xd.begin() + 2, xd.end());
    std::vector<int64_t> perm = {2, 1, 0};
    for (int i = 0; i < sp; ++i) perm.push_back(3 + i);
    Dims joined = {cin_g, group * batch};
    joined.insert(joined.end(), xd.begin() + 2, xd.end());
    Value* xa = d.Emit("Reshape", {d.Emit("Transpose", {d.Emit("Reshape", {x, d.Ints(split)})},
                                          {{"perm", Attribute::Ints(perm)}}),
                                   d.Ints(joined)});
    // dy [N, Cout, S'...] -> [Cout, N, S'...].
    std::vector<int64_t> swap01 = {1, 0};
    for (int i = 0; i < sp; ++i) swap01.push_back(2 + i);
    Value* dya = d.Emit("Transpose", {dy}, {{"perm", Attribute::Ints(swap01)}});
    Value* dw = d.Emit("Conv", {xa, dya},
                       {{"strides", Attribute::Ints(win.dilations)},
                        {"dilations", Attribute::Ints(win.strides)},
                        {"pads", Attribute::Ints(win.pads)},
                        {"group", Attribute::Int(group)}});
    // [C/g, Cout, K'...] with K' >= K: cut, then [Cout, C/g, K...].
    Dims got = d.DimsOf(dw);
    bool cut = false;
    for (int i = 0; i < sp; ++i) cut |= got[2 + i] != wd[2 + i];
    if (cut) {
      std::vector<int64_t> starts(sp, 0), axes;
      for (int i = 0; i < sp; ++i) axes.push_back(2 + i);
      dw = d.Emit("Slice", {dw, d.Ints(starts), d.Ints(Dims(wd.begin() + 2, wd.end())), d.Ints(axes)});
    }
    KILN_RETURN_IF_ERROR(d.Give(n, w, d.Emit("Transpose", {dw}, {{"perm", Attribute::Ints(swap01)}})));
  }
  if (d.Needs(n, 2)) KILN_RETURN_IF_ERROR(d.Give(n, n.input(2), SumOverAllButChannels(d, dy)));
  return absl::OkStatus();
}

// BatchNormalization, y = (x - mean) / sqrt(var + eps) * scale + b per
// channel (axis 1). Inference form (the running statistics): dx = dy *
// scale / sqrt(var + eps). Training form (training_mode: the mean and
// biased variance of x over every axis but the channels, M elements each):
// dx = scale * rstd * (dy - mean(dy) - xhat mean(dy * xhat)). Both:
// dscale = sum(dy * xhat), db = sum(dy) over every axis but the channels.
// The running statistics (inputs 3, 4; outputs 1, 2) are not differentiated.
absl::Status BatchNormRule(D& d, Node& n) {
  if (d.Needs(n, 3) || d.Needs(n, 4)) return d.Unsupported(n, "its running mean or variance is differentiated");
  for (int i = 1; i < n.num_outputs(); ++i)
    if (d.Dy(n, i)) return d.Unsupported(n, "the loss depends on its updated running statistics");
  const bool training = n.GetInt("training_mode", 0) != 0;
  Value* x = n.input(0);
  Value* dy = d.Dy(n, 0);
  Dims xd = d.DimsOf(x);
  DType t = x->type().dtype();
  // Per-channel values as [C, 1, ...] to broadcast against [N, C, S...].
  Dims col = {xd[1]};
  for (size_t i = 2; i < xd.size(); ++i) col.push_back(1);
  auto per_channel = [&](Value* v) { return d.Emit("Reshape", {v, d.Ints(col)}); };
  Value* eps = d.Scalar(t, n.GetFloat("epsilon", 1e-5f));
  Value* xhat = nullptr;
  if (training) {
    const Normalized nz = NormalizeOver(d, x, AllButChannels(static_cast<int>(xd.size())), eps);  // r: [1, C, 1...]
    xhat = nz.xhat;
    if (d.Needs(n, 0)) {
      // The scale is per channel, constant over the normalized axes: it
      // multiplies the core of dy, r * scale.
      Value* core = NormalizedGradientCore(d, nz, dy);
      KILN_RETURN_IF_ERROR(d.Give(n, x, d.Emit("Mul", {core, d.Emit("Mul", {per_channel(n.input(1)), nz.r})})));
    }
  } else {
    Value* rstd = d.Emit("Reciprocal", {d.Emit("Sqrt", {d.Emit("Add", {n.input(4), eps})})});
    if (d.Needs(n, 0))
      KILN_RETURN_IF_ERROR(d.Give(n, x, d.Emit("Mul", {dy, per_channel(d.Emit("Mul", {n.input(1), rstd}))})));
    if (d.Needs(n, 1)) xhat = d.Emit("Mul", {d.Emit("Sub", {x, per_channel(n.input(3))}), per_channel(rstd)});
  }
  if (d.Needs(n, 1)) KILN_RETURN_IF_ERROR(d.Give(n, n.input(1), SumOverAllButChannels(d, d.Emit("Mul", {dy, xhat}))));
  if (d.Needs(n, 2)) KILN_RETURN_IF_ERROR(d.Give(n, n.input(2), SumOverAllButChannels(d, dy)));
  return absl::OkStatus();
}

// y = max over windows: the pool again with its Indices output (flat
// positions in x), and dy added into a zero x at those positions (windows
// that overlap add).
absl::Status MaxPoolRule(D& d, Node& n) {
  if (n.num_outputs() > 1 && d.Dy(n, 1)) return d.Unsupported(n, "its Indices output is differentiated");
  if (n.GetInt("storage_order", 0) != 0) return d.Unsupported(n, "storage_order 1");
  Value* x = n.input(0);
  Node* pool = d.EmitNode("MaxPool", {x}, 2);
  for (const auto& [name, a] : n.attrs()) pool->SetAttr(name, a.Clone(pool->owner()));
  InferNodeTypes(pool);
  Value* flat = d.Ints({-1});
  Value* where = d.Emit("Reshape", {pool->output(1), flat});
  Value* zeros = d.Emit("Reshape", {d.ZerosLike(x), flat});
  Value* g = d.Emit("ScatterElements", {zeros, where, d.Emit("Reshape", {d.Dy(n, 0), flat})},
                    {{"axis", Attribute::Int(0)}, {"reduction", Attribute::String("add")}});
  return d.Give(n, x, d.Emit("Reshape", {g, d.Ints(d.DimsOf(x))}));
}

// y = mean over all spatial positions: dx = dy expanded, divided by their
// count.
absl::Status GlobalAveragePoolRule(D& d, Node& n) {
  Value* x = n.input(0);
  Dims xd = d.DimsOf(x);
  int64_t count = 1;
  for (size_t i = 2; i < xd.size(); ++i) count *= xd[i];
  Value* g = d.Emit("Expand", {d.Dy(n, 0), d.Ints(xd)});
  return d.Give(n, x, d.Emit("Div", {g, d.Scalar(x->type().dtype(), static_cast<double>(count))}));
}

// y = mean over windows (every window divided by its full size: no
// padding, or count_include_pad): dx = a depthwise ConvTranspose of dy by a
// kernel of 1 / window size.
absl::Status AveragePoolRule(D& d, Node& n) {
  Value* x = n.input(0);
  Dims xd = d.DimsOf(x);
  KILN_ASSIGN_OR_RETURN(WindowAttrs win, WindowOf(d, n, xd, nullptr));
  if (win.ceil_mode) return d.Unsupported(n, "ceil_mode");
  bool padded = false;
  for (int64_t p : win.pads) padded |= p != 0;
  if (padded && n.GetInt("count_include_pad", 0) == 0)
    return d.Unsupported(n, "padding left out of the count (count_include_pad = 0)");
  int64_t size = 1;
  for (int64_t k : win.kernel) size *= k;
  Dims kd = {xd[1], 1};
  kd.insert(kd.end(), win.kernel.begin(), win.kernel.end());
  Value* kernel = d.Emit("Expand", {d.Scalar(x->type().dtype(), 1.0 / static_cast<double>(size)), d.Ints(kd)});
  return d.Give(n, x, TransposeWindow(d, d.Dy(n, 0), kernel, win, xd, xd[1]));
}

// y = clip(x, min, max): dx = dy where min <= x <= max (bounds not
// differentiated).
absl::Status ClipRule(D& d, Node& n) {
  if (d.Needs(n, 1) || d.Needs(n, 2)) return d.Unsupported(n, "its bounds depend on a parameter");
  Value* x = n.input(0);
  Value* inside = nullptr;
  if (n.input(1)) inside = d.Emit("GreaterOrEqual", {x, n.input(1)});
  if (n.input(2)) {
    Value* below = d.Emit("LessOrEqual", {x, n.input(2)});
    inside = inside ? d.Emit("And", {inside, below}) : below;
  }
  Value* dy = d.Dy(n, 0);
  if (!inside) return d.Give(n, x, dy);
  return d.Give(n, x, d.Emit("Where", {inside, dy, d.Scalar(dy->type().dtype(), 0)}));
}

// y = x padded with a constant (non-negative pads): dx = the slice of dy
// where x lies.
absl::Status PadRule(D& d, Node& n) {
  if (n.GetString("mode", "constant") != "constant") return d.Unsupported(n, "a mode other than constant");
  if (n.num_inputs() > 3 && n.input(3)) return d.Unsupported(n, "an axes input");
  if (d.Needs(n, 2)) return d.Unsupported(n, "its padding value depends on a parameter");
  auto pads = ConstantInts(n.input(1));
  Value* x = n.input(0);
  Dims xd = d.DimsOf(x);
  int rank = static_cast<int>(xd.size());
  if (!pads || static_cast<int>(pads->size()) != 2 * rank) return d.Unsupported(n, "its pads are not constant");
  std::vector<int64_t> starts, ends, axes;
  for (int i = 0; i < rank; ++i) {
    if ((*pads)[i] < 0 || (*pads)[rank + i] < 0) return d.Unsupported(n, "negative pads");
    starts.push_back((*pads)[i]);
    ends.push_back((*pads)[i] + xd[i]);
    axes.push_back(i);
  }
  return d.Give(n, x, d.Emit("Slice", {d.Dy(n, 0), d.Ints(starts), d.Ints(ends), d.Ints(axes)}));
}

const std::map<std::string, Rule>& Rules() {
  static const std::map<std::string, Rule> rules = {
      {"Add", AddRule},
      {"AveragePool", AveragePoolRule},
      {"BatchNormalization", BatchNormRule},
      {"Cast", CastRule},
      {"Clip", ClipRule},
      {"Concat", ConcatRule},
      {"Conv", ConvRule},
      {"Div", DivRule},
      {"Dropout", DropoutRule},
      {"Erf", ErfRule},
      {"Exp", ExpRule},
      {"Expand", ExpandRule},
      {"Flatten", ReshapeRule},
      {"Gather", GatherRule},
      {"Gemm", GemmRule},
      {"GlobalAveragePool", GlobalAveragePoolRule},
      {"Identity", ReshapeRule},
      {"LayerNormalization", LayerNormRule},
      {"LeakyRelu", LeakyReluRule},
      {"Log", LogRule},
      {"LogSoftmax", LogSoftmaxRule},
      {"MatMul", MatMulRule},
      {"MaxPool", MaxPoolRule},
      {"Mul", MulRule},
      {"Neg", NegRule},
      {"NegativeLogLikelihoodLoss", NllRule},
      {"Pad", PadRule},
      {"Pow", PowRule},
      {"Reciprocal", ReciprocalRule},
      {"ReduceMean", ReduceMeanRule},
      {"ReduceSum", ReduceSumRule},
      {"Relu", ReluRule},
      {"Reshape", ReshapeRule},
      {"Sigmoid", SigmoidRule},
      {"Softmax", SoftmaxRule},
      {"SoftmaxCrossEntropyLoss", SoftmaxCrossEntropyRule},
      {"Split", SplitRule},
      {"Sqrt", SqrtRule},
      {"Squeeze", ReshapeRule},
      {"Sub", SubRule},
      {"Tanh", TanhRule},
      {"Transpose", TransposeRule},
      {"Unsqueeze", ReshapeRule},
      {"Where", WhereRule},
  };
  return rules;
}

}  // namespace

absl::StatusOr<std::vector<Value*>> BuildGradients(Graph& g, Value* loss, const std::vector<Value*>& wrt) {
  if (!IsLossShaped(loss))
    return absl::InvalidArgumentError(
        absl::StrCat("training-step: the loss '", loss->name(), "' must be a float tensor of one element, not ",
                     loss->type().ToString()));
  Differentiator d(g);
  return d.Run(loss, wrt);
}

bool IsLossShaped(const Value* v) {
  return v->type().is_tensor() && IsFloat(v->type().dtype()) && v->type().shape().NumElements() == 1;
}

absl::flat_hash_set<const Value*> Ancestors(const Graph& g, const Value* v) {
  absl::flat_hash_set<const Value*> reaches{v};
  for (const Node* n = g.last_node(); n; n = n->prev()) {
    bool any = false;
    for (const Value* o : n->outputs()) any |= reaches.contains(o);
    if (!any) continue;
    for (const Value* in : n->inputs())
      if (in) reaches.insert(in);
  }
  return reaches;
}

bool IsDifferentiableInput(const Node& n, int i) {
  static const std::map<std::string, std::vector<int>> kNot = {
      {"BatchNormalization", {3, 4}}, {"Clip", {1, 2}}, {"Dropout", {1}}, {"NegativeLogLikelihoodLoss", {2}},
      {"Pad", {2}}, {"Pow", {1}}, {"SoftmaxCrossEntropyLoss", {2}},
  };
  if (!n.domain().empty()) return true;
  auto it = kNot.find(n.op());
  return it == kNot.end() || std::find(it->second.begin(), it->second.end(), i) == it->second.end();
}

std::vector<std::string> DifferentiableOps() {
  std::vector<std::string> ops;
  for (const auto& [op, rule] : Rules()) ops.push_back(op);
  return ops;
}

}  // namespace kiln
