//===- simt_host.h - A cuda kernel's C++ source run on the host -*- C++ -*-===//
//
// Lets a test compile the CUDA C++ that the cuda code generator emits with
// the host's C++ compiler and run it: one host thread per GPU thread, one
// block at a time, __syncthreads a barrier of the block, and the
// warp-collective instructions (shuffles, ldmatrix, mma.sync) exchanged
// through the warp's slots between two barriers of its 32 threads, with
// their fragment layouts as the PTX ISA states them. cp.async copies at
// once (a kernel that reads a slot before waiting for it still reads the
// right bytes: races in the pipeline's order are not caught).
//
// It stands in for the package prelude's subset that kernels on mma.sync
// use (kiln::to_f32/from_f32, max_nan, smem_u32, cp_async, lds32, tile_offset, atomic_add, ldmatrix,
// mma_f16/mma_bf16/mma_tf32, to_tf32, split_tf32); f16 and bf16 round as kiln's
// reference kernels do (graph/support/float16.h). A kernel source that needs more fails to compile here.
//
// Included first in the translation unit a test builds:
//   #include "tests/cuda/simt_host.h"
//   <the kernel's source>
//   extern "C" void launch(void** args) { simt::Launch(grid, threads, [&] { KERNEL(simt::Arg{args[0]}, ...); }); }
//
//===----------------------------------------------------------------------===//
#pragma once

#include <math.h>

#include <cmath>
#include <stdint.h>
#include <string.h>

#include <bit>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "graph/support/float16.h"

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __align__(n)

struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};

alignas(1024) inline unsigned char smem_raw[228 * 1024];
// The GEMM kernels' dynamic shared memory, declared by its own name.
#define kiln_smem_raw smem_raw

namespace simt {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

// A reusable barrier of `n` threads.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = gen_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return gen_ != gen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, arrived_ = 0;
  uint64_t gen_ = 0;
};

// One warp's exchange: each lane's words, between two barriers.
struct Warp {
  Barrier bar{32};
  uint32_t slot[32][12] = {};
};

inline thread_local Dim3 thread_index, block_index;
inline Dim3 grid_dim, block_dim;
inline Barrier* block_barrier = nullptr;
inline std::vector<std::unique_ptr<Warp>>* warps = nullptr;

inline int Lane() { return static_cast<int>(thread_index.x % 32); }
inline Warp& MyWarp() { return *(*warps)[thread_index.x / 32]; }

// Every lane publishes `n` words, all wait, `read` runs with the slots, all wait.
template <typename Read>
void Exchange(const uint32_t* words, int n, Read read) {
  Warp& w = MyWarp();
  memcpy(w.slot[Lane()], words, 4 * n);
  w.bar.Wait();
  read(w.slot);
  w.bar.Wait();
}

// A kernel argument: a device pointer of whatever type the parameter takes.
struct Arg {
  void* p;
  template <typename T>
  operator T*() const {
    return static_cast<T*>(p);
  }
};

// Runs `kernel` (a call of the __global__ function) for every block of
// `grid`, `threads` host threads per block, blocks one after another.
inline void Launch(Dim3 grid, unsigned threads, const std::function<void()>& kernel) {
  grid_dim = grid;
  block_dim = Dim3{threads, 1, 1};
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        Barrier block(static_cast<int>(threads));
        std::vector<std::unique_ptr<Warp>> w;
        for (unsigned i = 0; i < (threads + 31) / 32; ++i) w.push_back(std::make_unique<Warp>());
        block_barrier = &block;
        warps = &w;
        memset(smem_raw, 0xcd, sizeof(smem_raw));  // shared memory starts as garbage
        std::vector<std::thread> pool;
        for (unsigned t = 0; t < threads; ++t)
          pool.emplace_back([&, t] {
            thread_index = Dim3{t, 0, 0};
            block_index = Dim3{x, y, z};
            kernel();
          });
        for (std::thread& th : pool) th.join();
      }
}

}  // namespace simt

#define threadIdx (::simt::thread_index)
#define blockIdx (::simt::block_index)
#define gridDim (::simt::grid_dim)
#define blockDim (::simt::block_dim)

inline void __syncthreads() { simt::block_barrier->Wait(); }

template <typename T>
inline T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  static_assert(sizeof(T) == 4, "32-bit shuffles");
  const uint32_t u = std::bit_cast<uint32_t>(v);
  T out{};
  simt::Exchange(&u, 1, [&](uint32_t (*slot)[12]) { out = std::bit_cast<T>(slot[simt::Lane() ^ lane_mask][0]); });
  return out;
}

inline void __syncwarp() { simt::MyWarp().bar.Wait(); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }

namespace kiln {

inline float to_f32(float x) { return x; }
inline float to_f32(__half x) { return HalfBitsToFloat(x.bits); }
inline float to_f32(__nv_bfloat16 x) { return BFloat16BitsToFloat(x.bits); }
template <typename T> inline T from_f32(float x);
template <> inline float from_f32<float>(float x) { return x; }
template <> inline __half from_f32<__half>(float x) { return __half{FloatToHalfBits(x)}; }
template <> inline __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __nv_bfloat16{FloatToBFloat16Bits(x)}; }
inline float max_nan(float a, float b) { return a != a || b != b ? a + b : fmaxf(a, b); }

inline uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(static_cast<const unsigned char*>(p) - smem_raw);
}
template <int kBytes>
inline void cp_async(uint32_t dst, const void* src, int src_bytes) {
  memcpy(smem_raw + dst, src, src_bytes);
  memset(smem_raw + dst + src_bytes, 0, kBytes - src_bytes);
}
inline uint32_t lds32(uint32_t addr) {
  uint32_t v;
  memcpy(&v, smem_raw + addr, 4);
  return v;
}
// The stage tiles' swizzled layout, as the package prelude states it.
template <int kLines, int kPanel>
inline uint32_t tile_offset(int line, int byte_in_line) {
  const uint32_t b = uint32_t(byte_in_line / kPanel) * uint32_t(kLines * kPanel) +
                     uint32_t(line * kPanel + byte_in_line % kPanel);
  return b ^ (((b >> 7) & uint32_t(kPanel / 16 - 1)) << 4);
}
// Split-K's partial sums: the block's threads run at once here too.
inline void atomic_add(float* p, float v) {
  float old, sum;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  do {
    sum = old + v;
  } while (!__atomic_compare_exchange(p, &old, &sum, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}
inline void cp_async_commit() {}
template <int kPending> inline void cp_async_wait() {}

// Four 8x8 matrices of 16-bit elements: lane 8i + r gives row r of matrix
// i; lane l receives, in register i, row l/4 elements 2(l%4), +1 (or,
// transposed, column l/4 rows 2(l%4), +1).
inline void ldmatrix_any(uint32_t (&r)[4], uint32_t addr, bool trans) {
  simt::Exchange(&addr, 1, [&](uint32_t (*slot)[12]) {
    const int l = simt::Lane();
    for (int i = 0; i < 4; ++i) {
      uint16_t lo, hi;
      if (!trans) {
        const unsigned char* row = smem_raw + slot[8 * i + l / 4][0];
        memcpy(&lo, row + 4 * (l % 4), 2);
        memcpy(&hi, row + 4 * (l % 4) + 2, 2);
      } else {
        memcpy(&lo, smem_raw + slot[8 * i + 2 * (l % 4)][0] + 2 * (l / 4), 2);
        memcpy(&hi, smem_raw + slot[8 * i + 2 * (l % 4) + 1][0] + 2 * (l / 4), 2);
      }
      r[i] = uint32_t(lo) | (uint32_t(hi) << 16);
    }
  });
}
inline void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) { ldmatrix_any(r, addr, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) { ldmatrix_any(r, addr, true); }

// D (16x8 f32) += A (16x16) * B (16x8), fragments as the PTX ISA's
// m16n8k16: g = lane / 4, t = lane % 4; A register i holds rows g + 8(i%2),
// columns 2t + 8(i/2) (+1 in the high half); B register i rows 2t + 8i
// (+1), column g; D element e row g + 8(e/2), column 2t + e%2.
inline void mma_any(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], float (*decode)(uint16_t)) {
  uint32_t words[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
  float A[16][16], B[16][8];
  simt::Exchange(words, 6, [&](uint32_t (*slot)[12]) {
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      for (int i = 0; i < 4; ++i) {
        const uint32_t w = slot[lane][i];
        A[g + 8 * (i % 2)][2 * t + 8 * (i / 2)] = decode(uint16_t(w & 0xffff));
        A[g + 8 * (i % 2)][2 * t + 8 * (i / 2) + 1] = decode(uint16_t(w >> 16));
      }
      for (int i = 0; i < 2; ++i) {
        const uint32_t w = slot[lane][4 + i];
        B[2 * t + 8 * i][g] = decode(uint16_t(w & 0xffff));
        B[2 * t + 8 * i + 1][g] = decode(uint16_t(w >> 16));
      }
    }
  });
  const int g = simt::Lane() / 4, t = simt::Lane() % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
    float acc = 0;
    for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
    d[e] += acc;
  }
}
// f32 bits to tf32 (10 mantissa bits), rounded to nearest, ties away from zero.
inline uint32_t to_tf32(uint32_t bits) {
  if ((bits & 0x7f800000u) == 0x7f800000u) return bits;  // inf, NaN
  return (bits + 0x1000u) & 0xffffe000u;
}

// f32 bits as a tf32 head and tail, as the package prelude splits them.
inline void split_tf32(uint32_t bits, uint32_t& hi, uint32_t& lo) {
  hi = to_tf32(bits);
  const float h = __uint_as_float(hi);
  lo = std::isfinite(h) ? to_tf32(__float_as_uint(__uint_as_float(bits) - h)) : 0u;
}

// D (16x8 f32) += A (16x8 tf32) * B (8x8 tf32): A register i at row
// g + 8(i%2), column t + 4(i/2); B register i at row t + 4i, column g.
inline void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  uint32_t words[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
  float A[16][8], B[8][8];
  simt::Exchange(words, 6, [&](uint32_t (*slot)[12]) {
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      for (int i = 0; i < 4; ++i) A[g + 8 * (i % 2)][t + 4 * (i / 2)] = __uint_as_float(slot[lane][i]);
      for (int i = 0; i < 2; ++i) B[t + 4 * i][g] = __uint_as_float(slot[lane][4 + i]);
    }
  });
  const int g = simt::Lane() / 4, t = simt::Lane() % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
    float acc = 0;
    for (int k = 0; k < 8; ++k) acc += A[row][k] * B[k][col];
    d[e] += acc;
  }
}

inline void mma_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  mma_any(d, a, b, HalfBitsToFloat);
}
inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  mma_any(d, a, b, BFloat16BitsToFloat);
}

}  // namespace kiln
