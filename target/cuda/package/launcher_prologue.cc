#include <cuda.h>  // CUtensorMap and cuTensorMapEncodeTiled's signature (found through the runtime)
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>
#if KILN_NCCL
#include <nccl.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
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
// argument pointers. A persistent variant's grid[0] counts work items: it
// runs as many blocks as the device holds at once, each looping over them.
struct VariantDesc {
  int function; int min_sm; unsigned grid[3]; unsigned block; int shared_bytes; int first_tma; int num_tma;
  int persistent;
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
// A collective task (a kiln.AllReduce) does nothing where it stands: its
// bucket (kBuckets) moves its tensors on the links stream.
enum { KILN_TASK_KERNEL = 0, KILN_TASK_HOST = 1, KILN_TASK_COLLECTIVE = 2 };
struct TaskDesc {
  int kind;
  const char* node;
  int first_launch, num_launches;          // kernel tasks
  int host_node, first_io, num_in, num_out;  // host tasks: values in kHostIo
};
// A tensor the launcher describes: a model input or output, or an operand
// of a host task. Its flags: KILN_ON_HOST, it has no device buffer (host
// tasks alone produce and read it, or it is an output sized at run time);
// KILN_DYNAMIC, its dims (-1 in kDims, rank -1 when unknown too) and bytes
// are known when its producer has run.
enum { KILN_ON_HOST = 1, KILN_DYNAMIC = 2 };
struct ValueDesc {
  const char* name; int buffer; int dtype; const char* dtype_name; int rank; int first_dim; int64_t bytes; int flags;
};

}  // namespace

// A data-parallel step's AllReduces: kCollectives[first .. first + count)
// of a bucket go as one NCCL group on the links stream once kTasks[after]
// is launched (-1: before the first task), and kTasks[before] waits for
// them (-1: the end of the run). Each output buffer becomes the mean of
// its input buffer over the ranks.
struct BucketDesc { int after; int before; int first; int count; };
struct CollectiveDesc { int input; int output; int64_t elements; int dtype; };

// kernels.cu: every variant's __global__ function.
extern "C" const void* const kiln_kernel_functions[];
