//===- core_pipes.cc - The AI cores' scalar units and pipes ---------------===//
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
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "sim/isa/asm.h"
#include "sim/isa/isa.h"
#include "sim/isa/verify.h"
#include "sim/model/device_impl.h"
#include "sim/model/exec.h"

namespace kiln::sim {

namespace {

constexpr double kSyncQuantum = 4096;  // cycles the scalar unit may run ahead of simulated time

}  // namespace

void Device::Impl::NameCoreTracks(int core) {
  for (int p = 0; p < kNumPipes; ++p)
    trace.NameTrack(core, p, absl::StrCat("AI core ", core), PipeTraceName(static_cast<Pipe>(p)));
}

bool Device::Impl::Drain(CoreState& c) {
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
bool Device::Impl::Sync(CoreState& c, Pipe p, const Issued& x, double* t) {
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
bool Device::Impl::ExecuteData(CoreState& c, Pipe p, const Issued& x, double* t) {
  const Inst& in = *x.in;
  PipeState& ps = c.pipes[static_cast<int>(p)];
  Cost cost = InstCost(in, machine);
  const bool functional = opt.functional || (c.launch && c.launch->computes);
#ifndef NDEBUG
  // Debug and sanitizer builds check again, where memory is touched, what
  // the issue-time check allowed: an access outside its buffer is an
  // internal error naming the instruction, never a wild write.
  if (functional) {
    std::array<Access, 4> acc;
    const int n = Accesses(in, x.addr, &acc);
    for (int i = 0; i < n; ++i) {
      const Access& a = acc[i];
      const int64_t cap = a.space == Space::kGm ? c.launch->prog->args[a.arg].Bytes()
                                                : static_cast<int64_t>(c.buf[static_cast<int>(a.space)].size());
      if (a.begin < 0 || a.end < a.begin || a.end > cap) {
        Fail(absl::InternalError(absl::StrCat("instruction ", x.pc, " (", InstText(*c.launch->prog, in), ") would touch [",
                                              a.begin, ", ", a.end, ") of ", SpaceName(a.space), " (", cap,
                                              " bytes) when it executes")));
        return false;
      }
    }
  }
#endif
  if (functional) Execute(in, x.addr, c.ctx);
  double start = *t;
  PipeStats& st = c.stats[static_cast<int>(p)];
  if (cost.dma) {
    if (!WaitUntil(start)) return false;
    if (!pending_fills.empty()) {
      bool ok = true;
      ForEachGmRun(in, x.addr, [&](int operand, int64_t offset, int64_t len) {
        if (ok) ok = WaitForFills(c.launch->gm_dev[in.ops[operand].arg] + static_cast<uint64_t>(offset), len);
      });
      if (!ok) return false;
    }
    // The L2 serves what it holds; HBM the misses and the dirty lines they evict.
    L2Cache::Outcome l2_out;
    ForEachGmRun(in, x.addr, [&](int operand, int64_t offset, int64_t len) {
      const DevAddr base = c.launch->gm_dev[in.ops[operand].arg];
      l2_tags.Access(base + static_cast<uint64_t>(offset), len, cost.gm_write, &l2_out);
    });
    const double bytes = static_cast<double>(cost.gm_bytes);
    const double hbm_bytes = static_cast<double>(l2_out.fill_bytes + l2_out.writeback_bytes);
    const double l2_bytes = static_cast<double>(l2_out.hit_bytes);
    // Both parts run at the pipe's pace: alone, each ends when the pipe
    // would have moved the DMA's bytes (line fills and write-backs are the
    // L2's traffic, not the pipe's); HBM's or the L2's sharing slows them.
    const double pace = bytes > 0 ? cost.rate_cap / bytes : 0;
    if (!Transfer(hbm_bytes, pace * hbm_bytes, l2_bytes, pace * l2_bytes))
      return false;
    *t = Now();
    // An access the L2 served whole waits its hit latency, not HBM's (and
    // never longer than a miss would).
    double latency = cost.latency;
    if (l2_out.hit_bytes > 0 && l2_out.miss_bytes == 0 && l2_out.writeback_bytes == 0)
      latency += std::min(static_cast<double>(machine.chip().l2_hit_latency_cycles()), cost.hbm_latency) -
                 cost.hbm_latency;
    // A posted write completes once its bytes have left the pipe, after
    // its least duration.
    if (cost.posted_min_cycles > 0) *t = std::max(*t, start + cost.posted_min_cycles);
    // Busy from its start to its completion, less what overlaps the previous
    // DMA's tail (a hit's short latency may end inside a miss's long one).
    double done = *t + latency;
    st.busy_cycles += std::max(0.0, done - std::max(start, ps.done));
    ps.done = std::max(ps.done, done);
    KernelStats* ks = c.launch->stats;
    ks->hbm_read_bytes += l2_out.fill_bytes;
    ks->l2_miss_bytes += l2_out.miss_bytes;
    ks->hbm_write_bytes += l2_out.writeback_bytes;
    (cost.gm_write ? ks->l2_write_bytes : ks->l2_hit_bytes) += l2_out.hit_bytes;
    const Energy& e = machine.energy();
    // Every GM byte passes the L2 (where there is one); HBM's are the ones charged above, less the hits.
    cost.energy_pj += (hbm_bytes - bytes) * e.hbm_pj_per_byte() + (l2_tags.enabled() ? bytes * e.l2_pj_per_byte() : 0);
  } else {
    *t = start + cost.latency + cost.busy;
    ps.done = std::max(ps.done, *t);
    st.busy_cycles += *t - start;
  }
  ++st.instructions;
  st.energy_pj += cost.energy_pj;
  if (opt.trace && cost.energy_pj > 0) trace.Energy(start, *t, cost.energy_pj);
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

void Device::Impl::PipeMain(CoreState& c, Pipe p) {
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
bool Device::Impl::WaitForSlot(CoreState& c, PipeState& ps, size_t depth, double* local) {
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
bool Device::Impl::RunBlock(CoreState& c, LaunchState& L, int64_t block) {
  const Program& p = *L.prog;
  const Core& k = machine.core();
  const double slat = static_cast<double>(k.scalar_latency_cycles());
  const size_t depth = static_cast<size_t>(k.pipe_queue_depth());
  c.launch = &L;
  c.block = block;
  // A launch that computes in a timing-only run needs the core's buffers,
  // which only a functional run makes otherwise.
  if (L.computes)
    for (int s = 2; s < 7; ++s)
      if (c.buf[s].empty()) {
        c.buf[s].assign(static_cast<size_t>(sizes.bytes[s]), 0);
        c.ctx.local[s] = c.buf[s].data();
      }
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
        // A word of UB, sign-extended: what MTE2 wrote before a flag the
        // scalar unit awaited (0 in a timing-only run, unless the launch
        // computes: Device::Launch; what another launch left is not its data).
        const std::vector<uint8_t>& ub = c.buf[static_cast<int>(Space::kUb)];
        const int64_t a = o[1].imm + (o[1].reg >= 0 ? c.regs[o[1].reg] : 0);
        if (a < 0 || a % 4 || a + 4 > sizes.bytes[static_cast<int>(Space::kUb)]) {
          Fail(InvalidArgument("block ", block, ": instruction ", pc, " (", InstText(p, in), "): UB offset ", a,
                               " is not a word inside UB"));
          return false;
        }
        int32_t w = 0;
        if (!ub.empty() && (opt.functional || L.computes)) std::memcpy(&w, ub.data() + a, 4);
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
      // A barrier across the launch's blocks or on ALL, or a flag set or
      // awaited by the scalar unit itself.
      if (in.op == Op::kSyncAll || in.op == Op::kPipeBarrier) {
        // Every pipe drains; sync_all then waits for the launch's other blocks.
        if (!sync_to_local()) return false;
        double s = Now();
        const bool all_blocks = in.op == Op::kSyncAll;
        c.scalar_state = all_blocks ? "sync_all" : "pipe_barrier ALL";
        if (!Drain(c) || (all_blocks && !SyncAll(L, block))) return false;
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

bool Device::Impl::SyncAll(LaunchState& L, int64_t block) {
  // A block waiting here holds its core: the blocks it waits for must all
  // be running, or be able to start on the other cores.
  if (L.block_dim > static_cast<int64_t>(cores.size())) {
    Fail(InvalidArgument("block ", block, ": sync_all in a launch of ", L.block_dim, " blocks on ", cores.size(),
                         " AI cores: a barrier needs every block running at once"));
    return false;
  }
  const int64_t released = L.sync_released;
  ++L.sync_arrived;
  MaybeReleaseSync(L);
  while (L.sync_released == released)
    if (!WaitEvent(L.sync_ev)) return false;
  // Each block's arrival written to a word in GM and the release read
  // back, both served by the L2.
  return WaitCycles(2.0 * static_cast<double>(machine.chip().l2_hit_latency_cycles()));
}

void Device::Impl::MaybeReleaseSync(LaunchState& L) {
  if (L.sync_arrived == 0 || L.sync_arrived + L.done_blocks < L.block_dim) return;
  L.sync_arrived = 0;
  ++L.sync_released;
  L.sync_ev.notify();
}

void Device::Impl::CoreMain(CoreState& c) {
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
      L->stats->pipes[p].energy_pj += c.stats[p].energy_pj - before[p].energy_pj;
    }
    c.launch = nullptr;
    ++L->done_blocks;
    MaybeReleaseSync(*L);  // an ended block no longer holds a barrier back
    if (L->done_blocks == L->block_dim) {
      L->finished = true;
      L->stats->end_cycle = Now();
      L->stats->cores_used = static_cast<int>(L->cores.size());
      L->done_ev.notify();
    }
  }
}

}  // namespace kiln::sim
