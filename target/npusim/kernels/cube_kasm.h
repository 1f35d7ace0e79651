//===- cube_kasm.h - Emitting cube programs as .kasm text --------*- C++ -*-===//
//
// What the cube generators (cube_matmul.cc, cube_conv.cc) share to write
// their programs: the text emitter and the register assignment of the GEMM
// program, whose convolution mode calls back into the Conv generator.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kiln::target::npusim {

// Registers of the GEMM program.
enum CubeReg {
  kTmp = 0,
  kTile = 1,      // this block's current tile index (in a unit, in conv mode)
  kBlockDim = 2,  // block_dim
  kL1 = 3,        // L1 slot offset
  kL0A = 4,       // L0A slot offset
  kL0B = 5,       // L0B slot offset
  kL0C = 6,       // L0C buffer offset
  kUbOut = 7,     // UB output slot offset (tiles through UB without an epilogue)
  kAOff = 8,      // byte offsets into A, B, Y, C of the current tile / stage
  kBOff = 9,
  kYOff = 10,
  kCOff = 11,
  kStage = 12,
  kT0 = 13,  // scratch for decoding a tile
  kT1 = 14,
  kT2 = 15,
  kT3 = 16,
  kT4 = 17,
  kT5 = 18,
  // Convolution mode: the unit (a share of the work with its own im2col),
  // the unit's byte offsets of A, B (the block's workspace slot), Y and C,
  // and scratch registers of the im2col.
  kUnit = 19,
  kUA = 20,
  kUB = 21,
  kUY = 22,
  kUC = 23,
  kC0 = 24,
  kC1 = 25,
  kC2 = 26,
  kC3 = 27,
  kC4 = 28,
  kC5 = 29,
  kC6 = 30,
  kC7 = 31,
  kC8 = 32,
  kNumCubeRegs = 33,
};

inline std::string R(int r) { return absl::StrCat("r", r); }

class Emitter {
 public:
  void Line(absl::string_view s) { absl::StrAppend(&text_, "  ", s, "\n"); }
  template <typename... T>
  void L(const T&... parts) { Line(absl::StrCat(parts...)); }
  void Label(absl::string_view l) { absl::StrAppend(&text_, l, ":\n"); }
  std::string NewLabel(absl::string_view stem) { return absl::StrCat(stem, "_", next_++); }
  std::string& text() { return text_; }

 private:
  std::string text_;
  int next_ = 0;
};

// r = half - r: flips a slot offset between 0 and `half`.
inline void Toggle(Emitter& e, int r, int64_t half) {
  e.L("mul ", R(r), ", ", R(r), ", -1");
  e.L("add ", R(r), ", ", R(r), ", ", half);
}

// An address operand `SPACE[rN + off]` (or `- off`).
inline std::string Addr(absl::string_view space, int reg, int64_t off) {
  if (off < 0) return absl::StrCat(space, "[", R(reg), " - ", -off, "]");
  return absl::StrCat(space, "[", R(reg), " + ", off, "]");
}

}  // namespace kiln::target::npusim
