//===- codegen_util.cc - Shared pieces of the CUDA code generator ---------===//
//
// Names and types, affine expressions, global tile indexing, and the
// per-element programs of elementwise steps (codegen_util.h).
//
//===----------------------------------------------------------------------===//
#include "target/cuda/codegen/codegen_util.h"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::target::cuda::internal {

using tile::Affine;
using tile::EwOp;
using tile::Scope;
using tile::Stmt;
using tile::TileArg;
using tile::TileRef;

std::string Ident(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "v" + out;
  return out;
}

absl::StatusOr<std::string> CType(DType t) {
  switch (t) {
    case DType::kF32: return std::string("float");
    case DType::kF16: return std::string("__half");
    case DType::kBF16: return std::string("__nv_bfloat16");
    case DType::kBool: return std::string("bool");
    default:
      return absl::UnimplementedError(absl::StrCat("dtype ", DTypeName(t), " has no CUDA form in kiln's kernels"));
  }
}

int64_t Bytes(DType t) { return static_cast<int64_t>(DTypeSize(t)); }

bool IsCopy(const tile::Stmt& s) {
  return s.kind == tile::Stmt::Kind::kCopy && s.srcs.size() == 1 && s.srcs[0].ref.has_value();
}

std::string FloatLit(double x) {
  if (std::isinf(x)) return x > 0 ? "INFINITY" : "-INFINITY";
  if (std::isnan(x)) return "NAN";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", x);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s + "f";
}

std::string AffineC(const Affine& a) {
  std::string out;
  for (const auto& [var, coeff] : a.terms) {
    if (!out.empty()) out += coeff < 0 ? " - " : " + ";
    else if (coeff < 0) out += "-";
    int64_t c = coeff < 0 ? -coeff : coeff;
    out += c == 1 ? Ident(var) : absl::StrCat(Ident(var), " * ", c);
  }
  if (a.constant != 0 || out.empty()) {
    if (out.empty()) return absl::StrCat(a.constant);
    absl::StrAppend(&out, a.constant < 0 ? " - " : " + ", a.constant < 0 ? -a.constant : a.constant);
  }
  return a.terms.size() + (a.constant != 0) > 1 ? absl::StrCat("(", out, ")") : out;
}

std::vector<std::string> AffineVars(const Affine& a) {
  std::vector<std::string> v;
  for (const auto& t : a.terms) v.push_back(t.first);
  return v;
}

Names::Names(const tile::TileKernel& k) {
  for (size_t i = 0; i < k.args.size(); ++i) {
    args[k.args[i].name] = &k.args[i];
    arg_index[k.args[i].name] = static_cast<int>(i);
  }
  CollectBuffers(k.body);
}

void Names::CollectBuffers(const tile::Block& b) {
  for (const auto& s : b) {
    if (s->kind == Stmt::Kind::kBuffer) buffers[s->buffer] = s.get();
    if (s->kind == Stmt::Kind::kLoop) CollectBuffers(s->body);
  }
}

namespace {

// The C index along a global dimension of `extent` of a tile that starts at
// `start`: plus the local index `local` where the tile spans the dimension
// (`local_extent` > 1), and the guard ("" when none is needed) that keeps it
// inside when the tile may run past the dimension's end.
struct DimIndex {
  std::string index, guard;
};
DimIndex IndexAlong(const Affine& start, const std::string& local, int64_t local_extent, int64_t extent) {
  DimIndex di;
  const std::string s = AffineC(start);
  if (local_extent > 1) {
    di.index = s == "0" ? local : absl::StrCat(s, " + ", local);
    // A tile that stays inside the tensor for every start needs no guard.
    const bool inside = start.is_constant() && start.constant + local_extent <= extent;
    if (!inside) di.guard = absl::StrCat("(", di.index, ") < ", extent);
  } else {
    di.index = s;
    if (!start.is_constant()) di.guard = absl::StrCat(di.index, " < ", extent);
  }
  return di;
}

}  // namespace

std::vector<Affine> StartsOf(const TileRef& ref, int rank) {
  std::vector<Affine> start(rank, Affine::Const(0));
  const int given = static_cast<int>(ref.start.size());
  for (int d = 0; d < given && d < rank; ++d) start[rank - given + d] = ref.start[d];
  return start;
}

GlobalIndex IndexGlobal(const TileArg& arg, const TileRef& ref, const std::vector<std::string>& local,
                        const std::vector<int64_t>& local_shape, bool transpose) {
  const int r = static_cast<int>(arg.shape.size());
  const int b = static_cast<int>(local.size());
  const std::vector<Affine> start = StartsOf(ref, r);
  std::vector<int64_t> stride(r, 1);
  for (int d = r - 2; d >= 0; --d) stride[d] = stride[d + 1] * arg.shape[d + 1];

  GlobalIndex gi;
  std::vector<std::string> terms, conds;
  for (int d = 0; d < r; ++d) {
    // The local dimension this global dimension runs along (aligned from
    // the right; the last two swapped by `transpose`).
    int l = b - (r - d);
    if (transpose && b >= 2) {
      if (l == b - 1) l = b - 2;
      else if (l == b - 2) l = b - 1;
    }
    // A dimension of extent 1 broadcasts on reads (or has the only index,
    // 0); the tensors a kernel writes do not broadcast: a tile wider than
    // the dimension runs past its end there, and those elements are not
    // written (split-K slices adding a GEMM row of M = 1 would otherwise
    // add every row of their tile into it).
    const bool written = arg.role == tile::TileArg::Role::kOut || arg.role == tile::TileArg::Role::kWorkspace;
    if (arg.shape[d] == 1 && !written) continue;
    const bool has_local = l >= 0 && local_shape[l] > 1;
    if (l >= 0 && l == b - 1) gi.inner_stride = has_local ? stride[d] : 0;
    DimIndex di = IndexAlong(start[d], has_local ? local[l] : "", has_local ? local_shape[l] : 1, arg.shape[d]);
    if (di.index == "0") continue;
    if (!di.guard.empty()) conds.push_back(di.guard);
    terms.push_back(stride[d] == 1 ? absl::StrCat("(long long)(", di.index, ")")
                                   : absl::StrCat("(long long)(", di.index, ") * ", stride[d]));
  }
  gi.offset = terms.empty() ? "0LL" : absl::StrJoin(terms, " + ");
  gi.valid = conds.empty() ? "true" : absl::StrJoin(conds, " && ");
  return gi;
}

GlobalIndex IndexIm2col(const TileArg& x, const TileRef& ref, const tile::Im2col& c,
                        const std::vector<std::string>& local, const std::vector<int64_t>& local_shape) {
  const std::vector<int64_t> vshape = tile::Im2colShape(x.shape, c);
  const int r = 4, b = static_cast<int>(local.size());
  const std::vector<Affine> start = StartsOf(ref, r);
  std::vector<std::string> index(r), conds;
  for (int d = 0; d < r; ++d) {
    const int l = b - (r - d);
    const bool has_local = l >= 0 && local_shape[l] > 1;
    DimIndex di = IndexAlong(start[d], has_local ? local[l] : "", has_local ? local_shape[l] : 1, vshape[d]);
    index[d] = di.index;
    if (!di.guard.empty()) conds.push_back(di.guard);
  }
  const std::string call =
      absl::StrCat("kiln::im2col_offset<", x.shape[1], ", ", x.shape[2], ", ", x.shape[3], ", ", c.kernel[0], ", ",
                   c.kernel[1], ", ", c.stride[0], ", ", c.stride[1], ", ", c.pad[0], ", ", c.pad[1], ", ",
                   c.dilation[0], ", ", c.dilation[1], ", ", c.out[1], ", ", x.shape[1] / c.groups, ">(",
                   absl::StrJoin(index, ", "), ")");
  GlobalIndex gi;
  gi.offset = conds.empty() ? call : absl::StrCat("(", absl::StrJoin(conds, " && "), ") ? ", call, " : -2LL");
  return gi;
}

const char* ReduceCombiner(tile::ReduceOp op) {
  switch (op) {
    case tile::ReduceOp::kSum: return "kiln::SumOp";
    case tile::ReduceOp::kMax: return "kiln::MaxOp";
    case tile::ReduceOp::kMin: return "kiln::MinOp";
    case tile::ReduceOp::kProd: return "kiln::ProdOp";
  }
  return "kiln::SumOp";
}

const char* ReduceIdentity(tile::ReduceOp op) {
  switch (op) {
    case tile::ReduceOp::kSum: return "0.f";
    case tile::ReduceOp::kMax: return "-INFINITY";
    case tile::ReduceOp::kMin: return "INFINITY";
    case tile::ReduceOp::kProd: return "1.f";
  }
  return "0.f";
}

absl::StatusOr<std::string> EwExpr(EwOp op, const std::vector<std::string>& x) {
  auto need = [&](size_t n) -> absl::Status {
    if (x.size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("ew ", tile::EwOpName(op), " takes ", n, " operands, not ", x.size()));
    }
    return absl::OkStatus();
  };
  const int arity = op == EwOp::kSelect ? 3
                    : (op == EwOp::kAdd || op == EwOp::kSub || op == EwOp::kMul || op == EwOp::kDiv ||
                       op == EwOp::kMax || op == EwOp::kMin || op == EwOp::kPow || op == EwOp::kCmpLt ||
                       op == EwOp::kCmpLe || op == EwOp::kCmpGt || op == EwOp::kCmpGe || op == EwOp::kCmpEq)
                        ? 2
                        : 1;
  if (auto st = need(arity); !st.ok()) return st;
  switch (op) {
    case EwOp::kCopy:
    case EwOp::kCast: return x[0];
    case EwOp::kAdd: return absl::StrCat(x[0], " + ", x[1]);
    case EwOp::kSub: return absl::StrCat(x[0], " - ", x[1]);
    case EwOp::kMul: return absl::StrCat(x[0], " * ", x[1]);
    case EwOp::kDiv: return absl::StrCat(x[0], " / ", x[1]);
    case EwOp::kMax: return absl::StrCat("kiln::max_nan(", x[0], ", ", x[1], ")");
    case EwOp::kMin: return absl::StrCat("kiln::min_nan(", x[0], ", ", x[1], ")");
    case EwOp::kPow: return absl::StrCat("powf(", x[0], ", ", x[1], ")");
    case EwOp::kNeg: return absl::StrCat("-", x[0]);
    case EwOp::kAbs: return absl::StrCat("fabsf(", x[0], ")");
    case EwOp::kRelu: return absl::StrCat("kiln::relu(", x[0], ")");
    case EwOp::kExp: return absl::StrCat("expf(", x[0], ")");
    case EwOp::kLog: return absl::StrCat("logf(", x[0], ")");
    case EwOp::kSqrt: return absl::StrCat("sqrtf(", x[0], ")");
    case EwOp::kRsqrt: return absl::StrCat("rsqrtf(", x[0], ")");
    case EwOp::kRecip: return absl::StrCat("kiln::recip(", x[0], ")");
    case EwOp::kTanh: return absl::StrCat("tanhf(", x[0], ")");
    case EwOp::kSigmoid: return absl::StrCat("kiln::sigmoid(", x[0], ")");
    case EwOp::kErf: return absl::StrCat("erff(", x[0], ")");
    case EwOp::kGelu: return absl::StrCat("kiln::gelu(", x[0], ")");
    case EwOp::kGeluTanh: return absl::StrCat("kiln::gelu_tanh(", x[0], ")");
    case EwOp::kSelect: return absl::StrCat("kiln::select(", x[0], ", ", x[1], ", ", x[2], ")");
    case EwOp::kCmpLt: return absl::StrCat("(", x[0], " < ", x[1], " ? 1.f : 0.f)");
    case EwOp::kCmpLe: return absl::StrCat("(", x[0], " <= ", x[1], " ? 1.f : 0.f)");
    case EwOp::kCmpGt: return absl::StrCat("(", x[0], " > ", x[1], " ? 1.f : 0.f)");
    case EwOp::kCmpGe: return absl::StrCat("(", x[0], " >= ", x[1], " ? 1.f : 0.f)");
    case EwOp::kCmpEq: return absl::StrCat("(", x[0], " == ", x[1], " ? 1.f : 0.f)");
  }
  return absl::UnimplementedError("unknown ew op");
}

namespace {
// The C index of a buffer of shape `shape` at the iteration position:
// dimensions of extent 1 broadcast (index 0), missing leading ones too.
std::vector<std::string> LocalIndex(const ElementProgram& p, const std::vector<int64_t>& shape) {
  std::vector<std::string> idx;
  const int ni = static_cast<int>(p.index.size()), nb = static_cast<int>(shape.size());
  for (int d = 0; d < nb; ++d) {
    const int it = d + ni - nb;  // aligned from the right
    idx.push_back(shape[d] == 1 || it < 0 ? "0" : p.index[it]);
  }
  return idx;
}
}  // namespace

absl::StatusOr<std::string> EmitElementProgram(const ElementProgram& p, const std::vector<const Stmt*>& stmts,
                                               const std::string& indent) {
  std::string out;
  std::map<std::string, bool> declared;
  for (const auto& [name, expr] : p.given) {
    absl::StrAppend(&out, indent, "float v_", Ident(name), " = ", expr, ";\n");
    declared[name] = true;
  }
  auto value_of = [&](const tile::Operand& o) -> absl::StatusOr<std::string> {
    if (!o.ref) return FloatLit(o.scalar);
    if (!declared.count(o.ref->name)) {
      return absl::InvalidArgumentError(absl::StrCat("%", o.ref->name, " is read before it is written"));
    }
    return absl::StrCat("v_", Ident(o.ref->name));
  };
  auto assign = [&](const std::string& name, const std::string& expr) -> absl::Status {
    auto it = p.names->buffers.find(name);
    if (it == p.names->buffers.end()) return absl::InvalidArgumentError(absl::StrCat("%", name, " is no buffer"));
    std::string value = expr;
    if (it->second->dtype != DType::kF32) {
      auto ct = CType(it->second->dtype);
      if (!ct.ok()) return ct.status();
      value = absl::StrCat("kiln::round_to<", *ct, ">(", expr, ")");
    }
    absl::StrAppend(&out, indent, declared[name] ? "" : "float ", "v_", Ident(name), " = ", value, ";\n");
    declared[name] = true;
    return absl::OkStatus();
  };
  // Buffers some statement reads (loads into others are dead).
  std::map<std::string, bool> read;
  for (const Stmt* s : stmts)
    for (const auto& o : s->srcs)
      if (o.ref) read[o.ref->name] = true;
  for (const std::string& name : p.read_after) read[name] = true;
  for (size_t si = 0; si < stmts.size(); ++si) {
    const Stmt& s = *stmts[si];
    const int index = static_cast<int>(si);
    if (s.kind == Stmt::Kind::kBuffer) continue;
    if (s.kind == Stmt::Kind::kCopy && !p.names->args.count(s.dst.name) && !read[s.dst.name]) continue;
    if (s.kind == Stmt::Kind::kEw) {
      std::vector<std::string> ops;
      for (const auto& o : s.srcs) {
        auto v = value_of(o);
        if (!v.ok()) return v.status();
        ops.push_back(*v);
      }
      auto e = EwExpr(s.ew, ops);
      if (!e.ok()) return e.status();
      if (auto st = assign(s.dst.name, *e); !st.ok()) return st;
      continue;
    }
    if (s.kind == Stmt::Kind::kCopy && s.srcs.size() == 1 && s.srcs[0].ref) {
      const TileRef& src = *s.srcs[0].ref;
      const bool src_global = p.names->args.count(src.name) > 0;
      const bool dst_global = p.names->args.count(s.dst.name) > 0;
      if (src_global && !dst_global) {
        const Stmt* buf = p.names->buffers.at(s.dst.name);
        std::string load = p.load ? p.load(s, index) : "";
        if (load.empty()) {
          const TileArg& a = *p.names->args.at(src.name);
          GlobalIndex gi = IndexGlobal(a, src, LocalIndex(p, buf->shape), buf->shape, s.transpose);
          load = gi.valid == "true" ? absl::StrCat("kiln::to_f32(", Ident(a.name), "[", gi.offset, "])")
                                    : absl::StrCat("(", gi.valid, ") ? kiln::to_f32(", Ident(a.name), "[",
                                                   gi.offset, "]) : 0.f");
        }
        if (auto st = assign(s.dst.name, load); !st.ok()) return st;
        continue;
      }
      if (!src_global && dst_global) {
        auto v = value_of(s.srcs[0]);
        if (!v.ok()) return v.status();
        const Stmt* buf = p.names->buffers.at(src.name);
        if (p.store) {
          std::string st = p.store(s, index, *v);
          if (!st.empty()) {
            absl::StrAppend(&out, indent, st, "\n");
            continue;
          }
        }
        const TileArg& a = *p.names->args.at(s.dst.name);
        auto ct = CType(a.dtype);
        if (!ct.ok()) return ct.status();
        GlobalIndex gi = IndexGlobal(a, s.dst, LocalIndex(p, buf->shape), buf->shape, s.transpose);
        std::string store =
            s.accumulate
                ? (p.atomic_stores ? absl::StrCat("kiln::atomic_add(&", Ident(a.name), "[", gi.offset, "], ", *v, ");")
                                   : absl::StrCat(Ident(a.name), "[", gi.offset, "] = kiln::from_f32<", *ct,
                                                  ">(kiln::to_f32(", Ident(a.name), "[", gi.offset, "]) + ", *v,
                                                  ");"))
                : absl::StrCat(Ident(a.name), "[", gi.offset, "] = kiln::from_f32<", *ct, ">(", *v, ");");
        if (gi.valid != "true") store = absl::StrCat("if (", gi.valid, ") ", store);
        absl::StrAppend(&out, indent, store, "\n");
        continue;
      }
      if (!src_global && !dst_global) {
        auto v = value_of(s.srcs[0]);
        if (!v.ok()) return v.status();
        if (auto st = assign(s.dst.name, *v); !st.ok()) return st;
        continue;
      }
    }
    if (s.kind == Stmt::Kind::kFill) {
      if (auto st = assign(s.dst.name, FloatLit(s.value)); !st.ok()) return st;
      continue;
    }
    return absl::UnimplementedError(absl::StrCat("`", tile::PrintStatement(s), "` has no per-element CUDA form"));
  }
  return out;
}

void MarkUsed(const tile::Block& b, const Names& names, std::vector<bool>* used) {
  auto mark = [&](const std::string& n) {
    auto it = names.arg_index.find(n);
    if (it != names.arg_index.end()) (*used)[it->second] = true;
  };
  for (const auto& s : b) {
    if (s->kind == Stmt::Kind::kLoop) {
      MarkUsed(s->body, names, used);
      continue;
    }
    mark(s->dst.name);
    for (const auto& o : s->srcs)
      if (o.ref) mark(o.ref->name);
  }
}

absl::StatusOr<std::string> ParamList(const tile::TileKernel& k, const std::vector<bool>& used) {
  std::vector<std::string> params;
  for (size_t i = 0; i < k.args.size(); ++i) {
    const TileArg& a = k.args[i];
    auto ct = CType(a.dtype);
    if (!ct.ok()) return ct.status();
    const bool input = a.role == TileArg::Role::kIn || a.role == TileArg::Role::kConst;
    params.push_back(absl::StrCat(input ? "const " : "", *ct, "* __restrict__ ",
                                  used[i] ? Ident(a.name) : absl::StrCat("/*", Ident(a.name), ": unused*/")));
  }
  return absl::StrJoin(params, ", ");
}

}  // namespace kiln::target::cuda::internal
