//===- verify.h - The rules an NPU program must keep ------------*- C++ -*-===//
//
// VerifyProgram checks a program when it is assembled or loaded: register
// numbers, branch targets, operand spaces, dtypes, attribute ranges, and the
// alignment and bounds of every address it can compute statically (an
// address without a base register, or whose register is set once by `mov`
// from an immediate). Addresses that depend on registers are checked when
// the instruction issues, by CheckAccesses, with the same messages. Every
// message names the instruction by index and text, then the rule:
//   instruction 7 (vadd.f16 UB[0], UB[64], UB[300]): UB address 300 is not 32-byte aligned
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "sim/isa/isa.h"

namespace kiln::sim {

// Sizes of a core's local buffers in bytes, indexed by Space (GM unused).
struct BufferSizes {
  std::array<int64_t, 7> bytes{};
};

// One byte range an instruction reads or writes.
struct Access {
  int operand;
  Space space;
  int arg;          // GM: the argument index
  int64_t begin;    // bytes, from the space's (or argument's) start
  int64_t end;      // kUnboundedEnd where begin + span does not fit 64 bits
  bool write;
};

// The end of an access whose range does not fit int64_t: past every
// memory, so bounds checks refuse it instead of seeing a wrapped value.
inline constexpr int64_t kUnboundedEnd = INT64_MAX;

// The byte ranges touched by `in` when its address operands evaluate to
// `addr` (byte offsets; the reg + immediate sums). Returns the count. The
// spans are computed in 128 bits from attributes of at most
// kMaxAttribute, so none wraps.
int Accesses(const Inst& in, const std::array<int64_t, 4>& addr, std::array<Access, 4>* out);

// Alignment and bounds of the accesses; `sizes` may be null (local buffer
// bounds are then left to load time). `index` names the instruction.
absl::Status CheckAccesses(const Program& p, size_t index, const std::array<int64_t, 4>& addr,
                           const BufferSizes* sizes);

// The static rules. `sizes` as above.
absl::Status VerifyProgram(const Program& p, const BufferSizes* sizes = nullptr);

}  // namespace kiln::sim
