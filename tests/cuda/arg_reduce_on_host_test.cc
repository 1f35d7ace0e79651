//===- arg_reduce_on_host_test.cc - The cuda ArgMax/ArgMin kernel's C++, run on the host ===//
//
// cuda_arg_reduce_kernel.cc's CUDA C++ compiled by the host's C++ compiler
// against tests/cuda/simt_host.h and run against the reference executor:
// ArgMax and ArgMin over the last, a middle and the first axis, ties (the
// first index, or the last under select_last_index), NaNs, f32, f16 and
// bf16, an axis longer than a block's threads.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "graph/exec/executor.h"
#include "target/cuda/cuda_arg_reduce_kernel.h"
#include "tests/cuda/simt_host_run.h"
#include "tests/tile/tile_check.h"

namespace kiln {
namespace {

void Check(const char* op, Dims dims, int64_t axis, DType dt, bool last, bool ties_and_nans) {
  SCOPED_TRACE(::testing::Message() << op << " [" << absl::StrJoin(dims, ",") << "] axis " << axis << " "
                                    << DTypeName(dt) << (last ? " last" : ""));
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(dt, Shape::Static(dims)));
  Node* n = g.AddNode(op, {x}, 1);
  n->SetAttr("axis", Attribute::Int(axis));
  n->SetAttr("select_last_index", Attribute::Int(last ? 1 : 0));
  Dims out = dims;
  out[axis] = 1;
  n->output(0)->set_type(Type::Tensor(DType::kI64, Shape::Static(out)));
  g.AddOutput(n->output(0));
  Tensor in = tile_check::Random(dt, dims, 7, -4, 4);
  if (ties_and_nans) {  // coarse values tie; a few NaNs
    std::vector<float> v(static_cast<size_t>(in.numel()));
    for (int64_t i = 0; i < in.numel(); ++i) v[i] = static_cast<float>(std::round(in.GetDouble(i)));
    v[3] = v[v.size() - 2] = std::numeric_limits<float>::quiet_NaN();
    in = CastTensor(Tensor::FromVector<float>(v, dims), dt);
  }
  auto l = target::cuda::MakeArgReduceLaunch(*n);
  ASSERT_TRUE(l.ok()) << l.status();
  Tensor got(DType::kI64, out);
  const target::cuda::CudaVariant v{l->function, 0, {l->blocks, 1, 1}, l->threads, l->shared_bytes};
  absl::Status ran = simt_host::RunOnHost(l->function, l->source, v, {got.raw(), in.raw()});
  ASSERT_TRUE(ran.ok()) << ran;
  Executor exec;
  auto want = exec.Run(g, {in});
  ASSERT_TRUE(want.ok()) << want.status();
  int64_t differ = 0;
  for (int64_t i = 0; i < got.numel(); ++i) differ += got.GetInt(i) != (*want)[0].GetInt(i);
  EXPECT_EQ(differ, 0) << "of " << got.numel();
  Tensor host(DType::kI64, out);
  target::cuda::ArgReduceOnHost(l->what, in.raw(), host.data<int64_t>());
  EXPECT_TRUE((*want)[0].Equals(host));
}

TEST(CudaArgReduceOnHost, LastAxisLongerThanABlock) { Check("ArgMax", {2, 3000}, 1, DType::kF32, false, false); }
TEST(CudaArgReduceOnHost, MiddleAndFirstAxes) {
  Check("ArgMin", {3, 40, 5}, 1, DType::kF16, false, false);
  Check("ArgMax", {33, 4}, 0, DType::kBF16, false, false);
}
TEST(CudaArgReduceOnHost, TiesAndNaNs) {
  Check("ArgMax", {4, 100}, 1, DType::kF32, false, true);
  Check("ArgMax", {4, 100}, 1, DType::kF32, true, true);
  Check("ArgMin", {4, 100}, 1, DType::kF16, true, true);
}

}  // namespace
}  // namespace kiln
