//===- nvcc_packages.cc - cuda packages through nvcc, PTX checked ---------===//
//
// What CI can check of the cuda target without a GPU: the emitted CUDA C++
// compiles with the CUDA Toolkit's nvcc for sm_80 and sm_90a without a
// warning (-Werror all-warnings, and -Wall -Wextra -Werror on the host
// side), and the PTX of every TensorCore kernel holds TensorCore
// instructions: mma.sync in its sm_80 variant, wgmma in its sm_90a one.
//
// Its own test binary (cuda_nvcc_tests), run by one ctest per case:
//  - SmallPackageBuilds (ctest cuda.nvcc.small_package): one package, built
//    by its own build.sh.
//  - ExportedModels (ctest cuda.nvcc.exported_models): every model
//    of scripts/export_models.py's set (KILN_MODELS_DIR) compiles for
//    --target=cuda (fp32 and fp16) and its whole package builds.
//  - ThreeTf32Products (ctest cuda.nvcc.three_tf32): f32 GEMMs and
//    convolutions under --fp32-products=3xtf32.
//  - AttentionForms (ctest cuda.nvcc.attention): the attention kernel's
//    dtypes, masks and K layouts.
//  - Decoders (ctest cuda.nvcc.decoders): the tiny decoder's prefill and
//    decode steps (KILN_DECODERS_DIR), the kernels a generation step adds.
//  - DataParallelSteps (ctest cuda.nvcc.data_parallel): data-parallel
//    training steps of the exported training models
//    (KILN_TRAINING_MODELS_DIR), their launchers calling NCCL, built and
//    linked against the toolkit's NCCL.
//  - Conformance (ctest cuda.nvcc.conformance): every ONNX backend
//    test model the cuda target accepts; their kernels, deduplicated by name
//    (kernel names hash their source), compile in a few large translation
//    units, two nvcc processes at a time.
//
// nvcc is $KILN_NVCC, else /usr/local/cuda/bin/nvcc; without it the tests
// skip.
//
//===----------------------------------------------------------------------===//
#include <sys/wait.h>

#include <chrono>
#include <future>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "graph/passes/pass_manager.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using target::cuda::CudaPackage;
using target::cuda::PackageKernel;

std::string Nvcc() {
  const char* env = std::getenv("KILN_NVCC");
  std::string nvcc = env && *env ? env : "/usr/local/cuda/bin/nvcc";
  return fs::exists(nvcc) ? nvcc : "";
}

// Flags that turn every warning into an error, device and host side.
constexpr char kStrict[] = "-Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror";

int Shell(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

// The body of `.entry NAME(` in `ptx`, with the bodies of the functions it
// calls (transitively), or empty when the entry is missing.
std::string EntryText(const std::string& ptx, const std::string& name) {
  std::string out;
  std::set<std::string> seen;
  std::vector<std::pair<std::string, std::string>> todo = {{".entry " + name + "(", name}};
  while (!todo.empty()) {
    auto [header, fn] = todo.back();
    todo.pop_back();
    if (!seen.insert(fn).second) continue;
    size_t at = ptx.find(header);
    if (at == std::string::npos && header.rfind(".func", 0) == 0) {
      // `.func (.param ...) name(`: find the name after .func.
      static const std::regex any_func(R"(\.func\s*(\([^)]*\))?\s*)");
      std::smatch m;
      std::string::const_iterator from = ptx.begin();
      while (std::regex_search(from, ptx.end(), m, any_func)) {
        size_t p = static_cast<size_t>(m.position(0) + (from - ptx.begin())) + m.length(0);
        if (ptx.compare(p, fn.size() + 1, fn + "(") == 0) {
          at = static_cast<size_t>(m.position(0) + (from - ptx.begin()));
          break;
        }
        from = m[0].second;
      }
    }
    if (at == std::string::npos) continue;
    // The body ends at the first line "}" outside inline assembly (whose own
    // braces, e.g. around a .reg declaration, start lines too).
    size_t end = std::string::npos;
    bool in_asm = false;
    for (size_t line = ptx.find('\n', at); line != std::string::npos; line = ptx.find('\n', line + 1)) {
      const size_t next = ptx.find('\n', line + 1);
      const absl::string_view text =
          absl::string_view(ptx).substr(line + 1, next == std::string::npos ? std::string::npos : next - line - 1);
      if (absl::StrContains(text, "// begin inline asm")) in_asm = true;
      else if (absl::StrContains(text, "// end inline asm")) in_asm = false;
      else if (!in_asm && text == "}") {
        end = line;
        break;
      }
    }
    std::string body = ptx.substr(at, end == std::string::npos ? std::string::npos : end - at);
    out += body;
    static const std::regex call(R"(call(\.uni)?\s*(\([^)]*\),\s*)?([A-Za-z_$][\w$]*))");
    for (std::sregex_iterator it(body.begin(), body.end(), call), e; it != e; ++it)
      todo.push_back({".func", (*it)[3].str()});
  }
  return out;
}

// Checks the PTX of a compiled translation unit (its -keep files in `keep`,
// named TU.compute_XX.ptx): each TensorCore kernel's sm_80 variant holds
// mma.sync, its sm_90a variant wgmma, fed by TMA loads (cp.async.bulk.tensor)
// where the variant takes tensor maps. Returns the kernels checked.
int CheckTensorCorePtx(const std::string& keep, const std::string& tu, const std::vector<const PackageKernel*>& kernels,
                       const target::cuda::CudaBuildOptions& build) {
  std::map<std::string, std::string> ptx;
  for (const char* arch : {"compute_80", "compute_90a"}) {
    std::string text = cuda_test::ReadFileOrEmpty(absl::StrCat(keep, "/", tu, ".", arch, ".ptx"));
    if (!text.empty()) ptx[arch] = std::move(text);
  }
  int checked = 0;
  for (const PackageKernel* k : kernels) {
    if (!k->matrix) continue;
    ++checked;
    for (const target::cuda::CudaVariant& v : k->variants) {
      const bool hopper = v.min_sm >= 90;
      if (hopper && !build.arch.hopper) continue;
      const char* arch = hopper ? "compute_90a" : "compute_80";
      const char* want = hopper ? "wgmma" : "mma.sync";
      if (!ptx.count(arch)) {
        ADD_FAILURE() << "no " << arch << " PTX for " << tu;
        continue;
      }
      std::string body = EntryText(ptx[arch], v.function);
      EXPECT_FALSE(body.empty()) << v.function << " is not in " << tu << "." << arch << ".ptx";
      EXPECT_TRUE(absl::StrContains(body, want)) << v.function << " (" << k->name << ") has no " << want << " in its "
                                                 << arch << " PTX";
      if (!v.tma.empty()) {
        EXPECT_TRUE(absl::StrContains(body, "cp.async.bulk.tensor")) << v.function << " takes tensor maps but has no TMA load";
      }
    }
  }
  return checked;
}

using cuda_test::CompileOnnx;

// Writes `p` to `dir` and builds it with its own build.sh and the strict
// flags (`keep`: nvcc's intermediate files, the PTX among them, stay in
// `dir`). False, with a failure recorded, when nothing was built; a
// warning is a failure too, but the package is built.
bool BuildStrictly(const CudaPackage& p, const std::string& dir, const std::string& nvcc, bool keep) {
  const absl::Status written = target::cuda::WriteCudaPackage(p, dir);
  EXPECT_TRUE(written.ok()) << written;
  if (!written.ok()) return false;
  const std::string cmd = absl::StrCat("NVCC='", nvcc, "' sh ", dir, "/build.sh ", kStrict,
                                       keep ? absl::StrCat(" -keep -keep-dir ", dir) : "", " > ", dir,
                                       "/build.log 2>&1");
  if (Shell(cmd) != 0) {
    ADD_FAILURE() << "nvcc failed:\n" << cuda_test::ReadFileOrEmpty(dir + "/build.log").substr(0, 4000);
    return false;
  }
  EXPECT_EQ(cuda_test::ReadFileOrEmpty(dir + "/build.log"), "");  // not one warning
  return true;
}

TEST(CudaNvcc, SmallPackageBuilds) {
  std::string nvcc = Nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "no nvcc";
  // Host tasks, copies, and a GEMM whose sm_90a variant loads by TMA.
  auto m = cuda_test::ParseKir(R"(graph @main(%x: f32[4,6], %ax: i64[], %ids: i32[3], %p: f16[512,1024], %q: f16[1024,768]) {
  %g = Gather(%x, %ids) {axis = 1}
  %t = Transpose(%x) {perm = [1, 0]}
  %c = CumSum(%t, %ax)
  %s = const i64[2] dense [1, 0]
  %e = const i64[2] dense [6, 4]
  %a = const i64[2] dense [0, 1]
  %sl = Slice(%c, %s, %e, %a)
  %mm = MatMul(%p, %q)
  return %sl, %g, %mm
})");
  ASSERT_TRUE(m.ok()) << m.status();
  auto p = cuda_test::Package(*m);
  ASSERT_TRUE(p.ok()) << p.status();
  std::string dir = cuda_test::TempDir("small");
  ASSERT_TRUE(BuildStrictly(*p, dir, nvcc, /*keep=*/true));
  std::vector<const PackageKernel*> kernels;
  int with_tma = 0;
  for (const PackageKernel& k : p->kernels) {
    kernels.push_back(&k);
    for (const auto& v : k.variants) with_tma += !v.tma.empty();
  }
  EXPECT_EQ(with_tma, 1) << p->Explain();
  EXPECT_EQ(CheckTensorCorePtx(dir, "kernels", kernels, p->build), 1);
  ASSERT_TRUE(fs::exists(dir + "/libkiln_model.so"));
  ASSERT_EQ(Shell(absl::StrCat("nm -D ", dir, "/libkiln_model.so > ", dir, "/nm.txt")), 0);
  std::string nm = cuda_test::ReadFileOrEmpty(dir + "/nm.txt");
  for (const char* sym : {"kiln_model_load", "kiln_model_run", "kiln_model_free", "kiln_model_num_inputs",
                          "kiln_model_input", "kiln_model_output", "kiln_model_set_host_ops"})
    EXPECT_TRUE(absl::StrContains(nm, absl::StrCat(" T ", sym, "\n"))) << sym;
  fs::remove_all(dir);
}

// --fp32-products=3xtf32: an f32 MatMul and an f32 convolution (implicit
// GEMM) as three tf32 products, built with warnings as errors, their PTX on
// mma.sync three times per product and with no sm_90a variant.
TEST(CudaNvcc, ThreeTf32Products) {
  std::string nvcc = Nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "no nvcc";
  auto m = cuda_test::ParseKir(R"(graph @main(%a: f32[128,256], %b: f32[256,64], %x: f32[1,16,16,16], %w: f32[32,16,3,3]) {
  %y = MatMul(%a, %b)
  %z = Conv(%x, %w) {pads = [1, 1, 1, 1]}
  return %y, %z
})");
  ASSERT_TRUE(m.ok()) << m.status();
  target::CompileOptions o;
  o.settings = {{"fp32-products", "3xtf32"}};
  auto p = cuda_test::Package(*m, o);
  ASSERT_TRUE(p.ok()) << p.status();
  std::string dir = cuda_test::TempDir("three_tf32");
  ASSERT_TRUE(BuildStrictly(*p, dir, nvcc, /*keep=*/true));
  std::vector<const PackageKernel*> kernels;
  for (const PackageKernel& k : p->kernels) {
    kernels.push_back(&k);
    for (const auto& v : k.variants) EXPECT_LT(v.min_sm, 90) << k.name << ": " << v.function;
  }
  EXPECT_EQ(CheckTensorCorePtx(dir, "kernels", kernels, p->build), 2);
  const std::string cu = cuda_test::ReadFileOrEmpty(dir + "/kernels.cu");
  EXPECT_TRUE(absl::StrContains(cu, "kiln::split_tf32(")) << "no operand split in kernels.cu";
  fs::remove_all(dir);
}

// The attention kernel's forms through nvcc, PTX checked for mma.sync: f16
// with a mask broadcast over batch items and heads, bf16 with K given
// transposed, f32 (tf32) causal at head size 128.
TEST(CudaNvcc, AttentionForms) {
  std::string nvcc = Nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "no nvcc";
  auto m = cuda_test::ParseKir(R"(graph @main(%q: f16[2,2,64,64], %k: f16[2,2,64,64], %v: f16[2,2,64,64], %mask: f16[64,64], %qb: bf16[1,2,64,64], %kt: bf16[1,2,64,128], %vb: bf16[1,2,128,64], %qf: f32[1,1,64,128], %kf: f32[1,1,64,128], %vf: f32[1,1,64,128]) {
  %a = kiln.Attention(%q, %k, %v, %mask) {k_transposed = 0, scale = 0.125}
  %b = kiln.Attention(%qb, %kt, %vb) {k_transposed = 1, scale = 0.125}
  %c = kiln.Attention(%qf, %kf, %vf) {causal = 1, k_transposed = 0, scale = 0.088388}
  return %a, %b, %c
})");
  ASSERT_TRUE(m.ok()) << m.status();
  auto p = cuda_test::Package(*m);
  ASSERT_TRUE(p.ok()) << p.status();
  int attention = 0;
  for (const auto& t : p->tasks) attention += t.op == "kiln.Attention" && t.engine == "tensorcore";
  EXPECT_EQ(attention, 3) << p->Explain();
  std::string dir = cuda_test::TempDir("attention");
  ASSERT_TRUE(BuildStrictly(*p, dir, nvcc, /*keep=*/true));
  std::vector<const PackageKernel*> kernels;
  for (const PackageKernel& k : p->kernels) kernels.push_back(&k);
  EXPECT_EQ(CheckTensorCorePtx(dir, "kernels", kernels, p->build), 3);
  fs::remove_all(dir);
}

// The tiny decoder's prefill and decode steps (KILN_DECODERS_DIR): the
// kernels a generation step adds (the scatter and decode attention, ArgMax,
// the integer kernels, the fused attention at fp16) through nvcc, and no
// host task.
TEST(CudaNvcc, Decoders) {
  std::string nvcc = Nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "no nvcc";
  const char* decoders = std::getenv("KILN_DECODERS_DIR");
  ASSERT_TRUE(decoders && fs::is_directory(decoders)) << "KILN_DECODERS_DIR must name the decoders";
  std::string root = cuda_test::TempDir("decoders");
  for (const char* step : {"prefill", "decode"}) {
    for (const char* precision : {"fp32", "fp16"}) {
      SCOPED_TRACE(absl::StrCat(step, " ", precision));
      target::CompileOptions o;
      o.precision = std::string(precision) == "fp16" ? target::Precision::kFp16 : target::Precision::kFp32;
      auto p = CompileOnnx(absl::StrCat(decoders, "/tiny_decoder/", step, ".onnx"), o);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_EQ(p->num_host_tasks(), 0) << p->Explain();
      std::string dir = absl::StrCat(root, "/", step, "_", precision);
      if (!BuildStrictly(*p, dir, nvcc, /*keep=*/false)) continue;
      fs::remove_all(dir);
    }
  }
  fs::remove_all(root);
}

TEST(CudaNvcc, DataParallelSteps) {
  std::string nvcc = Nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "no nvcc";
  const char* models = std::getenv("KILN_TRAINING_MODELS_DIR");
  ASSERT_TRUE(models && fs::is_directory(models)) << "KILN_TRAINING_MODELS_DIR must name the training models";
  std::string root = cuda_test::TempDir("data_parallel");
  for (const char* name : {"mlp_classifier", "cnn_classifier", "gpt2_regression"}) {
    SCOPED_TRACE(name);
    const std::string dir = absl::StrCat(models, "/", name);
    auto model = onnx_import::ImportFile(dir + "/model.onnx");
    ASSERT_TRUE(model.ok()) << model.status();
    PassOptions options;
    options.training.params = absl::StrSplit(cuda_test::ReadFileOrEmpty(dir + "/params.txt"), '\n', absl::SkipEmpty());
    options.training.replicas = 2;
    PassManager pm(options);
    ASSERT_TRUE(pm.AddPipeline("training-step,default").ok());
    ASSERT_TRUE(pm.Run(*model).ok());
    auto p = cuda_test::Package(*model, {});
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE(p->collectives());
    const std::string out = absl::StrCat(root, "/", name);
    if (!BuildStrictly(*p, out, nvcc, /*keep=*/false)) continue;
    ASSERT_EQ(Shell(absl::StrCat("nm -D ", out, "/libkiln_model.so > ", out, "/nm.txt")), 0);
    const std::string nm = cuda_test::ReadFileOrEmpty(out + "/nm.txt");
    for (const char* sym : {"U ncclAllReduce", "U ncclCommInitAll", "T kiln_model_run_replicas",
                            "T kiln_model_init_replicas", "T kiln_model_set_nccl_comm", "T kiln_model_load_on_device"})
      EXPECT_TRUE(absl::StrContains(nm, sym)) << sym;
    std::cout << name << ": " << p->bucket_plan.size() << " buckets of " << p->tasks.size() << " tasks, built\n";
    fs::remove_all(out);
  }
  fs::remove_all(root);
}

TEST(CudaNvcc, ExportedModels) {
  std::string nvcc = Nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "no nvcc";
  const char* models = std::getenv("KILN_MODELS_DIR");
  ASSERT_TRUE(models && fs::is_directory(models)) << "KILN_MODELS_DIR must name the exported models";
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(models))
    if (fs::exists(e.path() / "model.onnx")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  ASSERT_GE(names.size(), 8u)
      << "the exported set: tiny_cnn, mlp, bert_encoder, gpt2_block, resnet18/50, mobilenet_v2, ssdlite";
  std::string root = cuda_test::TempDir("exported");
  int matrix = 0;
  for (const std::string& name : names) {
    for (const char* precision : {"fp32", "fp16"}) {
      SCOPED_TRACE(absl::StrCat(name, " ", precision));
      target::CompileOptions o;
      o.precision = std::string(precision) == "fp16" ? target::Precision::kFp16 : target::Precision::kFp32;
      auto start = std::chrono::steady_clock::now();
      auto p = CompileOnnx(absl::StrCat(models, "/", name, "/model.onnx"), o);
      ASSERT_TRUE(p.ok()) << p.status();
      // Every node of the exported set has a GPU kernel: convolutions as
      // implicit GEMMs, pools and depthwise convolutions as window kernels;
      // but the detector's post-processing, whose values are sized at run
      // time, runs on the host with the small shape arithmetic around it
      // (and its input's Resize).
      int other_host_tasks = 0;
      for (const target::cuda::PackageTask& t : p->tasks)
        other_host_tasks += t.kind == target::cuda::PackageTask::Kind::kHost &&
                            !absl::StrContains(t.reason, "known only at run time") &&
                            !absl::StrContains(t.reason, "its operands are on the host");
      EXPECT_LE(other_host_tasks, name == "ssdlite" ? 1 : 0) << p->Explain();
      if (name != "ssdlite") {
        EXPECT_EQ(p->num_host_tasks(), 0) << p->Explain();
      }
      std::string dir = absl::StrCat(root, "/", name, "_", precision);
      if (!BuildStrictly(*p, dir, nvcc, /*keep=*/true)) continue;
      std::vector<const PackageKernel*> kernels;
      for (const PackageKernel& k : p->kernels) kernels.push_back(&k);
      int checked = CheckTensorCorePtx(dir, "kernels", kernels, p->build);
      matrix += checked;
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cout << name << " " << precision << ": " << p->tasks.size() << " tasks, " << p->kernels.size()
                << " kernels (" << checked << " TensorCore), " << p->num_host_tasks() << " host tasks, built in "
                << static_cast<int>(seconds) << " s\n";
      fs::remove_all(dir);
    }
  }
  std::cout << matrix << " TensorCore kernels checked\n";
  fs::remove_all(root);
}

TEST(CudaNvcc, Conformance) {
  std::string nvcc = Nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "no nvcc";
  const std::string data = "/usr/share/libonnx-testdata/data";
  if (!fs::is_directory(data)) GTEST_SKIP() << "no ONNX test data";
  auto start = std::chrono::steady_clock::now();
  std::vector<fs::path> models;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"})
    for (const auto& e : fs::directory_iterator(fs::path(data) / suite))
      if (fs::exists(e.path() / "model.onnx")) models.push_back(e.path() / "model.onnx");
  std::sort(models.begin(), models.end());
  // Every accepted model's kernels, once each.
  std::map<std::string, PackageKernel> kernels;
  std::string prelude;
  target::cuda::CudaBuildOptions build;
  int accepted = 0, with_kernels = 0;
  for (const fs::path& m : models) {
    auto p = CompileOnnx(m.string());
    if (!p.ok()) continue;
    ++accepted;
    build = p->build;
    if (prelude.empty()) {
      std::string k = p->Files()["kernels.cu"];
      prelude = k.substr(0, k.find("//===--- "));
    }
    with_kernels += !p->kernels.empty();
    for (const PackageKernel& k : p->kernels) kernels.emplace(k.name, k);
  }
  double compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_GT(accepted, 500) << "the cuda target accepts too few conformance models";

  // A few large translation units, balanced by source size.
  const int kUnits = std::max<int>(1, std::min<int>(8, static_cast<int>(kernels.size() / 40) + 1));
  std::vector<std::string> sources(kUnits, prelude);
  std::vector<std::vector<const PackageKernel*>> members(kUnits);
  std::vector<size_t> sizes(kUnits, 0);
  for (const auto& [name, k] : kernels) {
    int u = static_cast<int>(std::min_element(sizes.begin(), sizes.end()) - sizes.begin());
    absl::StrAppend(&sources[u], "\n", k.source);
    sizes[u] += k.source.size();
    members[u].push_back(&k);
  }
  std::string dir = cuda_test::TempDir("conformance");
  std::string flags;
  for (const std::string& g : build.gencodes) absl::StrAppend(&flags, " -gencode ", g);
  std::vector<std::string> commands;
  for (int u = 0; u < kUnits; ++u) {
    std::string tu = absl::StrCat("unit", u);
    std::ofstream(absl::StrCat(dir, "/", tu, ".cu")) << sources[u];
    commands.push_back(absl::StrCat("cd ", dir, " && '", nvcc, "' -O3 -std=c++17", flags, " ", kStrict,
                                    " -keep -keep-dir . -c ", tu, ".cu -o ", tu, ".o > ", tu, ".log 2>&1"));
  }
  // Two nvcc processes at a time (CI has two cores).
  std::vector<int> rc(kUnits, -1);
  for (int u = 0; u < kUnits; u += 2) {
    auto second = std::async(std::launch::async, [&, u] {
      if (u + 1 < kUnits) rc[u + 1] = Shell(commands[u + 1]);
    });
    rc[u] = Shell(commands[u]);
    second.get();
  }
  int matrix = 0;
  for (int u = 0; u < kUnits; ++u) {
    std::string tu = absl::StrCat("unit", u);
    std::string log = cuda_test::ReadFileOrEmpty(absl::StrCat(dir, "/", tu, ".log"));
    EXPECT_EQ(rc[u], 0) << tu << ":\n" << log.substr(0, 4000);
    EXPECT_EQ(log, "") << tu << " printed warnings";
    if (rc[u] == 0) matrix += CheckTensorCorePtx(dir, tu, members[u], build);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << accepted << " of " << models.size() << " conformance models accepted (" << with_kernels
            << " with GPU kernels); " << kernels.size() << " distinct kernels (" << matrix
            << " TensorCore) in " << kUnits << " translation units; compile " << static_cast<int>(compile_seconds)
            << " s, total " << static_cast<int>(seconds) << " s\n";
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln
