//===- cuda_gemm_match.h - A GEMM tile kernel's structure, for its CUDA C++ -*- C++ -*-===//
//
// The canonical GEMM form of tile_lowering.h read back out of a tile
// kernel: the grid and group loops, the K loop, A's and B's stage tiles and
// fragments, the MMA and the epilogue, with the tiling they imply (block,
// warp and stage sizes, split-K, batch). cuda_gemm.cc prints its variants
// from it; a kernel that is not of this form is refused with the reason.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "target/backend/tile_ir.h"
#include "target/cuda/codegen/codegen_util.h"

namespace kiln::target::cuda::internal {

// A stage tile in shared memory: `lines` lines of `contig` elements, the
// contiguous dimension of the global tensor it comes from.
struct StageLayout {
  int64_t lines = 0, contig = 0, elem = 2;
  int64_t panel = 128;      // bytes per panel line
  int64_t bytes = 0;        // one copy
  int64_t slot_stride = 0;  // one copy, rounded up to 1024 bytes
  std::string Offset(const std::string& line, const std::string& byte) const {
    return absl::StrCat("kiln::tile_offset<", lines, ", ", panel, ">(", line, ", ", byte, ")");
  }
  int SwizzleMode() const { return panel == 128 ? 1 : panel == 64 ? 2 : panel == 32 ? 3 : 0; }
};

// One matrix operand (A or B) of the GEMM.
struct Operand {
  const tile::Stmt* load = nullptr;     // copy global -> stage
  const tile::Stmt* stage = nullptr;    // the stage buffer
  const tile::Stmt* frag_copy = nullptr;  // copy stage -> operand
  const tile::Stmt* operand = nullptr;  // the operand buffer
  const tile::TileArg* arg = nullptr;
  bool mn_major = false;          // the stage tile's lines run along K (A stored [K, M], B stored [K, N])
  StageLayout layout;
  int copy_bytes = 16;            // cp.async size; 0: plain loads and stores (conversion or misalignment)
};

// A GEMM tile kernel's statements and the tiling they imply.
struct Gemm {
  Names names;
  const tile::Stmt* grid = nullptr;
  const tile::Stmt* group = nullptr;
  const tile::Stmt* kloop = nullptr;
  const tile::Stmt* mma = nullptr;
  const tile::Stmt* acc = nullptr;
  const tile::Stmt* fill = nullptr;
  Operand a, b;
  std::vector<const tile::Stmt*> epilogue;
  std::string m_var, n_var, s_var;
  std::vector<tile::LoopVar> batch_vars;
  int64_t mt = 1, nt = 1, splits = 1, batch = 1;
  int64_t bm = 0, bn = 0, bk = 0, gm = 0, gn = 0, kt = 0;
  int stages = 1;
  int warps = 1;
  std::string wm_var, wn_var;  // group variables of the warp's row and column offsets ("" when absent)
  DType in = DType::kF16;
  bool split_tf32 = false;     // f32 products as three tf32 products (CudaArch::split_tf32)
  int64_t kstep = 16;          // elements of K per MMA
  std::map<std::string, int64_t> extent;  // every loop variable's trip count
};

// The largest value of an affine expression over its variables' ranges.
int64_t MaxOf(const tile::Affine& a, const std::map<std::string, int64_t>& extent);

// The GEMM `k` is, or why it is none.
absl::StatusOr<Gemm> Match(const tile::TileKernel& k);

}  // namespace kiln::target::cuda::internal
