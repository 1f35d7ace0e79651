//===- target_registry.cc - Finding targets by name -----------------------===//
#include "target/api/target_registry.h"

#include <dlfcn.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "target/builtin_targets.h"

namespace kiln::target {

TargetRegistry& TargetRegistry::Global() {
  static TargetRegistry* registry = [] {
    auto* r = new TargetRegistry();
    RegisterBuiltinTargets(*r);
    return r;
  }();
  return *registry;
}

absl::Status TargetRegistry::Register(std::string name, std::string summary, Factory factory) {
  if (name.empty()) return absl::InvalidArgumentError("a target needs a name");
  if (Find(name))
    return absl::AlreadyExistsError(absl::StrCat("target '", name, "' is already registered (by ",
                                                 Find(name)->origin, ")"));
  entries_.push_back({std::move(name), std::move(summary), loading_origin_, std::move(factory)});
  return absl::OkStatus();
}

absl::Status TargetRegistry::LoadPlugin(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return absl::InvalidArgumentError(absl::StrCat("cannot load plugin '", path, "': ", dlerror()));
  auto fn = reinterpret_cast<KilnRegisterTargetsFn>(dlsym(handle, "kiln_register_targets"));
  if (!fn)
    return absl::InvalidArgumentError(
        absl::StrCat("plugin '", path, "' does not export kiln_register_targets"));
  size_t before = entries_.size();
  loading_origin_ = path;
  fn(this);
  loading_origin_ = "built-in";
  if (entries_.size() == before)
    return absl::InvalidArgumentError(absl::StrCat("plugin '", path, "' registered no target"));
  return absl::OkStatus();
}

std::vector<const TargetRegistry::Entry*> TargetRegistry::List() const {
  std::vector<const Entry*> out;
  for (const Entry& e : entries_) out.push_back(&e);
  std::sort(out.begin(), out.end(), [](const Entry* a, const Entry* b) { return a->name < b->name; });
  return out;
}

const TargetRegistry::Entry* TargetRegistry::Find(absl::string_view name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

absl::StatusOr<std::unique_ptr<Target>> TargetRegistry::Create(absl::string_view name) const {
  const Entry* e = Find(name);
  if (!e) {
    std::string known;
    for (const Entry* x : List()) absl::StrAppend(&known, known.empty() ? "" : ", ", x->name);
    return absl::NotFoundError(absl::StrCat("unknown target '", name, "' (registered: ", known, ")"));
  }
  return e->factory();
}

}  // namespace kiln::target
