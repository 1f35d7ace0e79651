//===- cmd_tile.cc - `kiln tile`: tile IR kernels, read or lowered ---------===//
//
// `kiln tile FILE.tir` parses a tile kernel, verifies it against a target's
// tile figures (without --target, every target's that tiles) and prints it
// back; `kiln tile MODEL --target=NAME` runs the
// target's optimizer pipeline and prints every node's tile kernel as the
// shared lowering makes it, or why the node has none.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <iostream>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/support/read_file.h"
#include "graph/verifier/verifier.h"
#include "target/api/target_registry.h"
#include "target/backend/tile_lowering.h"
#include "tools/kiln/cli_util.h"

ABSL_DECLARE_FLAG(std::string, target);
ABSL_DECLARE_FLAG(std::string, precision);

namespace kiln::cli {


namespace {

namespace tile = ::kiln::target::tile;

// The dtype the matrix engine reads under --precision (kF32: the tensors' own).
absl::StatusOr<DType> MatrixInputOf(const std::string& precision) {
  if (precision == "fp32") return DType::kF32;
  if (precision == "fp16") return DType::kF16;
  if (precision == "bf16") return DType::kBF16;
  return absl::InvalidArgumentError("kiln tile takes --precision=fp32, fp16 or bf16, not '" + precision + "'");
}

// Verifies `path` on each of `targets` (tile figures of targets that tile);
// prints it once when it verifies on all.
int TileFile(const std::string& path, const std::vector<tile::TileCostFigures>& targets) {
  // A tile kernel is printed as it is: what acts on models does nothing here.
  for (const char* flag : {"precision", "passes", "outputs", "print-after", "print-after-all", "time-passes", "stats",
                           "verify-each", "fold-max-elements"})
    if (FlagGiven(flag))
      return Fail(absl::StrCat("--", flag, " acts on models; a tile kernel (", path, ") is verified and printed as it is"));
  auto text = ReadFileBytes(path);
  if (!text.ok()) return Fail(text.status());
  auto kernel = tile::Parse(*text);
  if (!kernel.ok()) return Fail(absl::StrCat(path, ": ", kernel.status().message()));
  std::vector<absl::Status> verified;
  for (const tile::TileCostFigures& figures : targets) verified.push_back(tile::Verify(*kernel, figures.target));
  for (size_t i = 0; i < targets.size(); ++i) {
    if (verified[i].ok()) continue;
    // The target is named only where the kernel verified on another: a
    // rule every target holds fails alike on each.
    const bool elsewhere = std::any_of(verified.begin(), verified.end(), [](const absl::Status& s) { return s.ok(); });
    return Fail(absl::StrCat(path, ": ", verified[i].message(),
                             elsewhere ? " (on target " + targets[i].target.name + ")" : ""));
  }
  std::cout << tile::Print(*kernel);
  return 0;
}

int TileModel(const std::string& path, const target::Target& target, const tile::TileCostFigures& figures) {
  auto matrix_input = MatrixInputOf(absl::GetFlag(FLAGS_precision));
  if (!matrix_input.ok()) return Fail(matrix_input.status());
  auto model = LoadModel(path);
  if (!model.ok()) return Fail(model.status());
  if (absl::Status s = VerifyModel(*model); !s.ok()) return Fail(s);
  if (absl::Status s = RunPipelineFromFlags(*model, target.description().pipeline, /*is_opt=*/false); !s.ok()) return Fail(s);
  // Kernels a target tiles by its own program print as they run; other
  // nodes as the shared lowering tiles them for the target.
  target::CompileOptions options;
  options.precision = *matrix_input == DType::kF16    ? target::Precision::kFp16
                      : *matrix_input == DType::kBF16 ? target::Precision::kBf16
                                                      : target::Precision::kFp32;
  options.settings = TargetSettings();
  if (absl::Status s = target::CheckSettings(options, target.description()); !s.ok()) return Fail(s);
  for (Node* node : model->graph->nodes()) {
    const std::string name = node->name().empty() && node->num_outputs() > 0 ? node->output(0)->name() : node->name();
    absl::StatusOr<target::Target::OwnKernel> own = target.OwnTileKernel(*node, options);
    if (own.ok()) {
      std::cout << "// " << name << ": " << node->QualifiedOp() << " (" << own->note << ")\n" << own->tile_ir;
      continue;
    }
    if (!absl::IsNotFound(own.status())) return Fail(absl::StrCat(name, ": ", own.status().message()));
    auto kernel = tile::LowerNode(*node, *matrix_input, figures);
    if (!kernel.ok()) {
      std::cout << "// " << name << ": no tile kernel: " << kernel.status().message() << "\n";
      continue;
    }
    std::cout << "// " << name << ": " << node->QualifiedOp() << "\n" << tile::Print(*kernel);
  }
  return 0;
}

int Tile(const std::vector<std::string>& args) {
  if (args.size() != 1) return Fail("tile takes one file (KERNEL.tir, MODEL.onnx or MODEL.kir)");
  const bool is_tir = absl::EndsWith(args[0], ".tir");
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag("target");
  const bool target_given = flag && flag->CurrentValue() != flag->DefaultValue();
  if (!is_tir && !target_given) return Fail("kiln tile MODEL needs --target=NAME");
  if (is_tir && !target_given) {
    // A kernel meant for every target: each one that tiles (has MMA shapes).
    std::vector<tile::TileCostFigures> tiling;
    for (const auto* e : target::TargetRegistry::Global().List()) {
      tile::TileCostFigures f = tile::FiguresOf(e->factory()->description());
      if (!f.target.mma.empty()) tiling.push_back(std::move(f));
    }
    if (tiling.empty()) return Fail("no registered target tiles kernels (see `kiln targets`)");
    return TileFile(args[0], tiling);
  }
  auto target = target::TargetRegistry::Global().Create(absl::GetFlag(FLAGS_target));
  if (!target.ok()) return Fail(target.status());
  const tile::TileCostFigures figures = tile::FiguresOf((*target)->description());
  return is_tir ? TileFile(args[0], {figures}) : TileModel(args[0], **target, figures);
}

}  // namespace

extern const Command kTileCommand;
const Command kTileCommand = {
    "tile", "print tile IR kernels: a .tir file verified, or a model's nodes lowered",
    R"(usage: kiln tile KERNEL.tir [--target=NAME]
       kiln tile MODEL.onnx|MODEL.kir --target=NAME [--precision=fp32|fp16|bf16]

With a .tir file: parses the tile kernel, verifies it against the target's
scopes, capacities and MMA shapes and prints it; without --target, against
every registered target that tiles (an error names the target where the
kernel verifies on others).
With a model: runs the target's optimizer pipeline (or --passes) and prints,
for every node, its tile kernel (GEMM, elementwise or row-reduction form,
tiled by the cost model for the target), or `// NODE: no tile kernel: WHY`.
A node the target runs by a program of its own prints with that program's
tiling, marked with the target's note.
docs/tile-ir.md describes the tile IR.

flags:
  --target=NAME           a registered target (`kiln targets`)
  --SETTING=VALUE         a setting of the target, as for `kiln compile`
  --precision=P           the matrix engine's input for f32 models: fp32
                          (default: the tensors' dtype), fp16 or bf16
  --plugin=lib.so         load a target plugin first (repeatable)
  --passes, --outputs, --print-after, --print-after-all, --time-passes,
  --stats, --verify-each, --fold-max-elements: as for `kiln opt`
)",
    Tile, /*target_settings=*/true};

}  // namespace kiln::cli
