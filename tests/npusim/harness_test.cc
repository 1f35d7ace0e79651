//===- harness_test.cc - The kernel harness on a hand-written kernel ------===//
#include <gtest/gtest.h>

#include "sim/isa/asm.h"
#include "sim/machine/machine.h"
#include "tests/npusim/kernel_harness.h"

namespace kiln::testing {
namespace {

TEST(KernelHarness, HandWrittenReluMatchesReference) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({4, 64})));
  Node* n = g.AddNode("Relu", {x}, 1);
  n->output(0)->set_type(Type::Tensor(DType::kF32, Shape::Static({4, 64})));
  auto file = sim::Assemble(R"(
.program relu
.regs 2
.arg x f32[4,64]
.arg y f32[4,64]
  copy_gm_ub UB[0], x[0], len=1024
  set_flag MTE2, VECTOR, 0
  wait_flag MTE2, VECTOR, 0
  vrelu.f32 UB[1024], UB[0], repeat=4
  set_flag VECTOR, MTE3, 0
  wait_flag VECTOR, MTE3, 0
  copy_ub_gm y[0], UB[1024], len=1024
)", "relu.kasm");
  ASSERT_TRUE(file.ok()) << file.status();
  target::npusim::GeneratedKernel k;
  k.program = file->program;
  k.engine = "vector";
  Tensor in(DType::kF32, {4, 64});
  for (int64_t i = 0; i < in.numel(); ++i) in.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
  absl::flat_hash_map<const Value*, Tensor> inputs = {{x, in}};
  auto run = RunKernelOnSim(k, *n, inputs, sim::DefaultMachine());
  ASSERT_TRUE(run.ok()) << run.status();
  auto ref = RunNodeOnReference(*n, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(MaxRelativeError(run->outputs[0], (*ref)[0]), 0.0);
  EXPECT_GT(run->stats.total_cycles, 0);
}

}  // namespace
}  // namespace kiln::testing
