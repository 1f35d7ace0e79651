//===- target_setup.cc - The targets the driver knows ---------------------===//
//
// Built-in targets register exactly as plugins do: a registration function
// handed to TargetRegistry::AddTargets with the API version it was compiled
// against. Plugins come from KILN_PLUGIN_PATH and --plugin.
//
//===----------------------------------------------------------------------===//
#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "target/api/target_registry.h"
#include "target/builtin_targets.h"
#include "target/host_kernels.h"
#include "tools/kiln/cli_util.h"

namespace kiln::cli {

absl::Status SetUpTargets(const std::vector<std::string>& plugins) {
  target::TargetRegistry& r = target::TargetRegistry::Global();
  r.set_host_kernels(&target::ReferenceHostKernels());
  if (absl::Status s = r.AddTargets("built-in", KILN_TARGET_API_VERSION, target::RegisterBuiltinTargets); !s.ok())
    return s;
  if (const char* path = std::getenv("KILN_PLUGIN_PATH"); path && *path)
    for (const absl::Status& s : r.LoadPluginsOnPath(path))
      std::cerr << "kiln: warning: " << s.message() << " (skipped)\n";
  for (const std::string& p : plugins)
    if (absl::Status s = r.LoadPlugin(p); !s.ok()) return s;
  return absl::OkStatus();
}

std::string TargetSettingsHelp(const std::string& target_name) {
  auto t = target::TargetRegistry::Global().Create(target_name);
  if (!t.ok()) return absl::StrCat("\n", t.status().message(), "\n");
  const target::TargetDescription& d = (*t)->description();
  if (d.settings.empty()) return absl::StrCat("\nsettings of target ", d.name, ": none\n");
  std::string out = absl::StrCat("\nsettings of target ", d.name, ":\n");
  for (const target::SettingSpec& s : d.settings) {
    std::string flag = absl::StrCat("  --", s.name, "=", s.value_name.empty() ? "VALUE" : s.value_name);
    flag.resize(std::max<size_t>(flag.size() + 2, 26), ' ');
    // The help folded at 78 columns under the flag's column.
    std::string line = flag;
    for (size_t at = 0; at < s.help.size();) {
      size_t end = s.help.find(' ', at);
      if (end == std::string::npos) end = s.help.size();
      const std::string word = s.help.substr(at, end - at);
      if (line.size() + word.size() + 1 > 78 && line.size() > 26) {
        out += line + "\n";
        line = std::string(26, ' ');
      }
      if (line.size() > 26 && line.back() != ' ') line += ' ';
      line += word;
      at = end + 1;
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace kiln::cli
