//===- cuda_codegen.cc - CUDA C++ from tile IR kernels ---------------------===//
//
// EmitCudaKernel: recognizes which canonical form (tile_lowering.h) a tile
// kernel is in and hands it to that form's emitter: a kernel with both mma
// and reduce steps is an attention (cuda_attention.cc), one with an mma
// step a GEMM (cuda_gemm.cc), one with an im2col copy and a reduce step
// a window kernel (cuda_window.cc), one with a reduce step a row
// reduction, any other an elementwise kernel (cuda_vector.cc).
//
//===----------------------------------------------------------------------===//
#include "target/cuda/codegen/cuda_codegen.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "target/cuda/codegen/codegen_util.h"

namespace kiln::target::cuda {
namespace {

using tile::Stmt;

void Count(const tile::Block& b, int* mma, int* reduce, int* gather) {
  for (const auto& s : b) {
    if (s->kind == Stmt::Kind::kMma) ++*mma;
    if (s->kind == Stmt::Kind::kReduce) ++*reduce;
    if (s->kind == Stmt::Kind::kCopy && s->im2col) ++*gather;
    if (s->kind == Stmt::Kind::kLoop) Count(s->body, mma, reduce, gather);
  }
}

}  // namespace

absl::StatusOr<CudaKernel> EmitCudaKernel(const tile::TileKernel& k, const CudaArch& arch) {
  if (arch.min_sm < 80) {
    return absl::UnimplementedError(absl::StrCat("kernel @", k.name, ": kiln's CUDA kernels need sm_80 or newer, not sm_",
                                                 arch.min_sm));
  }
  int mma = 0, reduce = 0, gather = 0;
  Count(k.body, &mma, &reduce, &gather);
  absl::StatusOr<CudaKernel> out;
  if (mma > 0 && reduce > 0) {
    out = internal::EmitAttention(k, arch);
  } else if (mma > 0) {
    out = internal::EmitGemm(k, arch);
  } else if (reduce > 0 && gather > 0) {
    out = internal::EmitWindow(k);
  } else if (reduce > 0) {
    out = internal::EmitRowReduction(k);
  } else {
    out = internal::EmitElementwise(k);
  }
  if (!out.ok()) {
    return absl::Status(out.status().code(),
                        absl::StrCat("kernel @", k.name, " has no CUDA form: ", out.status().message()));
  }
  return out;
}

}  // namespace kiln::target::cuda
