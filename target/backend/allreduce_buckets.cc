//===- allreduce_buckets.cc - Grouping a step's AllReduces into buckets ---===//
#include "target/backend/allreduce_buckets.h"

#include <algorithm>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "graph/support/status.h"

namespace kiln::target {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
// PyTorch DDP's defaults (bucket_cap_mb and the first bucket's size).
constexpr int64_t kDdpCap = 25 * kMiB;
constexpr int64_t kDdpFirst = 1 * kMiB;

// Closes a bucket once it holds `cap` bytes (the first one at `first`).
std::vector<std::vector<int>> ByCap(const std::vector<AllReduceItem>& items, int64_t first, int64_t cap) {
  std::vector<std::vector<int>> out;
  std::vector<int> open;
  int64_t bytes = 0;
  for (int i = 0; i < static_cast<int>(items.size()); ++i) {
    open.push_back(i);
    bytes += items[i].bytes;
    if (bytes >= (out.empty() ? first : cap)) {
      out.push_back(std::move(open));
      open.clear();
      bytes = 0;
    }
  }
  if (!open.empty()) out.push_back(std::move(open));
  return out;
}

}  // namespace

absl::StatusOr<std::string> ParseBucketStrategy(const std::string& text) {
  if (text == "search" || text == "ddp" || text == "single" || text == "per-tensor") return text;
  absl::string_view number = text;
  absl::ConsumeSuffix(&number, "MiB");
  double mib = 0;
  if (absl::SimpleAtod(number, &mib) && mib > 0 && mib <= 1 << 20) return absl::StrCat(number, "MiB");
  return absl::InvalidArgumentError(absl::StrCat("--buckets must be search, ddp, single, per-tensor or a size in MiB, "
                                                 "not '", text, "'"));
}

absl::StatusOr<std::vector<PlannedBucket>> PlanBuckets(const std::string& strategy,
                                                       const std::vector<AllReduceItem>& items,
                                                       const CollectiveTime& time) {
  KILN_ASSIGN_OR_RETURN(std::string s, ParseBucketStrategy(strategy));
  const int n = static_cast<int>(items.size());
  std::vector<int64_t> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + items[i].bytes;
  auto link = [&](int i, int j) { return time(prefix[j] - prefix[i]); };

  std::vector<std::vector<int>> groups;
  if (s == "single") {
    if (n) groups.emplace_back();
    for (int i = 0; i < n; ++i) groups.back().push_back(i);
  } else if (s == "per-tensor") {
    for (int i = 0; i < n; ++i) groups.push_back({i});
  } else if (s == "ddp") {
    groups = ByCap(items, kDdpFirst, kDdpCap);
  } else if (s != "search") {
    double mib = 0;
    absl::SimpleAtod(absl::StripSuffix(s, "MiB"), &mib);
    int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(mib * static_cast<double>(kMiB)));
    groups = ByCap(items, cap, cap);
  } else {
    // f[j]: the earliest end of the first j items; from[j]: where the last
    // bucket of that plan starts; count[j]: its buckets.
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> f(n + 1, inf);
    std::vector<int> from(n + 1, 0), count(n + 1, 0);
    f[0] = 0;
    for (int j = 1; j <= n; ++j) {
      for (int i = 0; i < j; ++i) {
        KILN_ASSIGN_OR_RETURN(double t, link(i, j));
        double end = std::max(f[i], items[j - 1].ready) + t;
        if (end < f[j] - 1e-9 || (end <= f[j] + 1e-9 && count[i] + 1 < count[j])) {
          f[j] = end;
          from[j] = i;
          count[j] = count[i] + 1;
        }
      }
    }
    for (int j = n; j > 0; j = from[j]) {
      groups.emplace_back();
      for (int i = from[j]; i < j; ++i) groups.back().push_back(i);
    }
    std::reverse(groups.begin(), groups.end());
  }

  std::vector<PlannedBucket> out;
  double links_free = 0;
  for (std::vector<int>& g : groups) {
    PlannedBucket b;
    b.items = std::move(g);
    KILN_ASSIGN_OR_RETURN(double t, link(b.items.front(), b.items.back() + 1));
    b.bytes = prefix[b.items.back() + 1] - prefix[b.items.front()];
    b.start = std::max(links_free, items[b.items.back()].ready);
    b.end = b.start + t;
    links_free = b.end;
    out.push_back(std::move(b));
  }
  return out;
}

absl::StatusOr<double> RingAllReduceSeconds(const LinkFigures& links, int64_t bytes, int devices) {
  if (devices < 1) return absl::InvalidArgumentError(absl::StrCat("an AllReduce needs at least 1 device, got ", devices));
  if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("an AllReduce of a negative size (", bytes, " bytes)"));
  if (devices == 1) return 0.0;
  if (links.bytes_per_second <= 0)
    return absl::InvalidArgumentError(absl::StrCat("the target has no links between devices: an AllReduce among ",
                                                   devices, " cannot run"));
  if (links.max_devices > 0 && devices > links.max_devices)
    return absl::InvalidArgumentError(absl::StrCat("the links join ", links.max_devices, " devices, not ", devices));
  const double chunk = static_cast<double>(bytes) / devices;
  return links.launch_seconds + 2.0 * (devices - 1) * (links.latency_seconds + chunk / links.bytes_per_second);
}

}  // namespace kiln::target
