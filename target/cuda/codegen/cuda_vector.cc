//===- cuda_vector.cc - Elementwise and row-reduction tile kernels to CUDA -===//
//
// Elementwise form: the loops of the kernel and the shape of its vector
// buffers make one iteration space (every loop variable times the buffer
// tile); the kernel is a grid-stride loop over it, each thread taking V
// consecutive elements of a row (V * 4 or V * 2 bytes = 16 bytes where
// every tensor's rows allow), with 128-bit loads and stores when the V
// elements lie inside every tensor and element-wise guarded accesses at
// the ragged edges. Operands that broadcast along the row are loaded once.
//
// Row-reduction form: one warp per row (rows up to 1024 elements, 4 rows
// per block) or one block per row (longer rows); each thread holds its
// share of every whole-row buffer in registers (V-element chunks strided
// by the row's thread count), reduce steps combine the thread's share and
// then the warp with shuffles (and the block through shared memory), and
// every ew step runs on the registers.
//
//===----------------------------------------------------------------------===//
#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "target/cuda/codegen/codegen_util.h"

namespace kiln::target::cuda::internal {
namespace {

using tile::Affine;
using tile::Stmt;
using tile::TileArg;
using tile::TileRef;

absl::Status Err(const std::string& what) { return absl::UnimplementedError(what); }

// A loop nest down to one block of straight-line statements.
struct Nest {
  Names names;
  std::vector<tile::LoopVar> vars;  // outermost first
  std::vector<const Stmt*> stmts;   // the innermost block, buffers included
  int64_t iterations = 1;
  int64_t rows = 1, cols = 1;       // the buffer tile shape (broadcast of all buffers)
};

absl::StatusOr<Nest> MatchNest(const tile::TileKernel& k) {
  Nest n;
  n.names = Names(k);
  const tile::Block* b = &k.body;
  while (true) {
    const Stmt* loop = nullptr;
    for (const auto& s : *b) {
      if (s->kind == Stmt::Kind::kLoop) {
        if (loop) return Err("more than one loop at one level");
        loop = s.get();
      }
    }
    if (!loop) break;
    for (const auto& s : *b) {
      if (s.get() != loop && s->kind != Stmt::Kind::kBuffer) {
        return Err(absl::StrCat("`", tile::PrintStatement(*s), "` outside the innermost loop"));
      }
    }
    for (const auto& v : loop->vars) {
      n.vars.push_back(v);
      n.iterations *= v.extent;
    }
    b = &loop->body;
  }
  for (const auto& s : *b) {
    if (s->kind == Stmt::Kind::kSync) continue;
    n.stmts.push_back(s.get());
  }
  int64_t rows = 1, cols = 1;
  for (const auto& [name, buf] : n.names.buffers) {
    (void)name;
    if (buf->shape.size() > 2) return Err(absl::StrCat("buffer %", buf->buffer, " has rank > 2"));
    if (buf->copies != 1) return Err(absl::StrCat("buffer %", buf->buffer, " is multi-copy"));
    const int64_t r = buf->shape.size() == 2 ? buf->shape[0] : 1;
    const int64_t c = buf->shape.empty() ? 1 : buf->shape.back();
    rows = std::max(rows, r);
    cols = std::max(cols, c);
  }
  n.rows = rows;
  n.cols = cols;
  return n;
}

// The index of a buffer of `shape` at iteration position (i, j).
std::vector<std::string> BufIndex(const std::vector<int64_t>& shape, const std::string& i, const std::string& j) {
  if (shape.size() == 1) return {shape[0] == 1 ? "0" : j};
  return {shape[0] == 1 ? "0" : i, shape[1] == 1 ? "0" : j};
}

// Decodes a flat iteration index `rest` (a long long variable) into the
// loop variables, innermost first.
std::string DecodeLoops(const Nest& n, const std::string& indent) {
  std::string s;
  for (int v = static_cast<int>(n.vars.size()) - 1; v >= 0; --v) {
    absl::StrAppend(&s, indent, "const int ", Ident(n.vars[v].name), " = static_cast<int>(rest % ", n.vars[v].extent,
                    "); rest /= ", n.vars[v].extent, ";\n", indent, "(void)", Ident(n.vars[v].name), ";\n");
  }
  return s;
}

std::string Shape(const std::vector<int64_t>& v) { return absl::StrJoin(v, "x"); }

std::string ArgsLine(const tile::TileKernel& k) {
  std::vector<std::string> a;
  for (const auto& arg : k.args) {
    a.push_back(absl::StrCat("%", arg.name, " ", DTypeName(arg.dtype), "[", Shape(arg.shape), "] ", RoleName(arg.role)));
  }
  return absl::StrJoin(a, ", ");
}

}  // namespace

absl::StatusOr<CudaKernel> EmitElementwise(const tile::TileKernel& k) {
  auto nm = MatchNest(k);
  if (!nm.ok()) return nm.status();
  const Nest& n = *nm;
  for (const Stmt* s : n.stmts) {
    if (s->kind == Stmt::Kind::kMma || s->kind == Stmt::Kind::kReduce) return Err("not an elementwise kernel");
  }
  std::vector<bool> used(k.args.size(), false);
  MarkUsed(k.body, n.names, &used);
  auto params = ParamList(k, used);
  if (!params.ok()) return params.status();

  // The vector width: 16 bytes of the widest tensor, if every tensor a copy
  // touches is contiguous (or broadcast) along the row and aligned.
  int64_t widest = 1;
  std::vector<const Stmt*> copies;
  std::map<std::string, bool> live;  // buffers some step reads
  for (const Stmt* s : n.stmts)
    for (const auto& o : s->srcs)
      if (o.ref) live[o.ref->name] = true;
  for (const Stmt* s : n.stmts) {
    if (!IsCopy(*s)) continue;
    if (!n.names.args.count(s->dst.name) && !live[s->dst.name]) continue;  // a dead load
    copies.push_back(s);
    const std::string& g = n.names.args.count(s->dst.name) ? s->dst.name : s->srcs[0].ref->name;
    if (n.names.args.count(g)) widest = std::max<int64_t>(widest, Bytes(n.names.args.at(g)->dtype));
  }
  int64_t V = std::max<int64_t>(1, std::min<int64_t>(8, 16 / widest));
  auto global_of = [&](const Stmt& c, const TileRef** ref, const Stmt** buf) -> const TileArg* {
    if (n.names.args.count(c.dst.name)) {
      *ref = &c.dst;
      *buf = n.names.buffers.count(c.srcs[0].ref->name) ? n.names.buffers.at(c.srcs[0].ref->name) : nullptr;
      return n.names.args.at(c.dst.name);
    }
    if (n.names.args.count(c.srcs[0].ref->name)) {
      *ref = &*c.srcs[0].ref;
      *buf = n.names.buffers.count(c.dst.name) ? n.names.buffers.at(c.dst.name) : nullptr;
      return n.names.args.at(c.srcs[0].ref->name);
    }
    return nullptr;
  };
  for (; V > 1; V /= 2) {
    bool ok = n.cols % V == 0;
    for (const Stmt* c : copies) {
      const TileRef* ref = nullptr;
      const Stmt* buf = nullptr;
      const TileArg* a = global_of(*c, &ref, &buf);
      if (!a || !buf) continue;
      if (c->transpose) ok = false;
      GlobalIndex gi = IndexGlobal(*a, *ref, BufIndex(buf->shape, "i", "j"), buf->shape, false);
      if (gi.inner_stride == 0) continue;
      const Affine& last = ref->start.empty() ? Affine::Const(0) : ref->start.back();
      bool aligned = gi.inner_stride == 1 && a->shape.back() % V == 0 && last.constant % V == 0;
      for (const auto& t : last.terms) aligned = aligned && t.second % V == 0;
      ok = ok && aligned;
    }
    if (ok) break;
  }

  const int threads = 256;
  const int64_t total = n.iterations * n.rows * n.cols;
  const int64_t vectors = total / V;
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((vectors + threads - 1) / threads, 8192));
  CudaKernel out;
  out.name = Ident(k.name);
  const std::string fn = out.name;

  std::string s;
  std::vector<std::string> ops;
  for (const Stmt* st : n.stmts)
    if (st->kind == Stmt::Kind::kEw) ops.push_back(std::string(tile::EwOpName(st->ew)));
  absl::StrAppend(&s, "// ", std::string(76, '-'), "\n// @", k.name, ": elementwise ", absl::StrJoin(ops, ", "), "\n");
  absl::StrAppend(&s, "//   ", ArgsLine(k), "\n");
  absl::StrAppend(&s, "//   ", total, " elements (", n.iterations, " tiles of ", n.rows, "x", n.cols, "), ", V,
                  " per thread step", V > 1 ? " (128-bit accesses where the whole vector is inside every tensor)" : "",
                  ", grid-stride over ", blocks, " blocks of ", threads, "\n");
  if (!k.plan.empty()) absl::StrAppend(&s, "//   plan: ", k.plan, "\n");
  absl::StrAppend(&s, "// ", std::string(76, '-'), "\n");
  absl::StrAppend(&s, "extern \"C\" __global__ void __launch_bounds__(", threads, ") ", fn, "(", *params, ") {\n");
  absl::StrAppend(&s, "  constexpr long long kVectors = ", vectors, "LL;  // steps of ", V, " elements\n");
  absl::StrAppend(&s, "  for (long long q = blockIdx.x * ", threads, "LL + threadIdx.x; q < kVectors; q += gridDim.x * ", threads,
                  "LL) {\n");
  absl::StrAppend(&s, "    const long long e0 = q * ", V, ";\n", "    const int j0 = static_cast<int>(e0 % ", n.cols,
                  ");\n    long long rest = e0 / ", n.cols, ";\n", "    const int i = static_cast<int>(rest % ", n.rows,
                  "); rest /= ", n.rows, ";\n    (void)i;\n");
  absl::StrAppend(&s, DecodeLoops(n, "    "));

  ElementProgram plain;
  plain.names = &n.names;
  plain.index = {"i", "j"};
  plain.shape = {n.rows, n.cols};
  auto body = EmitElementProgram(plain, n.stmts, "        ");
  if (!body.ok()) return body.status();

  if (V > 1) {
    // The fast path: every vector inside every tensor.
    std::vector<std::string> conds;
    std::string pre, post;
    std::map<int, std::string> load_name, store_name;
    std::map<std::string, bool> read;
    for (const Stmt* st : n.stmts)
      for (const auto& o : st->srcs)
        if (o.ref) read[o.ref->name] = true;
    for (size_t si = 0; si < n.stmts.size(); ++si) {
      const Stmt& c = *n.stmts[si];
      if (!IsCopy(c)) continue;
      if (!n.names.args.count(c.dst.name) && !read[c.dst.name]) continue;  // a dead load
      const TileRef* ref = nullptr;
      const Stmt* buf = nullptr;
      const TileArg* a = global_of(c, &ref, &buf);
      if (!a || !buf) continue;
      const std::string ct = *CType(a->dtype);
      GlobalIndex last = IndexGlobal(*a, *ref, BufIndex(buf->shape, "i", absl::StrCat("(j0 + ", V - 1, ")")), buf->shape, false);
      GlobalIndex first = IndexGlobal(*a, *ref, BufIndex(buf->shape, "i", "j0"), buf->shape, false);
      if (last.valid != "true") conds.push_back(absl::StrCat("(", last.valid, ")"));
      const bool is_load = n.names.args.count(c.srcs[0].ref->name) > 0;
      const std::string var = absl::StrCat(is_load ? "in" : "out", si, "_", Ident(a->name));
      if (is_load) {
        load_name[static_cast<int>(si)] = first.inner_stride == 0 ? var : absl::StrCat(var, "[e]");
        if (first.inner_stride == 0) {
          absl::StrAppend(&pre, "      const float ", var, " = kiln::to_f32(", Ident(a->name), "[", first.offset, "]);\n");
        } else {
          absl::StrAppend(&pre, "      float ", var, "[", V, "];\n      kiln::load_vec<", ct, ", ", V, ">(", Ident(a->name),
                          " + ", first.offset, ", ", var, ");\n");
        }
      } else {
        if (first.inner_stride != 1 || c.accumulate) {
          conds.push_back("false");  // no vector store form
          continue;
        }
        store_name[static_cast<int>(si)] = var;
        absl::StrAppend(&pre, "      float ", var, "[", V, "];\n");
        absl::StrAppend(&post, "      kiln::store_vec<", ct, ", ", V, ">(", Ident(a->name), " + ", first.offset, ", ", var,
                        ");\n");
      }
    }
    ElementProgram fast = plain;
    fast.load = [&](const Stmt&, int idx) {
      auto it = load_name.find(idx);
      return it == load_name.end() ? std::string() : it->second;
    };
    fast.store = [&](const Stmt&, int idx, const std::string& v) {
      auto it = store_name.find(idx);
      return it == store_name.end() ? std::string() : absl::StrCat(it->second, "[e] = ", v, ";");
    };
    auto fbody = EmitElementProgram(fast, n.stmts, "        ");
    if (!fbody.ok()) return fbody.status();
    absl::StrAppend(&s, "    if (", conds.empty() ? "true" : absl::StrJoin(conds, " && "), ") {\n", pre);
    absl::StrAppend(&s, "#pragma unroll\n      for (int e = 0; e < ", V, "; ++e) {\n        const int j = j0 + e;\n        (void)j;\n",
                    *fbody, "      }\n", post, "      continue;\n    }\n");
  }
  absl::StrAppend(&s, "    // Element by element, guarded (ragged edges).\n");
  absl::StrAppend(&s, "    for (int e = 0; e < ", V, "; ++e) {\n      {\n        const int j = j0 + e;\n        (void)j;\n", *body,
                  "      }\n    }\n  }\n}\n\n");
  out.source = s;
  out.variants.push_back(CudaVariant{fn, 80, {blocks, 1, 1}, threads, 0});
  out.plan = absl::StrCat("cuda elementwise, ", V, " elements per thread step, ", blocks, "x", threads, " threads");
  return out;
}

absl::StatusOr<CudaKernel> EmitRowReduction(const tile::TileKernel& k) {
  auto nm = MatchNest(k);
  if (!nm.ok()) return nm.status();
  const Nest& n = *nm;
  std::vector<bool> used(k.args.size(), false);
  MarkUsed(k.body, n.names, &used);
  auto params = ParamList(k, used);
  if (!params.ok()) return params.status();
  const int64_t C = n.cols, R = n.rows;
  // Buffer classes: whole rows (last dim C) or one value per row (last dim 1).
  auto is_row = [&](const std::string& name) {
    const Stmt* b = n.names.buffers.at(name);
    return !b->shape.empty() && b->shape.back() == C && C > 1;
  };
  for (const Stmt* s : n.stmts) {
    if (s->kind == Stmt::Kind::kReduce) {
      const Stmt* src = n.names.buffers.count(s->srcs[0].ref->name) ? n.names.buffers.at(s->srcs[0].ref->name) : nullptr;
      if (!src || static_cast<int>(src->shape.size()) - 1 != s->axis) {
        return Err(absl::StrCat("`", tile::PrintStatement(*s), "` does not reduce the last axis of a local buffer"));
      }
    }
    if (s->kind == Stmt::Kind::kMma) return Err("an mma step in a row reduction");
  }

  // Vector width and threads per row.
  int64_t V = C % 4 == 0 ? 4 : 1;
  for (const Stmt* s : n.stmts) {
    if (!IsCopy(*s)) continue;
    const bool load = n.names.args.count(s->srcs[0].ref->name) > 0;
    const std::string bname = load ? s->dst.name : s->srcs[0].ref->name;
    const std::string gname = load ? s->srcs[0].ref->name : s->dst.name;
    if (!n.names.args.count(gname) || !is_row(bname)) continue;
    const TileArg& a = *n.names.args.at(gname);
    const TileRef& ref = load ? *s->srcs[0].ref : s->dst;
    const Stmt* buf = n.names.buffers.at(bname);
    GlobalIndex gi = IndexGlobal(a, ref, BufIndex(buf->shape, "i", "j"), buf->shape, s->transpose);
    const Affine& last = ref.start.empty() ? Affine::Const(0) : ref.start.back();
    bool ok = !s->transpose && gi.inner_stride == 1 && a.shape.back() % 4 == 0 && last.constant % 4 == 0;
    for (const auto& t : last.terms) ok = ok && t.second % 4 == 0;
    if (!ok) V = 1;
  }
  const int64_t chunks = (C + V - 1) / V;
  int64_t T = 32;
  if (chunks > 32 * 8) {
    T = 64;
    while (T < 1024 && T * 8 < chunks) T *= 2;
  }
  const int64_t EC = (chunks + T - 1) / T;
  if (EC * V > 64) return Err(absl::StrCat("rows of ", C, " elements do not fit one block's registers"));
  const bool warp_rows = T == 32;
  const int64_t rows_per_block = warp_rows ? 4 : 1;
  const int64_t threads = warp_rows ? 128 : T;
  const int64_t total_rows = n.iterations * R;
  const int64_t blocks = (total_rows + rows_per_block - 1) / rows_per_block;

  CudaKernel out;
  out.name = Ident(k.name);
  const std::string fn = out.name;
  std::string s;
  std::vector<std::string> ops;
  for (const Stmt* st : n.stmts) {
    if (st->kind == Stmt::Kind::kEw) ops.push_back(std::string(tile::EwOpName(st->ew)));
    if (st->kind == Stmt::Kind::kReduce) ops.push_back(absl::StrCat("reduce ", tile::ReduceOpName(st->reduce)));
  }
  absl::StrAppend(&s, "// ", std::string(76, '-'), "\n// @", k.name, ": row reduction (", absl::StrJoin(ops, ", "), ")\n");
  absl::StrAppend(&s, "//   ", ArgsLine(k), "\n");
  absl::StrAppend(&s, "//   ", total_rows, " rows of ", C, " elements; ",
                  warp_rows ? "one warp per row (4 rows per block)" : absl::StrCat("one block of ", T, " threads per row"),
                  "; each thread holds ", EC, " chunk(s) of ", V,
                  " elements of every row buffer in registers; reductions by warp shuffles",
                  warp_rows ? "" : " and shared memory", "\n");
  if (!k.plan.empty()) absl::StrAppend(&s, "//   plan: ", k.plan, "\n");
  absl::StrAppend(&s, "// ", std::string(76, '-'), "\n");
  absl::StrAppend(&s, "extern \"C\" __global__ void __launch_bounds__(", threads, ") ", fn, "(", *params, ") {\n");
  absl::StrAppend(&s, "  constexpr int kCols = ", C, ", kThreads = ", T, ", kChunks = ", EC, ", kVec = ", V, ";\n");
  if (warp_rows) {
    absl::StrAppend(&s, "  const long long row = blockIdx.x * 4LL + threadIdx.x / 32;\n",
                    "  if (row >= ", total_rows, "LL) return;  // the whole warp leaves\n",
                    "  const int tid = threadIdx.x % 32;\n");
  } else {
    absl::StrAppend(&s, "  __shared__ float scratch[32];\n  (void)scratch;\n  const long long row = blockIdx.x;\n",
                    "  const int tid = threadIdx.x;\n");
  }
  absl::StrAppend(&s, "  long long rest = row;\n  const int i = static_cast<int>(rest % ", R, "); rest /= ", R, ";\n  (void)i;\n");
  absl::StrAppend(&s, DecodeLoops(n, "  "));
  absl::StrAppend(&s, "  // Element (c, v) of a thread's share is column (tid + c * kThreads) * kVec + v.\n");

  auto scalar_of = [&](const tile::Operand& o, bool row_ctx) -> absl::StatusOr<std::string> {
    if (!o.ref) return FloatLit(o.scalar);
    if (!n.names.buffers.count(o.ref->name)) return Err(absl::StrCat("%", o.ref->name, " is no local buffer"));
    if (is_row(o.ref->name)) {
      if (!row_ctx) return Err(absl::StrCat("row buffer %", o.ref->name, " used where one value per row is expected"));
      return absl::StrCat("v_", Ident(o.ref->name), "[c][v]");
    }
    return absl::StrCat("v_", Ident(o.ref->name));
  };
  auto round = [&](const std::string& buf, const std::string& e) {
    const Stmt* b = n.names.buffers.at(buf);
    return b->dtype == DType::kF32 ? e : absl::StrCat("kiln::round_to<", *CType(b->dtype), ">(", e, ")");
  };
  const std::string loop_cv = "#pragma unroll\n  for (int c = 0; c < kChunks; ++c)\n#pragma unroll\n    for (int v = 0; v < kVec; ++v) {\n      const int j = (tid + c * kThreads) * kVec + v;\n      (void)j;\n";
  std::map<std::string, bool> declared;
  auto declare = [&](const std::string& name) {
    if (declared[name]) return;
    declared[name] = true;
    absl::StrAppend(&s, "  float v_", Ident(name), is_row(name) ? "[kChunks][kVec]" : "", ";\n");
  };
  for (const Stmt* st : n.stmts) {
    if (st->kind == Stmt::Kind::kBuffer) continue;
    absl::StrAppend(&s, "  // ", tile::PrintStatement(*st), "\n");
    if (st->kind == Stmt::Kind::kFill) {
      declare(st->dst.name);
      if (is_row(st->dst.name)) absl::StrAppend(&s, loop_cv, "      v_", Ident(st->dst.name), "[c][v] = ", FloatLit(st->value), ";\n    }\n");
      else absl::StrAppend(&s, "  v_", Ident(st->dst.name), " = ", FloatLit(st->value), ";\n");
      continue;
    }
    if (st->kind == Stmt::Kind::kEw) {
      const bool row = is_row(st->dst.name);
      std::vector<std::string> x;
      for (const auto& o : st->srcs) {
        auto v = scalar_of(o, row);
        if (!v.ok()) return v.status();
        x.push_back(*v);
      }
      auto e = EwExpr(st->ew, x);
      if (!e.ok()) return e.status();
      declare(st->dst.name);
      if (row) absl::StrAppend(&s, loop_cv, "      v_", Ident(st->dst.name), "[c][v] = ", round(st->dst.name, *e), ";\n    }\n");
      else absl::StrAppend(&s, "  v_", Ident(st->dst.name), " = ", round(st->dst.name, *e), ";\n");
      continue;
    }
    if (st->kind == Stmt::Kind::kReduce) {
      const std::string src = st->srcs[0].ref->name;
      if (!is_row(src) || is_row(st->dst.name)) return Err(absl::StrCat("`", tile::PrintStatement(*st), "` is no row reduction"));
      const char* op = ReduceCombiner(st->reduce);
      const char* id = ReduceIdentity(st->reduce);
      declare(st->dst.name);
      absl::StrAppend(&s, "  {\n    float part = ", id, ";\n");
      std::string lp = loop_cv;
      absl::StrAppend(&s, lp, "      if (j < kCols) part = ", op, "::apply(part, v_", Ident(src), "[c][v]);\n    }\n");
      if (warp_rows) absl::StrAppend(&s, "    v_", Ident(st->dst.name), " = ", round(st->dst.name, absl::StrCat("kiln::warp_allreduce<", op, ">(part)")), ";\n  }\n");
      else
        absl::StrAppend(&s, "    v_", Ident(st->dst.name), " = ",
                        round(st->dst.name, absl::StrCat("kiln::block_allreduce<", op, ", ", T / 32, ">(part, scratch)")),
                        ";\n  }\n");
      continue;
    }
    if (IsCopy(*st)) {
      const TileRef& src = *st->srcs[0].ref;
      const bool load = n.names.args.count(src.name) > 0;
      const bool store = n.names.args.count(st->dst.name) > 0;
      if (load == store) {
        if (!load) {  // local -> local
          declare(st->dst.name);
          auto v = scalar_of(st->srcs[0], is_row(st->dst.name));
          if (!v.ok()) return v.status();
          if (is_row(st->dst.name)) absl::StrAppend(&s, loop_cv, "      v_", Ident(st->dst.name), "[c][v] = ", *v, ";\n    }\n");
          else absl::StrAppend(&s, "  v_", Ident(st->dst.name), " = ", *v, ";\n");
          continue;
        }
        return Err(absl::StrCat("`", tile::PrintStatement(*st), "` copies global to global"));
      }
      const std::string bname = load ? st->dst.name : src.name;
      const TileArg& a = *n.names.args.at(load ? src.name : st->dst.name);
      const TileRef& ref = load ? src : st->dst;
      const Stmt* buf = n.names.buffers.at(bname);
      const std::string ct = *CType(a.dtype);
      const std::string g = Ident(a.name);
      if (is_row(bname)) {
        GlobalIndex ge = IndexGlobal(a, ref, BufIndex(buf->shape, "i", "j"), buf->shape, st->transpose);
        if (load) declare(bname);
        if (V > 1) {
          GlobalIndex g0 = IndexGlobal(a, ref, BufIndex(buf->shape, "i", "j0"), buf->shape, false);
          GlobalIndex gl = IndexGlobal(a, ref, BufIndex(buf->shape, "i", "(j0 + kVec - 1)"), buf->shape, false);
          absl::StrAppend(&s, "#pragma unroll\n  for (int c = 0; c < kChunks; ++c) {\n    const int j0 = (tid + c * kThreads) * kVec;\n");
          absl::StrAppend(&s, "    if (j0 + kVec <= kCols && ", gl.valid, ") {\n");
          if (load) absl::StrAppend(&s, "      kiln::load_vec<", ct, ", kVec>(", g, " + ", g0.offset, ", v_", Ident(bname), "[c]);\n");
          else if (st->accumulate) absl::StrAppend(&s, "      for (int v = 0; v < kVec; ++v) ", g, "[", g0.offset, " + v] = kiln::from_f32<", ct, ">(kiln::to_f32(", g, "[", g0.offset, " + v]) + v_", Ident(bname), "[c][v]);\n");
          else absl::StrAppend(&s, "      kiln::store_vec<", ct, ", kVec>(", g, " + ", g0.offset, ", v_", Ident(bname), "[c]);\n");
          absl::StrAppend(&s, "    } else {\n#pragma unroll\n      for (int v = 0; v < kVec; ++v) {\n        const int j = j0 + v;\n");
        } else {
          absl::StrAppend(&s, "#pragma unroll\n  for (int c = 0; c < kChunks; ++c) {\n    {\n      {\n        const int v = 0;\n        const int j = tid + c * kThreads;\n");
        }
        const std::string inside = absl::StrCat("j < kCols && ", ge.valid);
        if (load) {
          absl::StrAppend(&s, "        v_", Ident(bname), "[c][v] = ", round(bname, absl::StrCat("(", inside, ") ? kiln::to_f32(", g, "[", ge.offset, "]) : 0.f")), ";\n");
        } else if (st->accumulate) {
          absl::StrAppend(&s, "        if (", inside, ") ", g, "[", ge.offset, "] = kiln::from_f32<", ct, ">(kiln::to_f32(", g, "[", ge.offset, "]) + v_", Ident(bname), "[c][v]);\n");
        } else {
          absl::StrAppend(&s, "        if (", inside, ") ", g, "[", ge.offset, "] = kiln::from_f32<", ct, ">(v_", Ident(bname), "[c][v]);\n");
        }
        absl::StrAppend(&s, "      }\n    }\n  }\n");
      } else {
        GlobalIndex gi = IndexGlobal(a, ref, BufIndex(buf->shape, "i", "0"), buf->shape, st->transpose);
        if (load) {
          declare(bname);
          absl::StrAppend(&s, "  v_", Ident(bname), " = ", round(bname, absl::StrCat("(", gi.valid, ") ? kiln::to_f32(", g, "[", gi.offset, "]) : 0.f")), ";\n");
        } else {
          absl::StrAppend(&s, "  if (tid == 0 && (", gi.valid, ")) ", g, "[", gi.offset, "] = kiln::from_f32<", ct, ">(",
                          st->accumulate ? absl::StrCat("kiln::to_f32(", g, "[", gi.offset, "]) + ") : "", "v_", Ident(bname), ");\n");
        }
      }
      continue;
    }
    return Err(absl::StrCat("`", tile::PrintStatement(*st), "` has no CUDA form in a row reduction"));
  }
  absl::StrAppend(&s, "}\n\n");
  out.source = s;
  out.variants.push_back(CudaVariant{fn, 80, {blocks, 1, 1}, threads, 0});
  out.plan = absl::StrCat("cuda row reduction, ", warp_rows ? "a warp" : absl::StrCat("a block of ", T), " per row, ", V,
                          "-element chunks");
  return out;
}

}  // namespace kiln::target::cuda::internal
