//===- cuda_decoder_step_test.cc - A decoder's step as a cuda package -------===//
//
// What a generation step needs of the cuda target, emulated on the host
// against the reference executor: attention as one kernel at every
// precision (and split back when asked), the decode attention's two
// kernels reading the cache as it is, the cache donated to its scatter,
// ArgMax and the position's integer arithmetic on the device.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using cuda_test::CountEngine;
using cuda_test::ExpectEmulationMatches;
using cuda_test::Random;
using target::cuda::CudaPackage;
using target::cuda::PackageTask;

// One query row against a cache: the decode kernels (partials, then their
// combination), reading the f32 cache as it is under --precision=fp16, a
// bool mask made additive.
TEST(CudaPackage, DecodeAttentionReadsTheCacheAsItIs) {
  Tensor keep(DType::kBool, {1, 1, 1, 96});
  for (int64_t j = 0; j < 96; ++j) keep.data<bool>()[j] = j < 70;
  for (const target::Precision precision : {target::Precision::kFp32, target::Precision::kFp16}) {
    target::CompileOptions o;
    o.precision = precision;
    CudaPackage p = ExpectEmulationMatches(R"(graph @main(%q: f32[1,2,1,64], %k: f32[1,2,96,64], %v: f32[1,2,96,64], %keep: bool[1,1,1,96]) {
  %y = kiln.Attention(%q, %k, %v, %keep) {k_transposed = 0, scale = 0.125}
  return %y
})",
                                           {Random(DType::kF32, {1, 2, 1, 64}, 1), Random(DType::kF32, {1, 2, 96, 64}, 2),
                                            Random(DType::kF32, {1, 2, 96, 64}, 3), keep},
                                           1e-5, o);
    int decode = 0, casts = 0;
    for (const PackageTask& t : p.tasks) {
      if (t.op == "kiln.Attention" && t.launches.size() == 2) ++decode;
      casts += t.op == "Cast";
    }
    EXPECT_EQ(decode, 1) << p.Explain();
    EXPECT_EQ(casts, 0) << p.Explain();
  }
}

// A step output NAME.next that ScatterElements computes over its input NAME
// (a KV cache) is that input's bytes: one launch writes the updates, none
// copies the cache. Not when the input is read after the scatter.
TEST(CudaPackage, ScatteredCacheIsDonated) {
  Tensor pos(DType::kI64, {});
  pos.data<int64_t>()[0] = 3;
  const std::vector<Tensor> in = {Random(DType::kF32, {1, 2, 8, 4}, 6), pos, Random(DType::kF32, {1, 2, 1, 4}, 7)};
  auto root = [](const CudaPackage& p, int b) {
    while (p.buffers[b].alias_of >= 0) b = p.buffers[b].alias_of;
    return b;
  };
  CudaPackage p = ExpectEmulationMatches(R"(graph @main(%cache: f32[1,2,8,4], %pos: i64[], %kv: f32[1,2,1,4]) {
  %shape = const i64[4] dense [1, 2, 1, 4]
  %at = Expand(%pos, %shape)
  %"cache.next" = ScatterElements(%cache, %at, %kv) {axis = 2}
  return %"cache.next"
})",
                                         in);
  // The launches of the package's one ScatterElements task (-1: none).
  auto scatter_launches = [](const CudaPackage& p) {
    int launches = -1;
    for (const PackageTask& t : p.tasks)
      if (t.op == "ScatterElements") launches = static_cast<int>(t.launches.size());
    return launches;
  };
  int out_value = -1, in_value = -1;
  for (size_t i = 0; i < p.values.size(); ++i) {
    if (p.values[i].name == "cache.next") out_value = static_cast<int>(i);
    if (p.values[i].name == "cache") in_value = static_cast<int>(i);
  }
  EXPECT_EQ(scatter_launches(p), 1) << p.Explain();
  ASSERT_GE(out_value, 0);
  ASSERT_GE(in_value, 0);
  EXPECT_EQ(root(p, p.values[out_value].buffer), root(p, p.values[in_value].buffer)) << p.Explain();
  CudaPackage kept = ExpectEmulationMatches(R"(graph @main(%cache: f32[1,2,8,4], %pos: i64[], %kv: f32[1,2,1,4]) {
  %shape = const i64[4] dense [1, 2, 1, 4]
  %at = Expand(%pos, %shape)
  %"cache.next" = ScatterElements(%cache, %at, %kv) {axis = 2}
  %old = Neg(%cache)
  return %"cache.next", %old
})",
                                            in);
  EXPECT_EQ(scatter_launches(kept), 2) << kept.Explain();
}

// ArgMax and ArgMin run on the device (a generation step's token: the
// logits stay there), emulated against the reference.
TEST(CudaPackage, ArgMaxAndArgMinOnTheDevice) {
  CudaPackage p = ExpectEmulationMatches(R"(graph @main(%x: f32[2,3,700]) {
  %a = ArgMax(%x) {axis = -1, keepdims = 0}
  %b = ArgMin(%x) {axis = 1, select_last_index = 1}
  return %a, %b
})",
                                         {Random(DType::kF32, {2, 3, 700}, 9)});
  EXPECT_EQ(CountEngine(p, "host"), 0) << p.Explain();
  EXPECT_EQ(CountEngine(p, "simt"), 2) << p.Explain();
}

// A generation step's integer and bool arithmetic (the position plus one,
// compared with the cache's indices, the mask's Not) runs on the device.
TEST(CudaPackage, IntegerAndBoolOpsOnTheDevice) {
  Tensor pos(DType::kI64, {});
  pos.data<int64_t>()[0] = 5;
  CudaPackage p = ExpectEmulationMatches(R"(graph @main(%pos: i64[], %idx: i64[1,8]) {
  %one = const i64[] dense [1]
  %next = Add(%pos, %one)
  %past = Greater(%idx, %pos)
  %keep = Not(%past)
  return %next, %keep
})",
                                         {pos, Tensor::FromVector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}, {1, 8})});
  EXPECT_EQ(CountEngine(p, "host"), 0) << p.Explain();
}

// An attention split back into ONNX ops reads K^T through one Transpose:
// the split-back's transpose of K composes with the head split's.
TEST(CudaPackage, SplitBackAttentionComposesTheTransposesOfK) {
  CudaPackage p = ExpectEmulationMatches(R"(graph @main(%q: f32[1,8,2,16], %k: f32[1,8,2,16], %v: f32[1,8,2,16]) {
  %qh = Transpose(%q) {perm = [0, 2, 1, 3]}
  %kh = Transpose(%k) {perm = [0, 2, 1, 3]}
  %vh = Transpose(%v) {perm = [0, 2, 1, 3]}
  %y = kiln.Attention(%qh, %kh, %vh) {k_transposed = 0, scale = 0.25}
  return %y
})",
                                         {Random(DType::kF32, {1, 8, 2, 16}, 1), Random(DType::kF32, {1, 8, 2, 16}, 2),
                                          Random(DType::kF32, {1, 8, 2, 16}, 3)},
                                         1e-5);
  int transposes = 0;
  for (const PackageTask& t : p.tasks) transposes += t.op == "Transpose";
  EXPECT_EQ(transposes, 3) << p.Explain();
}

// kiln.Attention runs as one TensorCore kernel: an f32 attention (causal,
// heads from Transposes; or with a bool mask) kept whole through
// --precision=fp16 and bf16 and narrowed, or at fp32 on tf32, emulated
// against the reference; with --fused-attention=false it is split back.
TEST(CudaPackage, AttentionIsOneKernel) {
  const std::string kir = R"(graph @main(%q: f32[1,64,2,32], %k: f32[1,64,2,32], %v: f32[1,64,2,32]) {
  %qh = Transpose(%q) {perm = [0, 2, 1, 3]}
  %kh = Transpose(%k) {perm = [0, 2, 1, 3]}
  %vh = Transpose(%v) {perm = [0, 2, 1, 3]}
  %y = kiln.Attention(%qh, %kh, %vh) {causal = 1, k_transposed = 0, scale = 0.17677669}
  return %y
})";
  const std::vector<Tensor> in = {Random(DType::kF32, {1, 64, 2, 32}, 1), Random(DType::kF32, {1, 64, 2, 32}, 2),
                                  Random(DType::kF32, {1, 64, 2, 32}, 3)};
  auto attention_tasks = [](const CudaPackage& p) {
    int n = 0;
    for (const PackageTask& t : p.tasks) n += t.op == "kiln.Attention" && t.engine == "tensorcore";
    return n;
  };
  for (const target::Precision precision : {target::Precision::kFp16, target::Precision::kBf16}) {
    target::CompileOptions o;
    o.precision = precision;
    CudaPackage p = ExpectEmulationMatches(kir, in, precision == target::Precision::kBf16 ? 3e-2 : 1e-2, o);
    EXPECT_EQ(attention_tasks(p), 1) << p.Explain();
    EXPECT_NE(p.Explain().find("cuda attention 64x64 tiles, head 32"), std::string::npos) << p.Explain();
  }
  // A decoder's bool mask over a static cache (true: the key takes part) is made additive first.
  Tensor keep(DType::kBool, {32, 64});
  for (int64_t i = 0; i < keep.numel(); ++i) keep.data<bool>()[i] = (i % 64) <= 20 + i / 64;
  target::CompileOptions fp16;
  fp16.precision = target::Precision::kFp16;
  CudaPackage masked = ExpectEmulationMatches(R"(graph @main(%q: f32[1,2,32,16], %k: f32[1,2,64,16], %v: f32[1,2,64,16], %keep: bool[32,64]) {
  %y = kiln.Attention(%q, %k, %v, %keep) {k_transposed = 0, scale = 0.25}
  return %y
})",
                                              {Random(DType::kF32, {1, 2, 32, 16}, 1), Random(DType::kF32, {1, 2, 64, 16}, 2),
                                               Random(DType::kF32, {1, 2, 64, 16}, 3), keep},
                                              1e-2, fp16);
  EXPECT_EQ(attention_tasks(masked), 1) << masked.Explain();
  // At fp32 too, on tf32 (as the f32 GEMMs).
  CudaPackage f32 = ExpectEmulationMatches(kir, in, 1e-5);
  EXPECT_EQ(attention_tasks(f32), 1) << f32.Explain();
  EXPECT_NE(f32.Explain().find("mma.sync m16n8k8 (tf32)"), std::string::npos) << f32.Explain();
  target::CompileOptions split;
  split.precision = target::Precision::kFp16;
  split.settings = {{"fused-attention", "false"}};
  EXPECT_EQ(attention_tasks(ExpectEmulationMatches(kir, in, 1e-2, split)), 0);
  // --fp32-products=3xtf32: an f32 attention the kernel would compute on
  // tf32 is split back into 3xTF32 GEMMs; at fp16 it stays one kernel.
  target::CompileOptions ieee;
  ieee.settings = {{"fp32-products", "3xtf32"}};
  CudaPackage exact = ExpectEmulationMatches(kir, in, 1e-5, ieee);
  EXPECT_EQ(attention_tasks(exact), 0) << exact.Explain();
  EXPECT_NE(exact.Explain().find("(3xTF32)"), std::string::npos) << exact.Explain();
  EXPECT_EQ(exact.Explain().find("wgmma m64"), std::string::npos) << exact.Explain();
  ieee.precision = target::Precision::kFp16;
  EXPECT_EQ(attention_tasks(ExpectEmulationMatches(kir, in, 1e-2, ieee)), 1);
  ieee.settings = {{"fp32-products", "fast"}};
  auto m = cuda_test::ParseKir(kir);
  ASSERT_TRUE(m.ok());
  auto refused = cuda_test::Package(*m, ieee);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--fp32-products must be tf32 or 3xtf32"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace kiln
