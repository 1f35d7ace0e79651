//===- aicpu.cc - The AICPU cluster ---------------------------------------===//
//
// An AICPU task takes the first free core of the cluster, holds it for
// AicpuTaskCycles(machine, ops) cycles (the launch plus ops at the
// cluster's rate), and then runs its function on the host with the device's
// memory.
//
//===----------------------------------------------------------------------===//
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "sim/machine/machine.h"
#include "sim/model/device_impl.h"

namespace kiln::sim {

bool Device::Impl::RunAicpuTask(int s, StreamOp& op, std::string* label) {
  stream_state[s] = "a free AICPU core";
  int slot = -1;
  while (true) {
    for (size_t i = 0; i < aicpu_busy.size() && slot < 0; ++i)
      if (!aicpu_busy[i]) slot = static_cast<int>(i);
    if (slot >= 0) break;
    if (!WaitEvent(aicpu_ev)) return false;
  }
  aicpu_busy[slot] = true;
  double t = Now();
  if (!WaitCycles(AicpuTaskCycles(machine, op.ops))) return false;
  absl::Status st = op.fn ? op.fn(*self) : absl::OkStatus();
  if (!st.ok()) {
    Fail(InvalidArgument("AICPU task ", op.name, ": ", st.message()));
    return false;
  }
  ++stats.aicpu_tasks;
  stats.aicpu_spans.push_back({op.name, t, Now()});
  aicpu_busy[slot] = false;
  aicpu_ev.notify();
  *label = absl::StrCat("AICPU ", op.name);
  if (opt.trace) {
    trace.NameTrack(Trace::kAicpu, slot, "AICPU", absl::StrCat("AICPU ", slot));
    trace.Named(Trace::kAicpu, slot, op.name, t, Now());
  }
  return true;
}

absl::Status Device::LaunchAicpu(StreamId s, std::string name, double ops, std::function<absl::Status(Device&)> fn) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  if (!(ops >= 0)) return InvalidArgument("AICPU task ", name, ": negative cost");
  StreamOp op;
  op.kind = StreamOp::kAicpu;
  op.name = std::move(name);
  op.ops = ops;
  op.fn = std::move(fn);
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

}  // namespace kiln::sim
