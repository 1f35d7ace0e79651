// model.cc as a package writes it, compiled by the host compiler with
// warnings as errors against the CUDA headers (target/CMakeLists.txt), as
// nvcc compiles it in a package: the prologue, one model's tables, the
// runtime behind the C API. The tables are those of a package with a
// strided copy, a host task (CumSum), a GEMM whose sm_90a variant takes
// TMA tensor maps (and is persistent) and a host task (NonZero) whose output is sized at run
// time and returned from the host, so every table the runtime reads has
// entries.
// With NCCL's header where the toolkit has it, the data-parallel half too.
#if __has_include(<nccl.h>)
#define KILN_NCCL 1
#else
#define KILN_NCCL 0
#endif
#include "../launcher_prologue.cc"

static const int64_t kArenaBytes = 3408128;
static const int64_t kConstantBytes = 0;
static const int kNumHostTasks = 2;
static const int kReplicas = 4;

static const BufferDesc kBuffers[] = {
    {KILN_ARENA, 2621440, 96, KILN_INPUT, 0},            // 0: input x
    {KILN_ARENA, 2621696, 8, KILN_INPUT, 1},             // 1: input ax
    {KILN_ARENA, 1572864, 1048576, KILN_INPUT, 2},       // 2: input a
    {KILN_ARENA, 0, 1572864, KILN_INPUT, 3},             // 3: input b
    {KILN_ARENA, 3407872, 96, KILN_OUTPUT, 4},           // 4: output c
    {KILN_ARENA, 2621440, 786432, KILN_OUTPUT, 5},       // 5: output d
    {KILN_ARENA, 2621952, 96, KILN_INTERMEDIATE, 6},     // 6: intermediate t
    {0, 0, 0, 0, 0}};
static const int kNumBuffers = 7;

static const VariantDesc kVariants[] = {
    {0, 0, {1, 1, 1}, 256, 0, 0, 0, 0},         // the copy
    {1, 80, {96, 1, 1}, 128, 66560, 0, 0, 0},   // the GEMM, mma.sync
    {2, 90, {96, 1, 1}, 384, 197760, 0, 2, 1},  // the GEMM, warp-specialized and persistent, TMA loads
    {0, 0, {0, 0, 0}, 0, 0, 0, 0, 0}};

static const int kNumTmaMaps = 2;
static const TmaDesc kTmaMaps[] = {
    {0, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, {1024, 512}, {2048}, {64, 64}, CU_TENSOR_MAP_SWIZZLE_128B},
    {1, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, {768, 1024}, {1536}, {64, 64}, CU_TENSOR_MAP_SWIZZLE_128B},
    {0, CU_TENSOR_MAP_DATA_TYPE_UINT8, 0, {0}, {0}, {0}, CU_TENSOR_MAP_SWIZZLE_NONE}};

static const int kNumKernels = 2;
static const KernelDesc kKernels[] = {{"kiln_copy", 0, 1}, {"kiln_matmul", 1, 2}, {"", 0, 0}};

static const int kArgs[] = {6, 0, 2, 3, 5, 0};
static const int kZeroArgs[] = {0};

static const LaunchDesc kLaunches[] = {{0, 0, 2, 0, 0}, {1, 2, 3, 0, 0}, {0, 0, 0, 0, 0}};

static const int64_t kDims[] = {6, 4, 6, 4, 4, 6, 512, 1024, 1024, 768, 512, 768, 2, -1, 0};
static const int kNumValues = 8;
static const ValueDesc kValues[] = {
    {"t", 6, 1, "f32", 2, 0, 96, 0},
    {"ax", 1, 7, "i64", 0, 2, 8, 0},
    {"c", 4, 1, "f32", 2, 2, 96, 0},
    {"x", 0, 1, "f32", 2, 4, 96, 0},
    {"a", 2, 10, "f16", 2, 6, 1048576, 0},
    {"b", 3, 10, "f16", 2, 8, 1572864, 0},
    {"d", 5, 10, "f16", 2, 10, 786432, 0},
    {"nz", -1, 7, "i64", 2, 12, 0, KILN_ON_HOST | KILN_DYNAMIC},
    {"", -1, 0, "", 0, 0, 0, 0}};

static const int kHostIo[] = {0, 1, 2, 3, 7, 0};

static const int kNumTasks = 4;
static const TaskDesc kTasks[] = {
    {KILN_TASK_KERNEL, "t", 0, 1, -1, 0, 0, 0},
    {KILN_TASK_HOST, "c", 0, 0, 1, 0, 2, 1},
    {KILN_TASK_KERNEL, "d", 1, 1, -1, 0, 0, 0},
    {KILN_TASK_HOST, "nz", 0, 0, 3, 3, 1, 1},
    {0, "", 0, 0, -1, 0, 0, 0}};

static const int kNumInputs = 4;
static const int kInputs[] = {3, 1, 4, 5, 0};
static const int kNumOutputs = 3;
static const int kOutputs[] = {2, 6, 7, 0};

// One bucket averaging t (written by task 0) into c's buffer... as a check
// of the tables' types: issued after task 0, waited for before task 1.
static const int kNumBuckets = 1;
static const BucketDesc kBuckets[] = {{0, 1, 0, 1}, {0, 0, 0, 0}};
static const CollectiveDesc kCollectives[] = {{6, 4, 24, KILN_F32}, {0, 0, 0, 0}};

#include "../launcher_runtime.cc"
