//===- kernels.h - Tile IR kernels in the canonical forms, for the cuda codegen tests -*- C++ -*-===//
//
// Builders of tile IR text in the three canonical forms of docs/tile-ir.md
// (GEMM with its variants: transposes, batch, split-K, epilogues, ragged
// edges; elementwise; row reduction), parsed and verified against a
// cuda-like TileTarget.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "target/backend/tile_ir.h"

namespace kiln::target::cuda::testing {

inline tile::TileTarget CudaLikeTarget() {
  tile::TileTarget t;
  t.name = "cuda";
  t.capacity = {{tile::Scope::kStage, 227 * 1024}};
  t.mma = {tile::TileMma{16, 8, 16, DType::kF16, DType::kF32}, tile::TileMma{16, 8, 16, DType::kBF16, DType::kF32},
           tile::TileMma{16, 8, 8, DType::kF32, DType::kF32}};
  t.max_group = 16;
  return t;
}

struct GemmSpec {
  std::string name = "gemm";
  int64_t M = 512, N = 1024, K = 256;
  std::string in = "f16", out = "f16";
  int64_t bm = 128, bn = 128, bk = 32, gm = 64, gn = 64, tk = 0;  // tk 0: bk
  int stages = 3;
  bool trans_a = false, trans_b = false;
  std::vector<int64_t> batch;      // output batch dims
  bool b_broadcasts_batch = false; // B has extent 1 in every batch dim
  int splits = 1;
  // Epilogue: "bias_row", "bias_col", "residual", "scale", and ew op names ("relu", ...).
  std::vector<std::string> epilogue;
};

inline int64_t Tiles(int64_t n, int64_t t) { return (n + t - 1) / t; }

inline std::string GemmText(const GemmSpec& s) {
  std::string t = absl::StrCat("kernel @", s.name, " {\n  plan \"test kernel\"\n");
  auto dims = [&](std::vector<int64_t> v, bool bcast) {
    std::vector<int64_t> d;
    for (int64_t b : s.batch) d.push_back(bcast ? 1 : b);
    d.insert(d.end(), v.begin(), v.end());
    return absl::StrJoin(d, ",");
  };
  const std::string acc_t = "f32";
  absl::StrAppend(&t, "  arg %A : ", s.in, "[", dims(s.trans_a ? std::vector<int64_t>{s.K, s.M} : std::vector<int64_t>{s.M, s.K}, false), "] in\n");
  absl::StrAppend(&t, "  arg %B : ", s.in, "[",
                  dims(s.trans_b ? std::vector<int64_t>{s.N, s.K} : std::vector<int64_t>{s.K, s.N}, s.b_broadcasts_batch),
                  "] in\n");
  for (const auto& e : s.epilogue) {
    if (e == "bias_row") absl::StrAppend(&t, "  arg %bias : ", s.out, "[", s.N, "] in\n");
    if (e == "bias_col") absl::StrAppend(&t, "  arg %cbias : f32[", s.M, ",1] in\n");
    if (e == "residual") absl::StrAppend(&t, "  arg %R : ", s.out, "[", dims({s.M, s.N}, false), "] in\n");
  }
  absl::StrAppend(&t, "  arg %Y : ", s.out, "[", dims({s.M, s.N}, false), "] out\n");
  std::vector<std::string> grid;
  for (size_t i = 0; i < s.batch.size(); ++i) grid.push_back(absl::StrCat("%b", i, " = ", s.batch[i]));
  grid.push_back(absl::StrCat("%m = ", Tiles(s.M, s.bm)));
  grid.push_back(absl::StrCat("%n = ", Tiles(s.N, s.bn)));
  if (s.splits > 1) grid.push_back(absl::StrCat("%s = ", s.splits));
  absl::StrAppend(&t, "  grid ", absl::StrJoin(grid, ", "), " {\n");
  absl::StrAppend(&t, "    buffer %As : ", s.in, "[", s.bm, ",", s.bk, "] stage x", s.stages, "\n");
  absl::StrAppend(&t, "    buffer %Bs : ", s.in, "[", s.bk, ",", s.bn, "] stage x", s.stages, "\n");
  absl::StrAppend(&t, "    group %wm = ", s.bm / s.gm, ", %wn = ", s.bn / s.gn, " {\n");
  const int64_t tk = s.tk ? s.tk : s.bk;
  absl::StrAppend(&t, "      buffer %Aa : ", s.in, "[", s.gm, ",", tk, "] operand_a\n");
  absl::StrAppend(&t, "      buffer %Bb : ", s.in, "[", tk, ",", s.gn, "] operand_b\n");
  absl::StrAppend(&t, "      buffer %acc : ", acc_t, "[", s.gm, ",", s.gn, "] accumulator\n");
  for (const auto& e : s.epilogue) {
    if (e == "bias_row") absl::StrAppend(&t, "      buffer %bv : f32[1,", s.gn, "] vector\n");
    if (e == "bias_col") absl::StrAppend(&t, "      buffer %cv : f32[", s.gm, ",1] vector\n");
    if (e == "residual") absl::StrAppend(&t, "      buffer %rv : f32[", s.gm, ",", s.gn, "] vector\n");
  }
  absl::StrAppend(&t, "      fill %acc, 0\n");
  const int64_t kt = Tiles(s.K, s.bk) / s.splits + (Tiles(s.K, s.bk) % s.splits ? 1 : 0);
  absl::StrAppend(&t, "      pipelined(", s.stages, ") %k = ", kt, " {\n");
  std::string bidx;
  for (size_t i = 0; i < s.batch.size(); ++i) bidx += absl::StrCat("%b", i, ", ");
  std::string bidx_b;
  for (size_t i = 0; i < s.batch.size(); ++i) bidx_b += s.b_broadcasts_batch ? "0, " : absl::StrCat("%b", i, ", ");
  const std::string kstart = s.splits > 1 ? absl::StrCat("%s*", kt * s.bk, " + %k*", s.bk) : absl::StrCat("%k*", s.bk);
  if (s.trans_a) absl::StrAppend(&t, "        copy %A[", bidx, kstart, ", %m*", s.bm, "] -> %As transpose\n");
  else absl::StrAppend(&t, "        copy %A[", bidx, "%m*", s.bm, ", ", kstart, "] -> %As\n");
  if (s.trans_b) absl::StrAppend(&t, "        copy %B[", bidx_b, "%n*", s.bn, ", ", kstart, "] -> %Bs transpose\n");
  else absl::StrAppend(&t, "        copy %B[", bidx_b, kstart, ", %n*", s.bn, "] -> %Bs\n");
  absl::StrAppend(&t, "        sync global -> stage\n");
  std::string ind = "        ";
  std::string kk = "0";
  if (tk != s.bk) {
    absl::StrAppend(&t, "        pipelined(2) %kk = ", s.bk / tk, " {\n");
    ind = "          ";
    kk = absl::StrCat("%kk*", tk);
  }
  absl::StrAppend(&t, ind, "copy %As[%wm*", s.gm, ", ", kk, "] -> %Aa\n");
  absl::StrAppend(&t, ind, "copy %Bs[", kk, ", %wn*", s.gn, "] -> %Bb\n");
  absl::StrAppend(&t, ind, "sync stage -> operand_a\n");
  absl::StrAppend(&t, ind, "mma %acc += %Aa * %Bb\n");
  if (tk != s.bk) absl::StrAppend(&t, "        }\n");
  absl::StrAppend(&t, "      }\n");
  const std::string row = absl::StrCat("%m*", s.bm, " + %wm*", s.gm), col = absl::StrCat("%n*", s.bn, " + %wn*", s.gn);
  for (const auto& e : s.epilogue) {
    if (e == "bias_row") {
      absl::StrAppend(&t, "      copy %bias[", col, "] -> %bv\n      ew add %acc <- %acc, %bv\n");
    } else if (e == "bias_col") {
      absl::StrAppend(&t, "      copy %cbias[", row, ", 0] -> %cv\n      ew add %acc <- %acc, %cv\n");
    } else if (e == "residual") {
      absl::StrAppend(&t, "      copy %R[", bidx, row, ", ", col, "] -> %rv\n      ew add %acc <- %acc, %rv\n");
    } else if (e == "scale") {
      absl::StrAppend(&t, "      ew mul %acc <- %acc, 0.5\n");
    } else {
      absl::StrAppend(&t, "      ew ", e, " %acc <- %acc\n");
    }
  }
  absl::StrAppend(&t, "      copy %acc -> %Y[", bidx, row, ", ", col, "]", s.splits > 1 ? " add" : "", "\n");
  absl::StrAppend(&t, "    }\n  }\n}\n");
  return t;
}

inline tile::TileKernel ParseVerified(const std::string& text) {
  auto k = tile::Parse(text);
  EXPECT_TRUE(k.ok()) << k.status() << "\n" << text;
  if (!k.ok()) return tile::TileKernel{};
  auto st = tile::Verify(*k, CudaLikeTarget());
  EXPECT_TRUE(st.ok()) << st << "\n" << text;
  return std::move(*k);
}

// An elementwise kernel: Y = OP chain over X [rows, cols] and a row-broadcast %b [1, cols].
inline std::string EwText(const std::string& name, const std::string& dt, int64_t rows, int64_t cols, int64_t br,
                          int64_t bc, const std::vector<std::string>& steps) {
  std::string t = absl::StrCat("kernel @", name, " {\n");
  absl::StrAppend(&t, "  arg %X : ", dt, "[", rows, ",", cols, "] in\n");
  absl::StrAppend(&t, "  arg %b : ", dt, "[1,", cols, "] in\n");
  absl::StrAppend(&t, "  arg %c : f32[", rows, ",1] in\n");
  absl::StrAppend(&t, "  arg %Y : ", dt, "[", rows, ",", cols, "] out\n");
  absl::StrAppend(&t, "  grid %r = ", Tiles(rows, br), ", %c0 = ", Tiles(cols, bc), " {\n");
  absl::StrAppend(&t, "    buffer %x : f32[", br, ",", bc, "] vector\n");
  absl::StrAppend(&t, "    buffer %bb : f32[1,", bc, "] vector\n");
  absl::StrAppend(&t, "    buffer %cc : f32[", br, ",1] vector\n");
  absl::StrAppend(&t, "    buffer %m : bool[", br, ",", bc, "] vector\n");
  absl::StrAppend(&t, "    copy %X[%r*", br, ", %c0*", bc, "] -> %x\n");
  absl::StrAppend(&t, "    copy %b[0, %c0*", bc, "] -> %bb\n");
  absl::StrAppend(&t, "    copy %c[%r*", br, ", 0] -> %cc\n");
  for (const auto& s : steps) absl::StrAppend(&t, "    ", s, "\n");
  absl::StrAppend(&t, "    copy %x -> %Y[%r*", br, ", %c0*", bc, "]\n  }\n}\n");
  return t;
}

}  // namespace kiln::target::cuda::testing
