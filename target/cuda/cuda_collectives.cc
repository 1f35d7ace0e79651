//===- cuda_collectives.cc - A data-parallel step's NCCL buckets ----------===//
#include "target/cuda/cuda_collectives.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "target/backend/allreduce_buckets.h"

namespace kiln::target::cuda {
namespace {

// A kernel launch and its completion on the stream, as the planner charges it.
constexpr double kLaunchSeconds = 3e-6;
// A host task's stream synchronization and provider call.
constexpr double kHostTaskSeconds = 10e-6;

// The seconds the planner expects task `t` to take: its work on the
// description's peak rates (a kernel: flops or bytes, whichever takes
// longer, and a launch; a host task: its copies over the host link too).
double EstimatedTaskSeconds(const TargetDescription& d, const CudaPackage& package, const PackageTask& t) {
  switch (t.kind) {
    case PackageTask::Kind::kView:
    case PackageTask::Kind::kCollective:
      return 0;
    case PackageTask::Kind::kHost: {
      double copied = 0;
      for (int v : t.host_inputs)
        if (package.values[v].buffer >= 0) copied += static_cast<double>(package.buffers[package.values[v].buffer].bytes);
      for (int v : t.host_outputs)
        if (package.values[v].buffer >= 0) copied += static_cast<double>(package.buffers[package.values[v].buffer].bytes);
      return kHostTaskSeconds + (d.host_link_bytes_per_second > 0 ? copied / d.host_link_bytes_per_second : 0);
    }
    case PackageTask::Kind::kKernel: {
      double peak_flops = 0;
      for (const MmaShape& m : d.mma) peak_flops = std::max(peak_flops, 2 * m.macs_per_cycle);
      peak_flops *= d.compute_units * d.clock_ghz * 1e9;
      const double compute = peak_flops > 0 ? t.flops / peak_flops : 0;
      const double memory = d.global_bytes_per_second > 0 ? t.bytes / d.global_bytes_per_second : 0;
      return kLaunchSeconds * static_cast<double>(t.launches.size()) + std::max(compute, memory);
    }
  }
  return 0;
}

}  // namespace

absl::Status PlanCollectives(const TargetDescription& d, const CompileOptions& options, CudaPackage& package,
                             const std::function<int(int)>& root, const std::function<void(int, int)>& touch) {
  const std::string strategy = options.Setting("buckets");
  std::vector<int> collectives;
  for (size_t t = 0; t < package.tasks.size(); ++t)
    if (package.tasks[t].kind == PackageTask::Kind::kCollective) collectives.push_back(static_cast<int>(t));
  if (collectives.empty()) {
    if (!strategy.empty())
      return absl::InvalidArgumentError("--buckets applies to data-parallel steps (kiln.AllReduce nodes, made by "
                                        "`kiln opt --passes=training-step,default --replicas=N`); this model has none");
    return absl::OkStatus();
  }
  KILN_ASSIGN_OR_RETURN(package.buckets, ParseBucketStrategy(strategy.empty() ? "search" : strategy));
  const int num_tasks = static_cast<int>(package.tasks.size());
  // The task that writes each buffer root last before a collective, and
  // the tasks that read each root.
  std::vector<int> writer(package.buffers.size(), -1);
  std::vector<std::vector<int>> readers(package.buffers.size());
  std::vector<int> after(num_tasks, -1);
  auto reads = [&](int b, int t) {
    if (b >= 0) readers[root(b)].push_back(t);
  };
  for (int t = 0; t < num_tasks; ++t) {
    const PackageTask& task = package.tasks[t];
    if (task.kind == PackageTask::Kind::kCollective) {
      for (const CollectiveItem& c : task.collective) {
        after[t] = std::max(after[t], writer[root(c.input)]);
        writer[root(c.output)] = t;
      }
      continue;
    }
    for (const PackageTask::Launch& l : task.launches)
      for (int a : l.args) {
        reads(a, t);
        writer[root(a)] = t;  // a kernel may write any argument; the last one before a collective is what counts
      }
    for (int v : task.host_inputs) reads(package.values[v].buffer, t);
    for (int v : task.host_outputs)
      if (int b = package.values[v].buffer; b >= 0) writer[root(b)] = t;
  }
  // When each task ends, by the estimates, if they ran back to back (us).
  std::vector<double> end(num_tasks, 0);
  double clock = 0;
  for (int t = 0; t < num_tasks; ++t) end[t] = clock += 1e6 * EstimatedTaskSeconds(d, package, package.tasks[t]);
  package.compute_end_us = clock;
  std::vector<int> order = collectives;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return after[a] < after[b]; });
  std::vector<AllReduceItem> items;
  for (int t : order) {
    int64_t bytes = 0;
    for (const CollectiveItem& c : package.tasks[t].collective) bytes += package.buffers[c.input].bytes;
    items.push_back({bytes, after[t] < 0 ? 0 : end[after[t]]});
  }
  const int replicas = package.replicas;
  // A ring over the description's links, in microseconds as the estimates are.
  auto ring_us = [&](int64_t bytes) -> absl::StatusOr<double> {
    absl::StatusOr<double> t = RingAllReduceSeconds(d.links, bytes, replicas);
    if (!t.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("a data-parallel step of ", replicas, " replicas: ", t.status().message()));
    return *t * 1e6;
  };
  KILN_ASSIGN_OR_RETURN(std::vector<PlannedBucket> plan, PlanBuckets(package.buckets, items, ring_us));
  for (const PlannedBucket& p : plan) {
    PackageBucket b;
    int before = num_tasks;
    for (int i : p.items) {
      const int t = order[i];
      b.tasks.push_back(t);
      b.after = std::max(b.after, after[t]);
      for (const CollectiveItem& c : package.tasks[t].collective)
        for (int r : readers[root(c.output)])
          if (r > t) before = std::min(before, r);
    }
    b.before = before == num_tasks ? -1 : before;
    b.bytes = p.bytes;
    b.start_us = p.start;
    b.end_us = p.end;
    // The gradients live until the bucket has read them, the means from
    // when it may write them.
    for (int t : b.tasks)
      for (const CollectiveItem& c : package.tasks[t].collective) {
        touch(c.input, before);
        touch(c.output, std::max(b.after, 0));
      }
    package.bucket_plan.push_back(std::move(b));
  }
  return absl::OkStatus();
}

}  // namespace kiln::target::cuda
