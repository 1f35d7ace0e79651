//===- report.cc - Per-kernel summaries of a run --------------------------===//
#include "sim/model/report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/machine/machine.h"

namespace kiln::sim {
namespace {

double Span(const KernelStats& k) { return std::max(1e-9, (k.end_cycle - k.start_cycle) * std::max(1, k.cores_used)); }

double CubeUtil(const KernelStats& k) { return k.cube_macs / (k.cube_peak_macs_per_cycle * Span(k)); }

double HbmUtil(const KernelStats& k, const Machine& m) {
  double d = std::max(1e-9, k.end_cycle - k.start_cycle);
  return (k.hbm_read_bytes + k.hbm_write_bytes) / (HbmBytesPerCycle(m) * d);
}

}  // namespace

std::string KernelBound(const KernelStats& k, const Machine& m) {
  int top = 0;
  double best = -1;
  for (int p = 0; p < kNumPipes; ++p) {
    double u = k.pipes[p].busy_cycles / Span(k);
    if (u > best) {
      best = u;
      top = p;
    }
  }
  if (best < 0.5) return "sync stalls";
  switch (static_cast<Pipe>(top)) {
    case Pipe::kCube: case Pipe::kVector: return absl::StrCat("compute (", PipeTraceName(static_cast<Pipe>(top)), ")");
    case Pipe::kMte2: case Pipe::kMte3:
      return absl::StrCat(HbmUtil(k, m) >= 0.5 ? "HBM bandwidth (" : "HBM latency (", PipeName(static_cast<Pipe>(top)),
                          ")");
    case Pipe::kMte1: case Pipe::kFixp: return absl::StrCat("internal transfer (", PipeName(static_cast<Pipe>(top)), ")");
    default: return "SCALAR issue";
  }
}

std::string ReportText(const RunStats& s, const Machine& m) {
  std::string out;
  absl::StrAppendFormat(&out, "machine %s: %d cores at %.0f MHz\n", m.name(), m.chip().ai_cores(), m.chip().clock_mhz());
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const KernelStats& k = s.kernels[i];
    double d = k.end_cycle - k.start_cycle;
    absl::StrAppendFormat(&out,
                          "\nkernel %d %s: block_dim %d on %d cores, cycles %.0f (%.0f..%.0f)\n"
                          "  cube utilization %.1f%% of peak, HBM %.1f%% (read %d B, write %d B), bound: %s\n",
                          i, k.name, k.block_dim, k.cores_used, d, k.start_cycle, k.end_cycle, 100 * CubeUtil(k),
                          100 * HbmUtil(k, m), k.hbm_read_bytes, k.hbm_write_bytes, KernelBound(k, m));
    absl::StrAppendFormat(&out, "  %-7s %14s %14s %10s %7s\n", "pipe", "busy cycles", "stall cycles", "insts", "busy%");
    for (int p = 0; p < kNumPipes; ++p) {
      const PipeStats& ps = k.pipes[p];
      absl::StrAppendFormat(&out, "  %-7s %14.0f %14.0f %10d %6.1f%%\n", PipeTraceName(static_cast<Pipe>(p)),
                            ps.busy_cycles, ps.stall_cycles, ps.instructions, 100 * ps.busy_cycles / Span(k));
    }
  }
  absl::StrAppendFormat(&out,
                        "\ntotal: %.0f cycles (%.3f us), %d instructions, HBM read %d B, write %d B, "
                        "H2D %d B, D2H %d B, AICPU tasks %d",
                        s.total_cycles, s.seconds * 1e6, s.instructions, s.hbm_read_bytes, s.hbm_write_bytes,
                        s.h2d_bytes, s.d2h_bytes, s.aicpu_tasks);
  // Collectives only where the run had some, so single-chip reports read as before.
  if (s.collectives > 0) {
    absl::StrAppendFormat(&out, ", AllReduce %d (%d B, %.0f cycles on the chip links)", s.collectives,
                          s.collective_bytes, CollectiveCycles(s));
  }
  out += "\n";
  return out;
}

double CollectiveCycles(const RunStats& s) {
  double busy = 0;
  for (const auto& [start, end] : s.collective_spans) busy += end - start;
  return busy;
}

std::string ReportCsv(const RunStats& s, const Machine& m) {
  std::string out = "kernel_index,kernel,pipe,busy_cycles,stall_cycles,instructions,utilization,kernel_cycles,"
                    "cube_utilization,hbm_utilization,bound\n";
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const KernelStats& k = s.kernels[i];
    double d = k.end_cycle - k.start_cycle;
    std::string common = absl::StrFormat("%.0f,%.4f,%.4f,%s", d, CubeUtil(k), HbmUtil(k, m), KernelBound(k, m));
    PipeStats total;
    for (int p = 0; p < kNumPipes; ++p) {
      const PipeStats& ps = k.pipes[p];
      total.busy_cycles += ps.busy_cycles;
      total.stall_cycles += ps.stall_cycles;
      total.instructions += ps.instructions;
      absl::StrAppendFormat(&out, "%d,%s,%s,%.0f,%.0f,%d,%.4f,%s\n", i, k.name, PipeTraceName(static_cast<Pipe>(p)),
                            ps.busy_cycles, ps.stall_cycles, ps.instructions, ps.busy_cycles / Span(k), common);
    }
    absl::StrAppendFormat(&out, "%d,%s,total,%.0f,%.0f,%d,,%s\n", i, k.name, total.busy_cycles, total.stall_cycles,
                          total.instructions, common);
  }
  return out;
}

}  // namespace kiln::sim
