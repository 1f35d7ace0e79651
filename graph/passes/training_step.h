//===- training_step.h - Append the backward pass and an optimizer step -*- C++ -*-===//
//
// training-step turns an inference graph that computes a loss into one
// training step: after the graph's outputs it appends, for each parameter P
// (a float constant), `P.grad`, the gradient of the loss with respect to P
// (graph/passes/gradients.h), and `P.next`, P after one step of stochastic
// gradient descent (P - learning_rate * P.grad), or of the optimizer that
// TrainingOptions names (SGD with momentum, Adam, AdamW: torch.optim's
// rules), whose state is constants of the step (zero: before the first
// step) with outputs NAME.next after the parameters'. Run it before the
// optimizer: folding may turn a parameter into another constant (a
// transposed weight), and the gradient is taken with respect to the
// constants the pass finds. What does not depend on a parameter (the shape
// plumbing of PyTorch exports) is folded first, so that shapes are static.
//
// A data-parallel step (TrainingOptions::replicas = N > 1) runs on N chips,
// each on its own shard of the batch: every gradient is averaged over the
// replicas by a kiln.AllReduce placed right after the gradient's producer
// (graph/ops/collective.cc), `P.grad` is that mean, and the updates run in
// the order the gradients become ready. Grouping the AllReduces into
// buckets is the target's decision.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

struct TrainingStepReport {
  // The parameters, in the order of their outputs.
  std::vector<std::string> params;
  int64_t nodes_added = 0;
};

// Makes `g` a training step (see above). Infers `g`'s types first and folds
// what does not depend on the parameters (shape plumbing), creating no
// constant of more than `fold_max_elements` elements.
absl::StatusOr<TrainingStepReport> AppendTrainingStep(Graph& g, const TrainingOptions& options,
                                                      int64_t fold_max_elements = PassOptions().fold_max_elements);

// "sgd", "adam", "adamw".
absl::StatusOr<TrainingOptions::Optimizer> ParseOptimizer(absl::string_view name);
absl::string_view OptimizerName(TrainingOptions::Optimizer o);
// The options' values in range (an InvalidArgument naming the first that is not).
absl::Status CheckTrainingOptions(const TrainingOptions& options);

std::unique_ptr<Pass> CreateTrainingStepPass();

}  // namespace kiln
