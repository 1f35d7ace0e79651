//===- training_step.cc - Append the backward pass and an SGD step --------===//
#include "graph/passes/training_step.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/passes/gradients.h"
#include "graph/passes/fold_constants.h"
#include "graph/passes/infer_shapes.h"
#include "graph/passes/patterns/rewrite_util.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

absl::Status Error(absl::string_view msg) { return absl::InvalidArgumentError(absl::StrCat("training-step: ", msg)); }

absl::StatusOr<Value*> FindLoss(Graph& g, const std::string& name) {
  if (!name.empty()) {
    for (Value* v : g.outputs())
      if (v->name() == name) return v;
    std::vector<std::string> names;
    for (Value* v : g.outputs()) names.push_back(v->name());
    return Error(absl::StrCat("--loss='", name, "' is not a graph output (outputs: ", absl::StrJoin(names, ", "), ")"));
  }
  Value* loss = nullptr;
  for (Value* v : g.outputs()) {
    if (!IsLossShaped(v) || v == loss) continue;
    if (loss) return Error(absl::StrCat("outputs '", loss->name(), "' and '", v->name(),
                                        "' could both be the loss: name it with --loss"));
    loss = v;
  }
  if (!loss) return Error("no graph output is a float tensor of one element: name the loss with --loss");
  return loss;
}

absl::StatusOr<std::vector<Value*>> FindParams(Graph& g, Value* loss, const std::vector<std::string>& names) {
  std::vector<Value*> params;
  if (!names.empty()) {
    for (const std::string& name : names) {
      Value* v = g.Lookup(name);
      if (!v || !v->is_constant()) return Error(absl::StrCat("--params: '", name, "' is not a constant of the graph"));
      if (!v->type().is_tensor() || !IsFloat(v->type().dtype()))
        return Error(absl::StrCat("--params: '", name, "' is not a float tensor"));
      if (std::find(params.begin(), params.end(), v) == params.end()) params.push_back(v);
    }
    return params;
  }
  absl::flat_hash_set<const Value*> reaches = Ancestors(g, loss);
  for (Value* c = g.first_constant(); c; c = g.NextConstant(c)) {
    if (!reaches.contains(c) || !c->type().is_tensor() || !IsFloat(c->type().dtype()) ||
        c->type().shape().rank() < 1)
      continue;
    // Read where a gradient flows (not only as statistics or bounds).
    bool weight = false;
    for (const Use& u : c->uses()) weight |= u.user && IsDifferentiableInput(*u.user, u.index);
    if (weight) params.push_back(c);
  }
  if (params.empty()) return Error(absl::StrCat("the loss '", loss->name(), "' depends on no float constant of rank >= 1"));
  return params;
}

// `name`, or a fresh name from it where it is taken.
std::string FreeName(Graph& g, const std::string& name) { return g.NameInRootNest(name) ? g.UniqueName(name) : name; }

// A new output named `name` (or a fresh name from it) holding `v`.
void AddNamedOutput(Graph& g, Value* v, const std::string& name) {
  std::string out = FreeName(g, name);
  Node* id = g.AddNode("Identity", {v}, std::vector<std::string>{out});
  id->output(0)->set_type(v->type());
  g.AddOutput(id->output(0));
}

// Data parallelism: each gradient becomes the mean of its replicas'
// (kiln.AllReduce, one per gradient, placed right after the gradient's
// producer). Returns the means.
std::vector<Value*> AllReduceGradients(Graph& g, const std::vector<Value*>& params, const std::vector<Value*>& grads,
                                       int replicas) {
  std::vector<Value*> means;
  for (size_t i = 0; i < grads.size(); ++i) {
    Value* v = grads[i];
    Node* ar = g.AddNode("AllReduce", {v}, std::vector<std::string>{g.UniqueName(v->name() + ".mean")}, "kiln");
    ar->set_name(params[i]->name() + ".allreduce");
    ar->SetAttr("replicas", Attribute::Int(replicas));
    ar->output(0)->set_type(v->type());
    if (Node* p = v->producer()) g.MoveNode(ar, p->next());
    means.push_back(ar->output(0));
  }
  return means;
}

// Appends a step's nodes to a graph: scalar constants (one per hint and
// dtype) and ops whose output type is given.
class StepBuilder {
 public:
  explicit StepBuilder(Graph& g) : g_(g) {}

  Value* Scalar(DType dt, double x, absl::string_view hint) {
    Value*& v = scalars_[{std::string(hint), dt}];
    if (!v) v = patterns::ScalarConst(g_, dt, x, hint);
    return v;
  }
  Value* Op(const char* op, Value* a, const Type& type) {
    Node* n = g_.AddNode(op, {a}, 1);
    n->output(0)->set_type(type);
    return n->output(0);
  }
  Value* Op(const char* op, Value* a, Value* b, const Type& type) {
    Node* n = g_.AddNode(op, {a, b}, 1);
    n->output(0)->set_type(type);
    return n->output(0);
  }
  Value* Op(const char* op, Value* a, Value* b, Value* c, const Type& type) {
    Node* n = g_.AddNode(op, {a, b, c}, 1);
    n->output(0)->set_type(type);
    return n->output(0);
  }
  // `v` as `dt` (a Cast where it is not).
  Value* As(Value* v, DType dt) {
    if (v->type().dtype() == dt) return v;
    Node* cast = g_.AddNode("Cast", {v}, 1);
    cast->SetAttr("to", Attribute::Int(static_cast<int64_t>(DTypeToOnnx(dt))));
    cast->output(0)->set_type(Type::Tensor(dt, v->type().shape()));
    return cast->output(0);
  }

 protected:
  Graph& g_;

 private:
  std::map<std::pair<std::string, DType>, Value*> scalars_;
};

// The update of each parameter by the optimizer (TrainingOptions), as
// torch.optim writes it. Scalars (learning rate, betas) are one constant
// per value and dtype; state is a zero constant per parameter, named after
// it as PyTorch names its state (P.momentum_buffer, P.exp_avg,
// P.exp_avg_sq), and Adam's step count is one constant, `optimizer.step`,
// shared by the parameters.
class Updater : public StepBuilder {
 public:
  // A constant of the optimizer's state and its value after the step.
  struct State {
    Value* value = nullptr;
    Value* next = nullptr;
  };

  Updater(Graph& g, const TrainingOptions& o) : StepBuilder(g), o_(o) {}

  // P after the step from its gradient; appends P's state to `state`.
  Value* Update(Value* p, Value* grad, std::vector<State>* state) {
    const Type& t = p->type();
    const DType dt = t.dtype();
    using Opt = TrainingOptions::Optimizer;
    if (o_.optimizer == Opt::kSgd) {
      Value* d = Decayed(p, grad);
      if (o_.momentum > 0) {
        // buf = momentum * buf + d (PyTorch's first step copies d: the
        // same, from a zero buffer); Nesterov steps along d + momentum * buf.
        Value* buf = Zeros(p, "momentum_buffer");
        Value* mu = Scalar(dt, o_.momentum, "momentum");
        Value* buf_next = Op("Add", Op("Mul", buf, mu, t), d, t);
        state->push_back({buf, buf_next});
        d = o_.nesterov ? Op("Add", d, Op("Mul", buf_next, mu, t), t) : buf_next;
      }
      return Op("Sub", p, Op("Mul", d, Scalar(dt, o_.learning_rate, "learning_rate"), t), t);
    }
    // Adam and AdamW.
    Value* d = o_.optimizer == Opt::kAdam ? Decayed(p, grad) : grad;
    Value* m = Zeros(p, "exp_avg");
    Value* v = Zeros(p, "exp_avg_sq");
    Value* m_next = Op("Add", Op("Mul", m, Scalar(dt, o_.beta1, "beta1"), t),
                       Op("Mul", d, Scalar(dt, 1 - o_.beta1, "one_minus_beta1"), t), t);
    Value* v_next = Op("Add", Op("Mul", v, Scalar(dt, o_.beta2, "beta2"), t),
                       Op("Mul", Op("Mul", d, d, t), Scalar(dt, 1 - o_.beta2, "one_minus_beta2"), t), t);
    state->push_back({m, m_next});
    state->push_back({v, v_next});
    const Corrections& c = CorrectionsFor(dt);
    // denom = sqrt(v) / sqrt(1 - beta2^t) + eps; p -= lr / (1 - beta1^t) * m / denom.
    Value* denom = Op("Add", Op("Div", Op("Sqrt", v_next, t), c.sqrt_bc2, t), Scalar(dt, o_.epsilon, "epsilon"), t);
    Value* step = Op("Mul", Op("Div", m_next, denom, t), c.step_size, t);
    Value* base = p;
    if (o_.optimizer == Opt::kAdamW && o_.weight_decay > 0)
      base = Op("Mul", p, Scalar(dt, 1 - o_.learning_rate * o_.weight_decay, "decay_factor"), t);
    return Op("Sub", base, step, t);
  }

  // Adam's step count and its next value (null for SGD).
  State steps() const { return steps_; }

 private:
  // The bias corrections of Adam's step for one dtype.
  struct Corrections {
    Value* sqrt_bc2 = nullptr;   // sqrt(1 - beta2^t)
    Value* step_size = nullptr;  // lr / (1 - beta1^t)
  };

  // d + weight_decay * p (L2 regularization as SGD and Adam apply it).
  Value* Decayed(Value* p, Value* d) {
    if (o_.weight_decay <= 0) return d;
    const Type& t = p->type();
    return Op("Add", d, Op("Mul", p, Scalar(t.dtype(), o_.weight_decay, "weight_decay"), t), t);
  }

  const Corrections& CorrectionsFor(DType dt) {
    auto it = corrections_.find(dt);
    if (it != corrections_.end()) return it->second;
    const Type scalar = Type::Tensor(dt, Shape::Static({}));
    if (!steps_.value) {
      steps_.value = g_.AddConstant(FreeName(g_, "optimizer.step"), CastTensor(Tensor::Scalar<double>(0), dt));
      steps_.next = Op("Add", steps_.value, Scalar(dt, 1, "one"), scalar);
    }
    Value* t = As(steps_.next, dt);
    Value* one = Scalar(dt, 1, "one");
    Value* bc1 = Op("Sub", one, Op("Pow", Scalar(dt, o_.beta1, "beta1"), t, scalar), scalar);
    Value* bc2 = Op("Sub", one, Op("Pow", Scalar(dt, o_.beta2, "beta2"), t, scalar), scalar);
    Corrections c;
    c.sqrt_bc2 = Op("Sqrt", bc2, scalar);
    c.step_size = Op("Div", Scalar(dt, o_.learning_rate, "learning_rate"), bc1, scalar);
    return corrections_.emplace(dt, c).first->second;
  }

  Value* Zeros(Value* p, absl::string_view what) {
    return g_.AddConstant(FreeName(g_, absl::StrCat(p->name(), ".", what)),
                          Tensor(p->type().dtype(), p->type().shape().StaticDims()));
  }

  const TrainingOptions& o_;
  std::map<DType, Corrections> corrections_;
  State steps_;
};

// Loss scaling (TrainingOptions::loss_scaling): what the backward pass
// starts from, the unscaling of each gradient, and for a dynamic scale the
// check that the gradients are finite, the updates kept only then, and the
// scale's own update.
class LossScaler : public StepBuilder {
 public:
  // The most elements the finiteness check sums in one row.
  static constexpr int64_t kRowElements = 4096;

  LossScaler(Graph& g, const TrainingOptions& o, Value* loss) : StepBuilder(g), o_(o), loss_(loss) {
    if (o_.loss_scaling == TrainingOptions::LossScaling::kNone) return;
    const DType dt = loss->type().dtype();
    scale_ = g_.AddConstant(FreeName(g_, "loss_scale"), CastTensor(Tensor::Scalar<double>(o_.loss_scale), dt));
    scaled_ = Op("Mul", loss, scale_, scalar());
    inverse_ = Op("Reciprocal", scale_, scalar());
  }

  // The value to differentiate: the loss, or the loss times the scale.
  Value* scaled_loss() const { return scaled_ ? scaled_ : loss_; }

  // The gradient of the loss from the gradient of the scaled loss.
  Value* Unscale(Value* grad) {
    if (!inverse_) return grad;
    return Op("Mul", grad, As(inverse_, grad->type().dtype()), grad->type());
  }

  // A dynamic scale: `ok` (a bool scalar) is whether every gradient is
  // finite. x * 0 is 0 for a finite x and NaN for an infinite or NaN one,
  // so the sum of all of them is 0 exactly when every gradient is finite
  // (and cannot overflow).
  void CheckFinite(const std::vector<Value*>& grads) {
    if (o_.loss_scaling != TrainingOptions::LossScaling::kDynamic) return;
    const DType dt = loss_->type().dtype();
    Value* total = nullptr;
    for (Value* gr : grads) {
      const DType gt = gr->type().dtype();
      // A large gradient is summed as rows and then their sums (a
      // reduction of one long row fits no vector unit's buffer).
      const int64_t n = gr->type().shape().NumElements();
      int64_t cols = 1;
      for (int64_t c = std::min<int64_t>(n, kRowElements); c > 1; --c)
        if (n % c == 0) {
          cols = c;
          break;
        }
      Value* in = gr;
      if (n > kRowElements && cols > 1 && n / cols <= kRowElements) {
        Node* rows = g_.AddNode("Reshape", {gr, g_.AddConstant(g_.UniqueName("finite.rows"),
                                                               Tensor::FromVector<int64_t>({n / cols, cols}, {2}))}, 1);
        rows->output(0)->set_type(Type::Tensor(gt, Shape::Static({n / cols, cols})));
        in = rows->output(0);
      }
      Value* zeros = Op("Mul", in, Scalar(gt, 0, "zero"), in->type());
      Value* sum = zeros;
      if (in != gr) {
        Node* row_sums = g_.AddNode("ReduceSum", {zeros, g_.AddConstant(g_.UniqueName("finite.axis"),
                                                                        Tensor::FromVector<int64_t>({1}, {1}))}, 1);
        row_sums->SetAttr("keepdims", Attribute::Int(0));
        row_sums->output(0)->set_type(Type::Tensor(gt, Shape::Static({n / cols})));
        sum = row_sums->output(0);
      }
      Node* all = g_.AddNode("ReduceSum", {sum}, 1);
      all->SetAttr("keepdims", Attribute::Int(0));
      all->output(0)->set_type(Type::Tensor(gt, Shape::Static({})));
      Value* s = As(all->output(0), dt);
      total = total ? Op("Add", total, s, scalar()) : s;
    }
    if (!total) total = Scalar(dt, 0, "zero");
    ok_ = Op("Equal", total, Scalar(dt, 0, "zero"), Type::Tensor(DType::kBool, Shape::Static({})));
  }

  // `next` where the step is kept, `old` where it is skipped.
  Value* Keep(Value* next, Value* old) { return ok_ ? Op("Where", ok_, next, old, old->type()) : next; }

  // A dynamic scale's state: the scale and the count of finite steps in a
  // row, with their values after the step (GradScaler's update: on a
  // skipped step the scale halves and the count restarts; the count
  // reaching the growth interval doubles the scale and restarts it).
  std::vector<Updater::State> DynamicState() {
    if (!ok_) return {};
    const DType dt = loss_->type().dtype();
    Value* good = g_.AddConstant(FreeName(g_, scale_->name() + ".good_steps"), CastTensor(Tensor::Scalar<double>(0), dt));
    Value* zero = Scalar(dt, 0, "zero");
    Value* counted = Op("Add", good, Scalar(dt, 1, "one"), scalar());
    Value* grow = Op("Less", counted, Scalar(dt, o_.loss_scale_growth_interval, "growth_interval"),
                     Type::Tensor(DType::kBool, Shape::Static({})));
    auto where = [&](Value* c, Value* a, Value* b) { return Op("Where", c, a, b, scalar()); };
    // grow is "fewer than the interval": keep counting, else double and restart.
    Value* kept_scale = where(grow, scale_, Op("Mul", scale_, Scalar(dt, 2, "growth_factor"), scalar()));
    Value* kept_good = where(grow, counted, zero);
    Value* scale_next = where(ok_, kept_scale, Op("Mul", scale_, Scalar(dt, 0.5, "backoff_factor"), scalar()));
    Value* good_next = where(ok_, kept_good, zero);
    return {{scale_, scale_next}, {good, good_next}};
  }

 private:
  Type scalar() const { return Type::Tensor(loss_->type().dtype(), Shape::Static({})); }

  const TrainingOptions& o_;
  Value* loss_;
  Value* scale_ = nullptr;
  Value* scaled_ = nullptr;
  Value* inverse_ = nullptr;
  Value* ok_ = nullptr;
};

// The running statistics of training-mode BatchNormalization nodes: each
// constant running mean or variance (inputs 3, 4) and the node's updated
// value of it (outputs 1, 2), where the node has them. They update in the
// forward pass, so a step that dynamic loss scaling skips updates them too,
// as PyTorch's forward does.
std::vector<Updater::State> RunningStatistics(Graph& g) {
  std::vector<Updater::State> out;
  for (Node* n : g.nodes()) {
    if (n->op() != "BatchNormalization" || !n->domain().empty() || n->GetInt("training_mode", 0) == 0) continue;
    for (int k = 1; k <= 2 && k < n->num_outputs(); ++k) {
      Value* running = n->input(k + 2);
      // A constant shared by two nodes is updated by the first.
      const bool seen = std::any_of(out.begin(), out.end(), [&](const Updater::State& s) { return s.value == running; });
      if (running && running->is_constant() && n->output(k) && !seen) out.push_back({running, n->output(k)});
    }
  }
  return out;
}

// Removes graph input `v` (which has no uses left).
void RemoveGraphInput(Graph& g, const Value* v) {
  const std::vector<Value*>& ins = g.inputs();
  g.RemoveInput(static_cast<int>(std::find(ins.begin(), ins.end(), v) - ins.begin()));
}

// Turns each constant of `constants` into a graph input of the same name
// whose initial value is the constant's data (appended to the inputs in
// this order).
void MakeVariables(Graph& g, const std::vector<Value*>& constants) {
  for (Value* c : constants) {
    const std::string name = c->name();
    Tensor data = c->constant();
    // Through a stand-in while the constant still holds the name.
    Value* stand_in = g.AddInput(g.UniqueName(name), c->type());
    c->ReplaceAllUsesWith(stand_in);
    g.EraseValue(c);
    Value* in = g.AddInput(name, stand_in->type());
    in->set_initial(std::move(data));
    stand_in->ReplaceAllUsesWith(in);
    RemoveGraphInput(g, stand_in);
  }
}

// Folds what does not depend on the parameters (the Shape -> Gather ->
// Concat -> Reshape plumbing of PyTorch exports), so that every shape
// between the parameters and the loss is static. The parameters stand in
// as graph inputs meanwhile, which nothing folds; they come back as the
// same constants, names and order. Returns them again.
absl::StatusOr<std::vector<Value*>> FoldAroundParams(Graph& g, const std::vector<Value*>& params,
                                                     int64_t max_elements) {
  struct Held {
    std::string name;
    Tensor data;
    Value* input;
  };
  std::vector<Held> held;
  for (Value* p : params) {
    Held h{p->name(), p->constant(), g.AddInput(g.UniqueName(p->name()), p->type())};
    p->ReplaceAllUsesWith(h.input);
    g.EraseValue(p);
    held.push_back(std::move(h));
  }
  for (int round = 0; round < 16; ++round) {
    KILN_RETURN_IF_ERROR(InferShapesWithLoops(g).status());
    if (FoldConstants(g, max_elements).nodes_removed == 0) break;
  }
  std::vector<Value*> back;
  for (Held& h : held) {
    Value* c = g.AddConstant(h.name, h.data);
    h.input->ReplaceAllUsesWith(c);
    back.push_back(c);
  }
  for (Held& h : held) RemoveGraphInput(g, h.input);
  KILN_RETURN_IF_ERROR(InferShapesWithLoops(g).status());
  return back;
}

class TrainingStepPass : public Pass {
 public:
  absl::string_view name() const override { return "training-step"; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    KILN_ASSIGN_OR_RETURN(TrainingStepReport r,
                          AppendTrainingStep(graph, options().training, options().fold_max_elements));
    stats().Add("parameters", static_cast<int64_t>(r.params.size()));
    stats().Add("nodes-added", r.nodes_added);
    return true;
  }
};

}  // namespace

absl::StatusOr<TrainingOptions::Optimizer> ParseOptimizer(absl::string_view name) {
  using Opt = TrainingOptions::Optimizer;
  for (Opt o : {Opt::kSgd, Opt::kAdam, Opt::kAdamW})
    if (name == OptimizerName(o)) return o;
  return absl::InvalidArgumentError(absl::StrCat("unknown optimizer '", name, "' (known: sgd, adam, adamw)"));
}

absl::string_view OptimizerName(TrainingOptions::Optimizer o) {
  switch (o) {
    case TrainingOptions::Optimizer::kSgd: return "sgd";
    case TrainingOptions::Optimizer::kAdam: return "adam";
    case TrainingOptions::Optimizer::kAdamW: return "adamw";
  }
  return "?";
}

absl::Status CheckTrainingOptions(const TrainingOptions& o) {
  // Written so that NaN fails every check.
  if (!(o.learning_rate >= 0)) return Error("the learning rate must not be negative");
  if (o.replicas < 1 || o.replicas > kMaxReplicas)
    return Error(absl::StrCat("replicas must be between 1 and ", kMaxReplicas, ", not ", o.replicas));
  if (!(o.weight_decay >= 0)) return Error("the weight decay (--weight-decay) must not be negative");
  const bool sgd = o.optimizer == TrainingOptions::Optimizer::kSgd;
  if (!(o.momentum >= 0 && o.momentum < 1)) return Error("the momentum (--momentum) must be in [0, 1)");
  if (!sgd && o.momentum > 0) return Error(absl::StrCat("--momentum is SGD's; ", OptimizerName(o.optimizer), " has --betas"));
  if (o.nesterov && !(sgd && o.momentum > 0)) return Error("--nesterov needs SGD with a momentum above 0");
  if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1)) return Error("the betas (--betas) must be in [0, 1)");
  if (!(o.epsilon > 0) || std::isinf(o.epsilon)) return Error("--epsilon must be positive and finite");
  if (std::isinf(o.learning_rate) || std::isinf(o.weight_decay))
    return Error("the learning rate and the weight decay must be finite");
  if (o.loss_scaling != TrainingOptions::LossScaling::kNone && !(o.loss_scale > 0 && o.loss_scale < 1e38))
    return Error("the loss scale (--loss-scale) must be positive and below 1e38");
  if (o.loss_scale_growth_interval < 1) return Error("--loss-scale-growth-interval must be at least 1");
  return absl::OkStatus();
}

absl::StatusOr<TrainingStepReport> AppendTrainingStep(Graph& g, const TrainingOptions& options,
                                                      int64_t fold_max_elements) {
  KILN_RETURN_IF_ERROR(CheckTrainingOptions(options));
  KILN_RETURN_IF_ERROR(InferShapesWithLoops(g).status());
  KILN_ASSIGN_OR_RETURN(Value * loss, FindLoss(g, options.loss));
  KILN_ASSIGN_OR_RETURN(std::vector<Value*> params, FindParams(g, loss, options.params));
  KILN_ASSIGN_OR_RETURN(params, FoldAroundParams(g, params, fold_max_elements));
  size_t before = g.num_nodes();
  LossScaler scaler(g, options, loss);
  KILN_ASSIGN_OR_RETURN(std::vector<Value*> grads, BuildGradients(g, scaler.scaled_loss(), params));
  for (Value*& gr : grads) gr = scaler.Unscale(gr);
  TrainingStepReport report;
  // The order the updates run in: the parameters' order, or, for a
  // data-parallel step, the order their gradients are ready in (the last
  // layer's first), so that an update waits only for its own gradient's
  // AllReduce and the ones before it.
  std::vector<size_t> order(params.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (options.replicas > 1) {
    grads = AllReduceGradients(g, params, grads, options.replicas);
    absl::flat_hash_map<const Node*, size_t> position;
    for (const Node* n : g.nodes()) position.emplace(n, position.size());
    auto ready = [&](size_t i) {
      const Node* p = grads[i]->producer();
      return p ? position.at(p) : size_t{0};
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ready(a) < ready(b); });
  }
  for (size_t i = 0; i < params.size(); ++i) {
    report.params.push_back(params[i]->name());
    AddNamedOutput(g, grads[i], params[i]->name() + ".grad");
  }
  scaler.CheckFinite(grads);
  Updater updater(g, options);
  std::vector<Value*> next(params.size());
  std::vector<std::vector<Updater::State>> state(params.size());
  for (size_t i : order) {
    next[i] = scaler.Keep(updater.Update(params[i], grads[i], &state[i]), params[i]);
    for (Updater::State& s : state[i]) s.next = scaler.Keep(s.next, s.value);
  }
  // The state after the parameters: each parameter's, Adam's step count,
  // then a dynamic loss scale's.
  std::vector<Updater::State> shared;
  if (Updater::State steps = updater.steps(); steps.value) shared.push_back({steps.value, scaler.Keep(steps.next, steps.value)});
  for (const Updater::State& s : scaler.DynamicState()) shared.push_back(s);
  for (size_t i = 0; i < params.size(); ++i) AddNamedOutput(g, next[i], params[i]->name() + ".next");
  std::vector<Value*> variables = params;
  // Each piece of state is an output NAME.next and a variable.
  auto expose = [&](const std::vector<Updater::State>& states) {
    for (const Updater::State& s : states) {
      AddNamedOutput(g, s.next, s.value->name() + ".next");
      variables.push_back(s.value);
    }
  };
  for (size_t i = 0; i < params.size(); ++i) expose(state[i]);
  expose(RunningStatistics(g));
  expose(shared);
  if (options.state_as_inputs) MakeVariables(g, variables);
  report.nodes_added = static_cast<int64_t>(g.num_nodes() - before);
  return report;
}

std::unique_ptr<Pass> CreateTrainingStepPass() { return std::make_unique<TrainingStepPass>(); }

}  // namespace kiln
