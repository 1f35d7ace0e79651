//===- device.cc - The SystemC model of the NPU ---------------------------===//
//
// One SystemC thread per pipe per core and one HBM arbiter, spawned on the
// first Run() that launches a kernel and kept, idle between runs, until the
// device goes (or a run is aborted); one thread per stream for each run.
// SystemC elaborates once per process, so the model spawns dynamic processes
// instead of building modules, and time runs on across runs from an offset.
//
// Time advances by whole instructions, and most instructions cost no SystemC
// wake-up at all: every pipe, the scalar unit included, runs ahead of
// simulated time on its own local clock (temporal decoupling), advancing it
// by each instruction's known duration. A process synchronizes with
// simulated time only where another can observe it: a DMA enters the shared
// HBM arbiter at its start time; the scalar unit waits at a barrier and at
// the end of a block (and every kSyncQuantum cycles, so a runaway loop
// reaches the cycle limit). A pipe records when it takes each instruction
// from its queue, so the scalar unit finds when a full queue frees a slot
// without waiting, unless the pipe has not yet run that far. A flag carries
// the time it becomes visible, so a wait_flag that finds its flag set
// releases at that time without waiting, and one that does not blocks until
// the setter's timed notification.
// One cycle is 1000 ps of SystemC time.
//
// HBM is a fluid bandwidth arbiter: the DMA transfers in flight share the
// chip's bandwidth max-min fairly, each capped by its pipe's own rate. Every
// start or finish re-plans the rates; one arbiter thread wakes at the next
// finish (one timed event however many transfers are in flight).
//
// Waits carry no abort event (an or-list costs an allocation per wait): an
// aborted run wakes every process once (WakeAll) and lets timed waits run
// out; each wait helper then returns false.
//
//===----------------------------------------------------------------------===//
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "sim/model/device.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <set>
#include <systemc>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"
#include "sim/isa/asm.h"
#include "sim/isa/verify.h"
#include "sim/machine/machine.h"
#include "sim/model/exec.h"

// libsystemc's own main() calls sc_main. kiln never runs that main (the model
// drives sc_start itself), but the shared library needs the symbol; weak, so
// a program that has its own sc_main keeps it.
__attribute__((weak)) int sc_main(int, char*[]) { return 0; }

namespace kiln::sim {

using sc_core::sc_event;
using sc_core::sc_time;

namespace {

constexpr double kPsPerCycle = 1000.0;
constexpr double kSyncQuantum = 4096;  // cycles the scalar unit may run ahead of simulated time

void InitSystemC() {
  static std::once_flag once;
  std::call_once(once, [] {
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
    sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
    sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    sc_core::sc_report_handler::set_actions(sc_core::SC_WARNING, sc_core::SC_DO_NOTHING);
  });
}

sc_time Cycles(double c) {
  if (c <= 0) return sc_core::SC_ZERO_TIME;
  return sc_time::from_value(static_cast<sc_dt::uint64>(std::ceil(c * kPsPerCycle - 1e-6)));
}

struct StreamOp {
  enum Kind { kLaunch, kH2D, kD2H, kD2D, kAicpu, kAllReduce, kRecord, kWait } kind = kLaunch;
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
};

struct Issued {
  const Inst* in;
  int32_t pc;
  double issue;  // cycles
  std::array<int64_t, 4> addr;
};

struct LaunchState {
  const Program* prog = nullptr;
  KernelStats* stats = nullptr;
  int64_t block_dim = 0;
  int64_t next_block = 0;
  int64_t done_blocks = 0;
  std::vector<uint8_t*> gm;
  sc_event done_ev;
  bool finished = false;
  std::set<int> cores;
};

// A FIFO in a ring of power-of-two capacity that grows when full and never
// shrinks: a pipe's queue and its pop times stay within the queue depth, so
// after the first instructions they cost no allocation.
template <typename T>
class Ring {
 public:
  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }
  T& front() { return buf_[head_ & mask_]; }
  T& operator[](size_t i) { return buf_[(head_ + i) & mask_]; }
  void pop_front() { ++head_; }
  void push_back(const T& v) {
    if (size() == buf_.size()) Grow();
    buf_[tail_++ & mask_] = v;
  }
  void clear() { head_ = tail_ = 0; }

 private:
  void Grow() {
    std::vector<T> b(buf_.empty() ? 64 : 2 * buf_.size());
    for (size_t i = 0; i < size(); ++i) b[i] = (*this)[i];
    tail_ = size();
    head_ = 0;
    buf_.swap(b);
    mask_ = buf_.size() - 1;
  }
  std::vector<T> buf_;
  size_t head_ = 0, tail_ = 0, mask_ = 0;
};

struct PipeState {
  Ring<Issued> q;
  Ring<double> pop_times;  // when the pipe took recent instructions (for the scalar unit's view)
  sc_event pushed, popped;
  bool busy = false;
  double local = 0;  // cycles: the pipe's own clock, at or ahead of simulated time
  double done = 0;   // cycles: when everything issued to this pipe has completed
  const Issued* waiting = nullptr;  // the wait_flag it is blocked in, for deadlock reports
};

// The sets of one flag not yet consumed: when each becomes visible, and its
// trace flow id. Only one pipe sets a flag and one waits on it, in program
// order, so the times are increasing.
struct FlagQueue {
  std::vector<std::pair<double, int64_t>> sets;
  size_t head = 0;
  bool empty() const { return head == sets.size(); }
  void clear() { sets.clear(); head = 0; }
};

struct CoreState {
  int id = 0;
  std::array<PipeState, kNumPipes> pipes;
  FlagQueue flags[kNumPipes][kNumPipes][kNumEvents];
  sc_event flag_ev[kNumPipes];
  sc_event idle_ev;
  std::array<std::vector<uint8_t>, 7> buf;
  ExecContext ctx;
  LaunchState* launch = nullptr;
  int64_t block = -1;
  std::vector<int64_t> regs;
  int32_t scalar_pc = -1;
  const char* scalar_state = nullptr;  // why the scalar unit is blocked, for deadlock reports
  std::array<int64_t, 7> footprint{};
  std::array<PipeStats, kNumPipes> stats{};
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

}  // namespace

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
  bool link_busy[2] = {false, false};
  sc_event link_ev[2];
  std::vector<bool> aicpu_busy;
  sc_event aicpu_ev;
  bool links_busy = false;  // the chip links carry one collective at a time
  sc_event links_ev;
  std::vector<XferSlot> xfers;
  sc_event hbm_ev;  // the next finish of a transfer
  double hbm_last = 0;
  int64_t next_flow = 0;
  std::vector<XferSlot*> hbm_order;
  double hbm_total = -1;
  RunStats stats;
  double hbm_bw = 0;

  explicit Impl(const Machine& m) : machine(m), memory(m.chip().hbm_size_mib() << 20) {
    const Core& k = m.core();
    sizes.bytes[static_cast<int>(Space::kL1)] = k.l1_kib() << 10;
    sizes.bytes[static_cast<int>(Space::kL0A)] = k.l0a_kib() << 10;
    sizes.bytes[static_cast<int>(Space::kL0B)] = k.l0b_kib() << 10;
    sizes.bytes[static_cast<int>(Space::kL0C)] = k.l0c_kib() << 10;
    sizes.bytes[static_cast<int>(Space::kUb)] = k.ub_kib() << 10;
  }

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
  // Wakes every process blocked on an event (after an abort or a deadlock).
  void WakeAll() {
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
    for (XferSlot& x : xfers) x.owner->done.notify(d);
    hbm_ev.notify(d);
  }

  template <typename F>
  void Spawn(const std::string& name, bool engine, F f) {
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
  void StopEngine() {
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
  ~Impl() { StopEngine(); }

  // ----- HBM -----
  void HbmAdvance() {
    double now = Now(), dt = now - hbm_last;
    if (dt > 0)
      for (XferSlot& x : xfers) x.remaining -= x.rate * dt;
    hbm_last = now;
  }
  // Max-min fair rates (water-filling over the caps), then the next finish.
  void HbmReplan() {
    double total = 0;
    double sum_caps = 0, min_cap = 0;
    for (size_t i = 0; i < xfers.size(); ++i) {
      const double cap = xfers[i].cap;
      sum_caps += cap;
      min_cap = (i == 0 || cap < min_cap) ? cap : min_cap;
    }
    const double fair = xfers.empty() ? 0 : hbm_bw / static_cast<double>(xfers.size());
    if (sum_caps <= hbm_bw) {
      for (XferSlot& x : xfers) x.rate = x.cap;
      total = sum_caps;
    } else if (min_cap >= fair) {  // every transfer is held to an equal share
      for (XferSlot& x : xfers) x.rate = fair;
      total = hbm_bw;
    } else {
      std::vector<XferSlot*>& order = hbm_order;
      order.clear();
      for (XferSlot& x : xfers) order.push_back(&x);
      std::sort(order.begin(), order.end(), [](XferSlot* a, XferSlot* b) { return a->cap < b->cap; });
      double left = hbm_bw;
      size_t n = order.size();
      for (size_t i = 0; i < n; ++i) {
        XferSlot* x = order[i];
        x->rate = std::min(x->cap, left / static_cast<double>(n - i));
        left -= x->rate;
        total += x->rate;
      }
    }
    double next = -1;
    if (!xfers.empty() && sum_caps > hbm_bw && min_cap >= fair && fair > 0) {
      // One rate for all: the first finish is the least remaining over it
      // (division by a positive constant keeps the order, so this is the
      // same value as the least quotient).
      double least = std::numeric_limits<double>::infinity();
      for (const XferSlot& x : xfers) least = std::min(least, x.remaining);
      next = std::max(0.0, least) / fair;
    } else {
      for (const XferSlot& x : xfers) {
        double t = std::max(0.0, x.remaining) / x.rate;
        if (next < 0 || t < next) next = t;
      }
    }
    hbm_ev.cancel();
    if (next >= 0) hbm_ev.notify(Cycles(next));
    if (opt.trace && total != hbm_total) {
      hbm_total = total;
      trace.Count(Trace::kHbm, "HBM GB/s", Now(), total * machine.chip().clock_mhz() / 1e3);
    }
  }
  // The arbiter: finishes the transfers that are done at each planned finish.
  void HbmMain() {
    while (true) {
      if (!WaitEvent(hbm_ev)) return;
      if (shutdown && xfers.empty()) return;
      HbmAdvance();
      bool any = false;
      for (size_t i = 0; i < xfers.size();) {
        XferSlot& x = xfers[i];
        if (x.remaining <= 1e-9 * x.bytes + 1e-6) {
          x.owner->finished = true;
          x.owner->done.notify();
          xfers[i] = xfers.back();
          xfers.pop_back();
          any = true;
        } else {
          ++i;
        }
      }
      if (any || !xfers.empty()) HbmReplan();
    }
  }
  bool HbmTransfer(double bytes, double cap) {
    if (bytes <= 0) return true;
    Xfer x;
    HbmAdvance();
    xfers.push_back(XferSlot{bytes, bytes, cap, 0, &x});
    HbmReplan();
    while (!x.finished) {
      if (!WaitEvent(x.done)) {
        auto it = std::find_if(xfers.begin(), xfers.end(), [&](const XferSlot& s) { return s.owner == &x; });
        if (it != xfers.end()) xfers.erase(it);
        return false;
      }
    }
    return true;
  }

  // ----- Cores -----
  void NameCoreTracks(int core) {
    for (int p = 0; p < kNumPipes; ++p)
      trace.NameTrack(core, p, absl::StrCat("AI core ", core), PipeTraceName(static_cast<Pipe>(p)));
  }

  bool Drain(CoreState& c) {
    while (true) {
      double done = 0;
      bool pending = false;
      for (int p = 1; p < kNumPipes; ++p) {
        pending |= !c.pipes[p].q.empty() || c.pipes[p].busy;
        done = std::max({done, c.pipes[p].done, c.pipes[p].local});
      }
      if (pending) {
        if (!WaitEvent(c.idle_ev)) return false;
      } else if (Cycles(done - Now()) != sc_core::SC_ZERO_TIME) {
        // A remainder below the time resolution (1 ps) is done: waiting
        // for it would wait zero time forever.
        if (!WaitUntil(done)) return false;
      } else {
        return true;
      }
    }
  }

  // The flag and barrier instructions, on pipe `p`, at its local time `*t`
  // (which they advance).
  bool Sync(CoreState& c, Pipe p, const Issued& x, double* t) {
    const Inst& in = *x.in;
    PipeState& ps = c.pipes[static_cast<int>(p)];
    const Program* prog = c.launch->prog;
    double start = *t;
    int src = static_cast<int>(in.ops[0].imm), dst = static_cast<int>(in.ops[1].imm), id = static_cast<int>(in.ops[2].imm);
    switch (in.op) {
      case Op::kSetFlag: {
        // Visible once this pipe's earlier work (DMA tails included) completes, plus the flag latency.
        double visible = std::max(start, ps.done) + static_cast<double>(machine.core().flag_latency_cycles());
        int64_t flow = opt.trace ? next_flow++ : -1;
        c.flags[src][dst][id].sets.emplace_back(visible, flow);
        c.flag_ev[dst].notify(Cycles(visible - Now()));
        trace.Instruction(c.id, p, prog, x.pc, start, visible, false, flow, -1);
        *t = visible;
        break;
      }
      case Op::kWaitFlag: {
        FlagQueue& f = c.flags[src][dst][id];
        if (f.empty()) {
          ps.waiting = &x;
          while (f.empty())
            if (!WaitEvent(c.flag_ev[dst])) return false;
          ps.waiting = nullptr;
        }
        auto [visible, flow] = f.sets[f.head++];
        if (f.empty()) f.clear();
        *t = std::max(start, visible);
        c.stats[static_cast<int>(p)].stall_cycles += *t - start;
        trace.Instruction(c.id, p, prog, x.pc, start, *t, false, -1, flow);
        break;
      }
      default:  // pipe_barrier on one pipe: wait for its outstanding work
        *t = std::max(start, ps.done);
        trace.Instruction(c.id, p, prog, x.pc, start, *t, false);
        break;
    }
    ++c.stats[static_cast<int>(p)].instructions;
    return true;
  }

  // Runs a data instruction from local time `*t` (at least its issue time)
  // and advances `*t` to its end. Its effect on memory is applied when it
  // starts, in program order: programs order every cross-pipe access with
  // flags, and a flag is seen only after its setter ran, so no pipe can
  // observe the difference. Only a DMA waits for simulated time (the HBM
  // arbiter shares bandwidth among the transfers in flight at each moment).
  bool ExecuteData(CoreState& c, Pipe p, const Issued& x, double* t) {
    const Inst& in = *x.in;
    PipeState& ps = c.pipes[static_cast<int>(p)];
    Cost cost = InstCost(in, machine);
    if (opt.functional) Execute(in, x.addr, c.ctx);
    double start = *t;
    PipeStats& st = c.stats[static_cast<int>(p)];
    if (cost.dma) {
      if (!WaitUntil(start) || !HbmTransfer(static_cast<double>(cost.gm_bytes), cost.rate_cap)) return false;
      *t = Now();
      // Busy from its start to its completion, less what overlaps the previous DMA's tail.
      double done = *t + cost.latency;
      st.busy_cycles += done - std::max(start, ps.done);
      ps.done = std::max(ps.done, done);
      KernelStats* ks = c.launch->stats;
      (cost.gm_write ? ks->hbm_write_bytes : ks->hbm_read_bytes) += cost.gm_bytes;
    } else {
      *t = start + cost.latency + cost.busy;
      ps.done = std::max(ps.done, *t);
      st.busy_cycles += *t - start;
    }
    ++st.instructions;
    KernelStats& kst = *c.launch->stats;
    kst.cube_macs += cost.macs;
    if (p == Pipe::kCube) kst.cube_cycles += cost.busy;
    if (p == Pipe::kVector) {
      kst.vector_cycles += cost.busy;
      kst.vector_elements += cost.elements;
    }
    if (opt.trace) {
      trace.Instruction(c.id, p, c.launch->prog, x.pc, start, *t, true);
      std::array<Access, 4> acc;
      int n = Accesses(in, x.addr, &acc);
      for (int i = 0; i < n; ++i) {
        int s = static_cast<int>(acc[i].space);
        if (!acc[i].write || acc[i].space == Space::kGm || acc[i].end <= c.footprint[s]) continue;
        c.footprint[s] = acc[i].end;
        trace.Count(c.id, absl::StrCat(SpaceName(acc[i].space), " footprint KiB"), start, acc[i].end / 1024.0);
      }
    }
    return true;
  }

  void PipeMain(CoreState& c, Pipe p) {
    PipeState& ps = c.pipes[static_cast<int>(p)];
    while (true) {
      while (ps.q.empty()) {
        if (shutdown || aborted) return;
        if (!WaitEvent(ps.pushed)) return;
      }
      // The pipe takes the instruction when it is free and the instruction
      // issued; the slot it frees counts as taken until then (pop_times).
      Issued x = ps.q.front();
      ps.q.pop_front();
      ps.pop_times.push_back(std::max(ps.local, x.issue));
      ps.popped.notify();
      ps.busy = true;
      double t = std::max({ps.local, x.issue, Now()});
      bool sync = x.in->op == Op::kSetFlag || x.in->op == Op::kWaitFlag || x.in->op == Op::kPipeBarrier;
      if (!(sync ? Sync(c, p, x, &t) : ExecuteData(c, p, x, &t))) return;
      ps.local = t;
      ps.busy = false;
      if (ps.q.empty()) c.idle_ev.notify();
    }
  }

  // Advances the scalar unit's clock `*local` until `ps` has a free slot.
  // A slot is taken from the push of its instruction until the pipe takes
  // it; a pipe running ahead of the scalar unit records when it took each
  // instruction (pop_times), so the scalar unit suspends only while the
  // queue is full in host order (the pipe itself blocked).
  bool WaitForSlot(CoreState& c, PipeState& ps, size_t depth, double* local) {
    const double start = *local;
    auto& pops = ps.pop_times;
    while (true) {
      while (!pops.empty() && pops.front() <= *local) pops.pop_front();
      if (ps.q.size() + pops.size() < depth) break;
      if (ps.q.size() < depth) {
        // Room once enough of the recorded pops have happened.
        size_t k = ps.q.size() + pops.size() - (depth - 1);
        *local = std::max(*local, pops[k - 1]);
        continue;
      }
      c.scalar_state = "a full queue";
      if (!WaitEvent(ps.popped)) return false;
      c.scalar_state = nullptr;
      *local = std::max(*local, Now());
    }
    c.stats[0].stall_cycles += *local - start;
    return true;
  }

  // Runs one block on core `c`; false when the run was aborted.
  bool RunBlock(CoreState& c, LaunchState& L, int64_t block) {
    const Program& p = *L.prog;
    const Core& k = machine.core();
    const double slat = static_cast<double>(k.scalar_latency_cycles());
    const size_t depth = static_cast<size_t>(k.pipe_queue_depth());
    c.launch = &L;
    c.block = block;
    c.regs.assign(p.num_regs, 0);
    for (auto& a : c.flags)
      for (auto& b : a)
        for (auto& f : b) f.clear();
    for (int i = 0; i < kNumPipes; ++i) c.pipes[i].done = 0;
    c.ctx.gm_args = &L.gm;
    if (opt.trace) {
      NameCoreTracks(c.id);
      for (int s = 2; s < 7; ++s)
        if (c.footprint[s]) trace.Count(c.id, absl::StrCat(SpaceName(static_cast<Space>(s)), " footprint KiB"), Now(), 0);
    }
    c.footprint.fill(0);
    PipeStats& ss = c.stats[0];
    double local = Now();
    double run_start = local;
    auto flush_scalar = [&] {
      if (local > run_start) trace.Named(c.id, 0, "scalar", run_start, local, true);
    };
    auto sync_to_local = [&]() -> bool {
      flush_scalar();
      if (!WaitUntil(local)) return false;
      local = std::max(local, Now());
      run_start = local;
      return true;
    };
    const int64_t n = static_cast<int64_t>(p.insts.size());
    int64_t pc = 0;
    auto value = [&](const Operand& o) { return o.kind == Operand::Kind::kReg ? c.regs[o.reg] : o.imm; };
    // Now(), read again only after this process waited.
    double now = Now();
    uint64_t now_waits = waits;
    while (pc < n) {
      c.scalar_pc = static_cast<int32_t>(pc);
      if (waits != now_waits) {
        now = Now();
        now_waits = waits;
      }
      if (local - now > kSyncQuantum && !sync_to_local()) return false;
      const Inst& in = p.insts[pc];
      const Operand* o = in.ops.data();
      int64_t next = pc + 1;
      bool scalar = true;
      switch (in.op) {
        case Op::kMov: c.regs[o[0].reg] = value(o[1]); break;
        case Op::kAdd: c.regs[o[0].reg] = c.regs[o[1].reg] + value(o[2]); break;
        case Op::kSub: c.regs[o[0].reg] = c.regs[o[1].reg] - value(o[2]); break;
        case Op::kMul: c.regs[o[0].reg] = c.regs[o[1].reg] * value(o[2]); break;
        case Op::kDiv: case Op::kRem: {
          int64_t d = value(o[2]);
          if (d == 0) {
            Fail(InvalidArgument("block ", block, ": instruction ", pc, " (", InstText(p, in), "): division by zero"));
            return false;
          }
          c.regs[o[0].reg] = in.op == Op::kDiv ? c.regs[o[1].reg] / d : c.regs[o[1].reg] % d;
          break;
        }
        case Op::kMin: c.regs[o[0].reg] = std::min(c.regs[o[1].reg], value(o[2])); break;
        case Op::kMax: c.regs[o[0].reg] = std::max(c.regs[o[1].reg], value(o[2])); break;
        case Op::kShl: c.regs[o[0].reg] = static_cast<int64_t>(static_cast<uint64_t>(c.regs[o[1].reg]) << (value(o[2]) & 63)); break;
        case Op::kShr: c.regs[o[0].reg] = c.regs[o[1].reg] >> (value(o[2]) & 63); break;
        case Op::kAnd: c.regs[o[0].reg] = c.regs[o[1].reg] & value(o[2]); break;
        case Op::kOr: c.regs[o[0].reg] = c.regs[o[1].reg] | value(o[2]); break;
        case Op::kBlockIdx: c.regs[o[0].reg] = block; break;
        case Op::kBlockDim: c.regs[o[0].reg] = L.block_dim; break;
        case Op::kJmp: next = o[0].imm; break;
        case Op::kBeq: if (c.regs[o[0].reg] == value(o[1])) next = o[2].imm; break;
        case Op::kBne: if (c.regs[o[0].reg] != value(o[1])) next = o[2].imm; break;
        case Op::kBlt: if (c.regs[o[0].reg] < value(o[1])) next = o[2].imm; break;
        case Op::kBge: if (c.regs[o[0].reg] >= value(o[1])) next = o[2].imm; break;
        case Op::kLd: {
          // A word of UB, sign-extended: what MTE2 wrote before a flag the scalar unit awaited.
          const std::vector<uint8_t>& ub = c.buf[static_cast<int>(Space::kUb)];
          const int64_t a = o[1].imm + (o[1].reg >= 0 ? c.regs[o[1].reg] : 0);
          if (a < 0 || a % 4 || a + 4 > static_cast<int64_t>(ub.size())) {
            Fail(InvalidArgument("block ", block, ": instruction ", pc, " (", InstText(p, in), "): UB offset ", a,
                                 " is not a word inside UB"));
            return false;
          }
          int32_t w;
          std::memcpy(&w, ub.data() + a, 4);
          c.regs[o[0].reg] = w;
          break;
        }
        default: scalar = false;
      }
      if (scalar) {
        local += slat;
        ++ss.instructions;
        ss.busy_cycles += slat;
        pc = next;
        continue;
      }
      Pipe target = ExecPipe(in);
      Issued x{&in, static_cast<int32_t>(pc), local, {}};
      for (int i = 0; i < 4; ++i)
        if (o[i].kind == Operand::Kind::kAddr) x.addr[i] = o[i].imm + (o[i].reg >= 0 ? c.regs[o[i].reg] : 0);
      if (target == Pipe::kScalar) {
        // A barrier on ALL, or a flag set or awaited by the scalar unit itself.
        if (in.op == Op::kPipeBarrier) {
          if (!sync_to_local()) return false;
          double s = Now();
          c.scalar_state = "pipe_barrier ALL";
          if (!Drain(c)) return false;
          c.scalar_state = nullptr;
          ss.stall_cycles += Now() - s;
          ++ss.instructions;
          trace.Instruction(c.id, Pipe::kScalar, &p, static_cast<int>(pc), s, Now(), false);
          local = run_start = Now();
        } else {
          flush_scalar();
          PipeState& sp = c.pipes[0];
          sp.busy = true;
          if (!Sync(c, Pipe::kScalar, x, &local)) return false;
          sp.busy = false;
          run_start = local;
        }
        ++pc;
        continue;
      }
      if (!(in.op == Op::kSetFlag || in.op == Op::kWaitFlag || in.op == Op::kPipeBarrier)) {
        absl::Status s = CheckAccesses(p, static_cast<size_t>(pc), x.addr, &sizes);
        if (!s.ok()) {
          Fail(InvalidArgument("block ", block, ": ", s.message()));
          return false;
        }
      }
      PipeState& ps = c.pipes[static_cast<int>(target)];
      double before = local;
      if (!WaitForSlot(c, ps, depth, &local)) return false;
      if (local > before) {  // a stall ends the scalar run in the trace
        if (before > run_start) trace.Named(c.id, 0, "scalar", run_start, before, true);
        run_start = local;
      }
      x.issue = local;
      ps.q.push_back(x);
      ps.pushed.notify();
      local += slat;  // issue costs the scalar unit a cycle; the pipe counts the instruction
      ss.busy_cycles += slat;
      ++pc;
    }
    c.scalar_pc = static_cast<int32_t>(n);
    if (!sync_to_local()) return false;
    c.scalar_state = "the end of the block";
    if (!Drain(c)) return false;
    c.scalar_state = nullptr;
    return true;
  }

  void CoreMain(CoreState& c) {
    while (true) {
      LaunchState* L = nullptr;
      for (auto& l : launches)
        if (l->next_block < l->block_dim) {
          L = l.get();
          break;
        }
      if (!L) {
        if (shutdown || aborted) return;
        if (!WaitEvent(work_ev)) return;
        continue;
      }
      int64_t b = L->next_block++;
      L->cores.insert(c.id);
      std::array<PipeStats, kNumPipes> before = c.stats;
      if (!RunBlock(c, *L, b)) return;
      for (int p = 0; p < kNumPipes; ++p) {
        L->stats->pipes[p].busy_cycles += c.stats[p].busy_cycles - before[p].busy_cycles;
        L->stats->pipes[p].stall_cycles += c.stats[p].stall_cycles - before[p].stall_cycles;
        L->stats->pipes[p].instructions += c.stats[p].instructions - before[p].instructions;
      }
      c.launch = nullptr;
      if (++L->done_blocks == L->block_dim) {
        L->finished = true;
        L->stats->end_cycle = Now();
        L->stats->cores_used = static_cast<int>(L->cores.size());
        L->done_ev.notify();
      }
    }
  }

  // ----- Streams -----
  void StreamMain(int s) {
    for (StreamOp& op : streams[s]) {
      double start = Now();
      std::string label;
      switch (op.kind) {
        case StreamOp::kLaunch: {
          const Program& p = *programs[op.kernel];
          auto L = std::make_unique<LaunchState>();
          L->prog = &p;
          L->block_dim = op.block_dim;
          stats.kernels.push_back(KernelStats{});
          L->stats = &stats.kernels.back();
          L->stats->name = p.name;
          L->stats->block_dim = op.block_dim;
          L->stats->start_cycle = start;
          L->stats->cube_peak_macs_per_cycle = static_cast<double>(machine.core().cube_fp16_macs_per_cycle());
          for (size_t i = 0; i < p.args.size(); ++i) {
            auto ptr = memory.Resolve(op.args[i], p.args[i].Bytes());
            if (!ptr.ok()) {
              Fail(InvalidArgument("launch of ", p.name, ": argument ", p.args[i].name, ": ", ptr.status().message()));
              return;
            }
            L->gm.push_back(*ptr);
          }
          LaunchState* raw = L.get();
          launches.push_back(std::move(L));
          work_ev.notify();
          stream_state[s] = absl::StrCat("kernel ", p.name);
          while (!raw->finished)
            if (!WaitEvent(raw->done_ev)) return;
          label = p.name;
          break;
        }
        case StreamOp::kH2D: case StreamOp::kD2H: {
          int dir = op.kind == StreamOp::kH2D ? 0 : 1;
          stream_state[s] = "a busy host link";
          while (link_busy[dir])
            if (!WaitEvent(link_ev[dir])) return;
          link_busy[dir] = true;
          double t = Now();
          double cycles = UsToCycles(machine, machine.host_link().latency_us()) +
                          static_cast<double>(op.bytes) / HostLinkBytesPerCycle(machine);
          if (!WaitCycles(cycles)) return;
          auto ptr = memory.Resolve(op.dev, op.bytes);
          if (!ptr.ok()) {
            Fail(ptr.status());
            return;
          }
          if (dir == 0) std::memcpy(*ptr, op.chost, op.bytes);
          else std::memcpy(op.host, *ptr, op.bytes);
          (dir == 0 ? stats.h2d_bytes : stats.d2h_bytes) += op.bytes;
          link_busy[dir] = false;
          link_ev[dir].notify();
          label = absl::StrCat(dir == 0 ? "H2D " : "D2H ", op.bytes, " B");
          if (opt.trace) {
            trace.NameTrack(Trace::kPcie, dir, "PCIe", dir == 0 ? "H2D" : "D2H");
            trace.Named(Trace::kPcie, dir, label, t, Now());
          }
          break;
        }
        case StreamOp::kD2D: {
          // Read and written through HBM, sharing its bandwidth with the
          // kernels' transfers in flight, then the HBM latency.
          stream_state[s] = "a copy through HBM";
          double t = Now();
          if (!HbmTransfer(2.0 * static_cast<double>(op.bytes), hbm_bw)) return;
          if (!WaitCycles(static_cast<double>(machine.chip().hbm_latency_cycles()))) return;
          auto dst = memory.Resolve(op.dev, op.bytes);
          auto src = memory.Resolve(op.src, op.bytes);
          if (!dst.ok() || !src.ok()) {
            Fail(dst.ok() ? src.status() : dst.status());
            return;
          }
          std::memmove(*dst, *src, op.bytes);
          stats.d2d_bytes += op.bytes;
          label = absl::StrCat("D2D ", op.bytes, " B");
          if (opt.trace) {
            trace.NameTrack(Trace::kHbm, 1, "HBM", "D2D copies");
            trace.Named(Trace::kHbm, 1, label, t, Now());
          }
          break;
        }
        case StreamOp::kAicpu: {
          stream_state[s] = "a free AICPU core";
          int slot = -1;
          while (true) {
            for (size_t i = 0; i < aicpu_busy.size() && slot < 0; ++i)
              if (!aicpu_busy[i]) slot = static_cast<int>(i);
            if (slot >= 0) break;
            if (!WaitEvent(aicpu_ev)) return;
          }
          aicpu_busy[slot] = true;
          double t = Now();
          if (!WaitCycles(AicpuTaskCycles(machine, op.ops))) return;
          absl::Status st = op.fn ? op.fn(*self) : absl::OkStatus();
          if (!st.ok()) {
            Fail(InvalidArgument("AICPU task ", op.name, ": ", st.message()));
            return;
          }
          ++stats.aicpu_tasks;
          stats.aicpu_spans.push_back({t, Now()});
          aicpu_busy[slot] = false;
          aicpu_ev.notify();
          label = absl::StrCat("AICPU ", op.name);
          if (opt.trace) {
            trace.NameTrack(Trace::kAicpu, slot, "AICPU", absl::StrCat("AICPU ", slot));
            trace.Named(Trace::kAicpu, slot, op.name, t, Now());
          }
          break;
        }
        case StreamOp::kAllReduce: {
          // The peers run this stream in step, so they reach the collective
          // at this same cycle: only this chip's links need be free.
          stream_state[s] = "the chip links";
          while (links_busy)
            if (!WaitEvent(links_ev)) return;
          links_busy = true;
          double t = Now();
          if (!WaitCycles(op.cycles)) return;
          absl::Status st = op.fn ? op.fn(*self) : absl::OkStatus();
          if (!st.ok()) {
            Fail(InvalidArgument("AllReduce ", op.name, ": ", st.message()));
            return;
          }
          ++stats.collectives;
          stats.collective_bytes += op.bytes;
          stats.collective_spans.push_back({t, Now()});
          links_busy = false;
          links_ev.notify();
          label = absl::StrCat("AllReduce ", op.name);
          if (opt.trace) {
            trace.NameTrack(Trace::kLinks, 0, "Chip links", "AllReduce");
            trace.Named(Trace::kLinks, 0, op.name, t, Now());
          }
          break;
        }
        case StreamOp::kRecord:
          ++records_done[op.event];
          event_evs[op.event]->notify();
          label = absl::StrCat("record event ", op.event);
          break;
        case StreamOp::kWait:
          stream_state[s] = absl::StrCat("event ", op.event);
          while (records_done[op.event] < op.target)
            if (!WaitEvent(*event_evs[op.event])) return;
          label = absl::StrCat("wait event ", op.event);
          break;
      }
      stream_state[s].clear();
      if (opt.trace) {
        trace.NameTrack(Trace::kHost, s, "Host", absl::StrCat("stream ", s));
        trace.Named(Trace::kHost, s, label, start, Now());
      }
    }
    ++streams_done;  // the engine stays, idle, for the next run
  }

  std::string DeadlockReport() {
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

  absl::StatusOr<RunStats> Run(const RunOptions& options) {
    InitSystemC();
    ++run_count;
    opt = options;
    t0 = sc_core::sc_time_stamp();
    aborted = false;
    error = absl::OkStatus();
    shutdown = false;
    live_threads = 0;
    streams_done = 0;
    launches.clear();
    xfers.clear();
    hbm_ev.cancel();
    hbm_total = -1;
    hbm_last = 0;
    next_flow = 0;
    hbm_bw = HbmBytesPerCycle(machine);
    stats = RunStats{};
    stats.kernels.reserve(64);
    size_t nlaunch = 0, nd2d = 0;  // device copies need the HBM arbiter too
    for (auto& s : streams)
      for (auto& op : s) {
        nlaunch += op.kind == StreamOp::kLaunch;
        nd2d += op.kind == StreamOp::kD2D;
      }
    stats.kernels.reserve(nlaunch);
    records_done.assign(records_enqueued.size(), 0);
    event_evs.clear();
    for (size_t i = 0; i < records_enqueued.size(); ++i) event_evs.push_back(std::make_unique<sc_event>());
    stream_state.assign(streams.size(), "");
    aicpu_busy.assign(machine.aicpu().cores(), false);
    link_busy[0] = link_busy[1] = false;
    links_busy = false;
    trace.Reset(opt.max_trace_events);
    trace.set_enabled(opt.trace);
    if (opt.trace) trace.NameTrack(Trace::kHbm, 0, "HBM", "bandwidth");

    const int ncores = machine.chip().ai_cores();
    // Cores keep their buffers between runs; a fresh core starts zeroed.
    if (static_cast<int>(cores.size()) != ncores) {
      cores.clear();
      for (int i = 0; i < ncores; ++i) {
        auto c = std::make_unique<CoreState>();
        c->id = i;
        for (int s = 2; s < 7; ++s) {
          c->buf[s].assign(static_cast<size_t>(sizes.bytes[s]), 0);
          c->ctx.local[s] = c->buf[s].data();
        }
        cores.push_back(std::move(c));
      }
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
    if (nlaunch + nd2d > 0 && !engine_alive) {
      engine_alive = true;
      Spawn("hbm", true, [this] { HbmMain(); });
      for (auto& c : cores) {
        CoreState* cp = c.get();
        Spawn(absl::StrCat("core", cp->id), true, [this, cp] { CoreMain(*cp); });
        for (int p = 1; p < kNumPipes; ++p)
          Spawn(absl::StrCat("core", cp->id, "_", PipeName(static_cast<Pipe>(p))), true,
                [this, cp, p] { PipeMain(*cp, static_cast<Pipe>(p)); });
      }
    }

    try {
      sc_core::sc_start(Cycles(opt.cycle_limit), sc_core::SC_EXIT_ON_STARVATION);
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
      }
      return stats;
    } catch (const std::exception& e) {
      return Internal("SystemC: ", e.what());
    }
  }
};

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

StreamId Device::CreateStream() {
  impl_->streams.emplace_back();
  return static_cast<StreamId>(impl_->streams.size() - 1);
}

EventId Device::CreateEvent() {
  impl_->records_enqueued.push_back(0);
  return static_cast<EventId>(impl_->records_enqueued.size() - 1);
}

namespace {
absl::Status CheckStream(const Device::Impl& d, StreamId s) {
  if (s < 0 || s >= static_cast<int>(d.streams.size())) return InvalidArgument("no stream ", s);
  return absl::OkStatus();
}
}  // namespace

absl::Status Device::Launch(StreamId s, KernelId k, int64_t block_dim, std::vector<DevAddr> args) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  if (k < 0 || k >= static_cast<int>(impl_->programs.size())) return InvalidArgument("no kernel ", k);
  const Program& p = *impl_->programs[k];
  if (block_dim < 1) return InvalidArgument("launch of ", p.name, ": block_dim must be at least 1");
  if (args.size() != p.args.size())
    return InvalidArgument("launch of ", p.name, ": takes ", p.args.size(), " arguments, got ", args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    auto r = impl_->memory.Resolve(args[i], p.args[i].Bytes());
    if (!r.ok()) return InvalidArgument("launch of ", p.name, ": argument ", p.args[i].name, ": ", r.status().message());
  }
  StreamOp op;
  op.kind = StreamOp::kLaunch;
  op.kernel = k;
  op.block_dim = block_dim;
  op.args = std::move(args);
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

absl::Status Device::CopyH2D(StreamId s, DevAddr dst, const void* src, int64_t bytes) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  KILN_RETURN_IF_ERROR(impl_->memory.Resolve(dst, bytes).status());
  StreamOp op;
  op.kind = StreamOp::kH2D;
  op.dev = dst;
  op.chost = src;
  op.bytes = bytes;
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

absl::Status Device::CopyD2H(StreamId s, void* dst, DevAddr src, int64_t bytes) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  KILN_RETURN_IF_ERROR(impl_->memory.Resolve(src, bytes).status());
  StreamOp op;
  op.kind = StreamOp::kD2H;
  op.dev = src;
  op.host = dst;
  op.bytes = bytes;
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

absl::Status Device::CopyD2D(StreamId s, DevAddr dst, DevAddr src, int64_t bytes) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  if (bytes < 0) return InvalidArgument("a device copy of ", bytes, " bytes");
  KILN_RETURN_IF_ERROR(impl_->memory.Resolve(dst, bytes).status());
  KILN_RETURN_IF_ERROR(impl_->memory.Resolve(src, bytes).status());
  StreamOp op;
  op.kind = StreamOp::kD2D;
  op.dev = dst;
  op.src = src;
  op.bytes = bytes;
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

absl::Status Device::LaunchAicpu(StreamId s, std::string name, double ops, std::function<absl::Status(Device&)> fn) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  if (!(ops >= 0)) return InvalidArgument("AICPU task ", name, ": negative cost");
  StreamOp op;
  op.kind = StreamOp::kAicpu;
  op.name = std::move(name);
  op.ops = ops;
  op.fn = std::move(fn);
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

absl::Status Device::AllReduce(StreamId s, std::string name, int64_t bytes, int chips,
                               std::function<absl::Status(Device&)> fn) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  // The time depends only on the machine and the sizes: computed once, here,
  // so a machine without links is refused before the run.
  absl::StatusOr<double> cycles = AllReduceCycles(impl_->machine, bytes, chips);
  if (!cycles.ok()) return InvalidArgument("AllReduce ", name, ": ", cycles.status().message());
  StreamOp op;
  op.kind = StreamOp::kAllReduce;
  op.name = std::move(name);
  op.bytes = bytes;
  op.cycles = *cycles;
  op.fn = std::move(fn);
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

absl::Status Device::RecordEvent(StreamId s, EventId e) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  if (e < 0 || e >= static_cast<int>(impl_->records_enqueued.size())) return InvalidArgument("no event ", e);
  StreamOp op;
  op.kind = StreamOp::kRecord;
  op.event = e;
  ++impl_->records_enqueued[e];
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

absl::Status Device::WaitEvent(StreamId s, EventId e) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  if (e < 0 || e >= static_cast<int>(impl_->records_enqueued.size())) return InvalidArgument("no event ", e);
  StreamOp op;
  op.kind = StreamOp::kWait;
  op.event = e;
  op.target = impl_->records_enqueued[e];
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

absl::StatusOr<RunStats> Device::Run(const RunOptions& options) { return impl_->Run(options); }

const Trace& Device::trace() const { return impl_->trace; }

}  // namespace kiln::sim
