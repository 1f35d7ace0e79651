//===- main.cc - The kiln command-line driver -----------------------------===//
//
// `kiln <command> [flags] [args]`. Each command lives in its own cmd_*.cc;
// this file only dispatches and handles --help. Flags are Abseil flags; the
// repeatable `--input NAME=FILE` is collected here before Abseil parses the
// rest.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cctype>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "target/api/target_registry.h"
#include "target/api/version.h"
#include "tools/kiln/cli_util.h"

namespace {

void PrintUsage(std::ostream& os) {
  os << "kiln: a deep-learning compiler for an Ascend-like NPU model and NVIDIA GPUs\n\n"
        "usage: kiln <command> [flags] [args]\n\ncommands:\n";
  for (const auto& c : kiln::cli::Commands()) {
    std::string name = c.name;
    name.resize(14, ' ');
    os << "  " << name << c.summary << "\n";
  }
  os << "\n`kiln <command> --help` describes a command and its flags.\n";
}

// The flags a command's help lists, without their dashes ("batches", "o",
// "noisolate"): the names in the leading part (up to a two-space gap) of
// each entry line of its "flags:" section, an entry line being one indented
// at most four spaces that starts with '-'. Flags its prose mentions (`kiln
// run --steps=N` in opt's help) are not listed.
std::vector<std::string> ListedFlags(const kiln::cli::Command& cmd) {
  std::vector<std::string> names;
  std::string help = cmd.help;
  const size_t section = help.find("\nflags:\n");
  if (section == std::string::npos) return names;
  help = help.substr(section + 8);
  size_t begin = 0;
  while (begin < help.size()) {
    size_t end = help.find('\n', begin);
    if (end == std::string::npos) end = help.size();
    std::string line = help.substr(begin, end - begin);
    begin = end + 1;
    const size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos || first > 4 || line[first] != '-') continue;
    line = line.substr(first, line.find("  ", first) == std::string::npos ? std::string::npos
                                                                           : line.find("  ", first) - first);
    for (size_t at = line.find('-'); at != std::string::npos; at = line.find('-', at)) {
      if (at > 0 && line[at - 1] != ' ') {  // inside a token (OUT.kiln, seq=16)
        ++at;
        continue;
      }
      size_t name = line.find_first_not_of('-', at);
      if (name == std::string::npos || name - at > 2) break;
      size_t stop = name;
      while (stop < line.size() && (std::islower(static_cast<unsigned char>(line[stop])) ||
                                    std::isdigit(static_cast<unsigned char>(line[stop])) || line[stop] == '-'))
        ++stop;
      if (stop > name) names.push_back(line.substr(name, stop - name));
      at = stop;
    }
  }
  return names;
}

// Every command sees every flag of the driver (Abseil flags are global), so
// a command takes only the flags its help lists: one that does nothing there
// is refused instead of being ignored silently. `name` is spelled with dashes,
// without the leading ones and any "=value"; --noNAME stands for --NAME=false.
bool CommandTakesFlag(const kiln::cli::Command& cmd, const std::string& name) {
  const std::vector<std::string> listed = ListedFlags(cmd);
  auto has = [&listed](const std::string& n) { return std::find(listed.begin(), listed.end(), n) != listed.end(); };
  if (has(name) || has("no" + name)) return true;
  return absl::StartsWith(name, "no") && has(name.substr(2));
}

// The flags a command's help lists and the settings the registered targets
// declare: what a misspelled flag is matched against.
std::vector<std::string> KnownFlags(const kiln::cli::Command& cmd) {
  std::vector<std::string> names = ListedFlags(cmd);
  if (cmd.target_settings)
    for (const auto* e : kiln::target::TargetRegistry::Global().List()) {
      const auto target = e->factory();
      for (const auto& setting : target->description().settings) names.push_back(setting.name);
    }
  return names;
}

// Whether some registered target declares a setting `name`.
bool IsTargetSetting(const std::string& name) {
  for (const auto* e : kiln::target::TargetRegistry::Global().List()) {
    auto t = e->factory();
    for (const auto& s : t->description().settings)
      if (s.name == name) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // A damaged artifact can make Protobuf log its own diagnosis (a string
  // field that is not UTF-8) before the parse fails; kiln reports the failure
  // itself, on one line, so the library's messages are dropped.
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  if (argc < 2) {
    PrintUsage(std::cerr);
    return 1;
  }
  std::string cmd_name = argv[1];
  if (cmd_name == "--help" || cmd_name == "-h" || cmd_name == "help") {
    if (argc > 2) cmd_name = argv[2];
    else {
      PrintUsage(std::cout);
      return 0;
    }
    for (const auto& c : kiln::cli::Commands())
      if (cmd_name == c.name) {
        std::cout << c.help;
        return 0;
      }
  }
  if (cmd_name == "--version") {
    std::cout << "kiln " << KILN_VERSION_STRING << " (target API version " << KILN_TARGET_API_VERSION << ")\n";
    return 0;
  }
  const kiln::cli::Command* cmd = nullptr;
  for (const auto& c : kiln::cli::Commands())
    if (cmd_name == c.name) cmd = &c;
  if (!cmd) return kiln::cli::Fail("unknown command '" + cmd_name + "' (see `kiln --help`)");

  // Targets first: plugins (--plugin=PATH, repeatable) may declare settings
  // that are flags of this command, and --help lists a target's settings.
  std::vector<std::string> plugins;
  std::string target_name;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (absl::StartsWith(a, "--plugin=")) plugins.push_back(a.substr(9));
    if (a == "--plugin") {
      if (i + 1 >= argc) return kiln::cli::Fail("--plugin needs PATH");
      plugins.push_back(argv[i + 1]);
    }
    if (absl::StartsWith(a, "--target=")) target_name = a.substr(9);
  }
  if (!plugins.empty() && !CommandTakesFlag(*cmd, "plugin"))
    return kiln::cli::Fail(absl::StrCat("kiln ", cmd->name, " has no flag --plugin (see `kiln ", cmd->name, " --help`)"));
  if (absl::Status s = kiln::cli::SetUpTargets(plugins); !s.ok()) return kiln::cli::Fail(s);

  // Collect --input, answer --help, and hand the rest to Abseil.
  std::string prog = std::string("kiln ") + cmd->name;
  std::vector<char*> rest = {prog.data()};
  std::vector<std::string> owned;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h" || a == "--helpfull") {
      std::cout << cmd->help;
      if (cmd->target_settings && !target_name.empty()) std::cout << kiln::cli::TargetSettingsHelp(target_name);
      return 0;
    }
    // --plugin (taken above) and --input (collected here) are refused like
    // any flag by a command whose help does not list them.
    for (const char* own : {"plugin", "input", "set"})
      if ((a == absl::StrCat("--", own) || absl::StartsWith(a, absl::StrCat("--", own, "="))) &&
          !CommandTakesFlag(*cmd, own))
        return kiln::cli::Fail(absl::StrCat("kiln ", cmd->name, " has no flag --", own, " (see `kiln ", cmd->name,
                                            " --help`)"));
    if (a == "--plugin") {
      ++i;
      continue;
    }
    if (absl::StartsWith(a, "--plugin=")) continue;
    if (a == "--input" || a == "-i") {
      if (i + 1 >= argc) return kiln::cli::Fail("--input needs NAME=FILE");
      kiln::cli::RepeatedInputs().push_back(argv[++i]);
      continue;
    }
    if (absl::StartsWith(a, "--input=")) {
      kiln::cli::RepeatedInputs().push_back(a.substr(8));
      continue;
    }
    // --set FIELD=V1,V2 (kiln sweep) repeats, and its commas are its own.
    if (a == "--set") {
      if (i + 1 >= argc) return kiln::cli::Fail("--set needs FIELD=V1,V2,...");
      kiln::cli::RepeatedSweepSets().push_back(argv[++i]);
      continue;
    }
    if (absl::StartsWith(a, "--set=")) {
      kiln::cli::RepeatedSweepSets().push_back(a.substr(6));
      continue;
    }
    if (a == "--") {
      for (int j = i; j < argc; ++j) rest.push_back(argv[j]);
      break;
    }
    if (a.size() > 1 && a[0] == '-') {
      std::string name = a.substr(a[1] == '-' ? 2 : 1);
      name = name.substr(0, name.find('='));
      for (char& c : name)
        if (c == '_') c = '-';
      if (!CommandTakesFlag(*cmd, name) && cmd->target_settings && IsTargetSetting(name)) {
        std::string value;
        if (size_t eq = a.find('='); eq != std::string::npos) value = a.substr(eq + 1);
        else if (i + 1 < argc) value = argv[++i];
        kiln::cli::TargetSettings().emplace_back(name, value);
        continue;
      }
      if (!CommandTakesFlag(*cmd, name)) {
        const std::string given(argv[i]);
        const std::string near = kiln::cli::DidYouMean(name, KnownFlags(*cmd));
        return kiln::cli::Fail("kiln " + std::string(cmd->name) + " has no flag " + given.substr(0, given.find('=')) +
                               (near.empty() ? "" : " (did you mean --" + near + "?)") + " (see `kiln " +
                               std::string(cmd->name) + " --help`)");
      }
    }
    // Flags are spelled with dashes (--print-after); Abseil names use '_'.
    if (absl::StartsWith(a, "--") && a.size() > 2) {
      size_t end = a.find('=');
      if (end == std::string::npos) end = a.size();
      for (size_t k = 2; k < end; ++k)
        if (a[k] == '-') a[k] = '_';
      owned.push_back(a);
      rest.push_back(nullptr);  // filled below, once `owned` stops growing
      continue;
    }
    rest.push_back(argv[i]);
  }
  for (size_t k = 0, o = 0; k < rest.size(); ++k)
    if (!rest[k]) rest[k] = owned[o++].data();
  absl::SetProgramUsageMessage(cmd->summary);
  std::vector<char*> positional = absl::ParseCommandLine(static_cast<int>(rest.size()), rest.data());
  std::vector<std::string> args;
  for (size_t i = 1; i < positional.size(); ++i) args.push_back(positional[i]);
  return cmd->run(args);
}

namespace kiln::cli {

extern const Command kCompileCommand;
extern const Command kConformanceCommand;
extern const Command kDiffCommand;
extern const Command kOptCommand;
extern const Command kRunCommand;
extern const Command kSimCommand;
extern const Command kTargetsCommand;
extern const Command kTileCommand;
extern const Command kSweepCommand;

// The table of commands, in the order `kiln --help` lists them.
const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      kCompileCommand, kRunCommand, kDiffCommand, kOptCommand, kSimCommand, kSweepCommand, kTileCommand, kConformanceCommand, kTargetsCommand,
  };
  return commands;
}

}  // namespace kiln::cli
