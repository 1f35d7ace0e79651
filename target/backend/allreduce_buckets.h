//===- allreduce_buckets.h - Grouping a step's AllReduces into buckets -*- C++ -*-===//
//
// A data-parallel training step averages every gradient over the chips
// (kiln.AllReduce, one per gradient). Sent one by one, each pays the chip
// links' latency; sent as one bucket at the end of the backward pass,
// nothing overlaps the compute. A bucket plan groups the AllReduces, in the
// order their gradients are ready, into collectives that run on the links
// while the backward pass goes on. The strategies:
//
//   search      the split points that minimize the estimated end of the
//               last collective (below)
//   ddp         PyTorch DDP's rule: a bucket closes once it holds 25 MiB,
//               the first one at 1 MiB
//   single      one bucket, after the last gradient
//   per-tensor  one collective per gradient
//   N (MiB)     a bucket closes once it holds N MiB
//
// `search` is exact for its model: the compute stream runs its tasks one
// after another, each taking its estimated cycles, so gradient i is ready at
// r_i; the links run one collective at a time, a bucket of S bytes taking
// T(S), the target's time for an AllReduce of S bytes (a simulated chip's
// own rule for its links, or RingAllReduceSeconds over the links a
// description's LinkFigures state). With the gradients in ready order, the earliest
// end of the first j of them sent in buckets is
//   f(j) = min over i < j of max(f(i), r_j) + T(S(i..j)),
// a dynamic program over the n gradients in O(n^2) (ties: the prefix plan
// with fewer buckets). Times are in whatever unit the target uses for
// both, cycles or seconds.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "target/api/target.h"

namespace kiln::target {

// One AllReduce to place: its bytes and when its inputs are ready
// (estimated cycles from the first compute task).
struct AllReduceItem {
  int64_t bytes = 0;
  double ready = 0;
};

struct PlannedBucket {
  std::vector<int> items;  // indices into the items, ascending
  int64_t bytes = 0;
  double start = 0, end = 0;  // estimated, in cycles
};

// Checks a strategy name ("search", "ddp", "single", "per-tensor", or a
// positive number of MiB); returns it normalized ("25" -> "25MiB").
absl::StatusOr<std::string> ParseBucketStrategy(const std::string& text);

// The time of one collective of `bytes` bytes (in the items' unit).
using CollectiveTime = std::function<absl::StatusOr<double>(int64_t bytes)>;

// Groups `items` (sorted by ready time) into buckets under `strategy`.
absl::StatusOr<std::vector<PlannedBucket>> PlanBuckets(const std::string& strategy,
                                                       const std::vector<AllReduceItem>& items,
                                                       const CollectiveTime& time);

// An AllReduce of `bytes` over `devices` devices as a ring on links of
// `links` (reduce-scatter, then all-gather): its launch, then 2 (devices -
// 1) steps, each moving bytes / devices over one link and paying its
// latency. Seconds; 0 for one device; an error when the links cannot carry
// it.
absl::StatusOr<double> RingAllReduceSeconds(const LinkFigures& links, int64_t bytes, int devices);

}  // namespace kiln::target
