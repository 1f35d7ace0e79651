//===- tile_lowering.cc - What the lowerings share; LowerNode -------------===//
//
// The pieces every lowering builds a kernel from (tile_lowering_shared.h):
// a node's kernel arguments, where the inputs and outputs of a kiln.Fused
// body stand for the node's and body constants become `const` arguments;
// the names of the kernel and its values; the ONNX ops that are one
// elementwise step. LowerNode sends a node to the window form
// (tile_window_lowering.cc), the GEMM form (tile_gemm_lowering.cc), the
// attention form (tile_attention_lowering.cc) or the elementwise and
// row-reduction forms (tile_vector_lowering.cc); the cost
// model that tiles them is tile_cost_model.cc.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_lowering.h"

#include <cctype>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "target/backend/tile_lowering_shared.h"

namespace kiln::target::tile {
namespace {

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

}  // namespace

namespace internal {

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

std::optional<double> ScalarConstant(const Value* v) {
  if (!v || !v->is_constant() || v->type().shape().NumElements() != 1) return std::nullopt;
  if (!IsNumeric(v->type().dtype())) return std::nullopt;
  return v->constant().GetDouble(0);
}

NameTable::NameTable() {
  for (const char* n : {"b0", "b1", "b2", "b3", "b4", "b5", "m", "n", "s", "k", "kk", "wm", "wn", "r", "c", "As",
                        "Bs", "Aa", "Bb", "acc"}) {
    used_.insert(n);
  }
}

std::string NameTable::Unique(absl::string_view hint) {
  std::string base;
  for (char ch : hint) base += std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' ? ch : '_';
  if (base.empty()) base = std::string("v");  // `= "v"`: a false -Wrestrict of GCC 12
  std::string name = base;
  for (int i = 2; !used_.insert(name).second; ++i) name = absl::StrCat(base, "_", i);
  return name;
}

std::string KernelName(const Node& node) {
  std::string hint = !node.name().empty() ? node.name() : node.num_outputs() > 0 ? node.output(0)->name() : node.op();
  std::string out;
  for (char ch : hint) out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' ? ch : '_';
  while (!out.empty() && out[0] == '_') out.erase(0, 1);
  return out.empty() ? std::string("kernel") : out;
}

absl::StatusOr<KernelArgs> KernelArgs::Of(const Node& node) {
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

std::vector<const Node*> KernelArgs::Nodes(const Node& node) const {
  std::vector<const Node*> out;
  if (!body_) return {&node};
  for (const Node* n : body_->nodes()) out.push_back(n);
  return out;
}

std::vector<const Value*> KernelArgs::Outputs(const Node& node) const {
  std::vector<const Value*> out;
  for (int i = 0; i < node.num_outputs(); ++i) out.push_back(body_ ? body_->outputs()[i] : node.output(i));
  return out;
}

absl::StatusOr<int> KernelArgs::ArgOf(const Value* v) {
  auto it = index_.find(v);
  if (it != index_.end()) return it->second;
  if (!v->is_constant()) {
    return absl::FailedPreconditionError(absl::StrCat("'", v->name(), "' is no input, output or constant"));
  }
  KILN_RETURN_IF_ERROR(Add(v, v, TileArg::Role::kConst));
  return index_.at(v);
}

absl::Status KernelArgs::View(int i, std::vector<int64_t> view) {
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

absl::Status KernelArgs::Add(const Value* inner, const Value* outer, TileArg::Role role) {
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

Affine Terms(std::vector<std::pair<std::string, int64_t>> terms, int64_t constant) {
  Affine a;
  a.constant = constant;
  for (auto& [v, c] : terms) {
    if (c != 0) a.terms.emplace_back(std::move(v), c);
  }
  return a;
}

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

}  // namespace internal

using internal::Depthwise;
using internal::DepthwiseWindow;
using internal::LowerWindow;
using internal::PoolWindow;
using internal::WindowProblem;

absl::StatusOr<TileKernel> LowerNode(const Node& node, DType matrix_input, const TileCostFigures& f,
                                     std::vector<const Value*>* values) {
  if (node.domain().empty() && (node.op() == "MaxPool" || node.op() == "AveragePool")) {
    KILN_ASSIGN_OR_RETURN(WindowProblem pool, PoolWindow(node));
    if (values) *values = pool.values;
    return LowerWindow(pool, f);
  }
  if (node.domain() == "kiln" && node.op() == "Attention") {
    KILN_ASSIGN_OR_RETURN(TileKernel k, LowerAttention(node, f, matrix_input));
    if (values) {  // Q, K, V, the mask when given, Y: the kernel's arguments in order
      values->clear();
      for (const Value* v : node.inputs())
        if (v) values->push_back(v);
      values->push_back(node.output(0));
    }
    return k;
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
