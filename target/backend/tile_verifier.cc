//===- tile_verifier.cc - The rules every tile kernel obeys ---------------===//
//
// The verifier walks the kernel once with the names, loop variables and
// enclosing loops in scope, checking each statement against the rules of
// docs/tile-ir.md; its errors quote the statement's printed form and name
// the rule it breaks.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_ir.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"
#include "target/backend/tile_text.h"

namespace kiln::target::tile {

using internal::AllZero;
using internal::Printer;

namespace {

// What a name in scope stands for.
struct Entity {
  bool is_arg = false;
  const TileArg* arg = nullptr;
  const Stmt* buffer = nullptr;
  size_t depth = 0;  // the loop nesting depth of its declaration (buffers)

  Scope scope() const { return is_arg ? Scope::kGlobal : buffer->scope; }
  const std::vector<int64_t>& shape() const { return is_arg ? arg->shape : buffer->shape; }
  DType dtype() const { return is_arg ? arg->dtype : buffer->dtype; }
};

int64_t ProductOf(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

// Whether data may move from scope `from` to scope `to` on every target.
bool CopyPath(Scope from, Scope to) {
  switch (from) {
    case Scope::kGlobal: return to == Scope::kStage || to == Scope::kVector;
    case Scope::kStage: return to == Scope::kGlobal || to == Scope::kOperandA || to == Scope::kOperandB;
    // vector -> stage: a softmax's probabilities into the matrix engine's
    // staging (directly, or through global memory where a vector unit
    // cannot write the stage scope itself).
    case Scope::kVector: return to == Scope::kGlobal || to == Scope::kStage;
    case Scope::kAccumulator: return to == Scope::kVector || to == Scope::kGlobal;
    default: return false;
  }
}

class Verifier {
 public:
  Verifier(const TileKernel& k, const TileTarget& t) : kernel_(k), target_(t), printer_(k) {}

  absl::Status Run() {
    names_.emplace_back();
    for (const TileArg& a : kernel_.args) {
      if (!names_.back().emplace(a.name, Entity{true, &a, nullptr, 0}).second || !all_names_.insert(a.name).second) {
        return Fail(absl::StrCat("arg %", a.name), "names are unique", "the name is declared twice");
      }
      for (int64_t d : a.shape) {
        if (d < 1) return Fail(absl::StrCat("arg %", a.name), "shapes are positive", "a dimension is below 1");
      }
    }
    KILN_RETURN_IF_ERROR(Block(kernel_.body));
    return absl::OkStatus();
  }

 private:
  struct LoopFrame {
    const Stmt* loop;
    size_t depth;  // its body's nesting depth
  };

  absl::Status Fail(absl::string_view stmt, absl::string_view rule, absl::string_view detail) const {
    return absl::InvalidArgumentError(
        absl::StrCat("tile kernel @", kernel_.name, ": '", stmt, "': rule '", rule, "': ", detail));
  }
  absl::Status Fail(const Stmt& s, absl::string_view rule, absl::string_view detail) const {
    std::string line = printer_.Line(s);
    if (s.kind == Stmt::Kind::kLoop) line.resize(line.size() - 2);  // without " {"
    return Fail(line, rule, detail);
  }

  const Entity* Lookup(const std::string& name) const {
    for (auto it = names_.rbegin(); it != names_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return &found->second;
    }
    return nullptr;
  }
  bool IsGroupVar(const std::string& name) const {
    for (const LoopFrame& f : loops_) {
      if (f.loop->loop != Stmt::LoopKind::kGroup) continue;
      for (const LoopVar& v : f.loop->vars)
        if (v.name == name) return true;
    }
    return false;
  }
  const LoopVar* LookupVar(const std::string& name) const {
    for (const LoopFrame& f : loops_) {
      for (const LoopVar& v : f.loop->vars) {
        if (v.name == name) return &v;
      }
    }
    return nullptr;
  }

  // The least and greatest values of `a` over the loop variables' ranges.
  // With `groups_at_zero`, group loop variables count as 0.
  absl::Status Range(const Stmt& s, const Affine& a, int64_t* lo, int64_t* hi, bool groups_at_zero = false) const {
    *lo = *hi = a.constant;
    for (const auto& [var, coeff] : a.terms) {
      const LoopVar* v = LookupVar(var);
      if (!v) return Fail(s, "loop variables in scope", absl::StrCat("%", var, " is no enclosing loop's variable"));
      if (groups_at_zero && IsGroupVar(var)) continue;
      const int64_t span = coeff * (v->extent - 1);
      (span < 0 ? *lo : *hi) += span;
    }
    return absl::OkStatus();
  }

  // The entity `r` names, with the rules every reference obeys: defined,
  // a start per dimension (a global tensor's leading ones may be left
  // out), loop variables in scope; multi-copy buffers inside their loop.
  absl::StatusOr<const Entity*> Resolve(const Stmt& s, const TileRef& r) {
    const Entity* e = Lookup(r.name);
    if (!e) {
      return Fail(s, "names are defined before use", absl::StrCat("%", r.name, " is no argument or buffer in scope"));
    }
    const size_t rank = e->shape().size();
    if (e->is_arg ? r.start.size() > rank : (r.start.size() != rank && !r.start.empty())) {
      return Fail(s, "references have the rank of what they name",
                  absl::StrCat("%", r.name, " has ", rank, " dimensions, the reference gives ", r.start.size()));
    }
    for (const Affine& a : r.start) {
      int64_t lo, hi;
      KILN_RETURN_IF_ERROR(Range(s, a, &lo, &hi));
    }
    if (!e->is_arg && e->buffer->copies > 1) KILN_RETURN_IF_ERROR(CheckRotation(s, *e));
    return e;
  }

  // A multi-copy buffer is used only inside a pipelined loop of its block
  // with at most that many stages.
  absl::Status CheckRotation(const Stmt& s, const Entity& e) {
    const char* rule = "multi-copy buffers are used inside a pipelined loop of at most that many stages";
    int least = 0;
    for (const LoopFrame& f : loops_) {
      if (f.depth <= e.depth || f.loop->loop != Stmt::LoopKind::kPipelined) continue;
      if (f.loop->stages <= e.buffer->copies) return absl::OkStatus();
      least = least == 0 ? f.loop->stages : std::min(least, f.loop->stages);
    }
    if (least == 0) {
      return Fail(s, rule, absl::StrCat("%", e.buffer->buffer, " has ", e.buffer->copies,
                                        " copies and is used outside a pipelined loop"));
    }
    return Fail(s, rule, absl::StrCat("%", e.buffer->buffer, " has ", e.buffer->copies, " copies, the loop ",
                                      least, " stages"));
  }

  // A local reference that must be its whole buffer.
  absl::StatusOr<const Entity*> WholeLocal(const Stmt& s, const TileRef& r) {
    KILN_ASSIGN_OR_RETURN(const Entity* e, Resolve(s, r));
    if (e->is_arg) {
      return Fail(s, "only copies address global tensors", absl::StrCat("%", r.name, " is a kernel argument"));
    }
    if (!AllZero(r)) {
      return Fail(s, "statements other than copies work on whole buffers",
                  absl::StrCat("the reference to %", r.name, " has nonzero starts"));
    }
    return e;
  }

  absl::Status Block(const tile::Block& block) {
    names_.emplace_back();
    for (const auto& s : block) KILN_RETURN_IF_ERROR(Statement(*s));
    names_.pop_back();
    return absl::OkStatus();
  }

  absl::Status Statement(const Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::kBuffer: return Buffer(s);
      case Stmt::Kind::kLoop: return Loop(s);
      case Stmt::Kind::kCopy: return Copy(s);
      case Stmt::Kind::kFill: return WholeLocal(s, s.dst).status();
      case Stmt::Kind::kMma: return Mma(s);
      case Stmt::Kind::kEw: return Ew(s);
      case Stmt::Kind::kReduce: return Reduce(s);
      case Stmt::Kind::kSync: return absl::OkStatus();
      case Stmt::Kind::kCausal: return Causal(s);
    }
    return absl::OkStatus();
  }

  absl::Status Causal(const Stmt& s) {
    KILN_ASSIGN_OR_RETURN(const Entity* dst, WholeLocal(s, s.dst));
    KILN_RETURN_IF_ERROR(ComputeScope(s, *dst));
    if (dst->shape().size() < 2)
      return Fail(s, "causal masks a tile of scores", absl::StrCat("%", s.dst.name, " has fewer than 2 dimensions"));
    if (s.origin.size() != 2) return Fail(s, "causal gives the tile's row and key", "not two indices");
    for (const Affine& a : s.origin) {
      int64_t lo, hi;
      KILN_RETURN_IF_ERROR(Range(s, a, &lo, &hi));
    }
    return absl::OkStatus();
  }

  absl::Status Buffer(const Stmt& s) {
    if (!all_names_.insert(s.buffer).second) {
      return Fail(s, "names are unique", absl::StrCat("%", s.buffer, " is declared twice"));
    }
    if (s.scope == Scope::kGlobal) {
      return Fail(s, "buffers live in local scopes", "global tensors are kernel arguments");
    }
    if (s.copies < 1) return Fail(s, "buffers have at least one copy", absl::StrCat(s.copies, " copies"));
    for (int64_t d : s.shape) {
      if (d < 1) return Fail(s, "shapes are positive", absl::StrCat("dimension ", d));
    }
    int64_t groups = 1;
    for (const LoopFrame& f : loops_) {
      if (f.loop->loop == Stmt::LoopKind::kGroup) {
        for (const LoopVar& v : f.loop->vars) groups *= v.extent;
      }
    }
    const int64_t total =
        bytes_[s.scope] += ProductOf(s.shape) * static_cast<int64_t>(DTypeSize(s.dtype)) * s.copies * groups;
    auto cap = target_.capacity.find(s.scope);
    if (cap != target_.capacity.end() && cap->second > 0 && total > cap->second) {
      return Fail(s, "buffers fit the target's capacity",
                  absl::StrCat(ScopeName(s.scope), " holds ", total, " bytes with this buffer (", groups,
                               " groups), ", target_.name, " has ", cap->second));
    }
    names_.back()[s.buffer] = Entity{false, nullptr, &s, loops_.size()};
    return absl::OkStatus();
  }

  absl::Status Loop(const Stmt& s) {
    if (s.vars.empty()) return Fail(s, "loops have variables", "none given");
    for (const LoopVar& v : s.vars) {
      if (!all_names_.insert(v.name).second) {
        return Fail(s, "names are unique", absl::StrCat("%", v.name, " is declared twice"));
      }
      if (v.extent < 1) return Fail(s, "loops run at least once", absl::StrCat("%", v.name, " = ", v.extent));
    }
    const bool inside_non_grid = std::any_of(loops_.begin(), loops_.end(), [](const LoopFrame& f) {
      return f.loop->loop != Stmt::LoopKind::kGrid;
    });
    switch (s.loop) {
      case Stmt::LoopKind::kGrid:
        if (inside_non_grid) {
          return Fail(s, "grid loops are outermost", "it is inside a serial, pipelined or group loop");
        }
        break;
      case Stmt::LoopKind::kGroup: {
        if (inside_non_grid) {
          return Fail(s, "group loops nest only in grid loops", "it is inside a serial, pipelined or group loop");
        }
        int64_t groups = 1;
        for (const LoopVar& v : s.vars) groups *= v.extent;
        if (groups > target_.max_group) {
          return Fail(s, "group loops within the target's groups per unit",
                      absl::StrCat(groups, " groups, ", target_.name, " runs at most ", target_.max_group));
        }
        break;
      }
      case Stmt::LoopKind::kPipelined:
        if (s.stages < 1) return Fail(s, "pipelined loops have at least one stage", absl::StrCat(s.stages));
        break;
      case Stmt::LoopKind::kSerial: break;
    }
    loops_.push_back(LoopFrame{&s, loops_.size() + 1});
    absl::Status st = Block(s.body);
    loops_.pop_back();
    return st;
  }

  absl::Status Copy(const Stmt& s) {
    if (s.srcs.size() != 1 || !s.srcs[0].ref) return Fail(s, "copies read one tile", "no source tile");
    const TileRef& src_ref = *s.srcs[0].ref;
    KILN_ASSIGN_OR_RETURN(const Entity* src, Resolve(s, src_ref));
    KILN_ASSIGN_OR_RETURN(const Entity* dst, Resolve(s, s.dst));
    if (!CopyPath(src->scope(), dst->scope())) {
      return Fail(s, "copies follow a path between scopes",
                  absl::StrCat("no path from ", ScopeName(src->scope()), " to ", ScopeName(dst->scope())));
    }
    if (dst->is_arg && (dst->arg->role == TileArg::Role::kIn || dst->arg->role == TileArg::Role::kConst)) {
      return Fail(s, "copies write only out and workspace arguments",
                  absl::StrCat("%", dst->arg->name, " is ", RoleName(dst->arg->role)));
    }
    // The tile's extents at each side: the local buffer on the other side
    // defines them (the destination's when both are local).
    const bool dst_defines = !dst->is_arg;
    std::vector<int64_t> ext = dst_defines ? dst->shape() : src->shape();
    if (s.transpose) {
      if (ext.size() < 2) return Fail(s, "transposed copies are of matrices", "the tile has fewer than 2 dimensions");
      std::swap(ext[ext.size() - 1], ext[ext.size() - 2]);
    }
    const std::vector<int64_t>& src_ext = dst_defines ? ext : src->shape();
    const std::vector<int64_t>& dst_ext = dst_defines ? dst->shape() : ext;
    if (s.im2col) return Im2colCopy(s, *src, *dst);
    KILN_RETURN_IF_ERROR(CheckTile(s, src_ref, *src, src_ext, /*write=*/false));
    return CheckTile(s, s.dst, *dst, dst_ext, /*write=*/true);
  }

  // An im2col copy: a 4-D global tensor read as its virtual im2col tensor
  // into a local buffer.
  absl::Status Im2colCopy(const Stmt& s, const Entity& src, const Entity& dst) {
    const char* rule = "im2col copies read a 4-D global tensor into a local buffer";
    const Im2col& c = *s.im2col;
    if (!src.is_arg || dst.is_arg) return Fail(s, rule, "the source is no global tensor or the destination no buffer");
    if (src.shape().size() != 4) return Fail(s, rule, absl::StrCat("%", src.arg->name, " has rank ", src.shape().size()));
    if (s.transpose || s.accumulate) return Fail(s, rule, "an im2col copy neither transposes nor adds");
    for (int i = 0; i < 2; ++i) {
      if (c.kernel[i] < 1 || c.stride[i] < 1 || c.dilation[i] < 1 || c.out[i] < 1 || c.pad[i] < 0) {
        return Fail(s, "im2col windows are well formed", "kernel, stride, dilation and out at least 1, pad at least 0");
      }
    }
    if (c.groups < 1 || src.shape()[1] % c.groups != 0) {
      return Fail(s, "im2col windows are well formed",
                  absl::StrCat(c.groups, " groups do not divide ", src.shape()[1], " channels"));
    }
    TileArg virt = *src.arg;
    virt.shape = Im2colShape(src.shape(), c);
    Entity v{true, &virt, nullptr, 0};
    return CheckTile(s, *s.srcs[0].ref, v, dst.shape(), /*write=*/false);
  }

  // A tile of extents `ext` at `r` inside what `e` names.
  absl::Status CheckTile(const Stmt& s, const TileRef& r, const Entity& e, const std::vector<int64_t>& ext,
                         bool write) {
    const std::vector<int64_t>& shape = e.shape();
    if (!e.is_arg) {
      if (shape.size() != ext.size()) {
        return Fail(s, "local copies keep the rank",
                    absl::StrCat("%", r.name, " has ", shape.size(), " dimensions, the tile ", ext.size()));
      }
      for (size_t d = 0; d < shape.size(); ++d) {
        int64_t lo = 0, hi = 0;
        if (d < r.start.size()) KILN_RETURN_IF_ERROR(Range(s, r.start[d], &lo, &hi));
        if (lo < 0 || hi + ext[d] > shape[d]) {
          return Fail(s, "local tiles stay inside their buffers",
                      absl::StrCat("dimension ", d, " of %", r.name, " spans ", lo, " .. ", hi + ext[d] - 1,
                                   ", the buffer has ", shape[d]));
        }
      }
      return absl::OkStatus();
    }
    // A global tensor: dimensions align at the end; extra leading tensor
    // dimensions have extent 1, missing ones broadcast (reads only). A
    // written tile wider than a dimension of extent 1 is a ragged edge.
    const size_t rank = shape.size(), lead = rank - r.start.size();
    if (write && rank < ext.size()) {
      return Fail(s, "copies to global tensors do not broadcast",
                  absl::StrCat("%", r.name, " has ", rank, " dimensions, the tile ", ext.size()));
    }
    // The block's tile starts inside (group variables at 0): a group's
    // share of a ragged block tile may lie wholly past the edge.
    for (size_t d = 0; d < rank; ++d) {
      int64_t lo = 0, hi = 0;
      if (d >= lead) KILN_RETURN_IF_ERROR(Range(s, r.start[d - lead], &lo, &hi, /*groups_at_zero=*/true));
      if (lo < 0 || hi >= shape[d]) {
        return Fail(s, "global tiles start inside their tensors",
                    absl::StrCat("dimension ", d, " of %", r.name, " starts at ", lo, " .. ", hi,
                                 ", the tensor has ", shape[d]));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Mma(const Stmt& s) {
    if (s.srcs.size() != 2 || !s.srcs[0].ref || !s.srcs[1].ref) {
      return Fail(s, "mma multiplies two tiles", "two operand tiles expected");
    }
    KILN_ASSIGN_OR_RETURN(const Entity* c, WholeLocal(s, s.dst));
    KILN_ASSIGN_OR_RETURN(const Entity* a, WholeLocal(s, *s.srcs[0].ref));
    KILN_ASSIGN_OR_RETURN(const Entity* b, WholeLocal(s, *s.srcs[1].ref));
    const char* scopes = "mma operands are in their scopes";
    if (c->scope() != Scope::kAccumulator) return Fail(s, scopes, "the destination is not in accumulator scope");
    if (a->scope() != Scope::kOperandA) return Fail(s, scopes, "A is not in operand_a scope");
    if (b->scope() != Scope::kOperandB) return Fail(s, scopes, "B is not in operand_b scope");
    const auto &cs = c->shape(), &as = a->shape(), &bs = b->shape();
    if (cs.size() != 2 || as.size() != 2 || bs.size() != 2 || as[0] != cs[0] || bs[1] != cs[1] || as[1] != bs[0]) {
      return Fail(s, "mma shapes agree", "A [m, k], B [k, n] and the destination [m, n] expected");
    }
    bool shape_ok = false;
    for (const TileMma& m : target_.mma) {
      if (cs[0] % m.m != 0 || cs[1] % m.n != 0 || as[1] % m.k != 0) continue;
      shape_ok = true;
      if (a->dtype() == m.input && b->dtype() == m.input && c->dtype() == m.accumulator) return absl::OkStatus();
    }
    if (!shape_ok) {
      return Fail(s, "mma shapes are in units of the target's mma shapes",
                  absl::StrCat("m ", cs[0], ", n ", cs[1], ", k ", as[1], " fit no mma shape of ", target_.name));
    }
    return Fail(s, "mma dtypes are the target's",
                absl::StrCat(DTypeName(a->dtype()), " x ", DTypeName(b->dtype()), " -> ", DTypeName(c->dtype()),
                             " is no mma of ", target_.name));
  }

  // Whether `from` broadcasts to `to` numpy style.
  static bool Broadcasts(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
    if (from.size() > to.size()) return false;
    for (size_t i = 0; i < from.size(); ++i) {
      const int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
      if (f != t && f != 1) return false;
    }
    return true;
  }

  absl::Status Ew(const Stmt& s) {
    if (static_cast<int>(s.srcs.size()) != EwOpArity(s.ew)) {
      return Fail(s, "ew steps take their op's operands",
                  absl::StrCat(EwOpName(s.ew), " takes ", EwOpArity(s.ew), ", given ", s.srcs.size()));
    }
    KILN_ASSIGN_OR_RETURN(const Entity* dst, WholeLocal(s, s.dst));
    KILN_RETURN_IF_ERROR(ComputeScope(s, *dst));
    for (const tile::Operand& o : s.srcs) {
      if (!o.ref) continue;
      KILN_ASSIGN_OR_RETURN(const Entity* src, WholeLocal(s, *o.ref));
      KILN_RETURN_IF_ERROR(ComputeScope(s, *src));
      if (!Broadcasts(src->shape(), dst->shape())) {
        return Fail(s, "ew operands broadcast to the destination",
                    absl::StrCat("%", o.ref->name, " does not broadcast to %", s.dst.name));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ComputeScope(const Stmt& s, const Entity& e) const {
    if (e.scope() == Scope::kVector || e.scope() == Scope::kAccumulator) return absl::OkStatus();
    return Fail(s, "ew and reduce steps work in vector or accumulator scope",
                absl::StrCat("%", e.buffer->buffer, " is in ", ScopeName(e.scope()), " scope"));
  }

  absl::Status Reduce(const Stmt& s) {
    if (s.srcs.size() != 1 || !s.srcs[0].ref) return Fail(s, "reduce steps read one tile", "no source tile");
    KILN_ASSIGN_OR_RETURN(const Entity* dst, WholeLocal(s, s.dst));
    KILN_ASSIGN_OR_RETURN(const Entity* src, WholeLocal(s, *s.srcs[0].ref));
    KILN_RETURN_IF_ERROR(ComputeScope(s, *dst));
    KILN_RETURN_IF_ERROR(ComputeScope(s, *src));
    std::vector<int64_t> want = src->shape();
    if (s.axis < 0 || s.axis >= static_cast<int>(want.size())) {
      return Fail(s, "reduce axes are dimensions of the source", absl::StrCat("axis ", s.axis));
    }
    want[s.axis] = 1;
    if (dst->shape() != want) {
      return Fail(s, "reduce keeps the reduced dimension with extent 1",
                  absl::StrCat("the destination should be [", absl::StrJoin(want, ","), "]"));
    }
    return absl::OkStatus();
  }

  const TileKernel& kernel_;
  const TileTarget& target_;
  Printer printer_;
  std::vector<std::map<std::string, Entity>> names_;  // per block
  std::set<std::string> all_names_;                   // every name declared so far
  std::vector<LoopFrame> loops_;                      // enclosing loops, outermost first
  std::map<Scope, int64_t> bytes_;                    // per scope, per compute unit
};

}  // namespace

absl::Status Verify(const TileKernel& k, const TileTarget& target) { return Verifier(k, target).Run(); }

}  // namespace kiln::target::tile
