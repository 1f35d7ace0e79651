//===- step_loop.cc - Running a training step again and again -------------===//
#include "runtime/step_loop.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kiln::runtime {

std::vector<StepFeed> StepFeeds(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
  absl::flat_hash_map<std::string, int> input_index;
  for (size_t i = 0; i < inputs.size(); ++i) input_index.emplace(inputs[i], static_cast<int>(i));
  std::vector<StepFeed> feeds;
  constexpr absl::string_view kNext = ".next";
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!absl::EndsWith(outputs[o], kNext)) continue;
    auto it = input_index.find(outputs[o].substr(0, outputs[o].size() - kNext.size()));
    if (it != input_index.end()) feeds.push_back({static_cast<int>(o), it->second});
  }
  return feeds;
}

std::vector<std::pair<const Value*, const Value*>> StepFeedValues(const Graph& g) {
  std::vector<std::string> in_names, out_names;
  for (const Value* v : g.inputs()) in_names.push_back(v->name());
  for (const Value* v : g.outputs()) out_names.push_back(v->name());
  std::vector<std::pair<const Value*, const Value*>> feeds;
  for (const StepFeed& f : StepFeeds(in_names, out_names)) feeds.emplace_back(g.inputs()[f.input], g.outputs()[f.output]);
  return feeds;
}

absl::StatusOr<std::vector<Tensor>> RunSteps(int steps, std::vector<Tensor> inputs,
                                             const std::vector<StepFeed>& feeds, const RunFn& run,
                                             const StepFn& after_step) {
  std::vector<Tensor> outputs;
  for (int step = 1; step <= steps; ++step) {
    auto out = run(inputs);
    if (!out.ok())
      return absl::Status(out.status().code(),
                          steps > 1 ? absl::StrCat("step ", step, ": ", out.status().message()) : out.status().message());
    outputs = *std::move(out);
    if (after_step) after_step(step, outputs);
    if (step == steps) break;
    for (const StepFeed& f : feeds) {
      if (f.output < 0 || f.output >= static_cast<int>(outputs.size()) || f.input < 0 ||
          f.input >= static_cast<int>(inputs.size()))
        return absl::InternalError("a step feed names no output or input");
      const Tensor& next = outputs[f.output];
      if (next.dtype() != inputs[f.input].dtype() || next.dims() != inputs[f.input].dims())
        return absl::InvalidArgumentError(absl::StrCat("step ", step, ": output ", f.output, " does not fit input ",
                                                       f.input, " of the next step"));
      inputs[f.input] = next;
    }
  }
  return outputs;
}

}  // namespace kiln::runtime
