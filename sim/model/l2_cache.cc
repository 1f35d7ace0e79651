//===- l2_cache.cc - The chip's shared L2, as tags ------------------------===//
#include "sim/model/l2_cache.h"

#include <algorithm>

namespace kiln::sim {

void L2Cache::Configure(int64_t bytes, int64_t line_bytes, int ways) {
  line_ = std::max<int64_t>(line_bytes, 1);
  ways_ = std::max(ways, 1);
  sets_ = bytes > 0 ? static_cast<uint64_t>(bytes / (line_ * ways_)) : 0;
  tags_.assign(sets_ * static_cast<uint64_t>(ways_), Way{});
  clock_ = 0;
}

void L2Cache::Reset() {
  if (clock_ == 0) return;  // nothing was touched since the last reset
  std::fill(tags_.begin(), tags_.end(), Way{});
  clock_ = 0;
}

uint64_t L2Cache::SetOf(uint64_t line) const {
  // Higher address bits folded into the index with XOR, as caches' set
  // hashes do: consecutive lines still fill the sets evenly (within each
  // 8192-line block the fold is a fixed permutation), and lines a large
  // power of two apart no longer share a set.
  return (line ^ (line >> 13) ^ (line >> 23)) % sets_;
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
  for (uint64_t line = addr / line_bytes; line * line_bytes < end; ++line) {
    const uint64_t from = std::max(addr, line * line_bytes), to = std::min(end, (line + 1) * line_bytes);
    const int64_t bytes = static_cast<int64_t>(to - from);
    Way* set = &tags_[SetOf(line) * static_cast<uint64_t>(ways_)];
    Way* hit = nullptr;
    Way* victim = set;
    for (int w = 0; w < ways_; ++w) {
      if (set[w].used != 0 && set[w].line == line) {
        hit = &set[w];
        break;
      }
      if (set[w].used < victim->used) victim = &set[w];
    }
    ++clock_;
    if (hit) {
      hit->used = clock_;
      hit->dirty |= write;
      out->hit_bytes += bytes;
      continue;
    }
    if (victim->used != 0 && victim->dirty) out->writeback_bytes += line_;
    *victim = Way{line, clock_, write};
    if (write) {
      out->hit_bytes += bytes;
    } else {
      out->miss_bytes += bytes;
      out->fill_bytes += line_;
    }
  }
}

void L2Cache::Invalidate(uint64_t addr, int64_t len) {
  if (!enabled() || len <= 0 || clock_ == 0) return;
  const uint64_t line_bytes = static_cast<uint64_t>(line_);
  const uint64_t end = addr + static_cast<uint64_t>(len);
  // A range larger than the cache: visit the tags instead of the lines.
  if (static_cast<uint64_t>(len) / line_bytes > tags_.size()) {
    for (Way& w : tags_)
      if (w.used != 0 && w.line * line_bytes < end && (w.line + 1) * line_bytes > addr) w = Way{};
    return;
  }
  for (uint64_t line = addr / line_bytes; line * line_bytes < end; ++line) {
    Way* set = &tags_[SetOf(line) * static_cast<uint64_t>(ways_)];
    for (int w = 0; w < ways_; ++w)
      if (set[w].used != 0 && set[w].line == line) set[w] = Way{};
  }
}

}  // namespace kiln::sim
