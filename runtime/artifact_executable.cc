//===- artifact_executable.cc - A .kiln artifact as an Executable ---------===//
#include "runtime/artifact_executable.h"

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "runtime/loaded_model.h"
#include "target/artifact/artifact_io.h"

namespace kiln::runtime {
namespace {

target::TensorSpec SpecOf(const artifact::TensorSignature& s) {
  target::TensorSpec t;
  t.name = s.name();
  t.dtype = ParseDType(s.dtype()).value_or(DType::kUndefined);
  t.dims.assign(s.dims().begin(), s.dims().end());
  t.symbols.assign(s.dim_symbols().begin(), s.dim_symbols().end());
  return t;
}

class ArtifactExecutable final : public target::Executable {
 public:
  explicit ArtifactExecutable(std::unique_ptr<LoadedModel> loaded) : loaded_(std::move(loaded)) {
    for (const auto& s : loaded_->artifact().inputs()) inputs_.push_back(SpecOf(s));
    for (const auto& s : loaded_->artifact().outputs()) outputs_.push_back(SpecOf(s));
    ran_ = loaded_.get();
  }

  const std::vector<target::TensorSpec>& inputs() const override { return inputs_; }
  const std::vector<target::TensorSpec>& outputs() const override { return outputs_; }
  std::vector<Tensor> InitialValues() const override { return loaded_->InitialValues(); }

  target::RunFeatures features() const override {
    return loaded_->module() ? loaded_->module()->features() : target::RunFeatures();
  }

  absl::StatusOr<std::string> Prepare(const std::vector<Tensor>& inputs, const target::RunOptions& options) override {
    KILN_ASSIGN_OR_RETURN(const LoadedModel* gear, loaded_->GearFor(inputs));
    std::string lines;
    if (!gear->gear_label().empty()) absl::StrAppend(&lines, "gear ", gear->gear_label(), "\n");
    if (const DeviceModule* module = gear->module())
      if (std::string what = module->Describe(options); !what.empty()) absl::StrAppend(&lines, what, "\n");
    return lines;
  }

  absl::StatusOr<std::vector<Tensor>> Run(std::vector<Tensor> inputs, const target::RunOptions& options) override {
    KILN_ASSIGN_OR_RETURN(ran_, loaded_->GearFor(inputs));
    return loaded_->Run(std::move(inputs), options);
  }

  absl::StatusOr<std::string> Report(target::ReportKind kind, const std::string& title) const override {
    const DeviceModule* module = ran_->module();
    if (!module) return absl::UnimplementedError("this artifact's runs have no reports");
    const std::string& gear = ran_->gear_label();
    if (kind == target::ReportKind::kText) {
      KILN_ASSIGN_OR_RETURN(std::string text, module->Report(kind, title));
      return absl::StrCat(gear.empty() ? "" : "gear " + gear + "\n", text);
    }
    return module->Report(kind, absl::StrCat(title, gear.empty() ? "" : " gear " + gear));
  }

  std::vector<std::string> Warnings() const override {
    return ran_->module() ? ran_->module()->Warnings() : std::vector<std::string>();
  }

  std::vector<std::pair<std::string, int64_t>> TasksPerEngine() const override {
    return ran_->module() ? ran_->module()->TasksPerEngine() : std::vector<std::pair<std::string, int64_t>>();
  }

 private:
  std::unique_ptr<LoadedModel> loaded_;
  const LoadedModel* ran_ = nullptr;  // the gear that ran last (the model itself without gears)
  std::vector<target::TensorSpec> inputs_, outputs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<target::Executable>> LoadArtifactExecutable(const std::string& path,
                                                                           const std::string& target_name,
                                                                           ModuleLoader loader) {
  // The target is checked before any module is loaded (a file that is no
  // artifact fails to load, with its reason).
  if (std::string compiled_for = artifact::PeekArtifactTarget(path); !compiled_for.empty() && compiled_for != target_name)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": compiled for target '", compiled_for, "', not '", target_name, "'"));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<LoadedModel> loaded, LoadedModel::Load(path, std::move(loader)));
  return std::make_unique<ArtifactExecutable>(std::move(loaded));
}

}  // namespace kiln::runtime
