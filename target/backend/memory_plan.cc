//===- memory_plan.cc - Liveness-based placement of device buffers --------===//
#include "target/backend/memory_plan.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace kiln::target {
namespace {

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

}  // namespace

MemoryPlan PlanMemory(const std::vector<BufferLife>& buffers, int64_t alignment) {
  MemoryPlan plan;
  const size_t n = buffers.size();
  plan.offsets.assign(n, 0);
  std::vector<int64_t> size(n);
  for (size_t i = 0; i < n; ++i) {
    size[i] = AlignUp(std::max<int64_t>(buffers[i].bytes, 1), alignment);
    plan.naive_bytes += size[i];
  }
  // The lower bound: the most bytes live at any one task.
  std::map<int, int64_t> delta;
  for (size_t i = 0; i < n; ++i) {
    delta[buffers[i].first] += size[i];
    delta[buffers[i].last + 1] -= size[i];
  }
  int64_t live = 0;
  for (const auto& [t, d] : delta) plan.live_bound = std::max(plan.live_bound, live += d);

  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return size[a] > size[b]; });
  struct Placed {
    int64_t begin, end;
    int first, last;
  };
  std::vector<Placed> placed;  // sorted by begin
  for (size_t i : order) {
    const BufferLife& b = buffers[i];
    int64_t offset = 0;
    // Walk the placed buffers that overlap in time, in address order, and
    // take the first gap that fits.
    for (const Placed& p : placed) {
      if (p.last < b.first || b.last < p.first) continue;
      if (p.begin >= offset + size[i]) break;
      offset = std::max(offset, p.end);
    }
    plan.offsets[i] = offset;
    Placed np{offset, offset + size[i], b.first, b.last};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), np,
                                   [](const Placed& x, const Placed& y) { return x.begin < y.begin; }),
                  np);
    plan.peak_bytes = std::max(plan.peak_bytes, offset + size[i]);
  }
  return plan;
}

}  // namespace kiln::target
