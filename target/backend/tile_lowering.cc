//===- tile_lowering.cc - Fused groups to tile IR, tiled by a shared cost model ---===//
//
// FiguresOf reads a TargetDescription; GemmProblemOf reads a MatMul, Gemm
// or GEMM fusion group; the GEMM cost model generalizes the npusim cube
// model (target/npusim/kernels/cube_tiling.h) to any target's figures:
// a unit's pipeline time is the slowest of its stage loads, operand loads
// and MMA per stage, the chip's global traffic goes over the shared
// bandwidth (or through the cache, where a target has one), blocks run in
// waves over the units, and split-K spreads skinny problems. LowerGemm and
// LowerVectorNode build the canonical forms of tile_lowering.h and verify
// them against the target.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_lowering.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"
#include "target/backend/window.h"

namespace kiln::target::tile {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }
int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

absl::StatusOr<std::vector<int64_t>> StaticShape(const Value* v) {
  if (!v || !v->type().is_tensor() || !v->type().shape().ranked() || !v->type().shape().is_static()) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", v ? v->name() : "?", "' has no static shape (", v ? v->type().ToString() : "", ")"));
  }
  return v->type().shape().StaticDims();
}

// A constant of one element, as a scalar operand.
std::optional<double> ScalarConstant(const Value* v) {
  if (!v || !v->is_constant() || v->type().shape().NumElements() != 1) return std::nullopt;
  if (!IsNumeric(v->type().dtype())) return std::nullopt;
  return v->constant().GetDouble(0);
}

// Names of one kernel: loop variables and buffers the forms use are taken
// first; arguments get identifiers made from their values' names.
class NameTable {
 public:
  NameTable() {
    for (const char* n : {"b0", "b1", "b2", "b3", "b4", "b5", "m", "n", "s", "k", "kk", "wm", "wn", "r", "c", "As",
                          "Bs", "Aa", "Bb", "acc"}) {
      used_.insert(n);
    }
  }
  std::string Unique(absl::string_view hint) {
    std::string base;
    for (char ch : hint) base += std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' ? ch : '_';
    if (base.empty()) base = "v";
    std::string name = base;
    for (int i = 2; !used_.insert(name).second; ++i) name = absl::StrCat(base, "_", i);
    return name;
  }

 private:
  std::set<std::string> used_;
};

std::string KernelName(const Node& node) {
  std::string hint = !node.name().empty() ? node.name() : node.num_outputs() > 0 ? node.output(0)->name() : node.op();
  std::string out;
  for (char ch : hint) out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' ? ch : '_';
  while (!out.empty() && out[0] == '_') out.erase(0, 1);
  return out.empty() ? std::string("kernel") : out;
}

// The kernel arguments of a node: its present inputs (`in`), its outputs
// (`out`), then the body constants a lowering reads (`const`). Inside a
// kiln.Fused body, the body's inputs and outputs stand for the node's.
class KernelArgs {
 public:
  static absl::StatusOr<KernelArgs> Of(const Node& node) {
    KernelArgs a;
    a.body_ = nullptr;
    if (node.domain() == "kiln" && node.op() == "Fused") {
      const Attribute* attr = node.attr("body");
      a.body_ = attr ? attr->g() : nullptr;
      if (!a.body_) return absl::FailedPreconditionError("kiln.Fused has no body");
      if (a.body_->inputs().size() != static_cast<size_t>(node.num_inputs()) ||
          a.body_->outputs().size() != static_cast<size_t>(node.num_outputs())) {
        return absl::FailedPreconditionError("kiln.Fused's body does not match its inputs and outputs");
      }
    }
    for (int i = 0; i < node.num_inputs(); ++i) {
      if (!node.input(i)) continue;
      KILN_RETURN_IF_ERROR(a.Add(a.body_ ? a.body_->inputs()[i] : node.input(i), node.input(i), TileArg::Role::kIn));
    }
    for (int i = 0; i < node.num_outputs(); ++i) {
      KILN_RETURN_IF_ERROR(
          a.Add(a.body_ ? a.body_->outputs()[i] : node.output(i), node.output(i), TileArg::Role::kOut));
    }
    return a;
  }

  // The nodes the kernel computes, in order.
  std::vector<const Node*> Nodes(const Node& node) const {
    std::vector<const Node*> out;
    if (!body_) return {&node};
    for (const Node* n : body_->nodes()) out.push_back(n);
    return out;
  }
  // The values the kernel writes.
  std::vector<const Value*> Outputs(const Node& node) const {
    std::vector<const Value*> out;
    for (int i = 0; i < node.num_outputs(); ++i) out.push_back(body_ ? body_->outputs()[i] : node.output(i));
    return out;
  }

  // The argument of `v` (a body constant becomes a `const` argument), or an error.
  absl::StatusOr<int> ArgOf(const Value* v) {
    auto it = index_.find(v);
    if (it != index_.end()) return it->second;
    if (!v->is_constant()) {
      return absl::FailedPreconditionError(absl::StrCat("'", v->name(), "' is no input, output or constant"));
    }
    KILN_RETURN_IF_ERROR(Add(v, v, TileArg::Role::kConst));
    return index_.at(v);
  }
  bool IsArg(const Value* v) const { return index_.count(v) != 0; }

  // Declares argument `i` with `view`, a shape of the same elements (a
  // reshape); an argument read through two different views has none.
  absl::Status View(int i, std::vector<int64_t> view) {
    if (viewed_.count(i) && args[i].shape != view) {
      return absl::UnimplementedError(absl::StrCat("'", args[i].name, "' is read through two different views"));
    }
    if (Product(view) != Product(args[i].shape)) {
      return absl::InternalError(absl::StrCat("a view of %", args[i].name, " changes its size"));
    }
    viewed_.insert(i);
    args[i].shape = std::move(view);
    return absl::OkStatus();
  }

  std::vector<TileArg> args;
  std::vector<const Value*> values;  // the value each argument stands for
  NameTable names;

 private:
  absl::Status Add(const Value* inner, const Value* outer, TileArg::Role role) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, StaticShape(outer));
    if (!IsNumeric(outer->type().dtype())) {
      return absl::UnimplementedError(
          absl::StrCat("'", outer->name(), "' is ", DTypeName(outer->type().dtype()), ": tiles hold numbers"));
    }
    if (index_.count(inner)) return absl::OkStatus();  // a value passed twice reads one argument
    index_[inner] = static_cast<int>(args.size());
    args.push_back(TileArg{names.Unique(outer->name()), outer->type().dtype(), std::move(shape), role});
    values.push_back(outer);
    return absl::OkStatus();
  }

  const Graph* body_ = nullptr;
  std::map<const Value*, int> index_;
  std::set<int> viewed_;
};

TileRef Ref(const std::string& name, std::vector<Affine> start) { return TileRef{name, std::move(start)}; }
Affine Terms(std::vector<std::pair<std::string, int64_t>> terms, int64_t constant = 0) {
  Affine a;
  a.constant = constant;
  for (auto& [v, c] : terms) {
    if (c != 0) a.terms.emplace_back(std::move(v), c);
  }
  return a;
}
Operand Of(TileRef r) { return Operand{std::move(r)}; }
Operand Scalar(double v) { return Operand{std::nullopt, v}; }

// Elementwise ONNX ops that are one tile step.
const std::map<std::string, EwOp>& SimpleEwOps() {
  static const auto* ops = new std::map<std::string, EwOp>{
      {"Add", EwOp::kAdd},       {"Sub", EwOp::kSub},         {"Mul", EwOp::kMul},
      {"Div", EwOp::kDiv},       {"Max", EwOp::kMax},         {"Min", EwOp::kMin},
      {"Pow", EwOp::kPow},       {"Neg", EwOp::kNeg},         {"Abs", EwOp::kAbs},
      {"Relu", EwOp::kRelu},     {"Exp", EwOp::kExp},         {"Log", EwOp::kLog},
      {"Sqrt", EwOp::kSqrt},     {"Reciprocal", EwOp::kRecip}, {"Tanh", EwOp::kTanh},
      {"Sigmoid", EwOp::kSigmoid}, {"Erf", EwOp::kErf},       {"Where", EwOp::kSelect},
      {"Less", EwOp::kCmpLt},    {"LessOrEqual", EwOp::kCmpLe}, {"Greater", EwOp::kCmpGt},
      {"GreaterOrEqual", EwOp::kCmpGe}, {"Equal", EwOp::kCmpEq}, {"Identity", EwOp::kCopy},
      {"Cast", EwOp::kCast},
  };
  return *ops;
}

// The elementwise op of `n` as one step, if it is one (either form of kiln.Gelu included).
std::optional<EwOp> OneStepEwOp(const Node& n) {
  if (n.domain() == "kiln" && n.op() == "Gelu") {
    std::string approximate = n.GetString("approximate", "none");
    if (approximate == "none") return EwOp::kGelu;
    if (approximate == "tanh") return EwOp::kGeluTanh;
    return std::nullopt;
  }
  if (!n.domain().empty()) return std::nullopt;
  auto it = SimpleEwOps().find(n.op());
  if (it == SimpleEwOps().end()) return std::nullopt;
  if ((n.op() == "Max" || n.op() == "Min") && n.num_inputs() != 2) return std::nullopt;
  return it->second;
}

}  // namespace

//===----------------------------------------------------------------------===//
// Figures
//===----------------------------------------------------------------------===//

double TileCostFigures::MacsPerCycle(DType input) const {
  for (const auto& [dt, rate] : macs_per_cycle) {
    if (dt == input) return rate;
  }
  return 0;
}

TileCostFigures FiguresOf(const TargetDescription& d) {
  TileCostFigures f;
  f.target.name = d.name;
  f.compute_units = std::max(d.compute_units, 1);
  f.clock_ghz = d.clock_ghz > 0 ? d.clock_ghz : 1;
  if (d.global_bytes_per_second > 0) f.global_bytes_per_cycle = d.global_bytes_per_second / (f.clock_ghz * 1e9);
  for (const MemoryLevel& level : d.memory) {
    if (level.scope.empty()) {
      f.cache_bytes = level.bytes;
      f.cache_bytes_per_cycle = level.bytes_per_cycle;
      continue;
    }
    std::optional<Scope> scope = ParseScope(level.scope);
    if (!scope || *scope == Scope::kGlobal) continue;
    f.target.capacity[*scope] = level.bytes;
    if (level.bytes_per_cycle <= 0) continue;
    if (*scope == Scope::kStage) f.stage_bytes_per_cycle = level.bytes_per_cycle;
    if (*scope == Scope::kOperandA) f.operand_bytes_per_cycle = level.bytes_per_cycle;
    if (*scope == Scope::kVector) f.vector_bytes_per_cycle = level.bytes_per_cycle;
  }
  if (d.vector_bytes_per_cycle > 0) f.vector_bytes_per_cycle = d.vector_bytes_per_cycle;
  for (const MmaShape& m : d.mma) {
    f.target.mma.push_back(TileMma{m.m, m.n, m.k, m.input, m.accumulator});
    auto it = std::find_if(f.macs_per_cycle.begin(), f.macs_per_cycle.end(),
                           [&](const auto& e) { return e.first == m.input; });
    if (it == f.macs_per_cycle.end()) {
      f.macs_per_cycle.emplace_back(m.input, m.macs_per_cycle);
    } else {
      it->second = std::max(it->second, m.macs_per_cycle);
    }
  }
  static_cast<TileTuning&>(f) = d.tiling;
  f.target.max_group = f.max_group;
  return f;
}

//===----------------------------------------------------------------------===//
// GEMM problems
//===----------------------------------------------------------------------===//

namespace {

// How an operand of `shape` broadcasts against the GEMM's [batch..., M, N].
absl::StatusOr<EpilogueStep::Operand> OperandForm(const std::vector<int64_t>& shape, const GemmProblem& p,
                                                  bool scalar_constant) {
  std::vector<int64_t> out = p.batch;
  out.push_back(p.M);
  out.push_back(p.N);
  if (shape.size() > out.size()) return absl::FailedPreconditionError("an epilogue operand has more dimensions");
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t s = shape[shape.size() - 1 - i], o = out[out.size() - 1 - i];
    if (s != o && s != 1) return absl::FailedPreconditionError("an epilogue operand does not broadcast to the result");
  }
  if (scalar_constant) return EpilogueStep::Operand::kScalar;
  const int64_t rows = shape.size() >= 2 ? shape[shape.size() - 2] : 1, cols = shape.empty() ? 1 : shape.back();
  if (rows > 1 && cols > 1) return EpilogueStep::Operand::kFull;
  if (rows > 1) return EpilogueStep::Operand::kCol;
  return EpilogueStep::Operand::kRow;
}

// The shapes and attributes of a MatMul or Gemm into `p` (C not included).
absl::Status ReadMatmul(const Node& mm, GemmProblem* p) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> da, StaticShape(mm.input(0)));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> db, StaticShape(mm.input(1)));
  if (mm.op() == "Gemm") {
    if (da.size() != 2 || db.size() != 2) return absl::FailedPreconditionError("Gemm's A and B must be 2-D");
    p->trans_a = mm.GetInt("transA", 0) != 0;
    p->trans_b = mm.GetInt("transB", 0) != 0;
    p->alpha = mm.GetFloat("alpha", 1.0f);
    p->M = da[p->trans_a ? 1 : 0];
    p->K = da[p->trans_a ? 0 : 1];
    p->N = db[p->trans_b ? 0 : 1];
    if (db[p->trans_b ? 1 : 0] != p->K) return absl::FailedPreconditionError("Gemm's inner dims differ");
  } else {
    if (da.size() < 2 || db.size() < 2) {
      return absl::UnimplementedError("a MatMul of a vector (rank-1 operand) has no GEMM form here");
    }
    p->M = da[da.size() - 2];
    p->K = da.back();
    p->N = db.back();
    if (db[db.size() - 2] != p->K) return absl::FailedPreconditionError("MatMul's inner dims differ");
    std::vector<int64_t> ba(da.begin(), da.end() - 2), bb(db.begin(), db.end() - 2);
    const size_t nb = std::max(ba.size(), bb.size());
    ba.insert(ba.begin(), nb - ba.size(), 1);
    bb.insert(bb.begin(), nb - bb.size(), 1);
    p->batch.assign(nb, 1);
    p->a_batch_stride.assign(nb, 0);
    p->b_batch_stride.assign(nb, 0);
    int64_t ra = p->M * p->K, rb = p->K * p->N;
    for (size_t i = nb; i-- > 0;) {
      if (ba[i] != bb[i] && ba[i] != 1 && bb[i] != 1) {
        return absl::FailedPreconditionError("MatMul's batch dims do not broadcast");
      }
      p->batch[i] = std::max(ba[i], bb[i]);
      p->a_batch_stride[i] = ba[i] == 1 ? 0 : ra;
      p->b_batch_stride[i] = bb[i] == 1 ? 0 : rb;
      ra *= ba[i];
      rb *= bb[i];
    }
  }
  if (p->M <= 0 || p->N <= 0 || p->K <= 0) return absl::UnimplementedError("an empty GEMM has no kernel");
  return absl::OkStatus();
}

// A convolution's epilogue operand of `shape` (numpy-broadcast against
// Y [N, OC, spatial...]) in the GEMM's terms [N, G, OC/G, OH*OW].
absl::StatusOr<std::vector<int64_t>> ConvOperandView(std::vector<int64_t> shape, const GemmProblem& p) {
  const std::vector<int64_t>& y = p.conv_y;
  if (shape.size() > y.size()) return absl::UnimplementedError("an epilogue operand has more dimensions than Y");
  shape.insert(shape.begin(), y.size() - shape.size(), 1);
  int64_t spatial = 1;
  for (size_t d = 0; d < y.size(); ++d) {
    if (shape[d] != 1 && shape[d] != y[d]) {
      return absl::UnimplementedError("an epilogue operand does not broadcast to the convolution's result");
    }
    if (d >= 2) spatial *= shape[d];
  }
  if (spatial != 1 && spatial != p.N) {
    return absl::UnimplementedError("an epilogue operand broadcasts along some spatial dimensions only");
  }
  const bool channels = shape[1] != 1;
  return std::vector<int64_t>{shape[0], channels ? p.batch[1] : 1, channels ? p.M : 1, spatial == 1 ? 1 : p.N};
}

// An epilogue step of a binary op with `other` (an argument or a scalar
// constant); `own_shape` stands for other's shape where given (Conv's bias
// [OC] broadcasts as [OC, 1, 1]).
absl::Status AddOperandStep(EwOp op, const Value* other, bool operand_first, KernelArgs& args, GemmProblem* p,
                            const std::vector<int64_t>* own_shape = nullptr) {
  EpilogueStep step{op};
  step.operand_first = operand_first;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, StaticShape(other));
  if (own_shape) shape = *own_shape;
  if (p->conv) {
    KILN_ASSIGN_OR_RETURN(shape, ConvOperandView(shape, *p));
  }
  std::optional<double> scalar = ScalarConstant(other);
  KILN_ASSIGN_OR_RETURN(step.operand, OperandForm(shape, *p, scalar.has_value()));
  if (scalar) {
    step.scalar = *scalar;
  } else {
    KILN_ASSIGN_OR_RETURN(step.arg, args.ArgOf(other));
    if (p->conv) KILN_RETURN_IF_ERROR(args.View(step.arg, shape));
  }
  p->epilogue.push_back(step);
  return absl::OkStatus();
}

}  // namespace

bool GemmEpilogueTakes(const Node& n) {
  if (n.domain().empty() && n.op() == "Clip") return true;
  if (n.domain().empty() && n.op() == "Cast")
    return n.input(0) && IsFloat(n.input(0)->type().dtype()) && IsFloat(n.output(0)->type().dtype());
  std::optional<EwOp> op = OneStepEwOp(n);
  return op && *op != EwOp::kSelect && *op != EwOp::kCast && *op < EwOp::kCmpLt;
}

namespace {

// The epilogue step of one body node applied to the chain value `cur`.
absl::Status AddEpilogueStep(const Node& e, const Value* cur, KernelArgs& args, GemmProblem* p) {
  auto unfit = [&](absl::string_view why) {
    return absl::UnimplementedError(absl::StrCat("the GEMM epilogue does not take ", e.QualifiedOp(), ": ", why));
  };
  if (e.domain().empty() && e.op() == "Clip") {
    for (int i = 1; i < 3; ++i) {
      if (!e.input(i)) continue;
      std::optional<double> bound = ScalarConstant(e.input(i));
      if (!bound) return unfit("its bounds are not constants");
      p->epilogue.push_back(EpilogueStep{i == 1 ? EwOp::kMax : EwOp::kMin, EpilogueStep::Operand::kScalar, -1, *bound});
    }
    return absl::OkStatus();
  }
  std::optional<EwOp> op = OneStepEwOp(e);
  if (!op || *op == EwOp::kSelect || *op == EwOp::kCast || *op >= EwOp::kCmpLt) return unfit("no epilogue form");
  if (*op == EwOp::kCopy) return absl::OkStatus();
  if (EwOpArity(*op) == 1) {
    if (e.input(0) != cur) return unfit("it does not read the GEMM's result");
    p->epilogue.push_back(EpilogueStep{*op});
    return absl::OkStatus();
  }
  if (e.num_inputs() != 2 || (e.input(0) == cur) == (e.input(1) == cur)) {
    return unfit("it does not take the GEMM's result and one other operand");
  }
  return AddOperandStep(*op, e.input(e.input(1) == cur ? 0 : 1), e.input(1) == cur, args, p);
}

// A Conv as an implicit GEMM into `p` (its bias not included): A is W
// viewed [G, OC/G, K], B is X read through im2col (or viewed [N, G, C/G,
// H*W] when the window is pointwise), batch = {N, G}.
absl::Status ReadConv(const Node& conv, KernelArgs& args, GemmProblem* p) {
  KILN_ASSIGN_OR_RETURN(Window2d w, WindowOf(conv));
  KILN_ASSIGN_OR_RETURN(p->conv_y, StaticShape(conv.output(0)));
  p->conv = true;
  const int64_t g = w.groups, cg = w.c / g;
  p->batch = {w.n, g};
  p->M = w.oc / g;
  p->K = cg * w.kernel[0] * w.kernel[1];
  p->N = w.oh * w.ow;
  if (p->M <= 0 || p->N <= 0 || p->K <= 0) return absl::UnimplementedError("an empty convolution has no kernel");
  p->a_batch_stride = {0, p->M * p->K};
  p->b_batch_stride = {w.c * w.h * w.w, cg * w.h * w.w};
  KILN_ASSIGN_OR_RETURN(p->a_arg, args.ArgOf(conv.input(1)));
  KILN_ASSIGN_OR_RETURN(p->b_arg, args.ArgOf(conv.input(0)));
  KILN_RETURN_IF_ERROR(args.View(p->a_arg, {g, p->M, p->K}));
  if (w.pointwise()) {
    KILN_RETURN_IF_ERROR(args.View(p->b_arg, {w.n, g, cg, w.h * w.w}));
    return absl::OkStatus();
  }
  KILN_RETURN_IF_ERROR(args.View(p->b_arg, {w.n, w.c, w.h, w.w}));
  Im2col c;
  for (int i = 0; i < 2; ++i) {
    c.kernel[i] = w.kernel[i];
    c.stride[i] = w.stride[i];
    c.pad[i] = w.pad_begin[i];
    c.dilation[i] = w.dilation[i];
  }
  c.out[0] = w.oh;
  c.out[1] = w.ow;
  c.groups = g;
  p->im2col = c;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GemmProblem> GemmProblemOf(const Node& node, DType matrix_input) {
  KILN_ASSIGN_OR_RETURN(KernelArgs args, KernelArgs::Of(node));
  const std::vector<const Node*> nodes = args.Nodes(node);
  const std::vector<const Value*> outputs = args.Outputs(node);
  if (nodes.empty() || !nodes[0]->domain().empty() ||
      (nodes[0]->op() != "MatMul" && nodes[0]->op() != "Gemm" && nodes[0]->op() != "Conv")) {
    return absl::UnimplementedError(
        absl::StrCat(node.QualifiedOp(), " is no MatMul, Gemm or Conv (or a fusion group of one)"));
  }
  if (outputs.size() != 1) return absl::UnimplementedError("a GEMM kernel writes one output");
  const Node& mm = *nodes[0];
  if (mm.num_inputs() < 2 || !mm.input(0) || !mm.input(1)) return absl::FailedPreconditionError("A or B is missing");
  GemmProblem p;
  p.name = KernelName(node);
  const bool conv = mm.op() == "Conv";
  if (conv) {
    KILN_RETURN_IF_ERROR(ReadConv(mm, args, &p));
  } else {
    KILN_RETURN_IF_ERROR(ReadMatmul(mm, &p));
  }
  const DType in = mm.input(0)->type().dtype();
  if (mm.input(1)->type().dtype() != in) return absl::FailedPreconditionError("A and B have different dtypes");
  if (in != DType::kF32 && in != DType::kF16 && in != DType::kBF16) {
    return absl::UnimplementedError(absl::StrCat("the GEMM lowering takes f32, f16 or bf16, not ", DTypeName(in)));
  }
  p.input = in == DType::kF32 && (matrix_input == DType::kF16 || matrix_input == DType::kBF16) ? matrix_input : in;
  p.accumulator = DType::kF32;
  if (!conv) {
    KILN_ASSIGN_OR_RETURN(p.a_arg, args.ArgOf(mm.input(0)));
    KILN_ASSIGN_OR_RETURN(p.b_arg, args.ArgOf(mm.input(1)));
  } else if (mm.num_inputs() > 2 && mm.input(2)) {
    std::vector<int64_t> bias(p.conv_y.size() - 1, 1);
    bias[0] = p.batch[1] * p.M;
    KILN_RETURN_IF_ERROR(AddOperandStep(EwOp::kAdd, mm.input(2), false, args, &p, &bias));
  }
  // Gemm's beta * C: alpha/beta scales the product, C is added, beta scales the sum.
  const Value* c = mm.op() == "Gemm" ? mm.input(2) : nullptr;
  const double beta = mm.GetFloat("beta", 1.0f);
  if (c && beta != 0) {
    p.alpha /= beta;
    KILN_RETURN_IF_ERROR(AddOperandStep(EwOp::kAdd, c, false, args, &p));
    if (beta != 1) p.epilogue.push_back(EpilogueStep{EwOp::kMul, EpilogueStep::Operand::kScalar, -1, beta});
  }
  // The epilogue runs on the f32 accumulator in registers and converts once,
  // at the store, to Y's dtype: a Cast between float dtypes is no step of
  // its own (an f16 value widened to f32 before a residual Add is exact; the
  // rounding of an intermediate value to a narrow type is not repeated, as
  // for every intermediate step's dtype).
  const Value* cur = mm.output(0);
  for (size_t i = 1; i < nodes.size(); ++i) {
    const Node& e = *nodes[i];
    if (cur->uses().size() != 1) return absl::UnimplementedError("a GEMM epilogue value has other uses");
    if (e.domain().empty() && e.op() == "Cast") {
      if (e.input(0) != cur || !IsFloat(cur->type().dtype()) || !IsFloat(e.output(0)->type().dtype()))
        return absl::UnimplementedError("a GEMM epilogue casts only between float dtypes");
    } else {
      KILN_RETURN_IF_ERROR(AddEpilogueStep(e, cur, args, &p));
    }
    cur = e.output(0);
  }
  if (cur != outputs[0]) return absl::UnimplementedError("the fusion group's output is not its last node's");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ys, StaticShape(cur));
  std::vector<int64_t> want = p.batch;
  want.push_back(p.M);
  want.push_back(p.N);
  if (ys != (conv ? p.conv_y : want)) return absl::UnimplementedError("the epilogue changes the GEMM result's shape");
  p.output = cur->type().dtype();
  KILN_ASSIGN_OR_RETURN(p.y_arg, args.ArgOf(cur));
  if (conv) KILN_RETURN_IF_ERROR(args.View(p.y_arg, want));
  p.args = std::move(args.args);
  p.values = std::move(args.values);
  return p;
}

//===----------------------------------------------------------------------===//
// The GEMM cost model
//===----------------------------------------------------------------------===//

namespace {

const TileMma* MmaFor(const TileCostFigures& f, DType input) {
  for (const TileMma& m : f.target.mma) {
    if (m.input == input) return &m;
  }
  return nullptr;
}

int64_t Capacity(const TileCostFigures& f, Scope s) {
  auto it = f.target.capacity.find(s);
  return it == f.target.capacity.end() ? 0 : it->second;
}

// The rows and columns of an epilogue operand's buffer for a gm x gn group tile.
std::pair<int64_t, int64_t> OperandTile(const EpilogueStep& e, const GemmTiling& t) {
  switch (e.operand) {
    case EpilogueStep::Operand::kFull: return {t.gm, t.gn};
    case EpilogueStep::Operand::kRow: return {1, t.gn};
    case EpilogueStep::Operand::kCol: return {t.gm, 1};
    default: return {0, 0};
  }
}

bool SplitKAllowed(const GemmProblem& p) { return p.epilogue.empty() && p.output == p.accumulator; }

}  // namespace

std::string GemmTiling::Describe() const {
  std::string out = absl::StrCat(bm, "x", bn, "x", bk, " tiles, ", gm, "x", gn, " groups");
  if (tk != bk) absl::StrAppend(&out, ", k step ", tk, operand_stages > 1 ? absl::StrCat(" x", operand_stages) : "");
  absl::StrAppend(&out, ", ", stages, stages == 1 ? " stage" : " stages");
  if (split_k > 1) absl::StrAppend(&out, ", split-K ", split_k);
  absl::StrAppend(&out, ", est ", static_cast<int64_t>(std::llround(estimated_cycles)), " cycles (", bound, ")");
  return out;
}

absl::Status EstimateGemm(const GemmProblem& p, const TileCostFigures& f, GemmTiling* t) {
  const TileMma* mma = MmaFor(f, p.input);
  if (!mma) return absl::UnimplementedError(absl::StrCat(f.target.name, " has no MMA of ", DTypeName(p.input)));
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("tiling ", t->bm, "x", t->bn, "x", t->bk, ": ", why));
  };
  if (t->bm <= 0 || t->bn <= 0 || t->bk <= 0 || t->gm <= 0 || t->gn <= 0 || t->tk <= 0) return bad("empty tiles");
  if (t->gm % mma->m || t->gn % mma->n || t->tk % mma->k) return bad("group tiles are not in units of the MMA shape");
  if (t->bm % t->gm || t->bn % t->gn || t->bk % t->tk) return bad("the block tile is not in whole group tiles");
  const int64_t groups = (t->bm / t->gm) * (t->bn / t->gn);
  if (groups > f.max_group) return bad(absl::StrCat(groups, " groups, the target runs ", f.max_group));
  if (f.max_group_accumulators > 0 && t->gm * t->gn > f.max_group_accumulators)
    return bad(absl::StrCat("a ", t->gm, "x", t->gn, " group tile holds more than ", f.max_group_accumulators,
                            " accumulators"));
  if (t->stages < 1 || t->stages > f.max_stages) return bad(absl::StrCat(t->stages, " stages"));
  if (t->operand_stages < 1 || t->operand_stages > 2 || (t->tk == t->bk && t->operand_stages != 1)) {
    return bad("operand stages");
  }
  const int64_t kt = CeilDiv(p.K, t->bk);
  if (t->split_k < 1 || kt % t->split_k || (t->split_k > 1 && !SplitKAllowed(p))) return bad("split-K");
  if (f.max_stage_per_group > 0 && (t->bm + t->bn) * t->bk > f.max_stage_per_group * groups) {
    return bad(absl::StrCat("a stage of ", (t->bm + t->bn) * t->bk, " elements, ", f.max_stage_per_group,
                            " per group at most"));
  }
  if (p.im2col && f.max_gather_per_group > 0 && t->bk * t->bn > f.max_gather_per_group * groups) {
    return bad(absl::StrCat("an im2col stage of ", t->bk * t->bn, " gathered elements, ", f.max_gather_per_group,
                            " per group at most"));
  }
  const int64_t in = static_cast<int64_t>(DTypeSize(p.input)), acc = static_cast<int64_t>(DTypeSize(p.accumulator));
  int64_t vector_bytes = 0;
  for (const EpilogueStep& e : p.epilogue) {
    auto [r, c] = OperandTile(e, *t);
    vector_bytes += r * c * acc;
  }
  const std::pair<Scope, int64_t> usage[] = {
      {Scope::kStage, t->stages * (t->bm + t->bn) * t->bk * in},
      {Scope::kOperandA, groups * t->operand_stages * t->gm * t->tk * in},
      {Scope::kOperandB, groups * t->operand_stages * t->tk * t->gn * in},
      {Scope::kAccumulator, groups * t->gm * t->gn * acc},
      {Scope::kVector, groups * vector_bytes},
  };
  for (const auto& [scope, bytes] : usage) {
    const int64_t cap = Capacity(f, scope);
    if (cap > 0 && bytes > cap) {
      return absl::ResourceExhaustedError(absl::StrCat("tiling ", t->bm, "x", t->bn, "x", t->bk, " needs ", bytes,
                                                       " bytes of ", ScopeName(scope), ", the target has ", cap));
    }
  }

  // Blocks, how many of them a unit runs together (as many as its scopes
  // hold, each scope's capacity being the unit's, up to the target's
  // resident limit), and waves of units x resident blocks.
  const int64_t mt = CeilDiv(p.M, t->bm), nt = CeilDiv(p.N, t->bn), batch = Product(p.batch);
  const int64_t kps = kt / t->split_k;
  const int64_t blocks = batch * mt * nt * t->split_k;
  int64_t resident = std::max(f.max_resident_blocks, 1);
  for (const auto& [scope, bytes] : usage) {
    const int64_t cap = Capacity(f, scope);
    if (cap > 0 && bytes > 0) resident = std::min(resident, cap / bytes);
  }
  const int64_t together = std::max<int64_t>(1, std::min(resident, CeilDiv(blocks, f.compute_units)));
  const int64_t active = std::min<int64_t>(blocks, f.compute_units);
  const int64_t in_flight = std::min<int64_t>(blocks, f.compute_units * together);
  const int64_t waves = CeilDiv(blocks, f.compute_units * together);

  // One unit's pipeline, per round (each of its blocks one stage of bk):
  // the stage loads (its share of the global bandwidth, or the cache's),
  // the operand loads of all its groups, the MMAs; overlapped as far as the
  // stages in flight allow. A unit reaches its MMA rate with groups_at_peak
  // groups at work.
  const double share = f.cache_bytes > 0 && f.cache_bytes_per_cycle > 0
                           ? f.cache_bytes_per_cycle
                           : f.global_bytes_per_cycle / static_cast<double>(active);
  const double load_bw = std::min(f.stage_bytes_per_cycle, share);
  const double peak = f.MacsPerCycle(p.input) > 0 ? f.MacsPerCycle(p.input) : 1;
  auto rate = [&](int64_t working_groups) {
    return peak * std::min(1.0, static_cast<double>(working_groups) / std::max(f.groups_at_peak, 1));
  };
  const double n_together = static_cast<double>(together);
  const double transfer = static_cast<double>((t->bm + t->bn) * t->bk * in) / load_bw;
  const double operand = static_cast<double>(groups * (t->gm + t->gn) * t->bk * in) / f.operand_bytes_per_cycle;
  const double block_macs = static_cast<double>(t->bm * t->bn * t->bk);
  const double mma_time = n_together * block_macs / rate(together * groups);
  // One group's operand loads overlap its own MMAs only when the operand
  // scope is double-buffered, but with several groups at work one group's
  // loads overlap another's MMAs.
  auto inner = [&](double mma, double opnd, int64_t working_groups) {
    return t->operand_stages > 1 || working_groups > 1 ? std::max(opnd, mma) : opnd + mma;
  };
  const double unit_inner = inner(mma_time, n_together * operand, together * groups);
  // One block's own chain: with S stages a slot is refilled S - 1 stages
  // before it is read, so the load's latency hides only behind those S - 1
  // stages; each stage also waits for its slot and hands it back
  // (stage_sync_cycles). With no more K steps than S - 1 the prologue
  // issues every load and no slot is refilled: past the first load's
  // latency (charged once per tile below) no step waits for one.
  const double latency_and_transfer = f.global_latency_cycles + transfer;
  const double block_inner = inner(block_macs / rate(groups), operand, groups) + f.stage_sync_cycles;
  const double chain = t->stages == 1        ? latency_and_transfer + block_inner
                       : kps > t->stages - 1 ? std::max(block_inner, latency_and_transfer / (t->stages - 1))
                                             : block_inner;
  const double load = n_together * transfer;
  const double stage = std::max({unit_inner + f.stage_sync_cycles, load, chain});
  const double tile_elems = static_cast<double>(t->bm * t->bn);
  const double epilogue = n_together * (tile_elems * static_cast<double>(acc * static_cast<int64_t>(
                                                         p.epilogue.size() + 1)) / f.vector_bytes_per_cycle +
                                        tile_elems * static_cast<double>(DTypeSize(p.output)) / f.stage_bytes_per_cycle);
  const double tile = latency_and_transfer + static_cast<double>(kps) * stage + epilogue;
  const double unit = static_cast<double>(waves) * tile;

  // The chip's global traffic: every block's A and B panels (the blocks of
  // a wave share them through the cache when it holds them), Y (read and
  // written back under split-K), the epilogue operands.
  const int64_t rows = std::min(t->bm, p.M), cols = std::min(t->bn, p.N);
  const double panel_k = static_cast<double>(kps * t->bk * in);
  double ab = static_cast<double>(blocks) * static_cast<double>(rows + cols) * panel_k;
  if (f.cache_bytes > 0) {
    // The blocks of a wave: whole (slice, batch item) grids when one grid
    // has fewer tiles than the wave has blocks, else kGemmRasterRows tile
    // rows by as many tile columns as the wave reaches. They walk K
    // together, so the cache needs only their stages in flight to read each
    // of their panels from global memory once per wave.
    const int64_t grid = mt * nt;
    int64_t panels = 0;  // A rows and B columns the wave reads
    if (in_flight >= grid) {
      panels = CeilDiv(in_flight, grid) * (mt * rows + nt * cols);
    } else {
      const int64_t wave_m = std::min(mt, kGemmRasterRows);
      panels = wave_m * rows + std::min(nt, CeilDiv(in_flight, wave_m)) * cols;
    }
    const double window = static_cast<double>(panels * t->bk * in * t->stages);
    if (window <= static_cast<double>(f.cache_bytes)) {
      ab = std::min(ab, static_cast<double>(panels) * panel_k * static_cast<double>(blocks) /
                            static_cast<double>(in_flight));
    }
  }
  double bytes = ab + static_cast<double>(batch * p.M * p.N) * static_cast<double>(DTypeSize(p.output)) *
                          (t->split_k > 1 ? 2.0 * t->split_k : 1.0);
  for (const EpilogueStep& e : p.epilogue) {
    if (e.arg >= 0) bytes += static_cast<double>(Product(p.args[e.arg].shape) * DTypeSize(p.args[e.arg].dtype));
  }
  t->global_cycles = bytes / f.global_bytes_per_cycle;
  t->compute_cycles = static_cast<double>(waves * kps) * mma_time;
  t->estimated_cycles = std::max(unit, t->global_cycles + f.global_latency_cycles);

  const double busiest = std::max({mma_time, load, n_together * operand});
  if (t->global_cycles + f.global_latency_cycles >= unit) t->bound = "global memory";
  else if (epilogue > static_cast<double>(kps) * stage) t->bound = "epilogue";
  else if (chain > std::max(unit_inner + f.stage_sync_cycles, load)) t->bound = "pipeline latency";
  else if (busiest == mma_time) t->bound = "matrix";
  else if (busiest == load) t->bound = load_bw < f.stage_bytes_per_cycle ? "global memory" : "stage bandwidth";
  else t->bound = "operand bandwidth";
  return absl::OkStatus();
}

absl::StatusOr<GemmTiling> ChooseGemmTiling(const GemmProblem& p, const TileCostFigures& f) {
  const TileMma* mma = MmaFor(f, p.input);
  if (!mma) return absl::UnimplementedError(absl::StrCat(f.target.name, " has no MMA of ", DTypeName(p.input)));
  // Candidate extents: powers of two from the MMA unit up to 256, and the
  // dimension itself rounded up where it is smaller.
  auto extents = [](int64_t unit, int64_t dim) {
    std::vector<int64_t> out;
    const int64_t whole = RoundUp(dim, unit);
    for (int64_t e = unit; e <= 256 && e <= whole; e *= 2) out.push_back(e);
    if (whole < 256 && (out.empty() || out.back() != whole)) out.push_back(whole);
    return out;
  };
  auto divisors = [](int64_t extent, int64_t unit) {
    std::vector<int64_t> out;
    for (int64_t d : {1, 2, 4, 8}) {
      if (extent % d == 0 && (extent / d) % unit == 0) out.push_back(extent / d);
    }
    return out;
  };
  const int64_t base_blocks = Product(p.batch) * CeilDiv(p.M, 128) * CeilDiv(p.N, 128);
  std::vector<int> splits = {1};
  if (SplitKAllowed(p) && base_blocks < f.compute_units) splits = {1, 2, 4, 8, 16, 32};
  GemmTiling best;
  bool found = false;
  for (int64_t bm : extents(mma->m, p.M)) {
    for (int64_t bn : extents(mma->n, p.N)) {
      for (int64_t bk : extents(mma->k, p.K)) {
        for (int64_t tk : divisors(bk, mma->k)) {
          for (int64_t gm : divisors(bm, mma->m)) {
            for (int64_t gn : divisors(bn, mma->n)) {
              if ((bm / gm) * (bn / gn) > f.max_group) continue;
              for (int stages = 1; stages <= f.max_stages; ++stages) {
                for (int ostages = 1; ostages <= (tk == bk ? 1 : 2); ++ostages) {
                  for (int split : splits) {
                    GemmTiling t;
                    t.bm = bm, t.bn = bn, t.bk = bk, t.gm = gm, t.gn = gn, t.tk = tk;
                    t.stages = stages, t.operand_stages = ostages, t.split_k = split;
                    if (!EstimateGemm(p, f, &t).ok()) continue;
                    const bool better = !found || t.estimated_cycles < best.estimated_cycles * 0.999 ||
                                        (t.estimated_cycles <= best.estimated_cycles * 1.001 &&
                                         t.global_cycles < best.global_cycles * 0.999);
                    if (better) {
                      best = t;
                      found = true;
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  if (!found) {
    return absl::ResourceExhaustedError(absl::StrCat("no tiling of ", p.M, "x", p.N, "x", p.K, " fits the scopes of ",
                                                     f.target.name));
  }
  return best;
}

//===----------------------------------------------------------------------===//
// The canonical GEMM kernel
//===----------------------------------------------------------------------===//

namespace {

// Starts of a reference to a [batch..., rows, cols] tensor of `shape`
// (numpy-aligned with the GEMM's output) at batch variables `b`, row `row`
// and column `col`; a dimension of extent 1 starts at 0.
std::vector<Affine> AlignedStarts(const std::vector<int64_t>& shape, size_t out_rank, const Affine& row,
                                  const Affine& col) {
  std::vector<Affine> start;
  for (size_t d = 0; d < shape.size(); ++d) {
    const size_t od = d + out_rank - shape.size();  // the output dimension it aligns with
    if (shape[d] == 1) {
      start.push_back(Affine::Const(0));
    } else if (od == out_rank - 1) {
      start.push_back(col);
    } else if (od == out_rank - 2) {
      start.push_back(row);
    } else {
      start.push_back(Affine::Var(absl::StrCat("b", od)));
    }
  }
  return start;
}

}  // namespace

absl::StatusOr<TileKernel> LowerGemm(const GemmProblem& p, const GemmTiling& tiling, const TileCostFigures& f) {
  if (p.K == 1) {
    // A K tile of a tensor whose K extent is 1 would broadcast that column
    // (global dimensions of extent 1 broadcast on reads), not end there.
    return absl::UnimplementedError("a GEMM with K = 1 (an outer product) has no GEMM form");
  }
  GemmTiling t = tiling;
  KILN_RETURN_IF_ERROR(EstimateGemm(p, f, &t));
  const TileMma* mma = MmaFor(f, p.input);
  const DType acc_dt = mma->accumulator;
  TileKernel k;
  k.name = p.name;
  k.args = p.args;
  k.plan = t.Describe();
  if (t.split_k > 1) absl::StrAppend(&k.plan, "; Y is zeroed before the launch");
  const std::string &A = p.args[p.a_arg].name, &B = p.args[p.b_arg].name, &Y = p.args[p.y_arg].name;
  const size_t out_rank = p.batch.size() + 2;
  const int64_t kt = CeilDiv(p.K, t.bk), kps = kt / t.split_k;

  std::vector<LoopVar> grid_vars;
  // A batch dim of extent 1 needs no loop: every operand has extent 1 there
  // and is addressed at 0 (AlignedStarts).
  for (size_t i = 0; i < p.batch.size(); ++i)
    if (p.batch[i] > 1) grid_vars.push_back({absl::StrCat("b", i), p.batch[i]});
  grid_vars.push_back({"m", CeilDiv(p.M, t.bm)});
  grid_vars.push_back({"n", CeilDiv(p.N, t.bn)});
  if (t.split_k > 1) grid_vars.push_back({"s", t.split_k});
  auto grid = MakeLoop(Stmt::LoopKind::kGrid, std::move(grid_vars));
  grid->body.push_back(MakeBuffer("As", p.input, {t.bm, t.bk}, Scope::kStage, t.stages));
  grid->body.push_back(MakeBuffer("Bs", p.input, {t.bk, t.bn}, Scope::kStage, t.stages));
  auto group = MakeLoop(Stmt::LoopKind::kGroup, {{"wm", t.bm / t.gm}, {"wn", t.bn / t.gn}});
  group->body.push_back(MakeBuffer("Aa", p.input, {t.gm, t.tk}, Scope::kOperandA, t.operand_stages));
  group->body.push_back(MakeBuffer("Bb", p.input, {t.tk, t.gn}, Scope::kOperandB, t.operand_stages));
  group->body.push_back(MakeBuffer("acc", acc_dt, {t.gm, t.gn}, Scope::kAccumulator));
  std::vector<std::string> operand_buffers(p.epilogue.size());
  for (size_t i = 0; i < p.epilogue.size(); ++i) {
    auto [r, c] = OperandTile(p.epilogue[i], t);
    if (r == 0) continue;
    operand_buffers[i] = absl::StrCat("e", i);
    group->body.push_back(MakeBuffer(operand_buffers[i], acc_dt, {r, c}, Scope::kVector));
  }
  group->body.push_back(MakeFill(Whole("acc", 2), 0));

  // The main loop: stage tiles of A and B, then operand steps and MMAs.
  const Affine kstart = Terms({{"s", t.split_k > 1 ? kps * t.bk : 0}, {"k", t.bk}});
  const Affine mstart = Affine::Var("m", t.bm), nstart = Affine::Var("n", t.bn);
  auto kloop = MakeLoop(Stmt::LoopKind::kPipelined, {{"k", kps}}, t.stages);
  {
    std::vector<Affine> as = AlignedStarts(p.args[p.a_arg].shape, out_rank, Affine{}, Affine{});
    as.resize(as.size() - 2);
    as.push_back(p.trans_a ? kstart : mstart);
    as.push_back(p.trans_a ? mstart : kstart);
    // B read through im2col is addressed in its virtual shape [N, G, K, P].
    const std::vector<int64_t> b_shape =
        p.im2col ? Im2colShape(p.args[p.b_arg].shape, *p.im2col) : p.args[p.b_arg].shape;
    std::vector<Affine> bs = AlignedStarts(b_shape, out_rank, Affine{}, Affine{});
    bs.resize(bs.size() - 2);
    bs.push_back(p.trans_b ? nstart : kstart);
    bs.push_back(p.trans_b ? kstart : nstart);
    kloop->body.push_back(MakeCopy(Ref(A, std::move(as)), Whole("As", 2), p.trans_a));
    kloop->body.push_back(MakeCopy(Ref(B, std::move(bs)), Whole("Bs", 2), p.trans_b));
    kloop->body.back()->im2col = p.im2col;
    kloop->body.push_back(MakeSync(Scope::kGlobal, Scope::kStage));
  }
  const bool inner = t.tk != t.bk;
  Block steps;
  const Affine kk = inner ? Affine::Var("kk", t.tk) : Affine::Const(0);
  steps.push_back(MakeCopy(Ref("As", {Affine::Var("wm", t.gm), kk}), Whole("Aa", 2)));
  steps.push_back(MakeCopy(Ref("Bs", {kk, Affine::Var("wn", t.gn)}), Whole("Bb", 2)));
  steps.push_back(MakeSync(Scope::kStage, Scope::kOperandA));
  steps.push_back(MakeMma(Whole("acc", 2), Whole("Aa", 2), Whole("Bb", 2), true));
  if (inner) {
    auto kkloop = MakeLoop(Stmt::LoopKind::kPipelined, {{"kk", t.bk / t.tk}}, t.operand_stages);
    kkloop->body = std::move(steps);
    kloop->body.push_back(std::move(kkloop));
  } else {
    for (auto& s : steps) kloop->body.push_back(std::move(s));
  }
  group->body.push_back(std::move(kloop));

  // The epilogue on the accumulator, and the write-out.
  const Affine row = Terms({{"m", t.bm}, {"wm", t.gm}}), col = Terms({{"n", t.bn}, {"wn", t.gn}});
  for (size_t i = 0; i < p.epilogue.size(); ++i) {
    if (operand_buffers[i].empty()) continue;
    const TileArg& arg = p.args[p.epilogue[i].arg];
    group->body.push_back(MakeCopy(Ref(arg.name, AlignedStarts(arg.shape, out_rank, row, col)),
                                   Whole(operand_buffers[i], 2)));
  }
  if (p.alpha != 1) group->body.push_back(MakeEw(EwOp::kMul, Whole("acc", 2), {Of(Whole("acc", 2)), Scalar(p.alpha)}));
  for (size_t i = 0; i < p.epilogue.size(); ++i) {
    const EpilogueStep& e = p.epilogue[i];
    std::vector<Operand> srcs = {Of(Whole("acc", 2))};
    if (e.operand != EpilogueStep::Operand::kNone) {
      Operand other = operand_buffers[i].empty() ? Scalar(e.scalar) : Of(Whole(operand_buffers[i], 2));
      srcs.insert(e.operand_first ? srcs.begin() : srcs.end(), std::move(other));
    }
    group->body.push_back(MakeEw(e.op, Whole("acc", 2), std::move(srcs)));
  }
  // Y's rows and columns are addressed by the tile even where M or N is 1
  // (the write's ragged edge), so code generators find the tile variables.
  std::vector<Affine> ys = AlignedStarts(p.args[p.y_arg].shape, out_rank, row, col);
  ys[ys.size() - 2] = row;
  ys[ys.size() - 1] = col;
  auto out = MakeCopy(Whole("acc", 2), Ref(Y, std::move(ys)));
  out->accumulate = t.split_k > 1;
  group->body.push_back(std::move(out));
  grid->body.push_back(std::move(group));
  k.body.push_back(std::move(grid));
  KILN_RETURN_IF_ERROR(Verify(k, f.target));
  return k;
}

//===----------------------------------------------------------------------===//
// Elementwise and row-reduction kernels
//===----------------------------------------------------------------------===//

namespace {

// How a value sits in the [rows, cols] view of a vector kernel.
enum class Form : uint8_t { kFull, kRow, kCol, kScalar };

// The view: a reference shape split into row dims [0, split) and column dims.
struct View {
  std::vector<int64_t> ref;
  size_t split = 0;
  bool reduction = false;
  int64_t rows() const { return Product({ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(split)}); }
  int64_t cols() const { return Product({ref.begin() + static_cast<std::ptrdiff_t>(split), ref.end()}); }
};

// The form of a value of `shape` in `view` (numpy-aligned), if it has one.
std::optional<Form> Classify(const std::vector<int64_t>& shape, const View& v) {
  if (shape.size() > v.ref.size()) return std::nullopt;
  const size_t lead = v.ref.size() - shape.size();
  bool rows_full = true, rows_one = true, cols_full = true, cols_one = true;
  for (size_t d = 0; d < v.ref.size(); ++d) {
    const int64_t e = d < lead ? 1 : shape[d - lead];
    bool& full = d < v.split ? rows_full : cols_full;
    bool& one = d < v.split ? rows_one : cols_one;
    full = full && e == v.ref[d];
    one = one && e == 1;
  }
  if (rows_full && cols_full) return Form::kFull;
  if (rows_one && cols_full) return Form::kRow;
  if (rows_full && cols_one) return Form::kCol;
  if (rows_one && cols_one) return Form::kScalar;
  return std::nullopt;
}

// The innermost axes `n` reduces (normalized), how many leading dims stay,
// or an error when it is no row reduction of its data input.
absl::StatusOr<size_t> ReductionSplit(const Node& n) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, StaticShape(n.input(0)));
  const int64_t rank = static_cast<int64_t>(shape.size());
  auto norm = [&](int64_t a) { return a < 0 ? a + rank : a; };
  if (n.op() == "Softmax" || n.op() == "LogSoftmax") {
    if (norm(n.GetInt("axis", -1)) != rank - 1) {
      return absl::UnimplementedError(absl::StrCat(n.op(), " over an axis other than the last has no row form"));
    }
    return static_cast<size_t>(rank - 1);
  }
  if (n.op() == "LayerNormalization") {
    const int64_t axis = norm(n.GetInt("axis", -1));
    if (axis < 0 || axis >= rank) return absl::FailedPreconditionError("LayerNormalization's axis is out of range");
    return static_cast<size_t>(axis);
  }
  if (n.op() == "GlobalAveragePool" || n.op() == "GlobalMaxPool") {  // over the spatial axes, kept
    if (rank < 3) return absl::FailedPreconditionError(absl::StrCat(n.op(), " of a tensor of rank below 3"));
    return size_t{2};
  }
  std::vector<int64_t> axes = n.GetInts("axes");
  if (n.op() == "ReduceSum" && n.input(1)) {
    if (!n.input(1)->is_constant()) return absl::UnimplementedError("ReduceSum's axes are not a constant");
    const Tensor& t = n.input(1)->constant();
    axes.clear();
    for (int64_t i = 0; i < n.input(1)->type().shape().NumElements(); ++i) {
      axes.push_back(static_cast<int64_t>(t.GetDouble(i)));
    }
  }
  if (axes.empty()) {
    if (n.GetInt("noop_with_empty_axes", 0) != 0) return absl::UnimplementedError("a no-op reduction");
    return size_t{0};
  }
  std::set<int64_t> sorted;
  for (int64_t a : axes) sorted.insert(norm(a));
  if (*sorted.begin() != rank - static_cast<int64_t>(sorted.size()) || *sorted.rbegin() != rank - 1) {
    return absl::UnimplementedError(
        absl::StrCat(n.op(), " over axes [", absl::StrJoin(axes, ","), "]: only the innermost axes have a row form"));
  }
  return static_cast<size_t>(*sorted.begin());
}

const std::map<std::string, ReduceOp>& ReduceOps() {
  static const auto* ops = new std::map<std::string, ReduceOp>{
      {"ReduceSum", ReduceOp::kSum}, {"ReduceMean", ReduceOp::kSum}, {"ReduceMax", ReduceOp::kMax},
      {"ReduceMin", ReduceOp::kMin}, {"ReduceProd", ReduceOp::kProd},
      {"GlobalAveragePool", ReduceOp::kSum}, {"GlobalMaxPool", ReduceOp::kMax}};
  return *ops;
}

// Whether `n` is an op VectorBuilder takes.
bool HasVectorForm(const Node& n) {
  if (OneStepEwOp(n)) return true;
  if (n.domain() == "kiln") return n.op() == "Gelu";
  return ReduceOps().count(n.op()) || n.op() == "Softmax" || n.op() == "LogSoftmax" ||
         n.op() == "LayerNormalization" || n.op() == "Clip" || n.op() == "LeakyRelu";
}

bool IsRowOp(const Node& n) {
  return n.domain().empty() && (ReduceOps().count(n.op()) || n.op() == "Softmax" || n.op() == "LogSoftmax" ||
                                n.op() == "LayerNormalization");
}

absl::Status NoVectorForm(const Node& n) {
  return absl::UnimplementedError(absl::StrCat(n.QualifiedOp(), " has no elementwise or row-reduction form"));
}

// Builds the steps of a vector kernel: one buffer per value (or a scalar
// operand for a one-element constant), temporaries for composite ops.
class VectorBuilder {
 public:
  VectorBuilder(KernelArgs& args, View view) : args_(args), view_(std::move(view)) {}

  absl::Status Node(const kiln::Node& n) {
    if (n.domain().empty() && ReduceOps().count(n.op())) return Reduction(n);
    if (n.domain().empty() && (n.op() == "Softmax" || n.op() == "LogSoftmax")) return Softmax(n);
    if (n.domain().empty() && n.op() == "LayerNormalization") return LayerNorm(n);
    if (n.domain().empty() && n.op() == "Clip") {
      std::string y;
      KILN_ASSIGN_OR_RETURN(y, Def(n.output(0)));
      KILN_ASSIGN_OR_RETURN(Operand x, Use(n.input(0)));
      Ew(EwOp::kCopy, y, {x});
      for (int i = 1; i < 3; ++i) {
        if (!n.input(i)) continue;
        KILN_ASSIGN_OR_RETURN(Operand bound, Use(n.input(i)));
        Ew(i == 1 ? EwOp::kMax : EwOp::kMin, y, {Buf(y), bound});
      }
      return absl::OkStatus();
    }
    if (n.domain().empty() && n.op() == "LeakyRelu") {
      KILN_ASSIGN_OR_RETURN(std::string y, Def(n.output(0)));
      KILN_ASSIGN_OR_RETURN(Operand x, Use(n.input(0)));
      const Form form = forms_.at(y);
      const std::string neg = Temp(form, DType::kBool), scaled = Temp(form, n.output(0)->type().dtype());
      Ew(EwOp::kCmpLt, neg, {x, Scalar(0)});
      Ew(EwOp::kMul, scaled, {x, Scalar(n.GetFloat("alpha", 0.01f))});
      Ew(EwOp::kSelect, y, {Buf(neg), Buf(scaled), x});
      return absl::OkStatus();
    }
    std::optional<EwOp> op = OneStepEwOp(n);
    if (!op) return NoVectorForm(n);
    std::vector<Operand> srcs;
    for (const Value* in : n.inputs()) {
      if (!in) return absl::UnimplementedError(absl::StrCat(n.QualifiedOp(), " with an omitted input"));
      KILN_ASSIGN_OR_RETURN(Operand o, Use(in));
      srcs.push_back(std::move(o));
    }
    if (static_cast<int>(srcs.size()) != EwOpArity(*op)) {
      return absl::UnimplementedError(absl::StrCat(n.QualifiedOp(), " with ", srcs.size(), " inputs"));
    }
    KILN_ASSIGN_OR_RETURN(std::string y, Def(n.output(0)));
    Ew(*op, y, std::move(srcs));
    return absl::OkStatus();
  }

  // The buffer of a value the kernel writes out.
  absl::StatusOr<std::string> Output(const Value* v) {
    auto it = buffer_of_.find(v);
    if (it == buffer_of_.end()) {
      KILN_ASSIGN_OR_RETURN(Operand o, Use(v));
      if (!o.ref) return absl::UnimplementedError("an output is a constant");
      return o.ref->name;
    }
    return it->second;
  }

  // Buffers (name, dtype, form) in declaration order; the argument each input buffer reads.
  struct Buffer {
    std::string name;
    DType dtype;
    Form form;
    int arg = -1;  // >= 0: filled from this argument
  };
  const std::vector<Buffer>& buffers() const { return buffers_; }
  Block& steps() { return steps_; }
  Form FormOf(const std::string& buffer) const { return forms_.at(buffer); }

 private:
  Operand Buf(const std::string& name) const { return Of(Whole(name, 2)); }
  void Ew(EwOp op, const std::string& dst, std::vector<Operand> srcs) {
    steps_.push_back(MakeEw(op, Whole(dst, 2), std::move(srcs)));
  }
  void Reduce(ReduceOp op, const std::string& dst, const Operand& src) {
    steps_.push_back(MakeReduce(op, Whole(dst, 2), *src.ref, 1));
  }

  std::string NewBuffer(absl::string_view hint, DType dtype, Form form, int arg) {
    std::string name = args_.names.Unique(absl::StrCat("t_", hint));
    buffers_.push_back(Buffer{name, dtype, form, arg});
    forms_[name] = form;
    return name;
  }
  std::string Temp(Form form, DType dtype) { return NewBuffer("tmp", dtype, form, -1); }

  absl::StatusOr<Form> FormOfValue(const Value* v, std::optional<Form> forced = std::nullopt) {
    if (forced) return *forced;
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, StaticShape(v));
    std::optional<Form> f = Classify(shape, view_);
    if (!f) {
      return absl::UnimplementedError(absl::StrCat("'", v->name(), "' ", v->type().ToString(),
                                                   " broadcasts in no row, column or scalar pattern of the [",
                                                   view_.rows(), ", ", view_.cols(), "] view"));
    }
    return *f;
  }

  // The operand reading `v`: a scalar constant, or its buffer (an input's
  // buffer is filled from its argument).
  absl::StatusOr<Operand> Use(const Value* v) {
    if (std::optional<double> c = ScalarConstant(v)) return Scalar(*c);
    auto it = buffer_of_.find(v);
    if (it != buffer_of_.end()) return Buf(it->second);
    if (v->producer() && !args_.IsArg(v)) {
      return absl::FailedPreconditionError(absl::StrCat("'", v->name(), "' is used before it is computed"));
    }
    KILN_ASSIGN_OR_RETURN(int arg, args_.ArgOf(v));
    KILN_ASSIGN_OR_RETURN(Form form, FormOfValue(v));
    const std::string name = NewBuffer(args_.args[arg].name, v->type().dtype(), form, arg);
    buffer_of_[v] = name;
    return Buf(name);
  }

  // The buffer a node's result goes to.
  absl::StatusOr<std::string> Def(const Value* v, std::optional<Form> forced = std::nullopt) {
    KILN_ASSIGN_OR_RETURN(Form form, FormOfValue(v, forced));
    const std::string name = NewBuffer(v->name(), v->type().dtype(), form, -1);
    buffer_of_[v] = name;
    return name;
  }

  absl::Status Reduction(const kiln::Node& n) {
    KILN_ASSIGN_OR_RETURN(Operand x, Use(n.input(0)));
    if (FormOf(x.ref->name) != Form::kFull) return absl::UnimplementedError("a reduction of a broadcast value");
    if (n.GetInt("keepdims", 1) == 0 && n.output(0)->uses().size() > 0 && !args_.IsArg(n.output(0))) {
      return absl::UnimplementedError("a reduction without keepdims feeds other ops of the group");
    }
    KILN_ASSIGN_OR_RETURN(std::string y, Def(n.output(0), Form::kCol));
    Reduce(ReduceOps().at(n.op()), y, x);
    if (n.op() == "ReduceMean" || n.op() == "GlobalAveragePool") Ew(EwOp::kMul, y, {Buf(y), Scalar(1.0 / static_cast<double>(view_.cols()))});
    return absl::OkStatus();
  }

  absl::Status Softmax(const kiln::Node& n) {
    KILN_ASSIGN_OR_RETURN(Operand x, Use(n.input(0)));
    KILN_ASSIGN_OR_RETURN(std::string y, Def(n.output(0)));
    const std::string stat = Temp(Form::kCol, DType::kF32);
    Reduce(ReduceOp::kMax, stat, x);
    Ew(EwOp::kSub, y, {x, Buf(stat)});
    if (n.op() == "Softmax") {
      Ew(EwOp::kExp, y, {Buf(y)});
      Reduce(ReduceOp::kSum, stat, Buf(y));
      Ew(EwOp::kDiv, y, {Buf(y), Buf(stat)});
      return absl::OkStatus();
    }
    const std::string e = Temp(Form::kFull, DType::kF32);
    Ew(EwOp::kExp, e, {Buf(y)});
    Reduce(ReduceOp::kSum, stat, Buf(e));
    Ew(EwOp::kLog, stat, {Buf(stat)});
    Ew(EwOp::kSub, y, {Buf(y), Buf(stat)});
    return absl::OkStatus();
  }

  absl::Status LayerNorm(const kiln::Node& n) {
    for (int i = 1; i < n.num_outputs(); ++i) {
      if (n.output(i) && n.output(i)->has_uses()) {
        return absl::UnimplementedError("LayerNormalization's mean and inverse deviation outputs are used");
      }
    }
    KILN_ASSIGN_OR_RETURN(Operand x, Use(n.input(0)));
    KILN_ASSIGN_OR_RETURN(std::string y, Def(n.output(0)));
    const double inv_n = 1.0 / static_cast<double>(view_.cols());
    const std::string stat = Temp(Form::kCol, DType::kF32), sq = Temp(Form::kFull, DType::kF32);
    Reduce(ReduceOp::kSum, stat, x);
    Ew(EwOp::kMul, stat, {Buf(stat), Scalar(inv_n)});
    Ew(EwOp::kSub, y, {x, Buf(stat)});
    Ew(EwOp::kMul, sq, {Buf(y), Buf(y)});
    Reduce(ReduceOp::kSum, stat, Buf(sq));
    Ew(EwOp::kMul, stat, {Buf(stat), Scalar(inv_n)});
    Ew(EwOp::kAdd, stat, {Buf(stat), Scalar(n.GetFloat("epsilon", 1e-5f))});
    Ew(EwOp::kRsqrt, stat, {Buf(stat)});
    Ew(EwOp::kMul, y, {Buf(y), Buf(stat)});
    for (int i = 1; i < 3; ++i) {
      if (!n.input(i)) continue;
      KILN_ASSIGN_OR_RETURN(Operand p, Use(n.input(i)));
      Ew(i == 1 ? EwOp::kMul : EwOp::kAdd, y, {Buf(y), p});
    }
    return absl::OkStatus();
  }

  KernelArgs& args_;
  View view_;
  std::vector<Buffer> buffers_;
  std::map<std::string, Form> forms_;
  std::map<const Value*, std::string> buffer_of_;
  Block steps_;
};

// The view of a vector kernel over `nodes` writing `outputs`: a reduction's
// data input split at its reduced axes, else the first output's shape split
// before the innermost dims every value takes whole or not at all.
absl::StatusOr<View> ViewOf(const std::vector<const Node*>& nodes, const std::vector<const Value*>& outputs) {
  std::optional<View> view;
  for (const Node* n : nodes) {
    if (!IsRowOp(*n)) continue;
    View v;
    KILN_ASSIGN_OR_RETURN(v.ref, StaticShape(n->input(0)));
    KILN_ASSIGN_OR_RETURN(v.split, ReductionSplit(*n));
    v.reduction = true;
    if (view && (view->ref != v.ref || view->split != v.split)) {
      return absl::UnimplementedError("the group's reductions have different row views");
    }
    view = v;
  }
  if (view) return *view;
  View v;
  KILN_ASSIGN_OR_RETURN(v.ref, StaticShape(outputs[0]));
  std::vector<std::vector<int64_t>> shapes;
  for (const Node* n : nodes) {
    for (const Value* in : n->inputs()) {
      if (!in || ScalarConstant(in)) continue;
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> s, StaticShape(in));
      shapes.push_back(std::move(s));
    }
    for (const Value* out : n->outputs()) {
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> s, StaticShape(out));
      shapes.push_back(std::move(s));
    }
  }
  for (v.split = 0; v.split <= v.ref.size(); ++v.split) {
    if (std::all_of(shapes.begin(), shapes.end(), [&](const auto& s) { return Classify(s, v).has_value(); })) {
      return v;
    }
  }
  return absl::UnimplementedError("the operands broadcast in no row, column or scalar pattern");
}

std::vector<int64_t> ViewShape(Form form, int64_t rows, int64_t cols) {
  switch (form) {
    case Form::kFull: return {rows, cols};
    case Form::kRow: return {1, cols};
    case Form::kCol: return {rows, 1};
    case Form::kScalar: return {1, 1};
  }
  return {1, 1};
}

}  // namespace

absl::StatusOr<TileKernel> LowerVectorNode(const Node& node, const TileCostFigures& f,
                                           std::vector<const Value*>* values) {
  KILN_ASSIGN_OR_RETURN(KernelArgs args, KernelArgs::Of(node));
  const std::vector<const Node*> nodes = args.Nodes(node);
  const std::vector<const Value*> outputs = args.Outputs(node);
  if (nodes.empty() || outputs.empty()) return absl::UnimplementedError("nothing to compute");
  for (const Node* n : nodes) {
    if (!HasVectorForm(*n)) return NoVectorForm(*n);
  }
  KILN_ASSIGN_OR_RETURN(View view, ViewOf(nodes, outputs));
  VectorBuilder b(args, view);
  for (const Node* n : nodes) KILN_RETURN_IF_ERROR(b.Node(*n));
  std::vector<std::pair<std::string, int>> outs;  // buffer, argument
  for (const Value* v : outputs) {
    KILN_ASSIGN_OR_RETURN(std::string buf, b.Output(v));
    KILN_ASSIGN_OR_RETURN(int arg, args.ArgOf(v));
    const Form form = b.FormOf(buf);
    if (form != Form::kFull && form != Form::kCol) {
      return absl::UnimplementedError(absl::StrCat("the output '", v->name(), "' is a broadcast row or scalar"));
    }
    outs.emplace_back(buf, arg);
  }

  // Tiles: whole rows for reductions; else up to the columns one row's
  // buffers fit. As many rows as fit, fewer when that leaves units idle.
  const int64_t rows = view.rows(), cols = view.cols();
  int64_t full = 0, row = 0, col = 0, scalar = 0;  // bytes per element of each form
  for (const auto& buf : b.buffers()) {
    const int64_t bytes = static_cast<int64_t>(DTypeSize(buf.dtype));
    (buf.form == Form::kFull ? full : buf.form == Form::kRow ? row : buf.form == Form::kCol ? col : scalar) += bytes;
  }
  const int64_t cap = Capacity(f, Scope::kVector) > 0 ? Capacity(f, Scope::kVector) : int64_t{256} << 10;
  int64_t bc = cols;
  if (!view.reduction && (full + row) * bc + col + scalar > cap) {
    bc = std::max<int64_t>(1, (cap - col - scalar) / std::max<int64_t>(full + row, 1));
    if (bc >= 64) bc = bc / 64 * 64;
  }
  const int64_t fit = (cap - row * bc - scalar) / std::max<int64_t>(full * bc + col, 1);
  if (fit < 1) {
    return absl::ResourceExhaustedError(absl::StrCat("a row of ", cols, " elements does not fit the vector scope (",
                                                     cap, " bytes) of ", f.target.name));
  }
  int64_t br = std::min(rows, fit);
  if (CeilDiv(rows, br) * CeilDiv(cols, bc) < f.compute_units) {
    br = std::max<int64_t>(1, std::min(br, CeilDiv(rows, CeilDiv(f.compute_units, CeilDiv(cols, bc)))));
  }
  if (!view.reduction && CeilDiv(rows, br) * CeilDiv(cols, bc) < f.compute_units) {
    const int64_t per_unit = CeilDiv(cols, CeilDiv(f.compute_units, CeilDiv(rows, br)));
    bc = std::min(bc, std::max<int64_t>(per_unit >= 64 ? RoundUp(per_unit, 64) : per_unit, std::min<int64_t>(cols, 64)));
  }
  const int64_t ct = CeilDiv(cols, bc);

  TileKernel k;
  k.name = KernelName(node);
  k.args = args.args;
  if (values) *values = args.values;
  k.plan = absl::StrCat(view.reduction ? "row reduction" : "elementwise", " over [", rows, ", ", cols, "], tiles ",
                        br, "x", bc);
  std::vector<LoopVar> vars = {{"r", CeilDiv(rows, br)}};
  if (!view.reduction) vars.push_back({"c", ct});
  auto grid = MakeLoop(Stmt::LoopKind::kGrid, std::move(vars));
  auto start = [&](Form form) {
    const bool r = form == Form::kFull || form == Form::kCol, c = form == Form::kFull || form == Form::kRow;
    return std::vector<Affine>{r ? Affine::Var("r", br) : Affine::Const(0),
                               c && !view.reduction ? Affine::Var("c", bc) : Affine::Const(0)};
  };
  auto declare_view = [&](int arg, Form form) { k.args[arg].shape = ViewShape(form, rows, cols); };
  Block copies_in;
  for (const auto& buf : b.buffers()) {
    grid->body.push_back(MakeBuffer(buf.name, buf.dtype, ViewShape(buf.form, br, bc), Scope::kVector));
    if (buf.arg < 0) continue;
    declare_view(buf.arg, buf.form);
    copies_in.push_back(MakeCopy(Ref(k.args[buf.arg].name, start(buf.form)), Whole(buf.name, 2)));
  }
  for (auto& s : copies_in) grid->body.push_back(std::move(s));
  for (auto& s : b.steps()) grid->body.push_back(std::move(s));
  for (const auto& [buf, arg] : outs) {
    declare_view(arg, b.FormOf(buf));
    grid->body.push_back(MakeCopy(Whole(buf, 2), Ref(k.args[arg].name, start(b.FormOf(buf)))));
  }
  k.body.push_back(std::move(grid));
  KILN_RETURN_IF_ERROR(Verify(k, f.target));
  return k;
}

//===----------------------------------------------------------------------===//
// Window kernels: pooling and depthwise convolution
//===----------------------------------------------------------------------===//

namespace {

// Whether a convolution GEMM is depthwise (one input and one output
// channel per group): a window kernel on the vector scope, not an MMA.
bool Depthwise(const GemmProblem& p) {
  return p.conv && p.M == 1 && p.batch[1] > 1 && p.K == (p.im2col ? p.im2col->kernel[0] * p.im2col->kernel[1] : 1);
}

// The window kernel: im2col tiles [bc, KH*KW, bp] of bc channels and bp
// output positions in vector buffers, optionally weighted (depthwise
// weights [bc, KH*KW, 1]), reduced over the window axis, then the epilogue.
struct WindowProblem {
  std::string name;
  std::vector<TileArg> args;
  int x_arg = 0, y_arg = 1, w_arg = -1;  // w: depthwise weights, declared [C, KH*KW, 1]
  Im2col im2col;                         // groups = C
  ReduceOp reduce = ReduceOp::kMax;
  double scale = 1;                      // applied after the reduction (AveragePool's 1/window)
  std::vector<EpilogueStep> epilogue;    // operands declared [n', c', 1, p'] (c' = C or 1, p' = P or 1)
  std::vector<const Value*> values;      // the value each argument stands for
};

absl::StatusOr<TileKernel> LowerWindow(const WindowProblem& w, const TileCostFigures& f) {
  const std::vector<int64_t>& xs = w.args[w.x_arg].shape;
  const int64_t n = xs[0], c = xs[1], kk = w.im2col.kernel[0] * w.im2col.kernel[1];
  const int64_t p = w.im2col.out[0] * w.im2col.out[1];
  const int64_t cap = Capacity(f, Scope::kVector) > 0 ? Capacity(f, Scope::kVector) : int64_t{256} << 10;
  // Positions along the tile's rows, channels across; smaller tiles where
  // that leaves compute units idle or the window does not fit.
  int64_t bp = std::min<int64_t>(p, 128), bc = std::min<int64_t>(c, std::max<int64_t>(1, 256 / bp));
  auto blocks = [&] { return n * CeilDiv(c, bc) * CeilDiv(p, bp); };
  auto bytes = [&] { return (kk * bc * bp + (w.w_arg >= 0 ? kk * bc : 0) + 2 * bc * bp) * 4; };
  while (bc > 1 && (blocks() < f.compute_units || bytes() > cap)) bc = (bc + 1) / 2;
  while (bp > 1 && bytes() > cap) bp = (bp + 1) / 2;
  if (bytes() > cap) {
    return absl::ResourceExhaustedError(absl::StrCat("a window of ", kk, " elements does not fit the vector scope of ",
                                                     f.target.name));
  }
  TileKernel k;
  k.name = w.name;
  k.args = w.args;
  k.plan = absl::StrCat("window ", ReduceOpName(w.reduce), " over ", w.im2col.kernel[0], "x", w.im2col.kernel[1],
                        w.w_arg >= 0 ? " (depthwise weights)" : "", ", tiles ", bc, " channels x ", bp, " positions");
  std::vector<LoopVar> vars;
  if (n > 1) vars.push_back({"b0", n});
  vars.push_back({"c", CeilDiv(c, bc)});
  vars.push_back({"n", CeilDiv(p, bp)});
  auto grid = MakeLoop(Stmt::LoopKind::kGrid, std::move(vars));
  const Affine b0 = n > 1 ? Affine::Var("b0") : Affine::Const(0);
  const Affine cs = Affine::Var("c", bc), ps = Affine::Var("n", bp);
  grid->body.push_back(MakeBuffer("win", DType::kF32, {bc, kk, bp}, Scope::kVector));
  if (w.w_arg >= 0) grid->body.push_back(MakeBuffer("wt", DType::kF32, {bc, kk, 1}, Scope::kVector));
  grid->body.push_back(MakeBuffer("acc", DType::kF32, {bc, 1, bp}, Scope::kVector));
  std::vector<std::string> operand(w.epilogue.size());
  for (size_t i = 0; i < w.epilogue.size(); ++i) {
    const EpilogueStep& e = w.epilogue[i];
    if (e.arg < 0) continue;
    const std::vector<int64_t>& v = w.args[e.arg].shape;
    operand[i] = absl::StrCat("e", i);
    grid->body.push_back(MakeBuffer(operand[i], DType::kF32, {v[1] > 1 ? bc : 1, 1, v[3] > 1 ? bp : 1}, Scope::kVector));
  }
  auto copy = MakeCopy(Ref(w.args[w.x_arg].name, {b0, cs, Affine::Const(0), ps}), Whole("win", 3));
  copy->im2col = w.im2col;
  grid->body.push_back(std::move(copy));
  if (w.w_arg >= 0) {
    grid->body.push_back(MakeCopy(Ref(w.args[w.w_arg].name, {cs, Affine::Const(0), Affine::Const(0)}), Whole("wt", 3)));
    grid->body.push_back(MakeEw(EwOp::kMul, Whole("win", 3), {Of(Whole("win", 3)), Of(Whole("wt", 3))}));
  }
  grid->body.push_back(MakeReduce(w.reduce, Whole("acc", 3), Whole("win", 3), 1));
  if (w.scale != 1) grid->body.push_back(MakeEw(EwOp::kMul, Whole("acc", 3), {Of(Whole("acc", 3)), Scalar(w.scale)}));
  for (size_t i = 0; i < w.epilogue.size(); ++i) {
    const EpilogueStep& e = w.epilogue[i];
    std::vector<Operand> srcs = {Of(Whole("acc", 3))};
    if (!operand[i].empty()) {
      const std::vector<int64_t>& v = w.args[e.arg].shape;
      grid->body.push_back(MakeCopy(Ref(w.args[e.arg].name, {v[0] > 1 ? b0 : Affine::Const(0),
                                                             v[1] > 1 ? cs : Affine::Const(0), Affine::Const(0),
                                                             v[3] > 1 ? ps : Affine::Const(0)}),
                                    Whole(operand[i], 3)));
    }
    if (e.operand != EpilogueStep::Operand::kNone) {
      Operand other = operand[i].empty() ? Scalar(e.scalar) : Of(Whole(operand[i], 3));
      srcs.insert(e.operand_first ? srcs.begin() : srcs.end(), std::move(other));
    }
    grid->body.push_back(MakeEw(e.op, Whole("acc", 3), std::move(srcs)));
  }
  grid->body.push_back(MakeCopy(Whole("acc", 3), Ref(w.args[w.y_arg].name, {b0, cs, Affine::Const(0), ps})));
  k.body.push_back(std::move(grid));
  KILN_RETURN_IF_ERROR(Verify(k, f.target));
  return k;
}

// A depthwise convolution's GEMM problem as a window problem.
WindowProblem DepthwiseWindow(const GemmProblem& g) {
  WindowProblem w;
  w.name = g.name;
  w.args = g.args;
  w.x_arg = g.b_arg;
  w.y_arg = g.y_arg;
  w.w_arg = g.a_arg;
  w.args[w.w_arg].shape = {g.batch[1], g.K, 1};
  if (g.im2col) {
    w.im2col = *g.im2col;
  } else {  // a pointwise window: X is declared [N, C, 1, H*W]
    w.im2col.out[1] = g.N;
    w.im2col.groups = g.batch[1];
  }
  w.reduce = ReduceOp::kSum;
  w.scale = g.alpha;
  w.epilogue = g.epilogue;
  w.values = g.values;
  return w;
}

// A MaxPool or AveragePool node as a window problem.
absl::StatusOr<WindowProblem> PoolWindow(const Node& node) {
  if (!node.domain().empty() || (node.op() != "MaxPool" && node.op() != "AveragePool")) {
    return absl::UnimplementedError(absl::StrCat(node.QualifiedOp(), " is no pooling"));
  }
  KILN_ASSIGN_OR_RETURN(Window2d win, WindowOf(node));
  const bool max = node.op() == "MaxPool";
  if (max && node.num_outputs() > 1 && node.output(1) && node.output(1)->has_uses()) {
    return absl::UnimplementedError("MaxPool's Indices output is used");
  }
  const bool padded = win.pad_begin[0] || win.pad_begin[1] || win.pad_end[0] || win.pad_end[1];
  if (!max) {
    // The divisor is the window's size only where every window lies in
    // the input, or the padding counts.
    const bool counts = node.GetInt("count_include_pad", 0) != 0;
    if ((padded && !counts) || node.GetInt("ceil_mode", 0) != 0) {
      return absl::UnimplementedError("AveragePool whose windows count fewer elements at the edges");
    }
  }
  const DType dt = node.input(0)->type().dtype();
  if (dt != DType::kF32 && dt != DType::kF16 && dt != DType::kBF16) {
    return absl::UnimplementedError(absl::StrCat("pooling of ", DTypeName(dt)));
  }
  WindowProblem w;
  w.name = KernelName(node);
  KILN_ASSIGN_OR_RETURN(KernelArgs args, KernelArgs::Of(node));
  KILN_ASSIGN_OR_RETURN(w.x_arg, args.ArgOf(node.input(0)));
  KILN_ASSIGN_OR_RETURN(w.y_arg, args.ArgOf(node.output(0)));
  KILN_RETURN_IF_ERROR(args.View(w.x_arg, {win.n, win.c, win.h, win.w}));
  KILN_RETURN_IF_ERROR(args.View(w.y_arg, {win.n, win.c, 1, win.oh * win.ow}));
  for (int i = 0; i < 2; ++i) {
    w.im2col.kernel[i] = win.kernel[i];
    w.im2col.stride[i] = win.stride[i];
    w.im2col.pad[i] = win.pad_begin[i];
    w.im2col.dilation[i] = win.dilation[i];
  }
  w.im2col.out[0] = win.oh;
  w.im2col.out[1] = win.ow;
  w.im2col.groups = win.c;
  w.im2col.fill = max ? -INFINITY : 0;
  w.reduce = max ? ReduceOp::kMax : ReduceOp::kSum;
  if (!max) w.scale = 1.0 / static_cast<double>(win.kernel[0] * win.kernel[1]);
  w.args = std::move(args.args);
  w.values = std::move(args.values);
  return w;
}

}  // namespace

absl::StatusOr<TileKernel> LowerNode(const Node& node, DType matrix_input, const TileCostFigures& f,
                                     std::vector<const Value*>* values) {
  if (node.domain().empty() && (node.op() == "MaxPool" || node.op() == "AveragePool")) {
    KILN_ASSIGN_OR_RETURN(WindowProblem pool, PoolWindow(node));
    if (values) *values = pool.values;
    return LowerWindow(pool, f);
  }
  absl::StatusOr<GemmProblem> gemm = GemmProblemOf(node, matrix_input);
  if (gemm.ok() && Depthwise(*gemm)) {
    if (values) *values = gemm->values;
    return LowerWindow(DepthwiseWindow(*gemm), f);
  }
  if (gemm.ok()) {
    KILN_ASSIGN_OR_RETURN(GemmTiling t, ChooseGemmTiling(*gemm, f));
    if (values) *values = gemm->values;
    return LowerGemm(*gemm, t, f);
  }
  // A MatMul, Gemm or Conv (or a group of one) that the GEMM form does not take has no other form.
  const bool matrix = node.op() == "MatMul" || node.op() == "Gemm" || node.op() == "Conv" ||
                      (node.op() == "Fused" && (node.GetString("kind", "") == "matmul-epilogue" ||
                                                node.GetString("kind", "") == "conv-epilogue"));
  if (matrix) return gemm.status();
  return LowerVectorNode(node, f, values);
}

}  // namespace kiln::target::tile
