//===- target.h - The target plugin interface -------------------*- C++ -*-===//
//
// Every target kiln compiles for — the built-in npusim and cuda targets and
// third-party plugins — implements this interface and nothing else: a
// description of the machine (engines, memory hierarchy, MMA shapes,
// bandwidths, peak rates), a per-node placement query that answers an engine
// and a reason, and compilation of an optimized model into an artifact.
//
// This header and target_registry.h are the public API a plugin builds
// against (see README.md, "Writing a target plugin").
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/passes/narrow_precision.h"
#include "graph/passes/pass.h"

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
  // The optimizer pipeline `kiln compile` runs for this target when
  // --passes is left at its default ("" for the default pipeline).
  std::string pipeline;
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
// accumulation: f16, bf16, or f32 itself. Mixed decides op by op
// (CompileOptions::mixed, whose narrow type is f16 unless it says bf16);
// f16 here is its default.
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
  // Under kMixed: the narrow type, the op lists' edits and the cost threshold
  // (`--mixed-type`, `--mixed-allow`, ...; graph/passes/narrow_precision.h).
  MixedPrecisionOptions mixed;
  // Fusion groups (matrix ops with their epilogues, memory-bound chains):
  // false runs every op as a kernel of its own (`--fusion=false`), to see
  // what fusion buys.
  bool fusion = true;
  // Target-specific settings (`--machine=FILE` for npusim, `--arch=sm_90a` for cuda).
  std::vector<std::pair<std::string, std::string>> settings;
};

// Refuses a setting the target does not read (a --machine given to the cuda
// target would otherwise be ignored): `known` lists the ones it reads.
inline absl::Status CheckSettings(const CompileOptions& options, const std::vector<std::string>& known,
                                  const std::string& target) {
  for (const auto& [key, value] : options.settings) {
    bool ok = false;
    for (const std::string& k : known) ok |= k == key;
    if (ok) continue;
    std::string takes;
    for (const std::string& k : known) takes += (takes.empty() ? "--" : ", --") + k;
    return absl::InvalidArgumentError("--" + key + " is not a setting of target " + target + " (it takes " +
                                      (takes.empty() ? std::string("no settings") : takes) + ")");
  }
  return absl::OkStatus();
}

// Narrows an optimized graph as `options` ask: nothing under fp32,
// NarrowMatrixOps under fp16 and bf16, MixPrecision under mixed. Whether
// anything changed.
inline absl::StatusOr<bool> NarrowForPrecision(Graph& g, const CompileOptions& options) {
  switch (options.precision) {
    case Precision::kFp32: return false;
    case Precision::kMixed: return MixPrecision(g, options.mixed);
    default: return NarrowMatrixOps(g, MatrixDType(options.precision));
  }
}

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
};

}  // namespace kiln::target
