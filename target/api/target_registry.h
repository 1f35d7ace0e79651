//===- target_registry.h - Finding targets by name --------------*- C++ -*-===//
//
// Targets are found by name. Built-in targets are listed in
// target/builtin_targets.cc; a plugin is a shared library exporting
//
//   extern "C" void kiln_register_targets(kiln::target::TargetRegistry* r);
//
// which calls r->Register(...) for each target it provides. `kiln compile
// --plugin=lib.so` loads one; `kiln targets` lists everything registered.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "target/api/target.h"

namespace kiln::target {

class TargetRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Target>()>;

  // The registry holding the built-in targets and loaded plugins.
  static TargetRegistry& Global();

  // Registers a target; a name registered twice is an error.
  absl::Status Register(std::string name, std::string summary, Factory factory);
  // Loads a plugin shared library and lets it register its targets.
  absl::Status LoadPlugin(const std::string& path);

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

 private:
  std::vector<Entry> entries_;
  std::string loading_origin_ = "built-in";
};

}  // namespace kiln::target

extern "C" {
// The entry point a target plugin exports.
typedef void (*KilnRegisterTargetsFn)(kiln::target::TargetRegistry* registry);
}
