/* kiln_model.h - the C API of a kiln cuda package.
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
 * host memory or device memory of the current device. An output whose
 * shape depends on the data (detections after NMS, NonZero's indices) is
 * not written through outputs[i], which may be NULL: after a run,
 * kiln_model_output gives its dims and bytes and kiln_model_output_data
 * its bytes in host memory. Strings (KILN_STRING) live on the host: a
 * string input is given as an array of its elements' NUL-terminated C
 * strings (const char* const*, host memory), and a string output is
 * returned as one sized at run time, its data each element's 64-bit
 * little-endian byte count followed by its bytes. A model runs on the
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
  KILN_STRING = 8, KILN_BOOL = 9, KILN_F16 = 10, KILN_F64 = 11, KILN_U32 = 12, KILN_U64 = 13, KILN_BF16 = 16
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
/* The same on CUDA device `device` (made current on this thread first); a
 * model always runs on the device it was loaded on. */
kiln_model* kiln_model_load_on_device(const char* package_dir, int device, char* err, size_t err_len);

/* Runs the model once. 0 on success; otherwise non-zero with the reason in err. */
int kiln_model_run(kiln_model* model, const void* const* inputs, void* const* outputs, char* err, size_t err_len);

/* Runs the model on device memory in place: the inputs are read where
 * they are and the outputs written where they are (device pointers of the
 * current device, valid until the call returns); no copies are made for
 * them. A step output NAME.next that the package computes over its input
 * NAME (donated: a KV cache a scatter updates at its position) is written
 * into NAME's memory, which the call therefore changes; passing the same
 * pointer for NAME and NAME.next (a generation loop) makes that the whole
 * update, otherwise NAME.next is copied out of it. 0 on success. */
int kiln_model_run_device(kiln_model* model, const void* const* inputs, void* const* outputs, char* err,
                          size_t err_len);

void kiln_model_free(kiln_model* model);

int kiln_model_num_inputs(const kiln_model* model);
int kiln_model_num_outputs(const kiln_model* model);
/* NULL when i is out of range. A dimension known only at run time is -1
 * (and the rank -1 when it is, too) until a run: an output's info then
 * gives the last run's dims and bytes, valid until the next run. */
const kiln_tensor_info* kiln_model_input(const kiln_model* model, int i);
const kiln_tensor_info* kiln_model_output(const kiln_model* model, int i);
/* An output whose shape depends on the data: its bytes from the last run,
 * in host memory owned by the model and valid until the next run or free.
 * NULL for an output of static shape (written through outputs[i]). */
const void* kiln_model_output_data(const kiln_model* model, int i);

/* The device the model was loaded on, as "NAME (sm_XY)". */
const char* kiln_model_device(const kiln_model* model);
/* Nodes that run on the host. */
int kiln_model_num_host_tasks(const kiln_model* model);

/* Data-parallel steps: a package of a training step made with `kiln opt
 * --passes=training-step,default --replicas=N` averages each gradient over
 * the ranks with NCCL (ncclAllReduce, ncclAvg) in buckets on a stream of
 * its own, overlapping the backward pass; the package links NCCL. Load one
 * model per GPU (kiln_model_load_on_device), join them with
 * kiln_model_init_replicas (ncclCommInitAll, ranks in the array's order)
 * or give each its rank's communicator (an ncclComm_t) with
 * kiln_model_set_nccl_comm, and run every rank's step at once with
 * kiln_model_run_replicas (a host thread per rank; inputs[r] and
 * outputs[r] are rank r's, each rank on its own shard of the batch). A
 * model run alone averages over one rank, through NCCL all the same. */
int kiln_model_replicas(const kiln_model* model); /* N as compiled; 1: no collectives */
int kiln_model_init_replicas(kiln_model* const* models, int n, char* err, size_t err_len);
int kiln_model_set_nccl_comm(kiln_model* model, void* nccl_comm, char* err, size_t err_len);
int kiln_model_run_replicas(kiln_model* const* models, int n, const void* const* const* inputs,
                            void* const* const* outputs, char* err, size_t err_len);

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
   * node's operands in order), writing `outputs`. An output given with
   * rank -1 is sized by the node: the provider sets its rank, dims, data
   * and bytes to memory of its own, valid until its next call. An output
   * with NULL data otherwise is read by nobody. 0 on success. */
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
