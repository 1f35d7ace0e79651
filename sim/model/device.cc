//===- device.cc - The chip, wired from its parts -------------------------===//
//
// One SystemC thread per pipe per core and one HBM arbiter, spawned on the
// first Run() that launches a kernel and kept, idle between runs, until the
// device goes (or a run is aborted); one thread per stream for each run.
// SystemC elaborates once per process, so the model spawns dynamic processes
// instead of building modules, and time runs on across runs from an offset.
//
// The parts share the chip's state (Device::Impl, device_impl.h) and live
// in files named for them: the HBM and L2 arbiters (memory_arbiter.cc; the
// L2's tags in l2_cache.cc), the AI cores' pipes (core_pipes.cc), the
// streams (streams.cc), the AICPU cluster (aicpu.cc) and the chip links
// (links.cc). Here: the chip's threads and a
// run, the deadlock report, and the API's device memory and programs.
//
//===----------------------------------------------------------------------===//
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "sim/model/device.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <systemc>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"
#include "sim/isa/asm.h"
#include "sim/isa/verify.h"
#include "sim/machine/machine.h"
#include "sim/model/device_impl.h"
#include "sim/model/energy.h"

// libsystemc's own main() calls sc_main. kiln never runs that main (the model
// drives sc_start itself), but the shared library needs the symbol; weak, so
// a program that has its own sc_main keeps it.
__attribute__((weak)) int sc_main(int, char*[]) { return 0; }

namespace kiln::sim {

namespace {

void InitSystemC() {
  static std::once_flag once;
  std::call_once(once, [] {
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
    sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
    sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    sc_core::sc_report_handler::set_actions(sc_core::SC_WARNING, sc_core::SC_DO_NOTHING);
  });
}

}  // namespace

Device::Impl::Impl(const Machine& m) : machine(m), memory(m.chip().hbm_size_mib() << 20) {
  const Core& k = m.core();
  sizes.bytes[static_cast<int>(Space::kL1)] = k.l1_kib() << 10;
  sizes.bytes[static_cast<int>(Space::kL0A)] = k.l0a_kib() << 10;
  sizes.bytes[static_cast<int>(Space::kL0B)] = k.l0b_kib() << 10;
  sizes.bytes[static_cast<int>(Space::kL0C)] = k.l0c_kib() << 10;
  sizes.bytes[static_cast<int>(Space::kUb)] = k.ub_kib() << 10;
  l2_tags.Configure(m.chip().l2_size_mib() << 20, m.chip().l2_line_bytes(), m.chip().l2_ways());
}

Device::Impl::~Impl() { StopEngine(); }

// Wakes every process blocked on an event (after an abort or a deadlock).
void Device::Impl::WakeAll() {
  const sc_time d = sc_core::SC_ZERO_TIME;
  for (auto& c : cores) {
    for (auto& p : c->pipes) {
      p.pushed.notify(d);
      p.popped.notify(d);
    }
    for (auto& e : c->flag_ev) e.notify(d);
    c->idle_ev.notify(d);
  }
  work_ev.notify(d);
  for (auto& l : launches) l->done_ev.notify(d);
  link_ev[0].notify(d);
  link_ev[1].notify(d);
  aicpu_ev.notify(d);
  links_ev.notify(d);
  for (auto& e : event_evs) e->notify(d);
  for (Arbiter* a : {&hbm, &l2}) {
    for (XferSlot& x : a->xfers) x.owner->done.notify(d);
    a->ev.notify(d);
  }
}

template <typename F>
void Device::Impl::Spawn(const std::string& name, bool engine, F f) {
  sc_core::sc_spawn_options o;
  o.set_stack_size(128 * 1024);
  int* count = engine ? &engine_threads : &live_threads;
  ++*count;
  sc_core::sc_spawn(
      [count, f]() {
        f();
        --*count;
      },
      absl::StrCat("r", run_count, "_", name).c_str(), &o);
}

// Ends the engine threads (before the device goes).
void Device::Impl::StopEngine() {
  if (!engine_alive) return;
  shutdown = true;
  aborted = true;
  WakeAll();
  try {
    sc_core::sc_start();
  } catch (const std::exception&) {
  }
  engine_alive = false;
}

std::string Device::Impl::DeadlockReport() {
  std::vector<std::string> parts;
  for (auto& cp : cores) {
    CoreState& c = *cp;
    if (!c.launch) continue;
    const Program& p = *c.launch->prog;
    for (int i = 0; i < kNumPipes; ++i) {
      const PipeState& ps = c.pipes[i];
      if (!ps.waiting) continue;
      const Inst& in = *ps.waiting->in;
      parts.push_back(absl::StrCat("core ", c.id, " ", PipeName(static_cast<Pipe>(i)), " pc ", ps.waiting->pc, " (",
                                   InstText(p, in), ") waits for flag ", PipeName(static_cast<Pipe>(in.ops[0].imm)),
                                   "->", PipeName(static_cast<Pipe>(in.ops[1].imm)), " event ", in.ops[2].imm));
    }
    if (c.scalar_state && !c.pipes[0].waiting)
      parts.push_back(absl::StrCat("core ", c.id, " SCALAR pc ", c.scalar_pc, " waits for ", c.scalar_state));
  }
  for (size_t s = 0; s < stream_state.size(); ++s)
    if (!stream_state[s].empty()) parts.push_back(absl::StrCat("stream ", s, " waits for ", stream_state[s]));
  return absl::StrJoin(parts, "; ");
}

absl::StatusOr<RunStats> Device::Impl::Run(const RunOptions& options) {
  const auto wall_start = std::chrono::steady_clock::now();
  InitSystemC();
  ++run_count;
  opt = options;
  t0 = sc_core::sc_time_stamp();
  aborted = false;
  pending_fills.clear();
  error = absl::OkStatus();
  shutdown = false;
  live_threads = 0;
  streams_done = 0;
  launches.clear();
  hbm.Reset(HbmBytesPerCycle(machine));
  l2.Reset(L2BytesPerCycle(machine));
  l2_tags.Reset();  // every run starts with a cold L2
  next_flow = 0;
  stats = RunStats{};
  stats.kernels.reserve(64);
  size_t nlaunch = 0, through_hbm = 0;  // device copies and prefetches need the HBM arbiter too
  for (auto& s : streams)
    for (auto& op : s) {
      nlaunch += op.kind == StreamOp::kLaunch;
      through_hbm += op.kind == StreamOp::kD2D || op.kind == StreamOp::kPrefetch;
    }
  stats.kernels.reserve(nlaunch);
  records_done.assign(records_enqueued.size(), 0);
  event_evs.clear();
  for (size_t i = 0; i < records_enqueued.size(); ++i) event_evs.push_back(std::make_unique<sc_event>());
  stream_state.assign(streams.size(), "");
  prefetch_end.assign(streams.size(), -1);
  aicpu_busy.assign(machine.aicpu().cores(), false);
  link_busy[0] = link_busy[1] = false;
  links_busy = false;
  trace.Reset(opt.trace_options);
  trace.set_enabled(opt.trace);
  if (opt.trace) {
    trace.NameTrack(Trace::kHbm, 0, "HBM", "bandwidth");
    if (l2_tags.enabled()) trace.NameTrack(Trace::kL2, 0, "L2", "bandwidth");
    trace.SetPower(StaticWatts(machine), machine.chip().clock_mhz());
  }

  const int ncores = machine.chip().ai_cores();
  // Cores keep their buffers between runs; a fresh core starts zeroed. A
  // timing-only run computes nothing, so the buffers are made (and zeroed)
  // by the first run that does.
  if (static_cast<int>(cores.size()) != ncores) {
    cores.clear();
    for (int i = 0; i < ncores; ++i) {
      auto c = std::make_unique<CoreState>();
      c->id = i;
      cores.push_back(std::move(c));
    }
  }
  if (opt.functional)
    for (auto& c : cores)
      for (int s = 2; s < 7; ++s)
        if (c->buf[s].empty()) {
          c->buf[s].assign(static_cast<size_t>(sizes.bytes[s]), 0);
          c->ctx.local[s] = c->buf[s].data();
        }
  for (auto& c : cores) {
    c->stats = {};
    c->launch = nullptr;
    c->scalar_state = nullptr;
    for (auto& p : c->pipes) {
      p.q.clear();
      p.pop_times.clear();
      p.busy = false;
      p.waiting = nullptr;
      p.local = 0;
      p.done = 0;
    }
  }

  for (size_t s = 0; s < streams.size(); ++s)
    Spawn(absl::StrCat("stream", s), false, [this, s] { StreamMain(static_cast<int>(s)); });
  if (nlaunch + through_hbm > 0 && !engine_alive) {
    engine_alive = true;
    Spawn("hbm", true, [this] { ArbMain(hbm); });
    Spawn("l2", true, [this] { ArbMain(l2); });
    for (auto& c : cores) {
      CoreState* cp = c.get();
      Spawn(absl::StrCat("core", cp->id), true, [this, cp] { CoreMain(*cp); });
      for (int p = 1; p < kNumPipes; ++p)
        Spawn(absl::StrCat("core", cp->id, "_", PipeName(static_cast<Pipe>(p))), true,
              [this, cp, p] { PipeMain(*cp, static_cast<Pipe>(p)); });
    }
  }

  try {
    if (!opt.progress) {
      sc_core::sc_start(Cycles(opt.cycle_limit), sc_core::SC_EXIT_ON_STARVATION);
    } else {
      // In slices, reporting between them; the events run in the same
      // order, so the run's figures are the same.
      const double start = Now(), limit = start + opt.cycle_limit, every = std::max(1.0, opt.progress_every_cycles);
      while (true) {
        // A slice reaches the next pending event at least (starving before
        // it, sc_start would return without advancing).
        const double gap =
            sc_core::sc_pending_activity()
                ? static_cast<double>(sc_core::sc_time_to_pending_activity(sc_core::sc_get_curr_simcontext()).value()) / kPsPerCycle + 1
                : 0;
        const double before = Now(), next = std::min(limit, before + std::max(every, gap));
        sc_core::sc_start(Cycles(next - before), sc_core::SC_EXIT_ON_STARVATION);
        opt.progress(Now() - start);
        // A slice clamped at the limit that passed no time: the next event
        // lies past the limit.
        if (aborted || Now() >= limit || !sc_core::sc_pending_activity() || (next >= limit && Now() == before)) break;
      }
    }
    if (!aborted && streams_done < static_cast<int>(streams.size())) {
      if (sc_core::sc_pending_activity())  // stopped at the limit, not starved
        Fail(absl::DeadlineExceededError(absl::StrCat("cycle limit of ", opt.cycle_limit,
                                                       " cycles reached (a runaway program? raise it with --cycle-limit)")));
      else
        Fail(absl::FailedPreconditionError(absl::StrCat("deadlock at cycle ", Now(), ": ", DeadlockReport())));
    }
    double end = Now();
    if (aborted) {
      // Wake every blocked process so it returns, and let timed waits run out.
      WakeAll();
      sc_core::sc_start();
      engine_alive = false;
    }
    if (live_threads != 0 || (!engine_alive && engine_threads != 0))
      return Internal("the model left ", live_threads + engine_threads, " processes running");
    for (auto& s : streams) s.clear();
    std::fill(records_enqueued.begin(), records_enqueued.end(), 0);
    if (aborted) return error;
    stats.total_cycles = end;
    stats.seconds = end / (machine.chip().clock_mhz() * 1e6);
    for (auto& c : cores) {
      stats.cores.push_back(c->stats);
      for (const PipeStats& p : c->stats) stats.instructions += p.instructions;
    }
    for (const KernelStats& k : stats.kernels) {
      stats.hbm_read_bytes += k.hbm_read_bytes;
      stats.hbm_write_bytes += k.hbm_write_bytes;
      stats.l2_hit_bytes += k.l2_hit_bytes;
      stats.l2_write_bytes += k.l2_write_bytes;
      stats.l2_miss_bytes += k.l2_miss_bytes;
    }
    stats.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    return stats;
  } catch (const std::exception& e) {
    return Internal("SystemC: ", e.what());
  }
}

Device::Device(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) { impl_->self = this; }
Device::~Device() = default;

absl::StatusOr<std::unique_ptr<Device>> Device::Create(const Machine& machine) {
  KILN_RETURN_IF_ERROR(ValidateMachine(machine));
  InitSystemC();
  return std::unique_ptr<Device>(new Device(std::make_unique<Impl>(machine)));
}

const Machine& Device::machine() const { return impl_->machine; }

absl::StatusOr<DevAddr> Device::Malloc(int64_t bytes) { return impl_->memory.Alloc(bytes); }
absl::Status Device::Free(DevAddr addr) { return impl_->memory.Free(addr); }

absl::Status Device::Write(DevAddr dst, const void* src, int64_t bytes) {
  KILN_ASSIGN_OR_RETURN(uint8_t * p, impl_->memory.Resolve(dst, bytes));
  if (bytes) std::memcpy(p, src, bytes);
  return absl::OkStatus();
}

absl::Status Device::Read(DevAddr src, void* dst, int64_t bytes) {
  KILN_ASSIGN_OR_RETURN(uint8_t * p, impl_->memory.Resolve(src, bytes));
  if (bytes) std::memcpy(dst, p, bytes);
  return absl::OkStatus();
}

absl::StatusOr<KernelId> Device::LoadProgram(Program program) {
  absl::Status s = VerifyProgram(program, &impl_->sizes);
  if (!s.ok()) return InvalidArgument("program ", program.name, ": ", s.message());
  impl_->programs.push_back(std::make_unique<Program>(std::move(program)));
  return static_cast<KernelId>(impl_->programs.size() - 1);
}

const Program& Device::program(KernelId id) const { return *impl_->programs[id]; }

absl::StatusOr<RunStats> Device::Run(const RunOptions& options) { return impl_->Run(options); }

const Trace& Device::trace() const { return impl_->trace; }

}  // namespace kiln::sim
