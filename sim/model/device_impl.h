//===- device_impl.h - The chip's state, shared by its parts ----*- C++ -*-===//
//
// Device::Impl is one simulated chip: its memory, programs and streams,
// the state of a run, and the wait helpers every SystemC process uses. Each
// part of the model defines its own members in the file named for it:
// memory_arbiter.cc (the HBM and L2 bandwidth arbiters), core_pipes.cc (each AI core's
// scalar unit and pipes), streams.cc (the streams: launches, copies, events),
// aicpu.cc (the AICPU cluster), links.cc (the chip links) and
// l2_prefetch.cc (reads into the L2 ahead of use); device.cc wires
// them into a chip and runs it. Internal to sim/model: it includes SystemC.
//
// One cycle is 1000 ps of SystemC time.
//
// Waits carry no abort event (an or-list costs an allocation per wait): an
// aborted run wakes every process once (WakeAll) and lets timed waits run
// out; each wait helper then returns false.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <systemc>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/support/status.h"
#include "sim/isa/isa.h"
#include "sim/isa/verify.h"
#include "sim/machine/machine.pb.h"
#include "sim/model/core_state.h"
#include "sim/model/device.h"
#include "sim/model/l2_cache.h"
#include "sim/model/memory.h"
#include "sim/model/trace.h"

namespace kiln::sim {

using sc_core::sc_event;
using sc_core::sc_time;

inline constexpr double kPsPerCycle = 1000.0;

inline sc_time Cycles(double c) {
  if (c <= 0) return sc_core::SC_ZERO_TIME;
  return sc_time::from_value(static_cast<sc_dt::uint64>(std::ceil(c * kPsPerCycle - 1e-6)));
}

struct StreamOp {
  enum Kind { kLaunch, kH2D, kD2H, kD2D, kAicpu, kAllReduce, kPrefetch, kRecord, kWait } kind = kLaunch;
  KernelId kernel = -1;
  int64_t block_dim = 0;
  std::vector<DevAddr> args;
  DevAddr dev = 0;
  DevAddr src = 0;  // kD2D: the source (dev is the destination)
  void* host = nullptr;
  const void* chost = nullptr;
  int64_t bytes = 0;
  std::string name;
  double ops = 0;
  double cycles = 0;  // kAllReduce: its time on the chip links, from AllReduceCycles
  std::function<absl::Status(Device&)> fn;
  EventId event = -1;
  int64_t target = 0;  // kWait: the record count to wait for
  bool computes = false;  // kLaunch: computes its values in a timing-only run too
};

// A DMA's wait for the HBM arbiter (on the DMA's pipe's stack).
struct Xfer {
  bool finished = false;
  sc_event done;
};

// A transfer in flight, as the arbiter plans it: the transfers are kept
// side by side, so a re-plan does not visit each waiting pipe's stack.
struct XferSlot {
  double bytes;
  double remaining;
  double cap;
  double rate;
  Xfer* owner;
};

// A shared bandwidth (HBM, the L2) and the transfers it carries.
struct Arbiter {
  Arbiter(int trace_track, const char* counter_name) : track(trace_track), counter(counter_name) {}
  int track;            // the trace process of its counter
  const char* counter;  // the counter's name ("HBM GB/s")
  double bw = 0;            // bytes per cycle
  std::vector<XferSlot> xfers;
  sc_event ev;  // the next finish of a transfer
  double last = 0;
  std::vector<XferSlot*> order;
  double total = -1;
  void Reset(double bytes_per_cycle) {
    xfers.clear();
    ev.cancel();
    total = -1;
    last = 0;
    bw = bytes_per_cycle;
  }
};

struct Device::Impl {
  Machine machine;
  DeviceMemory memory;
  BufferSizes sizes;
  std::vector<std::unique_ptr<Program>> programs;
  std::vector<std::vector<StreamOp>> streams;
  std::vector<int64_t> records_enqueued;
  Trace trace;
  int64_t run_count = 0;
  Device* self = nullptr;

  // ----- Per-run state -----
  RunOptions opt;
  sc_time t0;
  bool aborted = false;
  absl::Status error;
  bool shutdown = false;   // the device is going: the engine threads exit
  int live_threads = 0;    // this run's stream threads
  int engine_threads = 0;  // the cores' threads and the HBM arbiter, kept between runs
  bool engine_alive = false;
  int streams_done = 0;
  std::vector<std::unique_ptr<CoreState>> cores;
  std::deque<std::unique_ptr<LaunchState>> launches;
  sc_event work_ev;
  std::vector<int64_t> records_done;
  std::vector<std::unique_ptr<sc_event>> event_evs;
  std::vector<std::string> stream_state;
  // When each stream's last L2 prefetch ended (-1: none yet): one that
  // follows it at once continues its stream of requests (l2_prefetch.cc).
  std::vector<double> prefetch_end;
  bool link_busy[2] = {false, false};
  sc_event link_ev[2];
  std::vector<bool> aicpu_busy;
  sc_event aicpu_ev;
  bool links_busy = false;  // the chip links carry one collective at a time
  sc_event links_ev;
  Arbiter hbm{Trace::kHbm, "HBM GB/s"};
  Arbiter l2{Trace::kL2, "L2 GB/s"};
  L2Cache l2_tags;
  // The L2 prefetches' pieces in flight: a DMA that reads a line of one
  // waits for it to arrive and then hits, as a miss merged with the fill
  // already outstanding for its line would (l2_prefetch.cc).
  struct PendingFill {
    uint64_t begin, end;
    sc_event done;
  };
  std::vector<PendingFill*> pending_fills;
  // Waits until no pending fill overlaps [addr, addr + len); false when the
  // run was aborted.
  bool WaitForFills(uint64_t addr, int64_t len);
  int64_t next_flow = 0;
  RunStats stats;

  explicit Impl(const Machine& m);
  ~Impl();

  // Waits begun by any process: simulated time can only have moved for a
  // process while this count changed (SystemC processes are cooperative).
  uint64_t waits = 0;

  double Now() const { return static_cast<double>((sc_core::sc_time_stamp() - t0).value()) / kPsPerCycle; }

  void Fail(absl::Status s) {
    if (aborted) return;
    aborted = true;
    error = std::move(s);
  }
  bool WaitCycles(double c) {
    if (aborted) return false;
    if (c > 0) {
      ++waits;
      sc_core::wait(Cycles(c));
    }
    return !aborted;
  }
  bool WaitUntil(double t) { return WaitCycles(t - Now()); }
  bool WaitEvent(sc_event& e) {
    if (aborted) return false;
    ++waits;
    sc_core::wait(e);
    return !aborted;
  }

  // ----- The chip (device.cc) -----
  void WakeAll();
  template <typename F>
  void Spawn(const std::string& name, bool engine, F f);
  void StopEngine();
  std::string DeadlockReport();
  absl::StatusOr<RunStats> Run(const RunOptions& options);

  // ----- HBM and the L2 (memory_arbiter.cc) -----
  void ArbAdvance(Arbiter& a);
  void ArbReplan(Arbiter& a);
  void ArbMain(Arbiter& a);
  void ArbStart(Arbiter& a, double bytes, double cap, Xfer* x);
  // Moves `hbm_bytes` through HBM and `l2_bytes` through the L2 at once,
  // each at up to its cap; false when the run was aborted.
  bool Transfer(double hbm_bytes, double hbm_cap, double l2_bytes = 0, double l2_cap = 0);

  // ----- Cores (core_pipes.cc) -----
  void NameCoreTracks(int core);
  bool Drain(CoreState& c);
  bool Sync(CoreState& c, Pipe p, const Issued& x, double* t);
  bool ExecuteData(CoreState& c, Pipe p, const Issued& x, double* t);
  void PipeMain(CoreState& c, Pipe p);
  bool WaitForSlot(CoreState& c, PipeState& ps, size_t depth, double* local);
  bool RunBlock(CoreState& c, LaunchState& L, int64_t block);
  // sync_all: waits until every block of the launch has reached
  // the barrier or ended, then the barrier's latency; false when aborted.
  bool SyncAll(LaunchState& L, int64_t block);
  // Releases the launch's barrier when every block not ended is at it.
  void MaybeReleaseSync(LaunchState& L);
  void CoreMain(CoreState& c);

  // ----- Streams (streams.cc) -----
  void StreamMain(int s);

  // ----- AICPU (aicpu.cc) -----
  // A stream's AICPU task; false when the run was aborted.
  bool RunAicpuTask(int s, StreamOp& op, std::string* label);

  // ----- Chip links (links.cc) -----
  // A stream's AllReduce; false when the run was aborted.
  bool RunAllReduce(int s, StreamOp& op, std::string* label);

  // ----- L2 prefetches (l2_prefetch.cc) -----
  // A stream's prefetch; false when the run was aborted.
  bool RunPrefetch(int s, StreamOp& op, std::string* label);
};

inline absl::Status CheckStream(const Device::Impl& d, StreamId s) {
  if (s < 0 || s >= static_cast<int>(d.streams.size())) return InvalidArgument("no stream ", s);
  return absl::OkStatus();
}

}  // namespace kiln::sim
