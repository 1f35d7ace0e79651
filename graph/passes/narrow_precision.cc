//===- narrow_precision.cc - Matrix work in fp16/bf16 ---------------------===//
#include "graph/passes/narrow_precision.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "graph/ops/matmul.h"
#include "graph/passes/rewrite_helpers.h"
#include "graph/support/float16.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

// Ops that, given values of a narrow float type, compute what the f32 op
// computes on them widened and round the result once to the narrow type.
// Bit for bit the same values (the clear list): ops that select one of
// their operands (Relu, Clip to representable bounds, Max, Min, max
// pooling, Gather, Where), views (a view of a narrow value is narrow, still
// no kernel) and copies (Transpose, Split), which run on any dtype in half
// the bytes. One rounding (the infer list): of an exact f32 result, within
// the error the fp16/bf16 modes allow, Add, Sub, Mul (one f16 instruction,
// or f32 and a conversion for bf16) and average pooling (the kernels sum in
// f32 and convert once); of an f32 computation, LayerNormalization, Softmax
// and GELU, whose kernels widen their inputs, compute in f32 and convert the
// result once. Both device targets have kernels for each of them in f16 and
// bf16 (npusim vector kernels; the cuda target's, which compute every op in
// f32 between converting loads and stores): a transformer's activations
// stay narrow from the embedding lookup through attention, the MLP and the
// residual stream.
constexpr const char* kAllowOps[] = {"MatMul", "Gemm", "Conv"};
constexpr const char* kInferOps[] = {
    "Add", "Sub", "Mul", "AveragePool", "GlobalAveragePool", "LayerNormalization", "Softmax", "kiln.Gelu",
};
constexpr const char* kClearOps[] = {
    "Relu",    "Clip",    "Max",     "Min",       "MaxPool",  "GlobalMaxPool", "Reshape", "Flatten",
    "Squeeze", "Unsqueeze", "Identity", "Transpose", "Split", "Gather",        "Where",
};

enum class OpList { kAllow, kInfer, kClear, kDeny };

// The name `n`'s op has on the lists: "Relu", or "kiln.Gelu" for another domain.
std::string ListName(const Node& n) { return n.domain().empty() ? n.op() : n.QualifiedOp(); }

// Each op's list: the defaults above, with a MixedPrecisionOptions' edits.
class OpLists {
 public:
  explicit OpLists(const MixedPrecisionOptions* edits = nullptr) {
    for (const char* op : kAllowOps) lists_[op] = OpList::kAllow;
    for (const char* op : kInferOps) lists_[op] = OpList::kInfer;
    for (const char* op : kClearOps) lists_[op] = OpList::kClear;
    if (!edits) return;
    for (const std::string& op : edits->allow) lists_[op] = OpList::kAllow;
    for (const std::string& op : edits->infer) lists_[op] = OpList::kInfer;
    for (const std::string& op : edits->clear) lists_[op] = OpList::kClear;
    for (const std::string& op : edits->deny) lists_[op] = OpList::kDeny;
  }
  OpList Of(const Node& n) const {
    auto it = lists_.find(ListName(n));
    return it == lists_.end() ? OpList::kDeny : it->second;
  }
  // The list an op is on without edits.
  static OpList Default(absl::string_view op) {
    auto in = [&](absl::Span<const char* const> ops) {
      return std::find(ops.begin(), ops.end(), op) != ops.end();
    };
    return in(kAllowOps) ? OpList::kAllow : in(kInferOps) ? OpList::kInfer : in(kClearOps) ? OpList::kClear : OpList::kDeny;
  }

 private:
  absl::flat_hash_map<std::string, OpList> lists_;
};

// Whether `n`, whose op is on the infer or clear list, may compute in the
// narrow type at all. MaxPool's Indices output has host kernels only (the
// AICPU, the cuda target's host tasks): such a node stays as it is.
bool MayComputeNarrow(const Node& n) {
  return !(n.op() == "MaxPool" && n.num_outputs() > 1 && n.output(1) && n.output(1)->has_uses());
}

bool KeepsNarrow(const Node& n) {
  static const OpLists* defaults = new OpLists();
  OpList l = defaults->Of(n);
  return (l == OpList::kInfer || l == OpList::kClear) && MayComputeNarrow(n);
}

bool IsCastTo(const Node* n, DType t) {
  return n && n->domain().empty() && n->op() == "Cast" && n->input(0) && n->output(0)->type().dtype() == t;
}

// `t` (f32) in the narrow type, element by element (round to nearest).
Tensor NarrowCopy(const Tensor& t, DType narrow) {
  Tensor c(narrow, t.dims());
  for (int64_t j = 0; j < t.numel(); ++j) {
    float f = t.data<float>()[j];
    if (narrow == DType::kF16) c.data<Half>()[j] = Half(f);
    else c.data<BFloat16>()[j] = BFloat16(f);
  }
  return c;
}

// Whether the narrow type holds every finite element of `t` (no overflow to
// infinity).
bool NarrowHolds(const Tensor& t, DType narrow) {
  for (int64_t j = 0; j < t.numel(); ++j) {
    float f = t.data<float>()[j];
    float r = narrow == DType::kF16 ? static_cast<float>(Half(f)) : static_cast<float>(BFloat16(f));
    if (std::isfinite(f) && !std::isfinite(r)) return false;
  }
  return true;
}

// `v` in type `to` (the narrow type, or f32): a Cast of it inserted before `before`.
Value* CastToNarrow(Graph& g, Value* v, DType to, Node* before) {
  Node* cast = g.AddNode("Cast", {v}, {g.UniqueName(absl::StrCat(v->name(), ".", DTypeName(to)))}, "", before);
  cast->SetAttr("to", Attribute::Int(DTypeToOnnx(to)));
  cast->output(0)->set_type(Type::Tensor(to, v->type().shape()));
  return cast->output(0);
}

// Each result of `c` becomes type `to` and takes the place of the Casts to
// `to` that read it (its only readers).
void TakeCastsAfter(Graph& g, Node* c, DType to) {
  for (Value* y : c->outputs()) {
    y->set_type(Type::Tensor(to, y->type().shape()));
    std::vector<Node*> casts;
    for (const Use& u : y->uses()) casts.push_back(u.user);
    for (Node* cast : casts) {
      cast->output(0)->ReplaceAllUsesWith(y);
      g.EraseNode(cast);
    }
  }
}

// `y` (f32) becomes the narrow type; a Cast inserted before `before` (at
// the end when null) gives its users the f32 value they read. An output of
// the model keeps its name: the Cast back takes it, and y a fresh one.
void NarrowWithCastBack(Graph& g, Value* y, DType narrow, Node* before) {
  Type wide = y->type();
  std::string back_name;
  if (IsRootGraphOutput(y)) {
    back_name = y->name();
    g.RenameValue(y, g.UniqueName(absl::StrCat(back_name, ".", DTypeName(narrow))));
  } else {
    back_name = g.UniqueName(absl::StrCat(y->name(), ".f32"));
  }
  Node* back = g.AddNode("Cast", {y}, {std::move(back_name)}, "", before);
  back->SetAttr("to", Attribute::Int(DTypeToOnnx(DType::kF32)));
  back->output(0)->set_type(wide);
  y->ReplaceAllUsesWith(back->output(0));
  back->SetInput(0, y);
  y->set_type(Type::Tensor(narrow, wide.shape()));
}

// Whether every result of `n` is only a graph output: a Cast after it would
// stay (the outputs keep their types), so it may as well stay before it,
// where a matrix op's epilogue can take it.
bool OnlyGraphOutputs(const Graph& g, const Node& n) {
  for (const Value* y : n.outputs())
    for (const Use& u : y->uses())
      if (u.user) return false;
  for (const Value* y : n.outputs())
    if (std::find(g.outputs().begin(), g.outputs().end(), y) == g.outputs().end()) return false;
  return true;
}

// The producer of `v` when it is a Cast to f32 of a narrow value.
Node* Widened(const Value* v, DType narrow) {
  Node* c = v->producer();
  return IsCastTo(c, DType::kF32) && c->input(0)->type().dtype() == narrow ? c : nullptr;
}

bool IsF32(const Value* v) { return v && v->type().is_tensor() && v->type().dtype() == DType::kF32; }

// f32 constants and their narrow copies, each made once.
using Converted = absl::flat_hash_map<const Value*, Value*>;

Value* NarrowConstant(Graph& g, Value* v, DType narrow, Converted& converted) {
  Value*& c = converted[v];
  if (!c) c = g.AddConstant(g.UniqueName(absl::StrCat(v->name(), ".", DTypeName(narrow))),
                            NarrowCopy(v->constant(), narrow));
  return c;
}

// Activations stay narrow between matrix ops. A Cast back to f32 of a
// narrow value sinks past a node that may compute narrow when each of its
// f32 inputs is such a Cast or a constant that the narrow type holds
// (converted once; ReLU6's bounds 0 and 6 exactly): the node runs in the
// narrow type and one Cast back to f32 follows each of its outputs. Nodes
// are visited in order, so a chain of them (Conv -> Clip -> Add -> MaxPool)
// carries the Cast to its end; a Cast to the narrow type of a Cast from it
// is then the value itself (CancelCastPairs), so the next matrix op reads
// the narrow value. A Gather from a constant table (an embedding) starts
// such a chain with no Cast before it: the table converts once. Whether `n`
// changed.
bool SinkInto(Graph& g, Node* n, DType narrow, Converted& converted) {
  bool sink = true, any_cast = false, any_out = false;
  for (const Value* v : n->inputs()) {
    if (!v || !v->type().is_tensor() || !IsFloat(v->type().dtype())) continue;
    if (!IsF32(v)) sink = false;
    else if (Widened(v, narrow)) any_cast = true;
    else if (!v->constant_data() || !NarrowHolds(v->constant(), narrow)) sink = false;
  }
  for (const Value* y : n->outputs()) any_out |= IsF32(y);
  const bool lookup = n->op() == "Gather" && n->input(0) && n->input(0)->is_constant();
  if (!sink || !(any_cast || lookup) || !any_out || OnlyGraphOutputs(g, *n)) return false;
  for (int i = 0; i < n->num_inputs(); ++i) {
    Value* v = n->input(i);
    if (!IsF32(v)) continue;
    if (Node* c = Widened(v, narrow)) {
      n->SetInput(i, c->input(0));
      if (!c->output(0)->has_uses()) g.EraseNode(c);
      continue;
    }
    n->SetInput(i, NarrowConstant(g, v, narrow, converted));
  }
  Node* next = n->next();
  for (Value* y : n->outputs()) {
    if (!IsF32(y)) continue;
    NarrowWithCastBack(g, y, narrow, next);
  }
  return true;
}

// A Cast to the narrow type of a Cast from it is the narrow value itself.
bool CancelCastPairs(Graph& g, DType narrow) {
  bool changed = false;
  for (Node* b : g.NodeList()) {
    if (!IsCastTo(b, narrow)) continue;
    Node* a = Widened(b->input(0), narrow);
    if (!a) continue;
    b->output(0)->ReplaceAllUsesWith(a->input(0));
    g.EraseNode(b);
    if (!a->output(0)->has_uses()) g.EraseNode(a);
    changed = true;
  }
  return changed;
}

// Whether `n` is a matrix op with f32 operands and a static f32 result.
bool IsF32MatrixOp(const Node& n) {
  if (!IsOneOf(n, kAllowOps)) return false;
  bool all_f32 = n.output(0)->type().dtype() == DType::kF32;
  for (const Value* v : n.inputs()) all_f32 &= !v || v->type().dtype() == DType::kF32;
  return all_f32 && n.output(0)->type().shape().is_static();
}

// The matrix op `n` (IsF32MatrixOp) computes in the narrow type: constant
// operands converted once, others through a Cast before it, and a Cast back
// to f32 before `next` for its users.
void NarrowMatrixOp(Graph& g, Node* n, Node* next, DType narrow, Converted& converted) {
  for (int i = 0; i < n->num_inputs(); ++i) {
    Value* v = n->input(i);
    if (!v || v->type().dtype() != DType::kF32) continue;
    // An operand transposed for this MatMul alone is transposed narrow,
    // so that the GEMM reads it transposed (IsMatrixTranspose).
    // A constant one (a tied embedding read as the output projection,
    // too large to fold) is converted once and transposed narrow.
    if (Node* t = v->producer(); n->op() == "MatMul" && t && IsMatrixTranspose(*t) && v->uses().size() == 1) {
      Value* x = t->input(0);
      t->SetInput(0, x->constant_data() ? NarrowConstant(g, x, narrow, converted) : CastToNarrow(g, x, narrow, t));
      v->set_type(Type::Tensor(narrow, v->type().shape()));
      continue;
    }
    if (v->constant_data()) n->SetInput(i, NarrowConstant(g, v, narrow, converted));
    else n->SetInput(i, CastToNarrow(g, v, narrow, n));
  }
  NarrowWithCastBack(g, n->output(0), narrow, next);
}

// The multiply-adds of the matrix op `n` (IsF32MatrixOp), or -1 when an
// operand's shape is not static.
double MatrixMacs(const Node& n) {
  const Shape& a = n.input(0)->type().shape();
  const Shape& b = n.input(1)->type().shape();
  if (!a.is_static() || !b.is_static() || a.rank() == 0 || b.rank() == 0) return -1;
  const double out = static_cast<double>(n.output(0)->type().shape().NumElements());
  if (n.op() == "MatMul") return out * static_cast<double>(a.dims()[a.rank() - 1].value());
  if (n.op() == "Gemm") {
    if (a.rank() != 2) return -1;
    return out * static_cast<double>(a.dims()[n.GetInt("transA", 0) ? 0 : 1].value());
  }
  // Conv: each output element reads C/group x kernel window weights.
  return out * static_cast<double>(b.NumElements() / b.dims()[0].value());
}

// Whether a Cast of `v` to the narrow type would run as a kernel of its
// own: `v` is a graph input or a matrix op's result (through views). A
// memory-bound op's result converts in that op's fused kernel instead (it
// then writes half the bytes), a constant at compile time.
bool CastStandsAlone(const Value* v, const OpLists& lists) {
  while (Node* p = v->producer()) {
    if (!IsOneOf(*p, kViewOps) || !p->input(0)) return lists.Of(*p) == OpList::kAllow;
    v = p->input(0);
  }
  return !v->is_constant();
}

// The elements the Cast kernels a narrow matrix op `n` needs would convert:
// its operands that are not constant, not narrow already, and whose Cast
// stands alone. The result converts back in the op's own epilogue.
double CastElements(const Node& n, const OpLists& lists, DType narrow) {
  double elems = 0;
  for (const Value* v : n.inputs()) {
    if (!v || v->constant_data() || Widened(v, narrow) || !CastStandsAlone(v, lists))
      continue;
    if (!v->type().shape().is_static()) return -1;
    elems += static_cast<double>(v->type().shape().NumElements());
  }
  return elems;
}

// Clear ops take the Cast to the narrow type that follows them: a clear op
// with one float operand (f32, not constant), whose results are read only
// through Casts to the narrow type and hold at least as many elements as
// the operand (a copy or a view; a pool would convert more), computes
// narrow after a Cast of its operand. Last to first, so a chain of them
// (Reshape -> Transpose -> MatMul) passes the Cast up to its start.
int64_t HoistCasts(Graph& g, DType narrow, const OpLists& lists) {
  int64_t hoisted = 0;
  std::vector<Node*> nodes = g.NodeList();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* c = *it;
    if (lists.Of(*c) != OpList::kClear || !MayComputeNarrow(*c) || c->may_hold_graphs()) continue;
    int data = -1;
    bool one = true;
    for (int i = 0; i < c->num_inputs(); ++i) {
      const Value* v = c->input(i);
      if (!v || !v->type().is_tensor() || !IsFloat(v->type().dtype())) continue;
      one &= data < 0;
      data = i;
    }
    if (!one || data < 0) continue;
    Value* x = c->input(data);
    if (!IsF32(x) || x->is_constant() || !x->type().shape().is_static()) continue;
    bool only_casts = true, used = false;
    int64_t out_elems = 0;
    for (const Value* y : c->outputs()) {
      only_casts &= IsF32(y) && y->type().shape().is_static();
      if (!only_casts) break;
      out_elems += y->type().shape().NumElements();
      for (const Use& u : y->uses()) {
        only_casts &= u.user && IsCastTo(u.user, narrow);
        used = true;
      }
    }
    if (!only_casts || !used || out_elems < x->type().shape().NumElements()) continue;
    c->SetInput(data, CastToNarrow(g, x, narrow, c));
    TakeCastsAfter(g, c, narrow);
    ++hoisted;
  }
  return hoisted;
}

// The widening Casts a Split or a view leaves after each of its results
// go before it instead: a Split or view of a narrow value (exact in either
// type) whose results are read only through Casts to f32 moves f32, after
// one Cast of its operand. Last to first, so a chain (Split -> Reshape ->
// Cast) passes the Cast up to the value it splits: a matrix op's result,
// whose epilogue then writes f32 itself (a fused GEMM's Cast), where three
// Casts after a Split were three kernels. The values are the same.
int64_t HoistWideningCasts(Graph& g, DType narrow) {
  int64_t hoisted = 0;
  std::vector<Node*> nodes = g.NodeList();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* c = *it;
    if (!(c->domain().empty() && (c->op() == "Split" || IsOneOf(*c, kViewOps))) || !c->input(0)) continue;
    Value* x = c->input(0);
    if (x->type().dtype() != narrow || x->is_constant() || !x->type().shape().is_static()) continue;
    bool only_casts = true;
    for (const Value* y : c->outputs()) {
      only_casts &= y->type().is_tensor() && y->type().dtype() == narrow && y->has_uses() && !IsRootGraphOutput(y);
      for (const Use& u : y->uses()) only_casts &= u.user && IsCastTo(u.user, DType::kF32);
      if (!only_casts) break;
    }
    if (!only_casts) continue;
    c->SetInput(0, CastToNarrow(g, x, DType::kF32, c));
    TakeCastsAfter(g, c, DType::kF32);
    ++hoisted;
  }
  return hoisted;
}

absl::Status CheckNarrowType(DType narrow) {
  if (narrow == DType::kF16 || narrow == DType::kBF16) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("narrowing to ", DTypeName(narrow), ": only f16 and bf16"));
}

}  // namespace

absl::StatusOr<bool> NarrowMatrixOps(Graph& g, DType narrow, const std::function<bool(const Node&)>& also) {
  KILN_RETURN_IF_ERROR(CheckNarrowType(narrow));
  bool changed = false;
  Converted converted;
  std::vector<Node*> nodes = g.NodeList();
  auto narrows_too = [&](const Node& n) {
    return also && n.num_outputs() == 1 && n.output(0)->type().dtype() == DType::kF32 &&
           n.output(0)->type().shape().is_static() && also(n);
  };
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (!IsF32MatrixOp(*nodes[k]) && !narrows_too(*nodes[k])) continue;
    NarrowMatrixOp(g, nodes[k], k + 1 < nodes.size() ? nodes[k + 1] : nullptr, narrow, converted);
    changed = true;
  }
  // One f16 copy of a constant that a matrix op and a sunk node both read.
  for (Node* n : g.NodeList())
    if (KeepsNarrow(*n)) changed |= SinkInto(g, n, narrow, converted);
  changed |= CancelCastPairs(g, narrow);
  changed |= HoistWideningCasts(g, narrow) > 0;
  return changed;
}

absl::Status CheckMixedPrecision(const MixedPrecisionOptions& options) {
  KILN_RETURN_IF_ERROR(CheckNarrowType(options.narrow));
  if (options.min_macs_per_cast < 0)
    return absl::InvalidArgumentError(absl::StrCat("the mixed-precision cost threshold must be >= 0, not ",
                                                   options.min_macs_per_cast));
  auto known = [] {
    std::string ops;
    for (auto list : {absl::Span<const char* const>(kAllowOps), absl::Span<const char* const>(kInferOps),
                      absl::Span<const char* const>(kClearOps)})
      for (const char* op : list) absl::StrAppend(&ops, ops.empty() ? "" : ", ", op);
    return ops;
  };
  absl::flat_hash_map<std::string, absl::string_view> named;
  const std::pair<absl::string_view, const std::vector<std::string>*> lists[] = {
      {"allow", &options.allow}, {"infer", &options.infer}, {"clear", &options.clear}, {"deny", &options.deny}};
  for (const auto& [list, ops] : lists) {
    for (const std::string& op : *ops) {
      OpList def = OpLists::Default(op);
      if (def == OpList::kDeny)
        return absl::InvalidArgumentError(absl::StrCat("mixed precision: '", op, "' (", list,
                                                       " list) is not an op kiln computes narrow; those are: ", known()));
      if (list == "allow" && def != OpList::kAllow)
        return absl::InvalidArgumentError(absl::StrCat("mixed precision: '", op,
                                                       "' cannot be on the allow list: only MatMul, Gemm and Conv"));
      if (list != "allow" && list != "deny" && def == OpList::kAllow)
        return absl::InvalidArgumentError(absl::StrCat("mixed precision: '", op, "' is a matrix op: allow or deny, not ",
                                                       list));
      auto [it, fresh] = named.emplace(op, list);
      if (!fresh)
        return absl::InvalidArgumentError(
            absl::StrCat("mixed precision: '", op, "' is named for both the ", it->second, " and the ", list, " list"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> MixPrecision(Graph& g, const MixedPrecisionOptions& options, PassStatistics* stats) {
  KILN_RETURN_IF_ERROR(CheckMixedPrecision(options));
  const DType narrow = options.narrow;
  const OpLists lists(&options);
  auto count = [&](absl::string_view counter) {
    if (stats) stats->Add(counter);
  };
  bool changed = false;
  Converted converted;
  std::vector<Node*> nodes = g.NodeList();
  for (size_t k = 0; k < nodes.size(); ++k) {
    Node* n = nodes[k];
    const OpList list = lists.Of(*n);
    if (list == OpList::kDeny) {
      if (OpLists::Default(ListName(*n)) != OpList::kDeny)
        count("denied-ops-kept-f32");
      continue;
    }
    if (list == OpList::kAllow) {
      if (!IsF32MatrixOp(*n)) continue;
      const double macs = MatrixMacs(*n), casts = CastElements(*n, lists, narrow);
      if (options.min_macs_per_cast > 0 && macs >= 0 && casts > 0 &&
          macs < static_cast<double>(options.min_macs_per_cast) * casts) {
        count("matrix-ops-kept-f32");
        continue;
      }
      NarrowMatrixOp(g, n, k + 1 < nodes.size() ? nodes[k + 1] : nullptr, narrow, converted);
      count("matrix-ops-narrowed");
      changed = true;
      continue;
    }
    if (MayComputeNarrow(*n)) changed |= SinkInto(g, n, narrow, converted);
  }
  changed |= CancelCastPairs(g, narrow);
  if (int64_t hoisted = HoistCasts(g, narrow, lists)) {
    if (stats) stats->Add("casts-hoisted", hoisted);
    changed = true;
  }
  if (int64_t hoisted = HoistWideningCasts(g, narrow)) {
    if (stats) stats->Add("widening-casts-hoisted", hoisted);
    changed = true;
  }
  return changed;
}

namespace {

class NarrowPass : public Pass {
 public:
  NarrowPass(DType narrow, absl::string_view name) : narrow_(narrow), name_(name) {}
  absl::string_view name() const override { return name_; }
  absl::StatusOr<bool> Run(Graph& graph) override { return NarrowMatrixOps(graph, narrow_); }

 private:
  DType narrow_;
  std::string name_;
};

class MixedPrecisionPass : public Pass {
 public:
  absl::string_view name() const override { return "mixed-precision"; }
  absl::StatusOr<bool> Run(Graph& graph) override { return MixPrecision(graph, options().mixed, &stats()); }
};

}  // namespace

std::unique_ptr<Pass> CreateNarrowFp16Pass() { return std::make_unique<NarrowPass>(DType::kF16, "narrow-fp16"); }
std::unique_ptr<Pass> CreateNarrowBf16Pass() { return std::make_unique<NarrowPass>(DType::kBF16, "narrow-bf16"); }
std::unique_ptr<Pass> CreateMixedPrecisionPass() { return std::make_unique<MixedPrecisionPass>(); }

}  // namespace kiln
