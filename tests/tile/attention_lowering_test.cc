//===- attention_lowering_test.cc - kiln.Attention in the tile IR ----------===//
//
// target/backend/tile_attention_lowering.cc: the FlashAttention schedule
// stated in the tile IR, verified against the npusim and cuda figures, run
// on the interpreter (its reference meaning) against the reference
// executor's kiln.Attention, with and without an additive mask, causal,
// with K given transposed, in f16 and bf16; and the forms it does not state
// are refused.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "graph/ir/graph.h"
#include "tests/tile/tile_check.h"

namespace kiln::tile_check {
namespace {

struct Built {
  Graph g;
  Node* node = nullptr;
  std::vector<Tensor> inputs;
};

struct Form {
  bool mask = false, causal = false, k_transposed = false;
  DType dtype = DType::kF16;
};

std::unique_ptr<Built> Build(Dims q, int64_t l, Form form = {}) {
  auto b = std::make_unique<Built>();
  const DType dt = form.dtype;
  Dims kv = q, kt = q;
  kv[kv.size() - 2] = l;
  kt[kt.size() - 2] = q.back();  // K^T [..., d, l]
  kt[kt.size() - 1] = l;
  Value* vq = b->g.AddInput("q", Type::Tensor(dt, Shape::Static(q)));
  Value* vk = b->g.AddInput("k", Type::Tensor(dt, Shape::Static(form.k_transposed ? kt : kv)));
  Value* vv = b->g.AddInput("v", Type::Tensor(dt, Shape::Static(kv)));
  std::vector<Value*> ins = {vq, vk, vv};
  b->inputs = {Random(dt, q, 1), Random(dt, form.k_transposed ? kt : kv, 2), Random(dt, kv, 3)};
  if (form.mask) {
    const Dims md = {q[q.size() - 2], l};
    ins.push_back(b->g.AddInput("mask", Type::Tensor(dt, Shape::Static(md))));
    b->inputs.push_back(Random(dt, md, 4, -3, 0));
  }
  b->node = b->g.AddNode("Attention", ins, 1, "kiln");
  if (form.causal) b->node->SetAttr("causal", Attribute::Int(1));
  if (form.k_transposed) b->node->SetAttr("k_transposed", Attribute::Int(1));
  b->node->output(0)->set_type(Type::Tensor(dt, Shape::Static(q)));
  b->g.AddOutput(b->node->output(0));
  return b;
}

void Check(Dims q, int64_t l, Form form = {}) {
  SCOPED_TRACE(::testing::Message() << "q [" << absl::StrJoin(q, ",") << "] keys " << l << " mask " << form.mask
                                    << " causal " << form.causal << " K^T " << form.k_transposed << " "
                                    << DTypeName(form.dtype));
  auto b = Build(q, l, form);
  for (const char* target : {"npusim", "cuda"}) {
    auto k = target::tile::LowerAttention(*b->node, FiguresOfTarget(target));
    ASSERT_TRUE(k.ok()) << target << ": " << k.status();
    std::vector<Tensor> args = b->inputs;
    args.emplace_back(form.dtype, q);
    std::vector<Tensor*> ptrs;
    for (Tensor& t : args) ptrs.push_back(&t);
    absl::Status ran = target::tile::RunTileKernel(*k, ptrs);
    ASSERT_TRUE(ran.ok()) << target << ": " << ran;
    Executor exec;
    auto want = exec.Run(b->g, b->inputs);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(Compare((*want)[0], args.back(), form.dtype == DType::kBF16 ? 3e-2 : 1e-2, 0.1), "") << target;
  }
}

TEST(AttentionLowering, RunsAsTheReference) {
  Check({1, 2, 128, 64}, 192);
  Check({2, 64, 128}, 128, {.mask = true});
}

TEST(AttentionLowering, CausalTransposedKBf16AndF32RunAsTheReference) {
  Check({1, 2, 128, 64}, 128, {.causal = true});
  Check({2, 64, 32}, 64, {.mask = true, .causal = true});
  Check({1, 2, 64, 64}, 128, {.k_transposed = true});
  Check({2, 64, 64}, 64, {.mask = true, .dtype = DType::kBF16});
  Check({1, 2, 64, 32}, 64, {.mask = true, .causal = true, .dtype = DType::kF32});
}

// The causal mask is a statement of its own, at the tile's row and key;
// O stays in the accumulator, where the MMA adds P V to it.
TEST(AttentionLowering, CausalTilesAndTheOutputInTheAccumulator) {
  auto b = Build({1, 1, 128, 64}, 128, {.causal = true});
  auto k = target::tile::LowerAttention(*b->node, FiguresOfTarget("cuda"));
  ASSERT_TRUE(k.ok()) << k.status();
  const std::string text = target::tile::Print(*k);
  EXPECT_NE(text.find("causal %sv, %i*64, %j*64"), std::string::npos) << text;
  EXPECT_NE(text.find("buffer %o : f32[64,64] accumulator"), std::string::npos) << text;
  EXPECT_NE(text.find("mma %o += %pa * %vb"), std::string::npos) << text;
}

// Head size 128 keeps 64x64 tiles on both targets.
TEST(AttentionLowering, HeadSize128KeepsFullTiles) {
  auto b = Build({1, 1, 128, 128}, 256, {.mask = true});
  for (const char* target : {"npusim", "cuda"}) {
    auto k = target::tile::LowerAttention(*b->node, FiguresOfTarget(target));
    ASSERT_TRUE(k.ok()) << target << ": " << k.status();
    EXPECT_NE(k->plan.find("64x64 tiles"), std::string::npos) << target << ": " << k->plan;
  }
}

TEST(AttentionLowering, PrintsAndParsesBack) {
  auto b = Build({1, 1, 64, 32}, 64);
  auto k = target::tile::LowerAttention(*b->node, FiguresOfTarget("npusim"));
  ASSERT_TRUE(k.ok()) << k.status();
  const std::string text = target::tile::Print(*k);
  EXPECT_NE(text.find("copy %p -> %ps"), std::string::npos) << text;  // P through the stage scope
  EXPECT_NE(text.find("reduce max %rm <- %sv axis 1"), std::string::npos) << text;
  auto again = target::tile::Parse(text);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(target::tile::Print(*again), text);
}

TEST(AttentionLowering, RefusesWhatItDoesNotState) {
  auto wide_head = Build({1, 1, 64, 256}, 64);
  EXPECT_TRUE(absl::IsUnimplemented(target::tile::LowerAttention(*wide_head->node, FiguresOfTarget("cuda")).status()));
  auto ragged = Build({1, 1, 60, 32}, 64);
  EXPECT_TRUE(absl::IsUnimplemented(target::tile::LowerAttention(*ragged->node, FiguresOfTarget("npusim")).status()));
}

}  // namespace
}  // namespace kiln::tile_check
