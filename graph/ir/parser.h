//===- parser.h - The .kir text form of the graph IR: parsing ---*- C++ -*-===//
//
// ParseModel reads the text PrintModel writes (docs/kir.md is the grammar).
// It checks syntax and scoping (every value is defined once, before its
// uses, in its graph or an enclosing one) but not operator semantics: run
// VerifyModel (graph/verifier/verifier.h) for those.
//
// Errors read `file:line:col: message`. The parser never crashes, whatever
// the input; nesting deeper than kMaxKirNesting is an error.
//
// Blob references (`blob "HASH"`) take their bytes from `blobs`; a constant
// whose blob is not there becomes an elided constant (type known, data not).
// A tensor-valued attribute whose blob is missing is an error.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/ir/graph.h"
#include "graph/ir/printer.h"

namespace kiln {

constexpr int kMaxKirNesting = 64;

// A model: an optional `kiln.model ...` header line and the main graph.
absl::StatusOr<Model> ParseModel(absl::string_view text, absl::string_view filename = "<kir>",
                                 const BlobStore* blobs = nullptr);
// One top-level graph (`graph @name(...) { ... }`), without a model header.
absl::StatusOr<std::unique_ptr<Graph>> ParseGraph(absl::string_view text,
                                                  absl::string_view filename = "<kir>",
                                                  const BlobStore* blobs = nullptr);
// A type alone: "f32[1,batch,?]", "seq<i64[*]>", "?".
absl::StatusOr<Type> ParseTypeText(absl::string_view text);

}  // namespace kiln
