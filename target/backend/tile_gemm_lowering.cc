//===- tile_gemm_lowering.cc - The GEMM form: MatMul, Gemm, Conv ----------===//
//
// GemmProblemOf reads a MatMul, Gemm or Conv (a convolution as an implicit
// GEMM over its im2col matrix), or a fusion group of one with the
// elementwise steps of its epilogue; LowerGemm builds the canonical GEMM
// form of tile_lowering.h from a problem and its tiling and verifies it
// against the target.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_lowering.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "target/backend/tile_lowering_shared.h"
#include "target/backend/window.h"
#include "graph/ops/matmul.h"

namespace kiln::target::tile {

using internal::CeilDiv;
using internal::KernelArgs;
using internal::KernelName;
using internal::MmaFor;
using internal::Of;
using internal::OneStepEwOp;
using internal::OperandTile;
using internal::Ref;
using internal::Scalar;
using internal::ScalarConstant;
using internal::StaticShape;
using internal::Terms;

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

// The shapes and attributes of a MatMul or Gemm into `p` (C not included);
// a rank-1 A is a row [1, K], a rank-1 B a column [K, 1].
absl::Status ReadMatmul(const Node& mm, GemmProblem* p) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> da, StaticShape(mm.input(0)));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> db, StaticShape(mm.input(1)));
  if (mm.op() == "MatMul") {
    if (da.size() == 1) da.insert(da.begin(), 1);
    if (db.size() == 1) db.push_back(1);
  }
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
    if (da.size() < 2 || db.size() < 2) return absl::FailedPreconditionError("MatMul operands must have rank >= 1");
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

// Operand A (`a`) or B of `p` read as `source` permuted by `perm` (a
// matrix view): its transposition, row stride and batch strides, each
// batch axis aligned with the output's from the right.
absl::Status ReadView(GemmProblem* p, bool a, const Value& source, const std::vector<int64_t>& perm) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, StaticShape(&source));
  const int r = static_cast<int>(perm.size());
  if (static_cast<int>(dims.size()) != r || r < 2) return absl::InternalError("a view's rank differs from its source's");
  std::vector<int64_t> stride(r, 1), vdims(r), vstride(r);
  for (int d = r - 1; d > 0; --d) stride[d - 1] = stride[d] * dims[d];
  for (int j = 0; j < r; ++j) {
    vdims[j] = dims[perm[j]];
    vstride[j] = stride[perm[j]];
  }
  const bool trans = vstride[r - 1] != 1;  // then the operand's columns are contiguous
  (a ? p->trans_a : p->trans_b) = trans;
  (a ? p->lda : p->ldb) = trans ? vstride[r - 1] : vstride[r - 2];
  (a ? p->a_perm : p->b_perm) = perm;
  std::vector<int64_t>& bs = a ? p->a_batch_stride : p->b_batch_stride;
  const int nb = static_cast<int>(p->batch.size()), ob = r - 2;
  bs.assign(nb, 0);
  for (int d = 0; d < nb; ++d) {
    const int j = d - (nb - ob);
    bs[d] = j < 0 || vdims[j] == 1 ? 0 : vstride[j];
  }
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
  step.value = other;
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
  // The prologue: leading Transposes of a fused body, each MatMul operand
  // read through a chain of them.
  auto is_transpose = [](const Node* n) { return n->domain().empty() && n->op() == "Transpose"; };
  size_t first = 0;
  while (nodes.size() > 1 && first < nodes.size() && is_transpose(nodes[first])) ++first;
  if (first == nodes.size() || !nodes[first]->domain().empty() ||
      (nodes[first]->op() != "MatMul" && nodes[first]->op() != "Gemm" && nodes[first]->op() != "Conv")) {
    return absl::UnimplementedError(
        absl::StrCat(node.QualifiedOp(), " is no MatMul, Gemm or Conv (or a fusion group of one)"));
  }
  if (outputs.size() != 1) return absl::UnimplementedError("a GEMM kernel writes one output");
  const Node& mm = *nodes[first];
  const Value* source[2] = {mm.input(0), mm.input(1)};
  std::vector<int64_t> view[2];  // operand i is source[i] permuted by view[i] (empty: as it is)
  if (first > 0) {
    if (mm.op() != "MatMul") return absl::UnimplementedError("a Transpose feeds a Gemm or Conv");
    size_t walked = 0;
    for (int i = 0; i < 2; ++i) {
      for (const Node* t = source[i] ? source[i]->producer() : nullptr;
           t && std::find(nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(first), t) !=
                    nodes.begin() + static_cast<std::ptrdiff_t>(first);
           t = source[i]->producer()) {
        if (t->output(0)->uses().size() != 1) return absl::UnimplementedError("a transposed operand has other uses");
        const std::vector<int64_t> tp = TransposePerm(*t);
        view[i] = view[i].empty() ? tp : ComposePerms(tp, view[i]);
        if (!IsMatrixView(view[i])) {
          return absl::UnimplementedError("a transposed operand is no matrix view of its source");
        }
        source[i] = t->input(0);
        ++walked;
      }
    }
    if (walked != first) return absl::UnimplementedError("a Transpose does not feed the MatMul");
  }
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
  std::vector<int64_t> want = p.batch;
  want.push_back(p.M);
  want.push_back(p.N);
  if (!conv) {
    KILN_ASSIGN_OR_RETURN(p.a_arg, args.ArgOf(source[0]));
    KILN_ASSIGN_OR_RETURN(p.b_arg, args.ArgOf(source[1]));
    for (int i = 0; i < 2; ++i) {
      if (!view[i].empty()) KILN_RETURN_IF_ERROR(ReadView(&p, i == 0, *source[i], view[i]));
    }
    // A rank-1 operand is declared as the matrix it stands for.
    if (mm.input(0)->type().shape().rank() == 1) KILN_RETURN_IF_ERROR(args.View(p.a_arg, {1, p.K}));
    if (mm.input(1)->type().shape().rank() == 1) KILN_RETURN_IF_ERROR(args.View(p.b_arg, {p.K, 1}));
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
  for (size_t i = first + 1; i < nodes.size(); ++i) {
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
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> mm_ys, StaticShape(mm.output(0)));
  const bool vector_operand =
      !conv && (mm.input(0)->type().shape().rank() == 1 || mm.input(1)->type().shape().rank() == 1);
  if (ys != (conv ? p.conv_y : mm_ys) || (!conv && !vector_operand && ys != want)) {
    return absl::UnimplementedError("the epilogue changes the GEMM result's shape");
  }
  p.output = cur->type().dtype();
  KILN_ASSIGN_OR_RETURN(p.y_arg, args.ArgOf(cur));
  if (conv || ys != want) KILN_RETURN_IF_ERROR(args.View(p.y_arg, want));  // a rank-1 operand's Y as a matrix
  p.args = std::move(args.args);
  p.values = std::move(args.values);
  return p;
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
  if (!p.a_perm.empty() || !p.b_perm.empty()) {
    return absl::UnimplementedError("an operand read through Transposes has no tile IR form yet");
  }
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

}  // namespace kiln::target::tile
