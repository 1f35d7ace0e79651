//===- run_setup.cc - What `kiln run` and `kiln diff` share before a run ---===//
#include "tools/kiln/run_setup.h"

#include <algorithm>
#include <filesystem>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/onnx/tensor_proto.h"
#include "graph/io/npy.h"
#include "target/api/target_registry.h"
#include "target/artifact/artifact_io.h"
#include "tools/kiln/cli_util.h"

namespace kiln::cli {

absl::StatusOr<Tensor> ReadTensorFile(const std::string& path) {
  if (absl::EndsWith(path, ".pb")) return onnx_import::ReadTensorProtoFile(path);
  return ReadNpy(path);
}

absl::StatusOr<std::vector<Tensor>> InputsByName(const std::vector<std::string>& names,
                                                 const std::vector<std::string>& described,
                                                 const std::vector<Tensor>& initial) {
  absl::flat_hash_map<std::string, Tensor> given;
  for (const std::string& spec : RepeatedInputs()) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return absl::InvalidArgumentError("--input expects NAME=FILE, got '" + spec + "'");
    std::string name = spec.substr(0, eq);
    auto t = ReadTensorFile(spec.substr(eq + 1));
    if (!t.ok()) return t.status();
    if (!given.emplace(name, *std::move(t)).second)
      return absl::InvalidArgumentError("input '" + name + "' is given twice");
  }
  // A name the model does not take is the error, with the nearest name it
  // does take (a misspelled input is otherwise reported as the missing one).
  for (const auto& [name, tensor] : given) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    const std::string near = DidYouMean(name, names);
    return absl::InvalidArgumentError(absl::StrCat("the model has no input named '", name, "'",
                                                   near.empty() ? "" : absl::StrCat(" (did you mean '", near, "'?)"),
                                                   "; it takes ", absl::StrJoin(described, ", ")));
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    auto it = given.find(n);
    if (it == given.end() && i < initial.size() && initial[i].defined()) {
      inputs.push_back(initial[i]);
      continue;
    }
    if (it == given.end())
      return absl::InvalidArgumentError(absl::StrCat("missing --input for '", n, "'; the model takes ",
                                                     absl::StrJoin(described, ", ")));
    inputs.push_back(std::move(it->second));
    given.erase(it);
  }
  if (!given.empty())
    return absl::InvalidArgumentError(absl::StrCat("the model has no input named '", given.begin()->first,
                                                   "'; it takes ", absl::StrJoin(described, ", ")));
  return inputs;
}

}  // namespace kiln::cli
