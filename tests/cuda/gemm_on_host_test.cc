//===- gemm_on_host_test.cc - The cuda GEMM kernel's C++, run on the host -===//
//
// An f32 MatMul's mma.sync kernel as cuda_gemm.cc prints it, compiled with
// the host's C++ compiler against tests/cuda/simt_host.h and run against
// the product in double precision: on tf32 (operands rounded to 10
// mantissa bits) its error is tf32's; split in three tf32 products
// (CudaArch::split_tf32, --fp32-products=3xtf32) it is f32's.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "target/cuda/codegen/cuda_codegen.h"
#include "tests/cuda/simt_host_run.h"
#include "tests/tile/tile_check.h"

namespace kiln {
namespace {

// The largest error of an f32 MatMul's kernel, Y [batch.., m, n] =
// A [batch.., m, k] x B [batch.., k, n], run on the host against the exact
// product, relative to the largest |Y|; its plan in *plan.
double RelativeError(const std::vector<int64_t>& batch, int64_t m, int64_t k, int64_t n,
                     const target::cuda::CudaArch& arch, const std::string& name, std::string* plan) {
  auto dims = [&](int64_t r, int64_t c) {
    std::vector<int64_t> d = batch;
    d.push_back(r);
    d.push_back(c);
    return d;
  };
  int64_t items = 1;
  for (int64_t b : batch) items *= b;
  Graph g;
  Value* a = g.AddInput("a", Type::Tensor(DType::kF32, Shape::Static(dims(m, k))));
  Value* b = g.AddInput("b", Type::Tensor(DType::kF32, Shape::Static(dims(k, n))));
  Node* mm = g.AddNode("MatMul", {a, b}, 1);
  mm->output(0)->set_type(Type::Tensor(DType::kF32, Shape::Static(dims(m, n))));
  g.AddOutput(mm->output(0));
  auto tk = target::tile::LowerNode(*mm, DType::kF32, tile_check::FiguresOfTarget("cuda"));
  EXPECT_TRUE(tk.ok()) << tk.status();
  if (!tk.ok()) return INFINITY;
  tk->name = name;
  auto ck = target::cuda::EmitCudaKernel(*tk, arch);
  EXPECT_TRUE(ck.ok()) << ck.status();
  if (!ck.ok()) return INFINITY;
  *plan = ck->plan;
  // Operands whose low mantissa bits matter: tf32 drops them.
  Tensor ta = tile_check::Random(DType::kF32, dims(m, k), 1, -1, 1), tb = tile_check::Random(DType::kF32, dims(k, n), 2, -1, 1);
  Tensor y(DType::kF32, dims(m, n));
  std::memset(y.raw(), 0, y.nbytes());  // zeroed as the launcher does for split-K's sums
  // Arguments in the kernel's order (a, b, y), bound by name.
  std::vector<void*> raw;
  for (const auto& arg : tk->args) raw.push_back(arg.name == "a" ? ta.raw() : arg.name == "b" ? tb.raw() : y.raw());
  absl::Status ran = simt_host::RunOnHost(ck->name, ck->source, ck->variants.at(0), raw);
  EXPECT_TRUE(ran.ok()) << ran;
  if (!ran.ok()) return INFINITY;
  double worst = 0, largest = 0;
  for (int64_t t = 0; t < items; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0;
        for (int64_t q = 0; q < k; ++q)
          exact += static_cast<double>(ta.data<float>()[(t * m + i) * k + q]) * tb.data<float>()[(t * k + q) * n + j];
        worst = std::max(worst, std::fabs(y.data<float>()[(t * m + i) * n + j] - exact));
        largest = std::max(largest, std::fabs(exact));
      }
  return worst / largest;
}

double RelativeError(bool split, int64_t m, int64_t k, int64_t n, std::string* plan) {
  target::cuda::CudaArch arch;
  arch.split_tf32 = split;
  return RelativeError({}, m, k, n, arch, split ? "gemm_3xtf32_on_host" : "gemm_tf32_on_host", plan);
}

TEST(CudaGemmOnHost, ThreeTf32ProductsKeepF32Accuracy) {
  std::string plan_tf32, plan_split;
  const double tf32 = RelativeError(false, 64, 96, 80, &plan_tf32);
  const double split = RelativeError(true, 64, 96, 80, &plan_split);
  // One tf32 product: about 2^-11 per operand.
  EXPECT_GT(tf32, 1e-4);
  EXPECT_LT(tf32, 1e-2);
  // Three: the f32 accumulation's own error.
  EXPECT_LT(split, 2e-6);
  EXPECT_TRUE(absl::StrContains(plan_split, "(3xTF32)")) << plan_split;
  EXPECT_FALSE(absl::StrContains(plan_tf32, "3xTF32")) << plan_tf32;
  // The wgmma variant reads tf32 operands from shared memory: none is made.
  EXPECT_TRUE(absl::StrContains(plan_split, "no wgmma variant")) << plan_split;
}

// Batch items of one row each (M = 1), K long enough to be split: each
// block's tile has more rows than the item, and the rows past it must not
// be added into the output (split-K adds partial sums atomically).
TEST(CudaGemmOnHost, SplitKAddsOnlyTheRowsOfAnItemOfOneRow) {
  std::string plan;
  const double err = RelativeError({16}, 1, 512, 16, target::cuda::CudaArch{}, "gemm_rows_on_host", &plan);
  EXPECT_TRUE(absl::StrContains(plan, "split-K")) << plan;  // the case under test
  EXPECT_LT(err, 1e-2) << plan;                              // tf32's error, not 16 rows added
}

}  // namespace
}  // namespace kiln
