//===- cuda_codegen.h - CUDA C++ from tile IR kernels ------------*- C++ -*-===//
//
// The cuda target's code generator: one tile::TileKernel (target/backend/
// tile_lowering.h's canonical GEMM, elementwise or row-reduction form) to
// the CUDA C++ source of its __global__ functions and their launch
// geometry. GEMMs run on TensorCores: mma.sync (m16n8k16 for f16/bf16,
// m16n8k8 for tf32) fed by ldmatrix from swizzled shared memory filled by a
// multi-stage cp.async pipeline, for sm_80 and newer; on sm_90a a wgmma
// path with TMA loads. Elementwise and reduction kernels are vectorized
// loads with warp-shuffle reductions.
//
// Every kernel's source stands alone after the package's common prelude
// (CudaPrelude(): includes, the fp16/bf16 helpers), so a package is the
// prelude followed by its kernels.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "target/backend/tile_ir.h"

namespace kiln::target::cuda {

// The GPU a package is built for: the lowest compute capability its
// kernels must run on, and whether sm_90a variants are emitted.
struct CudaArch {
  int min_sm = 80;
  bool hopper = true;  // also emit sm_90a (wgmma/TMA) variants of GEMMs
  // f32 matrix products as three tf32 products (3xTF32: each operand split
  // into a tf32 head and tail; tail x head + head x tail + head x head,
  // accumulated in f32), about f32's accuracy at three times the MMAs,
  // where one tf32 product keeps f16's 10 mantissa bits. mma.sync only: an
  // f32 GEMM then has no wgmma variant. (--fp32-products=3xtf32)
  bool split_tf32 = false;
  // sm_90a GEMMs with TMA operands as warp-specialized persistent kernels: a
  // producer warpgroup feeding consumer warpgroups through an mbarrier ring
  // (--sm90a-gemm=warp-specialized, the default); false keeps every warp
  // computing, a block per tile (--sm90a-gemm=uniform).
  bool warp_specialized = true;
};

// A TMA tensor map (sm_90a) that the launcher encodes on the host, with
// cuTensorMapEncodeTiled, for each launch of a variant: the whole tensor
// bound to tile kernel argument `arg`, read in boxes of `box` elements with
// the shared memory swizzle of `swizzle_bytes`. Dimensions run innermost
// first, as the driver takes them. The variant's __global__ function takes
// the maps, in order, as `const __grid_constant__ CUtensorMap` parameters
// after the argument pointers.
struct TmaMap {
  int arg = 0;
  DType dtype = DType::kF16;
  std::vector<int64_t> dims;     // elements per dimension, innermost first
  std::vector<int64_t> strides;  // bytes between steps of dims[1], dims[2], ...
  std::vector<int64_t> box;      // elements per box dimension, innermost first
  int swizzle_bytes = 128;       // 32, 64 or 128
};

// One compiled form of a kernel: the __global__ function to launch on
// devices of compute capability >= min_sm (the launcher takes the variant
// with the highest min_sm the device reaches).
struct CudaVariant {
  std::string function;            // the __global__ function's name
  int min_sm = 80;
  std::array<int64_t, 3> grid = {1, 1, 1};
  int64_t block_threads = 128;
  int64_t shared_bytes = 0;        // dynamic shared memory
  // The highest compute capability the variant runs on (0: any from
  // min_sm up); sm_90a code (wgmma) is arch-specific: max_sm = 90.
  int max_sm = 0;
  // Tensor maps passed after the argument pointers (TMA loads).
  std::vector<TmaMap> tma = {};
  // grid[0] counts work items, not blocks: the launcher runs as many blocks
  // as are resident on the device at once (at most grid[0]), and each loops
  // over the work items blockIdx.x, blockIdx.x + gridDim.x, ...
  bool persistent = false;
};

struct CudaKernel {
  std::string name;                // the tile kernel's name, as a C identifier
  std::string source;              // CUDA C++: every variant's __global__ function
  std::vector<CudaVariant> variants;
  bool matrix = false;             // runs on TensorCores (mma.sync / wgmma)
  // The kernel's parameters are pointers to the tile kernel's arguments, in
  // order; a workspace argument needs this many bytes of device memory.
  int64_t workspace_bytes = 0;
  // Arguments (indices) the launcher zeroes before each launch: the outputs
  // and workspaces that split-K blocks add their partial sums into.
  std::vector<int> zero_args;
  std::string plan;                // one line for --explain-placement
};

// The common prelude of a package's kernel source.
std::string CudaPrelude();

// CUDA C++ for `k`, or an error that says which part of the kernel has no
// CUDA form (the node then falls back to a host kernel).
absl::StatusOr<CudaKernel> EmitCudaKernel(const tile::TileKernel& k, const CudaArch& arch);

}  // namespace kiln::target::cuda
