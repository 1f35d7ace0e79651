//===- cuda_launcher.cc - The files of a cuda package ----------------------===//
//
// A package directory holds:
//   kernels.cu           the CUDA prelude, every kernel, the table of their
//                        __global__ functions
//   model.cc             the host launcher: this model's tables (buffers,
//                        kernels, tasks, inputs, outputs), then the
//                        model-independent runtime behind the C API
//   kiln_model.h         the C API
//   constants.bin        the constants region, uploaded once at load
//   host_graph.kir(.blobs)  the optimized graph, when nodes run on the host
//   placement.txt        each task's engine and reason (--explain-placement)
//   build.sh, CMakeLists.txt, README.md
//
// The text that is the same in every package (kiln_model.h, model.cc
// before and after this model's tables, the templates of README.md,
// CMakeLists.txt and build.sh) is real source under target/cuda/package/,
// embedded into kiln at build time (package_files.h); this file writes the
// model's part, fills the templates' @NAME@ fields in, and writes the files
// into the package directory. The build they describe (--arch's gencodes,
// nvcc's command line) is read here from the compile options too.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "graph/support/status.h"
#include "target/cuda/cuda_package.h"
#include "target/cuda/cuda_target.h"
#include "target/cuda/package_files.h"

namespace kiln::target::cuda {
namespace {

// A C string literal.
std::string Quote(absl::string_view s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\', r += c;
    else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      r += absl::StrFormat("\\%03o", static_cast<unsigned char>(c));
    else r += c;
  }
  // A '?' pair could form a trigraph in older dialects; '*/' would end a comment.
  return r + "\"";
}

// One line of text safe inside a // comment.
std::string CommentText(absl::string_view s) {
  std::string r(s);
  for (char& c : r)
    if (c == '\n' || c == '\r' || c == '\\') c = ' ';
  return r;
}

const char* RegionName(const PackageBuffer& b) {
  return b.kind == PackageBuffer::Kind::kConstant ? "KILN_CONSTANTS" : "KILN_ARENA";
}

const char* KindName(PackageBuffer::Kind k) {
  switch (k) {
    case PackageBuffer::Kind::kInput: return "input";
    case PackageBuffer::Kind::kOutput: return "output";
    case PackageBuffer::Kind::kIntermediate: return "intermediate";
    case PackageBuffer::Kind::kConstant: return "constant";
    case PackageBuffer::Kind::kWorkspace: return "workspace";
  }
  return "";
}

const char* KindEnum(PackageBuffer::Kind k) {
  switch (k) {
    case PackageBuffer::Kind::kInput: return "KILN_INPUT";
    case PackageBuffer::Kind::kOutput: return "KILN_OUTPUT";
    case PackageBuffer::Kind::kIntermediate: return "KILN_INTERMEDIATE";
    case PackageBuffer::Kind::kConstant: return "KILN_CONSTANT";
    case PackageBuffer::Kind::kWorkspace: return "KILN_WORKSPACE";
  }
  return "KILN_INTERMEDIATE";
}

// The initializer of a TmaDesc: argument, dtype, rank, dims, strides, box,
// swizzle.
std::string TmaMapEntry(const TmaMap& t) {
  const char* dtype = t.dtype == DType::kF16    ? "CU_TENSOR_MAP_DATA_TYPE_FLOAT16"
                      : t.dtype == DType::kBF16 ? "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"
                                                : "CU_TENSOR_MAP_DATA_TYPE_FLOAT32";
  const char* swizzle = t.swizzle_bytes == 128  ? "CU_TENSOR_MAP_SWIZZLE_128B"
                        : t.swizzle_bytes == 64 ? "CU_TENSOR_MAP_SWIZZLE_64B"
                                                : "CU_TENSOR_MAP_SWIZZLE_32B";
  auto list = [](const std::vector<int64_t>& v) { return v.empty() ? std::string("0") : absl::StrJoin(v, ", "); };
  return absl::StrCat(t.arg, ", ", dtype, ", ", t.dims.size(), ", {", list(t.dims), "}, {", list(t.strides), "}, {",
                      list(t.box), "}, ", swizzle);
}

std::string ModelSource(const CudaPackage& p) {
  std::string s = absl::StrCat(
      "// model.cc - the host launcher of a kiln cuda package (model ", CommentText(p.model_name), ", precision ",
      p.precision, ", ", p.build.arch_name,
      ").\n//\n// First this model's tables: device buffers (offsets planned by liveness in one arena, or in the\n"
      "// constants region read from constants.bin), kernels and their variants per GPU architecture,\n"
      "// launches and their arguments, tasks in order, inputs and outputs. Then the runtime behind the C\n"
      "// API of kiln_model.h, the same in every package.\n");
  // A data-parallel step's launcher calls NCCL (the build links it).
  absl::StrAppend(&s, "\n#define KILN_NCCL ", p.collectives() ? 1 : 0, "\n");
  absl::StrAppend(&s, "\n", package_files::kLauncherPrologue);
  absl::StrAppend(&s, "\n//===----------------------------------------------------------------------===//\n"
                      "// This model.\n"
                      "//===----------------------------------------------------------------------===//\n\n");
  absl::StrAppend(&s, "static const int64_t kArenaBytes = ", p.arena_bytes, ";  // ", p.naive_bytes,
                  " without reuse\n");
  absl::StrAppend(&s, "static const int64_t kConstantBytes = ", p.constants.size(), ";\n");
  absl::StrAppend(&s, "static const int kNumHostTasks = ", p.num_host_tasks(), ";\n");
  absl::StrAppend(&s, "static const int kReplicas = ", p.replicas, ";  // a data-parallel step's, as compiled\n\n");

  absl::StrAppend(&s, "static const BufferDesc kBuffers[] = {\n");
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const PackageBuffer& b = p.buffers[i];
    int root = static_cast<int>(i);
    while (p.buffers[root].alias_of >= 0) root = p.buffers[root].alias_of;
    absl::StrAppend(&s, "    {", RegionName(b), ", ", b.offset, ", ", b.bytes, ", ", KindEnum(b.kind), ", ", root,
                    "},  // ", i, ": ", KindName(b.kind), " ", CommentText(b.name));
    if (b.alias_of >= 0) absl::StrAppend(&s, " (a view of ", b.alias_of, ")");
    absl::StrAppend(&s, "\n");
  }
  absl::StrAppend(&s, "    {0, 0, 0, 0, 0}};\n");
  absl::StrAppend(&s, "static const int kNumBuffers = ", p.buffers.size(), ";\n\n");

  std::string tma_maps;
  int num_tma = 0;
  absl::StrAppend(&s, "static const VariantDesc kVariants[] = {\n");
  int function = 0;
  std::vector<int> first_variant;
  for (const PackageKernel& k : p.kernels) {
    first_variant.push_back(function);
    for (const CudaVariant& v : k.variants) {
      absl::StrAppend(&s, "    {", function, ", ", v.min_sm, ", {", v.grid[0], ", ", v.grid[1], ", ", v.grid[2], "}, ",
                      v.block_threads, ", ", v.shared_bytes, ", ", num_tma, ", ", v.tma.size(), ", ",
                      v.persistent ? 1 : 0, "},  // ", v.function,
                      "\n");
      for (const TmaMap& t : v.tma) {
        absl::StrAppend(&tma_maps, "    {", TmaMapEntry(t), "},  // ", num_tma, ": ", v.function, "\n");
        ++num_tma;
      }
      ++function;
    }
  }
  absl::StrAppend(&s, "    {0, 0, {0, 0, 0}, 0, 0, 0, 0, 0}};\n\n");
  absl::StrAppend(&s, "static const int kNumTmaMaps = ", num_tma, ";\n");
  absl::StrAppend(&s, "static const TmaDesc kTmaMaps[] = {\n", tma_maps,
                  "    {0, CU_TENSOR_MAP_DATA_TYPE_UINT8, 0, {0}, {0}, {0}, CU_TENSOR_MAP_SWIZZLE_NONE}};\n\n");
  absl::StrAppend(&s, "static const int kNumKernels = ", p.kernels.size(), ";\n");
  absl::StrAppend(&s, "static const KernelDesc kKernels[] = {\n");
  for (size_t k = 0; k < p.kernels.size(); ++k)
    absl::StrAppend(&s, "    {", Quote(p.kernels[k].name), ", ", first_variant[k], ", ", p.kernels[k].variants.size(),
                    "},\n");
  absl::StrAppend(&s, "    {\"\", 0, 0}};\n\n");

  std::vector<int> args, zero_args;
  std::string launches = "static const LaunchDesc kLaunches[] = {\n";
  std::string tasks = "static const TaskDesc kTasks[] = {\n";
  std::vector<int> host_io;
  std::vector<int> task_index;  // per package task that the launcher runs: its index in kTasks
  int num_launches = 0, num_tasks = 0;
  for (const PackageTask& t : p.tasks) {
    if (t.kind == PackageTask::Kind::kView) continue;
    task_index.push_back(num_tasks);
    std::string comment = absl::StrCat("  // ", num_tasks, ": ", CommentText(t.node), " = ", t.op, " -> ", t.engine,
                                       ": ", CommentText(t.reason));
    if (!t.plan.empty()) absl::StrAppend(&comment, " [", CommentText(t.plan), "]");
    if (t.kind == PackageTask::Kind::kKernel) {
      absl::StrAppend(&tasks, comment, "\n    {KILN_TASK_KERNEL, ", Quote(t.node), ", ", num_launches, ", ",
                      t.launches.size(), ", -1, 0, 0, 0},\n");
      for (const PackageTask::Launch& l : t.launches) {
        const PackageKernel& k = p.kernels[l.kernel];
        absl::StrAppend(&launches, "    {", l.kernel, ", ", args.size(), ", ", l.args.size(), ", ",
                        zero_args.size(), ", ", k.zero_args.size(), "},  // ", CommentText(t.node), ": ", k.name,
                        "\n");
        args.insert(args.end(), l.args.begin(), l.args.end());
        zero_args.insert(zero_args.end(), k.zero_args.begin(), k.zero_args.end());
        ++num_launches;
      }
    } else if (t.kind == PackageTask::Kind::kCollective) {
      absl::StrAppend(&tasks, comment, "\n    {KILN_TASK_COLLECTIVE, ", Quote(t.node), ", 0, 0, -1, 0, 0, 0},\n");
    } else {
      absl::StrAppend(&tasks, comment, "\n    {KILN_TASK_HOST, ", Quote(t.node), ", 0, 0, ", t.host_node, ", ",
                      host_io.size(), ", ", t.host_inputs.size(), ", ", t.host_outputs.size(), "},\n");
      host_io.insert(host_io.end(), t.host_inputs.begin(), t.host_inputs.end());
      host_io.insert(host_io.end(), t.host_outputs.begin(), t.host_outputs.end());
    }
    ++num_tasks;
  }
  absl::StrAppend(&launches, "    {0, 0, 0, 0, 0}};\n\n");
  absl::StrAppend(&tasks, "    {0, \"\", 0, 0, -1, 0, 0, 0}};\n\n");
  auto int_table = [](const char* name, const std::vector<int>& v) {
    std::string r = absl::StrCat("static const int ", name, "[] = {");
    for (size_t i = 0; i < v.size(); ++i) absl::StrAppend(&r, i % 16 == 0 ? "\n    " : " ", v[i], ",");
    return r + "\n    0};\n";
  };
  absl::StrAppend(&s, int_table("kArgs", args), int_table("kZeroArgs", zero_args), "\n", launches);

  std::vector<int64_t> dims;
  std::string values = "static const ValueDesc kValues[] = {\n";
  for (size_t i = 0; i < p.values.size(); ++i) {
    const PackageValue& v = p.values[i];
    int64_t bytes = static_cast<int64_t>(DTypeSize(v.dtype));
    for (int64_t d : v.dims) bytes *= d;
    if (v.dynamic) bytes = 0;  // known when the producer has run
    std::vector<std::string> flags;
    if (v.on_host) flags.push_back("KILN_ON_HOST");
    if (v.dynamic) flags.push_back("KILN_DYNAMIC");
    absl::StrAppend(&values, "    {", Quote(v.name), ", ", v.buffer, ", ", DTypeToOnnx(v.dtype), ", ",
                    Quote(DTypeName(v.dtype)), ", ", v.ranked ? static_cast<int>(v.dims.size()) : -1, ", ", dims.size(),
                    ", ", bytes, ", ", flags.empty() ? "0" : absl::StrJoin(flags, " | "), "},  // ", i, ": ",
                    DTypeName(v.dtype), v.ranked ? absl::StrCat("[", absl::StrJoin(v.dims, ","), "]") : "[...]",
                    v.dynamic ? " (-1: known at run time)" : "", "\n");
    dims.insert(dims.end(), v.dims.begin(), v.dims.end());
  }
  absl::StrAppend(&values, "    {\"\", -1, 0, \"\", 0, 0, 0, 0}};\n");
  absl::StrAppend(&s, "static const int64_t kDims[] = {");
  for (size_t i = 0; i < dims.size(); ++i) absl::StrAppend(&s, i % 16 == 0 ? "\n    " : " ", dims[i], ",");
  absl::StrAppend(&s, "\n    0};\n");
  absl::StrAppend(&s, "static const int kNumValues = ", p.values.size(), ";\n", values, "\n");
  absl::StrAppend(&s, int_table("kHostIo", host_io), "\n");
  absl::StrAppend(&s, "static const int kNumTasks = ", num_tasks, ";\n", tasks);
  absl::StrAppend(&s, "static const int kNumInputs = ", p.inputs.size(), ";\n", int_table("kInputs", p.inputs));
  absl::StrAppend(&s, "static const int kNumOutputs = ", p.outputs.size(), ";\n", int_table("kOutputs", p.outputs));

  // A data-parallel step's buckets (kTasks indices) and their tensors, bucket by bucket.
  std::vector<int> kept(p.tasks.size(), -1);  // package task -> kTasks index
  for (size_t i = 0, k = 0; i < p.tasks.size(); ++i)
    if (p.tasks[i].kind != PackageTask::Kind::kView) kept[i] = task_index[k++];
  // A bucket bound to a view task (nothing runs there) moves to the next task that runs.
  auto launcher_task = [&](int t, bool later) {
    if (t < 0) return -1;
    for (; t >= 0 && t < static_cast<int>(p.tasks.size()); t += later ? 1 : -1)
      if (kept[t] >= 0) return kept[t];
    return -1;
  };
  std::string items = "static const CollectiveDesc kCollectives[] = {\n";
  std::string buckets = "static const BucketDesc kBuckets[] = {\n";
  int num_items = 0;
  for (size_t b = 0; b < p.bucket_plan.size(); ++b) {
    const PackageBucket& pb = p.bucket_plan[b];
    const int first = num_items;
    for (int t : pb.tasks)
      for (const CollectiveItem& c : p.tasks[t].collective) {
        absl::StrAppend(&items, "    {", c.input, ", ", c.output, ", ", c.elements, ", ", DTypeToOnnx(c.dtype), "},  // ",
                        CommentText(p.tasks[t].node), "\n");
        ++num_items;
      }
    absl::StrAppend(&buckets, "    {", launcher_task(pb.after, false), ", ", launcher_task(pb.before, true), ", ", first,
                    ", ", num_items - first, "},  // bucket ", b, ": ", pb.bytes, " bytes\n");
  }
  absl::StrAppend(&items, "    {0, 0, 0, 0}};\n");
  absl::StrAppend(&buckets, "    {0, 0, 0, 0}};\n");
  absl::StrAppend(&s, "\nstatic const int kNumBuckets = ", p.bucket_plan.size(), ";\n", buckets, items);
  absl::StrAppend(&s, "\n", package_files::kLauncherRuntime);
  return s;
}

std::string KernelsSource(const CudaPackage& p) {
  std::string s = absl::StrCat("// kernels.cu - the kernels of a kiln cuda package (model ", CommentText(p.model_name),
                               ", precision ", p.precision, ", ", p.build.arch_name, ").\n\n");
  s += CudaPrelude();
  s += "\n";
  for (const PackageKernel& k : p.kernels) {
    absl::StrAppend(&s, "//===--- ", k.name, " ", std::string(k.name.size() < 60 ? 60 - k.name.size() : 3, '-'),
                    "===//\n");
    absl::StrAppend(&s, k.source);
    if (!k.source.empty() && k.source.back() != '\n') s += "\n";
    s += "\n";
  }
  absl::StrAppend(&s, "// Every variant's __global__ function, in the order of model.cc's kVariants.\n");
  absl::StrAppend(&s, "extern \"C\" const void* const kiln_kernel_functions[] = {\n");
  for (const PackageKernel& k : p.kernels)
    for (const CudaVariant& v : k.variants) absl::StrAppend(&s, "    reinterpret_cast<const void*>(&", v.function, "),\n");
  absl::StrAppend(&s, "    nullptr};\n");
  return s;
}

std::string Readme(const CudaPackage& p) {
  int matrix = 0;
  for (const PackageKernel& k : p.kernels) matrix += k.matrix;
  std::string s = absl::StrReplaceAll(package_files::kReadme,
                                      {{"@MODEL@", p.model_name},
                                       {"@PRECISION@", p.precision},
                                       {"@ARCH@", p.build.arch_name},
                                       {"@TASKS@", absl::StrCat(p.tasks.size())},
                                       {"@KERNELS@", absl::StrCat(p.kernels.size())},
                                       {"@MATRIX_KERNELS@", absl::StrCat(matrix)},
                                       {"@HOST_TASKS@", absl::StrCat(p.num_host_tasks())}});
  if (p.num_host_tasks() > 0) absl::StrAppend(&s, "\n", package_files::kReadmeHostTasks);
  if (p.collectives()) absl::StrAppend(&s, "\n", package_files::kReadmeDataParallel);
  return s;
}

std::string CMakeText(const CudaPackage& p) {
  std::vector<std::string> archs;
  for (const std::string& g : p.build.gencodes) {
    // arch=compute_80,code=sm_80 -> 80-real; arch=compute_80,code=compute_80 -> 80-virtual
    size_t c = g.find("code=") + 5;
    std::string code = g.substr(c);
    if (code.rfind("sm_", 0) == 0) archs.push_back(code.substr(3) + "-real");
    else archs.push_back(code.substr(8) + "-virtual");
  }
  return absl::StrReplaceAll(
      package_files::kCMakeLists,
      {{"@CUDA_ARCHITECTURES@", absl::StrJoin(archs, ";")},
       {"@NCCL@", p.collectives() ? "# A data-parallel step: the launcher calls NCCL.\n"
                                    "find_package(CUDAToolkit REQUIRED)\n"
                                    "find_library(KILN_NCCL nccl HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)\n"
                                    "target_link_libraries(kiln_model PRIVATE ${KILN_NCCL})\n"
                                  : ""}});
}

std::string BuildScript(const CudaPackage& p) {
  return absl::StrReplaceAll(package_files::kBuildScript,
                             {{"@NVCC_COMMAND@", NvccCommand(p.build, "\"$NVCC\"", p.collectives())}});
}

}  // namespace

absl::StatusOr<CudaBuildOptions> CudaBuildOptionsFrom(const CompileOptions& options) {
  KILN_RETURN_IF_ERROR(CheckSettings(options, CudaDescription()));
  CudaBuildOptions b;
  const std::string products = options.Setting("fp32-products");
  if (!products.empty() && products != "tf32" && products != "3xtf32")
    return absl::InvalidArgumentError(
        absl::StrCat("--fp32-products must be tf32 or 3xtf32 (default: tf32), not '", products, "'"));
  const bool split = products == "3xtf32";
  const std::string gemm = options.Setting("sm90a-gemm");
  if (!gemm.empty() && gemm != "warp-specialized" && gemm != "uniform")
    return absl::InvalidArgumentError(
        absl::StrCat("--sm90a-gemm must be warp-specialized or uniform (default: warp-specialized), not '", gemm, "'"));
  const bool specialized = gemm != "uniform";
  const std::string arch = options.Setting("arch");
  if (arch.empty() || arch == "sm_80+sm_90a") {
    b.arch = {80, true, split, specialized};
    b.gencodes = {"arch=compute_80,code=sm_80", "arch=compute_80,code=compute_80", "arch=compute_90a,code=sm_90a"};
    return b;
  }
  b.arch_name = arch;
  if (arch == "sm_90a") {
    b.arch = {90, true, split, specialized};
    b.gencodes = {"arch=compute_90a,code=sm_90a"};
    return b;
  }
  for (int sm : {80, 86, 89, 90})
    if (arch == absl::StrCat("sm_", sm)) {
      b.arch = {sm, false, split, specialized};
      b.gencodes = {absl::StrFormat("arch=compute_%d,code=sm_%d", sm, sm),
                    absl::StrFormat("arch=compute_%d,code=compute_%d", sm, sm)};
      return b;
    }
  return absl::InvalidArgumentError(
      absl::StrCat("--arch must be sm_80, sm_86, sm_89, sm_90 or sm_90a (default: sm_80 and sm_90a), not '", arch, "'"));
}

std::string NvccCommand(const CudaBuildOptions& build, const std::string& nvcc, bool nccl) {
  // --threads 0: the gencode targets compile in parallel, one per core.
  std::string s = absl::StrCat(nvcc, " -O3 -std=c++17 --threads 0");
  for (const std::string& g : build.gencodes) absl::StrAppend(&s, " -gencode ", g);
  absl::StrAppend(&s, " -shared -Xcompiler -fPIC -o libkiln_model.so kernels.cu model.cc");
  if (nccl) absl::StrAppend(&s, " -lnccl");  // NCCL of the toolkit (lib64 is on nvcc's link path)
  return s;
}

absl::Status WriteCudaPackage(const CudaPackage& package, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create the package directory '", dir, "'", ec ? ": " + ec.message() : ""));
  // A library built from an earlier package no longer matches, and an
  // earlier package's host graph (and the provider that runs it) is not
  // this one's.
  std::filesystem::remove(std::filesystem::path(dir) / "libkiln_model.so", ec);
  for (const char* stale : {"host_graph.kir", "host_graph.kir.blobs", "libkiln_hostops.so"})
    std::filesystem::remove(std::filesystem::path(dir) / stale, ec);
  for (const auto& [name, bytes] : package.Files()) {
    std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) return absl::InvalidArgumentError(absl::StrCat("cannot write '", path, "'"));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) return absl::InvalidArgumentError(absl::StrCat("cannot write '", path, "'"));
    if (name == "build.sh") std::filesystem::permissions(path, std::filesystem::perms::owner_exec |
                                                                   std::filesystem::perms::group_exec |
                                                                   std::filesystem::perms::others_exec,
                                                         std::filesystem::perm_options::add, ec);
  }
  return absl::OkStatus();
}

std::string LauncherHeader() { return std::string(package_files::kKilnModelH); }
std::string LauncherRuntime() {
  return absl::StrCat("\n", package_files::kLauncherPrologue, "\n", package_files::kLauncherRuntime);
}

std::map<std::string, std::string> CudaPackage::Files() const {
  std::map<std::string, std::string> f;
  f["kernels.cu"] = KernelsSource(*this);
  f["model.cc"] = ModelSource(*this);
  f["kiln_model.h"] = LauncherHeader();
  f["constants.bin"] = constants;
  f["placement.txt"] = Explain();
  f["README.md"] = Readme(*this);
  f["CMakeLists.txt"] = CMakeText(*this);
  f["build.sh"] = BuildScript(*this);
  if (!host_graph_kir.empty()) f["host_graph.kir"] = host_graph_kir;
  if (!host_graph_blobs.empty()) f["host_graph.kir.blobs"] = host_graph_blobs;
  return f;
}

}  // namespace kiln::target::cuda
