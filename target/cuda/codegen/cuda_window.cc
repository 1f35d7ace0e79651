//===- cuda_window.cc - Window tile kernels (pooling, depthwise) to CUDA ---===//
//
// The window form of the shared lowering (target/backend/tile_window_lowering.cc): a grid over tiles of bc channels x
// bp output positions; an im2col copy gathers each position's window
// [bc, KH*KW, bp] into a vector buffer, optional steps weight it (a
// depthwise convolution's [bc, KH*KW, 1] weights), one reduce step folds
// the window axis, and an epilogue of elementwise steps and copies writes
// the result. On the GPU one thread computes one output element: it walks
// the window, gathering each element straight from global memory (the
// padding reads the copy's fill value), folds it into a register, then
// runs the epilogue and stores, guarded at the ragged edges.
//
//===----------------------------------------------------------------------===//
#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "target/cuda/codegen/codegen_util.h"

namespace kiln::target::cuda::internal {
namespace {

using tile::Stmt;
using tile::TileArg;

absl::Status Err(const std::string& what) { return absl::UnimplementedError(what); }

}  // namespace

absl::StatusOr<CudaKernel> EmitWindow(const tile::TileKernel& k) {
  Names names(k);
  const Stmt* grid = nullptr;
  for (const auto& s : k.body) {
    if (s->kind == Stmt::Kind::kLoop && s->loop == Stmt::LoopKind::kGrid && !grid) grid = s.get();
    else if (s->kind != Stmt::Kind::kBuffer) return Err(absl::StrCat("`", tile::PrintStatement(*s), "` outside the grid loop"));
  }
  if (!grid) return Err("a window kernel needs a grid loop");
  // The body: the window copy and steps on the window (`pre`), one reduce,
  // the epilogue (`post`).
  std::vector<const Stmt*> pre, post;
  const Stmt *gather = nullptr, *reduce = nullptr;
  for (const auto& s : grid->body) {
    if (s->kind == Stmt::Kind::kBuffer || s->kind == Stmt::Kind::kSync) continue;
    if (s->kind == Stmt::Kind::kLoop) return Err("a loop inside a window kernel's grid");
    if (s->kind == Stmt::Kind::kCopy && s->im2col) {
      if (gather || reduce) return Err("a window kernel gathers one window, before its reduction");
      gather = s.get();
      pre.push_back(s.get());
    } else if (s->kind == Stmt::Kind::kReduce) {
      if (reduce || !gather) return Err("a window kernel reduces its window once, after gathering it");
      reduce = s.get();
    } else {
      (reduce ? post : pre).push_back(s.get());
    }
  }
  if (!gather || !reduce) return Err("a window kernel gathers a window and reduces it");
  const Stmt* win = names.buffers.count(gather->dst.name) ? names.buffers.at(gather->dst.name) : nullptr;
  if (!win || win->shape.size() != 3 || reduce->axis != 1 || !reduce->srcs[0].ref ||
      reduce->srcs[0].ref->name != win->buffer) {
    return Err("a window kernel reduces axis 1 of its [channels, window, positions] buffer");
  }
  const Stmt* acc = names.buffers.count(reduce->dst.name) ? names.buffers.at(reduce->dst.name) : nullptr;
  if (!acc) return Err("the reduction's destination is no buffer");
  for (const Stmt* s : pre) {
    if (s->kind == Stmt::Kind::kReduce || s->kind == Stmt::Kind::kMma) return Err("a second reduction or an mma");
  }
  for (const Stmt* s : post) {
    if (s->kind == Stmt::Kind::kReduce || s->kind == Stmt::Kind::kMma) return Err("a second reduction or an mma");
  }
  const int64_t bc = win->shape[0], kk = win->shape[1], bp = win->shape[2];
  const TileArg& x = *names.args.at(gather->srcs[0].ref->name);
  const tile::Im2col& ic = *gather->im2col;

  std::vector<bool> used(k.args.size(), false);
  MarkUsed(k.body, names, &used);
  auto params = ParamList(k, used);
  if (!params.ok()) return params.status();
  int64_t iterations = 1;
  for (const auto& v : grid->vars) iterations *= v.extent;
  const int64_t per_block = bc * bp;
  const int64_t threads = std::min<int64_t>(256, (per_block + 31) / 32 * 32);

  CudaKernel out;
  out.name = Ident(k.name);
  std::string s;
  absl::StrAppend(&s, "// ", std::string(76, '-'), "\n// @", k.name, ": window ", tile::ReduceOpName(reduce->reduce), " over ",
                  ic.kernel[0], "x", ic.kernel[1], " (stride ", ic.stride[0], "x", ic.stride[1], ", pad ", ic.pad[0], "x",
                  ic.pad[1], ", dilation ", ic.dilation[0], "x", ic.dilation[1], ")\n");
  absl::StrAppend(&s, "//   one block per tile of ", bc, " channels x ", bp, " positions (", iterations,
                  " tiles); a thread per output element walks its ", kk, "-element window in global memory\n");
  if (!k.plan.empty()) absl::StrAppend(&s, "//   plan: ", k.plan, "\n");
  absl::StrAppend(&s, "// ", std::string(76, '-'), "\n");
  absl::StrAppend(&s, "extern \"C\" __global__ void __launch_bounds__(", threads, ") ", out.name, "(", *params, ") {\n");
  absl::StrAppend(&s, "  long long rest = blockIdx.x;\n");
  for (int v = static_cast<int>(grid->vars.size()) - 1; v >= 0; --v) {
    absl::StrAppend(&s, "  const int ", Ident(grid->vars[v].name), " = static_cast<int>(rest % ", grid->vars[v].extent,
                    "); rest /= ", grid->vars[v].extent, ";\n  (void)", Ident(grid->vars[v].name), ";\n");
  }
  absl::StrAppend(&s, "  for (int e = threadIdx.x; e < ", per_block, "; e += ", threads, ") {\n");
  absl::StrAppend(&s, "    const int i = e / ", bp, ", j = e % ", bp, ";  // channel and position in the tile\n");
  absl::StrAppend(&s, "    (void)i; (void)j;\n");
  absl::StrAppend(&s, "    float acc = ", ReduceIdentity(reduce->reduce), ";\n");
  absl::StrAppend(&s, "    for (int t = 0; t < ", kk, "; ++t) {\n");
  ElementProgram window;
  window.names = &names;
  window.index = {"i", "t", "j"};
  window.shape = {bc, kk, bp};
  window.read_after = {win->buffer};
  window.load = [&](const Stmt& c, int) -> std::string {
    if (!c.im2col) return "";
    GlobalIndex gi = IndexIm2col(x, *c.srcs[0].ref, ic, {"i", "t", "j"}, win->shape);
    return absl::StrCat("kiln::im2col_value(", Ident(x.name), ", ", gi.offset, ", ", FloatLit(ic.fill), ")");
  };
  std::vector<const Stmt*> window_steps = pre;
  auto wbody = EmitElementProgram(window, window_steps, "      ");
  if (!wbody.ok()) return wbody.status();
  absl::StrAppend(&s, *wbody, "      acc = ", ReduceCombiner(reduce->reduce), "::apply(acc, v_", Ident(win->buffer),
                  ");\n    }\n");
  ElementProgram tail;
  tail.names = &names;
  tail.index = {"i", "t", "j"};
  tail.shape = {bc, 1, bp};
  tail.given[acc->buffer] = "acc";
  auto tbody = EmitElementProgram(tail, post, "    ");
  if (!tbody.ok()) return tbody.status();
  absl::StrAppend(&s, *tbody, "  }\n}\n\n");
  out.source = s;
  out.variants.push_back(CudaVariant{out.name, 80, {iterations, 1, 1}, threads, 0});
  out.plan = absl::StrCat("cuda window ", tile::ReduceOpName(reduce->reduce), ", ", bc, "x", bp, " outputs per block of ",
                          threads, " threads");
  return out;
}

}  // namespace kiln::target::cuda::internal
