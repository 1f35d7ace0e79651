//===- compile_model.cc - A model through the optimizer and a target -------===//
#include "tools/driver/compile_model.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "frontend/onnx/importer.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "graph/support/status.h"
#include "graph/support/read_file.h"
#include "graph/verifier/verifier.h"
#include "target/api/target_registry.h"
#include "target/builtin_targets.h"
#include "target/host_kernels.h"
#include "target/placement/placement.h"

namespace kiln::driver {

absl::Status SetUpTargets(const std::vector<std::string>& plugins,
                          const std::function<void(const std::string&)>& warn) {
  target::TargetRegistry& r = target::TargetRegistry::Global();
  static const absl::Status builtin = [&r] {
    r.set_host_kernels(&target::ReferenceHostKernels());
    return r.AddTargets("built-in", KILN_TARGET_API_VERSION, target::RegisterBuiltinTargets);
  }();
  if (!builtin.ok()) return builtin;
  static bool searched = false;
  if (!searched) {
    searched = true;
    if (const char* path = std::getenv("KILN_PLUGIN_PATH"); path && *path)
      for (const absl::Status& s : r.LoadPluginsOnPath(path))
        if (warn) warn(absl::StrCat(s.message(), " (skipped)"));
  }
  for (const std::string& p : plugins) KILN_RETURN_IF_ERROR(r.LoadPlugin(p));
  return absl::OkStatus();
}

absl::StatusOr<Model> LoadModel(const std::string& path) {
  if (absl::EndsWith(path, ".kir")) {
    KILN_ASSIGN_OR_RETURN(const std::string text, ReadFileBytes(path));
    BlobStore blobs;
    std::string blob_path = path + ".blobs";
    std::error_code ec;
    if (std::filesystem::exists(blob_path, ec)) KILN_RETURN_IF_ERROR(LoadBlobStore(blob_path, &blobs));
    return ParseModel(text, path, &blobs);
  }
  if (absl::EndsWith(path, ".onnx")) return onnx_import::ImportFile(path);
  return absl::InvalidArgumentError(absl::StrCat(path, ": unknown model format (expected .onnx or .kir)"));
}

std::string PipelineFor(const target::TargetDescription& description, bool fusion) {
  if (fusion) return description.pipeline;
  std::vector<std::string> passes = absl::StrSplit(description.pipeline, ',');
  passes.erase(std::remove(passes.begin(), passes.end(), "form-fusion-groups"), passes.end());
  return absl::StrJoin(passes, ",");
}

absl::Status RunPipeline(Model& model, const std::string& passes, const PassOptions& options) {
  if (passes.empty() || passes == "none") return absl::OkStatus();
  PassManager pm(options);
  KILN_RETURN_IF_ERROR(pm.AddPipeline(passes));
  return pm.Run(model).status();
}

absl::Status CompileModelInto(Model& m, const CompileJob& job, const std::string& path, std::string* explanation) {
  const target::TargetDescription& description = job.target->description();
  KILN_RETURN_IF_ERROR(job.run_pipeline(m, job.pipeline));
  if (absl::Status s = VerifyModel(m); !s.ok())
    return absl::InvalidArgumentError("the optimized graph does not verify: " + std::string(s.message()));
  auto plan = target::PlaceGraph(*m.graph, *job.target, job.options);
  if (!plan.ok()) return absl::InvalidArgumentError(absl::StrCat(job.model_name, ": ", plan.status().message()));
  // A target that explains its artifacts does so after code generation,
  // where kernels that cannot be generated have moved to a fallback engine.
  if (job.explain && !description.explains_artifacts && explanation) *explanation += plan->Explain();
  if (absl::Status s = job.target->Compile(m, job.options, path); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat("target ", description.name, ": ", s.message()));
  if (job.explain && description.explains_artifacts && explanation) {
    KILN_ASSIGN_OR_RETURN(std::string text, job.target->ExplainArtifact(path));
    *explanation += text;
  }
  return absl::OkStatus();
}

}  // namespace kiln::driver
