//===- fold_batchnorm.cc - Fold BatchNormalization into Conv/Gemm ---------===//
//
// An inference BatchNormalization is folded when its input is made by a Conv,
// ConvTranspose, Gemm or MatMul whose weights (and bias) are constants and
// which feeds nothing else: y = (conv(x, W) + b - mean) * scale + beta with
// scale = gamma / sqrt(var + eps) per output channel is conv(x, W') + b' with
// W' = W * scale (along the output-channel axis of W) and
// b' = (b - mean) * scale + beta.
//
// Arithmetic is done in double and rounded once to the weight dtype. A
// MatMul with a rank-2 constant weight and a rank-2 input becomes a Gemm with
// the folded bias. New weights are new constants, so weights that other
// nodes share stay as they were.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/fold_batchnorm.h"

#include <array>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/passes/patterns/rewrite_util.h"

namespace kiln {
namespace {

using patterns::CanReplace;
using patterns::KnownRank;
using patterns::ReplaceNode;
using patterns::SingleUser;

// Per-channel scale and shift of an inference BatchNormalization:
// y = x * scale + shift.
struct ChannelAffine {
  std::vector<double> scale, shift;
};

std::optional<ChannelAffine> ReadBatchNorm(const Node* bn) {
  const Tensor* p[4];
  for (int i = 0; i < 4; ++i) {
    p[i] = ConstantData(bn->input(i + 1));
    if (!p[i] || !IsFloat(p[i]->dtype()) || p[i]->rank() != 1) return std::nullopt;
  }
  int64_t c = p[0]->numel();
  for (int i = 1; i < 4; ++i)
    if (p[i]->numel() != c) return std::nullopt;
  double eps = bn->GetFloat("epsilon", 1e-5f);
  ChannelAffine a;
  a.scale.resize(c);
  a.shift.resize(c);
  for (int64_t i = 0; i < c; ++i) {
    double gamma = p[0]->GetDouble(i), beta = p[1]->GetDouble(i);
    double mean = p[2]->GetDouble(i), var = p[3]->GetDouble(i);
    a.scale[i] = gamma / std::sqrt(var + eps);
    a.shift[i] = beta - mean * a.scale[i];
  }
  return a;
}

// W' = W * scale[channel_of(i)] for every element i, rounded once.
template <typename F>
Tensor ScaleWeights(const Tensor& w, const std::vector<double>& scale, F channel_of) {
  Tensor out(w.dtype(), w.dims());
  DispatchFloat(w.dtype(), [&]<typename T>() {
    const T* src = w.data<T>();
    T* dst = out.data<T>();
    for (int64_t i = 0; i < w.numel(); ++i) dst[i] = FromDouble<T>(ToDouble(src[i]) * scale[channel_of(i)]);
  });
  return out;
}

// b' = coef * b * scale + shift over dims `dims` (the broadcast of b's dims
// and [C]); the channel is the last index. b may be null (zero).
Tensor FoldBias(const Tensor* b, double coef, const ChannelAffine& a, DType dtype, const Dims& dims) {
  Tensor out(dtype, dims);
  int64_t c = static_cast<int64_t>(a.scale.size());
  std::vector<double> bv = b ? ToDoubleVector(*b) : std::vector<double>{0.0};
  Dims bdims = b ? b->dims() : Dims{};
  DispatchFloat(dtype, [&]<typename T>() {
    T* dst = out.data<T>();
    ForEachBroadcast<1>(dims, std::array<Dims, 1>{BroadcastStrides(bdims, dims)},
                        [&](int64_t i, const std::array<int64_t, 1>& o) {
                          int64_t ch = i % c;
                          dst[i] = FromDouble<T>(coef * bv[o[0]] * a.scale[ch] + a.shift[ch]);
                        });
  });
  return out;
}

Value* NewConstant(Graph& g, const Value* old, Tensor t, absl::string_view hint) {
  return g.AddConstant(g.UniqueName(old ? absl::string_view(old->name()) : hint), std::move(t));
}

// Replaces input `i` of `n` with `v`, dropping the old constant when unused.
void SetConstInput(Node* n, int i, Value* v) {
  Value* old = n->input(i);
  n->SetInput(i, v);
  if (old && !old->has_uses() && old->is_constant()) old->owner()->EraseValue(old);
}

}  // namespace

std::string FoldBatchNormIntoProducer(Node* bn) {
  if (bn->op() != "BatchNormalization" || !bn->domain().empty() || bn->num_inputs() != 5) return "";
  if (bn->GetInt("training_mode", 0) != 0) return "";
  for (int i = 1; i < bn->num_outputs(); ++i)
    if (bn->output(i)->has_uses()) return "";
  Value* x = bn->input(0);
  if (!x || SingleUser(x) != bn) return "";
  Node* p = x->producer();
  if (!p || !p->domain().empty() || p->num_outputs() != 1) return "";
  const std::string op = p->op();
  if (op != "Conv" && op != "ConvTranspose" && op != "Gemm" && op != "MatMul") return "";
  const Tensor* w = ConstantData(p->input(1));
  if (!w || !IsFloat(w->dtype())) return "";
  const Tensor* b = op == "MatMul" ? nullptr : ConstantData(p->input(2));
  if (op != "MatMul" && p->input(2) && (!b || b->dtype() != w->dtype())) return "";
  auto a = ReadBatchNorm(bn);
  if (!a) return "";
  int64_t c = static_cast<int64_t>(a->scale.size());
  Graph& g = *p->owner();

  if (op == "Conv") {
    // W: [M, C/group, k...]; output channel m is W[m].
    if (w->rank() < 3 || w->dim(0) != c || (b && b->numel() != c)) return "";
    if (!CanReplace(bn->output(0), x)) return "";
    int64_t per = w->numel() / c;
    Tensor nw = ScaleWeights(*w, a->scale, [per](int64_t i) { return i / per; });
    Tensor nb = FoldBias(b ? b : nullptr, 1.0, *a, w->dtype(), {c});
    SetConstInput(p, 1, NewConstant(g, p->input(1), nw, "W"));
    SetConstInput(p, 2, NewConstant(g, p->input(2), nb, "B"));
  } else if (op == "ConvTranspose") {
    // W: [C_in, M/group, k...]; output channel of W[ci, m] is
    // (ci / (C_in/group)) * (M/group) + m.
    int64_t group = p->GetInt("group", 1);
    if (w->rank() < 3 || group <= 0 || w->dim(0) % group != 0 || w->dim(1) * group != c || (b && b->numel() != c))
      return "";
    if (!CanReplace(bn->output(0), x)) return "";
    int64_t m_per = w->dim(1), in_per = w->dim(0) / group, rest = w->numel() / (w->dim(0) * w->dim(1));
    Tensor nw = ScaleWeights(*w, a->scale, [=](int64_t i) {
      int64_t ci = i / (m_per * rest);
      int64_t m = (i / rest) % m_per;
      return (ci / in_per) * m_per + m;
    });
    Tensor nb = FoldBias(b, 1.0, *a, w->dtype(), {c});
    SetConstInput(p, 1, NewConstant(g, p->input(1), nw, "W"));
    SetConstInput(p, 2, NewConstant(g, p->input(2), nb, "B"));
  } else if (op == "Gemm") {
    // Y = alpha * A' B' + beta * C; the channel is the column of Y.
    bool trans_b = p->GetInt("transB", 0) != 0;
    if (w->rank() != 2 || (trans_b ? w->dim(0) : w->dim(1)) != c) return "";
    Dims bias_dims{c};
    if (b) {
      auto d = BroadcastDims(b->dims(), bias_dims);
      if (!d.ok() || d->size() > 2) return "";
      bias_dims = *d;
    }
    if (!CanReplace(bn->output(0), x)) return "";
    int64_t k = trans_b ? w->dim(1) : w->dim(0);
    Tensor nw = trans_b ? ScaleWeights(*w, a->scale, [k](int64_t i) { return i / k; })
                        : ScaleWeights(*w, a->scale, [c](int64_t i) { return i % c; });
    double beta = p->GetFloat("beta", 1.0f);
    Tensor nb = FoldBias(b, beta, *a, w->dtype(), bias_dims);
    SetConstInput(p, 1, NewConstant(g, p->input(1), nw, "B"));
    SetConstInput(p, 2, NewConstant(g, p->input(2), nb, "C"));
    p->SetAttr("beta", Attribute::Float(1.0f));
  } else {  // MatMul(A [M,K], W [K,N]) -> Gemm(A, W', b')
    if (w->rank() != 2 || w->dim(1) != c || KnownRank(p->input(0)) != 2) return "";
    Tensor nw = ScaleWeights(*w, a->scale, [c](int64_t i) { return i % c; });
    Tensor nb = FoldBias(nullptr, 1.0, *a, w->dtype(), {c});
    Node* gemm = g.AddNode("Gemm", {p->input(0), NewConstant(g, p->input(1), nw, "B"), NewConstant(g, nullptr, nb, "C")},
                           1, "", p);
    gemm->set_name(p->name());
    gemm->output(0)->set_type(bn->output(0)->type());
    if (!CanReplace(bn->output(0), gemm->output(0))) {
      patterns::EraseWithDeadInputs(gemm);
      return "";
    }
    ReplaceNode(bn, {gemm->output(0)});
    return op;
  }
  ReplaceNode(bn, {x});
  return op;
}

bool FoldBatchNorms(Graph& graph, PassStatistics* stats) {
  bool changed = false;
  // Straight through the list, up to the node that was last when the sweep
  // began: rewrites insert only before the node visited and erase only it
  // and nodes before it, so the next node is read first.
  for (Node *n = graph.first_node(), *last = graph.last_node(), *next = nullptr; n; n = next) {
    next = n == last ? nullptr : n->next();
    graph.PrefetchAhead(next);
    for (Graph* sub : n->subgraphs()) changed |= FoldBatchNorms(*sub, stats);
    if (n->op() != "BatchNormalization" || !n->domain().empty()) continue;
    std::string into = FoldBatchNormIntoProducer(n);
    if (into.empty()) continue;
    changed = true;
    if (stats) {
      stats->Add("batchnorms-folded");
      stats->Add(absl::StrCat("folded-into-", absl::AsciiStrToLower(into)));
    }
  }
  return changed;
}

namespace {

class FoldBatchNormPass : public Pass {
 public:
  absl::string_view name() const override { return "fold-batchnorm"; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    if (!graph.NestMayHoldOp("BatchNormalization")) return false;  // nothing to walk for
    return FoldBatchNorms(graph, &stats());
  }
};

}  // namespace

std::unique_ptr<Pass> CreateFoldBatchNormPass() { return std::make_unique<FoldBatchNormPass>(); }

}  // namespace kiln
