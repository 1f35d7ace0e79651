//===- device.h - The simulated NPU, as the runtime drives it ---*- C++ -*-===//
//
// A Device is one simulated chip: AI cores (each with its SCALAR, MTE1,
// MTE2, MTE3, CUBE, VECTOR and FIXP pipes as SystemC processes), HBM shared
// through a bandwidth arbiter, an AICPU cluster, a host linked by PCIe, and
// chip links to peer chips for collectives (the peers are not simulated:
// they run the same streams in step, so a collective's time follows from
// the link figures). The runtime uses it the way it uses a real device:
//
//   auto dev = Device::Create(machine);
//   DevAddr a = dev->Malloc(bytes);            // untimed setup
//   dev->Write(a, host_data, bytes);
//   KernelId k = dev->LoadProgram(program);    // verified against the machine
//   StreamId s = dev->CreateStream();
//   dev->CopyH2D(s, a, host, bytes);           // timed over PCIe
//   dev->Launch(s, k, /*block_dim=*/8, {a, b, c});
//   dev->AllReduce(s, "grads", bytes, /*chips=*/8, reduce);  // timed over the chip links
//   dev->CopyD2H(s, host_out, c, bytes);
//   dev->CopyD2D(s, a, c, bytes);              // timed through HBM
//   RunStats stats = dev->Run(options);        // simulates everything enqueued
//
// Work enqueued on one stream runs in order; streams run concurrently and
// are ordered with events (RecordEvent / WaitEvent). Run() simulates from
// cycle 0 until every stream is done, then returns statistics, or an error:
// a deadlock (each blocked pipe with its program counter and awaited flag),
// the cycle limit, a bad memory access, a program that breaks a rule at run
// time. After Run() the queues are empty and memory holds the results.
//
// One Device runs at a time in a process (SystemC has one kernel); Run() is
// not reentrant. Devices may be created and destroyed freely.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/isa/isa.h"
#include "sim/machine/machine.pb.h"
#include "sim/model/memory.h"
#include "sim/model/trace.h"

namespace kiln::sim {

using KernelId = int;
using StreamId = int;
using EventId = int;

struct RunOptions {
  // Compute the values of every buffer; false: timing only (kernels skip
  // their arithmetic and data movement, but for launches that compute
  // (Launch's `computes`); copies, AICPU tasks and collectives still run,
  // and their functions are called either way).
  bool functional = true;
  // Record a trace (Device::trace()).
  bool trace = false;
  // Stop with an error past this many cycles.
  double cycle_limit = 1e11;
  // What the trace keeps (its size bound, merging, counter windows, the
  // cycles and kernels it covers).
  TraceOptions trace_options;
  // Called with the simulated time every progress_every_cycles while the
  // run lasts (a terminal's progress line); unset: the run goes in one go.
  std::function<void(double cycles)> progress;
  double progress_every_cycles = 100000;
};

struct PipeStats {
  double busy_cycles = 0;   // time spent executing instructions (a DMA: from its start to its completion;
                            // SCALAR: its own instructions and one cycle per instruction it issues)
  double stall_cycles = 0;  // time blocked in wait_flag (and, for SCALAR, on full queues and barriers)
  int64_t instructions = 0; // instructions this pipe executed (each instruction counts once, on its pipe)
  double energy_pj = 0;     // the dynamic energy of its instructions' actions (Machine.energy)
};

struct KernelStats {
  std::string name;
  int64_t block_dim = 0;
  int cores_used = 0;        // distinct cores that ran its blocks
  double start_cycle = 0, end_cycle = 0;
  std::array<PipeStats, kNumPipes> pipes{};  // summed over its blocks
  int64_t cube_macs = 0;
  double cube_peak_macs_per_cycle = 0;       // for its dtype mix: fp16 rate
  // The cycles its cube and vector instructions need at the units' peak
  // rates (no pipeline fill), summed over its blocks: the least time those
  // units could do its work in, on one core.
  double cube_cycles = 0, vector_cycles = 0;
  int64_t vector_elements = 0;               // elements its vector instructions computed
  int64_t hbm_read_bytes = 0, hbm_write_bytes = 0;  // misses read, dirty lines written back
  // Bytes the L2 served: reads that hit, and writes it absorbed; and the
  // bytes of reads that missed (hbm_read_bytes are the whole lines fetched).
  int64_t l2_hit_bytes = 0, l2_write_bytes = 0, l2_miss_bytes = 0;
};

struct RunStats {
  double total_cycles = 0;
  double seconds = 0;  // total_cycles at the machine's clock
  double wall_seconds = 0;  // the host's time to simulate the run (the simulator's own speed)
  std::vector<std::array<PipeStats, kNumPipes>> cores;  // per core, per pipe
  std::vector<KernelStats> kernels;                      // in launch order
  int64_t instructions = 0;  // executed, over all pipes and cores
  int64_t hbm_read_bytes = 0, hbm_write_bytes = 0;
  int64_t l2_hit_bytes = 0, l2_write_bytes = 0, l2_miss_bytes = 0;
  int64_t h2d_bytes = 0, d2h_bytes = 0;
  int64_t d2d_bytes = 0;  // copied within device memory (CopyD2D)
  int64_t aicpu_tasks = 0;
  // Each AICPU task by name, its start and end cycle, in the order they finished.
  struct AicpuSpan {
    std::string name;
    double start = 0, end = 0;
  };
  std::vector<AicpuSpan> aicpu_spans;
  // AllReduces run over the chip links, and the bytes each chip contributed to them.
  int64_t collectives = 0;
  int64_t collective_bytes = 0;
  // Read from HBM into the L2 by prefetches (PrefetchL2), ahead of the
  // kernels that read them, and the dirty lines their fills evicted; parts
  // of hbm_read_bytes and hbm_write_bytes.
  int64_t l2_prefetch_bytes = 0, l2_prefetch_writeback_bytes = 0;
  // Start (the links taken) and end cycle of each collective, in the order they finished.
  std::vector<std::pair<double, double>> collective_spans;
};

class Device {
 public:
  static absl::StatusOr<std::unique_ptr<Device>> Create(const Machine& machine);
  ~Device();

  const Machine& machine() const;

  // Device memory, untimed (setup and inspection).
  absl::StatusOr<DevAddr> Malloc(int64_t bytes);
  absl::Status Free(DevAddr addr);
  absl::Status Write(DevAddr dst, const void* src, int64_t bytes);
  absl::Status Read(DevAddr src, void* dst, int64_t bytes);

  // Verifies `program` against this machine's buffers and keeps it.
  absl::StatusOr<KernelId> LoadProgram(Program program);
  const Program& program(KernelId id) const;

  StreamId CreateStream();
  EventId CreateEvent();

  // Enqueues a kernel: `block_dim` blocks (block_idx 0..block_dim-1) spread
  // over the AI cores; `args` gives the device address of each program
  // argument. A launch with `computes` set computes its values in a
  // timing-only run too: a kernel whose control flow reads data (`ld` of
  // what it loaded), and the kernels that produce that data, so that the
  // timing-only run takes the branches the functional one takes.
  absl::Status Launch(StreamId s, KernelId k, int64_t block_dim, std::vector<DevAddr> args, bool computes = false);
  // Timed copies over the host link; the host buffer must stay valid until Run() returns.
  absl::Status CopyH2D(StreamId s, DevAddr dst, const void* src, int64_t bytes);
  absl::Status CopyD2H(StreamId s, void* dst, DevAddr src, int64_t bytes);
  // A copy within device memory: its bytes are read and then written
  // through HBM (2 * bytes, sharing the bandwidth with the kernels'
  // transfers in flight), then the HBM latency.
  absl::Status CopyD2D(StreamId s, DevAddr dst, DevAddr src, int64_t bytes);
  // An AICPU task: `fn` runs on the host with this device's memory when the
  // task completes; it takes launch_cycles + ops / ops_per_cycle AICPU cycles.
  absl::Status LaunchAicpu(StreamId s, std::string name, double ops, std::function<absl::Status(Device&)> fn);
  // An AllReduce of `bytes` bytes among `chips` chips (this one and chips-1
  // peers running the same stream in step) over the chip links: it starts
  // when the links are free (one collective at a time per chip), takes
  // AllReduceCycles(machine, bytes, chips) cycles, and then `fn` runs with
  // this device's memory (it computes the reduced values). Refused here
  // when chips < 1, bytes < 0, or chips > 1 on a machine without chip links.
  absl::Status AllReduce(StreamId s, std::string name, int64_t bytes, int chips,
                         std::function<absl::Status(Device&)> fn);
  // Reads [addr, addr + bytes) into the L2 ahead of the kernels that read
  // it (a weight before its MatMul), through HBM, sharing its bandwidth:
  // a timing hint that orders nothing (a kernel reading a line before it
  // has arrived reads HBM itself). Nothing on a chip without an L2.
  absl::Status PrefetchL2(StreamId s, DevAddr addr, int64_t bytes);
  // Events: WaitEvent blocks its stream until the RecordEvent enqueued on
  // another stream (before this wait, in enqueue order) has been reached.
  absl::Status RecordEvent(StreamId s, EventId e);
  absl::Status WaitEvent(StreamId s, EventId e);

  absl::StatusOr<RunStats> Run(const RunOptions& options = {});

  // The trace of the last Run() with options.trace.
  const Trace& trace() const;

  struct Impl;

 private:
  explicit Device(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::sim
