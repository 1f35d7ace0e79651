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
#include "target/cuda/cuda_target.h"
#include "target/npusim/npusim_compile.h"
#include "target/placement/placement.h"
#include "tools/kiln/cli_util.h"

ABSL_DECLARE_FLAG(std::string, target);
ABSL_DECLARE_FLAG(std::string, o);
ABSL_DECLARE_FLAG(std::string, machine);
ABSL_FLAG(std::string, precision, "fp32", "Precision of matrix work: fp32, fp16, bf16 or mixed.");
ABSL_FLAG(bool, explain_placement, false, "Print each node's engine and why, and a summary per engine.");
ABSL_FLAG(std::string, arch, "", "cuda: the GPU architectures to build for (sm_80, sm_90a; default both).");
ABSL_FLAG(std::vector<std::string>, plugin, {}, "Target plugin shared libraries to load.");
ABSL_FLAG(std::string, buckets, "",
          "npusim: how a data-parallel step's AllReduces are grouped: search (default), ddp, single, per-tensor or "
          "a size in MiB.");
ABSL_FLAG(bool, fusion, true,
          "Form fusion groups (epilogues, memory-bound chains); --fusion=false gives every op its own kernel.");

namespace kiln::cli {

absl::Status RunPipelineFromFlags(Model& model, const std::string& target_pipeline);
absl::StatusOr<PassOptions> PassOptionsFromFlags();

absl::Status LoadPluginsFromFlags() {
  for (const std::string& p : absl::GetFlag(FLAGS_plugin)) {
    absl::Status s = target::TargetRegistry::Global().LoadPlugin(p);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

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
absl::Status CompileGearsInto(Model& model, const PassOptions& po, const std::string& target_name, bool explain,
                              const std::function<absl::Status(Model&, const std::string&)>& compile_one,
                              const std::string& out) {
  if (target_name != "npusim" && target_name != "reference")
    return absl::InvalidArgumentError(absl::StrCat(
        "--dynamic-batch and --dynamic-dims: target ", target_name,
        " does not bundle gears (npusim and reference do); compile one model per shape with static input shapes"));
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
  return artifact::WriteArtifact(bundle, out);
}

int Compile(const std::vector<std::string>& args) {
  if (args.size() != 1) return Fail("compile takes one model (MODEL.onnx or MODEL.kir)");
  if (absl::Status s = LoadPluginsFromFlags(); !s.ok()) return Fail(s);
  std::string target_name = absl::GetFlag(FLAGS_target);
  auto target = target::TargetRegistry::Global().Create(target_name);
  if (!target.ok()) return Fail(target.status());
  target::CompileOptions options;
  auto precision = ParsePrecision(absl::GetFlag(FLAGS_precision));
  if (!precision.ok()) return Fail(precision.status());
  options.precision = *precision;
  auto pass_options = PassOptionsFromFlags();
  if (!pass_options.ok()) return Fail(pass_options.status());
  options.mixed = pass_options->mixed;
  if (options.precision != target::Precision::kMixed && options.mixed != MixedPrecisionOptions())
    return Fail("the --mixed-* flags apply to --precision=mixed only");
  options.fusion = absl::GetFlag(FLAGS_fusion);
  if (std::string m = absl::GetFlag(FLAGS_machine); !m.empty()) options.settings.push_back({"machine", m});
  if (std::string b = absl::GetFlag(FLAGS_buckets); !b.empty()) {
    if (target_name != "npusim") return Fail("--buckets applies to --target=npusim only");
    options.settings.push_back({"buckets", b});
  }
  if (std::string a = absl::GetFlag(FLAGS_arch); !a.empty()) {
    if (target_name != "cuda") return Fail("--arch applies to --target=cuda only");
    options.settings.push_back({"arch", a});
  }

  auto model = LoadModel(args[0]);
  if (!model.ok()) return Fail(model.status());
  if (absl::Status s = VerifyModel(*model); !s.ok()) return Fail(s);
  std::string pipeline = (*target)->description().pipeline;
  if (!options.fusion) {
    std::vector<std::string> passes = absl::StrSplit(pipeline, ',');
    passes.erase(std::remove(passes.begin(), passes.end(), "form-fusion-groups"), passes.end());
    pipeline = absl::StrJoin(passes, ",");
  }
  const bool explain = absl::GetFlag(FLAGS_explain_placement);
  std::string out = absl::GetFlag(FLAGS_o);
  if (out.empty()) {
    std::string base = args[0];
    size_t dot = base.find_last_of('.');
    if (dot != std::string::npos && base.find('/', dot) == std::string::npos) base = base.substr(0, dot);
    out = base + (target_name == "cuda" ? ".cuda" : ".kiln");
  }

  // Optimizes, places and compiles one model (the whole model, or one gear)
  // into `path`.
  auto compile_one = [&](Model& m, const std::string& path) -> absl::Status {
    KILN_RETURN_IF_ERROR(RunPipelineFromFlags(m, pipeline));
    if (absl::Status s = VerifyModel(m); !s.ok())
      return absl::InvalidArgumentError("the optimized graph does not verify: " + std::string(s.message()));
    auto plan = target::PlaceGraph(*m.graph, **target, options);
    if (!plan.ok()) return absl::InvalidArgumentError(absl::StrCat(args[0], ": ", plan.status().message()));
    // npusim and cuda explain their tasks after code generation, where
    // kernels that cannot be generated have moved to the AICPU or the host.
    const bool explain_after = target_name == "npusim" || target_name == "cuda";
    if (explain && !explain_after) std::cout << plan->Explain();
    if (absl::Status s = (*target)->Compile(m, options, path); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat("target ", target_name, ": ", s.message()));
    // A cuda package with host tasks gets kiln's host-op provider beside its
    // library, so an application that embeds it needs nothing else.
    if (target_name == "cuda" && std::filesystem::exists(std::filesystem::path(path) / "host_graph.kir")) {
      std::error_code ec;
      std::filesystem::copy_file(KILN_HOSTOPS_LIBRARY_PATH, std::filesystem::path(path) / "libkiln_hostops.so",
                                 std::filesystem::copy_options::overwrite_existing, ec);
      if (ec) return absl::InternalError(absl::StrCat("copying libkiln_hostops.so into ", path, ": ", ec.message()));
    }
    if (explain && target_name == "npusim") {
      KILN_ASSIGN_OR_RETURN(artifact::Artifact a, artifact::ReadArtifact(path));
      std::cout << target::ExplainNpusimTasks(a);
    }
    if (explain && target_name == "cuda") {
      KILN_ASSIGN_OR_RETURN(std::string text, target::ExplainCudaPackage(path));
      std::cout << text;
    }
    return absl::OkStatus();
  };

  if (pass_options->dynamic_batch.empty() && pass_options->dynamic_dims.empty()) {
    // The device targets need static shapes: what depends on a symbolic dim
    // of an input falls back to the AICPU or the host. Say so, and how to
    // keep it on the cores.
    std::vector<std::string> symbolic;
    for (const Value* in : model->graph->inputs())
      if (in->type().is_tensor() && in->type().shape().ranked() && !in->type().shape().is_static())
        symbolic.push_back(absl::StrCat(in->name(), ": ", in->type().ToString()));
    if (!symbolic.empty() && target_name == "npusim")
      std::cerr << "kiln: warning: inputs with dims unknown at compile time (" << absl::StrJoin(symbolic, ", ")
                << "): what depends on them runs off the cores; --dynamic-batch or --dynamic-dims compiles static "
                   "gears\n";
    if (absl::Status s = compile_one(*model, out); !s.ok()) return Fail(s);
    return 0;
  }
  if (absl::Status s = CompileGearsInto(*model, *pass_options, target_name, explain, compile_one, out); !s.ok())
    return Fail(s);
  return 0;
}

}  // namespace

extern const Command kCompileCommand;
const Command kCompileCommand = {
    "compile", "compile a model for a target into a .kiln artifact",
    R"(usage: kiln compile MODEL.onnx|MODEL.kir --target=NAME [-o OUT.kiln] [flags]

Imports the model, runs the optimizer (--passes, default: the default
pipeline), places every node on one of the target's engines, and writes the
artifact (default: MODEL.kiln beside the model). `kiln run OUT.kiln` runs it.
--target=cuda writes a package directory instead (default: MODEL.cuda): the
CUDA C++ of every kernel, a host launcher with a C API, the constants and
the build files (docs/cuda-target.md); `kiln run DIR` builds and runs it.

flags:
  --target=NAME           a registered target (`kiln targets`)
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
  --machine=FILE          npusim: the machine description (default ascend910-like)
  --buckets=S             npusim, data-parallel steps (`kiln opt --replicas=N`):
                          how the gradients' AllReduces are grouped into
                          collectives on the chip links: search (default: the
                          split points that end the last one soonest, by the
                          compile-time estimates), ddp (PyTorch DDP's 25 MiB
                          buckets, the first at 1 MiB), single, per-tensor,
                          or a size in MiB
  --arch=ARCH             cuda: sm_80, sm_86, sm_89, sm_90 or sm_90a (default: sm_80
                          and sm_90a in one package)
  --explain-placement     print each node's engine and the reason, and the
                          nodes and FLOPs per engine (npusim: each task after
                          code generation, with its tiling, and device memory;
                          cuda: each task, the copies around host tasks)
  --fusion=false          no fusion groups: every op its own kernel (to see
                          what fusing epilogues and memory-bound chains buys)
  --plugin=lib.so         load a target plugin first (repeatable as a list)
  --passes, --outputs, --print-after, --print-after-all, --time-passes,
  --stats, --verify-each, --fold-max-elements: as for `kiln opt`
  --dynamic-batch=1,2,4   static-shape gears (npusim, reference): one static
                          variant of the model per batch size, each compiled
                          on its own, in one artifact; `kiln run` runs the gear
                          its inputs fit (at most 100 gears)
  --dynamic-dims='seq=16,32'  gears over other symbolic dims of the inputs
)",
    Compile};

extern const Command kTargetsCommand;
const Command kTargetsCommand = {
    "targets", "list the registered targets",
    R"(usage: kiln targets [--plugin=lib.so]

Lists every registered target (built-in, or loaded from --plugin) with its
engines.
)",
    [](const std::vector<std::string>& args) -> int {
      if (absl::Status s = LoadPluginsFromFlags(); !s.ok()) return Fail(s);
      for (const auto* e : target::TargetRegistry::Global().List()) {
        std::cout << e->name << std::string(e->name.size() < 12 ? 12 - e->name.size() : 1, ' ') << e->summary;
        if (e->origin != "built-in") std::cout << " [" << e->origin << "]";
        std::cout << "\n";
        auto t = e->factory();
        for (const auto& eng : t->description().engines)
          std::cout << "    " << eng.name << std::string(eng.name.size() < 8 ? 8 - eng.name.size() : 1, ' ')
                    << eng.summary << "\n";
      }
      return 0;
    }};

}  // namespace kiln::cli
