//===- artifact_executable.cc - A .kiln artifact as an Executable ---------===//
#include "runtime/artifact_executable.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "runtime/loaded_model.h"
#include "sim/model/roofline.h"
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

NpusimRunOptions DeviceOptions(const target::RunOptions& o) {
  NpusimRunOptions d;
  d.functional = o.functional;
  d.trace = o.trace;
  d.batches = o.batches;
  d.cycle_limit = o.cycle_limit;
  d.feeds = o.feeds;
  d.after_step = o.after_step;
  return d;
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
    target::RunFeatures f;
    if (!loaded_->npusim()) return f;
    f.trace = f.report = f.roofline = f.batches = f.timing_only = f.cycle_limit = f.device_loop = true;
    return f;
  }

  absl::StatusOr<std::string> Prepare(const std::vector<Tensor>& inputs, const target::RunOptions& options) override {
    KILN_ASSIGN_OR_RETURN(const LoadedModel* gear, loaded_->GearFor(inputs));
    std::string lines;
    if (!gear->gear_label().empty()) absl::StrAppend(&lines, "gear ", gear->gear_label(), "\n");
    if (const NpusimExecutable* npu = gear->npusim()) {
      const bool loop = !options.feeds.empty();
      absl::StrAppend(&lines, "simulating ", gear->artifact().npusim().tasks_size(), " tasks x ", options.batches,
                      loop ? " step" : " batch", options.batches > 1 ? (loop ? "s" : "es") : "", " on ",
                      npu->machine().name(), "...\n");
    }
    return lines;
  }

  absl::StatusOr<std::vector<Tensor>> Run(std::vector<Tensor> inputs, const target::RunOptions& options) override {
    KILN_ASSIGN_OR_RETURN(ran_, loaded_->GearFor(inputs));
    return loaded_->Run(std::move(inputs), DeviceOptions(options));
  }

  absl::StatusOr<std::string> Report(target::ReportKind kind, const std::string& title) const override {
    const NpusimExecutable* npu = ran_->npusim();
    if (!npu) return absl::UnimplementedError("this artifact's runs have no reports");
    const std::string& gear = ran_->gear_label();
    switch (kind) {
      case target::ReportKind::kText:
        return absl::StrCat(gear.empty() ? "" : "gear " + gear + "\n", npu->ReportText());
      case target::ReportKind::kCsv: return npu->ReportCsv();
      case target::ReportKind::kTraceJson: return npu->device().trace().ToJson(npu->machine().chip().clock_mhz());
      case target::ReportKind::kRooflineCsv: return sim::RooflineCsv(npu->Roofline());
      case target::ReportKind::kRooflineSvg:
        return sim::RooflineSvg(npu->Roofline(), sim::MachineRoofs(npu->machine()),
                                absl::StrCat(title, gear.empty() ? "" : " gear " + gear, " on ", npu->machine().name(),
                                             " (", ran_->artifact().npusim().precision(), ")"));
    }
    return absl::InvalidArgumentError("unknown report kind");
  }

  std::vector<std::string> Warnings() const override {
    const NpusimExecutable* npu = ran_->npusim();
    if (npu && npu->device().trace().truncated()) return {"the trace reached its size bound and was truncated"};
    return {};
  }

  std::vector<std::pair<std::string, int64_t>> TasksPerEngine() const override {
    std::map<std::string, int64_t> counts;
    for (const artifact::Task& t : ran_->artifact().npusim().tasks()) ++counts[t.engine()];
    return {counts.begin(), counts.end()};
  }

 private:
  std::unique_ptr<LoadedModel> loaded_;
  const LoadedModel* ran_ = nullptr;  // the gear that ran last (the model itself without gears)
  std::vector<target::TensorSpec> inputs_, outputs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<target::Executable>> LoadArtifactExecutable(const std::string& path,
                                                                           const std::string& target_name) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<LoadedModel> loaded, LoadedModel::Load(path));
  if (loaded->artifact().target() != target_name)
    return absl::InvalidArgumentError(absl::StrCat(path, ": compiled for target '", loaded->artifact().target(),
                                                   "', not '", target_name, "'"));
  return std::make_unique<ArtifactExecutable>(std::move(loaded));
}

}  // namespace kiln::runtime
