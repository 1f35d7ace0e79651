//===- sim_bench.cc - Speed of the NPU model ------------------------------===//
//
// Simulated instructions per second and simulated cycles per second, in
// timing-only and functional modes, for a GEMM-heavy program (double-
// buffered tiles through MTE2, MTE1 and the cube) and a vector-heavy one
// (a loop of vector instructions on UB).
//
//   build/benchmarks/sim_bench
//
//===----------------------------------------------------------------------===//
#include <string>

#include "absl/strings/str_replace.h"
#include "benchmark/benchmark.h"
#include "sim/isa/asm.h"
#include "sim/machine/machine.h"
#include "sim/model/device.h"

namespace kiln::sim {
namespace {

// 64 chunks of K per block; blocks beyond 4 reuse the four tiles of C.
const char* kGemm = R"(.program gemm_bench
.regs 8
.arg A f16[256,4096]
.arg B f16[4096,256]
.arg C f32[256,256]
  block_idx r0
  rem r0, r0, 4
  div r1, r0, 2
  rem r2, r0, 2
  mul r3, r1, 1048576
  mul r4, r2, 256
  mul r5, r1, 131072
  mul r7, r2, 512
  add r5, r5, r7
  mov r6, 0
  set_flag MTE1, MTE2, 0
  set_flag MTE1, MTE2, 1
  set_flag CUBE, MTE1, 0
  set_flag CUBE, MTE1, 1
loop:
  wait_flag MTE1, MTE2, 0
  nd2nz.f16 L1[0], A[r3], rows=128, cols=64, src_row_stride=4096
  nd2nz.f16 L1[32768], B[r4], rows=64, cols=128, src_row_stride=256
  set_flag MTE2, MTE1, 0
  wait_flag MTE2, MTE1, 0
  wait_flag CUBE, MTE1, 0
  load_l0a.f16 L0A[0], L1[0], cols=32
  load_l0b.f16 L0B[0], L1[32768], cols=32, transpose=1
  set_flag MTE1, MTE2, 0
  set_flag MTE1, CUBE, 0
  wait_flag MTE1, CUBE, 0
  mmad.f16 L0C[0], L0A[0], L0B[0], m=8, k=4, n=8
  set_flag CUBE, MTE1, 0
  add r3, r3, 128
  add r4, r4, 32768
  wait_flag MTE1, MTE2, 1
  nd2nz.f16 L1[16384], A[r3], rows=128, cols=64, src_row_stride=4096
  nd2nz.f16 L1[49152], B[r4], rows=64, cols=128, src_row_stride=256
  set_flag MTE2, MTE1, 1
  wait_flag MTE2, MTE1, 1
  wait_flag CUBE, MTE1, 1
  load_l0a.f16 L0A[16384], L1[16384], cols=32
  load_l0b.f16 L0B[16384], L1[49152], cols=32, transpose=1
  set_flag MTE1, MTE2, 1
  set_flag MTE1, CUBE, 1
  wait_flag MTE1, CUBE, 1
  mmad.f16 L0C[0], L0A[16384], L0B[16384], m=8, k=4, n=8
  set_flag CUBE, MTE1, 1
  add r3, r3, 128
  add r4, r4, 32768
  add r6, r6, 2
  blt r6, 64, loop
  wait_flag MTE1, MTE2, 0
  wait_flag MTE1, MTE2, 1
  wait_flag CUBE, MTE1, 0
  wait_flag CUBE, MTE1, 1
  set_flag CUBE, FIXP, 0
  wait_flag CUBE, FIXP, 0
  fixp.f32.f32 C[r5], L0C[0], m=8, n=8, dst_row_stride=256
)";

// 256 iterations of eight vector instructions on 8 KiB tiles, with a load
// and a store per iteration.
const char* kVector = R"(.program vector_bench
.regs 4
.arg x f16[4096]
.arg y f16[4096]
  mov r1, 0
loop:
  copy_gm_ub UB[0], x[0], len=8192
  set_flag MTE2, VECTOR, 0
  wait_flag MTE2, VECTOR, 0
  vadd.f16 UB[8192], UB[0], UB[0], repeat=32
  vmul.f16 UB[16384], UB[8192], UB[0], repeat=32
  vexp.f16 UB[8192], UB[16384], repeat=32
  vmaxs.f16 UB[8192], UB[8192], 0.5, repeat=32
  vconv.f32.f16 UB[32768], UB[8192], repeat=64
  vcadd.f32 UB[65536], UB[32768], repeat=64
  vmuls.f32 UB[32768], UB[32768], 0.25, repeat=64
  vconv.f16.f32 UB[16384], UB[32768], repeat=64
  set_flag VECTOR, MTE3, 0
  wait_flag VECTOR, MTE3, 0
  copy_ub_gm y[0], UB[16384], len=8192
  set_flag MTE3, MTE2, 0
  wait_flag MTE3, MTE2, 0
  add r1, r1, 1
  blt r1, 256, loop
)";

void Run(benchmark::State& state, const char* text, int64_t block_dim, bool functional) {
  auto file = Assemble(text, "bench");
  if (!file.ok()) {
    state.SkipWithError(std::string(file.status().message()).c_str());
    return;
  }
  auto dev = Device::Create(DefaultMachine());
  Device& d = **dev;
  KernelId k = *d.LoadProgram(file->program);
  std::vector<DevAddr> args;
  for (const Arg& a : file->program.args) args.push_back(*d.Malloc(a.Bytes()));
  StreamId s = d.CreateStream();
  RunOptions opt;
  opt.functional = functional;
  double insts = 0, cycles = 0;
  for (auto _ : state) {
    (void)d.Launch(s, k, block_dim, args);
    auto r = d.Run(opt);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    insts += static_cast<double>(r->instructions);
    cycles += r->total_cycles;
  }
  state.counters["sim_inst/s"] = benchmark::Counter(insts, benchmark::Counter::kIsRate);
  state.counters["sim_cycles/s"] = benchmark::Counter(cycles, benchmark::Counter::kIsRate);
  state.counters["inst/run"] = insts / state.iterations();
  state.counters["cycles/run"] = cycles / state.iterations();
}

void BM_GemmTimingOnly(benchmark::State& s) { Run(s, kGemm, 32, false); }
void BM_GemmFunctional(benchmark::State& s) { Run(s, kGemm, 4, true); }
void BM_VectorTimingOnly(benchmark::State& s) { Run(s, kVector, 32, false); }
void BM_VectorFunctional(benchmark::State& s) { Run(s, kVector, 4, true); }

BENCHMARK(BM_GemmTimingOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GemmFunctional)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_VectorTimingOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_VectorFunctional)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::sim

BENCHMARK_MAIN();
