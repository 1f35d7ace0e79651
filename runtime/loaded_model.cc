//===- loaded_model.cc - Loading and running compiled artifacts -----------===//
#include "runtime/loaded_model.h"

#include "absl/strings/str_cat.h"
#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "target/artifact/artifact_io.h"

namespace kiln::runtime {
namespace {

std::string Describe(const Tensor& t) {
  std::string dims;
  for (int i = 0; i < t.rank(); ++i) absl::StrAppend(&dims, i ? "," : "", t.dim(i));
  return absl::StrCat(DTypeName(t.dtype()), "[", dims, "]");
}

absl::Status CheckInput(const artifact::TensorSignature& s, const Tensor& t) {
  bool ok = s.dtype() == DTypeName(t.dtype()) && s.dims_size() == t.rank();
  for (int i = 0; ok && i < s.dims_size(); ++i)
    if (s.dims(i) >= 0 && s.dims(i) != t.dim(i)) ok = false;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("input '", s.name(), "': the model expects ",
                                                 artifact::DescribeSignature(s).substr(s.name().size() + 2),
                                                 ", got ", Describe(t)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadedModel::Load(const std::string& path) {
  auto a = artifact::ReadArtifact(path);
  if (!a.ok()) return a.status();
  return FromArtifact(*std::move(a), path);
}

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadedModel::FromArtifact(artifact::Artifact artifact,
                                                                       const std::string& path) {
  auto m = std::make_unique<LoadedModel>();
  m->path_ = path;
  m->artifact_ = std::move(artifact);
  if (m->artifact_.target() != "reference" && m->artifact_.target() != "npusim")
    return absl::UnimplementedError(absl::StrCat(path, ": artifacts of target '", m->artifact_.target(),
                                                 "' cannot run in this build"));
  BlobStore blobs;
  absl::Status s = DeserializeBlobStore(m->artifact_.constants(), &blobs);
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": constants: ", s.message()));
  auto model = ParseModel(m->artifact_.graph_kir(), path, &blobs);
  if (!model.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": graph: ", model.status().message()));
  m->model_ = *std::move(model);
  if (m->artifact_.target() == "npusim") {
    auto e = NpusimExecutable::Load(m->artifact_, &m->model_);
    if (!e.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.status().message()));
    m->npusim_ = *std::move(e);
  }
  return m;
}

absl::StatusOr<std::vector<Tensor>> LoadedModel::Run(std::vector<Tensor> inputs, const NpusimRunOptions& options) {
  if (static_cast<int>(inputs.size()) != artifact_.inputs_size())
    return absl::InvalidArgumentError(absl::StrCat("the model takes ", artifact_.inputs_size(), " inputs, got ",
                                                   inputs.size()));
  for (int i = 0; i < artifact_.inputs_size(); ++i) {
    absl::Status s = CheckInput(artifact_.inputs(i), inputs[i]);
    if (!s.ok()) return s;
  }
  if (npusim_) return npusim_->Run(std::move(inputs), options);
  Executor exec;
  return exec.Run(*model_.graph, std::move(inputs));
}

}  // namespace kiln::runtime
