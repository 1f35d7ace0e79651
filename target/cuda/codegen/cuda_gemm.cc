//===- cuda_gemm.cc - GEMM tile kernels to TensorCore CUDA kernels --------===//
//
// The canonical GEMM form of tile_lowering.h becomes one or two __global__
// functions:
//
//  - `<name>_sm80` (sm_80 and newer): one thread block per grid iteration,
//    visited in a rasterized order (groups of tile rows, so blocks running
//    together share A and B tiles in L2); split-K slices on blockIdx.y,
//    batch items on blockIdx.z. The stage tiles %As/%Bs live in shared
//    memory in `stages` copies filled by a cp.async pipeline (ragged edges
//    zero-filled through cp.async's src-size); each warp (one iteration of
//    the group loop) loads its A and B fragments with ldmatrix (.trans for
//    operands stored MN-major) and runs mma.sync m16n8k16 (f16, bf16) or
//    m16n8k8 (tf32, for f32 matrices) into f32 accumulators in registers.
//    The epilogue (the ew steps on %acc and the final copy) runs on the
//    accumulator fragments in registers, with guarded stores, atomic adds
//    under split-K.
//  - `<name>_sm90a` (sm_90a only): the same tiles, the block's warps
//    grouped in warpgroups of 4 that run wgmma.mma_async m64nNk16 (m64nNk8
//    for tf32) with both operands read from shared memory through matrix
//    descriptors. The stage tiles are filled by TMA: one thread issues a
//    cp.async.bulk.tensor box per 128/64/32-byte panel of each tile, with
//    the tensor map's swizzle producing exactly the layout the descriptors'
//    swizzle modes describe, and the slot's mbarrier counts the bytes in;
//    the tensor maps are kernel parameters the launcher encodes on the host.
//    An operand TMA cannot load (an im2col gather, a dtype conversion, rows
//    not in 16-byte chunks, rank above 5) keeps the cp.async pipeline.
//
// The kernel's structure (its loops, stage tiles, MMA and epilogue) is read
// by cuda_gemm_match.cc; this file prints the variants from it.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/substitute.h"
#include "target/backend/tile_lowering.h"
#include "target/cuda/codegen/codegen_util.h"
#include "target/cuda/codegen/cuda_gemm_match.h"

namespace kiln::target::cuda::internal {
namespace {

using tile::Affine;
using tile::Scope;
using tile::Stmt;
using tile::TileArg;
using tile::TileRef;

// ---- Source pieces shared by both variants.

std::string TypeOf(DType t) { return *CType(t); }

// The block tile's coordinates from work item `tile` (in the rasterized
// order), split-K slice `slice` and batch item `item`: blockIdx.x/y/z for a
// block per tile, or the work item a persistent block is at.
std::string EmitTileCoords(const Gemm& g, const std::string& tile, const std::string& slice, const std::string& item,
                           const std::string& ind) {
  std::string s;
  const int64_t group_m = std::min(tile::kGemmRasterRows, g.mt);
  absl::StrAppend(&s, ind, "// Block rasterization: consecutive blocks walk down groups of ", group_m,
                  " tile rows, so blocks in flight together reuse each other's A and B tiles in L2.\n");
  absl::StrAppend(&s, ind, "constexpr int kTilesM = ", g.mt, ", kTilesN = ", g.nt, ", kGroupM = ", group_m, ";\n");
  absl::StrAppend(&s, ind, "const int tile_id = ", tile, ";\n", ind,
                  "const int first_m = tile_id / (kGroupM * kTilesN) * kGroupM;\n", ind,
                  "const int rows_here = kTilesM - first_m < kGroupM ? kTilesM - first_m : kGroupM;\n");
  absl::StrAppend(&s, ind, "const int ", g.m_var.empty() ? "tile_m_unused" : Ident(g.m_var),
                  " = first_m + (tile_id % (kGroupM * kTilesN)) % rows_here;\n");
  absl::StrAppend(&s, ind, "const int ", g.n_var.empty() ? "tile_n_unused" : Ident(g.n_var),
                  " = (tile_id % (kGroupM * kTilesN)) / rows_here;\n");
  // A tile, slice or batch variable may go unused (a dimension of extent 1
  // addresses nothing); the casts keep -Werror builds quiet.
  std::string unused = absl::StrCat(ind, "(void)", g.m_var.empty() ? "tile_m_unused" : Ident(g.m_var), "; (void)",
                                    g.n_var.empty() ? "tile_n_unused" : Ident(g.n_var), ";");
  if (!g.s_var.empty()) {
    absl::StrAppend(&s, ind, "const int ", Ident(g.s_var), " = ", slice, ";  // split-K slice (of ", g.splits, ")\n");
    absl::StrAppend(&unused, " (void)", Ident(g.s_var), ";");
  }
  int64_t inner = 1;
  for (int i = static_cast<int>(g.batch_vars.size()) - 1; i >= 0; --i) {
    absl::StrAppend(&s, ind, "const int ", Ident(g.batch_vars[i].name), " = ", item, " / ", inner, " % ",
                    g.batch_vars[i].extent, ";  // batch index\n");
    absl::StrAppend(&unused, " (void)", Ident(g.batch_vars[i].name), ";");
    inner *= g.batch_vars[i].extent;
  }
  absl::StrAppend(&s, unused, "\n");
  return s;
}

// Dynamic shared memory, aligned up to the swizzle pattern's period.
std::string EmitSharedBase() {
  return "  // Dynamic shared memory, aligned up to 1024 bytes (the swizzle pattern's period).\n"
         "  extern __shared__ __align__(1024) unsigned char kiln_smem_raw[];\n"
         "  unsigned char* const smem = kiln_smem_raw + ((1024u - (kiln::smem_u32(kiln_smem_raw) & 1023u)) & 1023u);\n"
         "  const uint32_t smem_base = kiln::smem_u32(smem);\n"
         "  (void)smem;\n";
}

// The rasterized block order, split-K slice, batch indices, warp indices.
std::string EmitPrologue(const Gemm& g, bool hopper) {
  std::string s = EmitTileCoords(g, "blockIdx.x", "blockIdx.y", "blockIdx.z", "  ");
  absl::StrAppend(&s, "  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;\n");
  if (!hopper) {
    // Group loop variables, outermost first; the last varies fastest.
    int64_t stride = 1;
    for (int i = static_cast<int>(g.group->vars.size()) - 1; i >= 0; --i) {
      absl::StrAppend(&s, "  const int ", Ident(g.group->vars[i].name), " = warp / ", stride, " % ",
                      g.group->vars[i].extent, ";  // warp position in the block tile\n  (void)",
                      Ident(g.group->vars[i].name), ";\n");
      stride *= g.group->vars[i].extent;
    }
  }
  absl::StrAppend(&s, "  const int gid = lane / 4, tig = lane % 4;  // mma fragment coordinates\n");
  absl::StrAppend(&s, EmitSharedBase());
  return s;
}

// The lambda that issues the copies of one global tile into a stage slot.
absl::StatusOr<std::string> EmitStageLoad(const Gemm& g, const Operand& op, const std::string& fn, int threads) {
  const StageLayout& l = op.layout;
  const TileRef& src = *op.load->srcs[0].ref;
  const std::string kvar = Ident(g.kloop->vars[0].name);
  const std::string stype = TypeOf(op.stage->dtype);
  const int64_t es = l.elem;
  const bool async = op.copy_bytes > 0;
  const int64_t unit = async ? op.copy_bytes / Bytes(op.arg->dtype) : 1;  // elements per copy
  const int64_t per_line = l.contig / unit;
  const int64_t total = l.lines * per_line;
  const int64_t iters = (total + threads - 1) / threads;
  // The local (buffer-order) index of a (line, col) position.
  std::vector<std::string> local = op.load->transpose ? std::vector<std::string>{"col", "line"}
                                                      : std::vector<std::string>{"line", "col"};
  const bool im2col = op.load->im2col.has_value();
  GlobalIndex gi = im2col ? IndexIm2col(*op.arg, src, *op.load->im2col, local, op.stage->shape)
                          : IndexGlobal(*op.arg, src, local, op.stage->shape, op.load->transpose);
  // Ragged along the contiguous dimension: a chunk may be partly inside.
  const Affine& cstart = src.start.empty() ? Affine::Const(0) : src.start.back();
  const int64_t cext = op.arg->shape.back();
  const bool ragged_contig = cext > 1 && MaxOf(cstart, g.extent) + l.contig > cext;
  std::string s;
  absl::StrAppend(&s, "  // %", op.stage->buffer, ": a ", l.lines, " x ", l.contig, " tile of %", op.arg->name, " (",
                  op.mn_major ? "MN-major: K" : "K-major: M/N", " along the lines), ",
                  im2col ? absl::StrCat("gathered through im2col (", async ? "4-byte cp.async" : "element loads",
                                        ", zero in the padding)")
                  : async ? absl::StrCat(op.copy_bytes, "-byte cp.async chunks, zero-filled past the tensor's edge")
                        : std::string(op.arg->dtype != op.stage->dtype ? "element loads converting to the stage dtype"
                                                                       : "element loads (rows not 4-byte aligned)"),
                  ".\n");
  absl::StrAppend(&s, "  auto ", fn, " = [&](int ", kvar, ", uint32_t slot) {\n");
  absl::StrAppend(&s, "#pragma unroll\n    for (int it = 0; it < ", iters, "; ++it) {\n");
  absl::StrAppend(&s, "      const int chunk = threadIdx.x + it * ", threads, ";\n");
  std::string ind = "      ";
  if (total % threads != 0) {
    absl::StrAppend(&s, "      if (chunk < ", total, ") {\n");
    ind = "        ";
  }
  absl::StrAppend(&s, ind, "const int line = chunk / ", per_line, ", col = chunk % ", per_line, " * ", unit, ";\n");
  if (im2col) {
    absl::StrAppend(&s, ind, "const long long at = ", gi.offset, ";  // < 0: padding or past the im2col matrix\n");
    absl::StrAppend(&s, ind, "const bool inside = at >= 0;\n");
    absl::StrAppend(&s, ind, "const long long off = inside ? at : 0LL;\n");
  } else {
    absl::StrAppend(&s, ind, "const bool inside = ", gi.valid, ";\n");
    absl::StrAppend(&s, ind, "const long long off = inside ? ", gi.offset, " : 0LL;\n");
  }
  absl::StrAppend(&s, ind, "const uint32_t dst = slot + ", l.Offset("line", absl::StrCat("col * ", es)), ";\n");
  if (async) {
    std::string bytes = absl::StrCat("inside ? ", op.copy_bytes, " : 0");
    if (ragged_contig && unit > 1) {
      absl::StrAppend(&s, ind, "const int left = ", cext, " - (", AffineC(cstart), " + col);  // elements before the edge\n");
      bytes = absl::StrCat("inside ? (left < ", unit, " ? left * ", Bytes(op.arg->dtype), " : ", op.copy_bytes, ") : 0");
    }
    absl::StrAppend(&s, ind, "kiln::cp_async<", op.copy_bytes, ">(smem_base + dst, ", Ident(op.arg->name), " + off, ",
                    bytes, ");\n");
  } else {
    absl::StrAppend(&s, ind, "*reinterpret_cast<", stype, "*>(smem + dst) = kiln::from_f32<", stype,
                    ">(inside ? kiln::to_f32(", Ident(op.arg->name), "[off]) : 0.f);\n");
  }
  if (total % threads != 0) absl::StrAppend(&s, "      }\n");
  absl::StrAppend(&s, "    }\n  };\n");
  return s;
}

// The per-warp fragment loads and MMAs of one K step `ks` of the stage tile.
std::string EmitWarpMma(const Gemm& g) {
  const int64_t mi_n = g.gm / 16, ni_n = g.gn / 8;
  const bool tf32 = g.in == DType::kF32;
  const char* mma = g.in == DType::kF16 ? "kiln::mma_f16" : g.in == DType::kBF16 ? "kiln::mma_bf16" : "kiln::mma_tf32";
  // f32 operands are rounded to tf32 as they load; split in three they load
  // whole and split before the MMAs.
  const std::string cvt = g.split_tf32 ? "" : "kiln::to_tf32";
  const StageLayout& la = g.a.layout;
  const StageLayout& lb = g.b.layout;
  const std::string a_row0 = g.wm_var.empty() ? "0" : absl::StrCat(Ident(g.wm_var), " * ", g.gm);
  const std::string b_col0 = g.wn_var.empty() ? "0" : absl::StrCat(Ident(g.wn_var), " * ", g.gn);
  std::string s;
  absl::StrAppend(&s, "#pragma unroll\n      for (int ks = 0; ks < ", g.bk / g.kstep, "; ++ks) {\n");
  absl::StrAppend(&s, "        uint32_t a[", mi_n, "][4], b[", ni_n, "][2];\n");
  // A fragments.
  absl::StrAppend(&s, "#pragma unroll\n        for (int mi = 0; mi < ", mi_n, "; ++mi) {\n");
  if (!g.a.mn_major) {
    absl::StrAppend(&s, "          // rows m0 + lane % 16, the 16-byte half lane / 16 of this K step\n",
                    "          kiln::ldmatrix_x4(a[mi], smem_base + as + ",
                    la.Offset(absl::StrCat(a_row0, " + mi * 16 + lane % 16"), "ks * 32 + lane / 16 * 16"), ");\n");
    if (tf32 && !g.split_tf32)
      absl::StrAppend(&s, "          for (int r = 0; r < 4; ++r) a[mi][r] = kiln::to_tf32(a[mi][r]);\n");
  } else if (!tf32) {
    absl::StrAppend(&s, "          // stored [k][m]: matrix j = lane / 8 is m + 8*(j%2), k + 8*(j/2), transposed\n",
                    "          kiln::ldmatrix_x4_trans(a[mi], smem_base + as + ",
                    la.Offset("ks * 16 + lane / 16 * 8 + lane % 8",
                              absl::StrCat("(", a_row0, " + mi * 16 + lane / 8 % 2 * 8) * 2")),
                    ");\n");
  } else {
    absl::StrAppend(&s, "          // stored [k][m], 32-bit: register r at row gid + 8*(r%2), column tig + 4*(r/2)\n",
                    "#pragma unroll\n          for (int r = 0; r < 4; ++r)\n",
                    "            a[mi][r] = ", cvt, "(kiln::lds32(smem_base + as + ",
                    la.Offset("ks * 8 + tig + r / 2 * 4", absl::StrCat("(", a_row0, " + mi * 16 + gid + r % 2 * 8) * 4")),
                    "));\n");
  }
  absl::StrAppend(&s, "        }\n");
  // B fragments, two n8 tiles per ldmatrix.x4.
  if (!tf32 || !g.b.mn_major) {
    const std::string ld = g.b.mn_major ? "ldmatrix" : "ldmatrix";
    std::string line4, byte4, line2, byte2;
    if (g.b.mn_major) {
      // stored [k][n]: matrix j = lane / 8 is k + 8*(j%2), n + 8*(j/2), transposed
      line4 = "ks * 16 + lane / 8 % 2 * 8 + lane % 8";
      byte4 = absl::StrCat("(", b_col0, " + ni * 8 + lane / 16 * 8) * 2");
      line2 = line4;
      byte2 = absl::StrCat("(", b_col0, " + ni * 8) * 2");
    } else {
      // stored [n][k]: matrix j = lane / 8 is n + 8*(j/2), the 16-byte half j%2 of this K step
      line4 = absl::StrCat(b_col0, " + ni * 8 + lane / 16 * 8 + lane % 8");
      byte4 = "ks * 32 + lane / 8 % 2 * 16";
      line2 = absl::StrCat(b_col0, " + ni * 8 + lane % 8");
      byte2 = byte4;
    }
    const std::string trans = g.b.mn_major ? "_trans" : "";
    absl::StrAppend(&s, "#pragma unroll\n        for (int ni = 0; ni + 1 < ", ni_n, "; ni += 2) {\n");
    absl::StrAppend(&s, "          uint32_t r[4];\n          kiln::ldmatrix_x4", trans, "(r, smem_base + bs + ", lb.Offset(line4, byte4),
                    ");\n");
    absl::StrAppend(&s, "          b[ni][0] = r[0]; b[ni][1] = r[1]; b[ni + 1][0] = r[2]; b[ni + 1][1] = r[3];\n");
    absl::StrAppend(&s, "        }\n");
    if (ni_n % 2 == 1) {
      absl::StrAppend(&s, "        {\n          const int ni = ", ni_n - 1, ";\n          kiln::ldmatrix_x2", trans,
                      "(b[ni], smem_base + bs + ", lb.Offset(line2, byte2), ");\n        }\n");
    }
    if (tf32 && !g.split_tf32) {
      absl::StrAppend(&s, "#pragma unroll\n        for (int ni = 0; ni < ", ni_n,
                      "; ++ni) { b[ni][0] = kiln::to_tf32(b[ni][0]); b[ni][1] = kiln::to_tf32(b[ni][1]); }\n");
    }
  } else {
    absl::StrAppend(&s, "        // stored [k][n], 32-bit: register r at row tig + 4*r, column gid\n",
                    "#pragma unroll\n        for (int ni = 0; ni < ", ni_n, "; ++ni)\n",
                    "#pragma unroll\n          for (int r = 0; r < 2; ++r)\n",
                    "            b[ni][r] = ", cvt, "(kiln::lds32(smem_base + bs + ",
                    lb.Offset("ks * 8 + tig + r * 4", absl::StrCat("(", b_col0, " + ni * 8 + gid) * 4")), "));\n");
  }
  if (g.split_tf32) {
    // 3xTF32: each operand a tf32 head and tail; the small products first.
    absl::StrAppend(&s, "        uint32_t al[", mi_n, "][4], bl[", ni_n, "][2];\n",
                    "#pragma unroll\n        for (int mi = 0; mi < ", mi_n, "; ++mi)\n",
                    "#pragma unroll\n          for (int r = 0; r < 4; ++r) kiln::split_tf32(a[mi][r], a[mi][r], al[mi][r]);\n",
                    "#pragma unroll\n        for (int ni = 0; ni < ", ni_n, "; ++ni)\n",
                    "#pragma unroll\n          for (int r = 0; r < 2; ++r) kiln::split_tf32(b[ni][r], b[ni][r], bl[ni][r]);\n",
                    "#pragma unroll\n        for (int mi = 0; mi < ", mi_n, "; ++mi)\n",
                    "#pragma unroll\n          for (int ni = 0; ni < ", ni_n, "; ++ni) {\n",
                    "            kiln::mma_tf32(acc[mi][ni], al[mi], b[ni]);\n",
                    "            kiln::mma_tf32(acc[mi][ni], a[mi], bl[ni]);\n",
                    "            kiln::mma_tf32(acc[mi][ni], a[mi], b[ni]);\n          }\n");
  } else {
    absl::StrAppend(&s, "#pragma unroll\n        for (int mi = 0; mi < ", mi_n, "; ++mi)\n",
                    "#pragma unroll\n          for (int ni = 0; ni < ", ni_n, "; ++ni) ", mma, "(acc[mi][ni], a[mi], b[ni]);\n");
  }
  absl::StrAppend(&s, "      }\n");
  return s;
}

// The K loop's pipeline around `compute` (which reads slot `k % S`).
std::string EmitPipeline(const Gemm& g, const std::string& compute, bool hopper) {
  const int S = g.stages;
  const std::string k = Ident(g.kloop->vars[0].name);
  std::string s;
  absl::StrAppend(&s, "  constexpr int kStages = ", S, ", kTilesK = ", g.kt, ";\n  (void)kStages; (void)kSlotA; (void)kSlotB;\n");
  if (S >= 2) {
    absl::StrAppend(&s,
                    "  // Prologue: the first kStages - 1 K tiles in flight.\n"
                    "#pragma unroll\n  for (int p = 0; p < kStages - 1; ++p) {\n"
                    "    if (p < kTilesK) { load_a(p, a_smem + p * kSlotA); load_b(p, b_smem + p * kSlotB); }\n"
                    "    kiln::cp_async_commit();\n  }\n");
    absl::StrAppend(&s, "  for (int ", k, " = 0; ", k, " < kTilesK; ++", k, ") {\n");
    absl::StrAppend(&s, "    kiln::cp_async_wait<kStages - 2>();  // tile ", k, " has landed\n");
    if (hopper) absl::StrAppend(&s, "    kiln::fence_proxy_async();  // cp.async writes, then wgmma reads\n");
    absl::StrAppend(&s, "    __syncthreads();  // ...for every thread; and the slot refilled below is no longer read\n");
    absl::StrAppend(&s, "    {\n      const int next = ", k, " + kStages - 1;\n",
                    "      if (next < kTilesK) { load_a(next, a_smem + next % kStages * kSlotA); "
                    "load_b(next, b_smem + next % kStages * kSlotB); }\n",
                    "      kiln::cp_async_commit();\n    }\n");
    absl::StrAppend(&s, "    const uint32_t as = a_smem + ", k, " % kStages * kSlotA, bs = b_smem + ", k,
                    " % kStages * kSlotB;\n");
    absl::StrAppend(&s, "    (void)as; (void)bs;\n", compute, "  }\n");
    absl::StrAppend(&s, "  kiln::cp_async_wait<0>();\n");
  } else {
    absl::StrAppend(&s, "  for (int ", k, " = 0; ", k, " < kTilesK; ++", k, ") {\n",
                    "    load_a(", k, ", a_smem); load_b(", k, ", b_smem);\n",
                    "    kiln::cp_async_commit();\n    kiln::cp_async_wait<0>();\n");
    if (hopper) absl::StrAppend(&s, "    kiln::fence_proxy_async();\n");
    absl::StrAppend(&s, "    __syncthreads();\n    const uint32_t as = a_smem, bs = b_smem;\n    (void)as; (void)bs;\n",
                    compute, "    __syncthreads();  // the single slot is refilled next iteration\n  }\n");
  }
  return s;
}

absl::StatusOr<std::string> EmitEpilogue(const Gemm& g, const std::string& acc_expr, const std::string& indent) {
  ElementProgram p;
  p.names = &g.names;
  p.index = {"i", "j"};
  p.shape = g.acc->shape;
  p.given[g.acc->buffer] = acc_expr;
  p.atomic_stores = !g.s_var.empty();
  return EmitElementProgram(p, g.epilogue, indent);
}

std::string Header(const tile::TileKernel& k, const Gemm& g, const std::string& what, bool tma = false) {
  std::string s;
  auto shape = [](const std::vector<int64_t>& v) { return absl::StrJoin(v, "x"); };
  absl::StrAppend(&s, "// ", std::string(76, '-'), "\n");
  absl::StrAppend(&s, "// @", k.name, ": ", what, "\n");
  absl::StrAppend(&s, "//   %", g.a.arg->name, " ", DTypeName(g.a.arg->dtype), "[", shape(g.a.arg->shape), "]",
                  g.a.load->transpose ? " (transposed)" : "", " x %", g.b.arg->name, " ", DTypeName(g.b.arg->dtype), "[",
                  shape(g.b.arg->shape), "]", g.b.load->transpose ? " (transposed)" : "", ", ",
                  g.in == DType::kF32 ? "tf32" : DTypeName(g.in), " products accumulated in f32\n");
  absl::StrAppend(&s, "//   block tile ", g.bm, "x", g.bn, "x", g.bk, " (", g.mt, "x", g.nt, " tiles", g.batch > 1 ? absl::StrCat(" x ", g.batch, " batch items") : "",
                  g.splits > 1 ? absl::StrCat(", K split ", g.splits, " ways, partial sums added atomically") : "",
                  "), ", g.stages, "-stage ", tma ? "TMA" : "cp.async", " pipeline over ", g.kt, " K tiles\n");
  std::vector<std::string> ep;
  for (const Stmt* s2 : g.epilogue)
    if (s2->kind == Stmt::Kind::kEw) ep.push_back(std::string(tile::EwOpName(s2->ew)));
  absl::StrAppend(&s, "//   epilogue in registers: ", ep.empty() ? "none" : absl::StrJoin(ep, ", "),
                  ", then the store (guarded at the ragged edges)\n");
  if (!k.plan.empty()) absl::StrAppend(&s, "//   plan: ", k.plan, "\n");
  absl::StrAppend(&s, "// ", std::string(76, '-'), "\n");
  return s;
}

// ---- The sm_80 variant.

absl::StatusOr<std::string> EmitSm80(const tile::TileKernel& k, const Gemm& g, const std::string& fn,
                                     const std::string& params) {
  const int threads = g.warps * 32;
  std::string s = Header(
      k, g,
      absl::StrCat("mma.sync.m16n8k", g.kstep, " (", g.in == DType::kF32 ? "tf32" : DTypeName(g.in), ") GEMM for sm_80+; ",
                   g.warps, " warps, each a ", g.gm, "x", g.gn, " tile = ", g.gm / 16, "x", g.gn / 8, " mma tiles"));
  absl::StrAppend(&s, "extern \"C\" __global__ void __launch_bounds__(", threads, ") ", fn, "(", params, ") {\n");
  absl::StrAppend(&s, EmitPrologue(g, false));
  absl::StrAppend(&s, "  constexpr uint32_t kSlotA = ", g.a.layout.slot_stride, ", kSlotB = ", g.b.layout.slot_stride,
                  ";  // bytes per stage slot\n");
  absl::StrAppend(&s, "  const uint32_t a_smem = 0, b_smem = kStagesBytesA;\n");
  // kStagesBytesA is declared before use below.
  std::string loads;
  auto la = EmitStageLoad(g, g.a, "load_a", threads);
  if (!la.ok()) return la.status();
  auto lb = EmitStageLoad(g, g.b, "load_b", threads);
  if (!lb.ok()) return lb.status();
  absl::StrAppend(&s, *la, *lb);
  const int64_t mi_n = g.gm / 16, ni_n = g.gn / 8;
  absl::StrAppend(&s, "  // The warp's accumulators: C fragment e of mma tile (mi, ni) is row mi*16 + gid + 8*(e/2),\n"
                      "  // column ni*8 + 2*tig + e%2 of the warp tile.\n");
  absl::StrAppend(&s, "  float acc[", mi_n, "][", ni_n, "][4];\n");
  absl::StrAppend(&s, "#pragma unroll\n  for (int mi = 0; mi < ", mi_n, "; ++mi)\n#pragma unroll\n    for (int ni = 0; ni < ",
                  ni_n, "; ++ni)\n#pragma unroll\n      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = ",
                  FloatLit(g.fill ? g.fill->value : 0.0), ";\n");
  absl::StrAppend(&s, EmitPipeline(g, EmitWarpMma(g), false));
  absl::StrAppend(&s, "  // Epilogue: element (i, j) of the warp's ", g.gm, "x", g.gn, " accumulator tile.\n");
  absl::StrAppend(&s, "#pragma unroll\n  for (int mi = 0; mi < ", mi_n, "; ++mi)\n#pragma unroll\n    for (int ni = 0; ni < ",
                  ni_n, "; ++ni)\n#pragma unroll\n      for (int e = 0; e < 4; ++e) {\n",
                  "        const int i = mi * 16 + gid + e / 2 * 8, j = ni * 8 + tig * 2 + e % 2;\n",
                  "        (void)i; (void)j;\n");
  auto ep = EmitEpilogue(g, "acc[mi][ni][e]", "        ");
  if (!ep.ok()) return ep.status();
  absl::StrAppend(&s, *ep, "      }\n}\n\n");
  // Define kStagesBytesA ahead of its use.
  const std::string decl = absl::StrCat("  constexpr uint32_t kStagesBytesA = ", g.a.layout.slot_stride * g.stages, ";\n");
  const size_t pos = s.find("  const uint32_t a_smem = 0");
  s.insert(pos, decl);
  return s;
}

// ---- The sm_90a variant (wgmma).

struct HopperPlan {
  int warpgroups = 1;
  int64_t wg_rows = 64;   // rows of the block tile per warpgroup
  int64_t m_tiles = 1;    // m64 tiles per warpgroup
  int64_t n = 8;          // wgmma N (the block tile's columns)
};

// Why the GEMM has no wgmma variant, or "" when it has one.
std::string HopperBlocker(const Gemm& g, HopperPlan* hp) {
  if (g.warps % 4 != 0) return "the block's warps do not form warpgroups of 4";
  hp->warpgroups = g.warps / 4;
  if (g.bm % (64 * hp->warpgroups) != 0) return "the block tile's rows do not split into m64 tiles per warpgroup";
  hp->wg_rows = g.bm / hp->warpgroups;
  hp->m_tiles = hp->wg_rows / 64;
  hp->n = g.bn;
  if (g.bn > 256 || g.bn % 8 != 0) return "the block tile's columns are no wgmma N (8..256, step 8)";
  if (hp->m_tiles * g.bn / 2 > 128) return "the accumulators exceed 128 registers per thread";
  for (const Operand* op : {&g.a, &g.b}) {
    if (op->layout.panel < 32) return "a stage tile's lines are not 32, 64 or 128-byte swizzle panels";
    if (op->layout.lines % 8 != 0) return "a stage tile's lines are no multiple of 8";
    if (op->mn_major && g.in == DType::kF32) return "tf32 wgmma reads K-major operands only";
  }
  return "";
}

std::string WgmmaFunction(const Gemm& g, const HopperPlan& hp, std::string* name) {
  const int64_t n = hp.n, regs = n / 2;
  const bool tf32 = g.in == DType::kF32;
  const std::string in = g.in == DType::kF16 ? "f16" : g.in == DType::kBF16 ? "bf16" : "tf32";
  const int ta = g.a.mn_major ? 1 : 0, tb = g.b.mn_major ? 1 : 0;
  *name = absl::StrCat("kiln_wgmma_m64n", n, "k", g.kstep, "_", in, tf32 ? "" : absl::StrCat("_t", ta, tb));
  std::string macro = absl::StrCat("KILN_HAVE_", *name);
  std::string s;
  absl::StrAppend(&s, "#ifndef ", macro, "\n#define ", macro, "\n");
  absl::StrAppend(&s, "// D[64 x ", n, "] (f32) += A[64 x ", g.kstep, "] * B[", g.kstep, " x ", n,
                  "], both from shared memory descriptors", tf32 ? "" : absl::StrCat(" (A ", ta ? "M" : "K", "-major, B ", tb ? "N" : "K", "-major)"), ".\n");
  absl::StrAppend(&s, "__device__ __forceinline__ void ", *name, "(float (&d)[", regs,
                  "], uint64_t desc_a, uint64_t desc_b) {\n#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n");
  std::vector<std::string> dregs;
  for (int64_t i = 0; i < regs; ++i) dregs.push_back(absl::StrCat("%", i));
  absl::StrAppend(&s, "  asm volatile(\n      \"{\\n.reg .pred p;\\nsetp.ne.b32 p, %", regs + 2, ", 0;\\n\"\n");
  absl::StrAppend(&s, "      \"wgmma.mma_async.sync.aligned.m64n", n, "k", g.kstep, ".f32.", in, ".", in, " {\"\n");
  for (int64_t i = 0; i < regs; i += 16) {
    std::vector<std::string> part(dregs.begin() + i, dregs.begin() + std::min(regs, i + 16));
    absl::StrAppend(&s, "      \"", absl::StrJoin(part, ", "), i + 16 < regs ? ", " : "", "\"\n");
  }
  absl::StrAppend(&s, "      \"}, %", regs, ", %", regs + 1, ", p, 1, 1", tf32 ? "" : absl::StrCat(", ", ta, ", ", tb),
                  ";\\n}\\n\"\n      : ");
  std::vector<std::string> outs;
  for (int64_t i = 0; i < regs; ++i) outs.push_back(absl::StrCat("\"+f\"(d[", i, "])"));
  for (int64_t i = 0; i < regs; i += 8) {
    std::vector<std::string> part(outs.begin() + i, outs.begin() + std::min(regs, i + 8));
    absl::StrAppend(&s, i ? "        " : "", absl::StrJoin(part, ", "), i + 8 < regs ? ",\n" : "\n");
  }
  absl::StrAppend(&s, "      : \"l\"(desc_a), \"l\"(desc_b), \"r\"(1));\n#else\n  (void)d; (void)desc_a; (void)desc_b;\n#endif\n}\n#endif\n\n");
  return s;
}

// ---- TMA loads of the stage tiles (sm_90a).

// Why TMA cannot fill operand `op`'s stage tiles, or "" when it can; then
// `map` describes the operand's tensor: its dims innermost first, one box a
// panel of the stage tile (panel bytes wide, `lines` long, one element
// along every other dim).
std::string TmaBlocker(const Gemm& g, const Operand& op, TmaMap* map) {
  if (op.load->im2col) return "gathered through im2col";
  if (op.arg->dtype != op.stage->dtype) return "converted to the stage dtype";
  if (op.copy_bytes != 16) return "rows or tile starts not in 16-byte chunks";
  const int r = static_cast<int>(op.arg->shape.size());
  if (r > 5) return "rank above 5";
  // A tensor of one row broadcasts it along the tile's lines; a box would
  // read zeros there.
  if (op.arg->shape[r - 2] == 1) return "one row, broadcast along the tile";
  const StageLayout& l = op.layout;
  if (l.lines > 256) return "more than 256 lines in a tile";
  const int64_t es = l.elem;
  *map = TmaMap{};
  map->arg = g.names.arg_index.at(op.arg->name);
  map->dtype = op.arg->dtype;
  int64_t stride = es;
  for (int d = r - 1; d >= 0; --d) {
    if (op.arg->shape[d] > (int64_t{1} << 32)) return "a dimension above 2^32 elements";
    map->dims.push_back(op.arg->shape[d]);
    if (d < r - 1) map->strides.push_back(stride);
    stride *= op.arg->shape[d];
  }
  if (!map->strides.empty() && map->strides.back() >= (int64_t{1} << 40)) return "a stride of 2^40 bytes or more";
  map->box.assign(r, 1);
  map->box[0] = l.panel / es;
  map->box[1] = l.lines;
  map->swizzle_bytes = static_cast<int>(l.panel);
  return "";
}

// The lambda (run by one thread) that starts the TMA loads of K tile `k`
// into stage slot `slot`: it arms the slot's mbarrier with the bytes of both
// tiles, then issues one box per panel of each.
std::string EmitTmaLoads(const Gemm& g, const std::string& ind) {
  const std::string kvar = Ident(g.kloop->vars[0].name);
  std::string s;
  absl::StrAppend(&s, ind, "// TMA: one thread arms slot `slot`'s mbarrier with the ", g.a.layout.bytes + g.b.layout.bytes,
                  " bytes of K tile ", kvar, " and issues one box per panel;\n", ind,
                  "// elements past the tensors' edges arrive as zeros.\n");
  absl::StrAppend(&s, ind, "auto load_tiles = [&](int ", kvar, ", int slot) {\n");
  absl::StrAppend(&s, ind, "  const uint32_t bar = smem_base + bars + 8 * slot;\n");
  absl::StrAppend(&s, ind, "  kiln::mbar_arrive_expect_tx(bar, kTxBytes);\n");
  for (const Operand* op : {&g.a, &g.b}) {
    const bool is_a = op == &g.a;
    const StageLayout& l = op->layout;
    const int r = static_cast<int>(op->arg->shape.size());
    const std::vector<Affine> start = StartsOf(*op->load->srcs[0].ref, r);
    std::vector<std::string> coords;
    for (int d = r - 1; d >= 0; --d) coords.push_back(op->arg->shape[d] == 1 ? "0" : AffineC(start[d]));
    const int64_t panels = l.contig * l.elem / l.panel, per_panel = l.panel / l.elem;
    coords[0] = coords[0] == "0" ? absl::StrCat("p * ", per_panel) : absl::StrCat(coords[0], " + p * ", per_panel);
    absl::StrAppend(&s, ind, "  // %", op->stage->buffer, ": ", panels, " box(es) of ", per_panel, " x ", l.lines,
                    " elements of %", op->arg->name, "\n");
    absl::StrAppend(&s, "#pragma unroll\n", ind, "  for (int p = 0; p < ", panels, "; ++p)\n");
    absl::StrAppend(&s, ind, "    kiln::tma_load(smem_base + ", is_a ? "a_smem + slot * kSlotA" : "b_smem + slot * kSlotB",
                    " + p * ", l.lines * l.panel, ", kiln_tma_", is_a ? "a" : "b", ", bar, ", absl::StrJoin(coords, ", "),
                    ");\n");
  }
  absl::StrAppend(&s, ind, "};\n");
  return s;
}

// The K loop around `compute` (which reads slot `k % S`) with TMA loads:
// the slot of tile k + S - 1 is refilled once every warpgroup has passed
// the barrier that follows tile k's arrival (so it is done with tile k - 1).
std::string EmitTmaPipeline(const Gemm& g, const std::string& compute) {
  const int S = g.stages;
  const std::string k = Ident(g.kloop->vars[0].name);
  std::string s;
  absl::StrAppend(&s, "  constexpr int kStages = ", S, ", kTilesK = ", g.kt, ";\n  (void)kSlotA; (void)kSlotB;\n");
  absl::StrAppend(&s,
                  "  if (threadIdx.x == 0) {\n"
                  "    for (int slot = 0; slot < kStages; ++slot) kiln::mbar_init(smem_base + bars + 8 * slot, 1);\n"
                  "    kiln::fence_mbar_init();\n  }\n  __syncthreads();\n");
  if (S >= 2) {
    absl::StrAppend(&s,
                    "  // Prologue: the first kStages - 1 K tiles in flight.\n"
                    "  if (threadIdx.x == 0)\n"
                    "    for (int p = 0; p < kStages - 1 && p < kTilesK; ++p) load_tiles(p, p);\n");
    absl::StrAppend(&s, "  for (int ", k, " = 0; ", k, " < kTilesK; ++", k, ") {\n");
    absl::StrAppend(&s, "    kiln::mbar_wait(smem_base + bars + 8 * (", k, " % kStages), (", k,
                    " / kStages) & 1);  // tile ", k, " has landed\n");
    absl::StrAppend(&s, "    __syncthreads();  // ...and every warpgroup is done with tile ", k,
                    " - 1, whose slot is refilled below\n");
    absl::StrAppend(&s, "    if (threadIdx.x == 0) {\n      const int next = ", k, " + kStages - 1;\n",
                    "      if (next < kTilesK) load_tiles(next, next % kStages);\n    }\n");
    absl::StrAppend(&s, "    const uint32_t as = a_smem + ", k, " % kStages * kSlotA, bs = b_smem + ", k,
                    " % kStages * kSlotB;\n");
    absl::StrAppend(&s, "    (void)as; (void)bs;\n", compute, "  }\n");
  } else {
    absl::StrAppend(&s, "  for (int ", k, " = 0; ", k, " < kTilesK; ++", k, ") {\n",
                    "    if (threadIdx.x == 0) load_tiles(", k, ", 0);\n",
                    "    kiln::mbar_wait(smem_base + bars, ", k, " & 1);\n",
                    "    const uint32_t as = a_smem, bs = b_smem;\n    (void)as; (void)bs;\n", compute,
                    "    __syncthreads();  // the single slot is refilled next iteration\n  }\n");
  }
  return s;
}

// A wgmma matrix descriptor of operand `op`'s stage tile in slot `slot`:
// rows from `mn0`, K step `kstep_var`. LBO/SBO per the operand's majorness
// (PTX ISA, "Matrix Descriptor Format"): K-major swizzled: SBO = 8 lines;
// MN-major: LBO = one panel (the next 64/32/16 MN elements), SBO = 8 lines
// of K.
std::string WgmmaDesc(const Gemm& g, const Operand& op, const std::string& slot, const std::string& mn0,
                      const std::string& kstep_var) {
  const StageLayout& l = op.layout;
  const int64_t panel_stride = l.lines * l.panel;
  std::string addr;
  if (!op.mn_major) {
    // k bytes kstep*32 -> panel (kb / P), offset within; rows mn0 along the lines
    addr = absl::StrCat(slot, " + (", kstep_var, " * 32) / ", l.panel, " * ", panel_stride, " + (", kstep_var,
                        " * 32) % ", l.panel, " + (", mn0, ") * ", l.panel);
    return absl::StrCat("kiln::wgmma_desc(smem_base + ", addr, ", 16, ", 8 * l.panel, ", ", l.SwizzleMode(), ")");
  }
  addr = absl::StrCat(slot, " + (", mn0, ") * ", l.elem, " / ", l.panel, " * ", panel_stride, " + ", kstep_var, " * ",
                      g.kstep * l.panel);
  return absl::StrCat("kiln::wgmma_desc(smem_base + ", addr, ", ", panel_stride, ", ", 8 * l.panel, ", ",
                      l.SwizzleMode(), ")");
}

// One K tile's wgmmas from slots `as`/`bs` into the warpgroup's
// accumulators, committed as one group; then waits until at most `pending`
// groups are in flight. `wg` is the warpgroup's index among those computing.
std::string EmitWgmmaKTile(const Gemm& g, const HopperPlan& hp, const std::string& wgmma, int pending,
                           const std::string& wait_note) {
  const int64_t regs = hp.n / 2;
  std::string compute;
  // The accumulators are fenced on both sides of the asynchronous MMAs, so
  // that the compiler keeps them in the registers wgmma reads and writes
  // (without it, ptxas injects warpgroup.arrive/wait of its own).
  absl::StrAppend(&compute, "#pragma unroll\n    for (int t = 0; t < ", hp.m_tiles, "; ++t)\n#pragma unroll\n      for (int r = 0; r < ",
                  regs, "; ++r) kiln::fence_operand(acc[t][r]);\n");
  absl::StrAppend(&compute, "    kiln::wgmma_fence();\n");
  absl::StrAppend(&compute, "#pragma unroll\n    for (int ks = 0; ks < ", g.bk / g.kstep, "; ++ks) {\n");
  absl::StrAppend(&compute, "      const uint64_t desc_b = ", WgmmaDesc(g, g.b, "bs", "0", "ks"), ";\n");
  absl::StrAppend(&compute, "#pragma unroll\n      for (int t = 0; t < ", hp.m_tiles, "; ++t)\n        ", wgmma, "(acc[t], ",
                  WgmmaDesc(g, g.a, "as", absl::StrCat("wg * ", hp.wg_rows, " + t * 64"), "ks"), ", desc_b);\n    }\n");
  absl::StrAppend(&compute, "    kiln::wgmma_commit();\n    kiln::wgmma_wait<", pending, ">();  // ", wait_note, "\n");
  absl::StrAppend(&compute, "#pragma unroll\n    for (int t = 0; t < ", hp.m_tiles, "; ++t)\n#pragma unroll\n      for (int r = 0; r < ",
                  regs, "; ++r) kiln::fence_operand(acc[t][r]);\n");
  return compute;
}

// The accumulators' declaration and fill.
std::string EmitWgmmaAccumulators(const Gemm& g, const HopperPlan& hp, const std::string& ind) {
  const int64_t regs = hp.n / 2;
  std::string s;
  absl::StrAppend(&s, ind, "// wgmma accumulators of m64 tile t: register r is row t*64 + 16*(warp%4) + gid + 8*(r%4/2),\n",
                  ind, "// column r/4*8 + 2*tig + r%2 of the warpgroup's tile.\n");
  absl::StrAppend(&s, ind, "float acc[", hp.m_tiles, "][", regs, "];\n");
  absl::StrAppend(&s, "#pragma unroll\n", ind, "for (int t = 0; t < ", hp.m_tiles, "; ++t)\n#pragma unroll\n", ind,
                  "  for (int r = 0; r < ", regs, "; ++r) acc[t][r] = ", FloatLit(g.fill ? g.fill->value : 0.0), ";\n");
  return s;
}

// The epilogue on the warpgroup's accumulators, in registers.
absl::StatusOr<std::string> EmitWgmmaEpilogue(const Gemm& g, const HopperPlan& hp) {
  const int64_t regs = hp.n / 2;
  std::string s;
  absl::StrAppend(&s, "  // Epilogue: the warpgroup's element (row, col) of the block tile is element (i, j) of\n"
                      "  // warp (", g.wm_var.empty() ? "-" : "%" + g.wm_var, ", ", g.wn_var.empty() ? "-" : "%" + g.wn_var,
                  ")'s ", g.gm, "x", g.gn, " accumulator tile in the tile IR.\n");
  absl::StrAppend(&s, "#pragma unroll\n  for (int t = 0; t < ", hp.m_tiles, "; ++t)\n#pragma unroll\n    for (int r = 0; r < ",
                  regs, "; ++r) {\n");
  absl::StrAppend(&s, "      const int row = wg * ", hp.wg_rows, " + t * 64 + warp % 4 * 16 + gid + r % 4 / 2 * 8;\n",
                  "      const int col = r / 4 * 8 + tig * 2 + r % 2;\n");
  absl::StrAppend(&s, "      const int i = row % ", g.gm, ", j = col % ", g.gn, ";\n      (void)i; (void)j;\n");
  if (!g.wm_var.empty()) {
    absl::StrAppend(&s, "      const int ", Ident(g.wm_var), " = row / ", g.gm, ";\n      (void)", Ident(g.wm_var), ";\n");
  }
  if (!g.wn_var.empty()) {
    absl::StrAppend(&s, "      const int ", Ident(g.wn_var), " = col / ", g.gn, ";\n      (void)", Ident(g.wn_var), ";\n");
  }
  auto ep = EmitEpilogue(g, "acc[t][r]", "      ");
  if (!ep.ok()) return ep.status();
  absl::StrAppend(&s, *ep);
  if (!g.wm_var.empty()) absl::StrAppend(&s, "      (void)", Ident(g.wm_var), ";\n");
  if (!g.wn_var.empty()) absl::StrAppend(&s, "      (void)", Ident(g.wn_var), ";\n");
  absl::StrAppend(&s, "    }\n");
  return s;
}

absl::StatusOr<std::string> EmitSm90a(const tile::TileKernel& k, const Gemm& g, const HopperPlan& hp,
                                      const std::string& fn, const std::string& params, bool tma) {
  const int threads = g.warps * 32;
  std::string wgmma;
  std::string s = WgmmaFunction(g, hp, &wgmma);
  absl::StrAppend(
      &s, Header(k, g,
                 absl::StrCat("wgmma GEMM for sm_90a; ", hp.warpgroups, " warpgroup(s), each ", hp.wg_rows, "x", hp.n,
                              " = ", hp.m_tiles, " wgmma m64n", hp.n, "k", g.kstep,
                              " per K step; stage tiles by ", tma ? "TMA" : "cp.async",
                              " in the descriptors' swizzled layout"),
                 tma));
  std::string all_params = params;
  if (tma) {
    absl::StrAppend(&all_params,
                    ",\n    const __grid_constant__ CUtensorMap kiln_tma_a, const __grid_constant__ CUtensorMap kiln_tma_b");
  }
  absl::StrAppend(&s, "extern \"C\" __global__ void __launch_bounds__(", threads, ") ", fn, "(", all_params, ") {\n");
  absl::StrAppend(&s, "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n");
  absl::StrAppend(&s, EmitPrologue(g, true));
  absl::StrAppend(&s, "  const int wg = warp / 4;  // warpgroup: rows wg*", hp.wg_rows, " .. of the block tile\n");
  absl::StrAppend(&s, "  constexpr uint32_t kSlotA = ", g.a.layout.slot_stride, ", kSlotB = ", g.b.layout.slot_stride,
                  ";  // bytes per stage slot\n");
  absl::StrAppend(&s, "  const uint32_t a_smem = 0, b_smem = ", g.a.layout.slot_stride * g.stages, ";\n");
  if (tma) {
    absl::StrAppend(&s, "  // The stage slots' mbarriers, one per slot, after the slots.\n  const uint32_t bars = ",
                    (g.a.layout.slot_stride + g.b.layout.slot_stride) * g.stages, ";\n");
    absl::StrAppend(&s, "  constexpr uint32_t kTxBytes = ", g.a.layout.bytes + g.b.layout.bytes, ";\n");
    absl::StrAppend(&s, EmitTmaLoads(g, "  "));
  } else {
    auto la = EmitStageLoad(g, g.a, "load_a", threads);
    if (!la.ok()) return la.status();
    auto lb = EmitStageLoad(g, g.b, "load_b", threads);
    if (!lb.ok()) return lb.status();
    absl::StrAppend(&s, *la, *lb);
  }
  absl::StrAppend(&s, EmitWgmmaAccumulators(g, hp, "  "));
  const std::string compute =
      EmitWgmmaKTile(g, hp, wgmma, 0, "this slot is refilled once every warpgroup passed the next barrier");
  absl::StrAppend(&s, tma ? EmitTmaPipeline(g, compute) : EmitPipeline(g, compute, true));
  auto ep = EmitWgmmaEpilogue(g, hp);
  if (!ep.ok()) return ep.status();
  absl::StrAppend(&s, *ep, "#endif  // __CUDA_ARCH_FEAT_SM90_ALL\n}\n\n");
  return s;
}

// ---- The warp-specialized, persistent sm_90a variant (TMA operands).
//
// One producer warpgroup and `hp.warpgroups` consumer warpgroups. One
// thread of the producer issues the TMA loads of every K tile of every work
// item the block visits into a ring of `stages` slots; slot s has a "full"
// mbarrier (the loads' bytes complete its phase) and an "empty" one (each
// consumer warpgroup arrives once its wgmmas no longer read the slot). The
// consumers keep one K tile's wgmmas in flight while the next tile's wait
// and issue, and run the epilogue of a work item while the producer already
// fills the ring for the next. The block count is the launcher's: as many
// blocks as are resident at once, each visiting work items blockIdx.x,
// blockIdx.x + gridDim.x, ...; the producer gives its registers to the
// consumers (setmaxnreg) when there are two consumer warpgroups.

// The dynamic shared memory one block may opt into on sm_90 (CUDA C++
// Programming Guide, "Technical Specifications per Compute Capability":
// 227 KB for compute capability 9.0).
constexpr int64_t kSm90SharedBytes = 227 * 1024;

// Stage slots of the warp-specialized variant: as many as fit the shared
// memory when one block fills an SM anyway, the tile IR's otherwise; at
// least two, since a consumer releases a slot only once it has issued the
// next tile's wgmmas. 0 when two do not fit.
int WarpSpecializedStages(const Gemm& g) {
  const int64_t slot = g.a.layout.slot_stride + g.b.layout.slot_stride;
  const int64_t fit = (kSm90SharedBytes - 1024) / (slot + 16);
  if (fit < 2) return 0;
  const int64_t at_plan = slot * g.stages + 1024 + 16 * g.stages;
  const int64_t stages = 2 * at_plan <= kSm90SharedBytes ? g.stages : std::min<int64_t>(fit, 8);
  return static_cast<int>(std::clamp<int64_t>(stages, 2, fit));
}

absl::StatusOr<std::string> EmitSm90aWarpSpecialized(const tile::TileKernel& k, const Gemm& g, const HopperPlan& hp,
                                                     const std::string& fn, const std::string& params, int stages) {
  const int consumers = hp.warpgroups;
  const int threads = (consumers + 1) * 128;
  const bool regs_moved = consumers == 2;
  std::string wgmma;
  std::string s = WgmmaFunction(g, hp, &wgmma);
  Gemm gs = g;
  gs.stages = stages;
  absl::StrAppend(
      &s, Header(k, gs,
                 absl::StrCat("warp-specialized persistent wgmma GEMM for sm_90a; a producer warpgroup issues TMA "
                              "into the stage ring, ", consumers, " consumer warpgroup(s) each compute ", hp.wg_rows,
                              "x", hp.n, " = ", hp.m_tiles, " wgmma m64n", hp.n, "k", g.kstep, " per K step"),
                 true));
  absl::StrAppend(&s, "extern \"C\" __global__ void __launch_bounds__(", threads, ", 1) ", fn, "(", params,
                  ",\n    const __grid_constant__ CUtensorMap kiln_tma_a, const __grid_constant__ CUtensorMap kiln_tma_b) {\n");
  absl::StrAppend(&s, "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n");
  absl::StrAppend(&s, "  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;\n"
                      "  const int gid = lane / 4, tig = lane % 4;  // mma fragment coordinates\n");
  absl::StrAppend(&s, EmitSharedBase());
  const int64_t slot_a = g.a.layout.slot_stride, slot_b = g.b.layout.slot_stride;
  absl::StrAppend(&s, "  constexpr uint32_t kSlotA = ", slot_a, ", kSlotB = ", slot_b, ";  // bytes per stage slot\n");
  absl::StrAppend(&s, "  const uint32_t a_smem = 0, b_smem = ", slot_a * stages, ";\n");
  absl::StrAppend(&s, "  // The slots' mbarriers after the slots: `full` (the TMA bytes landed), then `empty`\n"
                      "  // (every consumer warpgroup is done reading).\n");
  absl::StrAppend(&s, "  const uint32_t bars = ", (slot_a + slot_b) * stages, ", empties = bars + ", 8 * stages, ";\n");
  absl::StrAppend(&s, "  constexpr uint32_t kTxBytes = ", g.a.layout.bytes + g.b.layout.bytes, ";\n");
  absl::StrAppend(&s, "  constexpr int kStages = ", stages, ", kTilesK = ", g.kt, ", kTiles = ", g.mt * g.nt,
                  ", kSplits = ", g.splits, ";\n");
  absl::StrAppend(&s, "  constexpr int kWork = kTiles * kSplits * ", g.batch, ";  // work items: tiles x slices x batch items\n");
  absl::StrAppend(&s, "  if (threadIdx.x == 0) {\n"
                      "    for (int slot = 0; slot < kStages; ++slot) {\n"
                      "      kiln::mbar_init(smem_base + bars + 8 * slot, 1);\n"
                      "      kiln::mbar_init(smem_base + empties + 8 * slot, ", consumers, ");\n"
                      "    }\n    kiln::fence_mbar_init();\n  }\n  __syncthreads();\n");
  const std::string coords =
      EmitTileCoords(g, "work % kTiles", "work / kTiles % kSplits", "(work / kTiles / kSplits)", "      ");
  // Producer.
  absl::StrAppend(&s, "  if (warp < 4) {  // the producer warpgroup\n");
  if (regs_moved) absl::StrAppend(&s, "    kiln::setmaxnreg_dec<40>();\n");
  absl::StrAppend(&s, "    if (threadIdx.x == 0) {\n      int it = 0;  // K tiles issued so far, over every work item\n"
                      "      for (int work = blockIdx.x; work < kWork; work += gridDim.x) {\n");
  absl::StrAppend(&s, coords);
  absl::StrAppend(&s, EmitTmaLoads(g, "      "));
  const std::string kv = Ident(g.kloop->vars[0].name);
  absl::StrAppend(&s, "        for (int ", kv, " = 0; ", kv, " < kTilesK; ++", kv, ", ++it) {\n"
                      "          const int slot = it % kStages;\n"
                      "          kiln::mbar_wait(smem_base + empties + 8 * slot, ((it / kStages) & 1) ^ 1);  // the slot is free\n"
                      "          load_tiles(", kv, ", slot);\n        }\n      }\n    }\n");
  // Consumers.
  absl::StrAppend(&s, "  } else {  // the consumer warpgroups\n");
  if (regs_moved) absl::StrAppend(&s, "    kiln::setmaxnreg_inc<232>();\n");
  absl::StrAppend(&s, "    const int wg = warp / 4 - 1;  // rows wg*", hp.wg_rows, " .. of the block tile\n"
                      "    int it = 0;  // K tiles consumed so far, over every work item\n"
                      "    for (int work = blockIdx.x; work < kWork; work += gridDim.x) {\n");
  absl::StrAppend(&s, coords);
  std::string accs = EmitWgmmaAccumulators(g, hp, "    ");
  absl::StrAppend(&s, accs);
  absl::StrAppend(&s, "    for (int ", kv, " = 0; ", kv, " < kTilesK; ++", kv, ", ++it) {\n"
                      "      kiln::mbar_wait(smem_base + bars + 8 * (it % kStages), (it / kStages) & 1);  // tile ", kv,
                  " has landed\n"
                      "      const uint32_t as = a_smem + it % kStages * kSlotA, bs = b_smem + it % kStages * kSlotB;\n");
  absl::StrAppend(&s, EmitWgmmaKTile(g, hp, wgmma, 1, "the previous K tile's wgmmas are done"));
  absl::StrAppend(&s, "      // ...so its slot goes back to the producer.\n"
                      "      if (", kv, " > 0 && threadIdx.x % 128 == 0) kiln::mbar_arrive(smem_base + empties + 8 * ((it + kStages - 1) % kStages));\n"
                      "    }\n");
  absl::StrAppend(&s, "    kiln::wgmma_wait<0>();\n");
  absl::StrAppend(&s, "#pragma unroll\n    for (int t = 0; t < ", hp.m_tiles, "; ++t)\n#pragma unroll\n      for (int r = 0; r < ",
                  hp.n / 2, "; ++r) kiln::fence_operand(acc[t][r]);\n");
  absl::StrAppend(&s, "    if (threadIdx.x % 128 == 0) kiln::mbar_arrive(smem_base + empties + 8 * ((it + kStages - 1) % kStages));\n");
  auto ep = EmitWgmmaEpilogue(g, hp);
  if (!ep.ok()) return ep.status();
  absl::StrAppend(&s, *ep, "    }\n  }\n#endif  // __CUDA_ARCH_FEAT_SM90_ALL\n}\n\n");
  return s;
}

}  // namespace

absl::StatusOr<CudaKernel> EmitGemm(const tile::TileKernel& k, const CudaArch& arch) {
  auto gm = Match(k);
  if (!gm.ok()) return gm.status();
  gm->split_tf32 = arch.split_tf32 && gm->in == DType::kF32;
  const Gemm& g = *gm;
  for (const auto& a : k.args)
    if (auto ct = CType(a.dtype); !ct.ok()) return ct.status();

  std::vector<bool> used(k.args.size(), false);
  MarkUsed(k.body, g.names, &used);
  auto params = ParamList(k, used);
  if (!params.ok()) return params.status();

  CudaKernel out;
  out.name = Ident(k.name);
  out.matrix = true;
  const int threads = g.warps * 32;
  const std::array<int64_t, 3> grid = {g.mt * g.nt, g.splits, g.batch};
  const int64_t smem = (g.a.layout.slot_stride + g.b.layout.slot_stride) * g.stages + 1024;

  auto sm80 = EmitSm80(k, g, out.name + "_sm80", *params);
  if (!sm80.ok()) return sm80.status();
  out.source = *sm80;
  out.variants.push_back(CudaVariant{out.name + "_sm80", 80, grid, threads, smem});

  HopperPlan hp;
  std::string blocker = g.split_tf32 ? "f32 products split in three tf32 ones run on mma.sync" : HopperBlocker(g, &hp);
  std::string tma_blocker;
  int ws_stages = 0;  // the warp-specialized variant's stage slots (0: none)
  if (arch.hopper && blocker.empty()) {
    TmaMap map_a, map_b;
    if (std::string why = TmaBlocker(g, g.a, &map_a); !why.empty()) {
      tma_blocker = absl::StrCat("A ", why);
    } else if (std::string why_b = TmaBlocker(g, g.b, &map_b); !why_b.empty()) {
      tma_blocker = absl::StrCat("B ", why_b);
    }
    const bool tma = tma_blocker.empty();
    if (tma && arch.warp_specialized && hp.warpgroups <= 2) ws_stages = WarpSpecializedStages(g);
    if (ws_stages > 0) {
      // The work items in blockIdx.x order, visited by as many blocks as
      // are resident (the launcher's count); two mbarriers per slot.
      auto sm90 = EmitSm90aWarpSpecialized(k, g, hp, out.name + "_sm90a", *params, ws_stages);
      if (!sm90.ok()) return sm90.status();
      out.source += *sm90;
      const int64_t slot = g.a.layout.slot_stride + g.b.layout.slot_stride;
      CudaVariant v{out.name + "_sm90a", 90, {g.mt * g.nt * g.splits * g.batch, 1, 1}, (hp.warpgroups + 1) * 128,
                    slot * ws_stages + 1024 + 16 * ws_stages};
      v.max_sm = 90;
      v.persistent = true;
      v.tma = {map_a, map_b};
      out.variants.push_back(v);
    } else {
      auto sm90 = EmitSm90a(k, g, hp, out.name + "_sm90a", *params, tma);
      if (!sm90.ok()) return sm90.status();
      out.source += *sm90;
      // With TMA, one 8-byte mbarrier per stage slot follows the slots.
      CudaVariant v{out.name + "_sm90a", 90, grid, threads, smem + (tma ? 8 * g.stages : 0)};
      v.max_sm = 90;
      if (tma) v.tma = {map_a, map_b};
      out.variants.push_back(v);
    }
  }
  // Split-K: blocks add partial sums into the output, zeroed before the launch.
  if (!g.s_var.empty()) {
    for (const Stmt* s : g.epilogue) {
      if (IsCopy(*s) && s->accumulate && g.names.args.count(s->dst.name)) {
        const int idx = g.names.arg_index.at(s->dst.name);
        out.zero_args.push_back(idx);
        const TileArg& a = k.args[idx];
        if (a.role == TileArg::Role::kWorkspace) {
          int64_t n = Bytes(a.dtype);
          for (int64_t d : a.shape) n *= d;
          out.workspace_bytes += n;
        }
      }
    }
  }
  out.plan = absl::StrCat("cuda gemm ", g.bm, "x", g.bn, "x", g.bk, " tiles, ", g.warps, " warps (", g.gm, "x", g.gn,
                          "), ", g.stages, " stages, mma.sync m16n8k", g.kstep, g.split_tf32 ? " (3xTF32)" : "",
                          g.splits > 1 ? absl::StrCat(", split-K ", g.splits) : "",
                          arch.hopper ? (blocker.empty() ? absl::StrCat(", sm_90a wgmma m64n", hp.n, "k", g.kstep,
                                                                        tma_blocker.empty()
                                                                            ? (ws_stages > 0
                                                                                   ? absl::StrCat(
                                                                                         " warp-specialized, persistent, ",
                                                                                         ws_stages, " TMA stages")
                                                                                   : std::string(" with TMA loads"))
                                                                            : absl::StrCat(" with cp.async loads (no TMA: ",
                                                                                           tma_blocker, ")"))
                                                         : absl::StrCat(", no wgmma variant: ", blocker))
                                      : "");
  return out;
}

}  // namespace kiln::target::cuda::internal
