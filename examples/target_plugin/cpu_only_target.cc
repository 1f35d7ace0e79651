// An example target plugin: a "cpu-only" target that places every op with a
// reference kernel on the host and refuses the rest. It builds against the
// public headers target/api/target.h and target/api/target_registry.h only.
//
//   kiln targets --plugin=build/examples/target_plugin/libkiln_cpu_only_target.so
//   kiln compile model.onnx --plugin=... --target=cpu-only --explain-placement
#include <memory>

#include "target/api/target.h"
#include "target/api/target_registry.h"

namespace {

using kiln::target::CompileOptions;
using kiln::target::EngineKind;
using kiln::target::Placement;
using kiln::target::TargetDescription;

class CpuOnlyTarget final : public kiln::target::Target {
 public:
  CpuOnlyTarget() {
    desc_.name = "cpu-only";
    desc_.summary = "example plugin: everything on the host CPU";
    desc_.engines = {{"cpu", EngineKind::kHost, "the host CPU"}};
  }
  const TargetDescription& description() const override { return desc_; }
  Placement Place(const kiln::Node& node, const CompileOptions&) const override {
    if (node.domain().empty() || node.domain() == "kiln") return {"cpu", "every ONNX op runs on the CPU"};
    return {"", "only ONNX and kiln ops are supported"};
  }
  absl::Status Compile(const kiln::Model&, const CompileOptions&, const std::string& path) override {
    return absl::UnimplementedError("the cpu-only example target places nodes but emits no artifact");
  }

 private:
  TargetDescription desc_;
};

}  // namespace

extern "C" void kiln_register_targets(kiln::target::TargetRegistry* registry) {
  (void)registry->Register("cpu-only", "example plugin: everything on the host CPU",
                           [] { return std::make_unique<CpuOnlyTarget>(); });
}
