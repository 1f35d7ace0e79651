//===- cube_kasm.h - Emitting cube programs as .kasm text --------*- C++ -*-===//
//
// What the cube generators (cube_matmul.cc, cube_conv.cc, cube_img2col.cc)
// share to write their programs: the text emitter, vector instructions over
// n elements, and the register assignment of the GEMM program, whose
// convolution mode calls back into the Conv generator.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
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

// Steps register `reg` (a tile index) by `step` over the tiles whose
// maximum, an fp32 word at UB[maxes + 4 * tile] (as `vcmax` leaves them),
// is -inf, stopping at the first that is not or where the branch `stop`
// ("bge r1, 7": completed with the end label) is taken; `tmp` is scratch.
// The attention kernels find the tiles a mask leaves live this way.
inline void SkipMaskedTiles(Emitter& e, absl::string_view label, int reg, int tmp, int64_t maxes, int step,
                            absl::string_view stop) {
  constexpr int64_t kNegInfWord = -8388608;  // -inf in fp32, 0xff800000, compared as an integer
  const std::string done = absl::StrCat(label, "_done");
  e.Label(label);
  e.L(stop, ", ", done);
  e.L("mul r", tmp, ", r", reg, ", 4");
  e.L("ld.s32 r", tmp, ", UB[r", tmp, " + ", maxes, "]");
  e.L("bne r", tmp, ", ", kNegInfWord, ", ", done);
  e.L("add r", reg, ", r", reg, ", ", step);
  e.L("jmp ", label);
  e.Label(done);
}

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

// One vector instruction over `n` elements (256 bytes of the wider of the
// destination's and the source's elements per repeat), split into pieces of
// at most 255 repeats and a masked rest. `tail` holds other operands and
// attributes (a scalar, strides). dst/src/src1 are UB offsets in bytes,
// advanced by each piece unless fixed; `src_es` is the source's element size
// (0: no source), src1 < 0: no second source.
inline void VecOver(Emitter& e, absl::string_view op, int64_t n, int dst_es, int64_t dst, int src_es, int64_t src,
                    int64_t src1, absl::string_view tail, bool src_fixed = false, bool src1_fixed = false) {
  const int64_t epr = 256 / std::max(dst_es, std::max(src_es, 1));
  int64_t done = 0;
  while (done < n) {
    const int64_t reps = std::min<int64_t>(255, (n - done + epr - 1) / epr);
    const int64_t cnt = std::min(reps * epr, n - done);
    const int64_t full = cnt / epr, rest = cnt % epr;
    auto emit = [&](int64_t r, int64_t mask, int64_t off) {
      std::string line = absl::StrCat(op, " UB[", dst + off * dst_es, "]");
      if (src_es) absl::StrAppend(&line, ", UB[", src_fixed ? src : src + off * src_es, "]");
      if (src1 >= 0) absl::StrAppend(&line, ", UB[", src1_fixed ? src1 : src1 + off * src_es, "]");
      absl::StrAppend(&line, tail, ", repeat=", r);
      if (mask != epr) absl::StrAppend(&line, ", mask=", mask);
      e.Line(line);
    };
    if (full) emit(full, epr, done);
    if (rest) emit(1, rest, done + full * epr);
    done += cnt;
  }
}

}  // namespace kiln::target::npusim
