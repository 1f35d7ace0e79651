//===- machine.h - Machine descriptions of the simulated NPU ----*- C++ -*-===//
//
// A machine description is a `kiln.sim.Machine` message (machine.proto) in
// protobuf text format. Loading one fills every field the file leaves out
// with its documented default (the ascend910-like figures), then validates
// it: unknown fields, negative sizes and zero clocks or bandwidths are
// errors that name the field. The model only ever sees a complete,
// validated Machine.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "sim/isa/isa.h"
#include "sim/machine/machine.pb.h"

namespace kiln::sim {

// The defaults of machine.proto, every field set.
Machine DefaultMachine();

// Parses a text-format description; `source` names it in errors.
absl::StatusOr<Machine> ParseMachine(const std::string& text, const std::string& source);

// Reads and parses a file.
absl::StatusOr<Machine> LoadMachine(const std::string& path);

// Checks a complete description (every field set); names the first bad field.
absl::Status ValidateMachine(const Machine& m);

// Derived figures the model and the reports use.
double HbmBytesPerCycle(const Machine& m);       // chip HBM bandwidth in bytes per core cycle
double L2BytesPerCycle(const Machine& m);        // chip L2 bandwidth in bytes per core cycle
double GmUbBytesPerCycle(const Machine& m);      // MTE2 into UB, per core
// The pace of one GM -> UB copy of `bytes`: its first mte2_ub_fast_bytes at
// mte2_ub_fast_bytes_per_cycle, the rest at GmUbBytesPerCycle.
double GmUbCopyBytesPerCycle(const Machine& m, double bytes);
// The pace of one UB -> GM copy of `bytes` (mte3_fast_bytes the same way).
double UbGmCopyBytesPerCycle(const Machine& m, double bytes);
double L0bBytesPerCycle(const Machine& m);       // MTE1 into L0B, per core
// Cycles of one repeat (256 bytes) of vector instruction `op` on elements of
// `element_bytes`: special functions (IsSpecialFunction) take
// vector_special_cycles_per_repeat times a plain one; exp and ln the
// machine's element rate where it gives one. The one rule the model and
// the kernel generators' estimates share.
double VectorCyclesPerRepeat(const Machine& m, Op op, int element_bytes);
// The cycles one vector instruction of `repeats` repeats occupies the unit:
// its repeats at VectorCyclesPerRepeat, plus what a 2-byte special
// function adds, and no fewer than the machine's floors (vector_min_cycles;
// vector_fp16_min_cycles for 2-byte plain instructions). The model's rule,
// and the kernel generators' estimate of one instruction.
double VectorInstructionCycles(const Machine& m, Op op, int element_bytes, int64_t repeats);
double HostLinkBytesPerCycle(const Machine& m);  // PCIe bandwidth per direction in bytes per core cycle
double ChipLinkBytesPerCycle(const Machine& m);  // one chip link's bandwidth per direction in bytes per core cycle
double UsToCycles(const Machine& m, double us);  // microseconds to core cycles
// The core cycles an AICPU task of `ops` ops takes on one AICPU core:
// launch_cycles + ops / ops_per_cycle AICPU cycles, at the AICPU's clock.
double AicpuTaskCycles(const Machine& m, double ops);

// The core cycles an AllReduce of `bytes` bytes among `chips` chips takes
// over the chip links (data-parallel training: every chip holds `bytes`
// bytes and ends with their elementwise reduction over all chips):
//
//   chips == 1: 0 cycles (nothing to exchange).
//   Otherwise p = min(chip_links.count, chips - 1) links are used at once
//   (p == 0 is an error: the machine has no chip links), and
//     chunk  = ceil(bytes / chips)                 bytes
//     rounds = ceil((chips - 1) / p)
//     cycles = 2 * rounds * (UsToCycles(m, chip_links.latency_us) + chunk / ChipLinkBytesPerCycle(m))
//
// that is, a reduce-scatter then an all-gather: in each phase a chip
// exchanges one chunk with each of its chips - 1 peers, p of them at a time,
// each exchange paying the link latency and the chunk's bytes over one
// link. With a full mesh (count >= chips - 1) each phase is one round; with
// one link (a ring) each phase is chips - 1 rounds. The additions of the
// reduction are not charged, and neither is HBM traffic. chips < 1 or
// bytes < 0 is an InvalidArgument error.
absl::StatusOr<double> AllReduceCycles(const Machine& m, int64_t bytes, int chips);

}  // namespace kiln::sim
