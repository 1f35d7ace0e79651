//===- training_step.cc - Append the backward pass and an SGD step --------===//
#include "graph/passes/training_step.h"

#include <algorithm>
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
  for (Value* c = g.first_constant(); c; c = c->next_constant()) {
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

// A new output named `name` (or a fresh name from it) holding `v`.
void AddNamedOutput(Graph& g, Value* v, const std::string& name) {
  std::string out = g.NameInRootNest(name) ? g.UniqueName(name) : name;
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
  for (Held& h : held) {
    const std::vector<Value*>& ins = g.inputs();
    g.RemoveInput(static_cast<int>(std::find(ins.begin(), ins.end(), h.input) - ins.begin()));
  }
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

absl::StatusOr<TrainingStepReport> AppendTrainingStep(Graph& g, const TrainingOptions& options,
                                                      int64_t fold_max_elements) {
  if (!(options.learning_rate >= 0)) return Error("the learning rate must not be negative");
  if (options.replicas < 1 || options.replicas > kMaxReplicas)
    return Error(absl::StrCat("replicas must be between 1 and ", kMaxReplicas, ", not ", options.replicas));
  KILN_RETURN_IF_ERROR(InferShapesWithLoops(g).status());
  KILN_ASSIGN_OR_RETURN(Value * loss, FindLoss(g, options.loss));
  KILN_ASSIGN_OR_RETURN(std::vector<Value*> params, FindParams(g, loss, options.params));
  KILN_ASSIGN_OR_RETURN(params, FoldAroundParams(g, params, fold_max_elements));
  size_t before = g.num_nodes();
  KILN_ASSIGN_OR_RETURN(std::vector<Value*> grads, BuildGradients(g, loss, params));
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
  std::map<DType, Value*> rates;  // one learning-rate constant per dtype
  std::vector<Value*> next(params.size());
  for (size_t i : order) {
    DType t = params[i]->type().dtype();
    Value*& lr = rates[t];
    if (!lr) lr = patterns::ScalarConst(g, t, options.learning_rate, "learning_rate");
    Node* step = g.AddNode("Mul", {grads[i], lr}, 1);
    Node* sub = g.AddNode("Sub", {params[i], step->output(0)}, 1);
    step->output(0)->set_type(params[i]->type());
    sub->output(0)->set_type(params[i]->type());
    next[i] = sub->output(0);
  }
  for (size_t i = 0; i < params.size(); ++i) AddNamedOutput(g, next[i], params[i]->name() + ".next");
  report.nodes_added = static_cast<int64_t>(g.num_nodes() - before);
  return report;
}

std::unique_ptr<Pass> CreateTrainingStepPass() { return std::make_unique<TrainingStepPass>(); }

}  // namespace kiln
