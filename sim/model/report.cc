//===- report.cc - Per-kernel summaries of a run --------------------------===//
#include "sim/model/report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/machine/machine.h"
#include "sim/model/energy.h"

namespace kiln::sim {
namespace {

double Span(const KernelStats& k) { return std::max(1e-9, (k.end_cycle - k.start_cycle) * std::max(1, k.cores_used)); }

double CubeUtil(const KernelStats& k) { return k.cube_macs / (k.cube_peak_macs_per_cycle * Span(k)); }

double HbmUtil(const KernelStats& k, const Machine& m) {
  double d = std::max(1e-9, k.end_cycle - k.start_cycle);
  return (k.hbm_read_bytes + k.hbm_write_bytes) / (HbmBytesPerCycle(m) * d);
}

double L2Util(const KernelStats& k, const Machine& m) {
  double d = std::max(1e-9, k.end_cycle - k.start_cycle);
  return (k.l2_hit_bytes + k.l2_write_bytes) / (L2BytesPerCycle(m) * d);
}

std::string HitRateText(const Machine& m, int64_t hits, int64_t misses) {
  const double rate = L2HitRate(m, hits, misses);
  return rate < 0 ? "-" : absl::StrFormat("%.1f%%", 100 * rate);
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
    case Pipe::kMte2: case Pipe::kMte3: {
      const char* what = HbmUtil(k, m) >= 0.5                                 ? "HBM bandwidth ("
                         : L2Util(k, m) >= 0.5                                ? "L2 bandwidth ("
                         : L2HitRate(m, k.l2_hit_bytes, k.l2_miss_bytes) > 0.5 ? "L2 latency ("
                                                                               : "HBM latency (";
      return absl::StrCat(what, PipeName(static_cast<Pipe>(top)), ")");
    }
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
                          "  cube utilization %.1f%% of peak, HBM %.1f%% (read %d B, write %d B), bound: %s\n"
                          "  energy %.3f uJ (its actions)\n",
                          i, k.name, k.block_dim, k.cores_used, d, k.start_cycle, k.end_cycle, 100 * CubeUtil(k),
                          100 * HbmUtil(k, m), k.hbm_read_bytes, k.hbm_write_bytes, KernelBound(k, m),
                          KernelEnergyJ(k) * 1e6);
    if (m.chip().l2_size_mib() > 0)
      absl::StrAppendFormat(&out, "  L2 hit rate %s (hits %d B, writes absorbed %d B), L2 %.1f%% busy\n",
                            HitRateText(m, k.l2_hit_bytes, k.l2_miss_bytes), k.l2_hit_bytes, k.l2_write_bytes,
                            100 * L2Util(k, m));
    absl::StrAppendFormat(&out, "  %-7s %14s %14s %10s %7s %12s\n", "pipe", "busy cycles", "stall cycles", "insts",
                          "busy%", "energy uJ");
    for (int p = 0; p < kNumPipes; ++p) {
      const PipeStats& ps = k.pipes[p];
      absl::StrAppendFormat(&out, "  %-7s %14.0f %14.0f %10d %6.1f%% %12.3f\n", PipeTraceName(static_cast<Pipe>(p)),
                            ps.busy_cycles, ps.stall_cycles, ps.instructions, 100 * ps.busy_cycles / Span(k),
                            ps.energy_pj * 1e-6);
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
  out += "\n" + L2Line(s, m) + EnergyLine(s, m) + SimulatorSpeedLine(s);
  return out;
}

double L2HitRate(const Machine& m, int64_t hit_bytes, int64_t miss_bytes) {
  const int64_t reads = hit_bytes + miss_bytes;
  return m.chip().l2_size_mib() > 0 && reads > 0 ? static_cast<double>(hit_bytes) / static_cast<double>(reads) : -1;
}

std::string L2Line(const RunStats& s, const Machine& m) {
  if (m.chip().l2_size_mib() == 0) return "";
  std::string ahead = s.l2_prefetch_bytes > 0 ? absl::StrFormat(" (%d B by prefetches)", s.l2_prefetch_bytes) : "";
  return absl::StrFormat("L2 %d MiB: %s of reads hit (%d B; %d B missed, %d B of lines from HBM%s), %d B of writes "
                         "absorbed, %d B of dirty lines written back\n",
                         m.chip().l2_size_mib(), HitRateText(m, s.l2_hit_bytes, s.l2_miss_bytes), s.l2_hit_bytes,
                         s.l2_miss_bytes, s.hbm_read_bytes, ahead, s.l2_write_bytes, s.hbm_write_bytes);
}

std::string SimulatorSpeedLine(const RunStats& s) {
  const double wall = std::max(s.wall_seconds, 1e-9);
  return absl::StrFormat("simulator: %.0f cycles and %d instructions in %.3f s of wall time: %.2f M cycles/s, "
                         "%.2f M instructions/s\n",
                         s.total_cycles, s.instructions, s.wall_seconds, s.total_cycles / wall / 1e6,
                         static_cast<double>(s.instructions) / wall / 1e6);
}

std::string EnergyLine(const RunStats& s, const Machine& m) {
  const RunEnergy e = EnergyOf(s, m);
  std::string out = absl::StrFormat("energy: %.3f uJ (kernels %.3f, static %.3f", e.total_j() * 1e6,
                                    e.kernels_j * 1e6, e.static_j * 1e6);
  if (e.host_link_j > 0) absl::StrAppendFormat(&out, ", host link %.3f", e.host_link_j * 1e6);
  if (e.copies_j > 0) absl::StrAppendFormat(&out, ", copies in HBM %.3f", e.copies_j * 1e6);
  if (e.chip_link_j > 0) absl::StrAppendFormat(&out, ", chip links %.3f", e.chip_link_j * 1e6);
  if (e.prefetch_j > 0) absl::StrAppendFormat(&out, ", L2 prefetches %.3f", e.prefetch_j * 1e6);
  absl::StrAppendFormat(&out, "); average power %.1f W\n", s.seconds > 0 ? e.total_j() / s.seconds : 0.0);
  return out;
}

double CollectiveCycles(const RunStats& s) {
  double busy = 0;
  for (const auto& [start, end] : s.collective_spans) busy += end - start;
  return busy;
}

std::string ReportCsv(const RunStats& s, const Machine& m) {
  std::string out = "kernel_index,kernel,pipe,busy_cycles,stall_cycles,instructions,utilization,kernel_cycles,"
                    "cube_utilization,hbm_utilization,bound,energy_uj,l2_hit_rate\n";
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const KernelStats& k = s.kernels[i];
    double d = k.end_cycle - k.start_cycle;
    std::string common = absl::StrFormat("%.0f,%.4f,%.4f,%s", d, CubeUtil(k), HbmUtil(k, m), KernelBound(k, m));
    const double hit = L2HitRate(m, k.l2_hit_bytes, k.l2_miss_bytes);
    const std::string l2 = hit >= 0 ? absl::StrFormat("%.4f", hit) : "";
    PipeStats total;
    for (int p = 0; p < kNumPipes; ++p) {
      const PipeStats& ps = k.pipes[p];
      total.busy_cycles += ps.busy_cycles;
      total.stall_cycles += ps.stall_cycles;
      total.instructions += ps.instructions;
      total.energy_pj += ps.energy_pj;
      absl::StrAppendFormat(&out, "%d,%s,%s,%.0f,%.0f,%d,%.4f,%s,%.6f,%s\n", i, k.name,
                            PipeTraceName(static_cast<Pipe>(p)), ps.busy_cycles, ps.stall_cycles, ps.instructions,
                            ps.busy_cycles / Span(k), common, ps.energy_pj * 1e-6, l2);
    }
    absl::StrAppendFormat(&out, "%d,%s,total,%.0f,%.0f,%d,,%s,%.6f,%s\n", i, k.name, total.busy_cycles,
                          total.stall_cycles, total.instructions, common, total.energy_pj * 1e-6, l2);
  }
  return out;
}

}  // namespace kiln::sim
