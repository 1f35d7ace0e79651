//===- cuda_package.h - Compiling a model into a CUDA C++ package -*- C++ -*-===//
//
// The cuda target's compile driver. Every node of the optimized graph
// becomes a task of the package:
//
//  - a kernel: matrix work (MatMul, Gemm, their fused epilogues) on
//    TensorCores and memory-bound groups on the SIMT cores, lowered by the
//    shared backend (target/backend/tile_lowering.h) and printed as CUDA
//    C++ by the code generator (target/cuda/codegen/cuda_codegen.h);
//    data movement (Transpose, Concat, Slice, Gather with constant
//    indices, ...) as strided-copy kernels (cuda_copy_kernel.h);
//  - a view (Reshape, Flatten, Squeeze, Unsqueeze: the output names its
//    input's bytes; nothing runs);
//  - a host task: the node runs on the host with kiln's reference kernel,
//    its operands copied device -> host before and its results host ->
//    device after (the package's launcher calls a host-op provider; `kiln
//    run` provides kiln's reference kernels). A node placed on the GPU
//    whose kernel cannot be built falls back to a host task with the
//    reason recorded; a fused group is first split back into its members.
//    A value that only host tasks produce and read stays on the host, with
//    no copies.
//
// Values whose shape depends on the data (NonZero's output, NMS's, a
// TopK's with a computed k, and everything computed from them) are sized
// when their producer has run: the nodes that read or write them run as
// host tasks, the values stay in host memory between them, and a model
// output among them is returned from the host (kiln_model_output_data).
//
// Device memory is one arena placed by liveness (target/backend/
// memory_plan.h) plus the constants region, uploaded once from
// constants.bin (identical constants share bytes). docs/cuda-target.md
// describes the package.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "target/api/target.h"
#include "target/cuda/codegen/cuda_codegen.h"
#include "target/cuda/cuda_arg_reduce_kernel.h"
#include "target/cuda/cuda_copy_kernel.h"
#include "target/cuda/cuda_decode_attention.h"
#include "target/cuda/cuda_int_kernel.h"

namespace kiln::target::cuda {

// The GPUs a package is built for (`--arch`).
struct CudaBuildOptions {
  std::string arch_name = "sm_80+sm_90a";  // as given (default: both)
  CudaArch arch;                            // what the code generator emits
  std::vector<std::string> gencodes;        // nvcc -gencode arguments
};

// Reads the "arch" setting of `options`: sm_80, sm_86, sm_89, sm_90,
// sm_90a, or empty for sm_80 and sm_90a together.
absl::StatusOr<CudaBuildOptions> CudaBuildOptionsFrom(const CompileOptions& options);

// A device buffer of the package.
struct PackageBuffer {
  enum class Kind : uint8_t { kInput, kOutput, kIntermediate, kConstant, kWorkspace };
  std::string name;
  Kind kind = Kind::kIntermediate;
  int64_t bytes = 0;
  int64_t offset = 0;   // in the arena, or in the constants region for constants
  int alias_of = -1;    // a view: the buffer whose bytes it names
  int first = -1, last = -1;  // tasks between which it holds a value
};

// A tensor the launcher describes: a model input or output, or an operand
// of a host task.
struct PackageValue {
  std::string name;
  DType dtype = DType::kF32;
  // -1 for a dimension known only at run time; empty and unranked for a
  // value whose rank is, too.
  std::vector<int64_t> dims;
  bool ranked = true;
  int buffer = -1;  // -1: kept on the host, or an unused output of a host task
  // Only host tasks produce and read it (or it is a model output whose
  // shape depends on the data): it stays in host memory, and no copy moves
  // it.
  bool on_host = false;
  // Its shape is known when its producer has run (on_host holds too).
  bool dynamic = false;
};

struct PackageKernel {
  std::string name;
  std::string source;
  bool matrix = false;  // TensorCore work: its PTX must hold mma.sync / wgmma
  bool copy = false;    // a strided-copy kernel of cuda_copy_kernel.h
  std::vector<CudaVariant> variants;
  int64_t workspace_bytes = 0;
  // Arguments (indices) the kernel adds into, zeroed before each launch
  // (split-K partial sums, in an output or the workspace).
  std::vector<int> zero_args;
  // A kernel of the shared backend: the tile kernel it was generated from
  // (its text form), so the package's meaning can be checked on the host.
  std::string tile_ir;
  // A strided-copy kernel: the piece it moves and the element width.
  CopyPiece copy_piece;
  int64_t copy_element_bytes = 0;
  // An arg-reduction kernel (cuda_arg_reduce_kernel.h): what it computes.
  std::optional<ArgReduce> arg_reduce;
  // An integer elementwise kernel (cuda_int_kernel.h): what it computes.
  std::optional<IntElementwise> int_elementwise;
  // One of the decode attention's two kernels (cuda_decode_attention.h):
  // what they compute, and which (1: the partials, 2: their combination).
  std::optional<DecodeAttention> decode_attention;
  int decode_attention_stage = 0;
};

// One tensor of a kiln.AllReduce: its output buffer the mean of its input
// buffer over the replicas.
struct CollectiveItem {
  int input = -1, output = -1;  // buffers
  DType dtype = DType::kF32;
  int64_t elements = 0;
};

// AllReduces sent together as one NCCL group on the links stream: issued
// once task `after` has been launched (-1: before the first task), waited
// for before task `before` (-1: at the end of the run).
struct PackageBucket {
  std::vector<int> tasks;  // the collective tasks, in the order their gradients are ready
  int after = -1, before = -1;
  int64_t bytes = 0;
  double start_us = 0, end_us = 0;  // the planner's estimates
};

struct PackageTask {
  enum class Kind : uint8_t { kKernel, kView, kHost, kCollective };
  Kind kind = Kind::kKernel;
  std::string node, op, engine, reason, plan;
  // kKernel: launches, each a kernel and its arguments (buffers).
  struct Launch {
    int kernel = -1;
    std::vector<int> args;
    int workspace = -1;
  };
  std::vector<Launch> launches;
  // kHost: the node's index in host_graph.kir's main graph, its operands
  // (NodeOperands order) and outputs (values).
  int host_node = -1;
  std::vector<int> host_inputs, host_outputs;
  // kCollective: a kiln.AllReduce's tensors (its bucket says when they move).
  std::vector<CollectiveItem> collective;
  // The node's work (graph/ops NodeCost), for the estimates that time buckets.
  double flops = 0, bytes = 0;
};

struct CudaPackage {
  CudaBuildOptions build;
  std::string model_name;
  std::string precision;
  std::vector<PackageBuffer> buffers;
  std::vector<PackageValue> values;
  std::vector<int> inputs, outputs;  // values
  std::vector<PackageTask> tasks;
  std::vector<PackageKernel> kernels;
  std::string constants;             // constants.bin
  int64_t arena_bytes = 0, naive_bytes = 0;
  // Host tasks: the optimized graph as .kir text and the blobs their
  // constants need (empty when every node runs on the GPU).
  std::string host_graph_kir, host_graph_blobs;
  // A data-parallel step: the replicas it was made for (kiln.AllReduce's
  // `replicas`; a run may use any number of GPUs), the --buckets strategy
  // and its plan. The package then links NCCL.
  int replicas = 1;
  std::string buckets;
  std::vector<PackageBucket> bucket_plan;
  double compute_end_us = 0;  // when the compute tasks end, by the planner's estimates
  bool collectives() const { return !bucket_plan.empty(); }

  int num_host_tasks() const;
  // What `kiln compile --explain-placement` prints: one line per task
  // (engine, reason, plan), the copies around each host task, totals.
  std::string Explain() const;
  // Every file of the package directory, by relative path.
  std::map<std::string, std::string> Files() const;
};

// Compiles `model` (optimized, shapes inferred) with `target`'s placement.
absl::StatusOr<CudaPackage> BuildCudaPackage(const Model& model, const Target& target,
                                             const CompileOptions& options);

// Writes the package's files into `dir` (created; existing package files
// are replaced, a stale libkiln_model.so removed).
absl::Status WriteCudaPackage(const CudaPackage& package, const std::string& dir);

// The nvcc command line that builds a package directory's library (what
// build.sh runs), with `nvcc` as the compiler's path; linking NCCL when the
// package has collectives.
std::string NvccCommand(const CudaBuildOptions& build, const std::string& nvcc, bool nccl = false);

// The files of the package whose text does not depend on the model.
std::string LauncherHeader();   // kiln_model.h: the C API
std::string LauncherRuntime();  // the model-independent half of model.cc

}  // namespace kiln::target::cuda
