//===- main.cc - The kiln command-line driver -----------------------------===//
//
// `kiln <command> [flags] [args]`. Each command lives in its own cmd_*.cc;
// this file only dispatches and handles --help. Flags are Abseil flags; the
// repeatable `--input NAME=FILE` is collected here before Abseil parses the
// rest.
//
//===----------------------------------------------------------------------===//
#include <cctype>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
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

// Whether `help` names `flag` ("--batches", "-o") as a token of its own.
bool HelpNames(const std::string& help, const std::string& flag) {
  auto part_of_name = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; };
  for (size_t at = help.find(flag); at != std::string::npos; at = help.find(flag, at + 1)) {
    size_t end = at + flag.size();
    if ((at == 0 || !part_of_name(help[at - 1])) && (end == help.size() || !part_of_name(help[end]))) return true;
  }
  return false;
}

// Every command sees every flag of the driver (Abseil flags are global), so
// a command takes only the flags its help names: one that does nothing there
// is refused instead of being ignored silently. `name` is spelled with dashes,
// without the leading ones and any "=value".
bool CommandTakesFlag(const kiln::cli::Command& cmd, const std::string& name) {
  // The help's "flags:" section when it has one (its prose may mention
  // flags of other commands).
  std::string help = cmd.help;
  if (size_t at = help.find("\nflags:\n"); at != std::string::npos) help = help.substr(at);
  if (HelpNames(help, "--" + name) || HelpNames(help, "--no" + name) || HelpNames(help, "-" + name)) return true;
  return absl::StartsWith(name, "no") && HelpNames(help, "--" + name.substr(2));
}

// The flags a command's help lists ("--name", dashes kept), and the
// settings the registered targets declare: what a misspelled flag is
// matched against.
std::vector<std::string> KnownFlags(const kiln::cli::Command& cmd) {
  std::vector<std::string> names;
  std::string help = cmd.help;
  if (size_t at = help.find("\nflags:\n"); at != std::string::npos) help = help.substr(at);
  for (size_t at = help.find("--"); at != std::string::npos; at = help.find("--", at + 2)) {
    size_t end = at + 2;
    while (end < help.size() && (std::isalnum(static_cast<unsigned char>(help[end])) || help[end] == '-')) ++end;
    if (end > at + 2) names.push_back(help.substr(at + 2, end - at - 2));
  }
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

// The table of commands, in the order `kiln --help` lists them.
const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      kCompileCommand, kRunCommand, kDiffCommand, kOptCommand, kSimCommand, kTileCommand, kConformanceCommand, kTargetsCommand,
  };
  return commands;
}

}  // namespace kiln::cli
