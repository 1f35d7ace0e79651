//===- loaded_model.cc - Loading and running compiled artifacts -----------===//
#include "runtime/loaded_model.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "graph/support/status.h"
#include "target/artifact/artifact_io.h"

namespace kiln::runtime {
namespace {

std::string Describe(const Tensor& t) {
  std::string dims;
  for (int i = 0; i < t.rank(); ++i) absl::StrAppend(&dims, i ? "," : "", t.dim(i));
  return absl::StrCat(DTypeName(t.dtype()), "[", dims, "]");
}

// A data-parallel model (`replicas` > 1) also takes an input whose leading
// dim is `replicas` times the signature's: the whole batch, one shard per chip.
absl::Status CheckInput(const artifact::TensorSignature& s, const Tensor& t, int replicas) {
  bool ok = s.dtype() == DTypeName(t.dtype()) && s.dims_size() == t.rank();
  for (int i = 0; ok && i < s.dims_size(); ++i) {
    if (s.dims(i) < 0 || s.dims(i) == t.dim(i)) continue;
    ok = i == 0 && replicas > 1 && s.dims(0) > 0 && t.dim(0) == s.dims(0) * replicas;
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "input '", s.name(), "': the model expects ", artifact::DescribeSignature(s).substr(s.name().size() + 2),
      replicas > 1 && s.dims_size() > 0 ? absl::StrCat(" (or ", replicas, " times its leading dim: one shard per chip)")
                                        : "",
      ", got ", Describe(t)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadedModel::Load(const std::string& path, ModuleLoader loader) {
  auto f = artifact::ReadArtifactFile(path);
  if (!f.ok()) return f.status();
  return Build(std::move(f->message), f->section, f->file, path, nullptr, loader);
}

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadedModel::FromArtifact(artifact::Artifact artifact,
                                                                       const std::string& path, ModuleLoader loader) {
  return Build(std::move(artifact), {}, nullptr, path, nullptr, loader);
}

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadedModel::Build(artifact::Artifact artifact,
                                                                absl::string_view section,
                                                                std::shared_ptr<const void> owner,
                                                                const std::string& path, const BlobStore* shared,
                                                                const ModuleLoader& loader) {
  auto m = std::make_unique<LoadedModel>();
  m->path_ = path;
  m->artifact_ = std::move(artifact);
  // The constants: the file's section, borrowed where they lie in its
  // mapping (an artifact is a compiler's output, read back under its
  // CRC-32: its blobs' hashes need not be computed again), or the message's.
  const bool in_file = !section.empty();
  const absl::string_view constants = in_file ? section : absl::string_view(m->artifact_.constants());
  auto read_constants = [&](BlobStore* blobs) {
    return DeserializeBlobStore(constants, blobs, BlobHashes::kTrusted, in_file ? owner : nullptr);
  };
  if (m->artifact_.gears_size() > 0) {
    BlobStore bundle_blobs;
    if (absl::Status s = read_constants(&bundle_blobs); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(path, ": constants: ", s.message()));
    for (artifact::Gear& g : *m->artifact_.mutable_gears()) {
      const std::string label = artifact::GearLabel(m->artifact_, g);
      if (g.values_size() != m->artifact_.gear_symbols_size() ||
          g.artifact().inputs_size() != m->artifact_.inputs_size() ||
          g.artifact().outputs_size() != m->artifact_.outputs_size() || g.artifact().gears_size() > 0)
        return absl::InvalidArgumentError(absl::StrCat(path, ": gear ", label, " does not match the model's signature"));
      // The gear's artifact moves into its model (the bundle keeps the rest).
      auto gear = Build(std::move(*g.mutable_artifact()), {}, nullptr, absl::StrCat(path, " (gear ", label, ")"),
                        &bundle_blobs, loader);
      g.clear_artifact();
      if (!gear.ok()) return gear.status();
      (*gear)->gear_label_ = label;
      m->gears_.push_back(*std::move(gear));
    }
    return m;
  }
  // A gear of a bundle has no constants of its own: it reads the bundle's.
  const bool use_shared = shared && constants.empty();
  BlobStore blobs;
  if (!use_shared) {
    absl::Status s = read_constants(&blobs);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": constants: ", s.message()));
  }
  auto model = ParseModel(m->artifact_.graph_kir(), path, use_shared ? shared : &blobs);
  if (!model.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": graph: ", model.status().message()));
  m->model_ = *std::move(model);
  // The target's module runs on its device; without one the graph runs on
  // the reference executor.
  if (loader) {
    auto e = loader(m->artifact_, &m->model_);
    if (!e.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.status().message()));
    m->module_ = *std::move(e);
  }
  return m;
}

std::vector<Tensor> LoadedModel::InitialValues() const {
  // A bundle of gears: every gear has the same variables (gears pin
  // symbolic dims, and variables are static).
  const Model& m = gears_.empty() ? model_ : gears_.front()->model_;
  std::vector<Tensor> out(artifact_.inputs_size());
  if (!m.graph) return out;
  for (int i = 0; i < artifact_.inputs_size(); ++i)
    for (const Value* v : m.graph->inputs())
      if (v->name() == artifact_.inputs(i).name()) out[i] = v->initial();
  return out;
}

absl::Status LoadedModel::CheckInputs(const std::vector<Tensor>& inputs) const {
  if (static_cast<int>(inputs.size()) != artifact_.inputs_size())
    return absl::InvalidArgumentError(absl::StrCat("the model takes ", artifact_.inputs_size(), " inputs, got ",
                                                   inputs.size()));
  const int replicas = module_ ? module_->replicas() : 1;
  for (int i = 0; i < artifact_.inputs_size(); ++i)
    KILN_RETURN_IF_ERROR(CheckInput(artifact_.inputs(i), inputs[i], replicas));
  return absl::OkStatus();
}

absl::StatusOr<const LoadedModel*> LoadedModel::GearFor(const std::vector<Tensor>& inputs) const {
  KILN_RETURN_IF_ERROR(CheckInputs(inputs));
  if (gears_.empty()) return this;
  KILN_ASSIGN_OR_RETURN(size_t i, GearIndex(inputs));
  return gears_[i].get();
}

absl::StatusOr<size_t> LoadedModel::GearIndex(const std::vector<Tensor>& inputs) const {
  for (size_t i = 0; i < gears_.size(); ++i)
    if (gears_[i]->CheckInputs(inputs).ok()) return i;
  std::vector<std::string> given, gears;
  for (size_t i = 0; i < inputs.size(); ++i)
    given.push_back(absl::StrCat(artifact_.inputs(static_cast<int>(i)).name(), ": ", Describe(inputs[i])));
  for (const auto& g : gears_) gears.push_back(g->gear_label_);
  return absl::InvalidArgumentError(absl::StrCat("no gear of the model takes ", absl::StrJoin(given, ", "),
                                                 "; its gears are ", absl::StrJoin(gears, "; ")));
}

absl::StatusOr<std::vector<Tensor>> LoadedModel::Run(std::vector<Tensor> inputs, const target::RunOptions& options) {
  KILN_RETURN_IF_ERROR(CheckInputs(inputs));
  if (!gears_.empty()) {
    KILN_ASSIGN_OR_RETURN(current_gear_, GearIndex(inputs));
    return gears_[current_gear_]->Run(std::move(inputs), options);
  }
  if (module_) return module_->Run(std::move(inputs), options);
  Executor exec;
  return exec.Run(*model_.graph, std::move(inputs));
}

}  // namespace kiln::runtime
