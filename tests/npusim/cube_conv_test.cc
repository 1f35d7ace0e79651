//===- cube_conv_test.cc - Pointwise Conv on the cube ---------------------===//
#include <gtest/gtest.h>

#include <random>

#include "sim/machine/machine.h"
#include "target/npusim/kernels/cube.h"
#include "tests/npusim/kernel_harness.h"

namespace kiln::testing {
namespace {

Tensor Random(DType dt, const Dims& dims, uint32_t seed) {
  Tensor f(DType::kF32, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : f.span<float>()) x = u(rng);
  return dt == DType::kF32 ? f : CastTensor(f, dt);
}

struct ConvCase {
  DType dt;
  Dims x, w;
  bool bias;
  std::vector<int64_t> strides, pads;
  int64_t group = 1;
};

absl::StatusOr<target::npusim::GeneratedKernel> Generate(const ConvCase& c, Graph& g, Node** node,
                                                         absl::flat_hash_map<const Value*, Tensor>* inputs) {
  Value* x = g.AddInput("x", Type::Tensor(c.dt, Shape::Static(c.x)));
  (*inputs)[x] = Random(c.dt, c.x, 1);
  Value* w = g.AddConstant("w", Random(c.dt, c.w, 2));
  std::vector<Value*> ins = {x, w};
  if (c.bias) ins.push_back(g.AddConstant("bias", Random(c.dt, {c.w[0]}, 3)));
  Node* n = g.AddNode("Conv", ins, 1);
  if (!c.strides.empty()) n->SetAttr("strides", Attribute::Ints(c.strides));
  if (!c.pads.empty()) n->SetAttr("pads", Attribute::Ints(c.pads));
  n->SetAttr("group", Attribute::Int(c.group));
  auto ref = RunNodeOnReference(*n, *inputs);
  if (!ref.ok()) return ref.status();
  if (ref->size() != 1) return absl::InternalError("the reference Conv gave no output");
  n->output(0)->set_type(Type::Tensor(c.dt, Shape::Static((*ref)[0].dims())));
  *node = n;
  sim::Machine m = sim::DefaultMachine();
  target::npusim::KernelRequest req;
  req.node = n;
  req.machine = &m;
  return target::npusim::GenerateCubeKernel(req);
}

TEST(CubeConv, PointwiseConvMatchesReference) {
  for (DType dt : {DType::kF16, DType::kBF16, DType::kF32}) {
    for (ConvCase c : std::vector<ConvCase>{{dt, {1, 16, 8, 8}, {32, 16, 1, 1}, true, {}, {}},
                                            {dt, {2, 20, 7, 9}, {12, 20, 1, 1}, true, {1, 1}, {0, 0, 0, 0}},
                                            {dt, {3, 5, 30}, {40, 5, 1}, false, {}, {}}}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " X " << c.x.size() << "-D, bias " << c.bias);
      Graph g;
      Node* n = nullptr;
      absl::flat_hash_map<const Value*, Tensor> inputs;
      auto k = Generate(c, g, &n, &inputs);
      ASSERT_TRUE(k.ok()) << k.status();
      sim::Machine m = sim::DefaultMachine();
      auto run = RunKernelOnSim(*k, *n, inputs, m);
      ASSERT_TRUE(run.ok()) << run.status() << "\n" << k->plan;
      auto ref = RunNodeOnReference(*n, inputs);
      ASSERT_TRUE(ref.ok());
      EXPECT_LE(MaxRelativeError(run->outputs[0], (*ref)[0]), dt == DType::kF32 ? 1e-4 : 1e-2) << k->plan;
    }
  }
}

TEST(CubeConv, OtherConvolutionsSayWhatIsMissing) {
  for (ConvCase c : std::vector<ConvCase>{{DType::kF16, {1, 16, 8, 8}, {16, 16, 3, 3}, false, {}, {1, 1, 1, 1}},
                                          {DType::kF16, {1, 16, 8, 8}, {16, 16, 1, 1}, false, {2, 2}, {}},
                                          {DType::kF16, {1, 16, 8, 8}, {16, 1, 1, 1}, false, {}, {}, 16}}) {
    Graph g;
    Node* n = nullptr;
    absl::flat_hash_map<const Value*, Tensor> inputs;
    auto k = Generate(c, g, &n, &inputs);
    ASSERT_FALSE(k.ok());
    EXPECT_TRUE(absl::IsUnimplemented(k.status())) << k.status();
    EXPECT_NE(k.status().message().find("pointwise"), std::string::npos) << k.status();
  }
}

}  // namespace
}  // namespace kiln::testing
