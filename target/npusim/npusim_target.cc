//===- npusim_target.cc - The npusim target -------------------------------===//
//
// The description is derived from the default machine
// (sim/machines/ascend910-like: 32 AI cores at 1 GHz, a 16x16x16 fp16 cube,
// a 256-byte vector unit, L1 1 MiB, L0A/L0B 64 KiB, L0C 256 KiB, UB 256 KiB,
// HBM 1.2 TB/s, PCIe 4.0 x16).
//
// Placement is the op-support table below: matrix ops on the cube,
// elementwise, reduction, normalization and pooling work on the vector unit,
// and every other op that has a reference kernel on the AICPU, with the
// reason recorded.
//
//===----------------------------------------------------------------------===//
#include "target/npusim/npusim_target.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/ops/op_registry.h"
#include "graph/support/status.h"
#include "runtime/artifact_executable.h"
#include "target/artifact/artifact_io.h"
#include "target/npusim/npusim_compile.h"
#include "target/npusim/npusim_executable.h"
#include "target/backend/copy_pieces.h"
#include "target/npusim/kernels/move.h"
#include "sim/machine/machine.h"
#include "target/placement/op_tables.h"
#include "target/placement/placement.h"

namespace kiln::target {
namespace {

// The description is the default machine's (sim/machines/ascend910-like,
// sim::DefaultMachine): its numbers live there alone.
TargetDescription MakeDescription() {
  const sim::Machine m = sim::DefaultMachine();
  const sim::Core& core = m.core();
  TargetDescription d;
  d.name = "npusim";
  d.summary = "Ascend-like NPU on kiln's SystemC cycle model (cube, vector, AICPU)";
  d.engines = {
      {"cube", EngineKind::kMatrix, "16x16x16 matrix unit: MatMul, Gemm, Conv, attention"},
      {"vector", EngineKind::kVector,
       absl::StrCat(core.vector_bytes_per_cycle(), "-byte SIMD unit: elementwise, reductions, normalizations, pooling")},
      {"aicpu", EngineKind::kFallback, "CPU cores beside the AI cores: control flow, sorting, rare ops"},
      {"host", EngineKind::kHost, "the host CPU, across PCIe"},
      {"links", EngineKind::kLinks, "the chip links: AllReduce among data-parallel chips"},
  };
  // Each level's bandwidth is the mover that fills it: MTE2 into L1 (and
  // out of GM), MTE1 into L0A/L0B, the FIXP stage out of L0C.
  const double mte2 = core.mte2_bytes_per_cycle();
  d.memory = {
      {"GM", m.chip().hbm_size_mib() << 20, mte2, "global"},
      {"L1", core.l1_kib() << 10, mte2, "stage"},
      {"L0A", core.l0a_kib() << 10, core.mte1_bytes_per_cycle(), "operand_a"},
      {"L0B", core.l0b_kib() << 10, core.mte1_bytes_per_cycle(), "operand_b"},
      {"L0C", core.l0c_kib() << 10, core.fixp_bytes_per_cycle(), "accumulator"},
      {"UB", core.ub_kib() << 10, static_cast<double>(core.vector_bytes_per_cycle()), "vector"},
  };
  const double f16 = static_cast<double>(core.cube_fp16_macs_per_cycle());
  d.mma = {{16, 16, 16, DType::kF16, DType::kF32, f16},
           {16, 16, 16, DType::kBF16, DType::kF32, f16},
           {16, 16, 32, DType::kI8, DType::kI32, static_cast<double>(core.cube_int8_macs_per_cycle())},
           {16, 16, 8, DType::kF32, DType::kF32, static_cast<double>(core.cube_fp32_macs_per_cycle())}};
  d.compute_units = m.chip().ai_cores();
  d.clock_ghz = m.chip().clock_mhz() / 1000;
  d.global_bytes_per_second = m.chip().hbm_bandwidth_gbps() * 1e9;
  d.vector_bytes_per_cycle = static_cast<double>(core.vector_bytes_per_cycle());
  d.host_link_bytes_per_second = m.host_link().bandwidth_gbps() * 1e9;
  // One cube per AI core; L1 double-buffered; HBM latency of the SystemC
  // model; the accumulator scope's capacity is the only bound on a group's
  // accumulators; a stage's flag waits are not charged.
  d.tiling = {.max_group = 1,
              .max_stages = 2,
              .groups_at_peak = 1,
              .global_latency_cycles = static_cast<double>(m.chip().hbm_latency_cycles())};
  // Fusion groups: MatMul/Gemm epilogues (bias, Relu) run in the cube
  // kernel's FIXP stage; groups no kernel takes are split back.
  d.pipeline = "default,form-fusion-groups";
  d.settings = {
      {"machine", SettingSpec::Type::kFile, "FILE",
       "the machine description (default: ascend910-like; sim/machines/, docs/npu.md)"},
      {"buckets", SettingSpec::Type::kString, "S",
       "data-parallel steps (`kiln opt --replicas=N`): how the gradients' AllReduces are grouped into collectives "
       "on the chip links: search (default: the split points that end the last one soonest, by the compile-time "
       "estimates), ddp (PyTorch DDP's 25 MiB buckets, the first at 1 MiB), single, per-tensor, or a size in MiB"},
  };
  d.bundles_gears = true;
  d.explains_artifacts = true;
  return d;
}

bool CoreFloat(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }
bool CoreNumeric(DType t) {
  return CoreFloat(t) || t == DType::kI8 || t == DType::kU8 || t == DType::kI32 || t == DType::kI64 ||
         t == DType::kBool || t == DType::kI16;
}

const absl::flat_hash_set<std::string>& VectorOps() {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      // elementwise
      "Abs", "Add", "Sub", "Mul", "Div", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Pow", "Relu",
      "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Erf",
      "Softplus", "Softsign", "Clip", "Max", "Min", "Sum", "Mean", "Floor", "Ceil", "Round", "Sign",
      "Sin", "Cos", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor",
      "Not", "Where", "Cast", "CastLike", "Dropout", "ThresholdedRelu", "Shrink", "IsNaN", "IsInf",
      // reductions and normalizations
      "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1",
      "ReduceL2", "ReduceLogSumExp", "ReduceLogSum", "ArgMax", "ArgMin", "Softmax", "LogSoftmax",
      "LayerNormalization", "BatchNormalization", "InstanceNormalization", "LpNormalization",
      "MeanVarianceNormalization",
      // pooling
      "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
      // data movement the vector unit and MTEs do well
      "Transpose", "Concat", "Split", "Slice", "Expand", "Tile", "Pad", "DepthToSpace", "SpaceToDepth",
      // composites
      "Gelu"};
  return *ops;
}

const absl::flat_hash_set<std::string>& CubeOps() {
  static const auto* ops = new absl::flat_hash_set<std::string>{"MatMul", "Gemm", "Conv", "Attention"};
  return *ops;
}

// The placement ladder's tables (target/placement/op_tables.h).
const OpTables& Tables() {
  static const OpTables* tables = [] {
    auto* t = new OpTables();
    t->matrix_engine = "cube";
    t->vector_engine = "vector";
    t->fallback_engine = "aicpu";
    t->fallback_where = "the AICPU";
    t->kernel_kind = "core";
    t->vector_where = "the vector unit";
    t->matrix_where = "the cube";
    t->links_engine = "links";
    t->matrix_ops = CubeOps();
    t->vector_ops = VectorOps();
    t->matrix_dtype = CoreFloat;
    t->matrix_dtype_refusal = "the cube takes fp32/fp16/bf16 operands only";
    t->vector_dtype = CoreNumeric;
    t->vector_dtype_refusal = "the vector unit has no f64, string or complex support";
    t->copies = [](const Node& n, const std::function<Placement(std::string)>& fallback) -> std::optional<Placement> {
      if (!HasCopyPieces(n)) return std::nullopt;
      if (!AllTensorsAre(n, [](DType t) { return t != DType::kString; })) return fallback("strings live on the host");
      if (n.op() == "Gather" && !(n.input(1) && n.input(1)->is_constant()))
        return Placement{"vector", "data movement by DMA, rows chosen by indices the scalar unit reads (ld)"};
      return Placement{"vector", "data movement by DMA (MTE2 in, MTE3 out)"};
    };
    t->matrix = [](const Node& n, const std::function<Placement(std::string)>& fallback) -> std::optional<Placement> {
      if (n.op() == "Conv" && n.input(1) && n.input(1)->type().shape().rank() != 4)
        return fallback("the cube's im2col load handles 2-D convolution only");
      return std::nullopt;
    };
    return t;
  }();
  return *tables;
}

class NpusimTarget final : public Target {
 public:
  NpusimTarget() : desc_(MakeDescription()) {}
  const TargetDescription& description() const override { return desc_; }

  Placement Place(const Node& n, const CompileOptions& options) const override { return PlaceByTables(n, Tables()); }

  absl::Status Compile(const Model& model, const CompileOptions& options,
                       const std::string& output_path) override {
    // What depends on a symbolic dim of an input falls back to the AICPU
    // or the host: say so, and how to keep it on the cores.
    std::vector<std::string> symbolic;
    for (const Value* in : model.graph->inputs())
      if (in->type().is_tensor() && in->type().shape().ranked() && !in->type().shape().is_static())
        symbolic.push_back(absl::StrCat(in->name(), ": ", in->type().ToString()));
    if (!symbolic.empty() && options.warn)
      options.warn(absl::StrCat("inputs with dims unknown at compile time (", absl::StrJoin(symbolic, ", "),
                                "): what depends on them runs off the cores; --dynamic-batch or --dynamic-dims "
                                "compiles static gears"));
    KILN_ASSIGN_OR_RETURN(artifact::Artifact a, CompileForNpusim(model, *this, options));
    return artifact::WriteArtifact(a, output_path);
  }

  bool Recognizes(const std::string& path) const override {
    return artifact::PeekArtifactTarget(path) == desc_.name;
  }
  absl::StatusOr<std::unique_ptr<Executable>> Load(const std::string& path) const override {
    return runtime::LoadArtifactExecutable(path, desc_.name, NpusimModuleLoader());
  }
  absl::StatusOr<OwnKernel> OwnTileKernel(const Node& node, const CompileOptions& options) const override {
    // The cube's programs tile f32 models by their own cost model.
    if (options.precision != Precision::kFp32) return absl::NotFoundError("the shared lowering's kernel");
    KILN_ASSIGN_OR_RETURN(std::string text, NpusimTileIr(node, *this, options));
    return OwnKernel{"npusim cube kernel", std::move(text)};
  }
  absl::StatusOr<std::string> ExplainArtifact(const std::string& path) const override {
    KILN_ASSIGN_OR_RETURN(artifact::Artifact a, artifact::ReadArtifact(path));
    return ExplainNpusimTasks(a);
  }

 private:
  TargetDescription desc_;
};

}  // namespace

std::unique_ptr<Target> CreateNpusimTarget() { return std::make_unique<NpusimTarget>(); }

}  // namespace kiln::target
