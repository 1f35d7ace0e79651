//===- conformance.h - The ONNX backend test suite as a harness -*- C++ -*-===//
//
// Runs the models of the ONNX backend test data (libonnx-testdata: node,
// pytorch-converted, pytorch-operator, simple) on a target, compares every
// output with the expected one under the ONNX backend tolerances, and
// reports one line per failing test and a closing summary line
// `N passed, N failed, N skipped`.
//
// Each test runs in a forked child by default, so a crash or a hang in one
// model is reported as that model's failure and the run goes on.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"

namespace kiln {

// Runs a model on some target: inputs in graph-input order, outputs in
// graph-output order.
using ModelRunner =
    std::function<absl::StatusOr<std::vector<Tensor>>(const Model&, std::vector<Tensor>)>;

struct ConformanceOptions {
  std::string data_dir = "/usr/share/libonnx-testdata/data";
  std::vector<std::string> suites = {"node", "pytorch-converted", "pytorch-operator", "simple"};
  std::string filter;          // ECMAScript regex searched in "suite/test_name"
  bool isolate = true;         // one forked child per test
  int timeout_seconds = 300;   // per test, when isolated
  bool verbose = false;        // also print passing tests
  bool progress = false;       // a progress line on stderr
  double rtol = 1e-3;
  double atol = 1e-7;
  // Applied to each imported model before it is checked and run (kiln
  // conformance --optimize runs the optimizer here); an error fails the test
  // with its message.
  std::function<absl::Status(Model&)> transform_model;
  // Also check that print -> parse -> print of each (transformed) graph is exact.
  std::function<absl::Status(const Model&)> extra_model_check;
  // Lines printed after the tests and before the closing summary line (a
  // target's own totals).
  std::function<std::string()> before_summary;
};

struct ConformanceSummary {
  int passed = 0;
  int failed = 0;
  int skipped = 0;
};

absl::StatusOr<ConformanceSummary> RunConformance(const ConformanceOptions& options,
                                                  const ModelRunner& runner, std::ostream& out);

// Files named PREFIX_<index>.pb in `dir` (a test data set's inputs or
// outputs), ordered by index.
std::vector<std::string> NumberedFiles(const std::filesystem::path& dir, const std::string& prefix);

// Runs `work` in a forked child and returns the text it returned; an error
// when the child ran past `timeout_seconds` (it is then killed), crashed,
// or returned nothing. Where no child can be started, `work` runs here.
absl::StatusOr<std::string> RunInChild(const std::function<std::string()>& work, int timeout_seconds);

// Compares `actual` with `expected` (dtype, shape, values within tolerance;
// NaN matches NaN). Returns a one-line reason on mismatch.
absl::Status CompareTensors(const Tensor& expected, const Tensor& actual, double rtol, double atol);

}  // namespace kiln
