//===- cube_conv_test.cc - Conv on the cube (pointwise GEMM and im2col) ---===//
#include <gtest/gtest.h>

#include <iostream>

#include "sim/machine/machine.h"
#include "target/npusim/kernels/cube.h"
#include "tests/npusim/kernel_harness.h"

namespace kiln::testing {
namespace {

struct ConvCase {
  DType dt;
  Dims x, w;
  bool bias;
  std::vector<int64_t> strides, pads;
  int64_t group = 1;
  std::vector<int64_t> dilations = {};
};

absl::StatusOr<target::npusim::GeneratedKernel> Generate(const ConvCase& c, Graph& g, Node** node,
                                                         absl::flat_hash_map<const Value*, Tensor>* inputs) {
  Value* x = g.AddInput("x", Type::Tensor(c.dt, Shape::Static(c.x)));
  (*inputs)[x] = RandomTensor(c.dt, c.x, 1);
  Value* w = g.AddConstant("w", RandomTensor(c.dt, c.w, 2));
  std::vector<Value*> ins = {x, w};
  if (c.bias) ins.push_back(g.AddConstant("bias", RandomTensor(c.dt, {c.w[0]}, 3)));
  Node* n = g.AddNode("Conv", ins, 1);
  if (!c.strides.empty()) n->SetAttr("strides", Attribute::Ints(c.strides));
  if (!c.pads.empty()) n->SetAttr("pads", Attribute::Ints(c.pads));
  n->SetAttr("group", Attribute::Int(c.group));
  if (!c.dilations.empty()) n->SetAttr("dilations", Attribute::Ints(c.dilations));
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

// Runs each case on the simulator and compares with the reference.
void ExpectMatches(const std::vector<ConvCase>& cases) {
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << DTypeName(c.dt) << " X " << ::testing::PrintToString(c.x) << " W "
                                      << ::testing::PrintToString(c.w) << " strides "
                                      << ::testing::PrintToString(c.strides) << " pads "
                                      << ::testing::PrintToString(c.pads) << " group " << c.group
                                      << " bias " << c.bias);
    Graph g;
    Node* n = nullptr;
    absl::flat_hash_map<const Value*, Tensor> inputs;
    auto k = Generate(c, g, &n, &inputs);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_GT(k->estimated_cycles, 0);
    sim::Machine m = sim::DefaultMachine();
    auto run = RunKernelOnSim(*k, *n, inputs, m);
    ASSERT_TRUE(run.ok()) << run.status() << "\n" << k->plan;
    auto ref = RunNodeOnReference(*n, inputs);
    ASSERT_TRUE(ref.ok());
    EXPECT_LE(MaxRelativeError(run->outputs[0], (*ref)[0]), c.dt == DType::kF32 ? 1e-4 : 1e-2) << k->plan;
    bool pointwise = c.group == 1 && c.w.back() == 1 && (c.w.size() < 4 || c.w[2] == 1);
    for (int64_t v : c.strides) pointwise &= v == 1;
    for (int64_t v : c.pads) pointwise &= v == 0;
    // 2-D convolutions of one group build their im2col rows in L0A, but an
    // f32 image of fewer channels than a block (an RGB stem).
    const bool img2col = c.group == 1 && c.x.size() == 4 && !(c.dt == DType::kF32 && c.x[1] < 8);
    if (!pointwise) {
      EXPECT_NE(k->plan.find(img2col ? "img2col from L1" : "im2col"), std::string::npos) << k->plan;
    }
    ::testing::Test::RecordProperty("plan", k->plan);
    std::cout << k->plan << "\n  simulated " << run->stats.total_cycles << " cycles\n";
  }
}

// ResNet-like convolutions: 3x3 stride 1 pad 1, the 7x7 stride 2 pad 3 stem
// with 3 input channels, 3x3 stride 2, 1x1 stride 2 (the downsample), batch 2.
TEST(CubeConv, ResNetLikeConvolutionsMatchReference) {
  for (DType dt : {DType::kF32, DType::kF16}) {
    ExpectMatches({{dt, {2, 16, 10, 10}, {24, 16, 3, 3}, true, {1, 1}, {1, 1, 1, 1}},
                   {dt, {1, 3, 22, 22}, {16, 3, 7, 7}, false, {2, 2}, {3, 3, 3, 3}},
                   {dt, {2, 20, 9, 11}, {40, 20, 3, 3}, true, {2, 2}, {1, 1, 1, 1}},
                   {dt, {2, 32, 8, 8}, {48, 32, 1, 1}, false, {2, 2}, {0, 0, 0, 0}}});
  }
  // Enough channels that the im2col runs in several groups and a rest.
  ExpectMatches({{DType::kF32, {1, 100, 28, 28}, {32, 100, 3, 3}, true, {1, 1}, {1, 1, 1, 1}},
                 {DType::kF16, {1, 70, 14, 30}, {24, 70, 3, 3}, false, {2, 2}, {1, 1, 1, 1}},
                 {DType::kF32, {1, 45, 12, 120}, {16, 45, 3, 3}, true, {1, 1}, {1, 1, 1, 1}}});
}

// img2col from L1 (f16/bf16, one group): channels that are not a multiple
// of 16, several bands and clipped bands, dilations, asymmetric pads,
// output channels in several tiles and groups, batches.
TEST(CubeConv, Img2ColConvolutionsMatchReference) {
  ExpectMatches({{DType::kF16, {1, 16, 6, 6}, {16, 16, 3, 3}, false, {1, 1}, {1, 1, 1, 1}},
                 {DType::kF16, {2, 20, 15, 13}, {40, 20, 3, 3}, true, {1, 1}, {1, 1, 1, 1}},
                 {DType::kBF16, {1, 35, 17, 9}, {70, 35, 3, 5}, true, {2, 1}, {0, 2, 1, 0}, 1, {2, 1}},
                 {DType::kF16, {1, 3, 40, 40}, {24, 3, 7, 7}, true, {2, 2}, {3, 3, 3, 3}},
                 {DType::kF16, {1, 64, 7, 7}, {200, 64, 3, 3}, true, {1, 1}, {1, 1, 1, 1}},
                 {DType::kF16, {1, 8, 30, 30}, {16, 8, 5, 5}, false, {1, 1}, {0, 0, 0, 0}},
                 {DType::kF16, {1, 32, 9, 9}, {16, 32, 3, 3}, true, {1, 1}, {2, 2, 2, 2}, 1, {2, 2}}});
}

// Deep convolutions (K = C1*KH*KW k-fractals of many steps): the K steps
// of a tile repeat their img2col attributes every lcm(Kt, KH*KW) / Kt
// steps, and the program runs those periods in a loop (its label
// "k_period"), the image and the weights moved in L1 by registers, and the
// steps after the last full period as written; the results match the
// reference.
TEST(CubeConv, Img2ColLoopsOverThePeriodsOfItsKSteps) {
  for (const ConvCase& c : std::vector<ConvCase>{
           {DType::kF32, {1, 300, 28, 28}, {32, 300, 3, 3}, true, {1, 1}, {1, 1, 1, 1}},
           {DType::kF16, {1, 1000, 14, 14}, {32, 1000, 3, 3}, false, {1, 1}, {1, 1, 1, 1}},
           {DType::kF16, {2, 512, 28, 28}, {24, 512, 3, 3}, true, {2, 2}, {1, 1, 1, 1}},
           {DType::kF32, {1, 1024, 14, 14}, {32, 1024, 1, 1}, true, {2, 2}, {0, 0, 0, 0}},
           {DType::kBF16, {1, 2000, 14, 14}, {32, 2000, 1, 1}, true, {2, 2}, {0, 0, 0, 0}}}) {
    SCOPED_TRACE(::testing::Message() << DTypeName(c.dt) << " X " << ::testing::PrintToString(c.x) << " W "
                                      << ::testing::PrintToString(c.w));
    ExpectMatches({c});
    Graph g;
    Node* n = nullptr;
    absl::flat_hash_map<const Value*, Tensor> inputs;
    auto k = Generate(c, g, &n, &inputs);
    ASSERT_TRUE(k.ok()) << k.status();
    ASSERT_NE(k->plan.find("img2col from L1"), std::string::npos) << k->plan;
    bool looped = false;
    for (const auto& [index, name] : k->program.labels) looped |= name.rfind("k_period", 0) == 0;
    EXPECT_TRUE(looped) << k->plan;
  }
}

// Grouped, dilated, asymmetric pads, bf16, 1-D.
TEST(CubeConv, GroupedDilatedAndOtherConvolutionsMatchReference) {
  ExpectMatches({{DType::kF32, {2, 32, 7, 7}, {64, 8, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, 4},
                 {DType::kF16, {1, 24, 9, 9}, {18, 8, 3, 3}, false, {1, 1}, {2, 2, 2, 2}, 3, {2, 2}},
                 {DType::kF32, {1, 8, 12, 10}, {20, 8, 3, 5}, true, {1, 2}, {0, 2, 1, 0}, 1, {2, 1}},
                 {DType::kBF16, {2, 16, 6, 6}, {16, 16, 3, 3}, true, {1, 1}, {1, 1, 1, 1}},
                 {DType::kF32, {2, 8, 40}, {12, 8, 5}, true, {2}, {2, 2}},
                 {DType::kF32, {1, 16, 6, 14}, {32, 16, 3, 3}, false, {1, 1}, {1, 1, 1, 1}}});
}

// MobileNet-like: the 3x3 stride 2 stem on 3 channels, a pointwise expansion.
TEST(CubeConv, MobileNetLikeConvolutionsMatchReference) {
  ExpectMatches({{DType::kF32, {1, 3, 32, 32}, {32, 3, 3, 3}, true, {2, 2}, {1, 1, 1, 1}},
                 {DType::kF16, {1, 16, 14, 14}, {96, 16, 1, 1}, true, {}, {}}});
}

// Depthwise: super-groups of 16 channels with a block-diagonal weight (the
// last one shifting inward when the channels are not a multiple of 16).
TEST(CubeConv, DepthwiseConvolutionsMatchReference) {
  ExpectMatches({{DType::kF32, {1, 32, 12, 12}, {32, 1, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, 32},
                 {DType::kF32, {2, 24, 9, 9}, {24, 1, 3, 3}, true, {2, 2}, {1, 1, 1, 1}, 24},
                 {DType::kF16, {1, 8, 10, 10}, {8, 1, 3, 3}, false, {1, 1}, {1, 1, 1, 1}, 8},
                 {DType::kF16, {1, 48, 7, 7}, {48, 1, 5, 5}, true, {1, 1}, {2, 2, 2, 2}, 48}});
}

TEST(CubeConv, DepthwiseWithAChannelMultiplierSaysWhyItGoesElsewhere) {
  ConvCase c{DType::kF16, {1, 16, 8, 8}, {32, 1, 3, 3}, false, {}, {1, 1, 1, 1}, 16};
  Graph g;
  Node* n = nullptr;
  absl::flat_hash_map<const Value*, Tensor> inputs;
  auto k = Generate(c, g, &n, &inputs);
  ASSERT_FALSE(k.ok());
  EXPECT_TRUE(absl::IsUnimplemented(k.status())) << k.status();
  EXPECT_NE(k.status().message().find("channel multiplier"), std::string::npos) << k.status();
}

}  // namespace
}  // namespace kiln::testing
