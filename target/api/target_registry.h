//===- target_registry.h - Finding targets by name --------------*- C++ -*-===//
//
// Targets are found by name. Every target registers through one path, the
// built-in ones included: a set of targets is a registration function
//
//   void Register(kiln::target::TargetRegistry& registry);
//
// that calls registry.Register(...) for each target it provides. A plugin
// is a shared library that names its function with
//
//   KILN_TARGET_PLUGIN(Register)
//
// which exports it with the target API version the plugin was built
// against (version.h). kiln loads plugins given with --plugin=PATH and
// those found on KILN_PLUGIN_PATH; `kiln targets` lists every target and
// where it came from.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "target/api/host_kernels.h"
#include "target/api/target.h"
#include "target/api/version.h"

namespace kiln::target {

class TargetRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Target>()>;
  using RegisterFn = std::function<void(TargetRegistry& registry)>;

  // The registry of the running program (the kiln driver registers the
  // built-in targets into it, then the plugins).
  static TargetRegistry& Global();

  // Registers a target; a name already taken is refused (naming who took it).
  absl::Status Register(std::string name, std::string summary, Factory factory);

  // Registers the targets of `fn`, built against target API `api_version`,
  // as coming from `origin` ("built-in" or a plugin's path): the one path
  // every set of targets takes. A version other than this kiln's is
  // refused with both named; so is a set that registers nothing or a name
  // already taken (the rest of the set is kept).
  absl::Status AddTargets(const std::string& origin, int api_version, const RegisterFn& fn);
  // Loads a plugin shared library and adds its targets.
  absl::Status LoadPlugin(const std::string& path);
  // Every plugin in the directories of `search_path` (':'-separated, as
  // KILN_PLUGIN_PATH): each lib*.so file, in name order. Returns one error
  // per plugin that could not be added; the others are kept.
  std::vector<absl::Status> LoadPluginsOnPath(const std::string& search_path);

  struct Entry {
    std::string name;
    std::string summary;
    std::string origin;  // "built-in" or the plugin's path
    Factory factory;
  };
  // Sorted by name.
  std::vector<const Entry*> List() const;
  const Entry* Find(absl::string_view name) const;
  absl::StatusOr<std::unique_ptr<Target>> Create(absl::string_view name) const;
  // The target --target defaults to: the first registered target (built-in
  // ones first) whose description is golden, else the first by name; empty
  // when none is registered.
  std::string DefaultTarget() const;
  // The target whose Recognizes(path) is true, or null.
  std::unique_ptr<Target> TargetFor(const std::string& path) const;

  // kiln's reference kernels (set by the program before targets are
  // created; null where nobody set them).
  const HostKernels* host_kernels() const { return host_kernels_; }
  void set_host_kernels(const HostKernels* k) { host_kernels_ = k; }

 private:
  std::vector<Entry> entries_;
  std::string loading_origin_ = "built-in";
  const HostKernels* host_kernels_ = nullptr;
};

}  // namespace kiln::target

extern "C" {
// What a plugin exports (KILN_TARGET_PLUGIN writes both).
typedef int (*KilnTargetApiVersionFn)();
typedef void (*KilnRegisterTargetsFn)(kiln::target::TargetRegistry* registry);
}

// Names a plugin's registration function (void fn(TargetRegistry&)) and the
// API version it was built against. Once per plugin, at namespace scope.
#define KILN_TARGET_PLUGIN(fn)                                                                         \
  extern "C" __attribute__((visibility("default"))) int kiln_target_api_version() {                    \
    return KILN_TARGET_API_VERSION;                                                                   \
  }                                                                                                    \
  extern "C" __attribute__((visibility("default"))) void kiln_register_targets(                        \
      kiln::target::TargetRegistry* registry) {                                                        \
    fn(*registry);                                                                                     \
  }
