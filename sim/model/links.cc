//===- links.cc - The chip links, for collectives -------------------------===//
//
// An AllReduce among chips over the chip links. The peers are not
// simulated: they run the same stream in step, so the collective takes this
// chip's links when they are free (one collective at a time), holds them for
// AllReduceCycles(machine, bytes, chips) cycles, computed when it is
// enqueued, and then runs its function with the device's memory.
//
//===----------------------------------------------------------------------===//
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "sim/machine/machine.h"
#include "sim/model/device_impl.h"

namespace kiln::sim {

bool Device::Impl::RunAllReduce(int s, StreamOp& op, std::string* label) {
  // The peers run this stream in step, so they reach the collective
  // at this same cycle: only this chip's links need be free.
  stream_state[s] = "the chip links";
  while (links_busy)
    if (!WaitEvent(links_ev)) return false;
  links_busy = true;
  double t = Now();
  if (!WaitCycles(op.cycles)) return false;
  absl::Status st = op.fn ? op.fn(*self) : absl::OkStatus();
  if (!st.ok()) {
    Fail(InvalidArgument("AllReduce ", op.name, ": ", st.message()));
    return false;
  }
  ++stats.collectives;
  stats.collective_bytes += op.bytes;
  stats.collective_spans.push_back({t, Now()});
  links_busy = false;
  links_ev.notify();
  *label = absl::StrCat("AllReduce ", op.name);
  if (opt.trace) {
    trace.NameTrack(Trace::kLinks, 0, "Chip links", "AllReduce");
    trace.Named(Trace::kLinks, 0, op.name, t, Now());
    trace.Energy(t, Now(), static_cast<double>(op.bytes) * machine.energy().chip_link_pj_per_byte());
  }
  return true;
}

absl::Status Device::AllReduce(StreamId s, std::string name, int64_t bytes, int chips,
                               std::function<absl::Status(Device&)> fn) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  // The time depends only on the machine and the sizes: computed once, here,
  // so a machine without links is refused before the run.
  absl::StatusOr<double> cycles = AllReduceCycles(impl_->machine, bytes, chips);
  if (!cycles.ok()) return InvalidArgument("AllReduce ", name, ": ", cycles.status().message());
  StreamOp op;
  op.kind = StreamOp::kAllReduce;
  op.name = std::move(name);
  op.bytes = bytes;
  op.cycles = *cycles;
  op.fn = std::move(fn);
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

}  // namespace kiln::sim
