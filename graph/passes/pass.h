//===- pass.h - Graph passes: the interface ---------------------*- C++ -*-===//
//
// A pass transforms a graph in place and says whether it changed anything.
// Each pass is one header and one source named after what it does, with a
// one-sentence definition of its semantics, and is registered under a text
// name in pass_table.cc. Passes recurse into nested graphs themselves where
// their semantics call for it.
//
// Options that a user sets on the command line (requested outputs, fold size
// limit, gears, mixed precision) reach passes through PassOptions;
// statistics (nodes removed, constants folded) go to the pass's
// PassStatistics.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/ir/graph.h"

namespace kiln {

// mixed-precision (`--precision=mixed`): the narrow type, edits of its op
// lists, and its cost threshold (graph/passes/narrow_precision.h).
struct MixedPrecisionOptions {
  DType narrow = DType::kF16;
  // Ops moved to each list from their default one ("MatMul", "kiln.Gelu").
  std::vector<std::string> allow, infer, clear, deny;
  // A matrix op on the allow list computes narrow when it does at least this
  // many multiply-adds per element converted by the Cast kernels it needs
  // (0: always).
  int64_t min_macs_per_cast = 32;

  bool operator==(const MixedPrecisionOptions&) const = default;
};

// training-step: the loss, the parameters and the optimizer's update.
// The most replicas a data-parallel step may name.
inline constexpr int kMaxReplicas = 4096;

struct TrainingOptions {
  // The loss output's name; empty: the graph's one output that is a float
  // tensor of one element.
  std::string loss;
  // The parameters' names; empty: every float constant of rank >= 1 that
  // the loss depends on through an input a gradient flows into (not
  // BatchNormalization's running statistics, not Clip's bounds).
  std::vector<std::string> params;
  double learning_rate = 0.01;
  // The update rule, as PyTorch's torch.optim defines it: SGD (with
  // momentum and Nesterov momentum), Adam (weight decay added to the
  // gradient) and AdamW (decoupled weight decay). The optimizer's state
  // (momentum buffers, Adam's moments and step count) is constants of the
  // step, zero before the first, each with an output NAME.next.
  enum class Optimizer { kSgd, kAdam, kAdamW };
  Optimizer optimizer = Optimizer::kSgd;
  double momentum = 0;  // SGD: in [0, 1); 0: no momentum buffer
  bool nesterov = false;  // SGD with momentum > 0
  double weight_decay = 0;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;  // Adam, AdamW
  // The parameters and the optimizer's state become graph inputs that hold
  // their values as initial values (variables: a run may leave them out,
  // and a training loop feeds each NAME.next output back into input NAME),
  // so that a compiled step is not specialized to them; false: they stay
  // constants of the step.
  bool state_as_inputs = false;
  // Loss scaling, for steps that compute in a narrow type: the backward
  // pass starts from loss * S and each gradient is multiplied by 1 / S (so
  // P.grad is the true gradient). A dynamic scale follows
  // torch.cuda.amp.GradScaler: a step whose gradients are not all finite
  // changes no parameter or optimizer state and halves S; after
  // `loss_scale_growth_interval` finite steps in a row S doubles. S and the
  // count of finite steps are state (loss_scale, loss_scale.good_steps).
  enum class LossScaling { kNone, kStatic, kDynamic };
  LossScaling loss_scaling = LossScaling::kNone;
  double loss_scale = 65536;  // S, or its initial value
  int loss_scale_growth_interval = 2000;
  // Data-parallel replicas: above 1, every gradient is averaged over the
  // replicas (kiln.AllReduce) before the update, and the updates run in the
  // order the gradients are ready in.
  int replicas = 1;

  bool operator==(const TrainingOptions&) const = default;
};

struct PassOptions {
  // prune: keep only these graph outputs (empty keeps all).
  std::vector<std::string> outputs;
  // fold-constants: do not create constants with more elements than this.
  int64_t fold_max_elements = int64_t{1} << 22;  // 4 Mi elements
  // gears: static values of symbolic dims, one variant per combination.
  // dynamic_batch gives the leading dim of every input; dynamic_dims maps a
  // symbol name to its values.
  std::vector<int64_t> dynamic_batch;
  std::map<std::string, std::vector<int64_t>> dynamic_dims;
  MixedPrecisionOptions mixed;
  TrainingOptions training;
};

// Named counters a pass reports ("nodes-removed", "constants-folded").
class PassStatistics {
 public:
  // A counter already there is found without building its name.
  void Add(absl::string_view counter, int64_t n = 1) {
    if (auto it = counters_.find(counter); it != counters_.end())
      it->second += n;
    else
      counters_.emplace(std::string(counter), n);
  }
  const std::map<std::string, int64_t, std::less<>>& counters() const { return counters_; }
  void Clear() { counters_.clear(); }

 private:
  std::map<std::string, int64_t, std::less<>> counters_;
};

// Kinds of change a pass run makes, as bits. The pass manager reruns a pass
// only after changes of the kinds that can give it something to do
// (Pass::woken_by), so a fixpoint group's last round skips the passes that
// the previous round's changes cannot affect.
enum ChangeKind : uint8_t {
  // Removed only nodes and constants that nothing read.
  kChangeErased = 1,
  // Redirected every use of values to other values the graph already had,
  // each holding the same data with the same type and being a constant
  // exactly when the replaced value was (merged duplicates), and removed
  // the replaced values, leaving nothing else unused.
  kChangeMerged = 2,
  // Any other change: new nodes or constants, rewired inputs, changed types
  // or attributes.
  kChangeOther = 4,
};
using ChangeKinds = uint8_t;
inline constexpr ChangeKinds kAnyChange = kChangeErased | kChangeMerged | kChangeOther;

class Pass {
 public:
  virtual ~Pass() = default;
  // The registered name ("fold-constants").
  virtual absl::string_view name() const = 0;
  // Runs on `graph`; returns whether it changed anything.
  virtual absl::StatusOr<bool> Run(Graph& graph) = 0;
  // The kinds of change, made by any pass, after which this pass may find
  // something to do on a graph where it last found nothing. A pass says
  // less than kAnyChange only where its definition proves the others
  // inert: erasing what nothing reads never makes a node foldable, and
  // merging duplicates of one type never changes a type. Asked of the
  // graph as it is when the pass would run again.
  virtual ChangeKinds woken_by(const Graph&) const { return kAnyChange; }

  void set_options(const PassOptions* options) { options_ = options; }
  const PassOptions& options() const { return *options_; }
  PassStatistics& stats() { return stats_; }

  // What the last Run said of its changes (for the pass manager, which
  // calls ClearRunNotes before each run): the kinds noted (none noted by a
  // run that changed the graph means kChangeOther), and whether a second
  // run straight after it would find nothing.
  ChangeKinds noted_changes() const { return noted_changes_; }
  bool settled() const { return settled_; }
  void ClearRunNotes() {
    noted_changes_ = 0;
    settled_ = false;
  }

 protected:
  // Called by Run: the kinds of change it made.
  void NoteChange(ChangeKinds kinds) { noted_changes_ |= kinds; }
  // Called by Run: it left nothing for itself to do, so its own changes
  // do not make it run again.
  void NoteSettled() { settled_ = true; }

 private:
  static const PassOptions& DefaultOptions();
  const PassOptions* options_ = &DefaultOptions();
  PassStatistics stats_;
  ChangeKinds noted_changes_ = 0;
  bool settled_ = false;
};

inline const PassOptions& Pass::DefaultOptions() {
  static const PassOptions options;
  return options;
}

}  // namespace kiln
