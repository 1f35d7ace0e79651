//===- gears.h - static-shape gears: one static variant per gear behind a dispatch ---*- C++ -*-===//
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/passes/pass.h"

namespace kiln {

// At most this many variants (the product of the value counts of every
// gear symbol).
inline constexpr int64_t kMaxGearVariants = 100;

struct GearsRequest {
  // Values of the leading dim of every graph input whose leading dim is
  // symbolic.
  std::vector<int64_t> batch;
  // Values of named symbolic dims.
  std::map<std::string, std::vector<int64_t>> dims;
};

struct GearsReport {
  int64_t variants = 0;
  int64_t symbols = 0;  // dim symbols replaced by static values
};

// Replaces the body of the top-level graph `g` by one kiln.GearDispatch node
// holding a static variant of it per gear (the cartesian product of the
// requested values): the symbols are replaced by their values in every type
// of the variant and its types are inferred again. The graph's inputs and
// outputs keep their names and types. An empty request changes nothing; a
// request that names no symbol of the inputs, repeats a value or asks for
// more than kMaxGearVariants variants is an error.
absl::StatusOr<GearsReport> CompileGears(Graph& g, const GearsRequest& request);

// One gear's static variant of a graph, standalone.
struct GearVariant {
  std::vector<int64_t> values;  // one per GearVariants::symbols
  std::unique_ptr<Graph> graph;
};
struct GearVariants {
  std::vector<std::string> symbols;  // "batch" for --dynamic-batch, then the named dims
  std::vector<GearVariant> gears;    // in CompileGears' order
};

// The gears of top-level graph `g` as separate graphs (what a target
// compiles one by one, kiln compile --dynamic-batch): each a copy of `g`
// with the same value names, the gear's values in place of its symbols, its
// types inferred again. Requests are checked as CompileGears checks them; an
// empty request gives no gears.
absl::StatusOr<GearVariants> SpecializeGears(const Graph& g, const GearsRequest& request);

std::unique_ptr<Pass> CreateGearsPass();

}  // namespace kiln
