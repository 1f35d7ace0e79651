//===- pass_manager.h - Pipelines of passes ---------------------*- C++ -*-===//
//
// A PassManager runs a pipeline given as text:
//
//   pipeline := item (',' item)*
//   item     := PASS-NAME | PIPELINE-NAME | 'fixpoint' ['<' N '>'] '(' pipeline ')'
//
// A fixpoint group repeats its pipeline until no pass in it changes the graph,
// at most N times (default 16); hitting the cap is reported, not fatal. A
// pass whose last run changed nothing is skipped while no pass has made a
// change of a kind that can give it work (Pass::woken_by; passes of one
// name share their options, and a pass that found nothing on a graph finds
// nothing on the same graph again). A run that changed the graph and
// settled (left nothing for a second run of itself) counts as finding
// nothing after its own changes. So the last round of a fixpoint group runs
// only the passes that a change of the previous round can affect: after a
// round whose only changes were cse's merges and dce's erasures, folding
// and shape inference do not walk the graph again. The time table counts
// skipped runs apart. With
// verify_each, the verifier runs after every pass and a failure names the
// pass. print_after dumps the graph after the named passes; time_passes and
// stats collect a table of time and counters per pass.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

struct PassManagerOptions {
  bool verify_each = false;
  std::vector<std::string> print_after;
  bool print_after_all = false;
  int fixpoint_max_iterations = 16;
  // Where --print-after dumps and warnings go (stderr when null).
  std::ostream* dump = nullptr;
};

class PassManager {
 public:
  PassManager(PassOptions pass_options = {}, PassManagerOptions options = {});
  ~PassManager();

  // Appends a pipeline; errors on unknown names or bad syntax.
  absl::Status AddPipeline(absl::string_view spec);
  // Runs the pipeline on the model's graph.
  absl::StatusOr<bool> Run(Model& model);
  // Whether a pass of this name is in the pipeline.
  bool RunsPass(absl::string_view name) const;
  // An error naming a --print-after pass the pipeline does not run (Run
  // checks it first).
  absl::Status CheckPrintAfter() const;

  // A table of time per pass (runs, total, share), in first-run order.
  std::string TimingReport() const;
  // Counters per pass, in first-run order.
  std::string StatsReport() const;

 private:
  struct Item;
  struct PassRecord;
  absl::Status Parse(absl::string_view spec, std::vector<Item>* items, int depth);
  absl::StatusOr<bool> RunItems(std::vector<Item>& items, Model& model);
  absl::StatusOr<bool> RunPass(PassRecord& rec, Model& model);
  void PrintAfter(const std::string& name, bool changed, const Model& model);
  std::ostream& dump() const;

  PassOptions pass_options_;
  PassManagerOptions options_;
  std::vector<Item> items_;
  std::vector<std::unique_ptr<PassRecord>> records_;
  // How many pass runs have made a change of each kind (ChangeKind bit i
  // counts in changes_[i]), and for each pass name those counts when it
  // last found nothing to do, or finished settled (absent after a run that
  // changed the graph without settling).
  using ChangeCounts = std::array<uint64_t, std::bit_width(unsigned{kAnyChange})>;
  ChangeCounts changes_{};
  absl::flat_hash_map<std::string, ChangeCounts> clean_at_;
};

}  // namespace kiln
