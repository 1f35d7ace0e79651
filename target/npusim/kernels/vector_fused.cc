//===- vector_fused.cc - Fused memory-bound groups from the shared tile IR ===//
//
// A kiln.Fused group of elementwise ops and row reductions (the optimizer's
// memory-bound groups: an activation chain, a residual Add with the
// LayerNormalization after it) runs as one vector kernel whose steps are
// those of the shared lowering (tile::LowerVectorNode): its view of the
// group as [rows, cols], each buffer's form in that view (a whole tile, a
// row broadcast down the rows, a column of one value per row, a scalar)
// and its ew and reduce steps in order. Intermediate values never leave UB.
//
// The tile kernel's own tiling is the GPU-sized default of the shared
// lowering; the kernel here keeps only its steps and runs them on npusim's
// double-buffered skeletons (vector_pipeline.h), which size tiles to UB:
//
//  - flat, when every buffer is a whole tile or a scalar argument: the
//    group's elements as one run, each step one vector instruction per
//    tile;
//  - rows otherwise: each row's whole-tile buffers are rows of `cols`
//    elements, column buffers one element (spread over a 32-byte block
//    with vbrcb where a row step reads them), broadcast rows and scalar
//    arguments resident in UB for the whole block; a reduce folds a row
//    into its column buffer.
//
// Everything computes in f32 (f16/bf16 tensors convert on the way in and
// out); a Cast to f16/bf16 inside the group rounds there, as it does on
// the reference.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"
#include "target/backend/tile_lowering.h"
#include "target/npusim/kernels/vector_internal.h"
#include "target/npusim/kernels/vector_pipeline.h"

namespace kiln::target::npusim::vec {
namespace {

using sim::DType;
using tile::EwOp;
using tile::Stmt;

absl::Status Unfit(absl::string_view why) { return absl::UnimplementedError(absl::StrCat("kiln.Fused: ", why)); }

// A buffer's shape in the group's [rows, cols] view.
enum class Form { kFull, kRow, kCol, kScalar };

bool Wide(Form f) { return f == Form::kFull || f == Form::kRow; }

struct Buffer {
  std::string name;
  DType dt = DType::kF32;  // what it holds (the body computes in f32 whatever it is)
  Form form = Form::kFull;
  int in = -1;             // filled from this kernel argument
  int out = -1;            // written to this kernel argument
};

// The shared lowering's kernel, read back: the view, the buffers and the steps.
struct Group {
  int64_t rows = 1, cols = 1;
  std::vector<const Value*> values;  // the graph value of each argument
  std::vector<Buffer> buffers;
  std::map<std::string, int> buffer_index;
  std::vector<const Stmt*> steps;  // ew and reduce, in order
  bool reduces = false;
  tile::TileKernel kernel;  // owns the steps
};

Form FormOfShape(const std::vector<int64_t>& s, int64_t rows, int64_t cols) {
  const bool r = s[0] == rows && rows > 1, c = s[1] == cols && cols > 1;
  if (r && !c && cols > 1) return Form::kCol;
  if (!r && rows > 1 && c) return Form::kRow;
  if (s[0] == 1 && s[1] == 1 && rows * cols > 1) return Form::kScalar;
  return Form::kFull;
}

absl::StatusOr<Group> Match(const Node& node, const sim::Machine& m, int64_t cores) {
  tile::TileCostFigures f;
  f.target.name = "npusim";
  f.target.capacity = {{tile::Scope::kVector, UbBytes(m)}};
  f.compute_units = static_cast<int>(cores);
  Group g;
  KILN_ASSIGN_OR_RETURN(g.kernel, tile::LowerVectorNode(node, f, &g.values));
  if (g.kernel.body.size() != 1 || g.kernel.body[0]->kind != Stmt::Kind::kLoop ||
      g.kernel.body[0]->loop != Stmt::LoopKind::kGrid)
    return Unfit("the group's tile kernel is not one grid loop");
  // The view: [rows, cols], the extents the arguments' 2-D views span. An
  // argument no copy reads (a one-element constant the steps take as an
  // immediate, a reduction's axes) keeps its own shape and is left alone.
  const std::vector<tile::TileArg>& args = g.kernel.args;
  std::vector<bool> copied(args.size(), false);
  for (const auto& s : g.kernel.body[0]->body)
    if (s->kind == Stmt::Kind::kCopy)
      for (size_t i = 0; i < args.size(); ++i)
        if ((s->srcs.size() == 1 && s->srcs[0].ref && s->srcs[0].ref->name == args[i].name) ||
            s->dst.name == args[i].name)
          copied[i] = true;
  for (size_t i = 0; i < args.size(); ++i) {
    const tile::TileArg& a = args[i];
    if (!copied[i]) continue;
    if (a.shape.size() != 2) return Unfit(absl::StrCat("argument %", a.name, " is not a 2-D view"));
    g.rows = std::max(g.rows, a.shape[0]);
    g.cols = std::max(g.cols, a.shape[1]);
  }
  std::map<std::string, int> arg_index;
  for (size_t i = 0; i < args.size(); ++i) arg_index[args[i].name] = static_cast<int>(i);
  for (const auto& s : g.kernel.body[0]->body) {
    switch (s->kind) {
      case Stmt::Kind::kBuffer: {
        if (s->scope != tile::Scope::kVector || s->shape.size() != 2 || s->copies != 1)
          return Unfit(absl::StrCat("buffer %", s->buffer, " is not a vector tile"));
        Buffer b;
        b.name = s->buffer;
        b.dt = IsaDTypeOf(s->dtype);
        if (b.dt != DType::kF32 && b.dt != DType::kF16 && b.dt != DType::kBF16)
          return Unfit(absl::StrCat("buffer %", s->buffer, " holds ", kiln::DTypeName(s->dtype)));
        g.buffer_index[b.name] = static_cast<int>(g.buffers.size());
        g.buffers.push_back(b);
        break;
      }
      case Stmt::Kind::kCopy: {
        if (s->srcs.size() != 1 || !s->srcs[0].ref || s->transpose || s->im2col || s->accumulate)
          return Unfit(absl::StrCat("`", tile::PrintStatement(*s), "` is no plain copy"));
        const std::string& src = s->srcs[0].ref->name;
        const std::string& dst = s->dst.name;
        if (arg_index.count(src) && g.buffer_index.count(dst)) {
          g.buffers[g.buffer_index[dst]].in = arg_index[src];
        } else if (g.buffer_index.count(src) && arg_index.count(dst)) {
          if (g.buffers[g.buffer_index[src]].out >= 0) return Unfit("a buffer written to two outputs");
          g.buffers[g.buffer_index[src]].out = arg_index[dst];
        } else {
          return Unfit(absl::StrCat("`", tile::PrintStatement(*s), "` is no copy between an argument and a tile"));
        }
        break;
      }
      case Stmt::Kind::kEw:
        g.steps.push_back(s.get());
        break;
      case Stmt::Kind::kReduce:
        g.reduces = true;
        g.steps.push_back(s.get());
        break;
      case Stmt::Kind::kSync:
        break;
      default:
        return Unfit(absl::StrCat("`", tile::PrintStatement(*s), "` in a vector group"));
    }
  }
  // Forms: an argument's from its view, a computed buffer's from its tile shape.
  int64_t br = 1, bc = 1;
  for (const auto& s : g.kernel.body[0]->body)
    if (s->kind == Stmt::Kind::kBuffer) {
      br = std::max(br, s->shape[0]);
      bc = std::max(bc, s->shape[1]);
    }
  for (const auto& s : g.kernel.body[0]->body) {
    if (s->kind != Stmt::Kind::kBuffer) continue;
    Buffer& b = g.buffers[g.buffer_index[s->buffer]];
    int arg = b.in >= 0 ? b.in : b.out;
    if (arg >= 0) b.form = FormOfShape(args[arg].shape, g.rows, g.cols);
    else b.form = FormOfShape({s->shape[0] == br ? g.rows : 1, s->shape[1] == bc ? g.cols : 1}, g.rows, g.cols);
  }
  return g;
}

// Where a buffer lives while the body runs, as the steps read and write it.
struct Home {
  Ub at;                 // a row (wide) or one element (narrow) in the compute dtype
  bool bcast_only = false;  // a scalar argument: a block holding the value 8 times over
  Ub block;              // narrow buffers: the 32-byte block vbrcb spreads the value over
  bool block_valid = false;
};

// Emits the steps over one unit: a row of `cols` (rows form) or a tile of
// `n` elements (flat form); `scratch` holds `n` elements, `slot` a block.
class StepEmitter {
 public:
  StepEmitter(Kasm& k, const Group& g, std::vector<Home>& homes, Ub scratch, Ub slot, int64_t n)
      : k_(k), g_(g), homes_(homes), scratch_(scratch), slot_(slot), n_(n) {}

  absl::Status Run() {
    for (const Stmt* s : g_.steps) KILN_RETURN_IF_ERROR(s->kind == Stmt::Kind::kEw ? Ew(*s) : Reduce(*s));
    return absl::OkStatus();
  }

 private:
  static constexpr DType kCt = DType::kF32;

  const Buffer& Buf(const std::string& name) const { return g_.buffers[g_.buffer_index.at(name)]; }
  Home& HomeOf(const std::string& name) { return homes_[g_.buffer_index.at(name)]; }
  Ub Slot() const { return slot_; }

  // The operand a step over `count` elements reads for buffer `name`.
  VArg Read(const std::string& name, bool wide_dst) {
    Home& h = HomeOf(name);
    if (h.bcast_only) return Bcast(h.at);
    if (!wide_dst || Wide(Buf(name).form)) return V(h.at);
    if (!h.block_valid) {
      k_.Brcb(kCt, h.block, h.at);
      h.block_valid = true;
    }
    return Bcast(h.block);
  }
  void Wrote(const std::string& name) { HomeOf(name).block_valid = false; }

  // A broadcast block of `v` in the scratch's block.
  VArg Materialize(double v) {
    k_.Vec("vdup", kCt, V(Slot()), {}, 8, v);
    return Bcast(Slot());
  }

  absl::Status Ew(const Stmt& s) {
    const Buffer& dst_buf = Buf(s.dst.name);
    const bool wide = Wide(dst_buf.form);
    const int64_t n = wide ? n_ : 1;
    VArg dst = V(HomeOf(s.dst.name).at);
    std::vector<std::optional<VArg>> ins;
    std::vector<double> imm;
    for (const tile::Operand& o : s.srcs) {
      if (o.ref) {
        if (!wide && Wide(Buf(o.ref->name).form)) return Unfit("a per-row value computed from a whole row");
        ins.push_back(Read(o.ref->name, wide));
        imm.push_back(0);
      } else {
        ins.push_back(std::nullopt);
        imm.push_back(o.scalar);
      }
    }
    auto arg = [&](int i) { return ins[i] ? *ins[i] : Materialize(imm[i]); };
    auto binary = [&](const char* vop, const char* sop, bool commutes) -> absl::Status {
      if (!ins[0] && !ins[1]) return Unfit("an op of two constants");
      if (sop && !ins[1]) {
        k_.Vec(sop, kCt, dst, {*ins[0]}, n, imm[1]);
      } else if (sop && commutes && !ins[0]) {
        k_.Vec(sop, kCt, dst, {*ins[1]}, n, imm[0]);
      } else {
        VArg a = arg(0), b = arg(1);
        k_.Vec(vop, kCt, dst, {a, b}, n);
      }
      return absl::OkStatus();
    };
    auto unary = [&](const char* vop) -> absl::Status {
      if (!ins[0]) return Unfit("a unary op of a constant");
      k_.Vec(vop, kCt, dst, {*ins[0]}, n);
      return absl::OkStatus();
    };
    absl::Status st = absl::OkStatus();
    switch (s.ew) {
      case EwOp::kAdd: st = binary("vadd", "vadds", true); break;
      case EwOp::kMul: st = binary("vmul", "vmuls", true); break;
      case EwOp::kMax: st = binary("vmax", "vmaxs", true); break;
      case EwOp::kMin: st = binary("vmin", "vmins", true); break;
      case EwOp::kSub:
        if (ins[0] && !ins[1]) {
          k_.Vec("vadds", kCt, dst, {*ins[0]}, n, -imm[1]);
        } else if (!ins[0] && ins[1]) {
          k_.Vec("vmuls", kCt, dst, {*ins[1]}, n, -1.0);
          k_.Vec("vadds", kCt, dst, {dst}, n, imm[0]);
        } else {
          st = binary("vsub", nullptr, false);
        }
        break;
      case EwOp::kDiv: {
        // x / c by a power of two is exact as x * (1/c); any other divisor divides.
        int e = 0;
        if (ins[0] && !ins[1] && imm[1] != 0 && std::fabs(std::frexp(imm[1], &e)) == 0.5) {
          k_.Vec("vmuls", kCt, dst, {*ins[0]}, n, 1.0 / imm[1]);
        } else {
          st = binary("vdiv", nullptr, false);
        }
        break;
      }
      case EwOp::kPow: st = Pow(dst, ins, imm, n); break;
      case EwOp::kNeg:
        if (!ins[0]) return Unfit("a unary op of a constant");
        k_.Vec("vmuls", kCt, dst, {*ins[0]}, n, -1.0);
        break;
      case EwOp::kAbs: st = unary("vabs"); break;
      case EwOp::kRelu: st = unary("vrelu"); break;
      case EwOp::kExp: st = unary("vexp"); break;
      case EwOp::kLog: st = unary("vln"); break;
      case EwOp::kSqrt: st = unary("vsqrt"); break;
      case EwOp::kRsqrt: st = unary("vrsqrt"); break;
      case EwOp::kRecip: st = unary("vrec"); break;
      case EwOp::kTanh: st = unary("vtanh"); break;
      case EwOp::kSigmoid: st = unary("vsigmoid"); break;
      case EwOp::kErf: st = unary("verf"); break;
      case EwOp::kCopy: st = unary("vmov"); break;
      case EwOp::kGelu: {
        if (!ins[0]) return Unfit("a unary op of a constant");
        // 0.5 x (1 + erf(x / sqrt(2))), through the scratch.
        VArg t = V(scratch_), x = *ins[0];
        k_.Vec("vmuls", kCt, t, {x}, n, 1.0 / std::sqrt(2.0));
        k_.Vec("verf", kCt, t, {t}, n);
        k_.Vec("vadds", kCt, t, {t}, n, 1.0);
        k_.Vec("vmul", kCt, t, {t, x}, n);
        k_.Vec("vmuls", kCt, dst, {t}, n, 0.5);
        break;
      }
      case EwOp::kGeluTanh: {
        if (!ins[0]) return Unfit("a unary op of a constant");
        // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), through the scratch.
        VArg t = V(scratch_), x = *ins[0];
        k_.Vec("vmul", kCt, t, {x, x}, n);
        k_.Vec("vmul", kCt, t, {t, x}, n);
        k_.Vec("vmuls", kCt, t, {t}, n, 0.044715);
        k_.Vec("vadd", kCt, t, {t, x}, n);
        k_.Vec("vmuls", kCt, t, {t}, n, 0.7978845608028654);
        k_.Vec("vtanh", kCt, t, {t}, n);
        k_.Vec("vadds", kCt, t, {t}, n, 1.0);
        k_.Vec("vmul", kCt, t, {t, x}, n);
        k_.Vec("vmuls", kCt, dst, {t}, n, 0.5);
        break;
      }
      case EwOp::kCast: {
        if (!ins[0]) return Unfit("a cast of a constant");
        // Rounds to the destination's dtype when it is narrower than f32.
        const DType to = dst_buf.dt;
        if (to == DType::kF16 || to == DType::kBF16) {
          k_.Conv(to, kCt, V(scratch_), *ins[0], n);
          k_.Conv(kCt, to, dst, V(scratch_), n);
        } else {
          k_.Vec("vmov", kCt, dst, {*ins[0]}, n);
        }
        break;
      }
      default:
        return Unfit(absl::StrCat("no vector form of `", tile::EwOpName(s.ew), "`"));
    }
    KILN_RETURN_IF_ERROR(st);
    Wrote(s.dst.name);
    return absl::OkStatus();
  }

  // x ^ c for a constant c: sqrt, rsqrt, square-and-multiply, or exp(c ln x).
  absl::Status Pow(VArg dst, const std::vector<std::optional<VArg>>& ins, const std::vector<double>& imm, int64_t n) {
    if (!ins[0] || ins[1]) return Unfit("Pow with an exponent that is not a constant");
    const double ex = imm[1];
    VArg x = *ins[0], t = V(scratch_);
    if (ex == 0.5) {
      k_.Vec("vsqrt", kCt, dst, {x}, n);
    } else if (ex == -0.5) {
      k_.Vec("vrsqrt", kCt, dst, {x}, n);
    } else if (ex == 0) {
      k_.Vec("vdup", kCt, dst, {}, n, 1.0);
    } else if (ex == std::floor(ex) && std::fabs(ex) <= 64) {
      int64_t q = static_cast<int64_t>(std::fabs(ex));
      bool have = false, first = true;
      while (q) {
        VArg base = first ? x : t;
        if (q & 1) {
          if (!have) k_.Vec("vmov", kCt, dst, {base}, n);
          else k_.Vec("vmul", kCt, dst, {dst, base}, n);
          have = true;
        }
        q >>= 1;
        if (q) {
          k_.Vec("vmul", kCt, t, {base, base}, n);
          first = false;
        }
      }
      if (ex < 0) k_.Vec("vrec", kCt, dst, {dst}, n);
    } else {
      k_.Vec("vln", kCt, t, {x}, n);
      k_.Vec("vmuls", kCt, t, {t}, n, ex);
      k_.Vec("vexp", kCt, dst, {t}, n);
    }
    return absl::OkStatus();
  }

  absl::Status Reduce(const Stmt& s) {
    const char* kind = s.reduce == tile::ReduceOp::kSum   ? "add"
                       : s.reduce == tile::ReduceOp::kMax ? "max"
                       : s.reduce == tile::ReduceOp::kMin ? "min"
                                                          : nullptr;
    if (!kind) return Unfit(absl::StrCat("no vector form of `reduce ", tile::ReduceOpName(s.reduce), "`"));
    if (s.axis != 1 || !s.srcs[0].ref || Buf(s.dst.name).form != Form::kCol ||
        Buf(s.srcs[0].ref->name).form != Form::kFull)
      return Unfit("a reduce that is not a row's into its column");
    RowReduce(k_, kind, kCt, HomeOf(s.dst.name).at, HomeOf(s.srcs[0].ref->name).at, n_, scratch_, Slot());
    Wrote(s.dst.name);
    return absl::OkStatus();
  }

  Kasm& k_;
  const Group& g_;
  std::vector<Home>& homes_;
  Ub scratch_, slot_;
  int64_t n_;
};

// Each tile argument as the program names it ("inI", "outI" or a body
// constant's "cI") with its ISA dtype.
struct ArgNames {
  std::vector<FlatTensor> tensor;      // per tile argument
  std::vector<const Value*> constants; // GeneratedKernel::constant_args
  std::vector<std::string> lines;      // their .arg lines
};

absl::StatusOr<ArgNames> NameArgs(const Node& node, const Group& g) {
  ArgNames a;
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value* v = g.values[i];
    std::string name;
    for (int j = 0; j < node.num_inputs() && name.empty(); ++j)
      if (node.input(j) == v) name = InArg(j);
    for (int j = 0; j < node.num_outputs() && name.empty(); ++j)
      if (node.output(j) == v) name = OutArg(j);
    if (name.empty()) {
      name = absl::StrCat("c", a.constants.size());
      KILN_ASSIGN_OR_RETURN(std::string line, KasmArgLine(name, *v));
      a.lines.push_back(line);
      a.constants.push_back(v);
    }
    a.tensor.push_back({name, IsaDTypeOf(g.kernel.args[i].dtype)});
  }
  return a;
}

// "fused Add, Relu" for a group, "Relu through the shared lowering" for one op.
std::string What(const Node& node) {
  if (!IsFusedGroup(node)) return absl::StrCat(node.op(), " through the shared lowering");
  std::vector<std::string> ops;
  if (const Attribute* body = node.attr("body"); body && body->g())
    for (const Node* n : body->g()->nodes()) ops.push_back(n->op());
  return absl::StrCat("fused ", absl::StrJoin(ops, ", "));
}

std::string ProgramName(const Node& node) { return IsFusedGroup(node) ? "vec_fused" : KernelName(node); }

absl::StatusOr<GeneratedKernel> Flat(const KernelRequest& req, const Group& g, const ArgNames& names) {
  FlatSpec s;
  s.name = ProgramName(*req.node);
  s.numel = g.rows * g.cols;
  s.more_args = names.lines;
  s.ct = DType::kF32;
  std::vector<int> in_of, scalar_of, out_of, temp_of;
  in_of.assign(g.buffers.size(), -1);
  scalar_of = out_of = temp_of = in_of;
  for (size_t i = 0; i < g.buffers.size(); ++i) {
    const Buffer& b = g.buffers[i];
    if (b.in >= 0) {
      std::vector<FlatTensor>& to = b.form == Form::kScalar ? s.scalars : s.ins;
      (b.form == Form::kScalar ? scalar_of : in_of)[i] = static_cast<int>(to.size());
      to.push_back(names.tensor[b.in]);
    }
    if (b.out >= 0) {
      const FlatTensor& o = names.tensor[b.out];
      out_of[i] = static_cast<int>(s.more_outs.size()) + (s.out.arg.empty() ? 0 : 1);
      if (s.out.arg.empty()) s.out = o;
      else s.more_outs.push_back(o);
    }
    if (b.in < 0 && b.out < 0) temp_of[i] = s.temps++;
  }
  // The scratch tile and the block for a materialized constant. A single
  // op takes them only where a step uses them (each temp takes a tile of
  // UB, so the tiles grow); a fused group keeps both, since larger tiles
  // without fewer of them made groups slower (an SGD update's Mul and Sub
  // over [1024, 1024]: 13,816 -> 13,964 cycles).
  const bool group = IsFusedGroup(*req.node);
  bool need_scratch = group, need_slot = group;
  for (const Stmt* st : g.steps) {
    need_scratch = need_scratch || st->kind == Stmt::Kind::kReduce || st->ew == EwOp::kGelu ||
                   st->ew == EwOp::kGeluTanh || st->ew == EwOp::kCast || st->ew == EwOp::kPow;
    for (const tile::Operand& o : st->srcs) need_slot = need_slot || !o.ref;
  }
  const int scratch = need_scratch ? s.temps++ : -1, slot = need_slot ? s.temps++ : -1;
  // Outputs that are also inputs read their input and are copied at the end.
  absl::Status status = absl::OkStatus();
  s.body = [&, in_of, scalar_of, out_of, temp_of, scratch, slot](Kasm& k, const FlatOperands& o, int64_t n) {
    std::vector<Home> homes(g.buffers.size());
    auto out_at = [&](int j) { return j == 0 ? o.out : o.more_outs[j - 1]; };
    for (size_t i = 0; i < g.buffers.size(); ++i) {
      if (in_of[i] >= 0) homes[i].at = o.ins[in_of[i]].at;
      else if (scalar_of[i] >= 0) homes[i] = Home{o.scalars[scalar_of[i]].at, true, {}, false};
      else if (out_of[i] >= 0) homes[i].at = out_at(out_of[i]).at;
      else homes[i].at = o.temps[temp_of[i]];
    }
    StepEmitter e(k, g, homes, scratch >= 0 ? o.temps[scratch] : Ub{}, slot >= 0 ? o.temps[slot] : Ub{}, n);
    if (absl::Status st = e.Run(); !st.ok() && status.ok()) status = st;
    for (size_t i = 0; i < g.buffers.size(); ++i)
      if (out_of[i] >= 0 && (in_of[i] >= 0 || scalar_of[i] >= 0))
        k.Vec("vmov", DType::kF32, out_at(out_of[i]), {scalar_of[i] >= 0 ? Bcast(homes[i].at) : V(homes[i].at)}, n);
  };
  s.what = absl::StrCat(What(*req.node), " (elementwise over ", s.numel, " elements)");
  absl::StatusOr<GeneratedKernel> k = EmitFlat(req, s);
  KILN_RETURN_IF_ERROR(status);
  return k;
}

absl::StatusOr<GeneratedKernel> Rows(const KernelRequest& req, const Group& g, const ArgNames& names) {
  const int64_t cols = g.cols;
  RowSpec s;
  s.name = ProgramName(*req.node);
  s.rows = g.rows;
  s.more_args = names.lines;
  s.ct = DType::kF32;
  // Per buffer: a row input, an output, a temp row, or a place in the resident area.
  std::vector<int> in_of(g.buffers.size(), -1), out_of = in_of, temp_of = in_of;
  std::vector<int64_t> res_of(g.buffers.size(), -1), raw_of = res_of, block_of = res_of;
  int64_t res = 0;
  auto take = [&](int64_t bytes) {
    int64_t at = res;
    res += RoundUp(bytes, 256);
    return at;
  };
  for (size_t i = 0; i < g.buffers.size(); ++i) {
    const Buffer& b = g.buffers[i];
    const int64_t cols_b = Wide(b.form) ? cols : 1;
    if (b.in >= 0 && (b.form == Form::kFull || b.form == Form::kCol)) {
      in_of[i] = static_cast<int>(s.ins.size());
      s.ins.push_back({names.tensor[b.in], cols_b});
    } else if (b.in >= 0) {
      // A broadcast row or scalar: loaded once per block, converted to f32.
      const int64_t len = b.form == Form::kRow ? cols : 1;
      res_of[i] = take(b.form == Form::kRow ? len * 4 : 256);
      raw_of[i] = take(len * sim::DTypeSize(names.tensor[b.in].dt));
    }
    if (b.out >= 0) {
      if (b.form == Form::kRow || b.form == Form::kScalar) return Unfit("an output broadcast over the rows");
      RowInput o{names.tensor[b.out], cols_b};
      out_of[i] = static_cast<int>(s.more_outs.size()) + (s.out.arg.empty() ? 0 : 1);
      if (s.out.arg.empty()) {
        s.out = o.t;
        s.out_cols = o.cols;
      } else {
        s.more_outs.push_back(o);
      }
    }
    if (b.in < 0 && b.out < 0) {
      if (Wide(b.form)) temp_of[i] = s.temps++;
      else res_of[i] = take(32);
    }
    if (!Wide(b.form)) block_of[i] = take(256);
  }
  const int scratch = s.temps++;
  s.resident_bytes = res;
  s.prologue = [&g, names, res_of, raw_of, cols](Kasm& k, Ub r) {
    bool any = false;
    for (size_t i = 0; i < g.buffers.size(); ++i) {
      const Buffer& b = g.buffers[i];
      if (raw_of[i] < 0) continue;
      const int64_t len = b.form == Form::kRow ? cols : 1;
      const FlatTensor& t = names.tensor[b.in];
      k.CopyIn(r.Plus(raw_of[i]), t.arg, -1, 0, len * sim::DTypeSize(t.dt));
      any = true;
    }
    if (!any) return;
    k.SetFlag("MTE2", "VECTOR", 2);
    k.WaitFlag("MTE2", "VECTOR", 2);
    for (size_t i = 0; i < g.buffers.size(); ++i) {
      const Buffer& b = g.buffers[i];
      if (raw_of[i] < 0) continue;
      const DType dt = names.tensor[b.in].dt;
      const int64_t len = b.form == Form::kRow ? cols : 1;
      Ub to = b.form == Form::kRow ? r.Plus(res_of[i]) : r.Plus(raw_of[i] + 128);
      if (dt != DType::kF32) k.Conv(DType::kF32, dt, V(to), V(r.Plus(raw_of[i])), len);
      else if (b.form == Form::kRow) k.Vec("vmov", DType::kF32, V(to), {V(r.Plus(raw_of[i]))}, len);
      else to = r.Plus(raw_of[i]);
      if (b.form == Form::kScalar) k.Brcb(DType::kF32, r.Plus(res_of[i]), to);
    }
  };
  absl::Status status = absl::OkStatus();
  s.body = [&, in_of, out_of, temp_of, res_of, block_of, scratch, cols](Kasm& k, const RowOperands& o, Ub r) {
    std::vector<Home> homes(g.buffers.size());
    auto out_at = [&](int j) { return j == 0 ? o.out : o.more_outs[j - 1]; };
    for (size_t i = 0; i < g.buffers.size(); ++i) {
      Home& h = homes[i];
      if (in_of[i] >= 0) h.at = o.ins[in_of[i]];
      else if (out_of[i] >= 0) h.at = out_at(out_of[i]);
      else if (temp_of[i] >= 0) h.at = o.temps[temp_of[i]];
      else h.at = r.Plus(res_of[i]);
      h.bcast_only = g.buffers[i].in >= 0 && g.buffers[i].form == Form::kScalar;
      if (block_of[i] >= 0) h.block = r.Plus(block_of[i]);
    }
    StepEmitter e(k, g, homes, o.temps[scratch], o.temps[scratch].Plus(RoundUp(cols * 4, 256)), cols);
    if (absl::Status st = e.Run(); !st.ok() && status.ok()) status = st;
    for (size_t i = 0; i < g.buffers.size(); ++i)
      if (out_of[i] >= 0 && g.buffers[i].in >= 0)
        k.Vec("vmov", DType::kF32, V(out_at(out_of[i])), {V(homes[i].at)}, Wide(g.buffers[i].form) ? cols : 1);
  };
  s.what = absl::StrCat(What(*req.node), " (", g.reduces ? "row reduction" : "elementwise", " over [",
                        g.rows, ", ", cols, "])");
  absl::StatusOr<GeneratedKernel> k = EmitRows(req, s);
  KILN_RETURN_IF_ERROR(status);
  return k;
}

}  // namespace

bool IsFusedGroup(const Node& n) {
  if (n.domain() != "kiln" || n.op() != "Fused") return false;
  const std::string kind = n.GetString("kind", "");
  return kind == "elementwise" || kind == "reduction";
}

absl::StatusOr<GeneratedKernel> GenerateFused(const KernelRequest& req) { return GenerateFromTileSteps(req); }

absl::StatusOr<GeneratedKernel> GenerateFromTileSteps(const KernelRequest& req) {
  const Node& node = *req.node;
  KILN_ASSIGN_OR_RETURN(Group g, Match(node, *req.machine, Cores(req)));
  KILN_ASSIGN_OR_RETURN(ArgNames names, NameArgs(node, g));
  bool flat = !g.reduces;
  for (const Buffer& b : g.buffers)
    if (b.form != Form::kFull && !(b.form == Form::kScalar && b.in >= 0)) flat = false;
  absl::StatusOr<GeneratedKernel> k = flat ? Flat(req, g, names) : Rows(req, g, names);
  if (!k.ok()) return k.status();
  k->constant_args = names.constants;
  return k;
}

}  // namespace kiln::target::npusim::vec
