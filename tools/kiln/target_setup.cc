//===- target_setup.cc - The targets the driver knows ---------------------===//
//
// Built-in targets register exactly as plugins do (tools/driver); plugins
// come from KILN_PLUGIN_PATH and --plugin. The settings section of a
// target's compile help.
//
//===----------------------------------------------------------------------===//
#include <iostream>

#include "absl/strings/str_cat.h"
#include "target/api/target_registry.h"
#include "tools/kiln/cli_util.h"

namespace kiln::cli {

absl::Status SetUpTargets(const std::vector<std::string>& plugins) {
  return driver::SetUpTargets(plugins, [](const std::string& w) { std::cerr << "kiln: warning: " << w << "\n"; });
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
