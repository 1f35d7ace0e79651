//===- cmd_compile.cc - `kiln compile` and `kiln targets` -----------------===//
#include <algorithm>
#include <filesystem>
#include <functional>
#include <iostream>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "graph/ir/printer.h"
#include "graph/passes/gears.h"
#include "graph/support/status.h"
#include "graph/verifier/verifier.h"
#include "target/api/target_registry.h"
#include "target/artifact/artifact_io.h"
#include "target/precision.h"
#include "tools/kiln/cli_util.h"

ABSL_DECLARE_FLAG(std::string, target);
ABSL_DECLARE_FLAG(std::string, o);
ABSL_FLAG(std::string, precision, "fp32", "Precision of matrix work: fp32, fp16, bf16 or mixed.");
ABSL_FLAG(bool, explain_placement, false, "Print each node's engine and why, and a summary per engine.");
ABSL_FLAG(bool, fusion, true,
          "Form fusion groups (epilogues, memory-bound chains); --fusion=false gives every op its own kernel.");

namespace kiln::cli {

absl::StatusOr<PassOptions> PassOptionsFromFlags();

namespace {

absl::StatusOr<target::Precision> ParsePrecision(const std::string& p) {
  if (p == "fp32") return target::Precision::kFp32;
  if (p == "fp16") return target::Precision::kFp16;
  if (p == "bf16") return target::Precision::kBf16;
  if (p == "mixed") return target::Precision::kMixed;
  return absl::InvalidArgumentError("--precision must be fp32, fp16, bf16 or mixed, not '" + p + "'");
}

// --dynamic-batch / --dynamic-dims: one static variant of the model per gear
// (the gears pass, graph/passes/gears.h), each compiled on its own, bundled
// in one artifact whose signature keeps the symbolic dims.
absl::Status CompileGearsInto(Model& model, const PassOptions& po, const target::TargetDescription& description,
                              bool explain, const std::function<absl::Status(Model&, const std::string&)>& compile_one,
                              const std::string& out) {
  const std::string& target_name = description.name;
  if (!description.bundles_gears) {
    std::string bundling;
    for (const auto* e : target::TargetRegistry::Global().List())
      if (e->factory()->description().bundles_gears) absl::StrAppend(&bundling, bundling.empty() ? "" : " and ", e->name);
    return absl::InvalidArgumentError(absl::StrCat("--dynamic-batch and --dynamic-dims: target ", target_name,
                                                   " does not bundle gears (", bundling,
                                                   " do); compile one model per shape with static input shapes"));
  }
  artifact::Artifact bundle;
  bundle.set_format_version(artifact::kArtifactFormatVersion);
  bundle.set_target(target_name);
  artifact::FillSignatures(*model.graph, &bundle);
  KILN_ASSIGN_OR_RETURN(GearVariants gears,
                        SpecializeGears(*model.graph, GearsRequest{po.dynamic_batch, po.dynamic_dims}));
  for (const std::string& sym : gears.symbols) bundle.add_gear_symbols(sym);
  const std::string scratch = out + ".gear";
  // The gears' constants, each blob once: every gear holds the same weights.
  BlobStore shared;
  for (GearVariant& variant : gears.gears) {
    Model gear;
    gear.ir_version = model.ir_version;
    gear.producer_name = model.producer_name;
    gear.producer_version = model.producer_version;
    gear.opsets = model.opsets;
    gear.graph = std::move(variant.graph);
    artifact::Gear* g = bundle.add_gears();
    for (int64_t v : variant.values) g->add_values(v);
    const std::string label = artifact::GearLabel(bundle, *g);
    if (explain) std::cout << "gear " << label << ":\n";
    absl::Status s = compile_one(gear, scratch);
    absl::StatusOr<artifact::Artifact> a =
        s.ok() ? artifact::ReadArtifact(scratch) : absl::StatusOr<artifact::Artifact>(s);
    std::error_code ec;
    std::filesystem::remove(scratch, ec);
    if (!a.ok())
      return absl::Status(a.status().code(), absl::StrCat("gear ", label, ": ", a.status().message()));
    BlobStore blobs;
    KILN_RETURN_IF_ERROR(DeserializeBlobStore(a->constants(), &blobs));
    for (auto& [hash, tensor] : blobs.blobs) shared.blobs.emplace(hash, std::move(tensor));
    a->clear_constants();
    *g->mutable_artifact() = *std::move(a);
  }
  bundle.set_constants(SerializeBlobStore(shared));
  return artifact::WriteArtifact(std::move(bundle), out);
}

int Compile(const std::vector<std::string>& args) {
  if (args.size() != 1) return Fail("compile takes one model (MODEL.onnx or MODEL.kir)");
  std::string target_name = TargetFromFlags();
  auto target = target::TargetRegistry::Global().Create(target_name);
  if (!target.ok()) return Fail(target.status());
  const target::TargetDescription& description = (*target)->description();
  target::CompileOptions options;
  auto precision = ParsePrecision(absl::GetFlag(FLAGS_precision));
  if (!precision.ok()) return Fail(precision.status());
  options.precision = *precision;
  auto pass_options = PassOptionsFromFlags();
  if (!pass_options.ok()) return Fail(pass_options.status());
  if (options.precision != target::Precision::kMixed && pass_options->mixed != MixedPrecisionOptions())
    return Fail("the --mixed-* flags apply to --precision=mixed only");
  options.narrow = target::NarrowingFor(options.precision, pass_options->mixed);
  options.fusion = absl::GetFlag(FLAGS_fusion);
  options.settings = TargetSettings();
  if (absl::Status s = target::CheckSettings(options, description); !s.ok()) return Fail(s);
  options.warn = [](const std::string& w) { std::cerr << "kiln: warning: " << w << "\n"; };
  options.host_ops_library = HostOpsLibraryPath();

  auto model = LoadModel(args[0]);
  if (!model.ok()) return Fail(model.status());
  if (absl::Status s = VerifyModel(*model); !s.ok()) return Fail(s);
  const std::string pipeline = driver::PipelineFor(description, options.fusion);
  // --fusion=false removes the fusion pass from the target's pipeline: a
  // target whose pipeline has none would compile the same bytes.
  if (!options.fusion && pipeline == description.pipeline)
    return Fail(absl::StrCat("--fusion=false: target ", target_name,
                             " forms no fusion groups (its pipeline runs no form-fusion-groups pass)"));
  const bool explain = absl::GetFlag(FLAGS_explain_placement);
  std::string out = absl::GetFlag(FLAGS_o);
  if (out.empty()) {
    std::string base = args[0];
    size_t dot = base.find_last_of('.');
    if (dot != std::string::npos && base.find('/', dot) == std::string::npos) base = base.substr(0, dot);
    out = base + description.artifact_suffix;
  }

  // Optimizes, places and compiles one model (the whole model, or one gear)
  // into `path`.
  driver::CompileJob job;
  job.model_name = args[0];
  job.target = target->get();
  job.options = options;
  job.pipeline = pipeline;
  job.run_pipeline = [](Model& m, const std::string& p) { return RunPipelineFromFlags(m, p, /*is_opt=*/false); };
  job.explain = explain;
  auto compile_one = [&job](Model& m, const std::string& path) -> absl::Status {
    std::string explanation;
    absl::Status s = driver::CompileModelInto(m, job, path, &explanation);
    std::cout << explanation;
    return s;
  };

  if (pass_options->dynamic_batch.empty() && pass_options->dynamic_dims.empty()) {
    if (absl::Status s = compile_one(*model, out); !s.ok()) return Fail(s);
  } else if (absl::Status s = CompileGearsInto(*model, *pass_options, description, explain, compile_one, out);
             !s.ok()) {
    return Fail(s);
  }
  // What was written, and for which target (the default one included).
  std::cerr << "kiln: wrote " << out << " (target " << target_name << ")\n";
  return 0;
}

}  // namespace

extern const Command kCompileCommand;
const Command kCompileCommand = {
    "compile", "compile a model for a target into a .kiln artifact",
    R"(usage: kiln compile MODEL.onnx|MODEL.kir --target=NAME [-o OUT.kiln] [flags]

Imports the model, runs the optimizer (--passes, default: the target's
pipeline), places every node on one of the target's engines, and writes the
artifact (default: the model's name with the target's suffix, MODEL.kiln,
beside the model). `kiln run OUT.kiln` runs it. Some targets write a
directory (a package of generated source: kernels, a host launcher with a
C API, the constants and the build files; the target's doc in docs/).

flags:
  --target=NAME           a registered target (`kiln targets`); default
                          reference (kiln's own kernels on the host)
  -o OUT.kiln             the artifact to write
  --precision=P           fp32 (default), fp16, bf16 or mixed: fp16/bf16 narrow
                          every matrix op and the activations between them;
                          mixed decides op by op (allow, infer, clear and deny
                          lists and a cost model of the Casts; README.md)
  --mixed-type=T          mixed: the narrow type, fp16 (default) or bf16
  --mixed-allow=OPS, --mixed-infer=OPS, --mixed-clear=OPS, --mixed-deny=OPS
                          mixed: move ops to that list (--mixed-deny=Softmax
                          keeps every Softmax f32)
  --mixed-min-macs-per-cast=N
                          mixed: a matrix op computes narrow when it does at
                          least N multiply-adds per element converted by the
                          Cast kernels it needs (default 32; 0 narrows every one)
  --SETTING=VALUE         a setting of the target (`kiln compile --target=NAME
                          --help` lists them; a setting the target does not
                          take is refused)
  --explain-placement     print each node's engine and the reason, and the
                          nodes and FLOPs per engine, and what the target
                          adds (its tasks after code generation, their tilings,
                          device memory, the copies around host tasks)
  --fusion=false          no fusion groups: every op its own kernel (to see
                          what fusing epilogues and memory-bound chains buys)
  --plugin=lib.so         load a target plugin first (repeatable; also every
                          lib*.so in the directories of KILN_PLUGIN_PATH)
  --passes, --outputs, --print-after, --print-after-all, --time-passes,
  --stats, --verify-each, --fold-max-elements: as for `kiln opt`
  --dynamic-batch=1,2,4   static-shape gears (targets whose artifacts bundle
                          them: `kiln targets`): one static
                          variant of the model per batch size, each compiled
                          on its own, in one artifact; `kiln run` runs the gear
                          its inputs fit (at most 100 gears)
  --dynamic-dims='seq=16,32'  gears over other symbolic dims of the inputs
)",
    Compile, /*target_settings=*/true};

}  // namespace kiln::cli
