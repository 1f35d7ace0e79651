//===- cuda_prelude.cc - The common prelude of a cuda package's source ----===//
//
// Every kernel the cuda code generator emits stands on this prelude: the
// fp16/bf16 headers, conversions to and from the f32 the kernels compute
// in, the elementwise functions of the tile IR, vector loads, and thin
// wrappers of the PTX instructions the GEMMs use (cp.async with zero-fill,
// ldmatrix, mma.sync, the tf32 conversion, and on sm_90a the wgmma
// descriptors, mbarriers and TMA loads) and of the swizzled layout of the
// stage tiles in shared memory. The wgmma wrappers depend on the MMA's N and
// are emitted with the kernels that use them.
//
//===----------------------------------------------------------------------===//
#include "target/cuda/codegen/cuda_codegen.h"

namespace kiln::target::cuda {

std::string CudaPrelude() {
  return R"cuda(// kiln cuda package: the common prelude of the kernels below.
#include <cuda.h>  // CUtensorMap, the type of a TMA descriptor parameter
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

namespace kiln {

// ---- Conversions: kernels compute in f32 and convert at loads and stores.
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(bool x) { return x ? 1.f : 0.f; }

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ bool from_f32<bool>(float x) { return x != 0.f; }

// The value `x` takes when stored in a T (the tile IR's cast, and every
// step whose destination buffer is narrower than f32).
template <typename T> __device__ __forceinline__ float round_to(float x) { return to_f32(from_f32<T>(x)); }

// ---- The tile IR's elementwise operations (ONNX semantics).
__device__ __forceinline__ float relu(float x) { return fmaxf(x, 0.f); }
// Max and Min propagate NaN, as kiln's reference kernels do (fmaxf/fminf
// would drop it).
__device__ __forceinline__ float max_nan(float a, float b) { return a != a || b != b ? a + b : fmaxf(a, b); }
__device__ __forceinline__ float min_nan(float a, float b) { return a != a || b != b ? a + b : fminf(a, b); }
__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float recip(float x) { return 1.f / x; }
__device__ __forceinline__ float select(float c, float a, float b) { return c != 0.f ? a : b; }

// ---- Vector loads and stores of N elements (16 bytes at most), converted to f32.
template <typename T, int N> struct alignas(sizeof(T) * N) Vec { T v[N]; };
template <typename T, int N>
__device__ __forceinline__ void load_vec(const T* __restrict__ p, float (&out)[N]) {
  const Vec<T, N> x = *reinterpret_cast<const Vec<T, N>*>(p);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = to_f32(x.v[i]);
}
template <typename T, int N>
__device__ __forceinline__ void store_vec(T* __restrict__ p, const float (&in)[N]) {
  Vec<T, N> x;
#pragma unroll
  for (int i = 0; i < N; ++i) x.v[i] = from_f32<T>(in[i]);
  *reinterpret_cast<Vec<T, N>*>(p) = x;
}

// ---- Atomic accumulation into global memory (split-K partial sums).
__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(__half* p, float v) { atomicAdd(p, __float2half_rn(v)); }
__device__ __forceinline__ void atomic_add(__nv_bfloat16* p, float v) { atomicAdd(p, __float2bfloat16_rn(v)); }

// ---- Warp reductions (every lane gets the result).
struct SumOp { static __device__ __forceinline__ float apply(float a, float b) { return a + b; } };
struct MaxOp { static __device__ __forceinline__ float apply(float a, float b) { return max_nan(a, b); } };
struct MinOp { static __device__ __forceinline__ float apply(float a, float b) { return min_nan(a, b); } };
struct ProdOp { static __device__ __forceinline__ float apply(float a, float b) { return a * b; } };
template <typename Op> __device__ __forceinline__ float warp_allreduce(float v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v = Op::apply(v, __shfl_xor_sync(0xffffffffu, v, d));
  return v;
}
// All threads of the block get the result; `scratch` holds one float per warp.
// Every thread of the block must call it.
template <typename Op, int kWarps>
__device__ __forceinline__ float block_allreduce(float v, float* scratch) {
  v = warp_allreduce<Op>(v);
  if (kWarps == 1) return v;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by the previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[lane < kWarps ? lane : 0];
  return warp_allreduce<Op>(v);
}

// ---- Stage tiles in shared memory.
//
// A stage tile is `kLines` lines of a contiguous dimension (the dimension
// that is contiguous in global memory, so cp.async moves 16-byte chunks).
// Lines are cut into panels of kPanel bytes (128, 64, 32 or 16: the largest
// that divides a line); a panel holds its part of every line, one after the
// other, and panels follow each other. Within each 8 x 128-byte pattern the
// 16-byte chunk index is XORed with the address bits above it (Swizzle<3,4,3>
// for 128-byte panels; the 64- and 32-byte forms XOR fewer bits), so the 8
// rows an ldmatrix reads lie in 8 different bank groups, and the layout is
// the one wgmma's 128B/64B/32B swizzle modes describe (tiles start at a
// multiple of 1024 bytes).
template <int kLines, int kPanel>
__device__ __forceinline__ uint32_t tile_offset(int line, int byte_in_line) {
  const uint32_t b = uint32_t(byte_in_line / kPanel) * uint32_t(kLines * kPanel) +
                     uint32_t(line * kPanel + byte_in_line % kPanel);
  return b ^ (((b >> 7) & uint32_t(kPanel / 16 - 1)) << 4);
}

// ---- im2col: the offset in X [N, C, H, W] of element (n, g, k, p) of X's
// im2col matrix [N, G, (C/G)*KH*KW, OH*OW] (tile IR `copy ... im2col`), or
// -1 where the window lies in the padding. Every extent is a compile-time
// constant, so the divisions are multiplications.
template <int C, int H, int W, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OW, int CG>
__device__ __forceinline__ long long im2col_offset(int n, int g, int k, int p) {
  const int c = k / (KH * KW), r = k / KW % KH, s = k % KW;
  const int ih = p / OW * SH - PH + r * DH, iw = p % OW * SW - PW + s * DW;
  if (ih < 0 || ih >= H || iw < 0 || iw >= W) return -1;
  return ((long long)(n * C + g * CG + c) * H + ih) * W + iw;
}

// The value an im2col element at offset `at` (im2col_offset's result, or
// -2 past the matrix's edges) reads: the element, `fill` in the padding, 0
// past the edges.
template <class T>
__device__ __forceinline__ float im2col_value(const T* x, long long at, float fill) {
  return at >= 0 ? to_f32(x[at]) : at == -1 ? fill : 0.f;
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- cp.async: kBytes (4, 8 or 16) from global to shared; the bytes past
// src_bytes (0 .. kBytes) are filled with zeros (ragged tile edges).
template <int kBytes>
__device__ __forceinline__ void cp_async(uint32_t dst, const void* src, int src_bytes) {
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(kBytes),
                 "r"(src_bytes)
                 : "memory");
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// ---- ldmatrix: 8x8 matrices of 16-bit elements (or 8x4 of 32-bit ones);
// lanes 8i..8i+7 give the row addresses of matrix i, register i receives it.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}
__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

// ---- mma.sync: D (16x8 f32) += A (16xK) * B (Kx8). Fragments (PTX ISA,
// "Matrix fragments for mma.m16n8k16 / m16n8k8"), with g = lane / 4 and
// t = lane % 4: C/D element e at row g + 8*(e/2), column 2t + e%2; for
// k16, A register i at rows g + 8*(i%2), columns 2t + 8*(i/2) (two
// elements), B register i at rows 2t + 8*i (two), column g; for tf32 k8,
// A register i at row g + 8*(i%2), column t + 4*(i/2), B register i at row
// t + 4*i, column g.
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// f32 bits to tf32, rounded to nearest (ties away), as cuBLAS does.
__device__ __forceinline__ uint32_t to_tf32(uint32_t f32_bits) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(f32_bits)));
  return r;
}

// f32 bits as a tf32 head and a tf32 tail, head + tail within about 2^-21
// of x (3xTF32: tail x head + head x tail + head x head keeps f32's
// accuracy on TensorCores). A head that is not finite has no tail.
__device__ __forceinline__ void split_tf32(uint32_t f32_bits, uint32_t& hi, uint32_t& lo) {
  hi = to_tf32(f32_bits);
  const float h = __uint_as_float(hi);
  lo = isfinite(h) ? to_tf32(__float_as_uint(__uint_as_float(f32_bits) - h)) : 0u;
}

// ---- sm_90a: wgmma descriptors and synchronization (no-ops elsewhere; the
// kernels that use them compile their bodies for sm_90a only).
//
// A shared memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
// start address, leading and stride dimension byte offsets (all >> 4) and
// the swizzle mode (1: 128B, 2: 64B, 3: 32B); base offset 0, since every
// tile starts at a multiple of 1024 bytes.
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, uint32_t swizzle) {
  return uint64_t((addr & 0x3FFFFu) >> 4) | (uint64_t((lbo >> 4) & 0x3FFFu) << 16) |
         (uint64_t((sbo >> 4) & 0x3FFFu) << 32) | (uint64_t(swizzle) << 62);
}
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int kPending> __device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}
// Keeps the compiler from moving accumulator accesses across wgmma's
// asynchronous reads and writes of them.
__device__ __forceinline__ void fence_operand(float& x) { asm volatile("" : "+f"(x)::"memory"); }
// Orders the generic-proxy writes of cp.async before wgmma's async-proxy reads.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// ---- sm_90a: mbarriers and TMA loads. A stage slot's mbarrier expects one
// arrival (the thread that issues the slot's TMA loads, announcing their
// bytes) and completes its phase when those bytes have landed; the threads
// reading the slot wait for the phase's parity.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t arrivals) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
#endif
}
// Makes initialized mbarriers visible to the TMA unit (then __syncthreads).
__device__ __forceinline__ void fence_mbar_init() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// Arrives on `bar`, announcing `bytes` of TMA transfers that complete it.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(bar),
               "r"(bytes)
               : "memory");
#endif
}
// Arrives on `bar` (one of the arrivals its phase expects).
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar) : "memory");
#endif
}
// A warpgroup gives registers back to the block's pool, or takes them from
// it, down or up to kRegs per thread (every thread of the warpgroup).
template <int kRegs> __device__ __forceinline__ void setmaxnreg_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs> __device__ __forceinline__ void setmaxnreg_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
// Waits until the phase of `bar` with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
#endif
}
// One TMA box of the tensor `map` at element coordinates (innermost first)
// into shared memory at `dst` (128-byte aligned), completing bytes on `bar`;
// elements outside the tensor arrive as zeros.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap& map, uint32_t bar, int c0, int c1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(&map)), "r"(bar), "r"(c0), "r"(c1) : "memory");
#endif
}
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap& map, uint32_t bar, int c0, int c1, int c2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(dst), "l"(reinterpret_cast<uint64_t>(&map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2) : "memory");
#endif
}
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap& map, uint32_t bar, int c0, int c1, int c2,
                                         int c3) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];\n" ::"r"(dst), "l"(reinterpret_cast<uint64_t>(&map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#endif
}
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap& map, uint32_t bar, int c0, int c1, int c2,
                                         int c3, int c4) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, "
      "%7}], [%2];\n" ::"r"(dst), "l"(reinterpret_cast<uint64_t>(&map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2),
      "r"(c3), "r"(c4)
      : "memory");
#endif
}

}  // namespace kiln
)cuda";
}

}  // namespace kiln::target::cuda
