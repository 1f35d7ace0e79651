// An example target plugin: "host", a complete third target that compiles a
// model into an artifact of its own and runs that artifact by its own
// executable, every node on the host CPU through kiln's reference kernels.
// It builds outside kiln's tree against an installed kiln:
//
//   find_package(Kiln REQUIRED)
//   add_library(kiln_host_target MODULE host_target.cc)
//   target_link_libraries(kiln_host_target PRIVATE Kiln::target_api)
//
// and includes nothing but the target API (kiln/target/api/...) and the
// graph IR it exposes (kiln/graph/ir/...):
//
//   kiln targets --plugin=libkiln_host_target.so
//   kiln compile model.onnx --plugin=libkiln_host_target.so --target=host -o model.host
//   kiln run model.host --plugin=libkiln_host_target.so --input x=x.npy
//   kiln conformance --plugin=libkiln_host_target.so --target=host
//
// The artifact is a text file: a header line, then the optimized model as
// .kir text with every constant inline.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "target/api/target_registry.h"

namespace {

using kiln::target::CompileOptions;
using kiln::target::EngineKind;
using kiln::target::Executable;
using kiln::target::HostKernels;
using kiln::target::Placement;
using kiln::target::RunOptions;
using kiln::target::TargetDescription;
using kiln::target::TensorSpec;

constexpr char kHeader[] = "kiln host-target artifact 1\n";

TensorSpec SpecOf(const kiln::Value& v) {
  TensorSpec s;
  s.name = v.name();
  const kiln::Type& t = v.type();
  if (!t.is_tensor()) return s;
  s.dtype = t.dtype();
  if (!t.shape().ranked()) return s;
  for (const kiln::Dim& d : t.shape().dims()) {
    s.dims.push_back(d.is_static() ? d.value() : -1);
    s.symbols.push_back(d.is_static() ? "" : d.symbol());
  }
  return s;
}

// A loaded artifact: the model, run node by node in graph order.
class HostExecutable final : public Executable {
 public:
  HostExecutable(kiln::Model model, const HostKernels* kernels) : model_(std::move(model)), kernels_(kernels) {
    for (const kiln::Value* v : model_.graph->inputs()) inputs_.push_back(SpecOf(*v));
    for (const kiln::Value* v : model_.graph->outputs()) outputs_.push_back(SpecOf(*v));
  }
  const std::vector<TensorSpec>& inputs() const override { return inputs_; }
  const std::vector<TensorSpec>& outputs() const override { return outputs_; }
  std::vector<kiln::Tensor> InitialValues() const override {
    std::vector<kiln::Tensor> out;
    for (const kiln::Value* v : model_.graph->inputs()) out.push_back(v->initial());
    return out;
  }

  absl::StatusOr<std::vector<kiln::Tensor>> Run(std::vector<kiln::Tensor> inputs, const RunOptions&) override {
    const kiln::Graph& g = *model_.graph;
    if (inputs.size() != g.inputs().size())
      return absl::InvalidArgumentError(
          absl::StrCat("the model takes ", g.inputs().size(), " inputs, got ", inputs.size()));
    absl::flat_hash_map<const kiln::Value*, kiln::Tensor> values;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const TensorSpec& spec = inputs_[i];
      const kiln::Tensor& t = inputs[i];
      bool fits = !g.inputs()[i]->type().is_tensor() || spec.dims.empty() ||
                  (t.dtype() == spec.dtype && t.rank() == static_cast<int>(spec.dims.size()));
      for (size_t d = 0; fits && d < spec.dims.size(); ++d) fits = spec.dims[d] < 0 || spec.dims[d] == t.dim(d);
      if (!fits) return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': expected ", spec.ToString()));
      values[g.inputs()[i]] = std::move(inputs[i]);
    }
    auto lookup = [&](const kiln::Value* v) -> const kiln::Tensor* {
      auto it = values.find(v);
      return it == values.end() ? nullptr : &it->second;
    };
    for (const kiln::Node* n : g.nodes()) {
      absl::StatusOr<std::vector<kiln::Tensor>> out = kernels_->RunNode(*n, lookup);
      if (!out.ok())
        return absl::Status(out.status().code(), absl::StrCat(n->QualifiedOp(), ": ", out.status().message()));
      for (int i = 0; i < n->num_outputs() && i < static_cast<int>(out->size()); ++i)
        values[n->output(i)] = std::move((*out)[i]);
    }
    std::vector<kiln::Tensor> results;
    for (const kiln::Value* v : g.outputs()) {
      if (const kiln::Tensor* t = lookup(v)) results.push_back(*t);
      else if (v->is_constant()) results.push_back(v->constant());
      else return absl::InternalError(absl::StrCat("output '", v->name(), "' was not computed"));
    }
    return results;
  }

 private:
  kiln::Model model_;
  const HostKernels* kernels_;
  std::vector<TensorSpec> inputs_, outputs_;
};

class HostTarget final : public kiln::target::Target {
 public:
  explicit HostTarget(const HostKernels* kernels) : kernels_(kernels) {
    desc_.name = "host";
    desc_.summary = "example plugin: every node on the host CPU through kiln's reference kernels";
    desc_.engines = {{"cpu", EngineKind::kHost, "kiln's reference kernels on the host CPU"}};
    desc_.artifact_suffix = ".host";
  }
  const TargetDescription& description() const override { return desc_; }

  Placement Place(const kiln::Node& node, const CompileOptions&) const override {
    if (kernels_ && kernels_->HasKernel(node)) return {"cpu", "a reference kernel runs it"};
    return {"", "kiln has no host kernel for it"};
  }

  absl::Status Compile(const kiln::Model& model, const CompileOptions& options, const std::string& path) override {
    if (!options.settings.empty()) return absl::InvalidArgumentError("the host target takes no settings");
    kiln::Model m = model.Clone();
    // --precision: narrow as kiln's own targets do, so the host computes
    // what fp16 or bf16 give.
    if (options.narrow) {
      absl::StatusOr<bool> narrowed = options.narrow(*m.graph);
      if (!narrowed.ok()) return narrowed.status();
    }
    kiln::PrintOptions po;
    po.inline_all_constants = true;
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) return absl::InvalidArgumentError(absl::StrCat("cannot write ", path));
    f << kHeader << kiln::PrintModel(m, po);
    if (!f.flush()) return absl::InternalError(absl::StrCat("writing ", path, " failed"));
    return absl::OkStatus();
  }

  bool Recognizes(const std::string& path) const override {
    std::ifstream f(path, std::ios::binary);
    std::string head(sizeof kHeader - 1, '\0');
    return f.read(head.data(), static_cast<std::streamsize>(head.size())) && head == kHeader;
  }

  absl::StatusOr<std::unique_ptr<Executable>> Load(const std::string& path) const override {
    if (!kernels_) return absl::FailedPreconditionError("kiln gave the host target no host kernels");
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string text = ss.str();
    if (!absl::StartsWith(text, kHeader)) return absl::InvalidArgumentError(path + ": not a host-target artifact");
    absl::StatusOr<kiln::Model> model = kiln::ParseModel(absl::string_view(text).substr(sizeof kHeader - 1), path);
    if (!model.ok()) return model.status();
    return std::make_unique<HostExecutable>(*std::move(model), kernels_);
  }

 private:
  TargetDescription desc_;
  const HostKernels* kernels_;
};

void RegisterHostTarget(kiln::target::TargetRegistry& registry) {
  const HostKernels* kernels = registry.host_kernels();
  (void)registry.Register("host", "example plugin: every node on the host CPU through kiln's reference kernels",
                          [kernels] { return std::make_unique<HostTarget>(kernels); });
}

}  // namespace

KILN_TARGET_PLUGIN(RegisterHostTarget)
