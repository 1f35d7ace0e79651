//===- cmd_targets.cc - `kiln targets` ------------------------------------===//
#include <iostream>

#include "target/api/target_registry.h"
#include "target/api/version.h"
#include "tools/kiln/cli_util.h"

namespace kiln::cli {

extern const Command kTargetsCommand;
const Command kTargetsCommand = {
    "targets", "list the registered targets",
    R"(usage: kiln targets [--plugin=lib.so ...]

Lists every registered target with its summary, where it came from
(built-in, or the plugin file that registered it), its engines and the
settings `kiln compile --target=NAME` takes. Plugins come from --plugin
(repeatable) and from the directories of KILN_PLUGIN_PATH (':'-separated;
every lib*.so there).

flags:
  --plugin=lib.so         load a target plugin first (repeatable)
)",
    [](const std::vector<std::string>& args) -> int {
      if (!args.empty()) return Fail("targets takes no positional arguments");
      std::cout << "target API version " << KILN_TARGET_API_VERSION << "\n";
      std::cout << "default target (no --target): " << target::TargetRegistry::Global().DefaultTarget() << "\n";
      for (const auto* e : target::TargetRegistry::Global().List()) {
        std::cout << e->name << std::string(e->name.size() < 12 ? 12 - e->name.size() : 1, ' ') << e->summary
                  << " [" << e->origin << "]\n";
        auto t = e->factory();
        for (const auto& eng : t->description().engines)
          std::cout << "    " << eng.name << std::string(eng.name.size() < 8 ? 8 - eng.name.size() : 1, ' ')
                    << eng.summary << "\n";
        if (!t->description().settings.empty()) {
          std::cout << "    settings:";
          for (const auto& s : t->description().settings) std::cout << " --" << s.name << "=" << s.value_name;
          std::cout << "\n";
        }
      }
      return 0;
    }};

}  // namespace kiln::cli
