//===- npusim_description.cc - The npusim target's description of a machine ---===//
#include "target/npusim/npusim_description.h"

#include "absl/strings/str_cat.h"
#include "sim/machine/machine.h"

namespace kiln::target::npusim {

TargetDescription DescriptionOf(const sim::Machine& m) {
  const sim::Core& core = m.core();
  TargetDescription d;
  d.name = "npusim";
  d.summary = "Ascend-like NPU on kiln's SystemC cycle model (cube, vector, AICPU)";
  d.engines = {
      {"cube", EngineKind::kMatrix, "16x16x16 matrix unit: MatMul, Gemm, Conv, attention"},
      {"vector", EngineKind::kVector,
       absl::StrCat(core.vector_bytes_per_cycle(), "-byte SIMD unit: elementwise, reductions, normalizations, pooling")},
      {"aicpu", EngineKind::kFallback, "CPU cores beside the AI cores: control flow, sorting, rare ops"},
      {"host", EngineKind::kHost, "the host CPU, across PCIe"},
      {"links", EngineKind::kLinks, "the chip links: AllReduce among data-parallel chips"},
  };
  // Each level's bandwidth is the mover that fills it: MTE2 into L1 (and
  // out of GM), MTE1 into L0A/L0B, the FIXP stage out of L0C.
  const double mte2 = core.mte2_bytes_per_cycle();
  d.memory = {
      {"GM", m.chip().hbm_size_mib() << 20, mte2, "global"},
      {"L1", core.l1_kib() << 10, mte2, "stage"},
      {"L0A", core.l0a_kib() << 10, core.mte1_bytes_per_cycle(), "operand_a"},
      {"L0B", core.l0b_kib() << 10, sim::L0bBytesPerCycle(m), "operand_b"},
      {"L0C", core.l0c_kib() << 10, core.fixp_bytes_per_cycle(), "accumulator"},
      {"UB", core.ub_kib() << 10, static_cast<double>(core.vector_bytes_per_cycle()), "vector"},
  };
  // The L2 in front of HBM, shared by the cores: each one's share of its bandwidth.
  if (m.chip().l2_size_mib() > 0)
    d.memory.push_back({"L2", m.chip().l2_size_mib() << 20, sim::L2BytesPerCycle(m) / m.chip().ai_cores(), ""});
  const double f16 = static_cast<double>(core.cube_fp16_macs_per_cycle());
  d.mma = {{16, 16, 16, DType::kF16, DType::kF32, f16},
           {16, 16, 16, DType::kBF16, DType::kF32, f16},
           {16, 16, 32, DType::kI8, DType::kI32, static_cast<double>(core.cube_int8_macs_per_cycle())},
           {16, 16, 8, DType::kF32, DType::kF32, static_cast<double>(core.cube_fp32_macs_per_cycle())}};
  d.compute_units = m.chip().ai_cores();
  d.clock_ghz = m.chip().clock_mhz() / 1000;
  d.global_bytes_per_second = m.chip().hbm_bandwidth_gbps() * 1e9;
  d.vector_bytes_per_cycle = static_cast<double>(core.vector_bytes_per_cycle());
  d.host_link_bytes_per_second = m.host_link().bandwidth_gbps() * 1e9;
  // The chip links (sim::AllReduceCycles times npusim's collectives on them).
  d.links.bytes_per_second = m.chip_links().bandwidth_gbps() * 1e9 * static_cast<double>(m.chip_links().count());
  d.links.latency_seconds = m.chip_links().latency_us() * 1e-6;
  // One cube per AI core; L1 double-buffered; HBM latency of the SystemC
  // model; the accumulator scope's capacity is the only bound on a group's
  // accumulators; a stage's flag waits are not charged.
  d.tiling.max_group = 1;
  d.tiling.max_stages = 2;
  d.tiling.groups_at_peak = 1;
  d.tiling.global_latency_cycles = static_cast<double>(m.chip().hbm_latency_cycles());
  // The cube kernels' schedule: one block per AI core walking its tiles,
  // MTE2 -> L1 -> MTE1 -> L0A/L0B -> cube -> L0C -> FIXP (-> UB -> MTE3),
  // each pipe a queue of instructions with its own latency; stage tiles
  // pad K to 16 rows (nd2nz).
  d.tiling.gemm_schedule = TilingFigures::GemmSchedule::kPersistent;
  d.tiling.latency = {.stage_load = static_cast<double>(core.mte2_latency_cycles()),
                      .operand_load = static_cast<double>(core.mte1_latency_cycles()),
                      .mma = static_cast<double>(core.cube_latency_cycles()),
                      .write_out = static_cast<double>(core.fixp_latency_cycles()),
                      .vector_store = static_cast<double>(core.mte3_latency_cycles()),
                      .sync = static_cast<double>(core.flag_latency_cycles())};
  d.tiling.burst_cycles = core.mte_burst_cycles();
  d.tiling.vector_store_bytes_per_cycle = core.mte3_bytes_per_cycle();
  d.tiling.issue_queue_depth = core.pipe_queue_depth();
  d.tiling.stage_k_granule = 16;
  // Fusion groups: MatMul/Gemm epilogues (bias, Relu) run in the cube
  // kernel's FIXP stage; groups no kernel takes are split back.
  d.pipeline = "default,form-fusion-groups";
  d.settings = {
      {"machine", SettingSpec::Type::kFile, "FILE",
       "the machine description (default: ascend910-like; sim/machines/, docs/npu.md)"},
      {"buckets", SettingSpec::Type::kString, "S",
       "data-parallel steps (`kiln opt --replicas=N`): how the gradients' AllReduces are grouped into collectives "
       "on the chip links: search (default: the split points that end the last one soonest, by the compile-time "
       "estimates), ddp (PyTorch DDP's 25 MiB buckets, the first at 1 MiB), single, per-tensor, or a size in MiB"},
      {"fused-attention", SettingSpec::Type::kBool, "BOOL",
       "kiln.Attention as one kernel where it runs (default true: FlashAttention's schedule, the scores kept on "
       "chip); false splits it back into MatMul, Softmax and MatMul, to see what fusing buys"},
      {"l2-prefetch", SettingSpec::Type::kBool, "BOOL",
       "weights read into the L2 ahead of the kernels that stream them (default true: a decode step's GEMVs, on "
       "a stream of prefetches that fills the HBM time the kernels before them leave idle); false reads them "
       "when the kernel runs"},
  };
  d.bundles_gears = true;
  d.explains_artifacts = true;
  return d;
}

}  // namespace kiln::target::npusim
