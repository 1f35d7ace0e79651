//===- decode_attention_on_host_test.cc - The cuda decode attention's C++, run on the host ===//
//
// cuda_decode_attention.cc's two kernels (the chunks' partials, then their
// combination) compiled by the host's C++ compiler against
// tests/cuda/simt_host.h and run against the reference executor: f32 and
// f16, head sizes 32, 64 and 128, a length that leaves the last chunk
// ragged, an additive mask per batch item that hides the keys past each
// item's position (and a whole chunk), no mask.
//
//===----------------------------------------------------------------------===//
#include <limits>

#include <gtest/gtest.h>

#include "graph/exec/executor.h"
#include "target/cuda/cuda_decode_attention.h"
#include "tests/cuda/simt_host_run.h"
#include "tests/tile/tile_check.h"

namespace kiln {
namespace {

void Check(int64_t batch, int64_t heads, int64_t l, int64_t d, DType dt, bool mask) {
  SCOPED_TRACE(::testing::Message() << batch << "x" << heads << " heads, " << l << " keys, head " << d << " "
                                    << DTypeName(dt) << (mask ? " masked" : ""));
  Graph g;
  const Dims qd = {batch, heads, 1, d}, kd = {batch, heads, l, d}, md = {batch, 1, 1, l};
  std::vector<Value*> ins = {g.AddInput("q", Type::Tensor(dt, Shape::Static(qd))),
                             g.AddInput("k", Type::Tensor(dt, Shape::Static(kd))),
                             g.AddInput("v", Type::Tensor(dt, Shape::Static(kd)))};
  std::vector<Tensor> in = {tile_check::Random(dt, qd, 1, -2, 2), tile_check::Random(dt, kd, 2, -2, 2),
                            tile_check::Random(dt, kd, 3)};
  if (mask) {  // item b sees keys up to 40 + 90 b: the rest -inf
    std::vector<float> m(static_cast<size_t>(batch * l));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < l; ++j)
        m[b * l + j] = j <= 40 + 90 * b ? static_cast<float>(j % 5) * -0.25f : -std::numeric_limits<float>::infinity();
    ins.push_back(g.AddInput("mask", Type::Tensor(dt, Shape::Static(md))));
    in.push_back(CastTensor(Tensor::FromVector<float>(m, md), dt));
  }
  Node* n = g.AddNode("Attention", ins, 1, "kiln");
  n->SetAttr("scale", Attribute::Float(0.125f));
  n->output(0)->set_type(Type::Tensor(dt, Shape::Static(qd)));
  g.AddOutput(n->output(0));
  auto l2 = target::cuda::MakeDecodeAttentionLaunch(*n);
  ASSERT_TRUE(l2.ok()) << l2.status();
  const target::cuda::DecodeAttention& a = l2->what;
  std::vector<float> ws(static_cast<size_t>(a.WorkspaceBytes() / 4));
  Tensor got(dt, qd);
  std::vector<void*> partial_args = {ws.data()};
  for (Tensor& t : in) partial_args.push_back(t.raw());
  const target::cuda::CudaVariant partial{l2->partial, 0, {a.chunks, a.items, 1}, l2->threads, (8 + 4 * a.d) * 4};
  const target::cuda::CudaVariant combine{l2->combine, 0, {a.items, 1, 1}, 32, 0};
  absl::Status ran = simt_host::RunOnHost(l2->partial, l2->source, partial, partial_args);
  ASSERT_TRUE(ran.ok()) << ran;
  ran = simt_host::RunOnHost(l2->combine, l2->source, combine, {got.raw(), ws.data()});
  ASSERT_TRUE(ran.ok()) << ran;
  Executor exec;
  auto want = exec.Run(g, in);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(tile_check::Compare((*want)[0], got, dt == DType::kF32 ? 1e-5 : 1e-2, 0.1), "");
  // The host emulation agrees too.
  std::vector<float> hws(ws.size());
  Tensor host(dt, qd);
  target::cuda::DecodeAttentionPartialOnHost(a, in[0].raw(), in[1].raw(), in[2].raw(), mask ? in[3].raw() : nullptr,
                                             hws.data());
  target::cuda::DecodeAttentionCombineOnHost(a, hws.data(), host.raw());
  EXPECT_EQ(tile_check::Compare((*want)[0], host, dt == DType::kF32 ? 1e-5 : 1e-2, 0.1), "");
}

TEST(CudaDecodeAttentionOnHost, MaskedPerItemRaggedChunks) { Check(2, 3, 200, 64, DType::kF32, true); }
TEST(CudaDecodeAttentionOnHost, F16HeadSizes) {
  Check(1, 2, 130, 128, DType::kF16, true);
  Check(1, 4, 64, 32, DType::kF16, false);
}

}  // namespace
}  // namespace kiln
