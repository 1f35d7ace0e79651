//===- cuda_target_test.cc - The cuda target: description, placement, runtime ===//
//
// Without a GPU: the GPU description and its figures, placement, --arch,
// and the runtime's answers when no CUDA device is present (and the
// host-op provider library on its own). Packages: cuda_package_test.cc;
// data movement: cuda_copy_kernel_test.cc; a decoder's step:
// cuda_decoder_step_test.cc.
//
//===----------------------------------------------------------------------===//
#include <dlfcn.h>
#include <filesystem>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "target/cuda/cuda_target.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using cuda_test::ExpectEmulationMatches;
using cuda_test::CudaTarget;
using cuda_test::Package;
using cuda_test::ParseKir;
using cuda_test::Random;

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
  EXPECT_EQ(engines, (std::set<std::string>{"tensorcore", "simt", "host", "nccl"}));
  // NVLink 4 between a node's GPUs, each way, and NCCL's ring latencies.
  EXPECT_EQ(d.links.bytes_per_second, 450e9);
  EXPECT_EQ(d.links.max_devices, 8);
  EXPECT_NEAR(d.links.latency_seconds, 3.4e-6, 1e-12);
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
  const std::string kir = R"(graph @main(%c: bool[], %x: f32[2,3]) {
  %nz = NonZero(%x)
  %y = If(%c) {else_branch = graph @e() {
    %b = Neg(%x)
    return %b
  }, then_branch = graph @t() {
    %a = Relu(%x)
    return %a
  }}
  return %nz, %y
})";
  auto m = ParseKir(kir);
  ASSERT_TRUE(m.ok()) << m.status();
  auto t = CudaTarget();
  for (const Node* n : m->graph->nodes()) {
    target::Placement p = t->Place(*n, {});
    EXPECT_EQ(p.engine, "host") << n->op();
  }
  // NonZero's output is sized when it has run, and returned from the host.
  for (const bool c : {false, true}) {
    Tensor cond(DType::kBool, {});
    cond.data<bool>()[0] = c;
    const target::cuda::CudaPackage p = ExpectEmulationMatches(kir, {cond, Random(DType::kF32, {2, 3}, 4)});
    EXPECT_EQ(p.num_host_tasks(), 2);
    ASSERT_EQ(p.outputs.size(), 2u);
    EXPECT_TRUE(p.values[p.outputs[0]].on_host && p.values[p.outputs[0]].dynamic);
  }
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
// A data-parallel package's inputs: one rank's size, or R shards of it.
TEST(CudaRuntime, ShardsOfADataParallelStep) {
  const std::vector<target::CudaExecutable::TensorInfo> infos = {{"x", DType::kF32, {8, 32}},
                                                                  {"labels", DType::kI64, {8}}};
  auto in = [](int64_t rows_x, int64_t rows_l, DType lt = DType::kI64) {
    return std::vector<Tensor>{Tensor(DType::kF32, {rows_x, 32}), Tensor(lt, {rows_l})};
  };
  EXPECT_EQ(target::ShardRanks(in(32, 32), infos, 4), 4);
  EXPECT_EQ(target::ShardRanks(in(16, 16), infos, 4), 2);  // the run's ranks, not the compiled ones
  EXPECT_EQ(target::ShardRanks(in(8, 8), infos, 4), 0);    // one rank's inputs
  EXPECT_EQ(target::ShardRanks(in(32, 16), infos, 4), 0);  // shards that disagree
  EXPECT_EQ(target::ShardRanks(in(20, 20), infos, 4), 0);  // not a multiple
  EXPECT_EQ(target::ShardRanks(in(32, 32, DType::kI32), infos, 4), 0);
  EXPECT_EQ(target::ShardRanks(in(32, 32), infos, 1), 0);  // no collectives
  EXPECT_EQ(target::ShardRanks({Tensor(DType::kF32, {32, 32})}, infos, 4), 0);
}

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
