//===- pass_manager.cc - Pipelines of passes ------------------------------===//
#include "graph/passes/pass_manager.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/ir/printer.h"
#include "graph/passes/pass_registry.h"
#include "graph/support/status.h"
#include "graph/verifier/verifier.h"

namespace kiln {

// One pass instance with its timing.
struct PassManager::PassRecord {
  std::unique_ptr<Pass> pass;
  int runs = 0;
  int changed = 0;
  int skipped = 0;
  double seconds = 0;
};

struct PassManager::Item {
  PassRecord* pass = nullptr;  // a pass, or
  std::vector<Item> group;     // a fixpoint group
  int cap = 0;
  std::string text;            // the group as written, for messages
};

PassManager::PassManager(PassOptions pass_options, PassManagerOptions options)
    : pass_options_(std::move(pass_options)), options_(std::move(options)) {}
PassManager::~PassManager() = default;

std::ostream& PassManager::dump() const { return options_.dump ? *options_.dump : std::cerr; }

absl::Status PassManager::AddPipeline(absl::string_view spec) {
  std::vector<Item> items;
  KILN_RETURN_IF_ERROR(Parse(spec, &items, 0));
  for (Item& it : items) items_.push_back(std::move(it));
  return absl::OkStatus();
}

// Splits `spec` at top-level commas.
static absl::StatusOr<std::vector<std::string>> SplitTopLevel(absl::string_view spec) {
  std::vector<std::string> parts;
  int depth = 0;
  std::string cur;
  for (char c : spec) {
    if (c == '(') ++depth;
    if (c == ')' && --depth < 0) return InvalidArgument("unbalanced ')' in pipeline '", spec, "'");
    if (c == ',' && depth == 0) {
      parts.push_back(std::string(absl::StripAsciiWhitespace(cur)));
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (depth != 0) return InvalidArgument("unbalanced '(' in pipeline '", spec, "'");
  parts.push_back(std::string(absl::StripAsciiWhitespace(cur)));
  return parts;
}

absl::Status PassManager::Parse(absl::string_view spec, std::vector<Item>* items, int depth) {
  if (depth > 8) return InvalidArgument("pipeline nests too deeply");
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitTopLevel(spec));
  for (const std::string& part : parts) {
    if (part.empty()) return InvalidArgument("empty pass name in pipeline '", spec, "'");
    if (part.rfind("fixpoint", 0) == 0) {
      absl::string_view rest = absl::string_view(part).substr(8);
      int cap = options_.fixpoint_max_iterations;
      if (!rest.empty() && rest[0] == '<') {
        size_t close = rest.find('>');
        if (close == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(1, close - 1), &cap) || cap < 1)
          return InvalidArgument("bad iteration cap in '", part, "' (expected fixpoint<N>(...))");
        rest = rest.substr(close + 1);
      }
      if (rest.size() < 2 || rest.front() != '(' || rest.back() != ')')
        return InvalidArgument("bad fixpoint group '", part, "' (expected fixpoint(a,b,...))");
      Item group;
      group.cap = cap;
      group.text = part;
      KILN_RETURN_IF_ERROR(Parse(rest.substr(1, rest.size() - 2), &group.group, depth + 1));
      items->push_back(std::move(group));
      continue;
    }
    if (const PipelineInfo* p = FindPipeline(part)) {
      KILN_RETURN_IF_ERROR(Parse(p->spec, items, depth + 1));
      continue;
    }
    const PassInfo* info = FindPass(part);
    if (!info) {
      std::string known;
      for (const PassInfo& p : RegisteredPasses()) absl::StrAppend(&known, known.empty() ? "" : ", ", p.name);
      return InvalidArgument("unknown pass '", part, "' (known passes: ", known, ")");
    }
    auto rec = std::make_unique<PassRecord>();
    rec->pass = info->create();
    rec->pass->set_options(&pass_options_);
    Item item;
    item.pass = rec.get();
    records_.push_back(std::move(rec));
    items->push_back(std::move(item));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> PassManager::RunPass(PassRecord& rec, Model& model) {
  std::string name(rec.pass->name());
  // A pass that last found nothing to change, with no pass having made a
  // change since that could give it work, would find nothing again: it is
  // skipped.
  auto clean = clean_at_.find(name);
  if (clean != clean_at_.end()) {
    const ChangeKinds woken_by = rec.pass->woken_by(*model.graph);
    bool woken = false;
    for (size_t k = 0; k < changes_.size(); ++k)
      woken |= (woken_by >> k & 1) && clean->second[k] != changes_[k];
    if (!woken) {
      ++rec.skipped;
      PrintAfter(name, /*changed=*/false, model);
      return false;
    }
  }
  rec.pass->ClearRunNotes();
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<bool> changed = rec.pass->Run(*model.graph);
  rec.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++rec.runs;
  if (!changed.ok()) {
    // Errors that name their pass already ("gears: ...") are not named twice.
    absl::string_view msg = changed.status().message();
    if (absl::StartsWith(msg, name + ": ")) msg.remove_prefix(name.size() + 2);
    return absl::Status(changed.status().code(), absl::StrCat("pass ", name, ": ", msg));
  }
  if (*changed) {
    ++rec.changed;
    ChangeKinds kinds = rec.pass->noted_changes();
    if (!kinds) kinds = kChangeOther;
    for (size_t k = 0; k < changes_.size(); ++k) changes_[k] += kinds >> k & 1;
    if (rec.pass->settled())
      clean_at_[name] = changes_;
    else
      clean_at_.erase(name);
  } else {
    clean_at_[name] = changes_;
  }
  if (options_.verify_each) {
    absl::Status v = VerifyModel(model);
    if (!v.ok()) return Internal("the graph is invalid after pass ", name, ": ", v.message());
  }
  PrintAfter(name, *changed, model);
  return *changed;
}

void PassManager::PrintAfter(const std::string& name, bool changed, const Model& model) {
  bool print = options_.print_after_all ||
               std::find(options_.print_after.begin(), options_.print_after.end(), name) != options_.print_after.end();
  if (print) {
    dump() << "// ----- IR after " << name << (changed ? "" : " (unchanged)") << " ----- //\n"
           << PrintModel(model) << "\n";
  }
}

absl::StatusOr<bool> PassManager::RunItems(std::vector<Item>& items, Model& model) {
  bool any = false;
  for (Item& item : items) {
    if (item.pass) {
      KILN_ASSIGN_OR_RETURN(bool c, RunPass(*item.pass, model));
      any |= c;
      continue;
    }
    bool converged = false;
    for (int i = 0; i < item.cap; ++i) {
      KILN_ASSIGN_OR_RETURN(bool c, RunItems(item.group, model));
      any |= c;
      if (!c) {
        converged = true;
        break;
      }
    }
    if (!converged)
      dump() << "kiln: warning: " << item.text << " still changed the graph after " << item.cap
             << " iterations (the cap); continuing\n";
  }
  return any;
}

bool PassManager::RunsPass(absl::string_view name) const {
  for (const auto& rec : records_)
    if (rec->pass->name() == name) return true;
  return false;
}

absl::Status PassManager::CheckPrintAfter() const {
  // A --print-after name that no pass of the pipeline has would print
  // nothing, silently.
  for (const std::string& name : options_.print_after) {
    if (RunsPass(name)) continue;
    std::vector<std::string> names;
    for (const auto& rec : records_) {
      std::string n(rec->pass->name());
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
    return absl::InvalidArgumentError(absl::StrCat("--print-after: no pass named '", name, "' runs in this pipeline (",
                                                   names.empty() ? "it is empty" : absl::StrJoin(names, ", "), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> PassManager::Run(Model& model) {
  KILN_RETURN_IF_ERROR(CheckPrintAfter());
  // What earlier runs found says nothing about this model.
  changes_ = {};
  clean_at_.clear();
  return RunItems(items_, model);
}

std::string PassManager::TimingReport() const {
  double total = 0;
  for (const auto& r : records_) total += r->seconds;
  std::string out =
      absl::StrFormat("%-28s %6s %8s %8s %11s %7s\n", "pass", "runs", "changed", "skipped", "time (ms)", "share");
  for (const auto& r : records_) {
    if (r->runs == 0 && r->skipped == 0) continue;
    out += absl::StrFormat("%-28s %6d %8d %8d %11.3f %6.1f%%\n", std::string(r->pass->name()), r->runs, r->changed,
                           r->skipped, r->seconds * 1e3, total > 0 ? 100 * r->seconds / total : 0.0);
  }
  out += absl::StrFormat("%-28s %6s %8s %8s %11.3f %6.1f%%\n", "total", "", "", "", total * 1e3, 100.0);
  return out;
}

std::string PassManager::StatsReport() const {
  std::string out;
  for (const auto& r : records_) {
    for (const auto& [k, v] : r->pass->stats().counters())
      out += absl::StrFormat("%-28s %-28s %10d\n", std::string(r->pass->name()), k, v);
  }
  return out;
}

}  // namespace kiln
