//===- cuda_dynamic_shapes_test.cc - Values sized at run time on cuda -----===//
//
// target/cuda/cuda_package.cc with values whose shape depends on the data:
// the nodes that touch them run as host tasks, the values stay on the host
// between them (no copies), a static result computed from them is copied to
// the device for the kernels that read it, and a model output sized at run
// time is returned from the host. Emulated on the host against the
// reference executor; the generated launcher compiled as host code.
//
//===----------------------------------------------------------------------===//
#include <filesystem>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using cuda_test::CountEngine;
using cuda_test::ExpectEmulationMatches;
using cuda_test::Package;
using cuda_test::ParseKir;
using cuda_test::Random;
using target::cuda::CudaPackage;
using target::cuda::PackageValue;

// The positive elements of x (NonZero, then GatherND: sized at run time),
// their sum added to relu(x) on the GPU.
constexpr const char* kPositives = R"(graph @main(%x: f32[4,6]) {
  %zero = const f32[] dense [0.0]
  %pos = Greater(%x, %zero)
  %nz = NonZero(%pos)
  %at = Transpose(%nz) {perm = [1, 0]}
  %v = GatherND(%x, %at)
  %s = ReduceSum(%v) {keepdims = 0}
  %r = Relu(%x)
  %y = Add(%r, %s)
  return %v, %y
})";

const PackageValue* ValueNamed(const CudaPackage& p, const std::string& name) {
  for (const PackageValue& v : p.values)
    if (v.name == name) return &v;
  return nullptr;
}

TEST(CudaDynamicShapes, ValuesSizedAtRunTimeStayOnTheHost) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE(seed);
    const CudaPackage p = ExpectEmulationMatches(kPositives, {Random(DType::kF32, {4, 6}, seed)});
    ASSERT_FALSE(p.tasks.empty());
    // NonZero, the Transpose and GatherND of its result, and the ReduceSum
    // over that run on the host; the comparison, and relu and the add (one
    // group), on the GPU.
    EXPECT_EQ(p.num_host_tasks(), 4) << p.Explain();
    EXPECT_EQ(CountEngine(p, "simt"), 2) << p.Explain();
    for (const char* name : {"nz", "at", "v"}) {
      const PackageValue* v = ValueNamed(p, name);
      ASSERT_NE(v, nullptr) << name;
      EXPECT_TRUE(v->on_host && v->dynamic && v->buffer < 0) << name;
    }
    EXPECT_EQ(ValueNamed(p, "nz")->dims, (std::vector<int64_t>{2, -1}));
    // The sum is static: copied to the device for the add.
    const PackageValue* s = ValueNamed(p, "s");
    ASSERT_NE(s, nullptr);
    EXPECT_FALSE(s->on_host || s->dynamic);
    EXPECT_GE(s->buffer, 0);
    const std::string explain = p.Explain();
    EXPECT_TRUE(absl::StrContains(explain, "NonZero  ->  host: 'nz' (i64[2,")) << explain;
    EXPECT_TRUE(absl::StrContains(explain, "kept on the host: nz (i64[2,?]), sized when the node has run")) << explain;
    EXPECT_TRUE(absl::StrContains(explain, "copy host -> device: s (f32[])")) << explain;
    EXPECT_FALSE(absl::StrContains(explain, "copy device -> host: nz")) << explain;
    EXPECT_TRUE(absl::StrContains(explain, "values kept on the host between host tasks: 3 (3 sized at run time; 1 of "
                                           "them model outputs, returned from the host)"))
        << explain;
  }
}

TEST(CudaDynamicShapes, NoPositiveElementGivesAnEmptyOutput) {
  Tensor x(DType::kF32, {4, 6});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = -1.0f - static_cast<float>(i);
  ExpectEmulationMatches(kPositives, {x});
}

TEST(CudaDynamicShapes, StaticValuesOnlyHostTasksTouchAreNotCopied) {
  // CumSum and TopK both run on the host: CumSum's result goes straight to
  // TopK, and only TopK's results (read by the GPU and the caller) move.
  const std::string kir = R"(graph @main(%x: f32[4,6], %ax: i64[]) {
  %c = CumSum(%x, %ax)
  %k = const i64[1] dense [3]
  %vals, %idx = TopK(%c, %k) {axis = 1}
  %r = Relu(%vals)
  return %r, %idx
})";
  Tensor axis(DType::kI64, {});
  axis.data<int64_t>()[0] = 1;
  const CudaPackage p = ExpectEmulationMatches(kir, {Random(DType::kF32, {4, 6}, 5), axis});
  EXPECT_EQ(p.num_host_tasks(), 2);
  const PackageValue* c = ValueNamed(p, "c");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->on_host && !c->dynamic && c->buffer < 0);
  const std::string explain = p.Explain();
  EXPECT_FALSE(absl::StrContains(explain, "copy host -> device: c ")) << explain;
  EXPECT_FALSE(absl::StrContains(explain, "copy device -> host: c ")) << explain;
  EXPECT_TRUE(absl::StrContains(explain, "kept on the host: c (f32[4,6])\n")) << explain;
  EXPECT_TRUE(absl::StrContains(explain, "(0 sized at run time; 0 of them model outputs")) << explain;
}

TEST(CudaDynamicShapes, InputsSizedAtRunTimeAreRefusedWithTheReason) {
  auto m = ParseKir("graph @main(%x: f32[n]) {\n  %y = Relu(%x)\n  return %y\n}");
  ASSERT_TRUE(m.ok());
  auto p = Package(*m);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::StrContains(p.status().message(), "input 'x' (f32[n]) has a shape known only at run time"))
      << p.status();
}

TEST(CudaDynamicShapes, LauncherCompilesAsHostCode) {
  if (!std::filesystem::exists("/usr/local/cuda/include/cuda_runtime_api.h")) GTEST_SKIP() << "no CUDA headers";
  auto m = ParseKir(kPositives);
  ASSERT_TRUE(m.ok());
  auto p = Package(*m);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string dir = cuda_test::TempDir("dynamic_hostcc");
  ASSERT_TRUE(target::cuda::WriteCudaPackage(*p, dir).ok());
  const std::string model = cuda_test::ReadFileOrEmpty(dir + "/model.cc");
  EXPECT_TRUE(absl::StrContains(model, "KILN_ON_HOST | KILN_DYNAMIC},  // ")) << model;
  EXPECT_TRUE(absl::StrContains(model, "(-1: known at run time)")) << model;
  const std::string cmd = absl::StrCat("cd ", dir, " && g++ -std=c++17 -fsyntax-only -Wall -Wextra -Werror ",
                                       "-I/usr/local/cuda/include model.cc > compile.log 2>&1");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cuda_test::ReadFileOrEmpty(dir + "/compile.log");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln
