//===- importer.h - ONNX model import ---------------------------*- C++ -*-===//
//
// Builds a kiln Model from an ONNX ModelProto read through the schema that
// Debian's libonnx-dev ships: initializers (external data included), Constant
// nodes (imported as constants), nested graphs, symbolic dims, value_info.
// Nodes of older opsets are upgraded to kiln's canonical opset-17 form, then
// types and shapes are inferred.
//
// Every error names the file, and where it applies the node and op, in one
// line; no input (truncated, random bytes, cycles, bad arity) crashes.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/ir/graph.h"

namespace kiln::onnx_import {

// The opset range of the default domain kiln imports.
inline constexpr int64_t kMinOpset = 1;
inline constexpr int64_t kMaxOpset = 17;

struct ImportOptions {
  // Run shape inference after import.
  bool infer_shapes = true;
};

absl::StatusOr<Model> ImportFile(const std::string& path, const ImportOptions& options = {});
// `display_name` prefixes errors; `base_dir` resolves external data ("" forbids it).
absl::StatusOr<Model> ImportBytes(absl::string_view bytes, const std::string& display_name,
                                  const std::string& base_dir, const ImportOptions& options = {});

}  // namespace kiln::onnx_import
