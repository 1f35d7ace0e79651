//===- l2_prefetch_plan.cc - Weights read into the L2 ahead of use --------===//
#include "target/npusim/l2_prefetch_plan.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "sim/machine/machine.h"
#include "target/artifact/artifact_io.h"

namespace kiln::target::npusim {
namespace {

using artifact::Buffer;

// The device buffers a task touches (roots, each once).
std::vector<int> TouchedBy(const artifact::NpusimModule& m, const artifact::Task& t) {
  std::vector<int> out;
  auto add = [&](int b) {
    if (b < 0) return;
    const int r = artifact::RootBuffer(m, b);
    if (m.buffers(r).kind() != Buffer::HOST && std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  };
  if (t.has_kernel())
    for (int a : t.kernel().args()) add(a);
  if (t.has_aicpu()) {
    for (int a : t.aicpu().operands()) add(a);
    for (int a : t.aicpu().outputs()) add(a);
  }
  if (t.has_collective()) {
    for (int a : t.collective().inputs()) add(a);
    for (int a : t.collective().outputs()) add(a);
  }
  return out;
}

}  // namespace

void PlanL2Prefetches(artifact::NpusimModule& module, const sim::Machine& machine) {
  const double l2_bytes = static_cast<double>(machine.chip().l2_size_mib()) * (1 << 20);
  const double hbm = sim::HbmBytesPerCycle(machine);
  if (l2_bytes <= 0 || hbm <= 0) return;
  const double budget = kL2Share * l2_bytes;
  const int n = module.tasks_size();
  std::vector<std::vector<int>> touched(n), constants(n);
  std::vector<double> constant_bytes(n, 0), idle(n, 0);
  for (int t = 0; t < n; ++t) {
    touched[t] = TouchedBy(module, module.tasks(t));
    for (int b : touched[t])
      if (module.buffers(b).kind() == Buffer::CONSTANT && module.buffers(b).bytes() > 0) {
        constants[t].push_back(b);
        constant_bytes[t] += static_cast<double>(module.buffers(b).bytes());
      }
    // The HBM time the task leaves to others, by its estimate (AICPU tasks
    // and views have none: none counted).
    idle[t] = std::max(0.0, module.tasks(t).estimated_cycles() - constant_bytes[t] / hbm);
  }
  int last_start = 0;  // prefetches are issued in order, on one stream
  for (int t = 1; t < n; ++t) {
    const artifact::Task& task = module.tasks(t);
    const bool streams = task.engine() == "cube" && constant_bytes[t] >= kMinPrefetchBytes &&
                         constant_bytes[t] / hbm >= kStreamingShare * task.estimated_cycles();
    const bool small = constant_bytes[t] > 0 && constant_bytes[t] <= kSmallPrefetchBytes;
    if (!task.has_kernel() || !(streams || small)) continue;
    // Walk back from the task while the L2 holds what the tasks from the
    // start up to it touch, with the prefetch (of a weight larger than half
    // the budget, its first half: so the walk can still start it some
    // tasks ahead).
    const double target = std::min(constant_bytes[t], budget / 2);
    absl::flat_hash_set<int> window;
    double held = 0, covered = 0;
    int start = t;
    while (start > last_start) {
      double more = 0;
      for (int b : touched[start - 1])
        if (!window.contains(b)) more += static_cast<double>(module.buffers(b).bytes());
      if (held + more + target > budget) break;
      --start;
      held += more;
      covered += idle[start];
      window.insert(touched[start].begin(), touched[start].end());
    }
    double want = std::min(constant_bytes[t], budget - held);
    // Too little idle HBM time before it to fill: the kernel would wait
    // for the prefetch's fills rather than make its own.
    if (start == t || covered < kCoveredShare * want / hbm) continue;
    last_start = start;
    for (int b : constants[t]) {
      if (want <= 0) break;
      const int64_t bytes = std::min<int64_t>(module.buffers(b).bytes(), static_cast<int64_t>(want));
      artifact::L2Prefetch* p = module.add_prefetches();
      p->set_buffer(b);
      p->set_bytes(bytes);
      p->set_start(start);
      p->set_task(t);
      want -= static_cast<double>(bytes);
    }
  }
}

}  // namespace kiln::target::npusim
