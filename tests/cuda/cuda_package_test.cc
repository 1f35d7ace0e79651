//===- cuda_package_test.cc - cuda packages, emulated and inspected --------===//
//
// target/cuda/cuda_package.cc without a GPU: host fallback with the copies
// around it, kernels bound to their operands, convolutions and pools,
// narrow and mixed precision, fusion groups taken whole or formed again,
// the memory plan, constants, split-K, a package's files and determinism,
// the launcher as host code, and the errors.
//
//===----------------------------------------------------------------------===//
#include <filesystem>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "target/precision.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using cuda_test::CompileOnnx;
using cuda_test::CountEngine;
using cuda_test::CudaTarget;
using cuda_test::Emulate;
using cuda_test::ExpectEmulationMatches;
using cuda_test::Package;
using cuda_test::ParseKir;
using cuda_test::Random;
using target::cuda::CudaPackage;
using target::cuda::PackageTask;

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
  EXPECT_TRUE(absl::StrContains(d.status().message(), "known only at run time")) << d.status();
}

}  // namespace
}  // namespace kiln
