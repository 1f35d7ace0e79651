//===- l2_cache.h - The chip's shared L2, as tags ---------------*- C++ -*-===//
//
// The L2 between the AI cores and HBM, as the timing model sees it: which
// lines of device memory it holds, not their data (the functional model
// reads and writes device memory directly). Set-associative with LRU
// replacement; a line's set folds higher address bits into the low ones, so
// tensors laid out at power-of-two strides spread over the sets as they do
// on real caches while a contiguous range still fills them evenly.
// Writes allocate without fetching (a DMA writes whole bursts) and mark the
// line dirty; a dirty line goes to HBM when it is evicted (write-back).
//
// A read that misses fetches the whole line from HBM (later reads of the
// rest of the line hit); write-backs move whole lines. A chip without an L2
// (capacity 0) charges HBM exactly the bytes a DMA moves.
//
// Internal to sim/model; no SystemC, so it is tested on its own.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::sim {

class L2Cache {
 public:
  // What one access did.
  struct Outcome {
    int64_t hit_bytes = 0;        // of the access, served by the L2 (reads that hit, and every write)
    int64_t miss_bytes = 0;       // of the access, reads that missed
    int64_t fill_bytes = 0;       // read from HBM for the misses: whole lines
    int64_t writeback_bytes = 0;  // dirty lines evicted to HBM to make room
  };

  // A cache of `bytes` (0: none) in lines of `line_bytes`, `ways` to a set.
  // Sizes that do not divide evenly round the set count down.
  void Configure(int64_t bytes, int64_t line_bytes, int ways);
  bool enabled() const { return sets_ > 0; }
  int64_t line_bytes() const { return line_; }
  // Empties it (a run starts with a cold cache).
  void Reset();

  // Reads or writes [addr, addr + len) of device memory, adding to `out`.
  void Access(uint64_t addr, int64_t len, bool write, Outcome* out);
  // The bytes of the whole lines of [addr, addr + len) it does not hold
  // (all of them without an L2): what reading the range would fetch.
  int64_t AbsentBytes(uint64_t addr, int64_t len) const;
  // Drops the lines of [addr, addr + len) without writing them back: memory
  // there was replaced from outside the cores (a host copy).
  void Invalidate(uint64_t addr, int64_t len);

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  uint64_t SetOf(uint64_t line) const;
  // The way of the set starting at `base` that holds `line`, or base +
  // ways_ when none does (a line is in one way at most).
  size_t WayOf(uint64_t line, size_t base) const;
  void Drop(size_t way);

  int64_t line_ = 0;
  int ways_ = 0;
  uint64_t sets_ = 0;
  uint64_t set_mask_ = 0;  // sets_ - 1 where sets_ is a power of two (an AND, not a division), else 0
  uint64_t clock_ = 0;
  // Per way (sets_ * ways_, a set's ways side by side): the line it holds
  // (kEmpty: none), when it was last used (LRU), whether it is dirty. Kept
  // apart so a lookup scans only the lines.
  std::vector<uint64_t> lines_, used_;
  std::vector<uint8_t> dirty_;
};

}  // namespace kiln::sim
