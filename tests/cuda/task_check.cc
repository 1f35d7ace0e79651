//===- task_check.cc - A package's GPU run against its host emulation, task by task ===//
//
// cuda_task_check MODEL_DIR PRECISION ARCH PACKAGE_DIR DUMP_DIR
//
// MODEL_DIR holds an exported model (model.onnx, input_I.npy: what
// scripts/export_models.py writes), or a kiln IR model as model.kir (with
// its model.kir.blobs) beside the inputs, such as a training step from
// `kiln opt`; PACKAGE_DIR is its package from
// `kiln compile MODEL_DIR/model.onnx --target=cuda --precision=PRECISION
// --arch=ARCH`, and DUMP_DIR the arena after each task of one GPU run of it
// (`KILN_CUDA_DUMP_DIR=DUMP_DIR kiln run PACKAGE_DIR --input ...`).
//
// The model is compiled again here (the package must come out the same) and
// emulated on the host. Before each task the emulation takes the GPU's arena
// after the previous task, so every task is judged on the GPU's own inputs:
// one line per task that writes, with the largest difference of each buffer
// it wrote relative to that buffer's largest magnitude, and the first
// element that differs by more than the tolerance (1e-2; 1e-5 for f32
// models, whose GEMMs run in tf32 on TensorCores: differences up to 1e-3
// are tf32 rounding and are reported, not failed). Exits 1 when a task
// differs, 2 on bad arguments or when the runs cannot be compared.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/ir/dtype_dispatch.h"
#include "graph/io/npy.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "graph/support/status.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::string> ReadAll(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The value of element i of `bytes` as `dtype`.
double Element(const unsigned char* bytes, DType dtype, int64_t i) {
  Tensor t(dtype, {1});
  std::memcpy(t.raw(), bytes + i * static_cast<int64_t>(DTypeSize(dtype)), DTypeSize(dtype));
  return t.GetDouble(0);
}

int Main(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: cuda_task_check MODEL_DIR PRECISION ARCH PACKAGE_DIR DUMP_DIR\n";
    return 2;
  }
  const fs::path model_dir = argv[1], package_dir = argv[4], dump_dir = argv[5];
  const std::string precision = argv[2], arch = argv[3];
  absl::StatusOr<Model> m = absl::NotFoundError("no model");
  if (fs::exists(model_dir / "model.kir")) {
    const fs::path kir = model_dir / "model.kir";
    BlobStore blobs;
    absl::Status loaded = absl::OkStatus();
    if (fs::exists(kir.string() + ".blobs")) loaded = LoadBlobStore(kir.string() + ".blobs", &blobs);
    auto text = ReadAll(kir);
    if (!loaded.ok()) m = loaded;
    else if (!text.ok()) m = text.status();
    else m = ParseModel(*text, kir.string(), &blobs);
  } else {
    m = onnx_import::ImportFile((model_dir / "model.onnx").string());
  }
  if (!m.ok()) {
    std::cerr << "cuda_task_check: " << m.status().message() << "\n";
    return 2;
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < m->graph->inputs().size(); ++i) {
    auto t = ReadNpy((model_dir / absl::StrCat("input_", i, ".npy")).string());
    if (!t.ok()) {
      std::cerr << "cuda_task_check: " << t.status().message() << "\n";
      return 2;
    }
    inputs.push_back(*std::move(t));
  }
  auto target = cuda_test::CudaTarget();
  if (absl::Status s = cuda_test::Optimize(*m, *target); !s.ok()) {
    std::cerr << "cuda_task_check: " << s.message() << "\n";
    return 2;
  }
  target::CompileOptions options;
  options.precision = precision == "fp16"   ? target::Precision::kFp16
                      : precision == "bf16" ? target::Precision::kBf16
                                            : target::Precision::kFp32;
  options.settings.push_back({"arch", arch});
  auto p = target::cuda::BuildCudaPackage(*m, *target, options);
  if (!p.ok()) {
    std::cerr << "cuda_task_check: " << p.status().message() << "\n";
    return 2;
  }
  auto launcher = ReadAll(package_dir / "model.cc");
  if (!launcher.ok() || *launcher != p->Files()["model.cc"]) {
    std::cerr << "cuda_task_check: " << package_dir.string()
              << "/model.cc is not what this compile of the model gives (other flags or another kiln?)\n";
    return 2;
  }
  // The launcher's tasks leave out views (they compute nothing): its task
  // index of each package task, -1 for a view.
  std::vector<int> launcher_task(p->tasks.size(), -1);
  int next_index = 0;
  for (size_t i = 0; i < p->tasks.size(); ++i)
    if (p->tasks[i].kind != target::cuda::PackageTask::Kind::kView) launcher_task[i] = next_index++;
  auto dump_of = [&](int index) { return dump_dir / absl::StrCat("task_", index, ".bin"); };
  const double tolerance = precision == "fp32" ? 1e-5 : 1e-2;
  const double tf32 = 1e-3;
  int differing = 0;
  std::vector<unsigned char> gpu;
  cuda_test::EmulationHooks hooks;
  hooks.before = [&](size_t ti, std::vector<unsigned char>& arena) -> absl::Status {
    // The GPU's arena after the last task before this one that it ran.
    int previous = -1;
    for (size_t i = 0; i < ti; ++i)
      if (launcher_task[i] >= 0) previous = launcher_task[i];
    if (previous < 0) return absl::OkStatus();
    KILN_ASSIGN_OR_RETURN(std::string bytes, ReadAll(dump_of(previous)));
    if (static_cast<int64_t>(bytes.size()) != p->arena_bytes)
      return absl::InvalidArgumentError(absl::StrCat(dump_of(previous).string(), " holds ", bytes.size(),
                                                     " bytes; the arena is ", p->arena_bytes));
    std::memcpy(arena.data(), bytes.data(), bytes.size());
    return absl::OkStatus();
  };
  hooks.after = [&](size_t ti, const std::vector<cuda_test::WrittenBuffer>& written) {
    if (written.empty()) return;
    const target::cuda::PackageTask& t = p->tasks[ti];
    if (launcher_task[ti] < 0) return;
    auto bytes = ReadAll(dump_of(launcher_task[ti]));
    std::string kernels;
    for (const auto& l : t.launches) absl::StrAppend(&kernels, kernels.empty() ? "" : " ", p->kernels[l.kernel].name);
    std::cout << "task " << ti << " " << t.node << " [" << (kernels.empty() ? "host" : kernels) << "]";
    if (!bytes.ok()) {
      std::cout << ": " << bytes.status().message() << "\n";
      ++differing;
      return;
    }
    bool bad = false;
    for (const cuda_test::WrittenBuffer& w : written) {
      const target::cuda::PackageBuffer& b = p->buffers[w.buffer];
      const unsigned char* g = reinterpret_cast<const unsigned char*>(bytes->data()) + b.offset;
      std::cout << "\n  " << b.name << ": ";
      if (w.dtype == DType::kUndefined || !IsFloat(w.dtype)) {
        int64_t at = -1;
        for (int64_t i = 0; i < w.bytes && at < 0; ++i)
          if (g[i] != w.data[i]) at = i;
        if (at < 0) {
          std::cout << "same bytes";
        } else {
          std::cout << "DIFFERS from byte " << at << " of " << w.bytes;
          bad = true;
        }
        continue;
      }
      const int64_t n = w.bytes / static_cast<int64_t>(DTypeSize(w.dtype));
      double scale = 0, worst = 0;
      int64_t at = -1, nan = 0;
      for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(Element(w.data, w.dtype, i)));
      scale = std::max(scale, 1e-30);
      for (int64_t i = 0; i < n; ++i) {
        const double a = Element(g, w.dtype, i), e = Element(w.data, w.dtype, i);
        if (std::isnan(a) != std::isnan(e)) {
          ++nan;
          if (at < 0) at = i;
          continue;
        }
        const double d = std::abs(a - e) / scale;
        if (d > worst) worst = d;
        if (d > tolerance && at < 0) at = i;
      }
      const bool fails = nan > 0 || worst > std::max(tolerance, precision == "fp32" ? tf32 : 0.0);
      std::cout << absl::StrFormat("%s, largest difference %.2e of %.3g", fails ? "DIFFERS" : "ok", worst, scale);
      if (nan) std::cout << ", " << nan << " NaN where the emulation has none (or the reverse)";
      if (at >= 0)
        std::cout << absl::StrFormat("; first over %.0e at element %d of %d: GPU %.6g, emulation %.6g", tolerance, at,
                                     n, Element(g, w.dtype, at), Element(w.data, w.dtype, at));
      bad |= fails;
    }
    std::cout << "\n";
    differing += bad;
  };
  auto out = cuda_test::Emulate(*p, inputs, &hooks);
  if (!out.ok()) {
    std::cerr << "cuda_task_check: " << out.status().message() << "\n";
    return 2;
  }
  std::cout << differing << " of " << p->tasks.size() << " tasks differ\n";
  return differing ? 1 : 0;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) { return kiln::Main(argc, argv); }
