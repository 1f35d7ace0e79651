//===- launcher_on_host_test.cc - A package's launcher run without a GPU ---===//
//
// model.cc, the launcher of a cuda package, built with the host compiler
// against tests/cuda/cuda_runtime_on_host.cc (the CUDA runtime's calls over
// host memory) and tests/cuda/nccl_on_host.cc (NCCL's, ranks as threads)
// and run through the C API of kiln_model.h with kiln's reference kernels
// as the host-op provider: for packages whose tasks all run on the host,
// what a GPU run does short of the kernels. Outputs sized at run time,
// values kept on the host, one copy of a device value per run, against the
// reference executor over runs whose sizes differ; a collective's bucket
// issued and waited for, over one rank and over ranks joined by
// kiln_model_init_replicas and run by kiln_model_run_replicas.
//
//===----------------------------------------------------------------------===//
#include <dlfcn.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/exec/executor.h"
#include "runtime/host_ops.h"
#include "runtime/kiln_model_abi.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using cuda_test::Package;
using cuda_test::ParseKir;
using cuda_test::Random;

// cudaMemcpyKind's values (cuda_runtime_api.h is not included here).
constexpr int kHostToDevice = 1, kDeviceToHost = 2, kDefault = 4;

// The C API of a package library, and the shim's copy counter.
struct Launcher {
  void* lib = nullptr;
  void* (*load)(const char*, char*, size_t) = nullptr;
  int (*run)(void*, const void* const*, void* const*, char*, size_t) = nullptr;
  void (*free)(void*) = nullptr;
  const kiln_tensor_info* (*output)(const void*, int) = nullptr;
  const void* (*output_data)(const void*, int) = nullptr;
  void (*set_host_ops)(void*, const kiln_host_ops*, void*) = nullptr;
  int (*copies)(int) = nullptr;
  void (*reset)() = nullptr;
  int (*set_device)(int) = nullptr;  // the host runtime's cudaSetDevice
  void* (*load_on_device)(const char*, int, char*, size_t) = nullptr;
  int (*init_replicas)(void* const*, int, char*, size_t) = nullptr;
  int (*run_replicas)(void* const*, int, const void* const* const*, void* const* const*, char*, size_t) = nullptr;
  int (*allreduces)() = nullptr;
  int (*run_device)(void*, const void* const*, void* const*, char*, size_t) = nullptr;
  int (*graphs)(int) = nullptr;
};

// Writes the package of `kir` into a fresh directory and builds its
// launcher there with the host compiler; empty `error` on success.
Launcher BuildOnHost(const std::string& kir, const std::string& name, std::string* dir, std::string* error) {
  Launcher l;
  auto m = ParseKir(kir);
  if (!m.ok()) return *error = std::string(m.status().message()), l;
  auto p = Package(*m);
  if (!p.ok()) return *error = std::string(p.status().message()), l;
  if (!p->kernels.empty()) return *error = "the package has kernels; the host runtime runs none", l;
  *dir = cuda_test::TempDir(name);
  if (auto s = target::cuda::WriteCudaPackage(*p, *dir); !s.ok()) return *error = std::string(s.message()), l;
  const std::string cmd =
      absl::StrCat("cd ", *dir, " && ", KILN_HOST_CXX, " -std=c++17 -O1 -w -shared -fPIC -I/usr/local/cuda/include ",
                   "model.cc ", KILN_SOURCE_DIR, "/tests/cuda/cuda_runtime_on_host.cc ", KILN_SOURCE_DIR,
                   "/tests/cuda/nccl_on_host.cc -pthread -o libkiln_model.so > build.log 2>&1");
  if (std::system(cmd.c_str()) != 0) return *error = cuda_test::ReadFileOrEmpty(*dir + "/build.log"), l;
  l.lib = dlopen((*dir + "/libkiln_model.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!l.lib) return *error = dlerror(), l;
  auto sym = [&](const char* s, auto& fn) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(l.lib, s));
    if (!fn) *error = absl::StrCat("no ", s);
  };
  sym("kiln_model_load", l.load);
  sym("kiln_model_run", l.run);
  sym("kiln_model_free", l.free);
  sym("kiln_model_output", l.output);
  sym("kiln_model_output_data", l.output_data);
  sym("kiln_model_set_host_ops", l.set_host_ops);
  sym("kiln_shim_copies", l.copies);
  sym("kiln_shim_reset", l.reset);
  sym("cudaSetDevice", l.set_device);
  sym("kiln_model_load_on_device", l.load_on_device);
  sym("kiln_model_init_replicas", l.init_replicas);
  sym("kiln_model_run_replicas", l.run_replicas);
  sym("kiln_shim_allreduces", l.allreduces);
  sym("kiln_model_run_device", l.run_device);
  sym("kiln_shim_graphs", l.graphs);
  return l;
}

TEST(CudaLauncherOnHost, OutputsSizedAtRunTimeAndValuesKeptOnTheHost) {
  if (!std::filesystem::exists("/usr/local/cuda/include/cuda_runtime_api.h")) GTEST_SKIP() << "no CUDA headers";
  // NonZero's indices are sized at run time and returned from the host;
  // TopK's values stay on the host for CumSum; x, read by both NonZero and
  // TopK, is copied to the host once per run.
  const std::string kir = R"(graph @main(%x: f32[4,6]) {
  %nz = NonZero(%x)
  %k = const i64[1] dense [2]
  %vals, %idx = TopK(%x, %k) {axis = 1}
  %ax = const i64[] dense [1]
  %cs = CumSum(%vals, %ax)
  return %nz, %cs, %idx
})";
  std::string dir, error;
  Launcher l = BuildOnHost(kir, "launcher_on_host", &dir, &error);
  ASSERT_TRUE(error.empty()) << error;
  char err[512] = "";
  void* model = l.load(dir.c_str(), err, sizeof err);
  ASSERT_NE(model, nullptr) << err;
  l.set_host_ops(model, static_cast<const kiln_host_ops*>(runtime::ReferenceHostOps()), nullptr);
  // Before a run, NonZero's output has a dim of -1 and no bytes.
  ASSERT_EQ(l.output(model, 0)->rank, 2);
  EXPECT_EQ(l.output(model, 0)->dims[1], -1);
  EXPECT_EQ(l.output(model, 0)->bytes, 0u);
  auto parsed = ParseKir(kir);
  ASSERT_TRUE(parsed.ok());
  // Runs whose NonZero sizes differ: 24, 0 and some elements.
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE(run);
    Tensor x = run == 2 ? Random(DType::kF32, {4, 6}, 7) : Tensor(DType::kF32, {4, 6});
    if (run == 2)
      for (int64_t i = 0; i < x.numel(); i += 3) x.data<float>()[i] = 0;
    for (int64_t i = 0; i < x.numel() && run < 2; ++i) x.data<float>()[i] = run == 0 ? 1.0f + i : 0.0f;
    Executor exec;
    auto want = exec.Run(*parsed->graph, {x});
    ASSERT_TRUE(want.ok()) << want.status();
    Tensor cs(DType::kF32, {4, 2}), idx(DType::kI64, {4, 2});
    const void* ins[] = {x.raw()};
    void* outs[] = {nullptr, cs.raw(), idx.raw()};
    l.reset();
    ASSERT_EQ(l.run(model, ins, outs, err, sizeof err), 0) << err;
    const kiln_tensor_info* info = l.output(model, 0);
    ASSERT_EQ(info->rank, 2);
    Tensor nz(DType::kI64, Dims(info->dims, info->dims + 2));
    ASSERT_EQ(info->bytes, nz.nbytes());
    if (nz.nbytes() > 0) std::memcpy(nz.raw(), l.output_data(model, 0), nz.nbytes());
    EXPECT_TRUE(nz.Equals((*want)[0]));
    EXPECT_TRUE(cs.Equals((*want)[1]));
    EXPECT_TRUE(idx.Equals((*want)[2]));
    EXPECT_EQ(l.output_data(model, 1), nullptr);  // static: written through outputs[1]
    // One copy of x to the host (for NonZero and TopK); cs and idx back to
    // the device and to the caller; nothing else moves.
    EXPECT_EQ(l.copies(kDeviceToHost), 1);
    EXPECT_EQ(l.copies(kHostToDevice), 2);
    EXPECT_EQ(l.copies(kDefault), 3);  // the caller's x in, cs and idx out
  }
  l.free(model);
  std::filesystem::remove_all(dir);
}

// KILN_CUDA_PROFILE's file is there after each run, also when the process
// ends without freeing the model (as `kiln run` does).
TEST(CudaLauncherOnHost, ProfileWrittenAfterEachRun) {
  if (!std::filesystem::exists("/usr/local/cuda/include/cuda_runtime_api.h")) GTEST_SKIP() << "no CUDA headers";
  const std::string kir = R"(graph @main(%x: f32[4,6]) {
  %ax = const i64[] dense [1]
  %cs = CumSum(%x, %ax)
  return %cs
})";
  std::string dir, error;
  Launcher l = BuildOnHost(kir, "launcher_profile", &dir, &error);
  ASSERT_TRUE(error.empty()) << error;
  const std::string profile = dir + "/profile.tsv";
  setenv("KILN_CUDA_PROFILE", profile.c_str(), 1);
  char err[512] = "";
  void* model = l.load(dir.c_str(), err, sizeof err);
  unsetenv("KILN_CUDA_PROFILE");
  ASSERT_NE(model, nullptr) << err;
  l.set_host_ops(model, static_cast<const kiln_host_ops*>(runtime::ReferenceHostOps()), nullptr);
  Tensor x = Random(DType::kF32, {4, 6}, 3), cs(DType::kF32, {4, 6});
  const void* ins[] = {x.raw()};
  void* outs[] = {cs.raw()};
  for (int run = 1; run <= 2; ++run) {
    ASSERT_EQ(l.run(model, ins, outs, err, sizeof err), 0) << err;
    const std::string text = cuda_test::ReadFileOrEmpty(profile);
    EXPECT_TRUE(absl::StrContains(text, absl::StrCat("(mean of ", run, " runs on host"))) << text;
    EXPECT_TRUE(absl::StrContains(text, "\tcs\t(host)")) << text;
  }
  l.free(model);
  std::filesystem::remove_all(dir);
}

// KILN_CUDA_GRAPH=1: a run is captured as a graph once per placement of
// the buffers and replayed by the runs that find its placement again (a
// loop alternating two inputs replays two); the inputs' and outputs'
// copies stay outside it, so every run's outputs are its own.
TEST(CudaLauncherOnHost, GraphsReplayedPerPlacementOfTheBuffers) {
  if (!std::filesystem::exists("/usr/local/cuda/include/cuda_runtime_api.h")) GTEST_SKIP() << "no CUDA headers";
  const std::string kir = R"(graph @main(%x: f32[4,6]) {
  %s = const i64[1] dense [24]
  %y = Reshape(%x, %s)
  return %y
})";
  std::string dir, error;
  Launcher l = BuildOnHost(kir, "launcher_graphs", &dir, &error);
  ASSERT_TRUE(error.empty()) << error;
  setenv("KILN_CUDA_GRAPH", "1", 1);
  char err[512] = "";
  void* model = l.load(dir.c_str(), err, sizeof err);
  unsetenv("KILN_CUDA_GRAPH");
  ASSERT_NE(model, nullptr) << err;
  Tensor a = Random(DType::kF32, {4, 6}, 1), b = Random(DType::kF32, {4, 6}, 2);
  l.reset();
  for (int run = 0; run < 6; ++run) {
    const Tensor& x = run % 2 ? b : a;
    Tensor y(DType::kF32, {24});
    const void* ins[] = {x.raw()};
    void* outs[] = {y.raw()};
    ASSERT_EQ(l.run_device(model, ins, outs, err, sizeof err), 0) << err;
    EXPECT_EQ(std::memcmp(y.raw(), x.raw(), y.nbytes()), 0) << "run " << run;
  }
  EXPECT_EQ(l.graphs(0), 2);  // one capture per input buffer
  EXPECT_EQ(l.graphs(1), 6);  // every run a replay
  l.free(model);
  std::filesystem::remove_all(dir);
}

// Strings live on the host: a string input is given as C strings, host
// tasks read and make string tensors, and a string output comes back in
// its serialized form (each element's byte count, then its bytes), equal
// to the reference executor's.
TEST(CudaLauncherOnHost, StringsInAndOutThroughTheHost) {
  if (!std::filesystem::exists("/usr/local/cuda/include/cuda_runtime_api.h")) GTEST_SKIP() << "no CUDA headers";
  const std::string kir = R"(graph @main(%x: str[4]) {
  %u = StringNormalizer(%x) {case_change_action = "UPPER"}
  %f = Cast(%x) {to = 1}
  return %u, %f, %x
})";
  std::string dir, error;
  Launcher l = BuildOnHost(kir, "launcher_strings", &dir, &error);
  ASSERT_TRUE(error.empty()) << error;
  char err[512] = "";
  void* model = l.load(dir.c_str(), err, sizeof err);
  ASSERT_NE(model, nullptr) << err;
  l.set_host_ops(model, static_cast<const kiln_host_ops*>(runtime::ReferenceHostOps()), nullptr);
  const char* x[] = {"1.5", "2", "-3", "1e2"};
  Tensor f(DType::kF32, {4});
  const void* ins[] = {x};
  void* outs[] = {nullptr, f.raw(), nullptr};
  ASSERT_EQ(l.run(model, ins, outs, err, sizeof err), 0) << err;
  const kiln_tensor_info* info = l.output(model, 0);
  ASSERT_EQ(info->rank, 1);
  auto u = runtime::DeserializeStrings(Dims(info->dims, info->dims + 1), l.output_data(model, 0), info->bytes);
  ASSERT_TRUE(u.ok()) << u.status();
  Tensor xt(DType::kString, {4});
  for (int i = 0; i < 4; ++i) xt.data<std::string>()[i] = x[i];
  auto parsed = ParseKir(kir);
  ASSERT_TRUE(parsed.ok());
  Executor exec;
  auto want = exec.Run(*parsed->graph, {xt});
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_TRUE(u->Equals((*want)[0]));
  EXPECT_TRUE(f.Equals((*want)[1]));
  EXPECT_EQ(u->data<std::string>()[3], "1E2");
  // The input returned as it came.
  const kiln_tensor_info* same = l.output(model, 2);
  auto back = runtime::DeserializeStrings(Dims(same->dims, same->dims + same->rank), l.output_data(model, 2),
                                          same->bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->Equals(xt));
  l.free(model);
  std::filesystem::remove_all(dir);
}

TEST(CudaLauncherOnHost, CollectivesInBucketsOverRanks) {
  if (!std::filesystem::exists("/usr/local/cuda/include/nccl.h")) GTEST_SKIP() << "no NCCL header";
  // A mean over the ranks between two host tasks: the bucket goes after
  // the first CumSum and the second waits for it.
  const std::string kir = R"(graph @main(%x: f32[4,6]) {
  %ax = const i64[] dense [1]
  %c = CumSum(%x, %ax)
  %m = kiln.AllReduce(%c) {replicas = 2}
  %d = CumSum(%m, %ax)
  return %d, %m
})";
  std::string dir, error;
  Launcher l = BuildOnHost(kir, "collectives_on_host", &dir, &error);
  ASSERT_TRUE(error.empty()) << error;
  auto parsed = ParseKir(kir);
  ASSERT_TRUE(parsed.ok());
  const Tensor x0 = Random(DType::kF32, {4, 6}, 1), x1 = Random(DType::kF32, {4, 6}, 2);
  Executor exec;
  // One rank: the mean over itself, through a communicator of its own.
  {
    char err[512] = "";
    void* model = l.load(dir.c_str(), err, sizeof err);
    ASSERT_NE(model, nullptr) << err;
    l.set_host_ops(model, static_cast<const kiln_host_ops*>(runtime::ReferenceHostOps()), nullptr);
    Tensor d(DType::kF32, {4, 6}), m(DType::kF32, {4, 6});
    const void* ins[] = {x0.raw()};
    void* outs[] = {d.raw(), m.raw()};
    const int before = l.allreduces();
    ASSERT_EQ(l.run(model, ins, outs, err, sizeof err), 0) << err;
    EXPECT_EQ(l.allreduces(), before + 1);
    auto want = exec.Run(*parsed->graph, {x0});
    ASSERT_TRUE(want.ok());
    EXPECT_TRUE(d.Equals((*want)[0]));
    EXPECT_TRUE(m.Equals((*want)[1]));
    l.free(model);
  }
  // Two ranks on devices 0 and 1, each on its own input: both get the mean.
  void* ranks[2];
  char err[512] = "";
  for (int r = 0; r < 2; ++r) {
    ranks[r] = l.load_on_device(dir.c_str(), r, err, sizeof err);
    ASSERT_NE(ranks[r], nullptr) << err;
    l.set_host_ops(ranks[r], static_cast<const kiln_host_ops*>(runtime::ReferenceHostOps()), nullptr);
  }
  l.set_device(0);
  ASSERT_EQ(l.init_replicas(ranks, 2, err, sizeof err), 0) << err;
  Tensor d[2] = {Tensor(DType::kF32, {4, 6}), Tensor(DType::kF32, {4, 6})};
  Tensor m[2] = {Tensor(DType::kF32, {4, 6}), Tensor(DType::kF32, {4, 6})};
  const void* in0[] = {x0.raw()};
  const void* in1[] = {x1.raw()};
  void* out0[] = {d[0].raw(), m[0].raw()};
  void* out1[] = {d[1].raw(), m[1].raw()};
  const void* const* ins[] = {in0, in1};
  void* const* outs[] = {out0, out1};
  ASSERT_EQ(l.run_replicas(ranks, 2, ins, outs, err, sizeof err), 0) << err;
  auto c0 = exec.Run(*parsed->graph, {x0}), c1 = exec.Run(*parsed->graph, {x1});
  ASSERT_TRUE(c0.ok() && c1.ok());
  Tensor mean(DType::kF32, {4, 6});
  for (int64_t i = 0; i < mean.numel(); ++i)
    mean.data<float>()[i] = ((*c0)[1].data<float>()[i] + (*c1)[1].data<float>()[i]) / 2;
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(cuda_test::Near(m[r], mean, 1e-6));
    // The second CumSum ran on the mean.
    for (int64_t row = 0; row < 4; ++row) {
      float sum = 0;
      for (int64_t col = 0; col < 6; ++col) {
        sum += mean.data<float>()[row * 6 + col];
        EXPECT_NEAR(d[r].data<float>()[row * 6 + col], sum, 1e-5);
      }
    }
  }
  // Ranks must be on their own devices.
  l.set_device(0);
  void* same[2] = {l.load(dir.c_str(), err, sizeof err), l.load(dir.c_str(), err, sizeof err)};
  ASSERT_NE(same[0], nullptr);
  EXPECT_NE(l.init_replicas(same, 2, err, sizeof err), 0);
  EXPECT_TRUE(absl::StrContains(err, "were loaded on the same device")) << err;
  for (void* m : {ranks[0], ranks[1], same[0], same[1]}) l.free(m);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln
