//===- l2_cache.cc - The chip's shared L2, as tags ------------------------===//
#include "sim/model/l2_cache.h"

#include <algorithm>

namespace kiln::sim {

void L2Cache::Configure(int64_t bytes, int64_t line_bytes, int ways) {
  line_ = std::max<int64_t>(line_bytes, 1);
  ways_ = std::max(ways, 1);
  sets_ = bytes > 0 ? static_cast<uint64_t>(bytes / (line_ * ways_)) : 0;
  set_mask_ = sets_ > 0 && (sets_ & (sets_ - 1)) == 0 ? sets_ - 1 : 0;
  const size_t n = sets_ * static_cast<uint64_t>(ways_);
  lines_.assign(n, kEmpty);
  used_.assign(n, 0);
  dirty_.assign(n, 0);
  clock_ = 0;
}

void L2Cache::Reset() {
  if (clock_ == 0) return;  // nothing was touched since the last reset
  std::fill(lines_.begin(), lines_.end(), kEmpty);
  std::fill(used_.begin(), used_.end(), 0);
  std::fill(dirty_.begin(), dirty_.end(), 0);
  clock_ = 0;
}

uint64_t L2Cache::SetOf(uint64_t line) const {
  // Higher address bits folded into the index with XOR, as caches' set
  // hashes do: consecutive lines still fill the sets evenly (within each
  // 8192-line block the fold is a fixed permutation), and lines a large
  // power of two apart no longer share a set.
  const uint64_t h = line ^ (line >> 13) ^ (line >> 23);
  return set_mask_ != 0 || sets_ == 1 ? h & set_mask_ : h % sets_;
}

size_t L2Cache::WayOf(uint64_t line, size_t base) const {
  const size_t end = base + static_cast<size_t>(ways_);
  size_t w = base;
  while (w < end && lines_[w] != line) ++w;
  return w;
}

void L2Cache::Drop(size_t way) {
  lines_[way] = kEmpty;
  used_[way] = 0;
  dirty_[way] = 0;
}

void L2Cache::Access(uint64_t addr, int64_t len, bool write, Outcome* out) {
  if (len <= 0) return;
  if (!enabled()) {
    if (write) {
      out->writeback_bytes += len;
    } else {
      out->miss_bytes += len;
      out->fill_bytes += len;
    }
    return;
  }
  const uint64_t line_bytes = static_cast<uint64_t>(line_);
  const uint64_t end = addr + static_cast<uint64_t>(len);
  const size_t ways = static_cast<size_t>(ways_);
  for (uint64_t line = addr / line_bytes; line * line_bytes < end; ++line) {
    const uint64_t from = std::max(addr, line * line_bytes), to = std::min(end, (line + 1) * line_bytes);
    const int64_t bytes = static_cast<int64_t>(to - from);
    const size_t base = SetOf(line) * ways;
    const size_t w = WayOf(line, base);
    ++clock_;
    if (w < base + ways) {  // a hit
      used_[w] = clock_;
      dirty_[w] |= write;
      out->hit_bytes += bytes;
      continue;
    }
    // A miss: the least recently used way (an empty one has never been used).
    size_t victim = base;
    for (size_t v = base + 1; v < base + ways; ++v)
      if (used_[v] < used_[victim]) victim = v;
    if (lines_[victim] != kEmpty && dirty_[victim]) out->writeback_bytes += line_;
    lines_[victim] = line;
    used_[victim] = clock_;
    dirty_[victim] = write;
    if (write) {
      out->hit_bytes += bytes;
    } else {
      out->miss_bytes += bytes;
      out->fill_bytes += line_;
    }
  }
}

int64_t L2Cache::AbsentBytes(uint64_t addr, int64_t len) const {
  if (len <= 0) return 0;
  if (!enabled()) return len;
  const uint64_t line_bytes = static_cast<uint64_t>(line_);
  const uint64_t end = addr + static_cast<uint64_t>(len);
  const size_t ways = static_cast<size_t>(ways_);
  int64_t absent = 0;
  for (uint64_t line = addr / line_bytes; line * line_bytes < end; ++line) {
    const size_t base = SetOf(line) * ways;
    if (WayOf(line, base) == base + ways) absent += line_;
  }
  return absent;
}

void L2Cache::Invalidate(uint64_t addr, int64_t len) {
  if (!enabled() || len <= 0 || clock_ == 0) return;
  const uint64_t line_bytes = static_cast<uint64_t>(line_);
  const uint64_t end = addr + static_cast<uint64_t>(len);
  // A range larger than the cache: visit the tags instead of the lines.
  if (static_cast<uint64_t>(len) / line_bytes > lines_.size()) {
    for (size_t w = 0; w < lines_.size(); ++w)
      if (lines_[w] != kEmpty && lines_[w] * line_bytes < end && (lines_[w] + 1) * line_bytes > addr) Drop(w);
    return;
  }
  const size_t ways = static_cast<size_t>(ways_);
  for (uint64_t line = addr / line_bytes; line * line_bytes < end; ++line) {
    const size_t base = SetOf(line) * ways;
    if (const size_t w = WayOf(line, base); w < base + ways) Drop(w);
  }
}

}  // namespace kiln::sim
