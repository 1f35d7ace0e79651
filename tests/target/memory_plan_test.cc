//===- memory_plan_test.cc - Liveness-based buffer placement --------------===//
#include "target/backend/memory_plan.h"

#include <random>

#include <gtest/gtest.h>

namespace kiln::target {
namespace {

bool Overlap(const BufferLife& a, int64_t oa, const BufferLife& b, int64_t ob, int64_t align) {
  auto up = [&](int64_t v) { return (std::max<int64_t>(v, 1) + align - 1) / align * align; };
  bool time = !(a.last < b.first || b.last < a.first);
  bool space = oa < ob + up(b.bytes) && ob < oa + up(a.bytes);
  return time && space;
}

TEST(MemoryPlan, ChainReusesFreedSpace) {
  // a -> b -> c -> d, each read only by the next: two buffers live at a time.
  std::vector<BufferLife> bufs = {{1024, 0, 1}, {1024, 1, 2}, {1024, 2, 3}, {1024, 3, 4}};
  MemoryPlan p = PlanMemory(bufs, 512);
  EXPECT_EQ(p.naive_bytes, 4096);
  EXPECT_EQ(p.live_bound, 2048);
  EXPECT_EQ(p.peak_bytes, 2048);
  EXPECT_EQ(p.offsets[0], p.offsets[2]);
}

TEST(MemoryPlan, AlignsEveryBuffer) {
  std::vector<BufferLife> bufs = {{3, 0, 5}, {700, 0, 5}, {1, 0, 5}};
  MemoryPlan p = PlanMemory(bufs, 512);
  for (int64_t o : p.offsets) EXPECT_EQ(o % 512, 0);
  EXPECT_EQ(p.peak_bytes, 512 + 1024 + 512);
}

TEST(MemoryPlan, RandomPlansNeverOverlapAndStayNearTheBound) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    int n = 1 + static_cast<int>(rng() % 60);
    std::vector<BufferLife> bufs;
    for (int i = 0; i < n; ++i) {
      int first = static_cast<int>(rng() % 40);
      bufs.push_back({static_cast<int64_t>(1 + rng() % 100000), first, first + static_cast<int>(rng() % 10)});
    }
    MemoryPlan p = PlanMemory(bufs, 512);
    ASSERT_EQ(p.offsets.size(), bufs.size());
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j)
        ASSERT_FALSE(Overlap(bufs[i], p.offsets[i], bufs[j], p.offsets[j], 512)) << trial << ": " << i << ", " << j;
    EXPECT_LE(p.live_bound, p.peak_bytes);
    EXPECT_LE(p.peak_bytes, p.naive_bytes);
    // The same input gives the same plan.
    EXPECT_EQ(PlanMemory(bufs, 512).offsets, p.offsets);
  }
}

TEST(MemoryPlan, Empty) {
  MemoryPlan p = PlanMemory({}, 512);
  EXPECT_EQ(p.peak_bytes, 0);
  EXPECT_EQ(p.naive_bytes, 0);
}

}  // namespace
}  // namespace kiln::target
