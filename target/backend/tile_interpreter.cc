//===- tile_interpreter.cc - Tile kernels run on the host, statement by statement ---===//
//
// One Storage per argument and per live buffer (values as doubles, rounded
// to the dtype on every store), a stack of block frames for the buffers in
// scope, and the loop variables' current values. Copies map each element of
// the tile to an element of either side (Side), so ragged edges,
// broadcasting, transposes and im2col are one rule each.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/ir/dtype_dispatch.h"
#include "graph/support/float16.h"
#include "graph/support/status.h"

namespace kiln::target::tile {
namespace {

// The most elements one buffer may hold: a bigger one is a malformed kernel.
constexpr int64_t kMaxBufferElements = int64_t{1} << 26;

// `v` as the dtype `t` holds it.
double RoundTo(DType t, double v) {
  switch (t) {
    case DType::kF64: return v;
    case DType::kF32: return static_cast<float>(v);
    case DType::kF16: return HalfBitsToFloat(FloatToHalfBits(static_cast<float>(v)));
    case DType::kBF16: return BFloat16BitsToFloat(FloatToBFloat16Bits(static_cast<float>(v)));
    default: return DispatchNumeric(t, [&]<typename T>() { return ToDouble(FromDouble<T>(v)); });
  }
}

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

std::vector<int64_t> StridesOf(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

// A kernel argument or a buffer.
struct Storage {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape, strides;
  std::vector<double> data;
  const TileArg* arg = nullptr;  // a global tensor
  int group_depth = 0;           // group loops around its declaration
};

// Advances the index `i` over `ext` (last dimension fastest); false after the last.
bool Next(std::vector<int64_t>& i, const std::vector<int64_t>& ext) {
  for (int d = static_cast<int>(ext.size()) - 1; d >= 0; --d) {
    if (++i[d] < ext[d]) return true;
    i[d] = 0;
  }
  return false;
}

// One side of a copy: where each element of the tile lies in what it names.
struct Side {
  Storage* st = nullptr;
  bool global = false;
  std::vector<int64_t> shape;  // the addressed shape (im2col: the virtual one)
  std::vector<int64_t> start;  // per dimension of `shape`
  std::vector<int> tile_dim;   // per dimension of `shape`: the tile dimension along it, or -1
  const Im2col* im2col = nullptr;

  // The index in `shape` of tile element `i`, or false past the end (a
  // global read broadcasts dimensions of extent 1; a write does not, nor
  // does im2col, whose rows and columns past the virtual extent are zero).
  bool Index(const std::vector<int64_t>& i, bool write, int64_t* idx) const {
    const bool broadcast = global && !write && !im2col;
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t x = start[d];
      if (tile_dim[d] >= 0 && !(broadcast && shape[d] == 1)) x += i[tile_dim[d]];
      if (x >= shape[d]) return false;
      idx[d] = x;
    }
    return true;
  }

  double Read(const std::vector<int64_t>& i) const {
    int64_t idx[8];
    if (!Index(i, false, idx)) return 0;  // the ragged edge
    if (!im2col) {
      int64_t off = 0;
      for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * st->strides[d];
      return st->data[off];
    }
    // (n, g, (c*KH + r)*KW + s, oh*OW + ow) -> X[n, g*C/G + c, oh*SH - PH + r*DH, ow*SW - PW + s*DW]
    const Im2col& c = *im2col;
    const int64_t C = st->shape[1], H = st->shape[2], W = st->shape[3];
    const int64_t kk = c.kernel[0] * c.kernel[1];
    const int64_t ch = idx[1] * (C / c.groups) + idx[2] / kk;
    const int64_t r = idx[2] % kk / c.kernel[1], s = idx[2] % c.kernel[1];
    const int64_t oh = idx[3] / c.out[1], ow = idx[3] % c.out[1];
    const int64_t h = oh * c.stride[0] - c.pad[0] + r * c.dilation[0];
    const int64_t w = ow * c.stride[1] - c.pad[1] + s * c.dilation[1];
    if (h < 0 || h >= H || w < 0 || w >= W) return c.fill;
    return st->data[((idx[0] * C + ch) * H + h) * W + w];
  }

  void Write(const std::vector<int64_t>& i, double v, bool add) const {
    int64_t idx[8];
    if (!Index(i, true, idx)) return;  // past the end: dropped
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * st->strides[d];
    st->data[off] = RoundTo(st->dtype, add ? st->data[off] + v : v);
  }
};

double Ew(EwOp op, const double* x) {
  switch (op) {
    case EwOp::kCopy:
    case EwOp::kCast: return x[0];
    case EwOp::kAdd: return x[0] + x[1];
    case EwOp::kSub: return x[0] - x[1];
    case EwOp::kMul: return x[0] * x[1];
    case EwOp::kDiv: return x[0] / x[1];
    // NaN propagates, as in the reference kernels (numpy's maximum/minimum).
    case EwOp::kMax: return std::isnan(x[0]) || x[0] > x[1] ? x[0] : x[1];
    case EwOp::kMin: return std::isnan(x[0]) || x[0] < x[1] ? x[0] : x[1];
    case EwOp::kPow: return std::pow(x[0], x[1]);
    case EwOp::kNeg: return -x[0];
    case EwOp::kAbs: return std::fabs(x[0]);
    case EwOp::kRelu: return x[0] > 0 ? x[0] : 0.0;
    case EwOp::kExp: return std::exp(x[0]);
    case EwOp::kLog: return std::log(x[0]);
    case EwOp::kSqrt: return std::sqrt(x[0]);
    case EwOp::kRsqrt: return 1 / std::sqrt(x[0]);
    case EwOp::kRecip: return 1 / x[0];
    case EwOp::kTanh: return std::tanh(x[0]);
    case EwOp::kSigmoid: return 1 / (1 + std::exp(-x[0]));
    case EwOp::kErf: return std::erf(x[0]);
    case EwOp::kGelu: return 0.5 * x[0] * (1 + std::erf(x[0] * 0.70710678118654752440));  // the erf form
    case EwOp::kGeluTanh:
      return 0.5 * x[0] * (1 + std::tanh(0.79788456080286535588 * (x[0] + 0.044715 * x[0] * x[0] * x[0])));
    case EwOp::kSelect: return x[0] != 0 ? x[1] : x[2];
    case EwOp::kCmpLt: return x[0] < x[1] ? 1.0 : 0.0;
    case EwOp::kCmpLe: return x[0] <= x[1] ? 1.0 : 0.0;
    case EwOp::kCmpGt: return x[0] > x[1] ? 1.0 : 0.0;
    case EwOp::kCmpGe: return x[0] >= x[1] ? 1.0 : 0.0;
    case EwOp::kCmpEq: return x[0] == x[1] ? 1.0 : 0.0;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

class Interpreter {
 public:
  explicit Interpreter(const TileKernel& k) : k_(k) {}

  absl::Status Run(absl::Span<Tensor* const> tensors) {
    if (tensors.size() != k_.args.size()) {
      return Error(absl::StrCat(k_.args.size(), " arguments declared, ", tensors.size(), " tensors given"));
    }
    std::set<std::string> zeroed;
    CollectAddedArgs(k_.body, &zeroed);
    for (size_t i = 0; i < k_.args.size(); ++i) {
      const TileArg& a = k_.args[i];
      const Tensor* t = tensors[i];
      if (!t || !t->defined()) return Error(absl::StrCat("no tensor for %", a.name));
      if (!IsNumeric(a.dtype)) return Error(absl::StrCat("%", a.name, " has dtype ", DTypeName(a.dtype)));
      if (t->dtype() != a.dtype) {
        return Error(absl::StrCat("%", a.name, " is ", DTypeName(a.dtype), ", its tensor ", DTypeName(t->dtype())));
      }
      if (std::any_of(a.shape.begin(), a.shape.end(), [](int64_t d) { return d < 1; }) ||
          Product(a.shape) != t->numel()) {
        return Error(absl::StrCat("%", a.name, " is [", absl::StrJoin(a.shape, ","), "], its tensor has ",
                                  t->numel(), " elements"));
      }
      if (args_.count(a.name)) return Error(absl::StrCat("%", a.name, " is declared twice"));
      auto st = std::make_unique<Storage>();
      st->name = a.name;
      st->dtype = a.dtype;
      st->shape = a.shape;
      st->strides = StridesOf(a.shape);
      st->arg = &a;
      st->data.resize(t->numel());
      const bool zero = a.role == TileArg::Role::kOut && zeroed.count(a.name);
      for (int64_t e = 0; e < t->numel(); ++e) st->data[e] = zero ? 0.0 : t->GetDouble(e);
      args_[a.name] = std::move(st);
    }
    frames_.emplace_back();
    KILN_RETURN_IF_ERROR(Block(k_.body));
    frames_.clear();
    for (size_t i = 0; i < k_.args.size(); ++i) {
      const TileArg& a = k_.args[i];
      if (a.role != TileArg::Role::kOut && a.role != TileArg::Role::kWorkspace) continue;
      const std::vector<double>& data = args_.at(a.name)->data;
      Tensor* t = tensors[i];
      DispatchNumeric(a.dtype, [&]<typename T>() {
        T* p = t->data<T>();
        for (size_t e = 0; e < data.size(); ++e) p[e] = FromDouble<T>(data[e]);
      });
    }
    return absl::OkStatus();
  }

 private:
  using Frame = std::map<std::string, std::unique_ptr<Storage>>;

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("tile kernel @", k_.name, ": ", what));
  }
  absl::Status Error(const Stmt& s, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("tile kernel @", k_.name, ": '", PrintStatement(s), "': ", what));
  }

  // Arguments that some copy writes with `add`.
  static void CollectAddedArgs(const tile::Block& b, std::set<std::string>* out) {
    for (const auto& s : b) {
      if (s->kind == Stmt::Kind::kCopy && s->accumulate) out->insert(s->dst.name);
      if (s->kind == Stmt::Kind::kLoop) CollectAddedArgs(s->body, out);
    }
  }

  absl::Status Block(const tile::Block& b) {
    for (const auto& s : b) KILN_RETURN_IF_ERROR(Statement(*s));
    return absl::OkStatus();
  }

  absl::Status Statement(const Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::kBuffer: return Buffer(s);
      case Stmt::Kind::kLoop: return Loop(s);
      case Stmt::Kind::kCopy: return Copy(s);
      case Stmt::Kind::kFill: return Fill(s);
      case Stmt::Kind::kMma: return Mma(s);
      case Stmt::Kind::kEw: return EwStep(s);
      case Stmt::Kind::kReduce: return Reduce(s);
      case Stmt::Kind::kSync: return absl::OkStatus();
      case Stmt::Kind::kCausal: return Causal(s);
    }
    return Error(s, "unknown statement");
  }

  absl::StatusOr<Storage*> Lookup(const Stmt& s, const std::string& name) {
    for (auto f = frames_.rbegin(); f != frames_.rend(); ++f) {
      auto it = f->find(name);
      if (it != f->end()) return it->second.get();
    }
    auto it = args_.find(name);
    if (it != args_.end()) return it->second.get();
    return Error(s, absl::StrCat("%", name, " is no argument or buffer in scope"));
  }

  absl::StatusOr<int64_t> Eval(const Stmt& s, const Affine& a) {
    int64_t v = a.constant;
    for (const auto& [var, coeff] : a.terms) {
      auto it = vars_.find(var);
      if (it == vars_.end()) return Error(s, absl::StrCat("%", var, " is no enclosing loop's variable"));
      v += coeff * it->second;
    }
    return v;
  }

  absl::Status Buffer(const Stmt& s) {
    if (s.scope == Scope::kGlobal) return Error(s, "a buffer in global scope");
    for (const Frame& f : frames_) {
      if (f.count(s.buffer)) return Error(s, absl::StrCat("%", s.buffer, " is declared twice"));
    }
    if (args_.count(s.buffer)) return Error(s, absl::StrCat("%", s.buffer, " is also an argument"));
    if (!IsNumeric(s.dtype)) return Error(s, absl::StrCat("a buffer of ", DTypeName(s.dtype)));
    int64_t n = 1;
    for (int64_t d : s.shape) {
      if (d < 1) return Error(s, absl::StrCat("dimension ", d));
      if (d > kMaxBufferElements || (n *= d) > kMaxBufferElements) return Error(s, "the buffer is too large");
    }
    if (s.shape.size() > 8) return Error(s, "more than 8 dimensions");
    auto st = std::make_unique<Storage>();
    st->name = s.buffer;
    st->dtype = s.dtype;
    st->shape = s.shape;
    st->strides = StridesOf(s.shape);
    st->data.assign(n, std::numeric_limits<double>::quiet_NaN());  // unwritten
    st->group_depth = group_depth_;
    frames_.back()[s.buffer] = std::move(st);
    return absl::OkStatus();
  }

  absl::Status Loop(const Stmt& s) {
    if (s.vars.empty()) return Error(s, "a loop without variables");
    std::vector<int64_t> ext;
    for (const LoopVar& v : s.vars) {
      if (vars_.count(v.name)) return Error(s, absl::StrCat("%", v.name, " is declared twice"));
      ext.push_back(v.extent);
    }
    const bool group = s.loop == Stmt::LoopKind::kGroup;
    if (group) {
      ++group_depth_;
      for (const LoopVar& v : s.vars) group_vars_.insert(v.name);
    }
    absl::Status st = absl::OkStatus();
    if (std::all_of(ext.begin(), ext.end(), [](int64_t e) { return e > 0; })) {
      std::vector<int64_t> i(ext.size(), 0);
      do {
        for (size_t v = 0; v < i.size(); ++v) vars_[s.vars[v].name] = i[v];
        frames_.emplace_back();
        st = Block(s.body);
        frames_.pop_back();
      } while (st.ok() && Next(i, ext));
    }
    for (const LoopVar& v : s.vars) vars_.erase(v.name);
    if (group) {
      --group_depth_;
      for (const LoopVar& v : s.vars) group_vars_.erase(v.name);
    }
    return st;
  }

  // Inside a group loop, a statement that uses no group variable is done
  // once for the unit by its groups together. Run once per group, that is
  // the same for what is stored; not for what is added to shared storage.
  absl::Status CheckShared(const Stmt& s, const Storage& dst, bool accumulates) const {
    if (!accumulates || group_depth_ == 0 || dst.group_depth >= group_depth_) return absl::OkStatus();
    auto uses_group = [&](const TileRef& r) {
      for (const Affine& a : r.start)
        for (const auto& t : a.terms)
          if (group_vars_.count(t.first)) return true;
      return false;
    };
    if (uses_group(s.dst)) return absl::OkStatus();
    for (const Operand& o : s.srcs)
      if (o.ref && uses_group(*o.ref)) return absl::OkStatus();
    return Error(s, absl::StrCat("the groups share %", dst.name,
                                 " and this statement accumulates into it once for all of them (the interpreter "
                                 "runs groups one after another)"));
  }

  // A whole local buffer (no starts, or all zero).
  absl::StatusOr<Storage*> WholeLocal(const Stmt& s, const TileRef& r) {
    KILN_ASSIGN_OR_RETURN(Storage * st, Lookup(s, r.name));
    if (st->arg) return Error(s, absl::StrCat("%", r.name, " is a global tensor; only copies address those"));
    if (!r.start.empty() && r.start.size() != st->shape.size()) {
      return Error(s, absl::StrCat("%", r.name, " has ", st->shape.size(), " dimensions, the reference ",
                                   r.start.size()));
    }
    for (const Affine& a : r.start) {
      KILN_ASSIGN_OR_RETURN(int64_t v, Eval(s, a));
      if (v != 0) return Error(s, absl::StrCat("%", r.name, " is not referenced whole"));
    }
    return st;
  }

  // The side of a copy that `r` names, for a tile of extents `ext`.
  absl::StatusOr<Side> MakeSide(const Stmt& s, const TileRef& r, const std::vector<int64_t>& ext, bool write,
                                const Im2col* im2col) {
    Side side;
    KILN_ASSIGN_OR_RETURN(side.st, Lookup(s, r.name));
    side.global = side.st->arg != nullptr;
    side.im2col = im2col;
    side.shape = im2col ? Im2colShape(side.st->shape, *im2col) : side.st->shape;
    const size_t rank = side.shape.size(), t = ext.size();
    if (r.start.size() > rank) {
      return Error(s, absl::StrCat("%", r.name, " has ", rank, " dimensions, the reference ", r.start.size()));
    }
    side.start.assign(rank, 0);
    for (size_t d = 0; d < r.start.size(); ++d) {
      KILN_ASSIGN_OR_RETURN(side.start[rank - r.start.size() + d], Eval(s, r.start[d]));
    }
    side.tile_dim.assign(rank, -1);
    if (!side.global) {
      if (!r.start.empty() && r.start.size() != rank) {
        return Error(s, absl::StrCat("%", r.name, " has ", rank, " dimensions, the reference ", r.start.size()));
      }
      if (rank != t) {
        return Error(s, absl::StrCat("local copies keep the rank: %", r.name, " has ", rank,
                                     " dimensions, the tile ", t));
      }
      for (size_t d = 0; d < rank; ++d) {
        side.tile_dim[d] = static_cast<int>(d);
        if (side.start[d] < 0 || side.start[d] + ext[d] > side.shape[d]) {
          return Error(s, absl::StrCat("dimension ", d, " of %", r.name, " spans ", side.start[d], " .. ",
                                       side.start[d] + ext[d] - 1, ", the buffer has ", side.shape[d]));
        }
      }
      return side;
    }
    if (rank > 8) return Error(s, absl::StrCat("%", r.name, " has more than 8 dimensions"));
    if (write && t > rank) {
      return Error(s, absl::StrCat("copies to global tensors do not broadcast: %", r.name, " has ", rank,
                                   " dimensions, the tile ", t));
    }
    for (size_t d = 0; d < rank; ++d) {
      const int64_t td = static_cast<int64_t>(d) - static_cast<int64_t>(rank) + static_cast<int64_t>(t);
      side.tile_dim[d] = td >= 0 ? static_cast<int>(td) : -1;
      // The block's tile starts inside (group variables at 0): a group's
      // share of a ragged block tile may start past the end, reading zeros
      // and writing nothing.
      int64_t block_start = side.start[d];
      const size_t given = rank - r.start.size();
      if (d >= given) {
        for (const auto& [var, coeff] : r.start[d - given].terms)
          if (group_vars_.count(var)) block_start -= coeff * vars_.at(var);
      }
      if (side.start[d] < 0 || block_start >= side.shape[d]) {
        return Error(s, absl::StrCat("dimension ", d, " of %", r.name, " starts at ", side.start[d],
                                     ", the tensor has ", side.shape[d]));
      }
    }
    return side;
  }

  absl::Status CheckIm2col(const Stmt& s, const Storage& src, const Storage& dst) const {
    const Im2col& c = *s.im2col;
    if (!src.arg || dst.arg) return Error(s, "an im2col copy reads a global tensor into a buffer");
    if (src.shape.size() != 4) return Error(s, absl::StrCat("im2col reads a 4-D tensor, %", src.name, " has rank ",
                                                            src.shape.size()));
    if (s.transpose || s.accumulate) return Error(s, "an im2col copy neither transposes nor adds");
    for (int i = 0; i < 2; ++i) {
      if (c.kernel[i] < 1 || c.stride[i] < 1 || c.dilation[i] < 1 || c.out[i] < 1 || c.pad[i] < 0) {
        return Error(s, "im2col's kernel, stride, dilation and out are at least 1, its pad at least 0");
      }
    }
    if (c.groups < 1 || src.shape[1] % c.groups != 0) {
      return Error(s, absl::StrCat(c.groups, " groups do not divide ", src.shape[1], " channels"));
    }
    return absl::OkStatus();
  }

  absl::Status Copy(const Stmt& s) {
    if (s.srcs.size() != 1 || !s.srcs[0].ref) return Error(s, "a copy reads one tile");
    const TileRef& src_ref = *s.srcs[0].ref;
    KILN_ASSIGN_OR_RETURN(Storage * src, Lookup(s, src_ref.name));
    KILN_ASSIGN_OR_RETURN(Storage * dst, Lookup(s, s.dst.name));
    if (src->arg && dst->arg) return Error(s, "a copy between two global tensors has no tile");
    if (dst->arg && dst->arg->role != TileArg::Role::kOut && dst->arg->role != TileArg::Role::kWorkspace) {
      return Error(s, absl::StrCat("copies write only out and workspace arguments; %", dst->name, " is ",
                                   RoleName(dst->arg->role)));
    }
    if (s.im2col) KILN_RETURN_IF_ERROR(CheckIm2col(s, *src, *dst));
    KILN_RETURN_IF_ERROR(CheckShared(s, *dst, s.accumulate));
    // The tile's extents: the local buffer's on the other side (the
    // destination's when both are local); `transpose` swaps the source's last two.
    const bool dst_defines = !dst->arg;
    std::vector<int64_t> ext = dst_defines ? dst->shape : src->shape;
    if (s.transpose) {
      if (ext.size() < 2) return Error(s, "a transposed copy of fewer than 2 dimensions");
      std::swap(ext[ext.size() - 1], ext[ext.size() - 2]);
    }
    const std::vector<int64_t> src_ext = dst_defines ? ext : src->shape;
    const std::vector<int64_t> dst_ext = dst_defines ? dst->shape : ext;
    KILN_ASSIGN_OR_RETURN(Side from, MakeSide(s, src_ref, src_ext, false, s.im2col ? &*s.im2col : nullptr));
    KILN_ASSIGN_OR_RETURN(Side to, MakeSide(s, s.dst, dst_ext, true, nullptr));
    std::vector<int64_t> i(dst_ext.size(), 0), j;
    const size_t n = dst_ext.size();
    do {
      j = i;
      if (s.transpose) std::swap(j[n - 1], j[n - 2]);
      to.Write(i, from.Read(j), s.accumulate);
    } while (Next(i, dst_ext));
    return absl::OkStatus();
  }

  absl::Status Causal(const Stmt& s) {
    KILN_ASSIGN_OR_RETURN(Storage * dst, WholeLocal(s, s.dst));
    const size_t rank = dst->shape.size();
    if (rank < 2 || s.origin.size() != 2) return Error(s, "causal masks a 2-D tile at a row and a key");
    KILN_ASSIGN_OR_RETURN(const int64_t row, Eval(s, s.origin[0]));
    KILN_ASSIGN_OR_RETURN(const int64_t col, Eval(s, s.origin[1]));
    const int64_t rows = dst->shape[rank - 2], cols = dst->shape[rank - 1];
    for (size_t i = 0; i < dst->data.size(); ++i) {
      const int64_t r = static_cast<int64_t>(i) / cols % rows, c = static_cast<int64_t>(i) % cols;
      if (col + c > row + r) dst->data[i] = -std::numeric_limits<double>::infinity();
    }
    return absl::OkStatus();
  }

  absl::Status Fill(const Stmt& s) {
    KILN_ASSIGN_OR_RETURN(Storage * dst, WholeLocal(s, s.dst));
    std::fill(dst->data.begin(), dst->data.end(), RoundTo(dst->dtype, s.value));
    return absl::OkStatus();
  }

  absl::Status Mma(const Stmt& s) {
    if (s.srcs.size() != 2 || !s.srcs[0].ref || !s.srcs[1].ref) return Error(s, "an mma multiplies two tiles");
    KILN_ASSIGN_OR_RETURN(Storage * c, WholeLocal(s, s.dst));
    KILN_ASSIGN_OR_RETURN(Storage * a, WholeLocal(s, *s.srcs[0].ref));
    KILN_ASSIGN_OR_RETURN(Storage * b, WholeLocal(s, *s.srcs[1].ref));
    const auto &cs = c->shape, &as = a->shape, &bs = b->shape;
    if (cs.size() != 2 || as.size() != 2 || bs.size() != 2 || as[0] != cs[0] || bs[1] != cs[1] || as[1] != bs[0]) {
      return Error(s, "mma shapes disagree: A [m, k], B [k, n] and the destination [m, n] expected");
    }
    if (c == a || c == b) return Error(s, "the mma destination is one of its operands");
    KILN_RETURN_IF_ERROR(CheckShared(s, *c, s.accumulate));
    const int64_t m = cs[0], n = cs[1], kd = as[1];
    std::vector<double> sum(n);
    for (int64_t i = 0; i < m; ++i) {
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t k = 0; k < kd; ++k) {
        const double x = a->data[i * kd + k];
        const double* brow = &b->data[k * n];
        for (int64_t j = 0; j < n; ++j) sum[j] += x * brow[j];
      }
      double* crow = &c->data[i * n];
      for (int64_t j = 0; j < n; ++j) crow[j] = RoundTo(c->dtype, s.accumulate ? crow[j] + sum[j] : sum[j]);
    }
    return absl::OkStatus();
  }

  absl::Status EwStep(const Stmt& s) {
    const int arity = EwOpArity(s.ew);
    if (static_cast<int>(s.srcs.size()) != arity) {
      return Error(s, absl::StrCat(EwOpName(s.ew), " takes ", arity, " operands, given ", s.srcs.size()));
    }
    KILN_ASSIGN_OR_RETURN(Storage * dst, WholeLocal(s, s.dst));
    const std::vector<int64_t>& shape = dst->shape;
    const size_t rank = shape.size();
    // Each operand: its data and its strides along the destination's dims (0: broadcast).
    struct In {
      const std::vector<double>* data = nullptr;
      double scalar = 0;
      std::vector<int64_t> strides;
    };
    std::vector<In> ins(s.srcs.size());
    bool reads_dst = false;
    for (size_t o = 0; o < s.srcs.size(); ++o) {
      if (!s.srcs[o].ref) {
        ins[o].scalar = s.srcs[o].scalar;
        continue;
      }
      KILN_ASSIGN_OR_RETURN(Storage * x, WholeLocal(s, *s.srcs[o].ref));
      reads_dst = reads_dst || x == dst;
      if (x->shape.size() > rank) return Error(s, absl::StrCat("%", x->name, " does not broadcast to %", dst->name));
      ins[o].data = &x->data;
      ins[o].strides.assign(rank, 0);
      const size_t lead = rank - x->shape.size();
      for (size_t d = lead; d < rank; ++d) {
        const int64_t e = x->shape[d - lead];
        if (e != shape[d] && e != 1) return Error(s, absl::StrCat("%", x->name, " does not broadcast to %", dst->name));
        if (e != 1) ins[o].strides[d] = x->strides[d - lead];
      }
    }
    KILN_RETURN_IF_ERROR(CheckShared(s, *dst, reads_dst));
    std::vector<double> out(dst->data.size());
    std::vector<int64_t> i(rank, 0);
    double x[3];
    int64_t e = 0;
    do {
      for (size_t o = 0; o < ins.size(); ++o) {
        if (!ins[o].data) {
          x[o] = ins[o].scalar;
          continue;
        }
        int64_t off = 0;
        for (size_t d = 0; d < rank; ++d) off += i[d] * ins[o].strides[d];
        x[o] = (*ins[o].data)[off];
      }
      out[e++] = RoundTo(dst->dtype, Ew(s.ew, x));
    } while (Next(i, shape));
    dst->data = std::move(out);
    return absl::OkStatus();
  }

  absl::Status Reduce(const Stmt& s) {
    if (s.srcs.size() != 1 || !s.srcs[0].ref) return Error(s, "a reduce reads one tile");
    KILN_ASSIGN_OR_RETURN(Storage * dst, WholeLocal(s, s.dst));
    KILN_ASSIGN_OR_RETURN(Storage * src, WholeLocal(s, *s.srcs[0].ref));
    std::vector<int64_t> want = src->shape;
    if (s.axis < 0 || s.axis >= static_cast<int>(want.size())) {
      return Error(s, absl::StrCat("axis ", s.axis, " is no dimension of %", src->name));
    }
    want[s.axis] = 1;
    if (dst->shape != want) {
      return Error(s, absl::StrCat("the destination should be [", absl::StrJoin(want, ","), "]"));
    }
    KILN_RETURN_IF_ERROR(CheckShared(s, *dst, dst == src));
    const int64_t extent = src->shape[s.axis], stride = src->strides[s.axis];
    const int64_t inner = stride, outer = static_cast<int64_t>(src->data.size()) / (extent * inner);
    std::vector<double> out(dst->data.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in = 0; in < inner; ++in) {
        const double* p = &src->data[o * extent * inner + in];
        double acc = s.reduce == ReduceOp::kSum   ? 0.0
                     : s.reduce == ReduceOp::kProd ? 1.0
                     : s.reduce == ReduceOp::kMax  ? -std::numeric_limits<double>::infinity()
                                                   : std::numeric_limits<double>::infinity();
        for (int64_t r = 0; r < extent; ++r) {
          const double v = p[r * stride];
          switch (s.reduce) {
            case ReduceOp::kSum: acc += v; break;
            case ReduceOp::kProd: acc *= v; break;
            // NaN propagates, as in the reference kernels.
            case ReduceOp::kMax: acc = std::isnan(acc) || acc >= v ? acc : v; break;
            case ReduceOp::kMin: acc = std::isnan(acc) || acc <= v ? acc : v; break;
          }
        }
        out[o * inner + in] = RoundTo(dst->dtype, acc);
      }
    }
    dst->data = std::move(out);
    return absl::OkStatus();
  }

  const TileKernel& k_;
  std::map<std::string, std::unique_ptr<Storage>> args_;
  std::vector<Frame> frames_;
  std::map<std::string, int64_t> vars_;
  std::set<std::string> group_vars_;
  int group_depth_ = 0;
};

}  // namespace

absl::Status RunTileKernel(const TileKernel& k, absl::Span<Tensor* const> args) {
  return Interpreter(k).Run(args);
}

}  // namespace kiln::target::tile
