//===- npusim_gemm_bench.cc - Cube GEMM kernels on the NPU model ----------===//
//
// The figures of benchmarks/RESULTS.md ("npusim cube kernels"): MatMul
// [n,n] x [n,n] from GenerateCubeKernel on the default machine, run timing
// only. Each row reports the simulated cycles, the share of the cube's peak
// (of one core, or of the whole chip), TFLOP/s at the machine's clock, and
// the cost model's estimate against the simulation. These are simulated
// figures: one iteration each is exact.
//
//   build/benchmarks/npusim_gemm_bench
//
//===----------------------------------------------------------------------===//
#include <benchmark/benchmark.h>

#include "graph/ir/graph.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/cube.h"
#include "tests/npusim/kernel_harness.h"

namespace kiln {
namespace {

// args: n, dtype (0 f16, 1 bf16, 2 f32), max_blocks (0: all cores)
void BM_CubeGemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const DType dt = state.range(1) == 0 ? DType::kF16 : state.range(1) == 1 ? DType::kBF16 : DType::kF32;
  const int max_blocks = static_cast<int>(state.range(2));
  Graph g;
  Value* a = g.AddInput("a", Type::Tensor(dt, Shape::Static({n, n})));
  Value* b = g.AddInput("b", Type::Tensor(dt, Shape::Static({n, n})));
  Node* mm = g.AddNode("MatMul", {a, b}, 1);
  mm->output(0)->set_type(Type::Tensor(dt, Shape::Static({n, n})));
  absl::flat_hash_map<const Value*, Tensor> inputs = {{a, Tensor(dt, {n, n})}, {b, Tensor(dt, {n, n})}};
  sim::Machine m = sim::DefaultMachine();
  target::npusim::KernelRequest req;
  req.node = mm;
  req.machine = &m;
  req.max_blocks = max_blocks;
  auto kernel = target::npusim::GenerateCubeKernel(req);
  if (!kernel.ok()) {
    state.SkipWithError(std::string(kernel.status().message()).c_str());
    return;
  }
  double cycles = 0;
  for (auto _ : state) {
    auto run = testing::RunKernelOnSim(*kernel, *mm, inputs, m, /*functional=*/false);
    if (!run.ok()) {
      state.SkipWithError(std::string(run.status().message()).c_str());
      return;
    }
    cycles = run->stats.total_cycles;
  }
  const double macs = static_cast<double>(n) * n * n;
  const double cores = max_blocks ? max_blocks : m.chip().ai_cores();
  const double rate = dt == DType::kF32 ? m.core().cube_fp32_macs_per_cycle() : m.core().cube_fp16_macs_per_cycle();
  state.counters["sim_cycles"] = cycles;
  state.counters["cube_peak_pct"] = 100 * macs / (cycles * rate * cores);
  state.counters["tflops"] = 2 * macs / cycles * m.chip().clock_mhz() * 1e6 / 1e12;
  state.counters["estimate"] = kernel->estimated_cycles;
  state.counters["estimate_ratio"] = kernel->estimated_cycles / cycles;
  state.SetLabel(kernel->plan);
}

BENCHMARK(BM_CubeGemm)
    ->ArgNames({"n", "dtype", "max_blocks"})
    ->Args({1024, 0, 1})
    ->Args({1024, 0, 0})
    ->Args({2048, 0, 0})
    ->Args({2048, 1, 0})
    ->Args({4096, 0, 0})
    ->Args({4096, 1, 0})
    ->Args({1024, 2, 0})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln

BENCHMARK_MAIN();
