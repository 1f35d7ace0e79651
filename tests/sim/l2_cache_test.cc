//===- l2_cache_test.cc - The L2's tags: hits, misses, write-backs -------===//
//
// The rules of docs/npu.md ("L2") for the tags alone: a line read once is
// resident and a re-read hits; a working set larger than the cache streams
// through it and misses; writes are absorbed and reach HBM only as whole
// dirty lines evicted; a read miss fetches its whole line from HBM, while
// hits and misses count the bytes the access asked for; a host copy's
// range is dropped; what a read would fetch is the whole lines not held; a
// chip without an L2 charges every byte to HBM.
//
//===----------------------------------------------------------------------===//
#include "sim/model/l2_cache.h"

#include "gtest/gtest.h"

namespace kiln::sim {
namespace {

constexpr int64_t kLine = 512;

L2Cache Make(int64_t bytes, int ways = 16) {
  L2Cache c;
  c.Configure(bytes, kLine, ways);
  return c;
}

TEST(L2Cache, AReReadOfResidentLinesHits) {
  L2Cache c = Make(1 << 20);
  L2Cache::Outcome first, again;
  c.Access(0x10000, 64 << 10, false, &first);
  EXPECT_EQ(first.miss_bytes, 64 << 10);
  EXPECT_EQ(first.hit_bytes, 0);
  c.Access(0x10000, 64 << 10, false, &again);
  EXPECT_EQ(again.hit_bytes, 64 << 10);
  EXPECT_EQ(again.miss_bytes, 0);
  EXPECT_EQ(again.writeback_bytes, 0);
}

TEST(L2Cache, AWorkingSetBeyondCapacityMisses) {
  // LRU over a stream twice the cache: when the stream comes round again its
  // first lines were evicted long ago, and so is every line after them.
  L2Cache c = Make(1 << 20);
  L2Cache::Outcome fill, round2;
  c.Access(0, 2 << 20, false, &fill);
  c.Access(0, 2 << 20, false, &round2);
  EXPECT_EQ(fill.miss_bytes, 2 << 20);
  EXPECT_EQ(round2.hit_bytes, 0);
  // A working set that fits stays: half the cache, read three times.
  L2Cache d = Make(1 << 20);
  L2Cache::Outcome a, b;
  d.Access(0, 512 << 10, false, &a);
  d.Access(0, 512 << 10, false, &b);
  d.Access(0, 512 << 10, false, &b);
  EXPECT_EQ(b.hit_bytes, 2 * (512 << 10));
}

TEST(L2Cache, WritesAreAbsorbedAndDirtyLinesWrittenBackWhenEvicted) {
  L2Cache c = Make(64 << 10, 1);  // 128 sets of one line: 128 contiguous lines fill it
  L2Cache::Outcome w, r;
  c.Access(0, 64 << 10, true, &w);
  EXPECT_EQ(w.hit_bytes, 64 << 10);  // into the L2, nothing to HBM yet
  EXPECT_EQ(w.writeback_bytes + w.miss_bytes, 0);
  c.Access(0, 64 << 10, false, &r);  // reading back what was written hits
  EXPECT_EQ(r.hit_bytes, 64 << 10);
  // A stream of reads four times the cache evicts every dirty line once,
  // each as a whole line; the clean lines it leaves are then dropped silently.
  L2Cache::Outcome evict, clean;
  c.Access(1 << 20, 256 << 10, false, &evict);
  EXPECT_EQ(evict.writeback_bytes, 64 << 10);
  c.Access(4 << 20, 256 << 10, false, &clean);
  EXPECT_EQ(clean.writeback_bytes, 0);
  // A partial write still dirties the whole line.
  L2Cache::Outcome part, out;
  c.Access(0, 8, true, &part);
  c.Access(8 << 20, 64 << 10, false, &out);
  EXPECT_EQ(out.writeback_bytes, kLine);
}

TEST(L2Cache, BytesCountAsTheAccessAsksForThem) {
  L2Cache c = Make(1 << 20);
  L2Cache::Outcome o;
  c.Access(100, 10, false, &o);  // part of one line: the line comes from HBM
  EXPECT_EQ(o.miss_bytes, 10);
  EXPECT_EQ(o.fill_bytes, kLine);
  c.Access(110, 1000, false, &o);  // the rest of that line, then two more
  EXPECT_EQ(o.hit_bytes, kLine - 110);
  EXPECT_EQ(o.miss_bytes, 10 + 1000 - (kLine - 110));
  EXPECT_EQ(o.fill_bytes, 3 * kLine);
}

TEST(L2Cache, AHostCopyDropsItsRange) {
  L2Cache c = Make(1 << 20);
  L2Cache::Outcome o;
  c.Access(0, 8 * kLine, false, &o);
  c.Invalidate(2 * kLine, 2 * kLine);
  L2Cache::Outcome again;
  c.Access(0, 8 * kLine, false, &again);
  EXPECT_EQ(again.miss_bytes, 2 * kLine);
  EXPECT_EQ(again.hit_bytes, 6 * kLine);
  // A range larger than the cache visits the tags instead.
  c.Invalidate(0, 64 << 20);
  L2Cache::Outcome cold;
  c.Access(0, 8 * kLine, false, &cold);
  EXPECT_EQ(cold.miss_bytes, 8 * kLine);
}

TEST(L2Cache, ResetEmptiesIt) {
  L2Cache c = Make(1 << 20);
  L2Cache::Outcome o, after;
  c.Access(0, 4096, false, &o);
  c.Reset();
  c.Access(0, 4096, false, &after);
  EXPECT_EQ(after.miss_bytes, 4096);
}

TEST(L2Cache, AbsentBytesAreTheWholeLinesNotHeld) {
  L2Cache c = Make(1 << 20);
  L2Cache::Outcome o;
  c.Access(0, 4096, false, &o);
  EXPECT_EQ(c.AbsentBytes(0, 8192), 4096);
  EXPECT_EQ(c.AbsentBytes(100, 10), 0);
  EXPECT_EQ(c.AbsentBytes(4096 + 1, 10), kLine);  // a part of a line fetches the whole line
  EXPECT_EQ(c.AbsentBytes(0, 0), 0);
  L2Cache::Outcome again;  // asking changes nothing
  c.Access(4096, 512, false, &again);
  EXPECT_EQ(again.miss_bytes, 512);
  L2Cache none = Make(0);
  EXPECT_EQ(none.AbsentBytes(100, 10), 10);
}

TEST(L2Cache, WithoutAnL2EveryByteGoesToHbm) {
  L2Cache c = Make(0);
  EXPECT_FALSE(c.enabled());
  L2Cache::Outcome o;
  c.Access(0, 4096, false, &o);
  c.Access(0, 4096, false, &o);
  c.Access(0, 1000, true, &o);
  EXPECT_EQ(o.miss_bytes, 8192);
  EXPECT_EQ(o.fill_bytes, 8192);  // exactly the bytes asked for: no lines
  EXPECT_EQ(o.writeback_bytes, 1000);
  EXPECT_EQ(o.hit_bytes, 0);
}

}  // namespace
}  // namespace kiln::sim
