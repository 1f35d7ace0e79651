//===- cube_fused_test.cc - kiln.Fused GEMM + bias + Relu on the cube -----===//
#include <gtest/gtest.h>


#include "sim/machine/machine.h"
#include "target/npusim/kernels/cube.h"
#include "tests/npusim/kernel_harness.h"

namespace kiln::testing {
namespace {

// kiln.Fused(a, b) { t = MatMul(a, b) [* Gemm alpha]; t = Add(t, bias); Relu(t) }
// with bias a body constant.
void RunFused(DType dt, bool gemm, float alpha, bool add, bool relu, Dims bias_dims) {
  SCOPED_TRACE(::testing::Message() << DTypeName(dt) << (gemm ? " Gemm" : " MatMul") << " alpha " << alpha
                                    << " add " << add << " relu " << relu);
  const int64_t M = 40, K = 72, N = 50;
  Graph g;
  Value* a = g.AddInput("a", Type::Tensor(dt, Shape::Static({M, K})));
  Value* b = g.AddInput("b", Type::Tensor(dt, Shape::Static({K, N})));
  Node* fused = g.AddNode("Fused", {a, b}, 1, "kiln");
  auto body = std::make_unique<Graph>("body", &g);
  Value* ba = body->AddInput("ba", Type::Tensor(dt, Shape::Static({M, K})));
  Value* bb = body->AddInput("bb", Type::Tensor(dt, Shape::Static({K, N})));
  Node* mm = body->AddNode(gemm ? "Gemm" : "MatMul", {ba, bb}, 1);
  if (gemm) mm->SetAttr("alpha", Attribute::Float(alpha));
  Type out = Type::Tensor(dt, Shape::Static({M, N}));
  mm->output(0)->set_type(out);
  Value* cur = mm->output(0);
  if (add) {
    Value* bias = body->AddConstant("bias", RandomTensor(dt, bias_dims, 7));
    Node* n = body->AddNode("Add", {bias, cur}, 1);
    n->output(0)->set_type(out);
    cur = n->output(0);
  }
  if (relu) {
    Node* n = body->AddNode("Relu", {cur}, 1);
    n->output(0)->set_type(out);
    cur = n->output(0);
  }
  body->AddOutput(cur);
  fused->SetAttr("body", Attribute::GraphValue(std::move(body)));
  fused->output(0)->set_type(out);
  absl::flat_hash_map<const Value*, Tensor> inputs = {{a, RandomTensor(dt, {M, K}, 1)}, {b, RandomTensor(dt, {K, N}, 2)}};
  sim::Machine m = sim::DefaultMachine();
  target::npusim::KernelRequest req;
  req.node = fused;
  req.machine = &m;
  auto k = target::npusim::GenerateCubeKernel(req);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->constant_args.size(), add ? 1u : 0u);
  auto run = RunKernelOnSim(*k, *fused, inputs, m);
  ASSERT_TRUE(run.ok()) << run.status() << "\n" << k->plan;
  auto ref = RunNodeOnReference(*fused, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_LE(MaxRelativeError(run->outputs[0], (*ref)[0]), dt == DType::kF32 ? 1e-4 : 1e-2) << k->plan;
}

TEST(CubeFused, GemmWithBiasAndRelu) {
  for (DType dt : {DType::kF16, DType::kBF16, DType::kF32}) {
    RunFused(dt, false, 1, true, true, {50});
    RunFused(dt, false, 1, true, false, {1, 50});
    RunFused(dt, false, 1, false, true, {});
    RunFused(dt, true, 0.5f, true, true, {50});  // alpha: the UB epilogue
    RunFused(dt, false, 1, true, true, {1});
  }
}

}  // namespace
}  // namespace kiln::testing
