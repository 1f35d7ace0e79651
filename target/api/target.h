//===- target.h - The target interface ---------------------------*- C++ -*-===//
//
// Every target kiln compiles for — the built-in reference, npusim and cuda
// targets and third-party plugins — implements this interface and nothing
// else. A target has two halves:
//
//   compile: a description of the machine (engines, memory hierarchy, MMA
//            shapes, bandwidths, peak rates, the tiling figures the shared
//            backend needs, the settings it takes), a per-node placement
//            query that answers an engine and a reason, and compilation of
//            an optimized model into an artifact;
//   run:     recognizing its own artifacts and loading one into an
//            Executable (executable.h) that `kiln run`, `kiln conformance`,
//            training loops and gears drive.
//
// The headers of target/api/ include only graph/ir, graph/support and
// Abseil: they are the public API a plugin builds against (README.md,
// "Writing a target plugin"), installed under include/kiln/ with the CMake
// package Kiln (find_package(Kiln); Kiln::target_api).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "graph/ir/graph.h"
#include "target/api/executable.h"
#include "target/api/version.h"

namespace kiln::target {

// What kind of work an engine does; placement summaries group by this.
enum class EngineKind : uint8_t {
  kMatrix,    // matrix units: the NPU cube, GPU TensorCores
  kVector,    // SIMD/SIMT units: the NPU vector unit, GPU CUDA cores
  kFallback,  // general-purpose cores near the device: the NPU AICPU, host kernels in a GPU package
  kHost,      // the host CPU, across the host link
  kLinks,     // links between devices: collectives of data-parallel steps
};

struct Engine {
  std::string name;  // "cube", "vector", "aicpu", "host"
  EngineKind kind;
  std::string summary;
};

// One level of the memory hierarchy, from global memory inwards.
struct MemoryLevel {
  std::string name;               // "GM", "L1", "L0A", "UB", "smem", ...
  int64_t bytes = 0;              // capacity per compute unit (global: total)
  double bytes_per_cycle = 0;     // bandwidth into this level per compute unit
  // The tile IR scope this level holds (target/backend/tile_ir.h: "global",
  // "stage", "operand_a", "operand_b", "accumulator", "vector"); empty for a
  // level the tile IR does not address (a cache).
  std::string scope;
};

// A matrix-multiply step the matrix engine executes natively.
struct MmaShape {
  int m = 16, n = 16, k = 16;
  DType input = DType::kF16;
  DType accumulator = DType::kF32;
  double macs_per_cycle = 0;  // per compute unit
};

// What the shared backend's tiling and cost model need beyond the memory
// levels and MMA shapes: how the target's compute units run groups of work
// and pipelines. Defaults suit a unit that runs one group at a time with a
// double-buffered stage.
struct TilingFigures {
  int max_group = 1;               // groups (warps) per unit the lowering may use
  int max_stages = 2;              // pipeline depth of the stage scope the target supports
  int groups_at_peak = 1;          // groups a unit needs at work to reach its MMA rate (an SM: 4 warps)
  double global_latency_cycles = 500;
  int64_t max_group_accumulators = 0;  // accumulator elements one group may hold (a warp's registers); 0: no bound
  double stage_sync_cycles = 0;    // a pipeline stage's wait for its slot and hand-back (barriers)
  int max_resident_blocks = 1;     // blocks one unit runs at a time (capacities allowing): an SM's 32
  // Elements of an im2col stage tile per group at most (0: no bound): a
  // GPU's threads gather them one by one, each with its own index math.
  int64_t max_gather_per_group = 0;
  // Elements of a stage's A and B tiles per group at most (0: no bound).
  int64_t max_stage_per_group = 0;

  // How a target's GEMM kernels occupy its units. kWaves: one block per
  // output tile, the blocks in waves over the units (a GPU). kPersistent:
  // at most one block per unit, each walking its share of the output tiles
  // round-robin, with stage and operand loads double-buffered and every
  // engine a queue of instructions that pays its own latency (an Ascend AI
  // core: MTE2, MTE1, cube, FIXP, MTE3); the figures below time those
  // queues (docs/tile-ir.md, "The GEMM cost model").
  enum class GemmSchedule : uint8_t { kWaves, kPersistent } gemm_schedule = GemmSchedule::kWaves;
  struct EngineLatencies {
    double stage_load = 0;    // global -> stage, past the global latency (MTE2)
    double operand_load = 0;  // stage -> operand (MTE1)
    double mma = 0;           // one MMA instruction (cube)
    double write_out = 0;     // accumulator -> global or vector (FIXP)
    double vector_store = 0;  // vector -> global (MTE3)
    double sync = 0;          // one hand-off between engines (set/wait flag)
  };
  EngineLatencies latency{};
  double burst_cycles = 0;                  // between the bursts of one DMA
  double vector_store_bytes_per_cycle = 0;  // vector -> global, per unit (MTE3); 0: the stage bandwidth
  int issue_queue_depth = 32;               // instructions an engine's queue holds ahead of it
  // A stage tile's K rounds up to this many elements (the layout a stage
  // load writes; an MMA band); 0: the MMA's k.
  int64_t stage_k_granule = 0;
};

// A setting a target takes at compile time (`kiln compile --target=X
// --NAME=VALUE`; `kiln compile --target=X --help` lists them). kiln refuses
// a setting the chosen target does not declare, and a value of the wrong
// type, before the target sees it.
struct SettingSpec {
  enum class Type : uint8_t { kString, kFile, kInt, kBool };
  std::string name;      // "machine": given as --machine=VALUE
  Type type = Type::kString;
  std::string value_name;  // "FILE", "ARCH": how the help spells the value
  std::string help;        // one paragraph; the default included
};

// The links between devices that run a data-parallel step's collectives
// (chip links, NVLink): what the shared bucket planner
// (target/backend/allreduce_buckets.h) times an AllReduce with.
struct LinkFigures {
  double bytes_per_second = 0;  // one device's link bandwidth, each way; 0: no links
  double latency_seconds = 0;   // one step of a ring (a send and its completion)
  double launch_seconds = 0;    // a collective's start, before its first step
  int max_devices = 0;          // devices the links join (a node's GPUs); 0: no bound
};

struct TargetDescription {
  std::string name;
  std::string summary;
  std::vector<Engine> engines;
  std::vector<MemoryLevel> memory;
  std::vector<MmaShape> mma;
  int compute_units = 1;                   // AI cores, SMs
  double clock_ghz = 1;
  double global_bytes_per_second = 0;      // HBM
  double vector_bytes_per_cycle = 0;       // per compute unit
  double host_link_bytes_per_second = 0;   // PCIe, each way
  LinkFigures links;                       // between devices
  TilingFigures tiling;
  // The optimizer pipeline `kiln compile` runs for this target when
  // --passes is left at its default ("" for the default pipeline).
  std::string pipeline;
  std::vector<SettingSpec> settings;
  // What `kiln compile` names the artifact when -o is not given: the model's
  // name with this suffix (".kiln", or ".cuda" for a package directory).
  std::string artifact_suffix = ".kiln";
  // The artifacts are .kiln files (target/artifact), which kiln bundles one
  // per gear (--dynamic-batch, --dynamic-dims).
  bool bundles_gears = false;
  // ExplainArtifact says where each task runs after code generation (where
  // kernels that could not be generated moved to a fallback engine), so
  // `--explain-placement` prints that instead of the per-node placement.
  bool explains_artifacts = false;
  // This target runs kiln's reference executor, the semantics every other
  // target is checked against: the driver compiles for it when --target is
  // not given (TargetRegistry::DefaultTarget).
  bool golden = false;
};

// Where a node runs, and why.
struct Placement {
  std::string engine;
  std::string reason;
};

enum class Precision : uint8_t { kFp32, kFp16, kBf16, kMixed };
// "fp32", "fp16", "bf16", "mixed": the --precision spelling artifacts record.
inline const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kMixed: return "mixed";
  }
  return "fp32";
}
// The type an f32 model's matrix work computes in under `p`, with fp32
// accumulation: f16, bf16, or f32 itself. Mixed decides op by op (whose
// narrow type is f16 unless --mixed-type says bf16); f16 here is its default.
inline DType MatrixDType(Precision p) {
  switch (p) {
    case Precision::kFp16:
    case Precision::kMixed: return DType::kF16;
    case Precision::kBf16: return DType::kBF16;
    case Precision::kFp32: return DType::kF32;
  }
  return DType::kF32;
}

struct CompileOptions {
  Precision precision = Precision::kFp32;
  // Narrows a graph the way --precision and the --mixed-* flags ask (kiln's
  // precision passes): nothing under fp32, every matrix op and the
  // activations between them under fp16/bf16, op by op under mixed. Whether
  // anything changed. A target calls it where its lowering wants the narrow
  // types; kiln sets it (null: the target narrows by `precision` alone).
  std::function<absl::StatusOr<bool>(Graph&)> narrow;
  // Fusion groups (matrix ops with their epilogues, memory-bound chains):
  // false runs every op as a kernel of its own (`--fusion=false`), to see
  // what fusion buys.
  bool fusion = true;
  // The target's settings as given (TargetDescription::settings), checked
  // against its declarations.
  std::vector<std::pair<std::string, std::string>> settings;
  // Where a warning for the user goes ("inputs with dims unknown at compile
  // time ..."); null: nowhere.
  std::function<void(const std::string&)> warn;
  // kiln's host kernels as a shared library (libkiln_hostops.so) that an
  // artifact running host tasks outside kiln may carry; empty if unknown.
  std::string host_ops_library;

  // The value of setting `name` (the last one given, as for any flag), or
  // `fallback` when it was not given.
  std::string Setting(absl::string_view name, std::string fallback = "") const {
    for (auto it = settings.rbegin(); it != settings.rend(); ++it)
      if (it->first == name) return it->second;
    return fallback;
  }
  // A boolean setting's value, or `fallback` when it was not given; an
  // error for a value that is not true or false (CheckSettings refuses it
  // first for a setting declared kBool; a caller that compiles without
  // that check gets the same answer here).
  absl::StatusOr<bool> BoolSetting(absl::string_view name, bool fallback) const {
    const std::string v = Setting(name);
    bool b = fallback;
    if (!v.empty() && !absl::SimpleAtob(v, &b))
      return absl::InvalidArgumentError(absl::StrCat("--", name, "=", v, ": expected true or false"));
    return b;
  }
};

// Refuses a setting `description` does not declare and a value its type
// does not take, naming the target and the settings it takes.
absl::Status CheckSettings(const CompileOptions& options, const TargetDescription& description);

class Target {
 public:
  virtual ~Target() = default;
  virtual const TargetDescription& description() const = 0;
  // The engine that runs `node` under `options`, with the reason. Called on
  // optimized graphs; a node no engine supports answers an empty engine and
  // the reason, which fails the compile naming the node.
  virtual Placement Place(const Node& node, const CompileOptions& options) const = 0;
  // Compiles an optimized, placed model into the artifact at `output_path`.
  virtual absl::Status Compile(const Model& model, const CompileOptions& options,
                               const std::string& output_path) = 0;

  // The runtime half. Whether `path` holds an artifact of this target (a
  // cheap look at its first bytes or its layout): `kiln run` offers an
  // artifact to the target that recognizes it.
  virtual bool Recognizes(const std::string& path) const { return false; }
  // Loads an artifact of this target, ready to run.
  virtual absl::StatusOr<std::unique_ptr<Executable>> Load(const std::string& path) const {
    return absl::UnimplementedError("target " + description().name + " cannot run its artifacts");
  }
  // Whether this machine can run the target's artifacts at all (a GPU
  // target without a GPU cannot): `kiln conformance` asks before it starts.
  virtual absl::Status CanRun() const { return absl::OkStatus(); }
  // The kernel the target generates for `node` when it is tiled by the
  // target's own program rather than by the shared lowering: its tile IR
  // text and a note for listings (`kiln tile`). NotFound when the shared
  // lowering's form is what runs.
  struct OwnKernel {
    std::string note;
    std::string tile_ir;
  };
  virtual absl::StatusOr<OwnKernel> OwnTileKernel(const Node& node, const CompileOptions& options) const {
    return absl::NotFoundError("the shared lowering's kernel");
  }
  // Where each task of a compiled artifact runs, and why, after code
  // generation (TargetDescription::explains_artifacts).
  virtual absl::StatusOr<std::string> ExplainArtifact(const std::string& path) const { return std::string(); }
};

}  // namespace kiln::target
