//===----------------------------------------------------------------------===//
// The runtime: the same in every package.
//===----------------------------------------------------------------------===//

struct kiln_model {
  std::string dir;
  std::string device_name;
  int device = 0;  // the CUDA device it was loaded on
  int sm = 0;
  int variant_sm = 0;  // the capability whose variants run (KILN_CUDA_SM, else sm)
  cudaStream_t stream = nullptr;
  char* arena = nullptr;
  char* constants = nullptr;
  std::vector<int> variant;  // per kernel: the variant this device runs
  std::vector<unsigned> blocks;  // per kernel: its variant's grid[0], or a persistent one's resident blocks
  std::vector<kiln_tensor_info> inputs, outputs;
  const kiln_host_ops* host_ops = nullptr;
  void* host_user = nullptr;
  void* host_graph = nullptr;
  void* host_library = nullptr;
  std::vector<std::vector<unsigned char>> host_data;  // per value
  // Per value sized at run time (KILN_DYNAMIC): its dims, as its producer made them.
  std::vector<std::vector<int64_t>> host_dims;
  // Per value: the run in which host_data last received it (a device value
  // is written once per run, so one copy to the host serves every host
  // task of the run that reads it).
  std::vector<int64_t> host_run;
  int64_t runs = 0;
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
  // KILN_CUDA_GRAPH=1: a run's kernel tasks captured as a CUDA graph and
  // replayed by later runs whose buffers are where they were at its capture
  // (the caller's bound memory included; a few placements are kept, for a
  // loop that alternates two sets of buffers); models with host tasks or
  // collectives launch as usual.
  bool graphs = false;
  struct Captured {
    std::vector<void*> bound;  // m->bound at the capture
    cudaGraphExec_t exec = nullptr;
  };
  std::vector<Captured> graph_execs;  // the most recently used last
  // KILN_CUDA_PROFILE: a CUDA event before each task and after the last;
  // per task, the milliseconds summed over runs; written at free.
  std::string profile_path;
  std::vector<cudaEvent_t> profile_events;
  std::vector<double> profile_ms;
  int profile_runs = 0;
  // A data-parallel step: the links stream its buckets run on, an event
  // per bucket when its gradients are ready and when its means are, and
  // the rank's NCCL communicator (made for one rank when none was given).
  cudaStream_t links = nullptr;
  std::vector<cudaEvent_t> bucket_ready, bucket_done;
#if KILN_NCCL
  ncclComm_t comm = nullptr;
  bool own_comm = false;
#endif
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

// The bytes of one element of ONNX dtype `dtype` (0: unknown).
size_t ElementBytes(int dtype) {
  switch (dtype) {
    case KILN_U8: case KILN_I8: case KILN_BOOL: return 1;
    case KILN_U16: case KILN_I16: case KILN_F16: case KILN_BF16: return 2;
    case KILN_F32: case KILN_I32: case KILN_U32: return 4;
    case KILN_I64: case KILN_F64: case KILN_U64: return 8;
    default: return 0;
  }
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
  m->device = device;
  cudaDeviceProp prop;
  if (!Ok(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", error)) return false;
  m->sm = prop.major * 10 + prop.minor;
  const int sms = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
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
  if (const char* graph = std::getenv("KILN_CUDA_GRAPH")) m->graphs = std::string(graph) == "1";
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
  m->blocks.assign(kNumKernels, 0);
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
    m->blocks[k] = v.grid[0];
    if (v.persistent) {
      // As many blocks as the device holds at once, each looping over the
      // work items.
      int per_sm = 0;
      if (!Ok(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kiln_kernel_functions[v.function],
                                                            static_cast<int>(v.block), v.shared_bytes),
              std::string("the resident blocks of kernel ") + kd.name, error))
        return false;
      const unsigned resident = static_cast<unsigned>((per_sm > 0 ? per_sm : 1) * sms);
      m->blocks[k] = v.grid[0] < resident ? v.grid[0] : resident;
    }
  }

  if (!Ok(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking), "cudaStreamCreate", error)) return false;
  if (kNumBuckets > 0) {
    if (!Ok(cudaStreamCreateWithFlags(&m->links, cudaStreamNonBlocking), "the links stream", error)) return false;
    m->bucket_ready.assign(kNumBuckets, nullptr);
    m->bucket_done.assign(kNumBuckets, nullptr);
    for (int b = 0; b < kNumBuckets; ++b)
      if (!Ok(cudaEventCreateWithFlags(&m->bucket_ready[b], cudaEventDisableTiming), "a bucket's event", error) ||
          !Ok(cudaEventCreateWithFlags(&m->bucket_done[b], cudaEventDisableTiming), "a bucket's event", error))
        return false;
  }
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
  m->host_dims.resize(kNumValues);
  m->host_run.assign(kNumValues, -1);
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

// Runs host task `t`: its operands copied device -> host (those kept on
// the host are there already), the provider called, its results copied
// host -> device (or kept on the host: a result sized at run time is sized
// by the provider, which points the tensor at memory of its own).
bool RunHostTask(kiln_model* m, const TaskDesc& t, std::string* error) {
  if (!EnsureHostOps(m, error)) return false;
  std::vector<kiln_host_tensor> ins, outs;
  for (int i = 0; i < t.num_in + t.num_out; ++i) {
    const int v = kHostIo[t.first_io + i];
    const ValueDesc& d = kValues[v];
    const bool input = i < t.num_in, on_host = d.flags & KILN_ON_HOST, dynamic = d.flags & KILN_DYNAMIC;
    std::vector<unsigned char>& data = m->host_data[v];
    kiln_host_tensor h = {d.dtype, d.rank, kDims + d.first_dim, nullptr, static_cast<size_t>(d.bytes)};
    if (dynamic && input) {
      h.rank = static_cast<int>(m->host_dims[v].size());
      h.dims = m->host_dims[v].data();
      h.data = data.data();
      h.bytes = data.size();
    } else if (dynamic) {
      // Sized by the provider (rank -1), or an output nobody reads (no data).
      h.rank = on_host ? -1 : 0;
      h.dims = nullptr;
      h.bytes = 0;
    } else if (on_host || d.buffer >= 0) {
      data.resize(static_cast<size_t>(d.bytes));
      h.data = data.data();
    }
    if (input) {
      if (!on_host && d.bytes > 0 && m->host_run[v] != m->runs &&
          !Ok(cudaMemcpyAsync(data.data(), BufferPtr(m, d.buffer), d.bytes, cudaMemcpyDeviceToHost, m->stream),
              std::string("copying ") + d.name + " to the host", error))
        return false;
      m->host_run[v] = m->runs;
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
    const int v = kHostIo[t.first_io + t.num_in + i];
    const ValueDesc& d = kValues[v];
    m->host_run[v] = m->runs;
    if ((d.flags & KILN_DYNAMIC) && (d.flags & KILN_ON_HOST)) {
      const kiln_host_tensor& h = outs[i];
      size_t elements = 1;
      for (int j = 0; j < h.rank && h.dims; ++j) elements *= static_cast<size_t>(h.dims[j] < 0 ? 0 : h.dims[j]);
      if (h.rank < 0 || (h.rank > 0 && !h.dims) || (h.bytes > 0 && !h.data) ||
          (d.dtype != KILN_STRING && h.bytes != elements * ElementBytes(d.dtype))) {
        *error = std::string("host task ") + t.node + " did not size " + d.name +
                 " (the host-op provider must size outputs whose rank it is given as -1)";
        return false;
      }
      m->host_dims[v].assign(h.dims, h.dims + h.rank);
      const unsigned char* bytes = static_cast<const unsigned char*>(h.data);
      m->host_data[v].assign(bytes, bytes + h.bytes);
      continue;
    }
    if (d.buffer < 0 || d.bytes == 0) continue;  // kept on the host, or read by nobody
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
    if (!Ok(cudaLaunchKernel(kiln_kernel_functions[v.function], dim3(m->blocks[l.kernel], v.grid[1], v.grid[2]),
                             dim3(v.block), params.data(), static_cast<size_t>(v.shared_bytes), m->stream),
            std::string("launching ") + kKernels[l.kernel].name + " for " + t.node, error))
      return false;
  }
  return true;
}

#if KILN_NCCL
ncclDataType_t NcclType(int dtype) {
  switch (dtype) {
    case KILN_F16: return ncclFloat16;
    case KILN_BF16: return ncclBfloat16;
    case KILN_F64: return ncclFloat64;
    default: return ncclFloat32;
  }
}

bool NcclOk(ncclResult_t r, const std::string& what, std::string* error) {
  if (r == ncclSuccess) return true;
  *error = what + ": " + ncclGetErrorString(r);
  return false;
}
#endif

// Sends bucket `b` on the links stream once the compute stream has reached
// this point: each tensor's mean over the ranks (ncclAvg), as one group.
bool IssueBucket(kiln_model* m, int b, std::string* error) {
  const BucketDesc& d = kBuckets[b];
  if (!Ok(cudaEventRecord(m->bucket_ready[b], m->stream), "a bucket's event", error) ||
      !Ok(cudaStreamWaitEvent(m->links, m->bucket_ready[b], 0), "the links stream's wait", error))
    return false;
#if KILN_NCCL
  if (!m->comm) {  // one rank, through NCCL all the same
    if (!NcclOk(ncclCommInitAll(&m->comm, 1, &m->device), "ncclCommInitAll for one rank", error)) return false;
    m->own_comm = true;
  }
  if (!NcclOk(ncclGroupStart(), "ncclGroupStart", error)) return false;
  for (int i = d.first; i < d.first + d.count; ++i) {
    const CollectiveDesc& c = kCollectives[i];
    if (!NcclOk(ncclAllReduce(BufferPtr(m, c.input), BufferPtr(m, c.output), static_cast<size_t>(c.elements),
                              NcclType(c.dtype), ncclAvg, m->comm, m->links),
                std::string("ncclAllReduce of bucket ") + std::to_string(b), error))
      return false;
  }
  if (!NcclOk(ncclGroupEnd(), "ncclGroupEnd", error)) return false;
#else
  (void)d;
#endif
  return Ok(cudaEventRecord(m->bucket_done[b], m->links), "a bucket's event", error);
}

// The kernel tasks of a model without host tasks or collectives as one
// CUDA graph: replayed when the buffers are where they were at a capture,
// captured otherwise (the least recently used of kMaxGraphs dropped).
// False with `error` set when a CUDA call fails; *done false when the run
// is not a graph's (graphs off, or a capture refused: the run then
// launches as usual, and graphs stay off).
constexpr size_t kMaxGraphs = 4;
bool RunGraph(kiln_model* m, bool* done, std::string* error) {
  *done = false;
  if (!m->graphs || kNumHostTasks > 0 || kNumBuckets > 0 || !m->profile_events.empty() || !m->dump_dir.empty())
    return true;
  auto& execs = m->graph_execs;
  auto hit = std::find_if(execs.begin(), execs.end(), [&](const kiln_model::Captured& c) { return c.bound == m->bound; });
  if (hit != execs.end()) {
    std::rotate(hit, hit + 1, execs.end());
  } else {
    if (cudaStreamBeginCapture(m->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      (void)cudaGetLastError();
      m->graphs = false;
      return true;
    }
    std::vector<void*> pointers, params;
    bool launched = true;
    for (int ti = 0; ti < kNumTasks && launched; ++ti) launched = RunKernelTask(m, kTasks[ti], pointers, params, error);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(m->stream, &graph);
    const bool made = launched && ended == cudaSuccess && graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    if (graph) (void)cudaGraphDestroy(graph);
    if (!made) {
      (void)cudaGetLastError();
      m->graphs = false;
      error->clear();
      return true;
    }
    if (execs.size() == kMaxGraphs) {
      (void)cudaGraphExecDestroy(execs.front().exec);
      execs.erase(execs.begin());
    }
    execs.push_back({m->bound, exec});
  }
  *done = true;
  return Ok(cudaGraphLaunch(execs.back().exec, m->stream), "launching the model's CUDA graph", error);
}

// A string input, given as C strings, in the host tasks' form: each
// element a 64-bit little-endian byte count and its bytes.
void TakeStrings(kiln_model* m, int v, const void* input) {
  const ValueDesc& d = kValues[v];
  int64_t elements = 1;
  for (int j = 0; j < d.rank; ++j) elements *= kDims[d.first_dim + j];
  const char* const* e = static_cast<const char* const*>(input);
  std::vector<unsigned char>& data = m->host_data[v];
  data.clear();
  for (int64_t i = 0; i < elements; ++i) {
    const char* s = e && e[i] ? e[i] : "";
    const uint64_t n = std::strlen(s);
    for (int b = 0; b < 8; ++b) data.push_back(static_cast<unsigned char>((n >> (8 * b)) & 0xff));
    data.insert(data.end(), s, s + n);
  }
  m->host_dims[v].assign(kDims + d.first_dim, kDims + d.first_dim + d.rank);
  m->host_run[v] = m->runs;
}

bool RunImpl(kiln_model* m, const void* const* inputs, void* const* outputs, std::string* error) {
  ++m->runs;
  for (int i = 0; i < kNumInputs; ++i) {
    const ValueDesc& d = kValues[kInputs[i]];
    if (d.flags & KILN_ON_HOST) {  // strings
      TakeStrings(m, kInputs[i], inputs[i]);
      continue;
    }
    if (m->bound[kBuffers[d.buffer].root]) continue;
    if (d.bytes > 0 && !Ok(cudaMemcpyAsync(BufferPtr(m, d.buffer), inputs[i], d.bytes, cudaMemcpyDefault, m->stream),
                           std::string("input ") + d.name, error))
      return false;
  }
  std::vector<void*> pointers;
  std::vector<void*> params;
  const bool profile = !m->profile_events.empty();
  bool replayed = false;
  if (!RunGraph(m, &replayed, error)) return false;
  for (int b = 0; b < kNumBuckets; ++b)
    if (kBuckets[b].after < 0 && !IssueBucket(m, b, error)) return false;
  for (int ti = 0; ti < kNumTasks && !replayed; ++ti) {
    const TaskDesc& t = kTasks[ti];
    for (int b = 0; b < kNumBuckets; ++b)
      if (kBuckets[b].before == ti &&
          !Ok(cudaStreamWaitEvent(m->stream, m->bucket_done[b], 0), "waiting for a bucket", error))
        return false;
    if (profile && !Ok(cudaEventRecord(m->profile_events[ti], m->stream), "recording a profile event", error))
      return false;
    const bool ran = t.kind == KILN_TASK_COLLECTIVE ? true
                     : t.kind == KILN_TASK_HOST     ? RunHostTask(m, t, error)
                                                    : RunKernelTask(m, t, pointers, params, error);
    if (!ran || (!m->dump_dir.empty() && !DumpArena(m, ti, error))) return false;
    for (int b = 0; b < kNumBuckets; ++b)
      if (kBuckets[b].after == ti && !IssueBucket(m, b, error)) return false;
  }
  for (int b = 0; b < kNumBuckets; ++b)
    if (kBuckets[b].before < 0 &&
        !Ok(cudaStreamWaitEvent(m->stream, m->bucket_done[b], 0), "waiting for a bucket", error))
      return false;
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
    // Rewritten after every run: a process may end without freeing the
    // model (kiln run leaves it to the exit).
    WriteProfile(m);
  }
  for (int i = 0; i < kNumOutputs; ++i) {
    const int v = kOutputs[i];
    const ValueDesc& d = kValues[v];
    if (d.flags & KILN_ON_HOST) {  // sized at run time: returned from the host (kiln_model_output_data)
      kiln_tensor_info& info = m->outputs[i];
      info.rank = static_cast<int>(m->host_dims[v].size());
      info.dims = m->host_dims[v].data();
      info.bytes = m->host_data[v].size();
      continue;
    }
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

kiln_model* kiln_model_load_on_device(const char* package_dir, int device, char* err, size_t err_len) {
  const cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    SetError(err, err_len, "cudaSetDevice(" + std::to_string(device) + "): " + cudaGetErrorString(e));
    return nullptr;
  }
  return kiln_model_load(package_dir, err, err_len);
}

int kiln_model_run(kiln_model* m, const void* const* inputs, void* const* outputs, char* err, size_t err_len) {
  if (!m) {
    SetError(err, err_len, "no model");
    return 1;
  }
  std::string error;
  // The model's device, whichever is current on this thread.
  if (!Ok(cudaSetDevice(m->device), "cudaSetDevice", &error) || !RunImpl(m, inputs, outputs, &error)) {
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
    if (b < 0) continue;  // strings, kept on the host
    if (kBuffers[b].kind == KILN_INPUT && kBuffers[b].root == b) m->bound[b] = const_cast<void*>(inputs[i]);
  }
  for (int i = 0; i < kNumOutputs; ++i) {
    int b = kValues[kOutputs[i]].buffer;
    if (b < 0) continue;  // returned from the host
    if (kBuffers[b].kind == KILN_OUTPUT && kBuffers[b].root == b && !m->bound[b]) m->bound[b] = outputs[i];
  }
  std::string error;
  bool ok = Ok(cudaSetDevice(m->device), "cudaSetDevice", &error) && RunImpl(m, inputs, outputs, &error);
  m->bound.assign(kNumBuffers, nullptr);
  if (!ok) {
    SetError(err, err_len, error);
    return 1;
  }
  return 0;
}

void kiln_model_free(kiln_model* m) {
  if (!m) return;
  for (const kiln_model::Captured& c : m->graph_execs) (void)cudaGraphExecDestroy(c.exec);
  for (cudaEvent_t e : m->profile_events)
    if (e) (void)cudaEventDestroy(e);
  if (m->host_graph && m->host_ops) m->host_ops->release(m->host_user, m->host_graph);
#if KILN_NCCL
  if (m->comm && m->own_comm) (void)ncclCommDestroy(m->comm);
#endif
  for (cudaEvent_t e : m->bucket_ready)
    if (e) (void)cudaEventDestroy(e);
  for (cudaEvent_t e : m->bucket_done)
    if (e) (void)cudaEventDestroy(e);
  if (m->links) (void)cudaStreamDestroy(m->links);
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
const void* kiln_model_output_data(const kiln_model* m, int i) {
  if (!m || i < 0 || i >= kNumOutputs || !(kValues[kOutputs[i]].flags & KILN_ON_HOST)) return nullptr;
  return m->host_data[kOutputs[i]].data();
}
const char* kiln_model_device(const kiln_model* m) { return m ? m->device_name.c_str() : ""; }

int kiln_model_replicas(const kiln_model*) { return kReplicas; }

int kiln_model_set_nccl_comm(kiln_model* m, void* comm, char* err, size_t err_len) {
  if (!m) {
    SetError(err, err_len, "no model");
    return 1;
  }
#if KILN_NCCL
  if (m->comm && m->own_comm) (void)ncclCommDestroy(m->comm);
  m->comm = static_cast<ncclComm_t>(comm);
  m->own_comm = false;
  return 0;
#else
  (void)comm;
  SetError(err, err_len, "this package has no collectives (it is not a data-parallel step)");
  return 1;
#endif
}

int kiln_model_init_replicas(kiln_model* const* models, int n, char* err, size_t err_len) {
  if (!models || n < 1) {
    SetError(err, err_len, "no models");
    return 1;
  }
#if KILN_NCCL
  std::vector<int> devices(n);
  for (int r = 0; r < n; ++r) {
    if (!models[r]) {
      SetError(err, err_len, "model " + std::to_string(r) + " is null");
      return 1;
    }
    devices[r] = models[r]->device;
    for (int q = 0; q < r; ++q)
      if (devices[q] == devices[r]) {
        SetError(err, err_len, "models " + std::to_string(q) + " and " + std::to_string(r) +
                                   " were loaded on the same device: load each rank's on its own GPU");
        return 1;
      }
  }
  std::vector<ncclComm_t> comms(n);
  std::string error;
  if (!NcclOk(ncclCommInitAll(comms.data(), n, devices.data()), "ncclCommInitAll", &error)) {
    SetError(err, err_len, error);
    return 1;
  }
  for (int r = 0; r < n; ++r) {
    if (models[r]->comm && models[r]->own_comm) (void)ncclCommDestroy(models[r]->comm);
    models[r]->comm = comms[r];
    models[r]->own_comm = true;
  }
  return 0;
#else
  SetError(err, err_len, "this package has no collectives (it is not a data-parallel step)");
  return 1;
#endif
}

int kiln_model_run_replicas(kiln_model* const* models, int n, const void* const* const* inputs,
                            void* const* const* outputs, char* err, size_t err_len) {
  if (!models || n < 1 || !inputs || !outputs) {
    SetError(err, err_len, "no models, inputs or outputs");
    return 1;
  }
  std::vector<std::string> errors(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      if (!models[r]) {
        errors[r] = "model is null";
        return;
      }
      if (Ok(cudaSetDevice(models[r]->device), "cudaSetDevice", &errors[r]))
        RunImpl(models[r], inputs[r], outputs[r], &errors[r]);
    });
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < n; ++r)
    if (!errors[r].empty()) {
      SetError(err, err_len, "rank " + std::to_string(r) + ": " + errors[r]);
      return 1;
    }
  return 0;
}
int kiln_model_num_host_tasks(const kiln_model*) { return kNumHostTasks; }
void kiln_model_set_host_ops(kiln_model* m, const kiln_host_ops* ops, void* user) {
  if (!m) return;
  if (m->host_graph && m->host_ops) m->host_ops->release(m->host_user, m->host_graph);
  m->host_graph = nullptr;
  m->host_ops = ops;
  m->host_user = user;
}

}  // extern "C"
