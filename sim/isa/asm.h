//===- asm.h - The .kasm assembly of NPU programs ---------------*- C++ -*-===//
//
// `.kasm` is the text form of a Program (docs/kasm.md). Assemble() reads it,
// Disassemble() writes it; the two round-trip exactly: assembling the
// disassembly of a program gives the same program, and disassembling that
// again gives the same text.
//
// A .kasm file run with `kiln sim` also says how to fill each global-memory
// argument before the run (zeros, a seeded random fill, or a .npy file),
// which arguments to write out after it, and the block dimension: that is
// KasmFile. A compiled artifact carries only the Program.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "sim/isa/isa.h"

namespace kiln::sim {

enum class InitKind { kZero, kRandom, kNpy };

// How `kiln sim` fills one argument and whether it writes it out.
struct ArgData {
  InitKind init = InitKind::kZero;
  uint64_t seed = 0;    // kRandom: values uniform in [-1, 1) (integers in [-8, 8))
  std::string npy;      // kNpy: the file, relative to the .kasm file
  std::string output;   // non-empty: write the buffer to this .npy after the run
  bool operator==(const ArgData&) const = default;
};

struct KasmFile {
  Program program;
  std::vector<ArgData> data;  // one per program argument
  int64_t block_dim = 1;
  bool operator==(const KasmFile&) const = default;
};

// Parses and verifies a .kasm text; `source` names it in errors
// ("file.kasm:12: unknown instruction 'vad'").
absl::StatusOr<KasmFile> Assemble(absl::string_view text, const std::string& source);

// The canonical text of a file or a program (the program part alone has no
// `.block_dim` and no init/output clauses).
std::string Disassemble(const KasmFile& file);
std::string Disassemble(const Program& program);

// The values of `init=random(SEED)`: `count` elements of `dtype` written to
// `dst`, floats uniform in [-1, 1) rounded to the dtype, integers uniform in
// [-8, 8). The same seed always gives the same values.
void RandomFill(DType dtype, uint64_t seed, void* dst, int64_t count);

// One instruction as it appears in the disassembly, without labels.
std::string InstText(const Program& program, const Inst& inst);

}  // namespace kiln::sim
