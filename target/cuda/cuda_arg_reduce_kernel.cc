//===- cuda_arg_reduce_kernel.cc - ArgMax / ArgMin as CUDA kernels --------===//
#include "target/cuda/cuda_arg_reduce_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "graph/ir/dtype_dispatch.h"
#include "target/cuda/cuda_copy_kernel.h"

namespace kiln::target::cuda {
namespace {

// Blocks of the grid-stride loop over output elements.
constexpr int64_t kMaxBlocks = 132 * 8;

constexpr char kKernel[] = R"(// @WHAT@ over [@OUTER@, @N@, @INNER@]
extern "C" __global__ void __launch_bounds__(@THREADS@) @NAME@(long long* __restrict__ y, const @T@* __restrict__ x) {
  constexpr long long OUTER = @OUTER@, N = @N@, INNER = @INNER@;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* sv = reinterpret_cast<float*>(smem_raw);        // a warp's best value
  int* si = reinterpret_cast<int*>(smem_raw + 32 * 4);   // and its index
  // Whether (v, k) wins over (bv, bk); k < 0: no element.
  auto better = [](float v, int k, float bv, int bk) {
    if (k < 0) return false;
    if (bk < 0) return true;
    const bool vn = v != v, bn = bv != bv;
    if (vn || bn) return vn && bn ? (@LAST@ ? k > bk : k < bk) : vn;
    if (v == bv) return @LAST@ ? k > bk : k < bk;
    return v @CMP@ bv;
  };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (long long row = blockIdx.x; row < OUTER * INNER; row += gridDim.x) {
    const @T@* p = x + row / INNER * N * INNER + row % INNER;
    float bv = 0.f;
    int bk = -1;
    for (int k = threadIdx.x; k < N; k += blockDim.x) {
      const float v = kiln::to_f32(p[(long long)k * INNER]);
      if (better(v, k, bv, bk)) bv = v, bk = k;
    }
    for (int d = 16; d > 0; d >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, d);
      const int ok = __shfl_xor_sync(0xffffffffu, bk, d);
      if (better(ov, ok, bv, bk)) bv = ov, bk = ok;
    }
    if (lane == 0) sv[warp] = bv, si[warp] = bk;
    __syncthreads();
    if (warp == 0) {
      bv = lane < warps ? sv[lane] : 0.f;
      bk = lane < warps ? si[lane] : -1;
      for (int d = 16; d > 0; d >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, d);
        const int ok = __shfl_xor_sync(0xffffffffu, bk, d);
        if (better(ov, ok, bv, bk)) bv = ov, bk = ok;
      }
      if (lane == 0) y[row] = bk;
    }
    __syncthreads();
  }
}
)";

}  // namespace

bool IsArgReduce(const Node& n) { return n.domain().empty() && (n.op() == "ArgMax" || n.op() == "ArgMin"); }

absl::StatusOr<ArgReduceLaunch> MakeArgReduceLaunch(const Node& n) {
  if (!IsArgReduce(n) || n.num_inputs() < 1 || !n.input(0) || n.num_outputs() != 1)
    return absl::UnimplementedError(absl::StrCat("no arg-reduction kernel for ", n.QualifiedOp()));
  const Value* x = n.input(0);
  if (!x->type().shape().is_static() || !n.output(0)->type().shape().is_static())
    return absl::FailedPreconditionError("shapes not static");
  ArgReduceLaunch l;
  ArgReduce& a = l.what;
  a.input = x->type().dtype();
  const char* ct = a.input == DType::kF32 ? "float" : a.input == DType::kF16 ? "__half"
                 : a.input == DType::kBF16 ? "__nv_bfloat16" : nullptr;
  if (!ct) return absl::FailedPreconditionError(absl::StrCat("an arg-reduction of ", DTypeName(a.input)));
  const Dims d = x->type().shape().StaticDims();
  const int64_t rank = static_cast<int64_t>(d.size());
  int64_t axis = n.GetInt("axis", 0);
  if (axis < 0) axis += rank;
  if (rank == 0 || axis < 0 || axis >= rank) return absl::FailedPreconditionError("axis out of range");
  for (int64_t i = 0; i < axis; ++i) a.outer *= d[i];
  a.n = d[axis];
  for (int64_t i = axis + 1; i < rank; ++i) a.inner *= d[i];
  if (a.n < 1 || a.n >= (int64_t{1} << 31)) return absl::FailedPreconditionError("an axis of 1 to 2^31 - 1 elements");
  a.is_max = n.op() == "ArgMax";
  a.last = n.GetInt("select_last_index", 0) != 0;
  l.threads = std::clamp<int64_t>((a.n + 31) / 32 * 32, 32, 1024);
  l.blocks = std::clamp<int64_t>(a.outer * a.inner, 1, kMaxBlocks);
  l.shared_bytes = 32 * 8;
  const std::string body = absl::StrReplaceAll(
      kKernel, {{"@WHAT@", n.op()},
                {"@OUTER@", absl::StrCat(a.outer)},
                {"@N@", absl::StrCat(a.n)},
                {"@INNER@", absl::StrCat(a.inner)},
                {"@THREADS@", absl::StrCat(l.threads)},
                {"@T@", ct},
                {"@LAST@", a.last ? "true" : "false"},
                {"@CMP@", a.is_max ? ">" : "<"}});
  l.function = absl::StrFormat("kiln_%s_%016x", a.is_max ? "argmax" : "argmin", StableHash(body));
  l.source = absl::StrReplaceAll(body, {{"@NAME@", l.function}});
  return l;
}

void ArgReduceOnHost(const ArgReduce& a, const void* x, int64_t* y) {
  auto value = [&](int64_t i) {
    return DispatchFloat(a.input,
                         [&]<typename T>() { return static_cast<float>(ToDouble(static_cast<const T*>(x)[i])); });
  };
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t j = 0; j < a.inner; ++j) {
      int64_t best = 0;
      float bv = value(o * a.n * a.inner + j);
      for (int64_t k = 1; k < a.n; ++k) {
        const float v = value((o * a.n + k) * a.inner + j);
        bool better;
        if (std::isnan(bv)) better = a.last && std::isnan(v);
        else if (std::isnan(v)) better = true;
        else if (a.is_max) better = a.last ? v >= bv : v > bv;
        else better = a.last ? v <= bv : v < bv;
        if (better) best = k, bv = v;
      }
      y[o * a.inner + j] = best;
    }
}

}  // namespace kiln::target::cuda
