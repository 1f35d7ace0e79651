//===- step_loop.h - Running a training step again and again ----*- C++ -*-===//
//
// A training step whose parameters and optimizer state are inputs
// (`kiln opt --passes=training-step --state=inputs`) has, for each such
// input NAME, an output NAME.next: its value after the step. A loop of N
// steps runs the model N times, each time on the same data inputs, with
// every NAME.next of one step fed into input NAME of the next.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/ir/tensor.h"
#include "target/api/executable.h"

namespace kiln::runtime {

// Output `output` (NAME.next) feeds input `input` (NAME).
using StepFeed = target::StepFeed;

// The feeds of a model with these input and output names, in output order.
std::vector<StepFeed> StepFeeds(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs);
// The same of a graph, as (input NAME, output NAME.next) values: what a
// compiler asks buffer donation about (target/backend/donation.h).
std::vector<std::pair<const Value*, const Value*>> StepFeedValues(const Graph& g);

using RunFn = std::function<absl::StatusOr<std::vector<Tensor>>(std::vector<Tensor>)>;
using StepFn = std::function<void(int step, const std::vector<Tensor>& outputs)>;

// Runs `steps` steps from `inputs` through `run` and returns the last
// step's outputs; `after_step` (if set) sees each step's outputs (steps
// count from 1). An error names the step that failed.
absl::StatusOr<std::vector<Tensor>> RunSteps(int steps, std::vector<Tensor> inputs,
                                             const std::vector<StepFeed>& feeds, const RunFn& run,
                                             const StepFn& after_step = nullptr);

}  // namespace kiln::runtime
