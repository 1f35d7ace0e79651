//===- attention_lowering_test.cc - kiln.Attention in the tile IR ----------===//
//
// target/backend/tile_attention_lowering.cc: the FlashAttention schedule
// stated in the tile IR, verified against the npusim and cuda figures, run
// on the interpreter (its reference meaning) against the reference
// executor's kiln.Attention, with and without an additive mask; and the
// forms it does not state are refused.
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

std::unique_ptr<Built> Build(Dims q, int64_t l, bool mask, bool causal = false) {
  auto b = std::make_unique<Built>();
  Dims kv = q;
  kv[kv.size() - 2] = l;
  Value* vq = b->g.AddInput("q", Type::Tensor(DType::kF16, Shape::Static(q)));
  Value* vk = b->g.AddInput("k", Type::Tensor(DType::kF16, Shape::Static(kv)));
  Value* vv = b->g.AddInput("v", Type::Tensor(DType::kF16, Shape::Static(kv)));
  std::vector<Value*> ins = {vq, vk, vv};
  b->inputs = {Random(DType::kF16, q, 1), Random(DType::kF16, kv, 2), Random(DType::kF16, kv, 3)};
  if (mask) {
    const Dims md = {q[q.size() - 2], l};
    ins.push_back(b->g.AddInput("mask", Type::Tensor(DType::kF16, Shape::Static(md))));
    b->inputs.push_back(Random(DType::kF16, md, 4, -3, 0));
  }
  b->node = b->g.AddNode("Attention", ins, 1, "kiln");
  if (causal) b->node->SetAttr("causal", Attribute::Int(1));
  b->node->output(0)->set_type(Type::Tensor(DType::kF16, Shape::Static(q)));
  b->g.AddOutput(b->node->output(0));
  return b;
}

void Check(Dims q, int64_t l, bool mask) {
  SCOPED_TRACE(::testing::Message() << "q [" << absl::StrJoin(q, ",") << "] keys " << l << " mask " << mask);
  auto b = Build(q, l, mask);
  for (const char* target : {"npusim", "cuda"}) {
    auto k = target::tile::LowerAttention(*b->node, FiguresOfTarget(target));
    ASSERT_TRUE(k.ok()) << target << ": " << k.status();
    std::vector<Tensor> args = b->inputs;
    args.emplace_back(DType::kF16, q);
    std::vector<Tensor*> ptrs;
    for (Tensor& t : args) ptrs.push_back(&t);
    absl::Status ran = target::tile::RunTileKernel(*k, ptrs);
    ASSERT_TRUE(ran.ok()) << target << ": " << ran;
    Executor exec;
    auto want = exec.Run(b->g, b->inputs);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(Compare((*want)[0], args.back(), 1e-2, 0.1), "") << target;
  }
}

TEST(AttentionLowering, RunsAsTheReference) {
  Check({1, 2, 128, 64}, 192, false);
  Check({2, 64, 128}, 128, true);
}

TEST(AttentionLowering, PrintsAndParsesBack) {
  auto b = Build({1, 1, 64, 32}, 64, false);
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
  auto causal = Build({1, 1, 64, 32}, 64, false, /*causal=*/true);
  EXPECT_TRUE(absl::IsUnimplemented(target::tile::LowerAttention(*causal->node, FiguresOfTarget("npusim")).status()));
  auto ragged = Build({1, 1, 60, 32}, 64, false);
  EXPECT_TRUE(absl::IsUnimplemented(target::tile::LowerAttention(*ragged->node, FiguresOfTarget("npusim")).status()));
}

}  // namespace
}  // namespace kiln::tile_check
