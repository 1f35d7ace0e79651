//===- attention_on_host_test.cc - The cuda attention kernel's C++, run on the host ===//
//
// The CUDA C++ that cuda_attention.cc prints for kiln.Attention, compiled
// with the host's C++ compiler against tests/cuda/simt_host.h (a host
// thread per GPU thread, the warp collectives with the PTX ISA's fragment
// layouts) and run against the reference executor: without a GPU, this is
// what checks the kernel's fragment indexing, online softmax, masks, the
// causal tile skipping and the slots of its pipeline. Forms: no mask, an
// additive mask broadcast over heads, causal, K given transposed, bf16,
// f32 (tf32), head size 128 with 64x64 tiles, batch and heads as the grid.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "target/cuda/codegen/cuda_codegen.h"
#include "tests/cuda/simt_host_run.h"
#include "tests/tile/tile_check.h"

namespace kiln {
namespace {

using tile_check::Compare;
using tile_check::FiguresOfTarget;
using tile_check::Random;

struct Form {
  bool mask = false, causal = false, k_transposed = false;
  DType dtype = DType::kF16;
};

void Check(Dims q, int64_t l, Form form, const std::string& expect_plan = "") {
  SCOPED_TRACE(::testing::Message() << "q [" << absl::StrJoin(q, ",") << "] keys " << l << " mask " << form.mask
                                    << " causal " << form.causal << " K^T " << form.k_transposed << " "
                                    << DTypeName(form.dtype));
  const DType dt = form.dtype;
  Graph g;
  Dims kv = q, kt = q;
  kv[kv.size() - 2] = l;
  kt[kt.size() - 2] = q.back();  // K^T [..., d, l]
  kt[kt.size() - 1] = l;
  std::vector<Value*> ins = {g.AddInput("q", Type::Tensor(dt, Shape::Static(q))),
                             g.AddInput("k", Type::Tensor(dt, Shape::Static(form.k_transposed ? kt : kv))),
                             g.AddInput("v", Type::Tensor(dt, Shape::Static(kv)))};
  std::vector<Tensor> inputs = {Random(dt, q, 1, -2, 2), Random(dt, form.k_transposed ? kt : kv, 2, -2, 2),
                                Random(dt, kv, 3)};
  if (form.mask) {  // [S, L]: broadcast over the batch and heads
    const Dims md = {q[q.size() - 2], l};
    ins.push_back(g.AddInput("mask", Type::Tensor(dt, Shape::Static(md))));
    inputs.push_back(Random(dt, md, 4, -4, 0));
  }
  Node* n = g.AddNode("Attention", ins, 1, "kiln");
  if (form.causal) n->SetAttr("causal", Attribute::Int(1));
  if (form.k_transposed) n->SetAttr("k_transposed", Attribute::Int(1));
  n->output(0)->set_type(Type::Tensor(dt, Shape::Static(q)));
  g.AddOutput(n->output(0));

  auto tk = target::tile::LowerAttention(*n, FiguresOfTarget("cuda"));
  ASSERT_TRUE(tk.ok()) << tk.status();
  tk->name = "attention_on_host";
  auto ck = target::cuda::EmitCudaKernel(*tk, target::cuda::CudaArch{});
  ASSERT_TRUE(ck.ok()) << ck.status();
  if (!expect_plan.empty()) {
    EXPECT_NE(ck->plan.find(expect_plan), std::string::npos) << ck->plan;
  }
  std::vector<Tensor> args = inputs;
  args.emplace_back(dt, q);
  std::vector<Tensor*> ptrs;
  for (Tensor& t : args) ptrs.push_back(&t);
  std::vector<void*> raw;
  for (Tensor* t : ptrs) raw.push_back(t->raw());
  absl::Status ran = simt_host::RunOnHost(ck->name, ck->source, ck->variants.at(0), raw);
  ASSERT_TRUE(ran.ok()) << ran;
  Executor exec;
  auto want = exec.Run(g, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  // f32 runs in tf32 (the 10 mantissa bits of f16), as the f32 GEMMs do.
  EXPECT_EQ(Compare((*want)[0], args.back(), dt == DType::kBF16 ? 3e-2 : 1e-2, 0.1), "");
}

TEST(CudaAttentionOnHost, NoMask) { Check({2, 64, 32}, 128, {}, "64x64 tiles, head 32, 4 warps"); }

TEST(CudaAttentionOnHost, AdditiveMaskOverHeads) { Check({1, 2, 128, 64}, 64, {.mask = true}, "additive mask"); }

TEST(CudaAttentionOnHost, CausalSkipsTilesPastTheDiagonal) {
  Check({1, 2, 128, 32}, 128, {.causal = true}, "key tiles past the diagonal skipped");
}

TEST(CudaAttentionOnHost, CausalWithAMaskAndRowsPastTheKeys) {
  Check({1, 64, 32}, 128, {.mask = true, .causal = true});
}

TEST(CudaAttentionOnHost, KGivenTransposed) { Check({2, 64, 64}, 128, {.k_transposed = true}, "K given transposed"); }

TEST(CudaAttentionOnHost, Bf16) { Check({1, 64, 64}, 64, {.mask = true, .dtype = DType::kBF16}); }

TEST(CudaAttentionOnHost, HeadSize128) { Check({1, 64, 128}, 128, {.mask = true}, "64x64 tiles, head 128"); }

// Two warps: 32x32 tiles (a short sequence; f32 at head size 128, whose
// operand tiles hold no more).
TEST(CudaAttentionOnHost, TwoWarpTiles) {
  Check({1, 2, 32, 32}, 32, {.mask = true}, "32x32 tiles, head 32, 2 warps");
  Check({1, 64, 128}, 64, {.causal = true, .dtype = DType::kF32}, "32x32 tiles, head 128, 2 warps");
}

TEST(CudaAttentionOnHost, F32OnTf32) {
  Check({1, 2, 128, 64}, 128, {.mask = true, .causal = true, .dtype = DType::kF32}, "mma.sync m16n8k8 (tf32)");
  Check({2, 64, 32}, 64, {.k_transposed = true, .dtype = DType::kF32});
}

}  // namespace
}  // namespace kiln
