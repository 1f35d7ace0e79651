//===- vector_kasm.h - A .kasm text builder for the vector kernels -*- C++ -*-===//
//
// The vector kernel generators write .kasm text (docs/kasm.md) through Kasm
// and assemble it at the end: registers and labels are allocated here, and
// vector instructions of any element count are split into instructions of
// at most 255 repeats plus a masked tail repeat. UB operands are a base
// register plus a byte offset (the ping-pong slot register plus a static
// offset); a broadcast operand reads one 32-byte block for every block
// (block and repeat strides 0), which is how a per-row or scalar value
// meets a whole row.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/isa/isa.h"
#include "sim/machine/machine.pb.h"
#include "target/npusim/kernels/kernel.h"  // CeilDiv, RoundUp

namespace kiln::target::npusim::vec {

// A UB address: a base register (-1 for none) plus a byte offset.
struct Ub {
  int reg = -1;
  int64_t off = 0;
  Ub Plus(int64_t bytes) const { return Ub{reg, off + bytes}; }
};

// A vector operand: an address walked contiguously, or a broadcast block.
struct VArg {
  Ub at;
  bool bcast = false;
};
inline VArg V(Ub at) { return VArg{at, false}; }
inline VArg Bcast(Ub at) { return VArg{at, true}; }


class Kasm {
 public:
  Kasm(std::string name, const sim::Machine& machine);

  const sim::Machine& machine() const { return machine_; }
  void AddArg(std::string line) { args_.push_back(std::move(line)); }
  // A fresh scalar register (r0 is free too; registers are never released).
  int Reg();
  std::string NewLabel(absl::string_view stem);
  void Label(const std::string& label);
  // Any instruction line, as written in .kasm.
  void Op(std::string text);

  // Scalar helpers.
  void Mov(int rd, int64_t v);
  void Alu(absl::string_view op, int rd, int ra, int64_t imm);    // rd = ra op imm
  void AluR(absl::string_view op, int rd, int ra, int rb);        // rd = ra op rb

  // DMA. `gm_reg` may be -1 (static offset).
  void CopyIn(Ub dst, absl::string_view arg, int gm_reg, int64_t gm_off, int64_t len, int64_t nburst = 1,
              int64_t src_stride = -1, int64_t dst_stride = -1);
  void CopyOut(absl::string_view arg, int gm_reg, int64_t gm_off, Ub src, int64_t len, int64_t nburst = 1,
               int64_t src_stride = -1, int64_t dst_stride = -1);
  void SetFlag(absl::string_view src, absl::string_view dst, int id);
  void WaitFlag(absl::string_view src, absl::string_view dst, int id);

  // Vector instructions over `n` elements. `op` is the mnemonic without the
  // dtype ("vadd"); srcs are 1 or 2 operands; imm is the scalar of vadds,
  // vmuls, vmaxs, vmins (and vdup, with no srcs).
  void Vec(absl::string_view op, sim::DType dt, VArg dst, const std::vector<VArg>& srcs, int64_t n,
           std::optional<double> imm = std::nullopt);
  // vconv.to.from over n elements; `round` for f32 -> s32 ("trunc", ...).
  void Conv(sim::DType to, sim::DType from, VArg dst, VArg src, int64_t n, absl::string_view round = "");
  // A copy of n elements of dtype dt as raw 32-bit words (any float dtype).
  void CopyBits(sim::DType dt, Ub dst, Ub src, int64_t n);
  // vcadd/vcmax/vcmin: each of `repeat` repeats (first `mask` elements)
  // reduced to one element, written contiguously at dst.
  void Reduce(absl::string_view op, sim::DType dt, Ub dst, Ub src, int64_t repeat, int64_t mask);
  // One vector instruction as given: `mnemonic` with its dtypes ("vmax.f32"),
  // operands, repeat, mask (elements per repeat `epr` when full) and extra
  // attributes ("dst_rep_stride=4, ..."); counted in vector_cycles.
  void Raw(absl::string_view mnemonic, Ub dst, const std::vector<Ub>& srcs, int64_t repeat, int64_t mask, int64_t epr,
           absl::string_view extra = "", std::optional<double> imm = std::nullopt);
  // Fills the 8 blocks at dst with src[0..7], one element per block.
  void Brcb(sim::DType dt, Ub dst, Ub src, int64_t repeat = 1);

  // Cycles the vector unit spends on the instructions emitted so far (a
  // static count: an instruction inside a loop counts once).
  double vector_cycles() const { return vector_cycles_; }
  // copy_gm_ub instructions emitted so far (a static count, as above).
  int64_t copies_in() const { return copies_in_; }

  std::string Text() const;
  absl::StatusOr<sim::Program> Finish() const;

 private:
  void VecOne(absl::string_view mnemonic, VArg dst, const std::vector<VArg>& srcs, int dst_es,
              const std::vector<int>& src_es, int64_t repeat, int64_t mask, int64_t epr, std::optional<double> imm,
              absl::string_view extra);

  const sim::Machine& machine_;
  std::string name_;
  std::vector<std::string> args_;
  std::vector<std::string> lines_;
  int next_reg_ = 0;
  int next_label_ = 0;
  double vector_cycles_ = 0;
  int64_t copies_in_ = 0;
};

std::string UbText(Ub u);
std::string FloatImm(double v);

}  // namespace kiln::target::npusim::vec
