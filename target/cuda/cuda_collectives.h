//===- cuda_collectives.h - A data-parallel step's NCCL buckets -*- C++ -*-===//
//
// A data-parallel training step (`kiln opt --passes=training-step,default
// --replicas=N`) averages each gradient over the replicas with a
// kiln.AllReduce; in a cuda package each is a collective task. This groups
// them into buckets with the shared planner (target/backend/
// allreduce_buckets.h), timed by the GPU's link figures (NVLink, NCCL's
// ring latencies: TargetDescription::links) against the tasks' estimated
// times (a roofline of each task's work on the description's peak rates),
// and says when each bucket may start (after the last task that makes one
// of its gradients) and must end (before the first task that reads one of
// its means). The launcher issues each bucket as one ncclGroupStart/End of
// ncclAllReduce(ncclAvg) calls on a links stream of its own, so the
// collectives overlap the rest of the backward pass (docs/cuda-target.md,
// "Data-parallel steps").
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "target/api/target.h"
#include "target/cuda/cuda_package.h"

namespace kiln::target::cuda {

// Fills package.replicas, .buckets and .bucket_plan from its collective
// tasks (none: nothing, and --buckets is refused). `root(b)` is the buffer
// whose bytes buffer b names; `touch(b, task)` extends b's lifetime to
// `task`, so a bucket's gradients live until it has read them and its
// means from when it may write them.
absl::Status PlanCollectives(const TargetDescription& d, const CompileOptions& options, CudaPackage& package,
                             const std::function<int(int)>& root, const std::function<void(int, int)>& touch);

}  // namespace kiln::target::cuda
