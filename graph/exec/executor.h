//===- executor.h - Reference executor for graphs ---------------*- C++ -*-===//
//
// Runs a graph on the host with the reference kernels, control flow included:
// the golden model of every test and the engine of `kiln run MODEL.onnx`.
// Values are freed after their last use.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/ir/graph.h"
#include "graph/ir/tensor.h"

namespace kiln {

struct ExecOptions {
  // Check each kernel's outputs against the types the graph declares.
  bool check_types = true;
};

class Executor {
 public:
  explicit Executor(ExecOptions options = {});
  ~Executor();

  // Runs `graph` with `inputs` bound to its inputs, in order; returns its
  // outputs in order. Inputs are checked against the declared types.
  absl::StatusOr<std::vector<Tensor>> Run(const Graph& graph, std::vector<Tensor> inputs);

  // Runs one node of a graph on its own: `lookup` gives the value of each of
  // NodeOperands(node) (constants may be left to the graph). Returns the
  // node's outputs in order (an unused output may be undefined).
  absl::StatusOr<std::vector<Tensor>> RunNode(const Node& node,
                                              const std::function<const Tensor*(const Value*)>& lookup);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The non-constant values a node reads: its inputs, then the values of
// enclosing graphs its subgraphs use, each once, in first-use order.
std::vector<const Value*> NodeOperands(const Node& node);

// Checks that `t` fits `type` (dtype, rank and static dims).
absl::Status CheckTensorMatchesType(const Tensor& t, const Type& type, absl::string_view what);

}  // namespace kiln
