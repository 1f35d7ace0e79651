//===- exec.h - What each NPU instruction computes and costs ----*- C++ -*-===//
//
// The functional semantics of the data instructions (everything but scalar
// and sync ops), as plain functions over byte buffers, and their cost on a
// machine. The SystemC model calls these; they know nothing of time.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"

#include "sim/isa/isa.h"
#include "sim/machine/machine.pb.h"

namespace kiln::sim {

// Where the operands of one instruction live: a core's local buffers by
// Space, and the base pointers of the kernel's GM arguments.
struct ExecContext {
  std::array<uint8_t*, 7> local{};
  const std::vector<uint8_t*>* gm_args = nullptr;
};

// Applies `in` to memory; `addr` are the byte offsets of its address
// operands (already checked against the buffers).
void Execute(const Inst& in, const std::array<int64_t, 4>& addr, const ExecContext& ctx);

// How long an instruction takes. A DMA instruction (GM on one side) moves
// `gm_bytes` through the shared HBM at up to `rate_cap` bytes per cycle (its
// pipe's bandwidth, less for a DMA of short bursts: GmRuns), then
// completes `latency` cycles later (its pipe may start the next DMA
// meanwhile); any other occupies its pipe for latency + busy cycles.
struct Cost {
  bool dma = false;
  double busy = 0;        // cycles, non-DMA
  double latency = 0;     // cycles
  double hbm_latency = 0; // DMA: the part of `latency` that is HBM's (an L2 hit waits the L2's instead)
  int64_t gm_bytes = 0;   // DMA: bytes through HBM
  bool gm_write = false;  // DMA direction
  double rate_cap = 0;    // DMA: the pipe's own bandwidth in bytes per cycle
  // DMA: a posted write (core.fixp_gm_write_min_cycles): it completes when
  // its bytes have left the pipe, after at least this many cycles, with no
  // L2 or HBM latency; 0: not posted.
  double posted_min_cycles = 0;
  int64_t macs = 0;       // cube multiply-accumulates
  int64_t elements = 0;   // vector: elements it computes (repeats times the active elements of one)
  // The energy its action takes (Machine.energy): the arithmetic it does
  // and the bytes it reads and writes in each memory, in picojoules.
  double energy_pj = 0;
};
Cost InstCost(const Inst& in, const Machine& m);

// The bursts (runs of contiguous GM bytes) a DMA instruction moves: its rows,
// or 1 when they follow each other in GM; 0 for instructions that move
// nothing through GM. A DMA of n bursts moves at most
// bytes / (n * mte_burst_cycles) per cycle.
int64_t GmRuns(const Inst& in);

// Calls `f(operand, offset, bytes)` for each of those bursts, in order:
// `operand` is the instruction's GM operand and `offset` the burst's byte
// offset in its argument (`addr` holds the operands' offsets, as for
// Execute). Calls nothing for instructions that move nothing through GM.
void ForEachGmRun(const Inst& in, const std::array<int64_t, 4>& addr,
                  absl::FunctionRef<void(int operand, int64_t offset, int64_t bytes)> f);

}  // namespace kiln::sim
