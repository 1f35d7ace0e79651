//===- cuda_gemm_match.cc - A GEMM tile kernel's structure, for its CUDA C++ ===//
#include "target/cuda/codegen/cuda_gemm_match.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "target/backend/tile_lowering.h"

namespace kiln::target::cuda::internal {

using tile::Affine;
using tile::Scope;
using tile::Stmt;
using tile::TileArg;
using tile::TileRef;

namespace {

absl::Status Err(const std::string& what) { return absl::UnimplementedError(what); }

absl::StatusOr<StageLayout> MakeLayout(int64_t lines, int64_t contig, DType dt) {
  StageLayout l;
  l.lines = lines;
  l.contig = contig;
  l.elem = Bytes(dt);
  const int64_t line_bytes = contig * l.elem;
  if (line_bytes % 16 != 0) {
    return Err(absl::StrCat("a stage tile line of ", line_bytes, " bytes is no multiple of 16 (cp.async/ldmatrix chunks)"));
  }
  for (int64_t p : {128, 64, 32, 16}) {
    if (line_bytes % p == 0) {
      l.panel = p;
      break;
    }
  }
  l.bytes = lines * line_bytes;
  l.slot_stride = (l.bytes + 1023) / 1024 * 1024;
  return l;
}

bool AllMultiples(const Affine& a, int64_t m) {
  if (a.constant % m != 0) return false;
  for (const auto& t : a.terms)
    if (t.second % m != 0) return false;
  return true;
}

absl::Status MatchOperand(Gemm& g, Operand& op, const Stmt* stage_copy, bool is_a) {
  op.load = stage_copy;
  const TileRef& src = *stage_copy->srcs[0].ref;
  op.arg = g.names.args.at(src.name);
  op.stage = g.names.buffers.at(stage_copy->dst.name);
  if (op.stage->shape.size() != 2) return Err("stage buffers must be rank 2");
  if (op.arg->shape.size() < 2) return Err(absl::StrCat("matrix operand %", op.arg->name, " has rank < 2"));
  const int64_t rows = op.stage->shape[0], cols = op.stage->shape[1];
  // A's stage tile is [bm, bk], B's [bk, bn]; MN-major when stored with K outermost.
  op.mn_major = is_a ? stage_copy->transpose : !stage_copy->transpose;
  const int64_t lines = stage_copy->transpose ? cols : rows;
  const int64_t contig = stage_copy->transpose ? rows : cols;
  auto layout = MakeLayout(lines, contig, op.stage->dtype);
  if (!layout.ok()) return layout.status();
  op.layout = *layout;
  // The cp.async size: 16, 8 or 4 bytes when every chunk is aligned, else
  // element-wise loads and stores (also when the copy converts dtypes).
  op.copy_bytes = 0;
  if (stage_copy->im2col) {
    // A gathered element at a time: 4-byte cp.async (zero-filled in the
    // padding) where the element has 4 bytes, else loads and stores.
    if (op.arg->dtype == op.stage->dtype && Bytes(op.arg->dtype) == 4) op.copy_bytes = 4;
  } else if (op.arg->dtype == op.stage->dtype) {
    const int64_t es = Bytes(op.arg->dtype);
    const int64_t row = op.arg->shape.back() * es;
    const Affine& cstart = src.start.empty() ? Affine::Const(0) : src.start.back();
    for (int cb : {16, 8, 4}) {
      if (row % cb == 0 && (contig * es) % cb == 0 && AllMultiples(cstart, cb / es > 0 ? cb / es : 1) &&
          cb >= es) {
        op.copy_bytes = cb;
        break;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t MaxOf(const Affine& a, const std::map<std::string, int64_t>& extent) {
  int64_t v = a.constant;
  for (const auto& [var, c] : a.terms) {
    auto it = extent.find(var);
    int64_t e = it == extent.end() ? 1 : it->second;
    if (c > 0) v += c * (e - 1);
  }
  return v;
}

absl::StatusOr<Gemm> Match(const tile::TileKernel& k) {
  Gemm g;
  g.names = Names(k);
  for (const auto& s : k.body) {
    if (s->kind == Stmt::Kind::kLoop && s->loop == Stmt::LoopKind::kGrid && !g.grid) g.grid = s.get();
    else if (s->kind != Stmt::Kind::kBuffer) return Err(absl::StrCat("`", tile::PrintStatement(*s), "` outside the grid loop"));
  }
  if (!g.grid) return Err("a GEMM needs a grid loop at the top of the kernel");
  for (const auto& v : g.grid->vars) g.extent[v.name] = v.extent;
  for (const auto& s : g.grid->body) {
    if (s->kind == Stmt::Kind::kLoop && s->loop == Stmt::LoopKind::kGroup && !g.group) g.group = s.get();
    else if (s->kind != Stmt::Kind::kBuffer) {
      return Err(absl::StrCat("`", tile::PrintStatement(*s), "` in the grid loop outside the group loop"));
    }
  }
  if (!g.group) return Err("a GEMM needs a group loop (the warps) in its grid loop");
  for (const auto& v : g.group->vars) g.extent[v.name] = v.extent;
  bool after_k = false;
  for (const auto& s : g.group->body) {
    if (s->kind == Stmt::Kind::kBuffer) continue;
    if (!after_k && s->kind == Stmt::Kind::kFill) {
      g.fill = s.get();
      continue;
    }
    if (!after_k && s->kind == Stmt::Kind::kLoop &&
        (s->loop == Stmt::LoopKind::kPipelined || s->loop == Stmt::LoopKind::kSerial)) {
      g.kloop = s.get();
      after_k = true;
      continue;
    }
    if (!after_k) return Err(absl::StrCat("`", tile::PrintStatement(*s), "` before the K loop"));
    g.epilogue.push_back(s.get());
  }
  if (!g.kloop || g.kloop->vars.size() != 1) return Err("a GEMM needs one pipelined K loop in its group loop");
  g.extent[g.kloop->vars[0].name] = g.kloop->vars[0].extent;
  g.kt = g.kloop->vars[0].extent;
  g.stages = g.kloop->loop == Stmt::LoopKind::kPipelined ? std::max(1, g.kloop->stages) : 1;

  // The K loop: stage copies, a sync, then the operand copies and the mma
  // (directly or in an inner loop over the stage tile's K steps).
  std::vector<const Stmt*> stage_copies, frag_copies;
  const Stmt* inner = nullptr;
  for (const auto& s : g.kloop->body) {
    if (s->kind == Stmt::Kind::kSync || s->kind == Stmt::Kind::kBuffer) continue;
    if (s->kind == Stmt::Kind::kLoop && !inner) {
      inner = s.get();
      for (const auto& t : s->body) {
        if (t->kind == Stmt::Kind::kSync || t->kind == Stmt::Kind::kBuffer) continue;
        if (IsCopy(*t)) frag_copies.push_back(t.get());
        else if (t->kind == Stmt::Kind::kMma && !g.mma) g.mma = t.get();
        else return Err(absl::StrCat("`", tile::PrintStatement(*t), "` in the operand loop"));
      }
      continue;
    }
    if (IsCopy(*s) && g.names.args.count(s->srcs[0].ref->name)) stage_copies.push_back(s.get());
    else if (IsCopy(*s)) frag_copies.push_back(s.get());
    else if (s->kind == Stmt::Kind::kMma && !g.mma) g.mma = s.get();
    else return Err(absl::StrCat("`", tile::PrintStatement(*s), "` in the K loop"));
  }
  if (!g.mma || g.mma->srcs.size() != 2 || !g.mma->srcs[0].ref || !g.mma->srcs[1].ref) {
    return Err("a GEMM's K loop needs one mma step");
  }
  if (stage_copies.size() != 2 || frag_copies.size() != 2) {
    return Err("a GEMM's K loop copies one A and one B tile to the stage scope and to the operand scopes");
  }
  g.acc = g.names.buffers.at(g.mma->dst.name);
  const std::string aa = g.mma->srcs[0].ref->name, bb = g.mma->srcs[1].ref->name;
  for (const Stmt* f : frag_copies) {
    if (f->dst.name == aa) g.a.frag_copy = f;
    else if (f->dst.name == bb) g.b.frag_copy = f;
  }
  if (!g.a.frag_copy || !g.b.frag_copy) return Err("the mma's operands are not copied from stage tiles");
  for (const Stmt* s : stage_copies) {
    const std::string& dst = s->dst.name;
    if (dst == g.a.frag_copy->srcs[0].ref->name) {
      if (auto st = MatchOperand(g, g.a, s, true); !st.ok()) return st;
    } else if (dst == g.b.frag_copy->srcs[0].ref->name) {
      if (auto st = MatchOperand(g, g.b, s, false); !st.ok()) return st;
    }
  }
  if (!g.a.load || !g.b.load) return Err("the operand tiles do not come from global A and B tiles");
  g.a.operand = g.names.buffers.at(aa);
  g.b.operand = g.names.buffers.at(bb);
  if (g.a.stage->scope != Scope::kStage || g.b.stage->scope != Scope::kStage ||
      g.a.operand->scope != Scope::kOperandA || g.b.operand->scope != Scope::kOperandB ||
      g.acc->scope != Scope::kAccumulator) {
    return Err("mma operands must be operand_a/operand_b tiles copied from stage tiles, into an accumulator");
  }
  g.bm = g.a.stage->shape[0];
  g.bk = g.a.stage->shape[1];
  g.bn = g.b.stage->shape[1];
  if (g.b.stage->shape[0] != g.bk) return Err("the A and B stage tiles disagree on K");
  if (g.acc->shape.size() != 2) return Err("the accumulator must be rank 2");
  g.gm = g.acc->shape[0];
  g.gn = g.acc->shape[1];
  g.in = g.a.stage->dtype;
  if (g.b.stage->dtype != g.in) return Err("A and B stage tiles of different dtypes");
  if (g.in == DType::kF16 || g.in == DType::kBF16) g.kstep = 16;
  else if (g.in == DType::kF32) g.kstep = 8;
  else return Err(absl::StrCat("no TensorCore path for ", DTypeName(g.in), " matrices"));
  if (g.acc->dtype != DType::kF32) return Err("the accumulator must be f32");
  if (g.gm % 16 != 0 || g.gn % 8 != 0 || g.bk % g.kstep != 0) {
    return Err(absl::StrCat("warp tile ", g.gm, "x", g.gn, " and stage depth ", g.bk, " must be multiples of the mma shape 16x8x",
                            g.kstep));
  }
  if (g.bm % g.gm != 0 || g.bn % g.gn != 0) return Err("the warp tiles do not divide the block tile");

  // Warp offsets: the operand copies read %As[%wm*gm, ...] and %Bs[..., %wn*gn].
  auto warp_var = [&](const Stmt* copy, int dim, int64_t tile, std::string* var) -> absl::Status {
    const TileRef& r = *copy->srcs[0].ref;
    if (r.start.size() != 2) return Err("operand copies address rank-2 stage tiles");
    const Affine& a = r.start[dim];
    if (a.constant != 0 || a.terms.size() > 1 || (a.terms.size() == 1 && a.terms[0].second != tile)) {
      return Err(absl::StrCat("operand copy `", tile::PrintStatement(*copy), "` does not start at a multiple of the warp tile"));
    }
    if (a.terms.size() == 1) *var = a.terms[0].first;
    return absl::OkStatus();
  };
  if (auto st = warp_var(g.a.frag_copy, 0, g.gm, &g.wm_var); !st.ok()) return st;
  if (auto st = warp_var(g.b.frag_copy, 1, g.gn, &g.wn_var); !st.ok()) return st;
  g.warps = 1;
  for (const auto& v : g.group->vars) {
    g.warps *= static_cast<int>(v.extent);
    if (v.name != g.wm_var && v.name != g.wn_var) return Err(absl::StrCat("group variable %", v.name, " is no warp offset"));
  }
  if (g.warps * g.gm * g.gn != g.bm * g.bn) return Err("the warps do not cover the block tile");

  // The grid: %m and %n from the output tile's start, %s (split-K) the rest.
  const Stmt* out = nullptr;
  for (const Stmt* s : g.epilogue)
    if (IsCopy(*s) && g.names.args.count(s->dst.name) && !out) out = s;
  if (!out) return Err("a GEMM's epilogue copies a tile to an output");
  std::set<std::string> in_out;
  const auto& ostart = out->dst.start;
  if (ostart.size() < 2) return Err("the output copy must address rows and columns");
  for (size_t d = 0; d < ostart.size(); ++d) {
    for (const auto& [var, c] : ostart[d].terms) {
      (void)c;
      if (!g.extent.count(var)) continue;
      in_out.insert(var);
      bool is_grid = false;
      for (const auto& gv : g.grid->vars) is_grid = is_grid || gv.name == var;
      if (!is_grid) continue;
      if (d == ostart.size() - 2) g.m_var = var;
      else if (d == ostart.size() - 1) g.n_var = var;
    }
  }
  for (const auto& v : g.grid->vars) {
    if (v.name == g.m_var) g.mt = v.extent;
    else if (v.name == g.n_var) g.nt = v.extent;
    else if (in_out.count(v.name)) {
      g.batch_vars.push_back(v);
      g.batch *= v.extent;
    } else if (g.s_var.empty()) {
      g.s_var = v.name;
      g.splits = v.extent;
    } else {
      return Err(absl::StrCat("grid variable %", v.name, " is neither a tile, a batch index nor the split-K slice"));
    }
  }
  if (g.batch > 65535 || g.splits > 65535) return Err("more than 65535 batch items or split-K slices");
  return g;
}

}  // namespace kiln::target::cuda::internal
