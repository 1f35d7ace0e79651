//===- split_reductions.cc - Reductions the vector unit runs in two -------===//
#include "target/npusim/split_reductions.h"

#include <vector>

#include "graph/passes/patterns/rewrite_util.h"

namespace kiln::target::npusim {
namespace {

bool IsSplittable(const Node& n) {
  if (!n.domain().empty()) return false;
  const std::string& op = n.op();
  return op == "ReduceSum" || op == "ReduceMean" || op == "ReduceMax" || op == "ReduceMin";
}

// The reduced axes of `n` over input dims `x` (empty: not a static
// reduction this rewrite understands).
std::vector<bool> Reduced(const Node& n, const Dims& x) {
  const int rank = static_cast<int>(x.size());
  std::vector<int64_t> axes;
  if (n.op() == "ReduceSum") {
    if (n.num_inputs() > 1 && n.input(1)) {
      const Tensor* a = n.input(1)->constant_data();
      if (!a) return {};
      for (int64_t i = 0; i < a->numel(); ++i) axes.push_back(static_cast<int64_t>(a->GetDouble(i)));
    }
    if (axes.empty() && n.GetInt("noop_with_empty_axes", 0) != 0) return {};
  } else {
    axes = n.GetInts("axes", {});
  }
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return {};
    reduced[a < 0 ? a + rank : a] = true;
  }
  return reduced;
}

// Whether the reduced axes (size-1 axes aside) are the innermost ones or
// one contiguous block: what the vector unit runs in one kernel.
bool OneKernel(const std::vector<bool>& reduced, const Dims& x) {
  int phase = 0;  // 0: kept before, 1: reduced, 2: kept after
  bool inner_only = true;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == 1) continue;
    int want = reduced[i] ? 1 : (phase == 0 ? 0 : 2);
    if (want < phase) return false;
    if (want == 2) inner_only = false;
    phase = want;
  }
  return inner_only || phase >= 1;
}

// A reduction like `n` of `in` over `axes`.
Node* Reduction(Graph& g, const Node& n, Value* in, const std::vector<int64_t>& axes, int64_t keepdims, Node* before) {
  Node* r;
  if (n.op() == "ReduceSum") {
    Value* a = g.AddConstant(g.UniqueName(n.name() + ".axes"), Tensor::FromVector<int64_t>(axes, {static_cast<int64_t>(axes.size())}));
    r = g.AddNode("ReduceSum", {in, a}, 1, "", before);
  } else {
    r = g.AddNode(n.op(), {in}, 1, "", before);
    r->SetAttr("axes", Attribute::Ints(axes));
  }
  r->SetAttr("keepdims", Attribute::Int(keepdims));
  r->set_name(n.name());
  patterns::InferNodeTypes(r);
  return r;
}

}  // namespace

int SplitReductionsForVector(Graph& g) {
  int split = 0;
  for (Node* n : g.NodeList()) {
    if (!IsSplittable(*n) || n->num_outputs() != 1 || !n->input(0)) continue;
    const Type& t = n->input(0)->type();
    if (!t.is_tensor() || !t.shape().is_static() || !IsFloat(t.dtype())) continue;
    const Dims x = t.shape().StaticDims();
    std::vector<bool> reduced = Reduced(*n, x);
    if (reduced.empty() || OneKernel(reduced, x)) continue;
    // The innermost reduced axes (size-1 axes aside) first, kept as size 1.
    std::vector<int64_t> inner, all;
    for (int i = static_cast<int>(x.size()) - 1; i >= 0; --i) {
      if (x[i] == 1) continue;
      if (!reduced[i]) break;
      inner.insert(inner.begin(), i);
    }
    for (size_t i = 0; i < x.size(); ++i)
      if (reduced[i]) all.push_back(static_cast<int64_t>(i));
    std::vector<bool> rest = reduced;
    Dims after = x;
    for (int64_t i : inner) after[i] = 1;
    if (inner.empty() || !OneKernel(rest, after)) continue;
    Node* first = Reduction(g, *n, n->input(0), inner, 1, n);
    Node* second = Reduction(g, *n, first->output(0), all, n->GetInt("keepdims", 1), n);
    patterns::ReplaceNode(n, {second->output(0)});
    ++split;
  }
  return split;
}

}  // namespace kiln::target::npusim
