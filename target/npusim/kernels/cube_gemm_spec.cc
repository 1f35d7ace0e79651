//===- cube_gemm_spec.cc - The shared GEMM problem as the cube program runs it ===//
//
// A cube GEMM kernel takes its problem from the shared lowering
// (tile::GemmProblemOf: shapes, batch strides, transpositions, operand
// views through Transposes, the epilogue's steps) and maps it onto what
// its program computes (GemmSpec): alpha, a C or bias added in FIXP or in
// UB (row, column, full or scalar), a residual, a GELU, a Relu, a Cast of
// the f32 result; one argument per node input, named as the program names them.
// Epilogues the program does not compute are declined here, with why.
//
//===----------------------------------------------------------------------===//
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "target/npusim/kernels/cube_matmul.h"

namespace kiln::target::npusim {
namespace {

using tile::EpilogueStep;

absl::Status Unfit(absl::string_view why) {
  return absl::UnimplementedError(
      absl::StrCat("the cube runs a fused body of MatMul (operands possibly transposed) or Gemm, then a Mul by "
                   "a scalar, an Add of a row bias, an Add of a residual, a GELU, a Relu, and a Cast of a narrow result to "
                   "f32; ",
                   why));
}

absl::StatusOr<std::vector<int64_t>> StaticDimsOf(const Value* v) {
  if (!v->type().is_tensor() || !v->type().shape().is_static())
    return absl::FailedPreconditionError(absl::StrCat("'", v->name(), "' has no static shape"));
  return v->type().shape().StaticDims();
}

// The node whose GEMM `node` computes: itself, or a fused body's matrix op.
const Node* MatrixOp(const Node& node) {
  if (node.domain() != "kiln" || node.op() != "Fused") return &node;
  const Attribute* attr = node.attr("body");
  if (!attr || !attr->g()) return nullptr;
  for (const Node* n : attr->g()->nodes())
    if (n->domain().empty() && n->op() != "Transpose") return n;
  return nullptr;
}

// The program's arguments: one per present input of the node (named by
// `name_of(i)`), then Y, then the constants the program reads (ArgOf adds
// them, named k0, k1, ..., in the order it is asked).
class SpecArgs {
 public:
  SpecArgs(GemmSpec& s, std::vector<const Value*>* constants) : s_(s), constants_(constants) {}

  // `v` bound to a new argument; `inner` is the value a fused body reads for it.
  absl::Status Add(const std::string& name, const Value* v, bool output, const Value* inner = nullptr) {
    KILN_ASSIGN_OR_RETURN(std::string line, KasmArgLine(name, *v));
    s_.arg_lines.push_back(std::move(line));
    s_.arg_names.push_back(name);
    s_.arg_values.push_back(output ? nullptr : v);
    inner_.push_back(output ? nullptr : inner ? inner : v);
    return absl::OkStatus();
  }

  // The first argument bound to `v` (a node's input, or the body value
  // standing for it), a constant of the body added when none is.
  absl::StatusOr<int> ArgOf(const Value* v) {
    for (size_t i = 0; i < inner_.size(); ++i)
      if (v && (inner_[i] == v || s_.arg_values[i] == v)) return static_cast<int>(i);
    if (!v->is_constant() || !constants_)
      return absl::FailedPreconditionError("a GEMM operand is neither an input nor a constant");
    constants_->push_back(v);
    KILN_RETURN_IF_ERROR(Add(absl::StrCat("k", constants_->size() - 1), v, false));
    return static_cast<int>(s_.arg_lines.size() - 1);
  }

 private:
  GemmSpec& s_;
  std::vector<const Value*>* constants_;
  std::vector<const Value*> inner_;
};

// How C (a Gemm's, or a bias of `dims`) broadcasts over [M, N], as the program adds it.
absl::StatusOr<GemmSpec::CKind> CKindOf(const std::vector<int64_t>& dims, const GemmSpec& s) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  const int64_t rows = dims.size() == 2 ? dims[0] : 1, cols = dims.empty() ? 1 : dims.back();
  if (n == 1) return GemmSpec::CKind::kScalar;
  if (rows == 1 && cols == s.N) return GemmSpec::CKind::kRow;
  if (cols == 1 && rows == s.M) return GemmSpec::CKind::kCol;
  if (rows == s.M && cols == s.N) return GemmSpec::CKind::kFull;
  return absl::FailedPreconditionError("C does not broadcast to [M, N]");
}

}  // namespace

bool IsResidual(const Value& v, const Value& y) { return !v.is_constant() && v.type() == y.type(); }

absl::StatusOr<GemmSpec> GemmSpecOf(const Node& node, const tile::GemmProblem& p, int max_blocks,
                                    std::vector<const Value*>* constant_args) {
  const Node* mm = MatrixOp(node);
  if (!mm) return absl::FailedPreconditionError("kiln.Fused has no matrix op in its body");
  const bool fused = mm != &node, gemm = mm->op() == "Gemm";
  if (fused && p.conv) return absl::UnimplementedError("a fused convolution's GEMM is read from its Conv");
  GemmSpec s;
  s.max_blocks = max_blocks;
  s.dtype = IsaDTypeOf(p.input);
  if (!sim::IsFloat(s.dtype))
    return absl::UnimplementedError(absl::StrCat("the cube GEMM takes f32, f16 or bf16, not ", DTypeName(p.input)));
  // FIXP writes L0C's f32 as it is: a narrow result widened by a Cast.
  if (p.output != p.input) {
    if (p.output != DType::kF32) return Unfit(absl::StrCat("not a Cast to ", DTypeName(p.output)));
    s.y_dtype = sim::DType::kF32;
  }
  s.M = p.M;
  s.N = p.N;
  s.K = p.K;
  s.trans_a = p.trans_a;
  s.trans_b = p.trans_b;
  s.lda = p.lda;
  s.ldb = p.ldb;

  // Arguments.
  SpecArgs args(s, constant_args);
  if (p.conv) {
    s.name = "conv1x1";
    for (int i = 0; i < node.num_inputs(); ++i)
      if (node.input(i)) KILN_RETURN_IF_ERROR(args.Add(i == 0 ? "x" : i == 1 ? "w" : "bias", node.input(i), false));
  } else if (!fused) {
    s.name = gemm ? "gemm" : "matmul";
    for (int i = 0; i < node.num_inputs(); ++i)
      if (node.input(i)) KILN_RETURN_IF_ERROR(args.Add(i == 0 ? "a" : i == 1 ? "b" : "c", node.input(i), false));
  } else {
    s.name = "fused_gemm";
    const Graph* body = node.attr("body")->g();
    if (body->inputs().size() != static_cast<size_t>(node.num_inputs()))
      return absl::FailedPreconditionError("kiln.Fused's body does not match its inputs");
    for (int i = 0; i < node.num_inputs(); ++i)
      if (node.input(i)) KILN_RETURN_IF_ERROR(args.Add(absl::StrCat("in", i), node.input(i), false, body->inputs()[i]));
  }
  KILN_RETURN_IF_ERROR(args.Add("y", node.output(0), true));
  s.y_arg = static_cast<int>(s.arg_lines.size()) - 1;
  if (!fused) {
    s.a_arg = p.conv ? 1 : 0;  // a convolution's W is the left operand
    s.b_arg = p.conv ? 0 : 1;
  } else {
    KILN_ASSIGN_OR_RETURN(s.a_arg, args.ArgOf(p.values[p.a_arg]));
    KILN_ASSIGN_OR_RETURN(s.b_arg, args.ArgOf(p.values[p.b_arg]));
  }

  // Batches: a pointwise convolution's images; a MatMul's output batch,
  // one tall GEMM of A's rows where B is shared and A holds every batch.
  int64_t batch = 1;
  for (int64_t d : p.batch) batch *= d;
  if (p.conv) {
    if (p.im2col || p.batch[1] != 1)
      return absl::UnimplementedError(
          "the cube runs Conv only as a pointwise GEMM (1x1 kernel, stride 1, no padding, group 1) so far; "
          "img2col convolutions (strides, pads, dilations, groups) are not generated yet");
    if (p.batch[0] > 1) {
      s.batch_dims = {p.batch[0]};
      s.a_batch_stride = {0};
      s.b_batch_stride = {p.b_batch_stride[0]};
    }
  } else if (batch > 1) {
    bool b_shared = true, a_whole = true;
    for (size_t i = 0; i < p.batch.size(); ++i) {
      b_shared &= p.b_batch_stride[i] == 0;
      a_whole &= p.batch[i] == 1 || p.a_batch_stride[i] != 0;
    }
    if (b_shared && a_whole) {
      if (!p.a_perm.empty()) return absl::UnimplementedError("a strided A would be one tall GEMM");
      s.M *= batch;
    } else {
      s.batch_dims = p.batch;
      s.a_batch_stride = p.a_batch_stride;
      s.b_batch_stride = p.b_batch_stride;
    }
  }

  // The epilogue: Gemm's C (and beta), then a fused body's steps.
  size_t i = 0;
  const std::vector<EpilogueStep>& steps = p.epilogue;
  if (gemm) {
    s.alpha = mm->GetFloat("alpha", 1.0f);
    s.beta = mm->GetFloat("beta", 1.0f);
    const Value* c = mm->num_inputs() > 2 ? mm->input(2) : nullptr;
    if (c && !fused) s.c_arg = 2;  // bound whatever beta is
    if (c && s.beta != 0.0f) {
      if (i >= steps.size() || steps[i].value != c) return absl::InternalError("Gemm's C is not its first epilogue step");
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dc, StaticDimsOf(c));
      KILN_ASSIGN_OR_RETURN(s.c_kind, CKindOf(dc, s));
      i += s.beta != 1.0f ? 2 : 1;
    }
  } else if (p.conv && !steps.empty()) {
    s.c_kind = s.M == 1 ? GemmSpec::CKind::kScalar : GemmSpec::CKind::kCol;
    s.c_arg = 2;
    i = 1;
  }
  if (!fused && i != steps.size()) return absl::InternalError("an unfused GEMM has epilogue steps");
  if (steps.size() - i + (s.y_dtype != sim::DType::kNone ? 1 : 0) > 3) return Unfit("this body has more");
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> ys, StaticDimsOf(mm->output(0)));
  const Value* bias = nullptr;
  bool relu = false;
  for (size_t first = i; i < steps.size(); ++i) {
    const EpilogueStep& e = steps[i];
    const Value* other = e.value;
    if (e.op == tile::EwOp::kMul && i == first && e.operand == EpilogueStep::Operand::kScalar) {
      if (s.c_kind != GemmSpec::CKind::kNone) return Unfit("Gemm has its own C");
      s.alpha *= static_cast<float>(e.scalar);
    } else if (e.op == tile::EwOp::kAdd && s.r_arg < 0 && !relu && s.gelu == GemmSpec::Gelu::kNone) {
      // An operand of the result's own shape and dtype (f32 after the Cast)
      // that is no constant is a residual; else a bias, first.
      const DType dt = other->type().dtype();
      const bool residual = !other->is_constant() && other->type().is_tensor() && other->type().shape().is_static() &&
                            other->type().shape().StaticDims() == ys &&
                            (dt == p.input || (dt == DType::kF32 && s.y_dtype == sim::DType::kF32));
      if (residual) {
        KILN_ASSIGN_OR_RETURN(s.r_arg, args.ArgOf(other));
        s.r_dtype = IsaDTypeOf(dt);
        continue;
      }
      if (bias) return Unfit("a second bias");
      if (s.c_kind != GemmSpec::CKind::kNone) return Unfit("Gemm has its own C");
      if (dt != mm->output(0)->type().dtype()) return Unfit("the bias has another dtype");
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> db, StaticDimsOf(other));
      int64_t n = 1;
      for (int64_t d : db) n *= d;
      if (n == 1) s.c_kind = GemmSpec::CKind::kScalar;
      else if (!db.empty() && db.back() == s.N && n == s.N) s.c_kind = GemmSpec::CKind::kRow;
      else return Unfit("the Add's other operand is not a row bias");
      s.beta = 1.0f;
      bias = other;
    } else if (e.op == tile::EwOp::kRelu && !relu) {
      relu = true;
    } else if ((e.op == tile::EwOp::kGelu || e.op == tile::EwOp::kGeluTanh) && !relu &&
               s.gelu == GemmSpec::Gelu::kNone) {
      s.gelu = e.op == tile::EwOp::kGelu ? GemmSpec::Gelu::kErf : GemmSpec::Gelu::kTanh;
    } else {
      return Unfit(absl::StrCat("not ", tile::EwOpName(e.op)));
    }
  }
  s.relu = relu;
  // A fused body's C (Gemm's, or the bias) is bound after its operands and residual.
  if (fused && s.c_kind != GemmSpec::CKind::kNone) {
    KILN_ASSIGN_OR_RETURN(s.c_arg, args.ArgOf(bias ? bias : mm->input(2)));
  }
  return s;
}

absl::StatusOr<GemmSpec> GemmSpecOfNode(const Node& node, int max_blocks, std::vector<const Value*>* constant_args) {
  // The driver has already narrowed the graph's matrix operands for
  // --precision, so the tensors' own dtype (kF32: "as given") is the cube's.
  KILN_ASSIGN_OR_RETURN(tile::GemmProblem p, tile::GemmProblemOf(node, DType::kF32));
  return GemmSpecOf(node, p, max_blocks, constant_args);
}

}  // namespace kiln::target::npusim
