//===- partition.h - Fusion groups of one graph -----------------*- C++ -*-===//
//
// Partitions the nodes of one graph (not its nested graphs) into fusion
// groups and single nodes, and orders the result:
//
//   1. Epilogues: each MatMul, Gemm or Conv, in node order, takes the
//      elementwise consumers of its result (and of what it already took)
//      that iterate over the same shape: bias add, activation, residual add,
//      cast. A consumer is taken only when none of its other inputs depends
//      on the group, so no path leaves the group and re-enters it. A MatMul
//      also takes, as a prologue, the Transposes an operand is read through
//      while they keep it a matrix view of their source (IsMatrixView,
//      graph/ops/matmul.h: attention's K^T, its heads), copied in where
//      something else reads them too.
//   2. Memory-bound groups: from the last node back, each elementwise node,
//      reduction or normalization not yet grouped starts a group that takes
//      the elementwise producers iterating over the same shape (the output
//      of an elementwise node, the data input of a reduction, which then is
//      the group's last op). A group of elementwise ops may also take one
//      normalization whose result has its input's shape (Softmax,
//      LayerNormalization): the ops after it are its epilogue (a Cast of
//      LayerNorm's output for a narrow GEMM), and the group takes the
//      normalization's producers in turn. A producer whose result nothing else reads joins
//      outright (its write and read-back disappear). One that has other users
//      is duplicated into the group when it is cheap and the cost model says
//      recomputing it beats the round trip through memory, else joins with
//      its result leaving the group as an extra output when that keeps the
//      group convex, else stays outside.
//   3. Order: a stable topological order of the contracted graph (each group
//      one node, keyed by its last member's position). A group that would
//      close a cycle across groups is dissolved (never expected; a guard).
//
// Groups hold at least two members. Every decision is made in node order or
// its reverse, with bounded searches, so the partition is deterministic and
// costs O(n log n) for n nodes.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/strings/string_view.h"
#include "graph/ir/graph.h"

namespace kiln::fusion {

enum class GroupKind : uint8_t { kElementwise, kReduction, kMatMulEpilogue, kConvEpilogue };
absl::string_view GroupKindName(GroupKind k);

struct Member {
  Node* node;
  // A duplicated member is recomputed inside the group; the original node
  // stays for its other users (and goes when none is left).
  bool duplicate = false;
};

struct Group {
  GroupKind kind = GroupKind::kElementwise;
  Node* anchor = nullptr;        // MatMul/Gemm/Conv, the reduction, or the last elementwise op
  std::vector<Member> members;   // in node order
};

// One step of the final node order: a node that stays, or a group.
struct OrderItem {
  Node* node = nullptr;  // null for a group
  int group = -1;
};

struct Partition {
  std::vector<Group> groups;
  std::vector<OrderItem> order;  // every node that is not an owned group member, and every group
  int dissolved = 0;             // groups given up to avoid a cycle
};

struct PartitionOptions {
  int max_group_nodes = 64;      // members per group
  int search_budget = 512;       // nodes one convexity search may visit
  // A target's say on matrix-op groups: whether `candidate` (an epilogue
  // consumer or a prologue Transpose) may join a group whose members so far
  // are `group` (the anchor first, then the others in the order they
  // joined), as its kernels take only some epilogues. Unset: every
  // candidate may.
  std::function<bool(const std::vector<const Node*>& group, const Node& candidate)> matrix_member;
  // A target's say on memory-bound ops (elementwise, reductions,
  // normalizations): whether `n` may join a group at all, as its fused
  // kernels hold only some dtypes. Unset: every such op may.
  std::function<bool(const Node& n)> memory_member;
};

Partition PartitionGraph(const Graph& g, const PartitionOptions& options = {});

}  // namespace kiln::fusion
