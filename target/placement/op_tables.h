//===- op_tables.h - One placement ladder, driven by a target's tables -*- C++ -*-===//
//
// Every device target answers "where does this node run" by the same
// ladder; what differs is its tables: which ops its matrix and vector
// engines take and at which dtypes, what its fallback engine is, and a few
// rungs of its own (how it moves data, which convolutions its matrix engine
// takes). In order:
//
//   1. an op kiln does not know, or one with no kernel anywhere: refused;
//   2. an op of a foreign domain: the fallback engine;
//   3. a collective (kiln.AllReduce): the links engine, or refused;
//   4. control flow (a node with subgraphs, kiln.Fused aside): fallback;
//   5. output shapes not static: fallback;
//   6. the target's gate (cuda: dtypes device memory cannot hold, random
//      numbers);
//   7. a view (kViewOps, graph/passes/rewrite_helpers.h: the one list every
//      target and pass reads): the vector engine, nothing moves;
//   8. data movement the target's copy rung takes: the vector engine;
//   9. a matrix op at the matrix dtypes (with the target's matrix rung);
//  10. a kiln.Fused group: the matrix engine for an epilogue group, the
//      vector engine for a memory-bound one;
//  11. a vector op at the vector dtypes;
//  12. anything else: the fallback engine.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "graph/ir/graph.h"
#include "target/api/target.h"

namespace kiln::target {

struct OpTables {
  // Engines, and how reasons name them.
  std::string matrix_engine, vector_engine, fallback_engine;
  std::string fallback_where;  // "the AICPU": "control flow runs on the AICPU"
  std::string kernel_kind;     // "core": "domain 'x' has no core kernels", "no core kernel for X"
  std::string vector_where;    // "the vector unit": "elementwise on the vector unit"
  std::string matrix_where;    // "the cube": "matrix work on the cube"
  // kiln.AllReduce: its engine, or (empty) the reason it is refused; where
  // it runs ("the chip links": "a collective over the chip links").
  std::string links_engine;
  std::string links_refusal;
  std::string links_where = "the chip links";
  std::string device_kind = "chip";  // "the mean over 4 chips"
  absl::flat_hash_set<std::string> matrix_ops, vector_ops;
  bool (*matrix_dtype)(DType) = nullptr;
  std::string matrix_dtype_refusal;  // the fallback's reason when a matrix op's dtypes are not taken
  bool (*vector_dtype)(DType) = nullptr;
  std::string vector_dtype_refusal;
  // The target's own rungs; each answers a placement or nothing (the
  // ladder goes on). `fallback(why)` is the fallback engine with a reason.
  using Rung = std::function<std::optional<Placement>(const Node&, const std::function<Placement(std::string)>& fallback)>;
  Rung gate;    // 6
  Rung copies;  // 8
  Rung matrix;  // 9, after the dtype check
  Rung fused;   // 10, before the kind decides
};

Placement PlaceByTables(const Node& node, const OpTables& tables);

}  // namespace kiln::target
