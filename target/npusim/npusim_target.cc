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
#include "target/npusim/npusim_description.h"
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
TargetDescription MakeDescription() { return npusim::DescriptionOf(sim::DefaultMachine()); }

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
      if (npusim::IsIndexedMove(n) && AllTensorsAre(n, CoreNumeric))
        return Placement{"vector", "data movement by DMA, each update written where an index the scalar unit reads "
                                   "(ld) says"};
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
    return artifact::WriteArtifact(std::move(a), output_path);
  }

  bool Recognizes(const std::string& path) const override {
    return artifact::PeekArtifactTarget(path) == desc_.name;
  }
  absl::StatusOr<std::unique_ptr<Executable>> Load(const std::string& path) const override {
    return runtime::LoadArtifactExecutable(path, desc_.name, NpusimModuleLoader());
  }
  absl::StatusOr<OwnKernel> OwnTileKernel(const Node& node, const CompileOptions& options) const override {
    // The cube's programs are shown for the graph as given (kiln tile does
    // not narrow it): under --precision the shared lowering's kernel is.
    if (options.precision != Precision::kFp32) return absl::NotFoundError("the shared lowering's kernel");
    KILN_ASSIGN_OR_RETURN(std::string text, NpusimTileIr(node, *this, options));
    return OwnKernel{"npusim cube kernel", std::move(text)};
  }
  absl::StatusOr<std::string> ExplainArtifact(const std::string& path) const override {
    // The message alone: the constants stay where they lie in the file.
    KILN_ASSIGN_OR_RETURN(artifact::ArtifactFile f, artifact::ReadArtifactFile(path));
    return ExplainNpusimTasks(f.message);
  }

 private:
  TargetDescription desc_;
};

}  // namespace

std::unique_ptr<Target> CreateNpusimTarget() { return std::make_unique<NpusimTarget>(); }

}  // namespace kiln::target
