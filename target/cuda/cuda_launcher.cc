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
//===----------------------------------------------------------------------===//
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "target/cuda/cuda_package.h"

namespace kiln::target::cuda {
namespace {

constexpr char kHeader[] = R"KILN(/* kiln_model.h - the C API of a kiln cuda package.
 *
 * A package is one compiled model: libkiln_model.so (built from kernels.cu
 * and model.cc by build.sh or CMake) and the data files beside it. Load it
 * with the package directory, run it as often as needed, free it:
 *
 *   char err[512];
 *   kiln_model* m = kiln_model_load("path/to/package", err, sizeof err);
 *   if (!m) { fprintf(stderr, "%s\n", err); ... }
 *   const void* inputs[] = {x};          // host or device pointers
 *   void* outputs[] = {y};
 *   if (kiln_model_run(m, inputs, outputs, err, sizeof err) != 0) ...
 *   kiln_model_free(m);
 *
 * Inputs and outputs are dense row-major tensors of the types the queries
 * below describe, given in the order of the queries; each pointer may be
 * host memory or device memory of the current device. A model runs on the
 * device current when it was loaded, on a stream of its own; a run returns
 * when its outputs are written. One model must not run on two threads at
 * once.
 *
 * Nodes that no GPU kernel handles run on the host ("host tasks"): the
 * launcher copies their operands to the host, calls a host-op provider and
 * copies the results back. `kiln run` provides kiln's reference kernels;
 * an application sets a provider with kiln_model_set_host_ops, or names a
 * library exporting `const kiln_host_ops* kiln_host_ops_v1(void)` in the
 * environment variable KILN_HOSTOPS_LIBRARY, or leaves kiln's
 * libkiln_hostops.so (which `kiln compile` copies into a package that has
 * host tasks) beside libkiln_model.so. A package without host tasks needs
 * none.
 */
#ifndef KILN_MODEL_H_
#define KILN_MODEL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_model kiln_model;

/* Element types: the codes of ONNX's TensorProto.DataType. */
enum {
  KILN_F32 = 1, KILN_U8 = 2, KILN_I8 = 3, KILN_U16 = 4, KILN_I16 = 5, KILN_I32 = 6, KILN_I64 = 7,
  KILN_BOOL = 9, KILN_F16 = 10, KILN_F64 = 11, KILN_U32 = 12, KILN_U64 = 13, KILN_BF16 = 16
};

typedef struct kiln_tensor_info {
  const char* name;
  int dtype;             /* KILN_F32, ... */
  const char* dtype_name; /* "f32", "f16", ... */
  int rank;
  const int64_t* dims;
  size_t bytes;
} kiln_tensor_info;

/* Loads the package in `package_dir` on the current CUDA device: device
 * memory, the constants, the kernels' variants for the device. NULL on
 * failure, with the reason in err. With the environment variable
 * KILN_CUDA_SM set to a compute capability below the device's (such as 80
 * on a Hopper GPU), the kernels' variants are those a device of that
 * capability would run: the mma.sync code instead of wgmma and TMA. With
 * KILN_CUDA_DUMP_DIR naming a directory, every run writes the whole arena
 * after each task to DIR/task_<index>.bin (the stream synchronized first,
 * so a kernel that faults is named): the device memory a host emulation of
 * the package can be compared with, task by task. */
kiln_model* kiln_model_load(const char* package_dir, char* err, size_t err_len);

/* Runs the model once. 0 on success; otherwise non-zero with the reason in err. */
int kiln_model_run(kiln_model* model, const void* const* inputs, void* const* outputs, char* err, size_t err_len);

/* Runs the model on device memory in place: the inputs are read where
 * they are and the outputs written where they are (device pointers of the
 * current device, valid until the call returns); no copies are made for
 * them. 0 on success. */
int kiln_model_run_device(kiln_model* model, const void* const* inputs, void* const* outputs, char* err,
                          size_t err_len);

void kiln_model_free(kiln_model* model);

int kiln_model_num_inputs(const kiln_model* model);
int kiln_model_num_outputs(const kiln_model* model);
/* NULL when i is out of range. */
const kiln_tensor_info* kiln_model_input(const kiln_model* model, int i);
const kiln_tensor_info* kiln_model_output(const kiln_model* model, int i);

/* The device the model was loaded on, as "NAME (sm_XY)". */
const char* kiln_model_device(const kiln_model* model);
/* Nodes that run on the host. */
int kiln_model_num_host_tasks(const kiln_model* model);

/* Host tasks. */
typedef struct kiln_host_tensor {
  int dtype;
  int rank;
  const int64_t* dims;
  void* data; /* NULL: an output nobody reads */
  size_t bytes;
} kiln_host_tensor;

typedef struct kiln_host_ops {
  /* Reads the model's graph (host_graph.kir's text and the blobs file's
   * bytes, which may be empty); returns a handle, or NULL with err set. */
  void* (*load)(void* user, const char* graph_kir, size_t kir_len, const void* blobs, size_t blobs_len, char* err,
                size_t err_len);
  /* Runs node `node` (its index in the graph's main body) on `inputs` (the
   * node's operands in order), writing `outputs`. 0 on success. */
  int (*run)(void* user, void* graph, int node, const kiln_host_tensor* inputs, int num_inputs,
             kiln_host_tensor* outputs, int num_outputs, char* err, size_t err_len);
  void (*release)(void* user, void* graph);
} kiln_host_ops;

/* Sets the host-op provider (before the first run). */
void kiln_model_set_host_ops(kiln_model* model, const kiln_host_ops* ops, void* user);

#ifdef __cplusplus
}
#endif

#endif /* KILN_MODEL_H_ */
)KILN";

constexpr char kPrologue[] = R"KILN(
#include <cuda.h>  // CUtensorMap and cuTensorMapEncodeTiled's signature (found through the runtime)
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln_model.h"

namespace {

// Where a buffer lives: the arena (placed by liveness at compile time) or
// the constants region (constants.bin).
enum { KILN_ARENA = 0, KILN_CONSTANTS = 1 };
// A buffer's kind (KILN_INPUT, ...) and its root: itself, or the buffer a
// view names.
enum { KILN_INTERMEDIATE = 0, KILN_INPUT = 1, KILN_OUTPUT = 2, KILN_CONSTANT = 3, KILN_WORKSPACE = 4 };
struct BufferDesc { int region; int64_t offset; int64_t bytes; int kind; int root; };
// One compiled form of a kernel: its function in kiln_kernel_functions,
// the lowest compute capability it runs on, its launch geometry, and the
// TMA tensor maps (kTmaMaps[first_tma], ...) its function takes after the
// argument pointers.
struct VariantDesc {
  int function; int min_sm; unsigned grid[3]; unsigned block; int shared_bytes; int first_tma; int num_tma;
};
// A TMA tensor map, encoded before each launch: the whole tensor of launch
// argument `arg`, dims innermost first, read in boxes of `box` elements.
struct TmaDesc {
  int arg; CUtensorMapDataType dtype; unsigned rank; cuuint64_t dims[5]; cuuint64_t strides[4]; cuuint32_t box[5];
  CUtensorMapSwizzle swizzle;
};
struct KernelDesc { const char* name; int first_variant; int num_variants; };
// kZeroArgs[first_zero .. first_zero + num_zero): the arguments (indices
// into this launch's) zeroed before the launch (the kernel adds split-K
// partial sums into them).
struct LaunchDesc { int kernel; int first_arg; int num_args; int first_zero; int num_zero; };
enum { KILN_TASK_KERNEL = 0, KILN_TASK_HOST = 1 };
struct TaskDesc {
  int kind;
  const char* node;
  int first_launch, num_launches;          // kernel tasks
  int host_node, first_io, num_in, num_out;  // host tasks: values in kHostIo
};
struct ValueDesc { const char* name; int buffer; int dtype; const char* dtype_name; int rank; int first_dim; int64_t bytes; };

}  // namespace

// kernels.cu: every variant's __global__ function.
extern "C" const void* const kiln_kernel_functions[];
)KILN";

constexpr char kEpilogue[] = R"KILN(
//===----------------------------------------------------------------------===//
// The runtime: the same in every package.
//===----------------------------------------------------------------------===//

struct kiln_model {
  std::string dir;
  std::string device_name;
  int sm = 0;
  int variant_sm = 0;  // the capability whose variants run (KILN_CUDA_SM, else sm)
  cudaStream_t stream = nullptr;
  char* arena = nullptr;
  char* constants = nullptr;
  std::vector<int> variant;  // per kernel: the variant this device runs
  std::vector<kiln_tensor_info> inputs, outputs;
  const kiln_host_ops* host_ops = nullptr;
  void* host_user = nullptr;
  void* host_graph = nullptr;
  void* host_library = nullptr;
  std::vector<std::vector<unsigned char>> host_data;  // per value
  std::vector<void*> bound;  // per buffer: caller memory in place of the arena (kiln_model_run_device)
  // The driver's cuTensorMapEncodeTiled (null when the driver lacks it:
  // variants with TMA loads are then not chosen).
  decltype(&cuTensorMapEncodeTiled) encode_tiled = nullptr;
  // Per launch (index into kLaunches): its variant's tensor maps, as last
  // encoded, and the memory they were encoded over; re-encoded only when an
  // argument is bound elsewhere (kiln_model_run_device).
  struct LaunchMaps {
    std::vector<void*> bases;
    std::vector<CUtensorMap> maps;  // 64-byte aligned, passed by value
  };
  std::vector<LaunchMaps> launch_maps;
  std::string dump_dir;  // KILN_CUDA_DUMP_DIR: the arena after each task
  // KILN_CUDA_PROFILE: a CUDA event before each task and after the last;
  // per task, the milliseconds summed over runs; written at free.
  std::string profile_path;
  std::vector<cudaEvent_t> profile_events;
  std::vector<double> profile_ms;
  int profile_runs = 0;
};

namespace {

void SetError(char* err, size_t len, const std::string& msg) {
  if (!err || len == 0) return;
  size_t n = msg.size() < len - 1 ? msg.size() : len - 1;
  std::memcpy(err, msg.data(), n);
  err[n] = '\0';
}

bool Ok(cudaError_t e, const std::string& what, std::string* error) {
  if (e == cudaSuccess) return true;
  *error = what + ": " + cudaGetErrorString(e);
  return false;
}

bool ReadFile(const std::string& path, std::string* out) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  out->clear();
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
  bool ok = !std::ferror(f);
  std::fclose(f);
  return ok;
}

void* BufferPtr(const kiln_model* m, int b) {
  const BufferDesc& d = kBuffers[b];
  if (!m->bound.empty() && m->bound[d.root]) return m->bound[d.root];
  return (d.region == KILN_CONSTANTS ? m->constants : m->arena) + d.offset;
}

kiln_tensor_info InfoOf(int v) {
  const ValueDesc& d = kValues[v];
  return {d.name, d.dtype, d.dtype_name, d.rank, kDims + d.first_dim, static_cast<size_t>(d.bytes)};
}

// A variant runs on the device when the device reaches its compute
// capability; sm_90a variants (wgmma) only on compute capability 9.x, and
// those with TMA loads only when the driver encodes tensor maps.
bool VariantFits(const kiln_model* m, const VariantDesc& v) {
  if (v.num_tma > 0 && !m->encode_tiled) return false;
  if (v.min_sm >= 90) return m->variant_sm / 10 == v.min_sm / 10;
  return m->variant_sm >= v.min_sm;
}

// The driver's tensor map encoder, through the runtime (which loaded the
// driver already): the package links nothing but the runtime.
void FindTensorMapEncoder(kiln_model* m) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found);
#else
  cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &found);
#endif
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return;
  }
  m->encode_tiled = reinterpret_cast<decltype(&cuTensorMapEncodeTiled)>(fn);
}

// Encodes tensor map `d` over `base` (a launch argument's device memory).
bool EncodeTensorMap(const kiln_model* m, const TmaDesc& d, void* base, CUtensorMap* map, const std::string& what,
                     std::string* error) {
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) {
    *error = what + ": TMA needs 16-byte aligned device memory";
    return false;
  }
  const cuuint32_t ones[5] = {1, 1, 1, 1, 1};
  CUresult r = m->encode_tiled(map, d.dtype, d.rank, base, d.dims, d.strides, d.box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE,
                               d.swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    *error = what + ": cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(r)) + ")";
    return false;
  }
  return true;
}

bool LoadImpl(kiln_model* m, std::string* error) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    *error = std::string("no CUDA device: ") + (e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return false;
  }
  int device = 0;
  if (!Ok(cudaGetDevice(&device), "cudaGetDevice", error)) return false;
  cudaDeviceProp prop;
  if (!Ok(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", error)) return false;
  m->sm = prop.major * 10 + prop.minor;
  m->device_name = std::string(prop.name) + " (sm_" + std::to_string(m->sm) + ")";
  m->variant_sm = m->sm;
  if (const char* cap = std::getenv("KILN_CUDA_SM")) {
    char* end = nullptr;
    const long v = std::strtol(cap, &end, 10);
    if (end == cap || *end != '\0' || v < 80 || v > 1000) {
      *error = std::string("KILN_CUDA_SM must be a compute capability of 80 or more, such as 80 or 90 (not '") + cap +
               "')";
      return false;
    }
    if (v < m->sm) {
      m->variant_sm = static_cast<int>(v);
      m->device_name += ", running sm_" + std::to_string(v) + " variants (KILN_CUDA_SM)";
    }
  }

  if (const char* dump = std::getenv("KILN_CUDA_DUMP_DIR")) m->dump_dir = dump;
  if (const char* profile = std::getenv("KILN_CUDA_PROFILE")) {
    m->profile_path = profile;
    m->profile_events.assign(kNumTasks + 1, nullptr);
    m->profile_ms.assign(kNumTasks, 0.0);
    for (cudaEvent_t& e : m->profile_events)
      if (!Ok(cudaEventCreate(&e), "creating the profile's events", error)) return false;
  }
  if (kNumTmaMaps > 0 && m->variant_sm / 10 == 9) FindTensorMapEncoder(m);
  // Each kernel's variant: the highest that fits the device and has code for it.
  m->variant.assign(kNumKernels, -1);
  for (int k = 0; k < kNumKernels; ++k) {
    const KernelDesc& kd = kKernels[k];
    int best = -1;
    for (int i = kd.first_variant; i < kd.first_variant + kd.num_variants; ++i) {
      const VariantDesc& v = kVariants[i];
      if (!VariantFits(m, v) || (best >= 0 && kVariants[best].min_sm >= v.min_sm)) continue;
      cudaFuncAttributes attr;
      if (cudaFuncGetAttributes(&attr, kiln_kernel_functions[v.function]) != cudaSuccess) {
        (void)cudaGetLastError();
        continue;
      }
      best = i;
    }
    if (best < 0) {
      *error = std::string("kernel ") + kd.name + " has no code for " + m->device_name +
               " (rebuild the package for this GPU's architecture)";
      return false;
    }
    m->variant[k] = best;
    const VariantDesc& v = kVariants[best];
    if (v.shared_bytes > 48 * 1024 &&
        !Ok(cudaFuncSetAttribute(kiln_kernel_functions[v.function], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 v.shared_bytes),
            std::string("shared memory of kernel ") + kd.name, error))
      return false;
  }

  if (!Ok(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking), "cudaStreamCreate", error)) return false;
  if (kArenaBytes > 0 && !Ok(cudaMalloc(reinterpret_cast<void**>(&m->arena), kArenaBytes), "device memory for the model", error)) return false;
  if (kConstantBytes > 0) {
    std::string bytes;
    if (!ReadFile(m->dir + "/constants.bin", &bytes)) {
      *error = "cannot read " + m->dir + "/constants.bin";
      return false;
    }
    if (static_cast<int64_t>(bytes.size()) != kConstantBytes) {
      *error = m->dir + "/constants.bin holds " + std::to_string(bytes.size()) + " bytes, the model expects " +
               std::to_string(kConstantBytes);
      return false;
    }
    if (!Ok(cudaMalloc(reinterpret_cast<void**>(&m->constants), kConstantBytes), "device memory for the constants", error)) return false;
    if (!Ok(cudaMemcpy(m->constants, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "uploading the constants",
            error))
      return false;
  }
  for (int i = 0; i < kNumInputs; ++i) m->inputs.push_back(InfoOf(kInputs[i]));
  for (int i = 0; i < kNumOutputs; ++i) m->outputs.push_back(InfoOf(kOutputs[i]));
  m->host_data.resize(kNumValues);
  m->bound.assign(kNumBuffers, nullptr);
  return true;
}

bool EnsureHostOps(kiln_model* m, std::string* error) {
  if (m->host_graph) return true;
  if (!m->host_ops) {
    const char* env = std::getenv("KILN_HOSTOPS_LIBRARY");
    const std::string beside = m->dir + "/libkiln_hostops.so";
    std::string lib = env && *env ? env : "";
    if (lib.empty() && access(beside.c_str(), R_OK) == 0) lib = beside;
    if (lib.empty()) {
      *error = "this model runs " + std::to_string(kNumHostTasks) +
               " node(s) on the host and has no host-op provider: call kiln_model_set_host_ops, set "
               "KILN_HOSTOPS_LIBRARY, or put libkiln_hostops.so beside libkiln_model.so (`kiln run` "
               "provides kiln's reference kernels)";
      return false;
    }
    m->host_library = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!m->host_library) {
      *error = lib + ": " + dlerror();
      return false;
    }
    auto entry = reinterpret_cast<const kiln_host_ops* (*)()>(dlsym(m->host_library, "kiln_host_ops_v1"));
    if (!entry || !(m->host_ops = entry())) {
      *error = std::string(lib) + " exports no kiln_host_ops_v1";
      return false;
    }
  }
  std::string kir, blobs;
  if (!ReadFile(m->dir + "/host_graph.kir", &kir)) {
    *error = "cannot read " + m->dir + "/host_graph.kir";
    return false;
  }
  ReadFile(m->dir + "/host_graph.kir.blobs", &blobs);  // absent when no constant needs one
  char err[1024] = "";
  m->host_graph = m->host_ops->load(m->host_user, kir.data(), kir.size(), blobs.data(), blobs.size(), err, sizeof err);
  if (!m->host_graph) {
    *error = std::string("loading the host graph: ") + err;
    return false;
  }
  return true;
}

bool RunHostTask(kiln_model* m, const TaskDesc& t, std::string* error) {
  if (!EnsureHostOps(m, error)) return false;
  std::vector<kiln_host_tensor> ins, outs;
  for (int i = 0; i < t.num_in + t.num_out; ++i) {
    int v = kHostIo[t.first_io + i];
    const ValueDesc& d = kValues[v];
    std::vector<unsigned char>& data = m->host_data[v];
    if (d.buffer >= 0) data.resize(static_cast<size_t>(d.bytes));
    kiln_host_tensor h = {d.dtype, d.rank, kDims + d.first_dim, d.buffer >= 0 ? data.data() : nullptr,
                          static_cast<size_t>(d.bytes)};
    if (i < t.num_in) {
      if (d.bytes > 0 && !Ok(cudaMemcpyAsync(data.data(), BufferPtr(m, d.buffer), d.bytes, cudaMemcpyDeviceToHost,
                                             m->stream),
                             std::string("copying ") + d.name + " to the host", error))
        return false;
      ins.push_back(h);
    } else {
      outs.push_back(h);
    }
  }
  if (!Ok(cudaStreamSynchronize(m->stream), std::string("before host task ") + t.node, error)) return false;
  char err[1024] = "";
  if (m->host_ops->run(m->host_user, m->host_graph, t.host_node, ins.data(), t.num_in, outs.data(), t.num_out, err,
                       sizeof err) != 0) {
    *error = std::string("host task ") + t.node + ": " + err;
    return false;
  }
  for (int i = 0; i < t.num_out; ++i) {
    int v = kHostIo[t.first_io + t.num_in + i];
    const ValueDesc& d = kValues[v];
    if (d.buffer < 0 || d.bytes == 0) continue;
    if (!Ok(cudaMemcpyAsync(BufferPtr(m, d.buffer), m->host_data[v].data(), d.bytes, cudaMemcpyHostToDevice,
                            m->stream),
            std::string("copying ") + d.name + " to the device", error))
      return false;
  }
  return true;
}

// KILN_CUDA_DUMP_DIR: waits for task `ti` and writes the arena to
// DIR/task_<ti>.bin.
bool DumpArena(kiln_model* m, int ti, std::string* error) {
  const std::string what = std::string("task ") + std::to_string(ti) + " (" + kTasks[ti].node + ")";
  if (!Ok(cudaStreamSynchronize(m->stream), what, error)) return false;
  std::vector<char> bytes(static_cast<size_t>(kArenaBytes));
  if (kArenaBytes > 0 && !Ok(cudaMemcpy(bytes.data(), m->arena, bytes.size(), cudaMemcpyDeviceToHost),
                             "copying the arena after " + what, error))
    return false;
  const std::string path = m->dump_dir + "/task_" + std::to_string(ti) + ".bin";
  FILE* f = std::fopen(path.c_str(), "wb");
  bool ok = f && std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (f && std::fclose(f) != 0) ok = false;
  if (!ok) *error = "cannot write " + path;
  return ok;
}

// KILN_CUDA_PROFILE: one line per task, the mean microseconds of a run
// from the task's start to the next task's (its launches and copies,
// stream gaps included), its node and its kernels.
void WriteProfile(const kiln_model* m) {
  FILE* f = std::fopen(m->profile_path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "kiln: cannot write the profile %s\n", m->profile_path.c_str());
    return;
  }
  std::fprintf(f, "# task\tmicroseconds\tnode\tkernels (mean of %d runs on %s)\n", m->profile_runs,
               m->device_name.c_str());
  for (int ti = 0; ti < kNumTasks; ++ti) {
    const TaskDesc& t = kTasks[ti];
    std::string kernels;
    if (t.kind == KILN_TASK_HOST) {
      kernels = "(host)";
    } else {
      for (int li = t.first_launch; li < t.first_launch + t.num_launches; ++li) {
        if (!kernels.empty()) kernels += ",";
        kernels += kKernels[kLaunches[li].kernel].name;
      }
    }
    std::fprintf(f, "%d\t%.2f\t%s\t%s\n", ti, 1000.0 * m->profile_ms[ti] / m->profile_runs, t.node, kernels.c_str());
  }
  std::fclose(f);
}

// Launches the kernels of task `t` (pointers and params are scratch kept
// across tasks).
bool RunKernelTask(kiln_model* m, const TaskDesc& t, std::vector<void*>& pointers, std::vector<void*>& params,
                   std::string* error) {
  for (int li = t.first_launch; li < t.first_launch + t.num_launches; ++li) {
    const LaunchDesc& l = kLaunches[li];
    const VariantDesc& v = kVariants[m->variant[l.kernel]];
    if (v.grid[0] == 0 || v.grid[1] == 0 || v.grid[2] == 0) continue;  // nothing to compute
    pointers.resize(l.num_args);
    params.resize(l.num_args);
    for (int a = 0; a < l.num_args; ++a) {
      pointers[a] = BufferPtr(m, kArgs[l.first_arg + a]);
      params[a] = &pointers[a];
    }
    for (int z = l.first_zero; z < l.first_zero + l.num_zero; ++z) {
      const int a = kZeroArgs[z];
      if (!Ok(cudaMemsetAsync(pointers[a], 0, kBuffers[kArgs[l.first_arg + a]].bytes, m->stream),
              std::string("zeroing argument ") + std::to_string(a) + " of " + kKernels[l.kernel].name + " for " +
                  t.node,
              error))
        return false;
    }
    if (v.num_tma > 0) {
      if (m->launch_maps.size() <= static_cast<size_t>(li)) m->launch_maps.resize(li + 1);
      kiln_model::LaunchMaps& lm = m->launch_maps[li];
      if (lm.maps.size() != static_cast<size_t>(v.num_tma)) {
        lm.maps.resize(v.num_tma);
        lm.bases.assign(v.num_tma, nullptr);
      }
      for (int j = 0; j < v.num_tma; ++j) {
        const TmaDesc& d = kTmaMaps[v.first_tma + j];
        if (lm.bases[j] != pointers[d.arg]) {
          lm.bases[j] = nullptr;
          if (!EncodeTensorMap(m, d, pointers[d.arg], &lm.maps[j],
                               std::string("the tensor map of argument ") + std::to_string(d.arg) + " of " +
                                   kKernels[l.kernel].name + " for " + t.node,
                               error))
            return false;
          lm.bases[j] = pointers[d.arg];
        }
        params.push_back(&lm.maps[j]);
      }
    }
    if (!Ok(cudaLaunchKernel(kiln_kernel_functions[v.function], dim3(v.grid[0], v.grid[1], v.grid[2]),
                             dim3(v.block), params.data(), static_cast<size_t>(v.shared_bytes), m->stream),
            std::string("launching ") + kKernels[l.kernel].name + " for " + t.node, error))
      return false;
  }
  return true;
}

bool RunImpl(kiln_model* m, const void* const* inputs, void* const* outputs, std::string* error) {
  for (int i = 0; i < kNumInputs; ++i) {
    const ValueDesc& d = kValues[kInputs[i]];
    if (m->bound[kBuffers[d.buffer].root]) continue;
    if (d.bytes > 0 && !Ok(cudaMemcpyAsync(BufferPtr(m, d.buffer), inputs[i], d.bytes, cudaMemcpyDefault, m->stream),
                           std::string("input ") + d.name, error))
      return false;
  }
  std::vector<void*> pointers;
  std::vector<void*> params;
  const bool profile = !m->profile_events.empty();
  for (int ti = 0; ti < kNumTasks; ++ti) {
    const TaskDesc& t = kTasks[ti];
    if (profile && !Ok(cudaEventRecord(m->profile_events[ti], m->stream), "recording a profile event", error))
      return false;
    const bool ran =
        t.kind == KILN_TASK_HOST ? RunHostTask(m, t, error) : RunKernelTask(m, t, pointers, params, error);
    if (!ran || (!m->dump_dir.empty() && !DumpArena(m, ti, error))) return false;
  }
  if (profile) {
    if (!Ok(cudaEventRecord(m->profile_events[kNumTasks], m->stream), "recording a profile event", error) ||
        !Ok(cudaEventSynchronize(m->profile_events[kNumTasks]), "profiling the run", error))
      return false;
    for (int ti = 0; ti < kNumTasks; ++ti) {
      float ms = 0;
      if (!Ok(cudaEventElapsedTime(&ms, m->profile_events[ti], m->profile_events[ti + 1]), "reading a profile event",
              error))
        return false;
      m->profile_ms[ti] += ms;
    }
    ++m->profile_runs;
  }
  for (int i = 0; i < kNumOutputs; ++i) {
    const ValueDesc& d = kValues[kOutputs[i]];
    if (m->bound[kBuffers[d.buffer].root] == outputs[i]) continue;
    if (d.bytes > 0 && !Ok(cudaMemcpyAsync(outputs[i], BufferPtr(m, d.buffer), d.bytes, cudaMemcpyDefault, m->stream),
                           std::string("output ") + d.name, error))
      return false;
  }
  return Ok(cudaStreamSynchronize(m->stream), "running the model", error);
}

}  // namespace

extern "C" {

kiln_model* kiln_model_load(const char* package_dir, char* err, size_t err_len) {
  kiln_model* m = new kiln_model;
  m->dir = package_dir ? package_dir : ".";
  std::string error;
  if (!LoadImpl(m, &error)) {
    SetError(err, err_len, error);
    kiln_model_free(m);
    return nullptr;
  }
  return m;
}

int kiln_model_run(kiln_model* m, const void* const* inputs, void* const* outputs, char* err, size_t err_len) {
  if (!m) {
    SetError(err, err_len, "no model");
    return 1;
  }
  std::string error;
  if (!RunImpl(m, inputs, outputs, &error)) {
    SetError(err, err_len, error);
    return 1;
  }
  return 0;
}

int kiln_model_run_device(kiln_model* m, const void* const* inputs, void* const* outputs, char* err,
                          size_t err_len) {
  if (!m) {
    SetError(err, err_len, "no model");
    return 1;
  }
  // Inputs and outputs that own their buffer are used in place; the rest
  // (an output that is a view, a constant or an input) are copied.
  for (int i = 0; i < kNumInputs; ++i) {
    int b = kValues[kInputs[i]].buffer;
    if (kBuffers[b].kind == KILN_INPUT && kBuffers[b].root == b) m->bound[b] = const_cast<void*>(inputs[i]);
  }
  for (int i = 0; i < kNumOutputs; ++i) {
    int b = kValues[kOutputs[i]].buffer;
    if (kBuffers[b].kind == KILN_OUTPUT && kBuffers[b].root == b && !m->bound[b]) m->bound[b] = outputs[i];
  }
  std::string error;
  bool ok = RunImpl(m, inputs, outputs, &error);
  m->bound.assign(kNumBuffers, nullptr);
  if (!ok) {
    SetError(err, err_len, error);
    return 1;
  }
  return 0;
}

void kiln_model_free(kiln_model* m) {
  if (!m) return;
  if (!m->profile_path.empty() && m->profile_runs > 0) WriteProfile(m);
  for (cudaEvent_t e : m->profile_events)
    if (e) (void)cudaEventDestroy(e);
  if (m->host_graph && m->host_ops) m->host_ops->release(m->host_user, m->host_graph);
  if (m->stream) (void)cudaStreamDestroy(m->stream);
  if (m->arena) (void)cudaFree(m->arena);
  if (m->constants) (void)cudaFree(m->constants);
  if (m->host_library) dlclose(m->host_library);
  delete m;
}

int kiln_model_num_inputs(const kiln_model* m) { return m ? static_cast<int>(m->inputs.size()) : 0; }
int kiln_model_num_outputs(const kiln_model* m) { return m ? static_cast<int>(m->outputs.size()) : 0; }
const kiln_tensor_info* kiln_model_input(const kiln_model* m, int i) {
  return m && i >= 0 && i < static_cast<int>(m->inputs.size()) ? &m->inputs[i] : nullptr;
}
const kiln_tensor_info* kiln_model_output(const kiln_model* m, int i) {
  return m && i >= 0 && i < static_cast<int>(m->outputs.size()) ? &m->outputs[i] : nullptr;
}
const char* kiln_model_device(const kiln_model* m) { return m ? m->device_name.c_str() : ""; }
int kiln_model_num_host_tasks(const kiln_model*) { return kNumHostTasks; }
void kiln_model_set_host_ops(kiln_model* m, const kiln_host_ops* ops, void* user) {
  if (!m) return;
  if (m->host_graph && m->host_ops) m->host_ops->release(m->host_user, m->host_graph);
  m->host_graph = nullptr;
  m->host_ops = ops;
  m->host_user = user;
}

}  // extern "C"
)KILN";

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
  s += kPrologue;
  absl::StrAppend(&s, "\n//===----------------------------------------------------------------------===//\n"
                      "// This model.\n"
                      "//===----------------------------------------------------------------------===//\n\n");
  absl::StrAppend(&s, "static const int64_t kArenaBytes = ", p.arena_bytes, ";  // ", p.naive_bytes,
                  " without reuse\n");
  absl::StrAppend(&s, "static const int64_t kConstantBytes = ", p.constants.size(), ";\n");
  absl::StrAppend(&s, "static const int kNumHostTasks = ", p.num_host_tasks(), ";\n\n");

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
                      v.block_threads, ", ", v.shared_bytes, ", ", num_tma, ", ", v.tma.size(), "},  // ", v.function,
                      "\n");
      for (const TmaMap& t : v.tma) {
        absl::StrAppend(&tma_maps, "    {", TmaMapEntry(t), "},  // ", num_tma, ": ", v.function, "\n");
        ++num_tma;
      }
      ++function;
    }
  }
  absl::StrAppend(&s, "    {0, 0, {0, 0, 0}, 0, 0, 0, 0}};\n\n");
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
  int num_launches = 0, num_tasks = 0;
  for (const PackageTask& t : p.tasks) {
    if (t.kind == PackageTask::Kind::kView) continue;
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
    absl::StrAppend(&values, "    {", Quote(v.name), ", ", v.buffer, ", ", DTypeToOnnx(v.dtype), ", ",
                    Quote(DTypeName(v.dtype)), ", ", v.dims.size(), ", ", dims.size(), ", ", bytes, "},  // ", i,
                    ": ", DTypeName(v.dtype), "[", absl::StrJoin(v.dims, ","), "]\n");
    dims.insert(dims.end(), v.dims.begin(), v.dims.end());
  }
  absl::StrAppend(&values, "    {\"\", -1, 0, \"\", 0, 0, 0}};\n");
  absl::StrAppend(&s, "static const int64_t kDims[] = {");
  for (size_t i = 0; i < dims.size(); ++i) absl::StrAppend(&s, i % 16 == 0 ? "\n    " : " ", dims[i], ",");
  absl::StrAppend(&s, "\n    0};\n");
  absl::StrAppend(&s, "static const int kNumValues = ", p.values.size(), ";\n", values, "\n");
  absl::StrAppend(&s, int_table("kHostIo", host_io), "\n");
  absl::StrAppend(&s, "static const int kNumTasks = ", num_tasks, ";\n", tasks);
  absl::StrAppend(&s, "static const int kNumInputs = ", p.inputs.size(), ";\n", int_table("kInputs", p.inputs));
  absl::StrAppend(&s, "static const int kNumOutputs = ", p.outputs.size(), ";\n", int_table("kOutputs", p.outputs));
  s += kEpilogue;
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
  std::string s = absl::StrCat(
      "# kiln cuda package: ", p.model_name, "\n\n",
      "This directory is one model compiled by kiln (`kiln compile --target=cuda`, precision ", p.precision, ", ",
      p.build.arch_name, "): ", p.tasks.size(), " tasks, ", p.kernels.size(), " distinct kernels (", matrix,
      " on TensorCores), ", p.num_host_tasks(), " host tasks.\n\n");
  s += R"KILN(| file | what it is |
| --- | --- |
| `kernels.cu` | the CUDA C++ of every kernel, after a common prelude |
| `model.cc` | the host launcher: this model's tables (buffers, kernels, tasks), then the runtime behind the C API |
| `kiln_model.h` | the C API: load, run, free, and the input/output queries |
| `constants.bin` | the weights and other constants, uploaded to the device once at load |
| `placement.txt` | where each node runs and why (`kiln compile --explain-placement`) |
| `host_graph.kir` | (only with host tasks) the optimized graph the host tasks read, kiln's text IR |
| `build.sh`, `CMakeLists.txt` | the build: the CUDA Toolkit alone |

## Build

    ./build.sh                      # nvcc from $CUDA_HOME/bin, /usr/local/cuda/bin or PATH
    # or: cmake -S . -B build && cmake --build build

Both produce `libkiln_model.so` here. `kiln run DIR --input NAME=FILE.npy`
builds it when it is missing and runs the model.

## Embed

    #include "kiln_model.h"
    char err[512];
    kiln_model* m = kiln_model_load("/path/to/this/directory", err, sizeof err);
    const void* inputs[] = {...};   // host or device pointers, in kiln_model_input(m, i) order
    void* outputs[] = {...};
    kiln_model_run(m, inputs, outputs, err, sizeof err);
    kiln_model_free(m);

Link with `-L. -lkiln_model` (the CUDA runtime is linked into the library
statically; the CUDA driver must be installed). The library reads
`constants.bin` (and `host_graph.kir*`) from the directory given to
`kiln_model_load`.
)KILN";
  if (p.num_host_tasks() > 0)
    s += R"KILN(
## Host tasks

Some nodes of this model run on the host (see `placement.txt`): the launcher
copies their operands to the host, calls a host-op provider, and copies the
results back. `kiln run` provides kiln's reference kernels; an application
calls `kiln_model_set_host_ops` or names a provider library in
`KILN_HOSTOPS_LIBRARY` (see kiln_model.h).
)KILN";
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
  return absl::StrCat(R"KILN(# Builds libkiln_model.so from this kiln cuda package (CMake 3.24 or newer).
cmake_minimum_required(VERSION 3.24)
project(kiln_model LANGUAGES CXX CUDA)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CUDA_STANDARD 17)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()
set_source_files_properties(model.cc PROPERTIES LANGUAGE CUDA)
add_library(kiln_model SHARED kernels.cu model.cc)
set_target_properties(kiln_model PROPERTIES
  CUDA_ARCHITECTURES ")KILN",
                      absl::StrJoin(archs, ";"), R"KILN("
  CUDA_RUNTIME_LIBRARY Static
  POSITION_INDEPENDENT_CODE ON
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(kiln_model PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--threads=0>)
target_link_libraries(kiln_model PRIVATE ${CMAKE_DL_LIBS})
)KILN");
}

std::string BuildScript(const CudaPackage& p) {
  return absl::StrCat(R"KILN(#!/bin/sh
# Builds libkiln_model.so from this kiln cuda package with the CUDA Toolkit.
set -e
cd "$(dirname "$0")"
if [ -n "$NVCC" ]; then :
elif [ -n "$CUDA_HOME" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then NVCC="$CUDA_HOME/bin/nvcc"
elif [ -x /usr/local/cuda/bin/nvcc ]; then NVCC=/usr/local/cuda/bin/nvcc
else NVCC=nvcc
fi
)KILN",
                      NvccCommand(p.build, "\"$NVCC\""), " \"$@\"\n");
}

}  // namespace

std::string NvccCommand(const CudaBuildOptions& build, const std::string& nvcc) {
  // --threads 0: the gencode targets compile in parallel, one per core.
  std::string s = absl::StrCat(nvcc, " -O3 -std=c++17 --threads 0");
  for (const std::string& g : build.gencodes) absl::StrAppend(&s, " -gencode ", g);
  absl::StrAppend(&s, " -shared -Xcompiler -fPIC -o libkiln_model.so kernels.cu model.cc");
  return s;
}

std::string LauncherHeader() { return kHeader; }
std::string LauncherRuntime() { return absl::StrCat(kPrologue, kEpilogue); }

std::map<std::string, std::string> CudaPackage::Files() const {
  std::map<std::string, std::string> f;
  f["kernels.cu"] = KernelsSource(*this);
  f["model.cc"] = ModelSource(*this);
  f["kiln_model.h"] = kHeader;
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
