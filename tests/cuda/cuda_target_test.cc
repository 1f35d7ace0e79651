//===- cuda_target_test.cc - The cuda target: description, placement, packages ===//
//
// Without a GPU: the GPU description and its figures, placement, --arch,
// the strided-copy kernels (their pieces interpreted on the host against
// the reference executor), host fallback with the copies around it,
// package contents and determinism, the memory plan, the errors, and the
// runtime's answer when no CUDA device is present.
//
//===----------------------------------------------------------------------===//
#include <dlfcn.h>

#include <random>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "graph/exec/executor.h"
#include "target/cuda/cuda_copy_kernel.h"
#include "target/cuda/cuda_target.h"
#include "target/precision.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using cuda_test::CudaTarget;
using cuda_test::Emulate;
using cuda_test::Package;
using cuda_test::ParseKir;
using target::cuda::CudaPackage;
using target::cuda::PackageTask;

Tensor Random(DType dt, std::vector<int64_t> dims, uint32_t seed) {
  Tensor t(dt, dims);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (dt) {
      case DType::kF32: t.data<float>()[i] = std::uniform_real_distribution<float>(-1, 1)(rng); break;
      case DType::kI64: t.data<int64_t>()[i] = static_cast<int64_t>(rng() % 100); break;
      case DType::kI32: t.data<int32_t>()[i] = static_cast<int32_t>(rng() % 100); break;
      default: std::memset(t.raw(), static_cast<int>(seed), t.nbytes());
    }
  }
  return t;
}

// Compiles `kir` for cuda, emulates the package on the host (the tile
// kernels through the interpreter), and compares its outputs with the
// reference executor: bit for bit, or within `rtol` when given.
CudaPackage ExpectEmulationMatches(const std::string& kir, const std::vector<Tensor>& inputs, double rtol = 0,
                                   target::CompileOptions options = {}) {
  auto m = ParseKir(kir);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return {};
  auto p = Package(*m, options);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  auto got = Emulate(*p, inputs);
  EXPECT_TRUE(got.ok()) << got.status();
  Executor exec;
  auto want = exec.Run(*m->graph, inputs);
  EXPECT_TRUE(want.ok()) << want.status();
  if (!got.ok() || !want.ok()) return *p;
  EXPECT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size() && i < want->size(); ++i) {
    EXPECT_EQ((*got)[i].dims(), (*want)[i].dims()) << "output " << i;
    if (rtol > 0) {
      EXPECT_TRUE(cuda_test::Near((*got)[i], (*want)[i], rtol)) << "output " << i << "\n" << p->Explain();
    } else {
      EXPECT_TRUE((*got)[i].Equals((*want)[i])) << "output " << i << "\n" << p->Explain();
    }
  }
  return *p;
}

int CountEngine(const CudaPackage& p, const std::string& engine) {
  int n = 0;
  for (const PackageTask& t : p.tasks) n += t.engine == engine;
  return n;
}

TEST(CudaDescription, H100Figures) {
  auto t = CudaTarget();
  const target::TargetDescription& d = t->description();
  EXPECT_EQ(d.name, "cuda");
  EXPECT_EQ(d.compute_units, 132);
  EXPECT_DOUBLE_EQ(d.clock_ghz, 1.98);
  EXPECT_DOUBLE_EQ(d.global_bytes_per_second, 3.35e12);
  EXPECT_DOUBLE_EQ(d.host_link_bytes_per_second, 64e9);
  EXPECT_EQ(d.pipeline, "default,form-fusion-groups");
  std::map<std::string, int64_t> scope_bytes;
  int64_t registers = 0;
  for (const auto& m : d.memory) {
    if (!m.scope.empty()) scope_bytes[m.scope] = m.bytes;
    if (m.scope == "operand_a" || m.scope == "operand_b" || m.scope == "accumulator" || m.scope == "vector")
      registers += m.bytes;
  }
  for (const char* s : {"global", "stage", "operand_a", "operand_b", "accumulator", "vector"})
    EXPECT_TRUE(scope_bytes.count(s)) << s;
  EXPECT_EQ(scope_bytes["stage"], 227 * 1024);
  EXPECT_EQ(registers, 256 * 1024);  // the register file, shared among the register scopes
  // The MMA shapes of mma.sync and the published dense peaks at 1.98 GHz.
  std::map<DType, double> tflops;
  for (const auto& m : d.mma) {
    EXPECT_EQ(m.m, 16);
    EXPECT_EQ(m.n, 8);
    tflops[m.input] = 2 * m.macs_per_cycle * d.compute_units * d.clock_ghz / 1e3;
    EXPECT_EQ(m.k, m.input == DType::kF32 ? 8 : m.input == DType::kI8 ? 32 : 16);
  }
  EXPECT_NEAR(tflops[DType::kF16], 989.4, 0.1);
  EXPECT_NEAR(tflops[DType::kBF16], 989.4, 0.1);
  EXPECT_NEAR(tflops[DType::kF32], 494.7, 0.1);
  EXPECT_NEAR(tflops[DType::kI8], 1979, 0.5);
  std::set<std::string> engines;
  for (const auto& e : d.engines) engines.insert(e.name);
  EXPECT_EQ(engines, (std::set<std::string>{"tensorcore", "simt", "host"}));
}

TEST(CudaPlacement, EnginesAndReasons) {
  auto m = ParseKir(R"(graph @main(%x: f32[4,8], %w: f32[8,16], %i: i64[3], %img: f32[1,3,8,8], %k: f32[4,3,3,3], %dk: f32[3,1,3,3], %vol: f32[1,3,4,8,8], %vk: f32[4,3,3,3,3]) {
  %idx = const i64[2] dense [0, 2]
  %mm = MatMul(%x, %w)
  %r = Relu(%mm)
  %t = Transpose(%r) {perm = [1, 0]}
  %shape = const i64[1] dense [64]
  %v = Reshape(%t, %shape)
  %g = Gather(%x, %idx)
  %gd = Gather(%x, %i)
  %c = Conv(%img, %k)
  %dw = Conv(%img, %dk) {group = 3}
  %c3 = Conv(%vol, %vk)
  %mp = MaxPool(%img) {kernel_shape = [2, 2]}
  %kk = const i64[1] dense [2]
  %tk, %ti = TopK(%x, %kk)
  %sm = Softmax(%x) {axis = -1}
  return %v, %g, %gd, %c, %dw, %c3, %mp, %tk, %sm
})");
  ASSERT_TRUE(m.ok()) << m.status();
  auto t = CudaTarget();
  std::map<std::string, target::Placement> by_op;
  for (const Node* n : m->graph->nodes()) by_op[n->op() == "Conv" ? n->output(0)->name() : n->op()] = t->Place(*n, {});
  EXPECT_EQ(by_op["MatMul"].engine, "tensorcore");
  EXPECT_EQ(by_op["Relu"].engine, "simt");
  EXPECT_EQ(by_op["Softmax"].engine, "simt");
  EXPECT_EQ(by_op["Transpose"].engine, "simt");
  EXPECT_TRUE(absl::StrContains(by_op["Transpose"].reason, "strided-copy")) << by_op["Transpose"].reason;
  EXPECT_EQ(by_op["Reshape"].engine, "simt");
  EXPECT_EQ(by_op["TopK"].engine, "host");
  EXPECT_FALSE(by_op["TopK"].reason.empty());
  // Convolutions: an implicit GEMM, a depthwise window kernel, a 3-D one on the host.
  EXPECT_EQ(by_op["c"].engine, "tensorcore");
  EXPECT_EQ(by_op["dw"].engine, "simt");
  EXPECT_TRUE(absl::StrContains(by_op["dw"].reason, "depthwise")) << by_op["dw"].reason;
  EXPECT_EQ(by_op["c3"].engine, "host");
  EXPECT_TRUE(absl::StrContains(by_op["c3"].reason, "1-D and 2-D")) << by_op["c3"].reason;
  EXPECT_EQ(by_op["MaxPool"].engine, "simt");
  // Gather: a copy through a table of constant indices, or of indices read on the device.
  for (const Node* n : m->graph->nodes()) {
    if (n->op() != "Gather") continue;
    target::Placement p = t->Place(*n, {});
    EXPECT_EQ(p.engine, "simt");
    EXPECT_TRUE(absl::StrContains(p.reason, n->input(1)->is_constant() ? "strided-copy" : "indices on the device"))
        << p.reason;
  }
}

TEST(CudaPlacement, ControlFlowAndDynamicShapesGoToTheHost) {
  auto m = ParseKir(R"(graph @main(%c: bool[], %x: f32[2,3]) {
  %nz = NonZero(%x)
  %y = If(%c) {else_branch = graph @e() {
    %b = Neg(%x)
    return %b
  }, then_branch = graph @t() {
    %a = Relu(%x)
    return %a
  }}
  return %nz, %y
})");
  ASSERT_TRUE(m.ok()) << m.status();
  auto t = CudaTarget();
  for (const Node* n : m->graph->nodes()) {
    target::Placement p = t->Place(*n, {});
    EXPECT_EQ(p.engine, "host") << n->op();
  }
  // NonZero's output has no static shape: the package cannot plan it.
  auto p = Package(*m);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::StrContains(p.status().message(), "static shapes")) << p.status();
}

TEST(CudaArch, Settings) {
  auto opts = [](std::string arch) {
    target::CompileOptions o;
    if (!arch.empty()) o.settings.push_back({"arch", arch});
    return target::cuda::CudaBuildOptionsFrom(o);
  };
  auto both = opts("");
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->arch.min_sm, 80);
  EXPECT_TRUE(both->arch.hopper);
  std::string cmd = target::cuda::NvccCommand(*both, "nvcc");
  EXPECT_TRUE(absl::StrContains(cmd, "-gencode arch=compute_80,code=sm_80")) << cmd;
  EXPECT_TRUE(absl::StrContains(cmd, "-gencode arch=compute_90a,code=sm_90a")) << cmd;
  EXPECT_TRUE(absl::StrContains(cmd, "-O3 -std=c++17")) << cmd;
  EXPECT_TRUE(absl::StrContains(cmd, "-shared -Xcompiler -fPIC -o libkiln_model.so")) << cmd;
  auto a80 = opts("sm_80");
  ASSERT_TRUE(a80.ok());
  EXPECT_FALSE(a80->arch.hopper);
  EXPECT_FALSE(absl::StrContains(target::cuda::NvccCommand(*a80, "nvcc"), "sm_90a"));
  auto a90 = opts("sm_90a");
  ASSERT_TRUE(a90.ok());
  EXPECT_EQ(a90->arch.min_sm, 90);
  EXPECT_TRUE(a90->arch.hopper);
  EXPECT_FALSE(absl::StrContains(target::cuda::NvccCommand(*a90, "nvcc"), "sm_80"));
  auto bad = opts("sm_75");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "--arch")) << bad.status();
}

TEST(CudaCopyKernel, PiecesSimplifyAndNameByContent) {
  target::CopyPiece p;
  p.dims = {2, 1, 3, 4};
  p.src_strides = {12, 12, 4, 1};
  p.dst_strides = {12, 12, 4, 1};
  target::SimplifyPiece(p);
  EXPECT_EQ(p.dims, (std::vector<int64_t>{24}));  // contiguous on both sides: one dimension
  target::CopyPiece t;
  t.dims = {3, 2};
  t.src_strides = {1, 3};
  t.dst_strides = {2, 1};
  auto a = target::cuda::MakeCopyLaunch(t, 4, "Transpose");
  auto b = target::cuda::MakeCopyLaunch(t, 4, "another op");
  auto c = target::cuda::MakeCopyLaunch(t, 2, "Transpose");
  EXPECT_EQ(a.function, b.function);  // the same piece: the same kernel
  EXPECT_NE(a.function, c.function);  // another element width: another kernel
  EXPECT_TRUE(absl::StartsWith(a.function, "kiln_copy_"));
  EXPECT_TRUE(absl::StrContains(a.source, "extern \"C\" __global__ void __launch_bounds__(256) " + a.function));
  EXPECT_TRUE(absl::StrContains(a.source, "unsigned int* __restrict__ dst")) << a.source;
  EXPECT_EQ(a.elements, 6);
  EXPECT_EQ(a.blocks, 1);
  EXPECT_EQ(a.threads, 256);
  // Large copies: a grid-stride loop over at most 132 x 16 blocks, 64-bit indices past 2^31.
  target::CopyPiece big;
  big.dims = {int64_t{3} << 30};
  big.src_strides = big.dst_strides = {1};
  auto l = target::cuda::MakeCopyLaunch(big, 1, "");
  EXPECT_EQ(l.blocks, 132 * 16);
  EXPECT_TRUE(absl::StrContains(l.source, "long long i")) << l.source;
}

TEST(CudaCopyKernel, DataMovementMatchesTheReference) {
  const Tensor x = Random(DType::kF32, {2, 3, 4}, 1);
  struct Case {
    const char* name;
    const char* body;
  };
  const Case cases[] = {
      {"transpose", "%y = Transpose(%x) {perm = [2, 0, 1]}"},
      {"transpose_default", "%y = Transpose(%x)"},
      {"slice", R"(%s = const i64[2] dense [1, 1]
  %e = const i64[2] dense [3, 4]
  %a = const i64[2] dense [1, 2]
  %y = Slice(%x, %s, %e, %a))"},
      {"slice_negative_step", R"(%s = const i64[1] dense [-1]
  %e = const i64[1] dense [-100]
  %a = const i64[1] dense [2]
  %st = const i64[1] dense [-2]
  %y = Slice(%x, %s, %e, %a, %st))"},
      {"concat", "%y = Concat(%x, %x, %x) {axis = 1}"},
      {"split", R"(%sp = const i64[2] dense [1, 3]
  %y, %z = Split(%x, %sp) {axis = 2})"},
      {"expand", R"(%sh = const i64[4] dense [2, 2, 3, 4]
  %y = Expand(%x, %sh))"},
      {"tile", R"(%r = const i64[3] dense [2, 1, 3]
  %y = Tile(%x, %r))"},
      {"gather", R"(%i = const i64[2,2] dense [2, -1, 0, 1]
  %y = Gather(%x, %i) {axis = 2})"},
      {"identity", "%y = Identity(%x)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string outs = absl::StrContains(c.body, "%y, %z") ? "%y, %z" : "%y";
    CudaPackage p = ExpectEmulationMatches(
        absl::StrCat("graph @main(%x: f32[2,3,4]) {\n  ", c.body, "\n  return ", outs, "\n}"), {x});
    EXPECT_EQ(CountEngine(p, "host"), 0) << p.Explain();
    // Identity is a view on every target (kViewOps): nothing moves.
    if (c.name == std::string("identity")) EXPECT_EQ(CountEngine(p, "view"), 1) << p.Explain();
    else EXPECT_GE(CountEngine(p, "simt"), 1) << p.Explain();
  }
}

TEST(CudaCopyKernel, GatherWithIndicesOnTheDevice) {
  for (const char* idt : {"i64", "i32"}) {
    SCOPED_TRACE(idt);
    Tensor idx(std::string(idt) == "i64" ? DType::kI64 : DType::kI32, {2, 3});
    const int64_t values[] = {0, 4, -1, 2, -5, 3};
    for (int i = 0; i < 6; ++i) {
      if (idx.dtype() == DType::kI64) idx.data<int64_t>()[i] = values[i];
      else idx.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    }
    for (int axis : {0, 1}) {
      CudaPackage p = ExpectEmulationMatches(
          absl::StrCat("graph @main(%table: f32[5,5], %ids: ", idt, "[2,3]) {\n  %y = Gather(%table, %ids) {axis = ",
                       axis, "}\n  return %y\n}"),
          {Random(DType::kF32, {5, 5}, 4), idx});
      EXPECT_EQ(CountEngine(p, "host"), 0) << p.Explain();
      ASSERT_EQ(p.kernels.size(), 1u);
      EXPECT_TRUE(absl::StrContains(p.kernels[0].source, "* __restrict__ index")) << p.kernels[0].source;
    }
  }
}

// ScatterElements on the device: the data copied whole, then the updates
// written at their indices (negative ones counted from the end), along
// either axis, i32 and i64 indices; a KV cache's update at a position (the
// indices an Expand of it) too.
TEST(CudaCopyKernel, ScatterElementsOnTheDevice) {
  for (const char* idt : {"i64", "i32"}) {
    for (int axis : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << idt << " axis " << axis);
      Tensor idx(std::string(idt) == "i64" ? DType::kI64 : DType::kI32, {2, 3});
      const int64_t values[] = {0, 4, -1, 2, -5, 3};
      for (int i = 0; i < 6; ++i) {
        const int64_t v = axis == 0 ? values[i] % 3 : values[i];
        if (idx.dtype() == DType::kI64) idx.data<int64_t>()[i] = v;
        else idx.data<int32_t>()[i] = static_cast<int32_t>(v);
      }
      CudaPackage p = ExpectEmulationMatches(
          absl::StrCat("graph @main(%x: f32[3,5], %ids: ", idt,
                       "[2,3], %u: f32[2,3]) {\n  %y = ScatterElements(%x, %ids, %u) {axis = ", axis,
                       "}\n  return %y\n}"),
          {Random(DType::kF32, {3, 5}, 4), idx, Random(DType::kF32, {2, 3}, 5)});
      EXPECT_EQ(CountEngine(p, "host"), 0) << p.Explain();
      EXPECT_EQ(p.kernels.size(), 2u) << p.Explain();
    }
  }
  Tensor pos(DType::kI64, {});
  pos.data<int64_t>()[0] = 5;
  CudaPackage cache = ExpectEmulationMatches(R"(graph @main(%cache: f32[1,2,8,4], %pos: i64[], %kv: f32[1,2,1,4]) {
  %shape = const i64[4] dense [1, 2, 1, 4]
  %at = Expand(%pos, %shape)
  %next = ScatterElements(%cache, %at, %kv) {axis = 2}
  return %next
})",
                                             {Random(DType::kF32, {1, 2, 8, 4}, 6), pos,
                                              Random(DType::kF32, {1, 2, 1, 4}, 7)});
  EXPECT_EQ(CountEngine(cache, "host"), 0) << cache.Explain();
}

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
  int scatter_launches = -1, out_value = -1, in_value = -1;
  for (const PackageTask& t : p.tasks)
    if (t.op == "ScatterElements") scatter_launches = static_cast<int>(t.launches.size());
  for (size_t i = 0; i < p.values.size(); ++i) {
    if (p.values[i].name == "cache.next") out_value = static_cast<int>(i);
    if (p.values[i].name == "cache") in_value = static_cast<int>(i);
  }
  EXPECT_EQ(scatter_launches, 1) << p.Explain();
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
  for (const PackageTask& t : kept.tasks) {
    if (t.op == "ScatterElements") {
      EXPECT_EQ(t.launches.size(), 2u) << kept.Explain();
    }
  }
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

TEST(CudaPackage, HostFallbackWithCopiesAndViews) {
  // TopK and CumSum have no GPU kernel: host tasks between copies and views.
  const std::string kir = R"(graph @main(%x: f32[4,6], %ax: i64[]) {
  %t = Transpose(%x) {perm = [1, 0]}
  %c = CumSum(%t, %ax)
  %sh = const i64[2] dense [4, 6]
  %v = Reshape(%c, %sh)
  %k = const i64[1] dense [3]
  %vals, %idx = TopK(%v, %k) {axis = 1}
  %o = Concat(%vals, %vals) {axis = 0}
  return %o, %idx, %v
})";
  Tensor axis(DType::kI64, {});
  axis.data<int64_t>()[0] = 0;
  CudaPackage p = ExpectEmulationMatches(kir, {Random(DType::kF32, {4, 6}, 3), axis});
  EXPECT_EQ(p.num_host_tasks(), 2);
  EXPECT_FALSE(p.host_graph_kir.empty());
  int views = 0;
  for (const PackageTask& t : p.tasks) views += t.kind == PackageTask::Kind::kView;
  EXPECT_EQ(views, 1);
  std::string explain = p.Explain();
  EXPECT_TRUE(absl::StrContains(explain, "CumSum  ->  host:")) << explain;
  EXPECT_TRUE(absl::StrContains(explain, "TopK  ->  host:")) << explain;
  EXPECT_TRUE(absl::StrContains(explain, "copy device -> host: t (f32[6,4])")) << explain;
  EXPECT_TRUE(absl::StrContains(explain, "copy host -> device: c (f32[6,4])")) << explain;
  EXPECT_TRUE(absl::StrContains(explain, "host tasks: 2")) << explain;
}

TEST(CudaPackage, KernelsReadTheirOwnOperands) {
  // %r is also a loop variable's name: its kernel argument is renamed, and
  // the launch must still bind it to %r's buffer, not %x's.
  CudaPackage p = ExpectEmulationMatches(R"(graph @main(%x: f32[64,512], %r: f32[64,512]) {
  %z = Add(%x, %r)
  return %z
})",
                                         {Random(DType::kF32, {64, 512}, 1), Random(DType::kF32, {64, 512}, 2)});
  ASSERT_EQ(p.tasks.size(), 1u);
  const std::vector<int>& args = p.tasks[0].launches.at(0).args;
  EXPECT_EQ(std::set<int>(args.begin(), args.end()).size(), 3u);
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
}

// A piece that reads what another wrote whole composes into one: the
// head split [2,3,8] -> [2,3,2,4] -> [2,2,3,4] of the middle third of a
// [2,3,24] projection reads the projection directly.
TEST(CudaCopyKernel, PiecesInARowCompose) {
  target::CopyPiece split;  // the second of three [2,3,8] parts of x [2,3,24]
  split.src = 0;
  split.dst = 1;
  split.src_base = 8;
  split.dims = {2, 3, 8};
  split.src_strides = {72, 24, 1};
  split.dst_strides = {24, 8, 1};
  target::CopyPiece heads;  // Transpose [2,3,2,4] perm [0,2,1,3]
  heads.dims = {2, 2, 3, 4};
  heads.src_strides = {24, 4, 8, 1};
  heads.dst_strides = {24, 12, 4, 1};
  std::optional<target::CopyPiece> c = target::ComposePieces(heads, split);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->src, 0);
  EXPECT_EQ(c->src_base, 8);
  EXPECT_EQ(c->src_strides, (std::vector<int64_t>{72, 4, 24, 1}));
  EXPECT_EQ(c->dst_strides, heads.dst_strides);
  // A reader that starts inside the box: a Slice of rows 1..2 of the part.
  target::CopyPiece rows;
  rows.dims = {2, 2, 8};
  rows.src_base = 8;
  rows.src_strides = {24, 8, 1};
  rows.dst_strides = {16, 8, 1};
  c = target::ComposePieces(rows, split);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->src_base, 8 + 24);
  EXPECT_EQ(c->src_strides, (std::vector<int64_t>{72, 24, 1}));
  // A reader that walks backwards (Slice with step -1 along the last axis).
  target::CopyPiece reversed;
  reversed.dims = {2, 3, 8};
  reversed.src_base = 7;
  reversed.src_strides = {24, 8, -1};
  reversed.dst_strides = {24, 8, 1};
  c = target::ComposePieces(reversed, split);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->src_base, 8 + 7);
  EXPECT_EQ(c->src_strides, (std::vector<int64_t>{72, 24, -1}));
  reversed.src_base = 6;  // would step before the start of its row
  EXPECT_FALSE(target::ComposePieces(reversed, split).has_value());
  // Steps that carry from one dimension of the box into the next do not.
  target::CopyPiece carry;
  carry.dims = {4};
  carry.src_base = 4;
  carry.src_strides = {4};
  carry.dst_strides = {1};
  EXPECT_FALSE(target::ComposePieces(carry, split).has_value());  // 4, 8, 12, 16 cross rows of 8
  // Nor do tables, or a writer that leaves gaps.
  target::CopyPiece table = heads;
  table.table_dim = 0;
  table.table = {0, 24};
  EXPECT_FALSE(target::ComposePieces(table, split).has_value());
  target::CopyPiece gaps = split;
  gaps.dst_strides = {48, 8, 1};
  EXPECT_FALSE(target::ComposePieces(heads, gaps).has_value());
}

// An attention's qkv Split and the head Transposes after it: each head
// tensor is one copy from the projection, the Split writes nothing. A part
// something else also reads is still written.
TEST(CudaPackage, CopiesInARowComposeIntoOne) {
  CudaPackage p = ExpectEmulationMatches(R"(graph @main(%x: f32[2,3,24]) {
  %q, %k, %v = Split(%x) {axis = 2, num_outputs = 3}
  %s = const i64[4] dense [2, 3, 2, 4]
  %q4 = Reshape(%q, %s)
  %k4 = Reshape(%k, %s)
  %v4 = Reshape(%v, %s)
  %qh = Transpose(%q4) {perm = [0, 2, 1, 3]}
  %kt = Transpose(%k4) {perm = [0, 2, 3, 1]}
  %vh = Transpose(%v4) {perm = [0, 2, 1, 3]}
  %lo = const i64[1] dense [1]
  %hi = const i64[1] dense [3]
  %ax = const i64[1] dense [2]
  %vs = Slice(%vh, %lo, %hi, %ax)
  %y = Relu(%qh)
  %z = Relu(%kt)
  %w = Relu(%vs)
  return %y, %z, %w
})",
                                         {Random(DType::kF32, {2, 3, 24}, 4)});
  int copies = 0;
  for (const PackageTask& t : p.tasks)
    if (t.engine == "simt" && t.op != "Relu") copies += static_cast<int>(t.launches.size());
  EXPECT_EQ(copies, 3) << p.Explain();  // Q, K^T and V's rows 1..2, each from %x
  for (const PackageTask& t : p.tasks) {
    if (t.op == "Split") {
      EXPECT_EQ(t.engine, "view") << p.Explain();
    }
  }

  CudaPackage q = ExpectEmulationMatches(R"(graph @main(%x: f32[2,3,24]) {
  %q, %k, %v = Split(%x) {axis = 2, num_outputs = 3}
  %qt = Transpose(%q) {perm = [0, 2, 1]}
  %y = Relu(%qt)
  %z = Relu(%k)
  %w = Relu(%v)
  %u = Neg(%q)
  return %y, %z, %w, %u
})",
                                         {Random(DType::kF32, {2, 3, 24}, 5)});
  for (const PackageTask& t : q.tasks) {
    if (t.op == "Split") {
      EXPECT_EQ(t.launches.size(), 3u) << q.Explain();
    }
  }

  // A chain of three (Transpose, Slice, Transpose) is one copy.
  CudaPackage chain = ExpectEmulationMatches(R"(graph @main(%x: f32[4,6,5]) {
  %a = Transpose(%x) {perm = [2, 0, 1]}
  %lo = const i64[2] dense [1, 4]
  %hi = const i64[2] dense [3, 0]
  %ax = const i64[2] dense [1, 2]
  %st = const i64[2] dense [1, -2]
  %b = Slice(%a, %lo, %hi, %ax, %st)
  %c = Transpose(%b) {perm = [1, 2, 0]}
  %y = Relu(%c)
  return %y
})",
                                             {Random(DType::kF32, {4, 6, 5}, 7)});
  int chain_copies = 0;
  for (const PackageTask& t : chain.tasks)
    if (t.op != "Relu") chain_copies += static_cast<int>(t.launches.size());
  EXPECT_EQ(chain_copies, 1) << chain.Explain();

  // Indices a Gather reads at run time are not a copy's source: the
  // Transpose that makes them still writes them.
  Tensor ids(DType::kI64, {3, 2});
  const int64_t values[] = {0, 4, 2, 1, 3, 3};
  for (int i = 0; i < 6; ++i) ids.data<int64_t>()[i] = values[i];
  CudaPackage r = ExpectEmulationMatches(R"(graph @main(%table: f32[5,4], %ids: i64[3,2]) {
  %it = Transpose(%ids) {perm = [1, 0]}
  %y = Gather(%table, %it) {axis = 0}
  return %y
})",
                                         {Random(DType::kF32, {5, 4}, 6), ids});
  for (const PackageTask& t : r.tasks) {
    if (t.op == "Transpose") {
      EXPECT_EQ(t.launches.size(), 1u) << r.Explain();
    }
  }
}

// A small CNN: every node on the GPU (convolutions as implicit GEMMs with
// fused epilogues, a depthwise convolution and the pools as window
// kernels, a residual add, GlobalAveragePool, Gemm, Softmax), emulated
// through the tile IR interpreter against the reference executor.
TEST(CudaPackage, ConvolutionsAndPoolsMatchTheReference) {
  const std::string kir = R"(graph @main(%x: f32[2,3,17,17], %w1: f32[8,3,3,3], %b1: f32[8], %wd: f32[8,1,3,3], %wp: f32[8,8,1,1], %wg: f32[16,4,3,3], %wf: f32[10,16], %bf: f32[10]) {
  %c1 = Conv(%x, %w1, %b1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]}
  %r1 = Relu(%c1)
  %mp = MaxPool(%r1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1]}
  %dw = Conv(%mp, %wd) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], group = 8}
  %lo = const f32[] dense [0]
  %hi = const f32[] dense [6]
  %r6 = Clip(%dw, %lo, %hi)
  %pw = Conv(%r6, %wp) {kernel_shape = [1, 1]}
  %res = Add(%pw, %mp)
  %gc = Conv(%res, %wg) {kernel_shape = [3, 3], group = 2, dilations = [2, 2], pads = [2, 2, 2, 2]}
  %ap = AveragePool(%gc) {kernel_shape = [2, 2], strides = [2, 2]}
  %gap = GlobalAveragePool(%ap)
  %fl = Flatten(%gap) {axis = 1}
  %fc = Gemm(%fl, %wf, %bf) {transB = 1}
  %sm = Softmax(%fc) {axis = -1}
  return %sm, %gc
})";
  const std::vector<Tensor> in = {Random(DType::kF32, {2, 3, 17, 17}, 5), Random(DType::kF32, {8, 3, 3, 3}, 11),
                                  Random(DType::kF32, {8}, 12),           Random(DType::kF32, {8, 1, 3, 3}, 13),
                                  Random(DType::kF32, {8, 8, 1, 1}, 14),  Random(DType::kF32, {16, 4, 3, 3}, 15),
                                  Random(DType::kF32, {10, 16}, 16),      Random(DType::kF32, {10}, 17)};
  CudaPackage p = ExpectEmulationMatches(kir, in, 1e-4);
  EXPECT_EQ(p.num_host_tasks(), 0) << p.Explain();
  EXPECT_GE(CountEngine(p, "tensorcore"), 4) << p.Explain();
  target::CompileOptions fp16;
  fp16.precision = target::Precision::kFp16;
  CudaPackage h = ExpectEmulationMatches(kir, in, 1e-2, fp16);
  EXPECT_EQ(h.num_host_tasks(), 0) << h.Explain();
}

// --precision=fp16 narrows the graph before kernels are made: the weights
// are f16 constants, activations between the GEMMs stay f16, so the GEMMs
// read f16 memory (16-byte cp.async chunks, and TMA boxes on sm_90a) instead of
// converting f32 elements at every tile load; the result matches the f32
// reference within fp16's tolerance.
TEST(CudaPackage, Fp16AndBf16NarrowWeightsAndActivations) {
  auto dense = [](int64_t n, double scale) {
    std::string s;
    for (int64_t i = 0; i < n; ++i) absl::StrAppend(&s, i ? ", " : "", static_cast<double>(i % 7 - 3) * scale);
    return s;
  };
  const std::string kir = absl::StrCat(R"(graph @main(%x: f32[256,512], %r: f32[256,256]) {
  %w1 = const f32[512,256] dense [)", dense(512 * 256, 0.01), R"(]
  %b1 = const f32[256] dense [)", dense(256, 0.1), R"(]
  %w2 = const f32[256,256] dense [)", dense(256 * 256, 0.02), R"(]
  %m1 = MatMul(%x, %w1)
  %a1 = Add(%m1, %b1)
  %h = Relu(%a1)
  %m2 = MatMul(%h, %w2)
  %y = Add(%m2, %r)
  return %y
})");
  target::CompileOptions fp16;
  fp16.precision = target::Precision::kFp16;
  CudaPackage p = ExpectEmulationMatches(kir, {Random(DType::kF32, {256, 512}, 3), Random(DType::kF32, {256, 256}, 4)},
                                         1e-2, fp16);
  EXPECT_EQ(p.num_host_tasks(), 0) << p.Explain();
  // One Cast of the input in; the GEMMs with their epilogues (bias and Relu,
  // the widening to f32 and the residual Add) read and write no f32 they
  // convert element by element.
  EXPECT_EQ(CountEngine(p, "tensorcore"), 2) << p.Explain();
  const std::string source = p.Files()["kernels.cu"];
  EXPECT_FALSE(absl::StrContains(source, "element loads converting")) << p.Explain();
  EXPECT_TRUE(absl::StrContains(source, "16-byte cp.async chunks")) << source;
  // The constants are the f16 weights and bias: 2 * (512*256 + 256 + 256*256) bytes, give or take alignment.
  EXPECT_LT(p.constants.size(), size_t{4} * (512 * 256 + 256 + 256 * 256));
  // bf16 the same way (8 bits of mantissa: within 2e-2 of the largest magnitude).
  target::CompileOptions bf16;
  bf16.precision = target::Precision::kBf16;
  CudaPackage b = ExpectEmulationMatches(kir, {Random(DType::kF32, {256, 512}, 3), Random(DType::kF32, {256, 256}, 4)},
                                         2e-2, bf16);
  EXPECT_EQ(CountEngine(b, "tensorcore"), 2) << b.Explain();
  EXPECT_TRUE(absl::StrContains(b.Files()["kernels.cu"], "__nv_bfloat16* __restrict__")) << b.Explain();
  EXPECT_FALSE(absl::StrContains(b.Files()["kernels.cu"], "element loads converting")) << b.Explain();
}

// Mixed precision per GEMM: the first reads the graph input (64
// multiply-adds per element a Cast kernel would convert, under a threshold
// of 100) and stays f32 on tf32 TensorCores; the second reads the Relu's
// result, which converts in the first GEMM's epilogue, and runs in f16.
TEST(CudaPackage, MixedPrecisionDecidesPerGemm) {
  auto dense = [](int64_t n, double scale) {
    std::string s;
    for (int64_t i = 0; i < n; ++i) absl::StrAppend(&s, i ? ", " : "", static_cast<double>(i % 7 - 3) * scale);
    return s;
  };
  const std::string kir = absl::StrCat(R"(graph @main(%x: f32[64,128]) {
  %w1 = const f32[128,64] dense [)", dense(128 * 64, 0.01), R"(]
  %w2 = const f32[64,64] dense [)", dense(64 * 64, 0.02), R"(]
  %m1 = MatMul(%x, %w1)
  %h = Relu(%m1)
  %y = MatMul(%h, %w2)
  return %y
})");
  target::CompileOptions mixed;
  mixed.precision = target::Precision::kMixed;
  MixedPrecisionOptions mixed_options;
  mixed_options.min_macs_per_cast = 100;
  mixed.narrow = target::NarrowingFor(target::Precision::kMixed, mixed_options);
  CudaPackage p = ExpectEmulationMatches(kir, {Random(DType::kF32, {64, 128}, 3)}, 1e-2, mixed);
  EXPECT_EQ(CountEngine(p, "tensorcore"), 2) << p.Explain();
  const std::string explain = p.Explain();
  EXPECT_TRUE(absl::StrContains(explain, "m16n8k8")) << explain;   // tf32
  EXPECT_TRUE(absl::StrContains(explain, "m16n8k16")) << explain;  // f16
}

// A MatMul with its bias Add, then `activation` (a node line reading %a and
// defining %g), packaged and emulated against the reference executor.
CudaPackage BiasedGemmThen(const std::string& activation) {
  return ExpectEmulationMatches(absl::StrCat(R"(graph @main(%x: f32[32,64], %w: f32[64,128], %b: f32[128]) {
  %m = MatMul(%x, %w)
  %a = Add(%m, %b)
  )",
                                             activation, R"(
  return %g
})"),
                                {Random(DType::kF32, {32, 64}, 7), Random(DType::kF32, {64, 128}, 8),
                                 Random(DType::kF32, {128}, 9)},
                                1e-4);
}

// A group no kernel takes whole is split back and grouped again with the
// epilogue members the GEMM lowering takes. LeakyRelu has no epilogue step
// (it selects): the GEMM takes the bias Add, and the LeakyRelu runs as an
// elementwise kernel.
TEST(CudaPackage, GroupsAgainWhatNoKernelTakesWhole) {
  CudaPackage p = BiasedGemmThen("%g = LeakyRelu(%a) {alpha = 0.1}");
  EXPECT_EQ(p.num_host_tasks(), 0) << p.Explain();
  EXPECT_EQ(CountEngine(p, "tensorcore"), 1) << p.Explain();
  EXPECT_EQ(CountEngine(p, "simt"), 1) << p.Explain();
  EXPECT_TRUE(absl::StrContains(p.Explain(), "matrix op with fused epilogue")) << p.Explain();
}

TEST(CudaPackage, GemmEpilogueTakesEitherGelu) {
  // GPT-2's fc1 (bias, tanh GELU) and BERT's (bias, erf GELU): one launch each.
  for (const char* approximate : {"tanh", "none"}) {
    CudaPackage p = BiasedGemmThen(absl::StrCat("%g = kiln.Gelu(%a) {approximate = \"", approximate, "\"}"));
    EXPECT_EQ(p.num_host_tasks(), 0) << p.Explain();
    EXPECT_EQ(CountEngine(p, "tensorcore"), 1) << p.Explain();
    EXPECT_EQ(CountEngine(p, "simt"), 0) << p.Explain();
    EXPECT_TRUE(absl::StrContains(p.Explain(), "matrix op with fused epilogue")) << p.Explain();
  }
}

TEST(CudaPackage, BuffersNeverOverlapWhileLive) {
  std::string kir = "graph @main(%x: f32[8,8]) {\n";
  std::string prev = "%x";
  for (int i = 0; i < 12; ++i) {
    // Relu between the Transposes: a copy that only copies read writes nothing.
    if (i % 2)
      absl::StrAppend(&kir, "  %t", i, " = Relu(", prev, ")\n");
    else
      absl::StrAppend(&kir, "  %t", i, " = Transpose(", prev, ") {perm = [1, 0]}\n");
    prev = absl::StrCat("%t", i);
  }
  absl::StrAppend(&kir, "  %o = Concat(%t3, ", prev, ") {axis = 0}\n  return %o, %t5\n}");
  CudaPackage p = ExpectEmulationMatches(kir, {Random(DType::kF32, {8, 8}, 5)});
  using target::cuda::PackageBuffer;
  for (size_t i = 0; i < p.buffers.size(); ++i)
    for (size_t j = i + 1; j < p.buffers.size(); ++j) {
      const PackageBuffer& a = p.buffers[i];
      const PackageBuffer& b = p.buffers[j];
      if (a.alias_of >= 0 || b.alias_of >= 0 || a.kind == PackageBuffer::Kind::kConstant ||
          b.kind == PackageBuffer::Kind::kConstant)
        continue;
      bool time = !(a.last < b.first || b.last < a.first);
      bool space = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      EXPECT_FALSE(time && space) << a.name << " and " << b.name;
    }
  EXPECT_LT(p.arena_bytes, p.naive_bytes);  // buffers are reused
  for (const auto& b : p.buffers) EXPECT_EQ(b.offset % 256, 0) << b.name;
}

TEST(CudaPackage, ConstantsAreDeduplicated) {
  auto m = ParseKir(R"(graph @main(%x: f32[32]) {
  %a = const f32[32] dense [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32]
  %b = const f32[32] dense [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32]
  %y = Concat(%x, %a, %b) {axis = 0}
  return %y
})");
  ASSERT_TRUE(m.ok()) << m.status();
  auto p = Package(*m);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->constants.size(), 256u);  // one aligned copy of 128 bytes
  auto got = Emulate(*p, {Random(DType::kF32, {32}, 9)});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].data<float>()[63], 32.0f);
  EXPECT_EQ((*got)[0].data<float>()[95], 32.0f);
}

std::string TinyCnn() { return std::string(KILN_SOURCE_DIR) + "/examples/models/tiny_cnn/model.onnx"; }

absl::StatusOr<CudaPackage> CompileOnnx(const std::string& path, target::CompileOptions options = {}) {
  auto m = onnx_import::ImportFile(path);
  if (!m.ok()) return m.status();
  auto t = CudaTarget();
  absl::Status s = cuda_test::Optimize(*m, *t);
  if (!s.ok()) return s;
  return target::cuda::BuildCudaPackage(*m, *t, options);
}

// A split-K GEMM adds its slices' partial sums into its output: the launch
// zeroes the output first, every run (the arena holds earlier tasks' values;
// the tile IR's meaning starts the sum at zero).
TEST(CudaPackage, SplitKOutputsAreZeroedBeforeEachLaunch) {
  auto m = cuda_test::ParseKir(R"(graph @main(%p: f32[1,4,16,16], %v: f32[1,4,16,32]) {
  %y = MatMul(%p, %v) : f32[1,4,16,32]
  return %y
})");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(cuda_test::Optimize(*m, *cuda_test::CudaTarget()).ok());
  auto p = cuda_test::Package(*m);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  ASSERT_TRUE(absl::StrContains(p->tasks[0].plan, "split-K")) << p->tasks[0].plan;
  EXPECT_EQ(p->kernels[0].zero_args, std::vector<int>{2});
  // The launch lists the arguments it zeroes in kZeroArgs (an index table,
  // not a bit mask, so any argument position can be zeroed).
  const std::string model = p->Files()["model.cc"];
  EXPECT_TRUE(absl::StrContains(model, "static const int kZeroArgs[] = {\n    2,\n    0};")) << model;
  EXPECT_TRUE(absl::StrContains(model, absl::StrCat("{0, 0, 3, 0, 1},  // y: ", p->kernels[0].name))) << model;
}

TEST(CudaPackage, FilesOfAPackage) {
  auto p = CompileOnnx(TinyCnn());
  ASSERT_TRUE(p.ok()) << p.status();
  auto files = p->Files();
  for (const char* f : {"kernels.cu", "model.cc", "kiln_model.h", "constants.bin", "CMakeLists.txt", "build.sh",
                        "README.md", "placement.txt"})
    EXPECT_TRUE(files.count(f)) << f;
  const std::string& h = files["kiln_model.h"];
  for (const char* api : {"kiln_model* kiln_model_load(const char* package_dir, char* err, size_t err_len);",
                          "int kiln_model_run(kiln_model* model, const void* const* inputs, void* const* outputs",
                          "void kiln_model_free(kiln_model* model);", "int kiln_model_num_inputs(",
                          "int kiln_model_num_outputs(", "const kiln_tensor_info* kiln_model_input(",
                          "const kiln_tensor_info* kiln_model_output(", "void kiln_model_set_host_ops("})
    EXPECT_TRUE(absl::StrContains(h, api)) << api;
  EXPECT_TRUE(absl::StrContains(files["build.sh"], "-gencode arch=compute_90a,code=sm_90a"));
  EXPECT_TRUE(absl::StrContains(files["kernels.cu"], "kiln_kernel_functions[]"));
  EXPECT_TRUE(absl::StrContains(files["model.cc"], "static const TaskDesc kTasks[]"));
  EXPECT_TRUE(absl::StrContains(files["CMakeLists.txt"], "CUDA_ARCHITECTURES \"80-real;80-virtual;90a-real\""))
      << files["CMakeLists.txt"];
  EXPECT_EQ(files["placement.txt"], p->Explain());
  // Every task of the model appears in the launcher's table with its engine.
  for (const PackageTask& t : p->tasks) {
    if (t.kind == PackageTask::Kind::kView) continue;
    EXPECT_TRUE(absl::StrContains(files["model.cc"], absl::StrCat(" -> ", t.engine, ": "))) << t.node;
  }
}

TEST(CudaPackage, ByteIdenticalForTheSameModelAndFlags) {
  std::string a = cuda_test::TempDir("det_a"), b = cuda_test::TempDir("det_b");
  for (const std::string& dir : {a, b}) {
    auto p = CompileOnnx(TinyCnn());
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE(target::cuda::WriteCudaPackage(*p, dir).ok());
  }
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(a)) {
    std::string name = e.path().filename().string();
    EXPECT_EQ(cuda_test::ReadFileOrEmpty(e.path().string()), cuda_test::ReadFileOrEmpty(b + "/" + name)) << name;
    ++files;
  }
  EXPECT_GE(files, 8);
  // Another precision or architecture changes the package.
  target::CompileOptions o;
  o.settings.push_back({"arch", "sm_80"});
  auto p80 = CompileOnnx(TinyCnn(), o);
  ASSERT_TRUE(p80.ok());
  EXPECT_NE(p80->Files()["build.sh"], cuda_test::ReadFileOrEmpty(a + "/build.sh"));
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
}

TEST(CudaPackage, LauncherCompilesAsHostCode) {
  // model.cc is plain C++ against the CUDA runtime's header: the host
  // compiler checks it in a second (nvcc builds the whole package in
  // nvcc_packages.cc).
  if (!std::filesystem::exists("/usr/local/cuda/include/cuda_runtime_api.h")) GTEST_SKIP() << "no CUDA headers";
  // A host task (CumSum), and a GEMM whose sm_90a variant takes TMA tensor maps.
  auto m = ParseKir(R"(graph @main(%x: f32[4,6], %ax: i64[], %a: f16[512,1024], %b: f16[1024,768]) {
  %t = Transpose(%x) {perm = [1, 0]}
  %c = CumSum(%t, %ax)
  %d = MatMul(%a, %b)
  return %c, %d
})");
  ASSERT_TRUE(m.ok());
  auto p = Package(*m);
  ASSERT_TRUE(p.ok()) << p.status();
  std::string dir = cuda_test::TempDir("hostcc");
  ASSERT_TRUE(target::cuda::WriteCudaPackage(*p, dir).ok());
  const std::string model = cuda_test::ReadFileOrEmpty(dir + "/model.cc");
  EXPECT_TRUE(absl::StrContains(model, "static const int kNumTmaMaps = 2;")) << model;
  EXPECT_TRUE(absl::StrContains(model, "{1, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, {768, 1024}, {1536}, {64, "));
  std::string cmd = absl::StrCat("cd ", dir, " && g++ -std=c++17 -fsyntax-only -Wall -Wextra -Werror ",
                                 "-I/usr/local/cuda/include model.cc > compile.log 2>&1");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cuda_test::ReadFileOrEmpty(dir + "/compile.log");
  std::filesystem::remove_all(dir);
}

TEST(CudaPackage, Errors) {
  auto m = ParseKir("graph @main(%x: f32[4]) {\n  %y = Identity(%x)\n  return %y\n}");
  ASSERT_TRUE(m.ok());
  target::CompileOptions bad;
  bad.settings.push_back({"arch", "sm_100a"});
  auto p = Package(*m, bad);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::StrContains(p.status().message(), "sm_100a")) << p.status();
  auto ok = Package(*m);
  ASSERT_TRUE(ok.ok());
  absl::Status s = target::cuda::WriteCudaPackage(*ok, "/proc/kiln-no-such-dir/pkg");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "cannot create the package directory")) << s;
  auto dynamic = ParseKir("graph @main(%x: f32[n]) {\n  %y = Relu(%x)\n  return %y\n}");
  ASSERT_TRUE(dynamic.ok());
  auto d = Package(*dynamic);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(absl::StrContains(d.status().message(), "static shapes")) << d.status();
}

TEST(CudaRuntime, NoDeviceOrNotAPackage) {
  absl::Status probe = target::ProbeCudaDevice();
  if (probe.ok()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(probe.message().empty());
  std::string dir = cuda_test::TempDir("nodevice");
  auto m = ParseKir("graph @main(%x: f32[4]) {\n  %y = Identity(%x)\n  return %y\n}");
  ASSERT_TRUE(m.ok());
  auto p = Package(*m);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(target::cuda::WriteCudaPackage(*p, dir).ok());
  EXPECT_TRUE(target::IsCudaPackage(dir));
  auto exe = target::CudaExecutable::Load(dir);
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().message(), probe.message());
  EXPECT_FALSE(target::IsCudaPackage(KILN_SOURCE_DIR));
  std::filesystem::remove_all(dir);
}

// libkiln_hostops.so on its own: kiln_host_ops_v1 is its one export, and
// the provider it returns runs a node of a host graph.
TEST(CudaRuntime, HostOpsLibraryStandsAlone) {
  void* lib = dlopen(KILN_HOSTOPS_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto entry = reinterpret_cast<const void* (*)()>(dlsym(lib, "kiln_host_ops_v1"));
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(dlsym(lib, "_ZN4kiln7runtime16ReferenceHostOpsEv"), nullptr) << "kiln's own symbols are hidden";
  const auto* ops = static_cast<const cuda_test::HostOps*>(entry());
  ASSERT_NE(ops, nullptr);
  char err[256] = "";
  std::string kir = "graph @main(%x: f32[3]) {\n  %y = Sigmoid(%x)\n  return %y\n}\n";
  void* g = ops->load(nullptr, kir.data(), kir.size(), nullptr, 0, err, sizeof err);
  ASSERT_NE(g, nullptr) << err;
  float in[3] = {0, 100, -100}, out[3] = {7, 7, 7};
  int64_t dims[1] = {3};
  cuda_test::HostTensor i{1, 1, dims, in, 12}, o{1, 1, dims, out, 12};
  EXPECT_EQ(ops->run(nullptr, g, 0, &i, 1, &o, 1, err, sizeof err), 0) << err;
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_LT(out[2], 1e-30f);
  ops->release(nullptr, g);
  // Not dlclose'd: the library's process-wide tables (the op registry) stay
  // reachable, as in an application that loads a provider once.
}

TEST(CudaRuntime, ReferenceHostOpsReportBadCalls) {
  const auto* ops = static_cast<const cuda_test::HostOps*>(runtime::ReferenceHostOps());
  char err[256] = "";
  EXPECT_EQ(ops->load(nullptr, "graph @main(", 12, nullptr, 0, err, sizeof err), nullptr);
  EXPECT_NE(std::string(err), "");
  std::string kir = "graph @main(%x: f32[2]) {\n  %y = Relu(%x)\n  return %y\n}\n";
  void* g = ops->load(nullptr, kir.data(), kir.size(), nullptr, 0, err, sizeof err);
  ASSERT_NE(g, nullptr) << err;
  EXPECT_NE(ops->run(nullptr, g, 5, nullptr, 0, nullptr, 0, err, sizeof err), 0);
  EXPECT_TRUE(absl::StrContains(err, "no node 5")) << err;
  float in[2] = {-1, 2}, out[2] = {7, 7};
  int64_t dims[1] = {2};
  cuda_test::HostTensor i{1, 1, dims, in, 8}, o{1, 1, dims, out, 8};
  EXPECT_EQ(ops->run(nullptr, g, 0, &i, 1, &o, 1, err, sizeof err), 0) << err;
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 2.0f);
  ops->release(nullptr, g);
}

}  // namespace
}  // namespace kiln
