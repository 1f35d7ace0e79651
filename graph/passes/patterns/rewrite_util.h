//===- rewrite_util.h - Helpers for matching and rewriting subgraphs -*- C++ -*-===//
//
// What the rewrite patterns of simplify, recognize-composites,
// expand-composites and fold-batchnorm share: reading constants (directly or
// by evaluating a short chain of nodes whose inputs are all constant),
// checking use counts and shapes, and replacing nodes while keeping the names
// of the top-level graph's outputs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "graph/ir/graph.h"
#include "graph/ir/tensor.h"
#include "graph/ir/type.h"

namespace kiln::patterns {

//===--- Reading the graph ------------------------------------------------===//

// The data of `v` when it is a constant, or the result of evaluating the
// nodes that produce it when every one of them has only constant inputs
// (at most `max_depth` nodes deep, no random or control-flow ops, results of
// at most `max_elements` elements).
std::optional<Tensor> EvaluateConstant(const Value* v, int max_depth = 6, int64_t max_elements = int64_t{1} << 22);

// The single element of a one-element numeric constant (or evaluable value).
std::optional<double> ScalarConstant(const Value* v);

// True when `v` is a numeric constant whose every element equals `x`.
bool IsConstantFilledWith(const Value* v, double x);

// The integer data of a constant (any integer dtype), or nullopt.
std::optional<std::vector<int64_t>> ConstantInts(const Value* v);

// The node producing `v` when its op is `op` in the default domain.
Node* ProducerOf(const Value* v, absl::string_view op);

// The only user of `v` when `v` has exactly one use and that use is a node
// input (not a graph output).
Node* SingleUser(const Value* v);

// True when every use of `v` is an input of one of `nodes` (and none is a
// graph output).
bool OnlyUsedBy(const Value* v, const std::vector<Node*>& nodes);

// True when `v` is an output of any graph.
bool IsGraphOutput(const Value* v);

// The rank of a tensor value, or -1 when not known.
int KnownRank(const Value* v);

// The dtype of a tensor value (kUndefined when not known).
DType KnownDType(const Value* v);

// True when both shapes are ranked and provably equal: same rank, and every
// pair of dims is the same static extent or the same symbol.
bool ProvablySameShape(const Shape& a, const Shape& b);

// True when a tensor of static dims `c` broadcast against `x` gives `x`'s
// shape: rank(c) <= rank(x) and each dim of `c` is 1 or the same static dim.
bool BroadcastsInto(const Dims& c, const Shape& x);

// Floats equal within a relative tolerance suited to `dtype` (the precision
// a constant of that dtype was stored with).
bool NearlyEqual(double a, double b, DType dtype);

//===--- Rewriting --------------------------------------------------------===//

// True when `n` holds nested graphs (If/Loop/Scan bodies).
bool HasSubgraphs(const Node* n);

// Whether replacing output `from` with `to` is possible: an output of the
// top-level graph keeps its name, so there `to` must be a node output of the
// same graph that is not already a graph output, made by a node without
// nested graphs, and not the same value for two outputs.
bool CanReplace(const Value* from, const Value* to);

// Replaces every use of the outputs of `node` with `with` (one value per
// output; null for an output without uses), erases `node` and then the
// producers that no longer have any use. Top-level graph outputs keep their
// names (the replacement takes the name, its producer being recreated).
// Returns the replacement values as they are afterwards. Callers check
// CanReplace first. Allocates nothing for a node of one or two outputs that
// are not interface outputs (nearly every rewrite).
absl::InlinedVector<Value*, 2> ReplaceNode(Node* node, absl::Span<Value* const> with);

// Erases `n` (whose outputs must be unused), then every producer of its
// inputs (and unused constants) that no longer has any use.
void EraseWithDeadInputs(Node* n);

// Gives output `index` of `n` the name `name`, which must be free; returns
// the node that now produces it (n is recreated in place).
Node* RenameOutput(Node* n, int index, const std::string& name);

// Sets the output types of `n` by running its op's inference (unknown when
// inference fails; the types it already has are kept where they are more
// precise).
void InferNodeTypes(Node* n);

// A constant scalar of `dtype` holding `x`.
Value* ScalarConst(Graph& g, DType dtype, double x, absl::string_view hint);

}  // namespace kiln::patterns
