//===- reference_target.cc - The reference target -------------------------===//
#include "target/reference/reference_target.h"

#include "graph/ir/printer.h"
#include "graph/ops/op_registry.h"
#include "graph/support/status.h"
#include "runtime/artifact_executable.h"
#include "target/artifact/artifact_io.h"
#include "target/precision.h"

namespace kiln::target {
namespace {

class ReferenceTarget final : public Target {
 public:
  ReferenceTarget() {
    desc_.name = "reference";
    desc_.summary = "host reference kernels (the golden model)";
    desc_.engines = {{"host", EngineKind::kHost, "kiln's reference kernels on the host CPU"}};
    desc_.bundles_gears = true;
    desc_.golden = true;
  }
  const TargetDescription& description() const override { return desc_; }

  Placement Place(const Node& n, const CompileOptions&) const override {
    const OpDef* def = OpRegistry::Global().Find(n);
    if (!def || !def->kernel) return {"", "no reference kernel"};
    return {"host", "reference kernel"};
  }

  absl::Status Compile(const Model& model, const CompileOptions& options,
                       const std::string& output_path) override {
    KILN_RETURN_IF_ERROR(CheckSettings(options, desc_));
    // --precision narrows the graph as a device target would, so the host
    // kernels compute what fp16, bf16 or mixed precision give.
    Model narrowed = model.Clone();
    KILN_RETURN_IF_ERROR(NarrowForPrecision(*narrowed.graph, options).status());
    artifact::Artifact a;
    a.set_format_version(artifact::kArtifactFormatVersion);
    a.set_target(desc_.name);
    artifact::FillSignatures(*model.graph, &a);
    BlobStore blobs;
    a.set_graph_kir(PrintModel(narrowed, PrintOptions(), &blobs));
    a.set_constants(SerializeBlobStore(blobs));
    return artifact::WriteArtifact(std::move(a), output_path);
  }

  bool Recognizes(const std::string& path) const override {
    return artifact::PeekArtifactTarget(path) == desc_.name;
  }
  absl::StatusOr<std::unique_ptr<Executable>> Load(const std::string& path) const override {
    return runtime::LoadArtifactExecutable(path, desc_.name);
  }

 private:
  TargetDescription desc_;
};

}  // namespace

std::unique_ptr<Target> CreateReferenceTarget() { return std::make_unique<ReferenceTarget>(); }

}  // namespace kiln::target
