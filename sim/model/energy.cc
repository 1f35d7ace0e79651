//===- energy.cc - The energy of a run ------------------------------------===//
#include "sim/model/energy.h"

namespace kiln::sim {

double StaticWatts(const Machine& m) {
  return m.energy().chip_static_watts() + m.chip().ai_cores() * m.energy().core_static_watts();
}

double PrefetchEnergyPj(const Machine& m, double fetched_bytes, double written_back_bytes) {
  return fetched_bytes * (m.energy().hbm_pj_per_byte() + m.energy().l2_pj_per_byte()) +
         written_back_bytes * m.energy().hbm_pj_per_byte();
}

double KernelEnergyJ(const KernelStats& k) {
  double pj = 0;
  for (const PipeStats& p : k.pipes) pj += p.energy_pj;
  return pj * 1e-12;
}

RunEnergy EnergyOf(const RunStats& s, const Machine& m) {
  RunEnergy e;
  for (const KernelStats& k : s.kernels) e.kernels_j += KernelEnergyJ(k);
  e.host_link_j = static_cast<double>(s.h2d_bytes + s.d2h_bytes) * m.energy().host_link_pj_per_byte() * 1e-12;
  e.chip_link_j = static_cast<double>(s.collective_bytes) * m.energy().chip_link_pj_per_byte() * 1e-12;
  e.copies_j = 2.0 * static_cast<double>(s.d2d_bytes) * m.energy().hbm_pj_per_byte() * 1e-12;
  e.prefetch_j = PrefetchEnergyPj(m, static_cast<double>(s.l2_prefetch_bytes),
                                  static_cast<double>(s.l2_prefetch_writeback_bytes)) *
                 1e-12;
  e.static_j = StaticWatts(m) * s.seconds;
  return e;
}

}  // namespace kiln::sim
