//===- cost_model.h - What fusion may group, and what grouping saves -*- C++ -*-===//
//
// The target-independent side of fusion decisions: which role a node can
// play in a fusion group (elementwise member, reduction or normalization as
// the group's last op, MatMul/Gemm/Conv anchor of an epilogue), the shape a
// group iterates over, and the memory traffic a decision saves or costs.
//
// Fusing a producer into its consumer's group saves writing the
// intermediate and reading it back (2 x its bytes). Duplicating a producer
// that has other users into a group saves the group's read of the
// intermediate and, when every other user can recompute it as well, its
// write; it costs reading the producer's inputs that the group does not read
// already, plus the recomputed flops (kFlopsPerByte flops cost as much as
// one byte).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "graph/ir/graph.h"

namespace kiln::fusion {

enum class Role : uint8_t {
  kNone,         // never fused
  kElementwise,  // one output element from the same-index input elements
  kTerminal,     // reduction or normalization: only as a group's last op
  kMatMulAnchor, // MatMul, Gemm: epilogues fuse into it
  kConvAnchor,   // Conv
};

// Bytes of memory traffic one flop of recompute is worth.
inline constexpr double kFlopsPerByte = 4;
// The extent assumed for a symbolic dim when sizes are compared.
inline constexpr int64_t kSymbolicDimEstimate = 32;
// A duplicated producer must cost at most this many flops per element.
inline constexpr double kCheapFlopsPerElement = 4;

Role RoleOf(const Node& n);

// True when `s` is ranked and every dim is static or symbolic: two such
// shapes that compare equal have the same extents at run time.
bool IsIterationShape(const Shape& s);

// The shape a node iterates over in a group: its output for elementwise ops
// and anchors, its data input (input 0) for a reduction or normalization.
// Unranked (and not an iteration shape) when unknown.
Shape IterationShape(const Node& n, Role role);

// Estimated bytes of a tensor value (symbolic dims count as
// kSymbolicDimEstimate; unknown types as 0).
double EstimatedBytes(const Value* v);
// Exact bytes when the shape is static, else 0 (for reported figures).
double StaticBytes(const Value* v);

// Flops per output element of an elementwise node.
double FlopsPerElement(const Node& n);
bool IsCheapElementwise(const Node& n);

// Whether recomputing `producer` inside a group beats the round trip of its
// output through memory. `new_input_bytes` is what the group would read in
// addition for the producer's inputs. The round trip is the group's read of
// the output, plus its write when `write_avoidable` (every other reader
// could recompute it too; a graph output or a reader that cannot is
// written anyway).
bool RecomputeBeatsRoundTrip(const Node& producer, double new_input_bytes, bool write_avoidable);

}  // namespace kiln::fusion
