//===- load_artifact.cc - The target that runs an artifact ------------------===//
#include "tools/driver/load_artifact.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "target/api/target_registry.h"
#include "target/artifact/artifact_io.h"

namespace kiln::driver {

absl::StatusOr<std::unique_ptr<target::Target>> TargetOfArtifact(const std::string& path) {
  if (auto t = target::TargetRegistry::Global().TargetFor(path)) return t;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  // A .kiln artifact names its target: say which is missing, or what is
  // wrong with the file.
  // A name no target could have (a damaged header) falls through to the
  // artifact's own checks below.
  auto plausible = [](const std::string& n) {
    return n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
             return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
           });
  };
  if (std::string name = artifact::PeekArtifactTarget(path); !name.empty() && plausible(name))
    return absl::NotFoundError(absl::StrCat("'", path, "' was compiled for target '", name,
                                            "', which is not registered (load its plugin with --plugin)"));
  if (absl::EndsWith(path, ".kiln")) {
    // Its checks only: the constants stay where they lie.
    auto a = artifact::ReadArtifactFile(path);
    if (!a.ok()) return a.status();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", path, "' is not an artifact of any registered target (`kiln targets` lists them)"));
}

}  // namespace kiln::driver
