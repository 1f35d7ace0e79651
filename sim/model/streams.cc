//===- streams.cc - The streams: launches, copies and events --------------===//
//
// One SystemC thread per stream for each run takes its operations in
// order: a kernel launch hands its blocks to the cores and waits for the
// last; a host copy takes its direction of the PCIe link, one copy at a
// time; a device copy goes through the HBM arbiter; an AICPU task
// (aicpu.cc) and an AllReduce (links.cc) wait for their units; an L2
// prefetch (l2_prefetch.cc) reads ahead through the HBM arbiter; events order
// the streams. The API that enqueues them checks each operation first.
//
//===----------------------------------------------------------------------===//
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "sim/machine/machine.h"
#include "sim/model/device_impl.h"

namespace kiln::sim {

void Device::Impl::StreamMain(int s) {
  for (StreamOp& op : streams[s]) {
    double start = Now();
    std::string label;
    switch (op.kind) {
      case StreamOp::kLaunch: {
        const Program& p = *programs[op.kernel];
        auto L = std::make_unique<LaunchState>();
        L->prog = &p;
        L->block_dim = op.block_dim;
        L->computes = op.computes;
        stats.kernels.push_back(KernelStats{});
        L->stats = &stats.kernels.back();
        L->stats->name = p.name;
        L->stats->block_dim = op.block_dim;
        L->stats->start_cycle = start;
        L->stats->cube_peak_macs_per_cycle = static_cast<double>(machine.core().cube_fp16_macs_per_cycle());
        for (size_t i = 0; i < p.args.size(); ++i) {
          auto ptr = memory.Resolve(op.args[i], p.args[i].Bytes());
          if (!ptr.ok()) {
            Fail(InvalidArgument("launch of ", p.name, ": argument ", p.args[i].name, ": ", ptr.status().message()));
            return;
          }
          L->gm.push_back(*ptr);
          L->gm_dev.push_back(op.args[i]);
        }
        LaunchState* raw = L.get();
        launches.push_back(std::move(L));
        work_ev.notify();
        stream_state[s] = absl::StrCat("kernel ", p.name);
        while (!raw->finished)
          if (!WaitEvent(raw->done_ev)) return;
        label = p.name;
        break;
      }
      case StreamOp::kH2D: case StreamOp::kD2H: {
        int dir = op.kind == StreamOp::kH2D ? 0 : 1;
        stream_state[s] = "a busy host link";
        while (link_busy[dir])
          if (!WaitEvent(link_ev[dir])) return;
        link_busy[dir] = true;
        double t = Now();
        double cycles = UsToCycles(machine, machine.host_link().latency_us()) +
                        static_cast<double>(op.bytes) / HostLinkBytesPerCycle(machine);
        if (!WaitCycles(cycles)) return;
        auto ptr = memory.Resolve(op.dev, op.bytes);
        if (!ptr.ok()) {
          Fail(ptr.status());
          return;
        }
        if (dir == 0) {
          l2_tags.Invalidate(op.dev, op.bytes);
          std::memcpy(*ptr, op.chost, op.bytes);
        } else {
          std::memcpy(op.host, *ptr, op.bytes);
        }
        (dir == 0 ? stats.h2d_bytes : stats.d2h_bytes) += op.bytes;
        link_busy[dir] = false;
        link_ev[dir].notify();
        label = absl::StrCat(dir == 0 ? "H2D " : "D2H ", op.bytes, " B");
        if (opt.trace) {
          trace.NameTrack(Trace::kPcie, dir, "PCIe", dir == 0 ? "H2D" : "D2H");
          trace.Named(Trace::kPcie, dir, label, t, Now());
          trace.Energy(t, Now(), static_cast<double>(op.bytes) * machine.energy().host_link_pj_per_byte());
        }
        break;
      }
      case StreamOp::kD2D: {
        // Read and written through HBM, sharing its bandwidth with the
        // kernels' transfers in flight, then the HBM latency.
        stream_state[s] = "a copy through HBM";
        double t = Now();
        if (!Transfer(2.0 * static_cast<double>(op.bytes), hbm.bw)) return;
        l2_tags.Invalidate(op.dev, op.bytes);
        if (!WaitCycles(static_cast<double>(machine.chip().hbm_latency_cycles()))) return;
        auto dst = memory.Resolve(op.dev, op.bytes);
        auto src = memory.Resolve(op.src, op.bytes);
        if (!dst.ok() || !src.ok()) {
          Fail(dst.ok() ? src.status() : dst.status());
          return;
        }
        std::memmove(*dst, *src, op.bytes);
        stats.d2d_bytes += op.bytes;
        label = absl::StrCat("D2D ", op.bytes, " B");
        if (opt.trace) {
          trace.NameTrack(Trace::kHbm, 1, "HBM", "D2D copies");
          trace.Named(Trace::kHbm, 1, label, t, Now());
          trace.Energy(t, Now(), 2.0 * static_cast<double>(op.bytes) * machine.energy().hbm_pj_per_byte());
        }
        break;
      }
      case StreamOp::kAicpu:
        if (!RunAicpuTask(s, op, &label)) return;
        break;
      case StreamOp::kAllReduce:
        if (!RunAllReduce(s, op, &label)) return;
        break;
      case StreamOp::kPrefetch:
        if (!RunPrefetch(s, op, &label)) return;
        break;
      case StreamOp::kRecord:
        ++records_done[op.event];
        event_evs[op.event]->notify();
        label = absl::StrCat("record event ", op.event);
        break;
      case StreamOp::kWait:
        stream_state[s] = absl::StrCat("event ", op.event);
        while (records_done[op.event] < op.target)
          if (!WaitEvent(*event_evs[op.event])) return;
        label = absl::StrCat("wait event ", op.event);
        break;
    }
    stream_state[s].clear();
    if (opt.trace) {
      trace.NameTrack(Trace::kHost, s, "Host", absl::StrCat("stream ", s));
      trace.Named(Trace::kHost, s, label, start, Now());
    }
  }
  ++streams_done;  // the engine stays, idle, for the next run
}

StreamId Device::CreateStream() {
  impl_->streams.emplace_back();
  return static_cast<StreamId>(impl_->streams.size() - 1);
}

EventId Device::CreateEvent() {
  impl_->records_enqueued.push_back(0);
  return static_cast<EventId>(impl_->records_enqueued.size() - 1);
}

absl::Status Device::Launch(StreamId s, KernelId k, int64_t block_dim, std::vector<DevAddr> args, bool computes) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  if (k < 0 || k >= static_cast<int>(impl_->programs.size())) return InvalidArgument("no kernel ", k);
  const Program& p = *impl_->programs[k];
  if (block_dim < 1) return InvalidArgument("launch of ", p.name, ": block_dim must be at least 1");
  if (args.size() != p.args.size())
    return InvalidArgument("launch of ", p.name, ": takes ", p.args.size(), " arguments, got ", args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    auto r = impl_->memory.Resolve(args[i], p.args[i].Bytes());
    if (!r.ok()) return InvalidArgument("launch of ", p.name, ": argument ", p.args[i].name, ": ", r.status().message());
  }
  StreamOp op;
  op.kind = StreamOp::kLaunch;
  op.kernel = k;
  op.block_dim = block_dim;
  op.args = std::move(args);
  op.computes = computes;
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

absl::Status Device::CopyH2D(StreamId s, DevAddr dst, const void* src, int64_t bytes) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  KILN_RETURN_IF_ERROR(impl_->memory.Resolve(dst, bytes).status());
  StreamOp op;
  op.kind = StreamOp::kH2D;
  op.dev = dst;
  op.chost = src;
  op.bytes = bytes;
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

absl::Status Device::CopyD2H(StreamId s, void* dst, DevAddr src, int64_t bytes) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  KILN_RETURN_IF_ERROR(impl_->memory.Resolve(src, bytes).status());
  StreamOp op;
  op.kind = StreamOp::kD2H;
  op.dev = src;
  op.host = dst;
  op.bytes = bytes;
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

absl::Status Device::CopyD2D(StreamId s, DevAddr dst, DevAddr src, int64_t bytes) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  if (bytes < 0) return InvalidArgument("a device copy of ", bytes, " bytes");
  KILN_RETURN_IF_ERROR(impl_->memory.Resolve(dst, bytes).status());
  KILN_RETURN_IF_ERROR(impl_->memory.Resolve(src, bytes).status());
  StreamOp op;
  op.kind = StreamOp::kD2D;
  op.dev = dst;
  op.src = src;
  op.bytes = bytes;
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

absl::Status Device::RecordEvent(StreamId s, EventId e) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  if (e < 0 || e >= static_cast<int>(impl_->records_enqueued.size())) return InvalidArgument("no event ", e);
  StreamOp op;
  op.kind = StreamOp::kRecord;
  op.event = e;
  ++impl_->records_enqueued[e];
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

absl::Status Device::WaitEvent(StreamId s, EventId e) {
  KILN_RETURN_IF_ERROR(CheckStream(*impl_, s));
  if (e < 0 || e >= static_cast<int>(impl_->records_enqueued.size())) return InvalidArgument("no event ", e);
  StreamOp op;
  op.kind = StreamOp::kWait;
  op.event = e;
  op.target = impl_->records_enqueued[e];
  impl_->streams[s].push_back(std::move(op));
  return absl::OkStatus();
}

}  // namespace kiln::sim
