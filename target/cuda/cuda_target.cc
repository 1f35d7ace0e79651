//===- cuda_target.cc - The cuda target -----------------------------------===//
//
// The description is an H100 SXM5 (Hopper, GH100): 132 SMs at the 1.98 GHz
// maximum boost clock, 228 KiB of shared memory per SM (227 KiB to one
// block), a 256 KiB register file per SM, a 50 MiB L2, 80 GB of HBM3 at
// 3.35 TB/s, PCIe 5.0 x16 to the host. The TensorCore MAC rates per SM and
// cycle are NVIDIA's published dense peaks divided by 132 SMs x 1.98 GHz
// (989.4 TFLOPS fp16/bf16, 494.7 tf32, 1,979 TOPS int8), so the cost model
// reproduces the peaks at the clock it models. The register file is shared
// among the tile scopes: operand fragments of A and B 32 KiB each, the
// accumulator 128 KiB, the elementwise/reduction threads 64 KiB.
//
// Placement is the op-support table below: matrix ops and kiln.Attention
// on the TensorCores, elementwise, reduction and normalization work and
// data movement on the SIMT cores, every other op with a reference kernel
// on the host with the reason recorded. Compilation may still move a node
// to the host when its kernel cannot be built (cuda_package.h).
//
//===----------------------------------------------------------------------===//
#include "target/cuda/cuda_target.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "graph/ops/op_registry.h"
#include "graph/passes/rewrite_helpers.h"
#include "graph/support/status.h"
#include "target/cuda/cuda_executable.h"
#include "target/backend/window.h"
#include "target/cuda/cuda_copy_kernel.h"
#include "target/cuda/cuda_decode_attention.h"
#include "target/cuda/cuda_package.h"
#include "target/cuda/cuda_runtime.h"
#include "target/cuda/cuda_values.h"
#include "target/placement/op_tables.h"
#include "target/placement/placement.h"

namespace kiln::target {
namespace {

constexpr int kSms = 132;
constexpr double kClockGhz = 1.98;

// MACs per SM per cycle that give `tflops` (2 flops per MAC) on 132 SMs at 1.98 GHz.
constexpr double MacsPerSmCycle(double tflops) { return tflops * 1e12 / 2 / (kSms * kClockGhz * 1e9); }

TargetDescription MakeDescription() {
  TargetDescription d;
  d.name = "cuda";
  d.summary = "NVIDIA GPUs (H100-like; sm_80 mma.sync, sm_90a wgmma) as a CUDA C++ package";
  d.engines = {
      {"tensorcore", EngineKind::kMatrix, "TensorCores: MatMul, Gemm and their fused epilogues (mma.sync, wgmma)"},
      {"simt", EngineKind::kVector,
       "CUDA cores: elementwise, reductions, normalizations, data movement (strided copies)"},
      {"host", EngineKind::kFallback, "kiln's reference kernels on the host, operands copied across PCIe"},
      {"nccl", EngineKind::kLinks,
       "NVLink between the GPUs of a node: a data-parallel step's AllReduces through NCCL, on a stream of their own"},
  };
  d.memory = {
      {"HBM3", int64_t{80} << 30, 64, "global"},
      {"L2", 50 << 20, 64, ""},
      {"smem", 227 << 10, 128, "stage"},
      {"regs.a", 32 << 10, 128, "operand_a"},
      {"regs.b", 32 << 10, 128, "operand_b"},
      {"regs.acc", 128 << 10, 128, "accumulator"},
      {"regs.vector", 64 << 10, 512, "vector"},
  };
  d.mma = {{16, 8, 16, DType::kF16, DType::kF32, MacsPerSmCycle(989.4)},
           {16, 8, 16, DType::kBF16, DType::kF32, MacsPerSmCycle(989.4)},
           {16, 8, 8, DType::kF32, DType::kF32, MacsPerSmCycle(494.7)},  // tf32
           {16, 8, 32, DType::kI8, DType::kI32, MacsPerSmCycle(1979)}};
  d.compute_units = kSms;
  d.clock_ghz = kClockGhz;
  d.global_bytes_per_second = 3.35e12;
  d.vector_bytes_per_cycle = 512;  // 128 fp32 lanes per SM
  d.host_link_bytes_per_second = 64e9;
  // NVLink 4 between the GPUs of an HGX H100 node: 900 GB/s per GPU both
  // ways together (NVIDIA's H100 datasheet), 450 GB/s each way; a ring
  // step's and a collective's latency as NCCL's tuning model gives them for
  // the ring algorithm's Simple protocol over NVLink (src/graph/tuning.cc:
  // hwLat 3.4 us, baseLat 8.4 us).
  d.links = {450e9, 3.4e-6, 8.4e-6, 8};
  // 8 warps per block; cp.async pipelines of up to 4 stages; an SM's four
  // TensorCores each serve one warp scheduler, so a block needs 4 warps
  // to reach the SM's MMA rate. A warp's accumulators live in its
  // threads' registers (255 at most per thread, operand fragments and
  // addresses beside them): 64x64 f32 per warp, 128 registers per thread.
  // A stage's barrier (the slot's mbarrier wait, the hand-back) costs
  // about 100 cycles, fitted with the latency to H100 GEMM timings of 38
  // tilings. An SM runs up to 32 blocks at once. A stage's A and B tiles
  // hold at most 3072 elements per warp, and an im2col B tile 512: the
  // threads issue those copies (and compute each gathered element's
  // address) themselves, and deeper per-warp stages measured up to 3x
  // slower on ResNet's convolutions (benchmarks/RESULTS.md, cuda target).
  d.tiling = {.max_group = 8,
              .max_stages = 4,
              .groups_at_peak = 4,
              .global_latency_cycles = 600,
              .max_group_accumulators = 64 * 64,
              .stage_sync_cycles = 100,
              .max_resident_blocks = 32,
              .max_gather_per_group = 512,
              .max_stage_per_group = 3072};
  // Fusion groups: GEMM epilogues in the TensorCore kernel, memory-bound
  // chains in one SIMT kernel; a group no kernel takes is split back.
  d.pipeline = "default,form-fusion-groups";
  d.settings = {{"arch", SettingSpec::Type::kString, "ARCH",
                 "the GPU architectures to build for: sm_80, sm_86, sm_89, sm_90 or sm_90a (default: sm_80 and "
                 "sm_90a in one package)"},
                {"buckets", SettingSpec::Type::kString, "S",
                 "data-parallel steps (`kiln opt --replicas=N`): how the gradients' AllReduces are grouped into NCCL "
                 "collectives: search (default: the split points that end the last one soonest, by the compile-time "
                 "estimates and NVLink's figures), ddp (PyTorch DDP's 25 MiB buckets, the first at 1 MiB), single, "
                 "per-tensor, or a size in MiB"},
                {"fp32-products", SettingSpec::Type::kString, "P",
                 "how f32 matrix products (GEMMs, convolutions) run on TensorCores: tf32 (default: operands rounded "
                 "to tf32's 10 mantissa bits, as cuBLAS and PyTorch do with TF32 allowed) or 3xtf32 (each operand "
                 "split into two tf32 parts and three products summed: about f32's accuracy, as PyTorch's default "
                 "on GPUs, at three times the MMAs, on mma.sync only; an f32 kiln.Attention is then split back)"},
                {"sm90a-gemm", SettingSpec::Type::kString, "S",
                 "how GEMMs with TMA-loaded operands run on sm_90a: warp-specialized (default: a producer warpgroup "
                 "feeds consumer warpgroups through an mbarrier ring, persistent blocks over the tiles) or uniform "
                 "(every warp computes, a block per tile)"},
                {"fused-attention", SettingSpec::Type::kBool, "BOOL",
                 "kiln.Attention as one FlashAttention kernel where it lowers (default true: the scores kept on "
                 "chip); false splits it back into MatMul, Softmax and MatMul, to see what fusing buys"}};
  d.artifact_suffix = ".cuda";
  d.explains_artifacts = true;
  return d;
}

bool GpuFloat(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }
bool GpuNumeric(DType t) {
  return GpuFloat(t) || t == DType::kI8 || t == DType::kU8 || t == DType::kI16 || t == DType::kI32 ||
         t == DType::kI64 || t == DType::kBool;
}

const absl::flat_hash_set<std::string>& SimtOps() {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      // elementwise
      "Abs", "Add", "Sub", "Mul", "Div", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Pow", "Relu",
      "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Erf",
      "Softplus", "Softsign", "Clip", "Max", "Min", "Sum", "Mean", "Floor", "Ceil", "Round", "Sign",
      "Sin", "Cos", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor",
      "Not", "Where", "Cast", "CastLike", "ThresholdedRelu", "Shrink", "IsNaN", "IsInf",
      // reductions and normalizations
      "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1",
      "ReduceL2", "ReduceLogSumExp", "ReduceLogSum", "ArgMax", "ArgMin", "Softmax", "LogSoftmax", "LayerNormalization",
      "BatchNormalization", "InstanceNormalization", "LpNormalization", "MeanVarianceNormalization",
      // pooling
      "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
      // composites
      "Gelu"};
  return *ops;
}

// The placement ladder's tables (target/placement/op_tables.h).
const OpTables& Tables() {
  static const OpTables* tables = [] {
    auto* t = new OpTables();
    t->matrix_engine = "tensorcore";
    t->vector_engine = "simt";
    t->fallback_engine = "host";
    t->fallback_where = "the host";
    t->kernel_kind = "GPU";
    t->vector_where = "the CUDA cores";
    t->matrix_where = "TensorCores";
    t->links_engine = "nccl";
    t->links_where = "NVLink through NCCL";
    t->device_kind = "GPU";
    t->matrix_ops = {"MatMul", "Gemm", "Conv", "Attention"};
    t->vector_ops = SimtOps();
    t->matrix_dtype = GpuFloat;
    t->matrix_dtype_refusal = "TensorCore kernels take fp32 (tf32), fp16 and bf16 operands";
    t->vector_dtype = GpuNumeric;
    t->vector_dtype_refusal = "no GPU kernel for these dtypes";
    t->gate = [](const Node& n, const std::function<Placement(std::string)>& host) -> std::optional<Placement> {
      if (!AllTensorsAre(n, cuda::FixedWidth)) return host("strings, f64 and complex tensors live on the host");
      if (IsNondeterministicOp(n)) return host("random numbers are drawn on the host");
      return std::nullopt;
    };
    t->copies = [](const Node& n, const std::function<Placement(std::string)>&) -> std::optional<Placement> {
      if (!cuda::IsCopyOp(n)) return std::nullopt;
      if (n.op() == "Gather" && !(n.input(1) && n.input(1)->is_constant()))
        return Placement{"simt", "data movement: a gather kernel reading its indices on the device"};
      return Placement{"simt", "data movement: a strided-copy kernel"};
    };
    t->matrix = [](const Node& n, const std::function<Placement(std::string)>& host) -> std::optional<Placement> {
      if (n.op() == "Attention" && n.domain() != "kiln") return host("no GPU kernel for ONNX's Attention");
      if (n.op() == "Attention" && cuda::DecodeAttentionTakes(n).ok())
        return Placement{"simt", "one query row against its cache: the decode attention kernels on the CUDA cores"};
      if (n.op() == "Attention")
        return Placement{"tensorcore", "attention as one FlashAttention kernel on TensorCores, the scores kept on chip"};
      if (n.op() != "Conv") return std::nullopt;
      absl::StatusOr<Window2d> w = WindowOf(n);
      if (!w.ok()) return host(std::string(w.status().message()));
      if (w->depthwise()) return Placement{"simt", "depthwise convolution: a window kernel on the CUDA cores"};
      return Placement{"tensorcore", "convolution as an implicit GEMM on TensorCores"};
    };
    t->fused = [](const Node& n, const std::function<Placement(std::string)>&) -> std::optional<Placement> {
      const std::string kind = n.GetString("kind", "");
      if (kind == "matmul-epilogue") return Placement{"tensorcore", "matrix op with fused epilogue on TensorCores"};
      if (kind != "conv-epilogue") return std::nullopt;
      const Attribute* body = n.attr("body");
      const Node* conv = body && body->g() && body->g()->num_nodes() > 0 ? *body->g()->nodes().begin() : nullptr;
      absl::StatusOr<Window2d> w = conv ? WindowOf(*conv) : absl::StatusOr<Window2d>(absl::NotFoundError(""));
      if (w.ok() && w->depthwise()) return Placement{"simt", "depthwise convolution with fused epilogue: a window kernel"};
      return Placement{"tensorcore", "convolution with fused epilogue"};
    };
    return t;
  }();
  return *tables;
}

class CudaTarget final : public Target {
 public:
  CudaTarget() : desc_(MakeDescription()) {}
  const TargetDescription& description() const override { return desc_; }

  Placement Place(const Node& n, const CompileOptions& options) const override { return PlaceByTables(n, Tables()); }

  absl::Status Compile(const Model& model, const CompileOptions& options, const std::string& output_path) override {
    KILN_ASSIGN_OR_RETURN(cuda::CudaPackage package, cuda::BuildCudaPackage(model, *this, options));
    KILN_RETURN_IF_ERROR(cuda::WriteCudaPackage(package, output_path));
    // A package with host tasks carries kiln's host-op provider beside its
    // library, so an application that embeds it needs nothing else.
    const std::filesystem::path dir(output_path);
    if (!options.host_ops_library.empty() && std::filesystem::exists(dir / "host_graph.kir")) {
      std::error_code ec;
      if (!std::filesystem::exists(options.host_ops_library, ec))
        return absl::FailedPreconditionError(
            absl::StrCat("the package has host tasks, and kiln's host-op provider ", options.host_ops_library,
                         " is missing (an incomplete installation: it belongs in lib/ beside bin/kiln)"));
      std::filesystem::copy_file(options.host_ops_library, dir / "libkiln_hostops.so",
                                 std::filesystem::copy_options::overwrite_existing, ec);
      if (ec)
        return absl::InternalError(absl::StrCat("copying libkiln_hostops.so into ", output_path, ": ", ec.message()));
    }
    return absl::OkStatus();
  }

  bool Recognizes(const std::string& path) const override { return IsCudaPackage(path); }
  absl::StatusOr<std::unique_ptr<Executable>> Load(const std::string& path) const override {
    return LoadCudaPackage(path);
  }
  absl::Status CanRun() const override {
    if (absl::Status s = ProbeCudaDevice(); !s.ok())
      return absl::FailedPreconditionError(absl::StrCat("no CUDA device: ", s.message()));
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExplainArtifact(const std::string& path) const override {
    return ExplainCudaPackage(path);
  }

 private:
  TargetDescription desc_;
};

}  // namespace

std::unique_ptr<Target> CreateCudaTarget() { return std::make_unique<CudaTarget>(); }

const TargetDescription& CudaDescription() {
  static const TargetDescription* d = new TargetDescription(MakeDescription());
  return *d;
}

absl::StatusOr<std::string> ExplainCudaPackage(const std::string& dir) {
  std::ifstream f(dir + "/placement.txt", std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("'", dir, "' holds no placement.txt: not a cuda package"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace kiln::target
