//===- target_registry.cc - Finding targets by name -----------------------===//
#include "target/api/target_registry.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kiln::target {

TargetRegistry& TargetRegistry::Global() {
  static TargetRegistry* registry = new TargetRegistry();
  return *registry;
}

absl::Status TargetRegistry::Register(std::string name, std::string summary, Factory factory) {
  if (name.empty()) return absl::InvalidArgumentError("a target needs a name");
  if (!factory) return absl::InvalidArgumentError(absl::StrCat("target '", name, "' has no factory"));
  if (const Entry* taken = Find(name))
    return absl::AlreadyExistsError(
        absl::StrCat("target '", name, "' is already registered (by ", taken->origin, ")"));
  entries_.push_back({std::move(name), std::move(summary), loading_origin_, std::move(factory)});
  return absl::OkStatus();
}

namespace {

// "plugin '/x/libt.so'" or "the built-in targets", for messages.
std::string Who(const std::string& origin) {
  return origin == "built-in" ? std::string("the built-in targets") : absl::StrCat("plugin '", origin, "'");
}

}  // namespace

absl::Status TargetRegistry::AddTargets(const std::string& origin, int api_version, const RegisterFn& fn) {
  if (api_version != KILN_TARGET_API_VERSION)
    return absl::FailedPreconditionError(absl::StrCat(
        Who(origin), " was built against target API version ", api_version, "; this kiln has version ",
        KILN_TARGET_API_VERSION, " (rebuild it against this kiln's headers)"));
  const size_t before = entries_.size();
  // The set registers into a scratch registry first, so that a name taken
  // here is reported even when the set ignores Register's status; its
  // other names are kept.
  TargetRegistry scratch;
  scratch.loading_origin_ = origin;
  scratch.host_kernels_ = host_kernels_;
  fn(scratch);
  std::string taken;
  for (Entry& e : scratch.entries_) {
    if (const Entry* other = Find(e.name)) {
      if (taken.empty())
        taken = absl::StrCat(Who(origin), ": target '", e.name, "' is already registered (by ", other->origin, ")");
      continue;
    }
    entries_.push_back(std::move(e));
  }
  if (!taken.empty()) return absl::AlreadyExistsError(taken);
  if (entries_.size() == before)
    return absl::InvalidArgumentError(absl::StrCat(Who(origin), " registered no target"));
  return absl::OkStatus();
}

absl::Status TargetRegistry::LoadPlugin(const std::string& path) {
  const std::string what = Who(path);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::string why = dlerror();
    // dlerror repeats the path; keep its reason.
    if (size_t at = why.rfind(": "); at != std::string::npos) why = why.substr(at + 2);
    return absl::InvalidArgumentError(absl::StrCat("cannot load ", what, ": ", why));
  }
  auto version = reinterpret_cast<KilnTargetApiVersionFn>(dlsym(handle, "kiln_target_api_version"));
  auto fn = reinterpret_cast<KilnRegisterTargetsFn>(dlsym(handle, "kiln_register_targets"));
  if (!version || !fn) {
    dlclose(handle);
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is not a kiln target plugin: it does not export ",
        !version ? "kiln_target_api_version" : "kiln_register_targets", " (see KILN_TARGET_PLUGIN)"));
  }
  absl::Status s = AddTargets(path, version(), [fn](TargetRegistry& r) { fn(&r); });
  // A plugin none of whose targets was kept is unloaded; one with targets
  // stays loaded for the life of the program.
  bool kept = false;
  for (const Entry& e : entries_) kept |= e.origin == path;
  if (!kept) dlclose(handle);
  return s;
}

std::vector<absl::Status> TargetRegistry::LoadPluginsOnPath(const std::string& search_path) {
  std::vector<absl::Status> errors;
  for (absl::string_view dir : absl::StrSplit(search_path, ':', absl::SkipEmpty())) {
    std::error_code ec;
    std::vector<std::string> files;
    for (const auto& f : std::filesystem::directory_iterator(std::string(dir), ec)) {
      const std::string name = f.path().filename().string();
      if (absl::StartsWith(name, "lib") && absl::EndsWith(name, ".so")) files.push_back(f.path().string());
    }
    if (ec) {
      errors.push_back(absl::NotFoundError(
          absl::StrCat("KILN_PLUGIN_PATH: cannot read directory '", dir, "': ", ec.message())));
      continue;
    }
    std::sort(files.begin(), files.end());
    for (const std::string& f : files)
      if (absl::Status s = LoadPlugin(f); !s.ok()) errors.push_back(s);
  }
  return errors;
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

std::string TargetRegistry::DefaultTarget() const {
  for (const Entry& e : entries_) {
    std::unique_ptr<Target> t = e.factory();
    if (t && t->description().golden) return e.name;
  }
  const std::vector<const Entry*> all = List();
  return all.empty() ? std::string() : all.front()->name;
}

std::unique_ptr<Target> TargetRegistry::TargetFor(const std::string& path) const {
  for (const Entry* e : List()) {
    std::unique_ptr<Target> t = e->factory();
    if (t && t->Recognizes(path)) return t;
  }
  return nullptr;
}

}  // namespace kiln::target
