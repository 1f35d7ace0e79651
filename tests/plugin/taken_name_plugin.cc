// A plugin that registers a name a built-in target holds (and one of its
// own): the taken name is refused with one line naming its holder.
#include <memory>

#include "target/api/target_registry.h"

namespace {

class Nothing final : public kiln::target::Target {
 public:
  Nothing() { desc_.name = "npusim"; }
  const kiln::target::TargetDescription& description() const override { return desc_; }
  kiln::target::Placement Place(const kiln::Node&, const kiln::target::CompileOptions&) const override {
    return {"", "nothing runs here"};
  }
  absl::Status Compile(const kiln::Model&, const kiln::target::CompileOptions&, const std::string&) override {
    return absl::UnimplementedError("nothing compiles here");
  }

 private:
  kiln::target::TargetDescription desc_;
};

void Register(kiln::target::TargetRegistry& r) {
  (void)r.Register("npusim", "a second npusim", [] { return std::make_unique<Nothing>(); });
}

}  // namespace

KILN_TARGET_PLUGIN(Register)
