//===- l2_prefetch.cc - Reading device memory into the L2 ahead of use ----===//
//
// A prefetch brings the lines of a range of device memory from HBM into
// the L2 before the kernel that reads them runs, from a stream of its own
// (Ascend's weight prefetch: torch_npu.npu_prefetch on a stream apart from
// the computing one, overlapping the vector work before a MatMul). It goes
// in pieces: a piece's missing lines are read through the HBM arbiter,
// sharing its bandwidth with the kernels' transfers in flight, and are held
// once they have arrived. A kernel's DMA that reads a line of a piece in
// flight waits for the piece and then hits (a miss merged with the fill
// outstanding for its line); one that reads a line before its piece has
// started misses and fetches it itself, and the prefetch then skips it.
// Lines already held cost nothing; the dirty lines the fills evict are
// written back. The first piece of a burst waits HBM's latency; the rest
// follow back to back, as a stream of requests does, and so does a
// prefetch that starts on its stream the moment the one before ended.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "sim/model/device_impl.h"
#include "sim/model/energy.h"

namespace kiln::sim {
namespace {

// Small enough that a kernel racing its own prefetch finds few lines
// in flight; large enough that a weight is tens of arbiter events, not
// thousands.
constexpr int64_t kPieceBytes = 64 << 10;

}  // namespace

bool Device::Impl::WaitForFills(uint64_t addr, int64_t len) {
  const uint64_t end = addr + static_cast<uint64_t>(len);
  while (true) {
    auto it = std::find_if(pending_fills.begin(), pending_fills.end(),
                           [&](const PendingFill* f) { return f->begin < end && addr < f->end; });
    if (it == pending_fills.end()) return true;
    if (!WaitEvent((*it)->done)) return false;
  }
}

bool Device::Impl::RunPrefetch(int s, StreamOp& op, std::string* label) {
  *label = absl::StrCat("L2 prefetch ", op.bytes, " B");
  if (!l2_tags.enabled() || op.bytes <= 0) return true;
  stream_state[s] = "an L2 prefetch";
  const double t = Now();
  // A prefetch right behind the one before on its stream continues that
  // one's requests; the first of a burst waits HBM's latency.
  if (prefetch_end[s] != t && !WaitCycles(static_cast<double>(machine.chip().hbm_latency_cycles()))) return false;
  int64_t fetched = 0, written_back = 0;
  for (int64_t at = 0; at < op.bytes; at += kPieceBytes) {
    const uint64_t addr = op.dev + static_cast<uint64_t>(at);
    const int64_t len = std::min(kPieceBytes, op.bytes - at);
    const int64_t absent = l2_tags.AbsentBytes(addr, len);
    if (absent > 0) {
      PendingFill fill{addr, addr + static_cast<uint64_t>(len), {}};
      pending_fills.push_back(&fill);
      const bool ok = Transfer(static_cast<double>(absent), hbm.bw);
      pending_fills.erase(std::find(pending_fills.begin(), pending_fills.end(), &fill));
      fill.done.notify();  // the DMAs waiting for it run after this process yields
      if (!ok) return false;
    }
    L2Cache::Outcome out;
    l2_tags.Access(addr, len, /*write=*/false, &out);
    if (out.writeback_bytes > 0 && !Transfer(static_cast<double>(out.writeback_bytes), hbm.bw)) return false;
    fetched += absent;
    written_back += out.writeback_bytes;
  }
  prefetch_end[s] = Now();
  stats.l2_prefetch_bytes += fetched;
  stats.hbm_read_bytes += fetched;
  stats.hbm_write_bytes += written_back;
  stats.l2_prefetch_writeback_bytes += written_back;
  if (opt.trace) {
    trace.NameTrack(Trace::kHbm, 2, "HBM", "L2 prefetch");
    trace.Named(Trace::kHbm, 2, *label, t, Now());
    trace.Energy(t, Now(),
                 PrefetchEnergyPj(machine, static_cast<double>(fetched), static_cast<double>(written_back)));
  }
  return true;
}

absl::Status Device::PrefetchL2(StreamId s, DevAddr addr, int64_t bytes) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  if (bytes < 0) return InvalidArgument("an L2 prefetch of ", bytes, " bytes");
  KILN_RETURN_IF_ERROR(impl_->memory.Resolve(addr, bytes).status());
  StreamOp op;
  op.kind = StreamOp::kPrefetch;
  op.dev = addr;
  op.bytes = bytes;
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

}  // namespace kiln::sim
