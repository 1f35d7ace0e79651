//===- cuda_package_explain.cc - A package's placement, as text -----------===//
//
// What `kiln compile --explain-placement` prints and placement.txt holds:
// one line per task (engine, reason, plan), the copies and host-kept
// values around each host task, the buckets of a data-parallel step, and
// the totals.
//
//===----------------------------------------------------------------------===//
#include <map>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "target/cuda/cuda_package.h"

namespace kiln::target::cuda {

std::string CudaPackage::Explain() const {
  std::string out;
  std::map<std::string, int> per_engine;
  int launches = 0;
  int64_t d2h = 0, h2d = 0;
  int copies = 0;
  auto value_text = [&](int v) {
    const PackageValue& x = values[v];
    std::vector<std::string> dims;
    for (int64_t d : x.dims) dims.push_back(d < 0 ? "?" : absl::StrCat(d));
    return absl::StrCat(x.name, " (", DTypeName(x.dtype), x.ranked ? absl::StrCat("[", absl::StrJoin(dims, ","), "]") : "[...]",
                        ")");
  };
  // Values kept on the host between host tasks, and those sized at run time;
  // values the host has this run (a device value is copied to it once).
  absl::flat_hash_set<int> on_host, dynamic, copied;
  for (const PackageTask& t : tasks) {
    absl::StrAppend(&out, t.node, " = ", t.op, "  ->  ", t.engine, ": ", t.reason);
    if (!t.plan.empty()) absl::StrAppend(&out, " [", t.plan, "]");
    absl::StrAppend(&out, "\n");
    ++per_engine[t.engine];
    launches += static_cast<int>(t.launches.size());
    if (t.kind != PackageTask::Kind::kHost) continue;
    for (int v : t.host_inputs) {
      if (values[v].on_host || !copied.insert(v).second) continue;
      absl::StrAppend(&out, "    copy device -> host: ", value_text(v), "\n");
      ++copies;
      d2h += buffers[values[v].buffer].bytes;
    }
    for (int v : t.host_outputs) {
      copied.insert(v);
      if (values[v].on_host) {
        absl::StrAppend(&out, "    kept on the host: ", value_text(v),
                        values[v].dynamic ? ", sized when the node has run" : "", "\n");
        on_host.insert(v);
        if (values[v].dynamic) dynamic.insert(v);
      }
      if (values[v].buffer < 0) continue;
      absl::StrAppend(&out, "    copy host -> device: ", value_text(v), "\n");
      ++copies;
      h2d += buffers[values[v].buffer].bytes;
    }
  }
  absl::StrAppend(&out, "\ntasks per engine:\n");
  for (const auto& [engine, count] : per_engine) absl::StrAppend(&out, absl::StrFormat("  %-10s %6d tasks\n", engine, count));
  int matrix = 0, copy = 0;
  for (const PackageKernel& k : kernels) matrix += k.matrix, copy += k.copy;
  absl::StrAppend(&out, absl::StrFormat("kernels: %d launches of %d distinct kernels (%d TensorCore, %d strided-copy)\n",
                                        launches, kernels.size(), matrix, copy));
  absl::StrAppend(&out, absl::StrFormat("host tasks: %d, with %d copies around them (%d bytes device -> host, %d "
                                        "bytes host -> device per run)\n",
                                        num_host_tasks(), copies, d2h, h2d));
  if (!on_host.empty()) {
    int returned = 0;
    for (int v : outputs) returned += values[v].on_host;
    absl::StrAppend(&out, absl::StrFormat("values kept on the host between host tasks: %d (%d sized at run time; %d "
                                          "of them model outputs, returned from the host)\n",
                                          on_host.size(), dynamic.size(), returned));
  }
  if (collectives()) {
    absl::StrAppend(&out, "data parallel: made for ", replicas, " GPUs (any number runs it); AllReduce buckets (",
                    buckets, "), NCCL on the links stream:\n");
    for (size_t i = 0; i < bucket_plan.size(); ++i) {
      const PackageBucket& bk = bucket_plan[i];
      absl::StrAppend(&out, absl::StrFormat("  bucket %d: %d tensors, %d bytes, after task %d, before %s, estimated "
                                            "%.1f-%.1f us\n",
                                            i, bk.tasks.size(), bk.bytes, bk.after,
                                            bk.before < 0 ? std::string("the end") : absl::StrCat("task ", bk.before),
                                            bk.start_us, bk.end_us));
    }
    absl::StrAppend(&out, absl::StrFormat("  compute tasks end at %.1f us by the estimates\n", compute_end_us));
  }
  absl::StrAppend(&out, absl::StrFormat("device memory: %d bytes planned, %d without reuse (%.1f%%), %d bytes of "
                                        "constants\n",
                                        arena_bytes, naive_bytes, naive_bytes ? 100.0 * arena_bytes / naive_bytes : 100.0,
                                        constants.size()));
  return out;
}

}  // namespace kiln::target::cuda
