// cuda_runtime_on_host.cc - the CUDA runtime calls a package's launcher
// makes, over host memory, so that a package's model.cc runs without a GPU
// (tests/cuda/launcher_on_host_test.cc). Eight devices, "host", of compute
// capability 8.0 (the current one per thread); device memory is host memory, copies are memcpy, streams
// and events do nothing. It runs no kernel: a package it loads must have
// none (every task a host task or a view). kiln_shim_copies() counts the
// copies by direction.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>

namespace {
int copies[5];  // by cudaMemcpyKind
int graphs[2];  // graphs instantiated, graph launches
}

extern "C" int kiln_shim_copies(int kind) { return kind >= 0 && kind < 5 ? copies[kind] : -1; }
extern "C" void kiln_shim_reset() {
  std::memset(copies, 0, sizeof copies);
  std::memset(graphs, 0, sizeof graphs);
}
// 0: the CUDA graphs instantiated; 1: their launches.
extern "C" int kiln_shim_graphs(int what) { return what == 0 || what == 1 ? graphs[what] : -1; }

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 8;
  return cudaSuccess;
}
// The current device, per thread (kiln_model_run_replicas sets each rank's).
thread_local int current_device = 0;
cudaError_t cudaGetDevice(int* device) {
  *device = current_device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int) {
  std::memset(prop, 0, sizeof *prop);
  std::strcpy(prop->name, "host");
  prop->major = 8;
  prop->minor = 0;
  return cudaSuccess;
}
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "not on the host"; }
cudaError_t cudaGetLastError() { return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = nullptr;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaMalloc(void** p, size_t n) {
  *p = std::aligned_alloc(256, (n + 255) / 256 * 256);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  ++copies[kind];
  std::memcpy(dst, src, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(dst, src, n, kind);
}
cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t) {
  std::memset(p, v, n);
  return cudaSuccess;
}
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes*, const void*) { return cudaErrorInvalidDeviceFunction; }
cudaError_t cudaFuncSetAttribute(const void*, cudaFuncAttribute, int) { return cudaErrorInvalidDeviceFunction; }
// CUDA graphs: captures and replays counted (kiln_shim_graphs); a package
// with kernels never loads here, so a graph holds no work.
cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) { return cudaSuccess; }
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  static int graph;
  *g = reinterpret_cast<cudaGraph_t>(&graph);
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t, unsigned long long) {
  static int exec;
  *e = reinterpret_cast<cudaGraphExec_t>(&exec);
  ++graphs[0];
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t) {
  ++graphs[1];
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t) { return cudaSuccess; }
cudaError_t cudaGraphDestroy(cudaGraph_t) { return cudaSuccess; }
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void*, int, size_t) {
  *blocks = 1;
  return cudaSuccess;
}
cudaError_t cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t) {
  return cudaErrorInvalidDeviceFunction;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = nullptr;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  *e = nullptr;
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaSetDevice(int device) {
  current_device = device;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0;
  return cudaSuccess;
}
cudaError_t cudaGetDriverEntryPoint(const char*, void**, unsigned long long, cudaDriverEntryPointQueryResult* r) {
  if (r) *r = cudaDriverEntryPointSymbolNotFound;
  return cudaErrorNotSupported;
}
cudaError_t cudaGetDriverEntryPointByVersion(const char*, void**, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult* r) {
  if (r) *r = cudaDriverEntryPointSymbolNotFound;
  return cudaErrorNotSupported;
}

// kernels.cu's table: no kernels.
extern const void* const kiln_kernel_functions[] = {nullptr};

}  // extern "C"
