//===- tile_vector_lowering.cc - Elementwise and row-reduction kernels ----===//
//
// LowerVectorNode views a node's (or fused group's) values as [rows, cols]
// (a reduction's data input split at its reduced axes, else the output
// split before the innermost dims every value takes whole or not at all),
// builds one vector buffer per value with the steps of each op, tiles the
// view to the vector scope and the units, and verifies the kernel.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_lowering.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"
#include "target/backend/tile_lowering_shared.h"

namespace kiln::target::tile {

using internal::Capacity;
using internal::CeilDiv;
using internal::KernelArgs;
using internal::KernelName;
using internal::Of;
using internal::OneStepEwOp;
using internal::Product;
using internal::Ref;
using internal::RoundUp;
using internal::Scalar;
using internal::ScalarConstant;
using internal::StaticShape;

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
         n.op() == "LayerNormalization" || n.op() == "Clip" || n.op() == "LeakyRelu" || n.op() == "HardSigmoid" ||
         n.op() == "HardSwish";
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
    if (n.domain().empty() && (n.op() == "HardSigmoid" || n.op() == "HardSwish")) {
      // min(max(alpha x + beta, 0), 1); HardSwish: x times that, alpha 1/6.
      const bool swish = n.op() == "HardSwish";
      KILN_ASSIGN_OR_RETURN(std::string y, Def(n.output(0)));
      KILN_ASSIGN_OR_RETURN(Operand x, Use(n.input(0)));
      const std::string h = swish ? Temp(forms_.at(y), n.output(0)->type().dtype()) : y;
      Ew(EwOp::kMul, h, {x, Scalar(swish ? 1.0 / 6.0 : n.GetFloat("alpha", 0.2f))});
      Ew(EwOp::kAdd, h, {Buf(h), Scalar(swish ? 0.5 : n.GetFloat("beta", 0.5f))});
      Ew(EwOp::kMax, h, {Buf(h), Scalar(0)});
      Ew(EwOp::kMin, h, {Buf(h), Scalar(1)});
      if (swish) Ew(EwOp::kMul, y, {x, Buf(h)});
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
  if (rows == 0 || cols == 0) return absl::UnimplementedError("a dimension is zero: there is nothing to tile");
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

}  // namespace kiln::target::tile
