//===- int_kernel_on_host_test.cc - The cuda integer elementwise kernels' C++, run on the host ===//
//
// cuda_int_kernel.cc's CUDA C++ compiled by the host's C++ compiler against
// tests/cuda/simt_host.h and run against the reference executor: i64
// arithmetic with broadcasting and a scalar, i32 wrapping past its range,
// comparisons into bool, and bool logic.
//
//===----------------------------------------------------------------------===//
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "graph/exec/executor.h"
#include "graph/ops/shape_inference.h"
#include "target/cuda/cuda_int_kernel.h"
#include "tests/cuda/simt_host_run.h"

namespace kiln {
namespace {

Tensor Ints(DType dt, const Dims& dims, std::vector<int64_t> v) {
  Tensor t = Tensor::FromVector<int64_t>(v, dims);
  return dt == DType::kI64 ? t : CastTensor(t, dt);
}

void Check(const char* op, std::vector<Tensor> in) {
  SCOPED_TRACE(op);
  Graph g;
  std::vector<Value*> ins;
  for (size_t i = 0; i < in.size(); ++i)
    ins.push_back(g.AddInput(absl::StrCat("x", i), Type::Tensor(in[i].dtype(), Shape::Static(in[i].dims()))));
  Node* n = g.AddNode(op, ins, 1);
  g.AddOutput(n->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  Executor exec;
  auto want = exec.Run(g, in);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(target::cuda::IsIntElementwise(*n));
  auto l = target::cuda::MakeIntElementwiseLaunch(*n);
  ASSERT_TRUE(l.ok()) << l.status();
  Tensor got((*want)[0].dtype(), (*want)[0].dims());
  std::vector<void*> args = {got.raw()};
  for (Tensor& t : in) args.push_back(t.raw());
  const target::cuda::CudaVariant v{l->function, 0, {l->blocks, 1, 1}, l->threads, 0};
  absl::Status ran = simt_host::RunOnHost(l->function, l->source, v, args);
  ASSERT_TRUE(ran.ok()) << ran;
  EXPECT_TRUE((*want)[0].Equals(got)) << l->source;
  Tensor host((*want)[0].dtype(), (*want)[0].dims());
  std::vector<const void*> hin;
  for (Tensor& t : in) hin.push_back(t.raw());
  ASSERT_TRUE(target::cuda::IntElementwiseOnHost(l->what, hin, host.raw()).ok());
  EXPECT_TRUE((*want)[0].Equals(host));
}

TEST(CudaIntKernelOnHost, ArithmeticBroadcastsAndWraps) {
  Check("Add", {Ints(DType::kI64, {}, {63}), Ints(DType::kI64, {}, {1})});  // a position plus one
  Check("Sub", {Ints(DType::kI64, {2, 3}, {1, 2, 3, 4, 5, 6}), Ints(DType::kI64, {3}, {10, -20, 30})});
  Check("Mul", {Ints(DType::kI32, {2, 1}, {std::numeric_limits<int32_t>::max(), -7}), Ints(DType::kI32, {1, 3}, {2, 3, -4})});
  Check("Max", {Ints(DType::kI16, {4}, {-3, 9, 0, 2}), Ints(DType::kI16, {4}, {1, -9, 0, 5})});
  Check("Neg", {Ints(DType::kI8, {3}, {-128, 5, 0})});
  Check("Abs", {Ints(DType::kI64, {3}, {-4, 4, std::numeric_limits<int64_t>::min()})});
}

TEST(CudaIntKernelOnHost, ComparisonsAndLogic) {
  Check("Greater", {Ints(DType::kI64, {1, 32}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                                               21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}),
                    Ints(DType::kI64, {1, 1}, {12})});
  Check("LessOrEqual", {Ints(DType::kI32, {2, 2}, {1, 2, 3, 4}), Ints(DType::kI32, {2}, {2, 3})});
  Tensor p(DType::kBool, {4}), q(DType::kBool, {4});
  for (int i = 0; i < 4; ++i) p.data<bool>()[i] = i & 1, q.data<bool>()[i] = i & 2;
  Check("Not", {p});
  Check("And", {p, q});
  Check("Xor", {p, q});
  Check("Equal", {p, q});
}

}  // namespace
}  // namespace kiln
