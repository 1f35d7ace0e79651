//===- rewrite_helpers.h - Helpers the graph passes share ------*- C++ -*-===//
//
// Small pieces that several passes need when they replace values: whether a
// node is a given op or one of a list of ops, the integer a one-element
// constant holds, which ops are views, whether a value is an
// output of the main graph (whose name is the model's interface and must
// survive a rewrite), which ops are nondeterministic, a
// table of every value name of a graph nest (a nested graph may not redefine
// a name visible from its enclosing graphs, so new names must be unique
// across the whole nest), and replacing a node's outputs by constants that
// keep the outputs' names.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "graph/ir/graph.h"

namespace kiln {

// Whether `n` is the op `op` of the default domain (written "" or
// "ai.onnx").
inline bool IsOp(const Node& n, absl::string_view op) {
  return n.op() == op && (n.domain().empty() || n.domain() == "ai.onnx");
}

// The single integer of a one-element integer constant, if `v` is one.
inline std::optional<int64_t> ConstantInt(const Value* v) {
  const Tensor* t = ConstantData(v);
  if (!t || t->numel() != 1 || !IsInteger(t->dtype())) return std::nullopt;
  return t->GetInt(0);
}

// The truth of a one-element constant (non-zero is true), if `v` is one.
inline std::optional<bool> ConstantTruth(const Value* v) {
  const Tensor* t = ConstantData(v);
  if (!t || t->numel() != 1 || t->dtype() == DType::kString) return std::nullopt;
  return t->GetDouble(0) != 0;
}

// Whether `n` is an op of the default domain named in `ops`.
inline bool IsOneOf(const Node& n, absl::Span<const char* const> ops) {
  return n.domain().empty() && std::any_of(ops.begin(), ops.end(), [&](const char* s) { return n.op() == s; });
}

// Ops whose result is their first input's bytes under another (or the same)
// shape: a view of a constant shares its storage, a view on a device shares
// its buffer.
inline constexpr const char* kViewOps[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};

// True when `v` is an output of a graph that has no enclosing graph.
inline bool IsRootGraphOutput(const Value* v) {
  for (const Use& u : v->uses())
    if (!u.user && u.graph && !u.graph->parent()) return true;
  return false;
}

// Ops whose outputs differ between runs with the same inputs (random ops,
// Dropout in training mode).
inline bool IsNondeterministicOp(const Node& n) {
  // Compared as string_views, which compare lengths first: most ops differ
  // from every name below in length, and cse and folding ask this of every
  // node.
  absl::string_view op = n.op();
  if (!n.domain().empty() && n.domain() != "ai.onnx") return false;
  if (op == "Dropout") {
    // Random only in training mode (input 2), unless that is a constant false.
    const Value* training = n.input(2);
    if (!training) return false;
    const Tensor& t = training->constant();
    return !(training->is_constant() && t.defined() && t.numel() == 1 && t.dtype() != DType::kString &&
             t.GetDouble(0) == 0);
  }
  return op == "RandomNormal" || op == "RandomUniform" || op == "RandomNormalLike" ||
         op == "RandomUniformLike" || op == "Bernoulli" || op == "Multinomial";
}

// True when `g` or a graph nested in it holds a nondeterministic op.
inline bool HasNondeterministicOp(const Graph& g) {
  for (const Node* n : g.nodes()) {
    if (IsNondeterministicOp(*n)) return true;
    for (const Graph* s : n->subgraphs())
      if (HasNondeterministicOp(*s)) return true;
  }
  return false;
}

// Every value name of a graph nest, with how many values hold it (sibling
// graphs may reuse names). Names generated through Fresh() are unique across
// the nest and never handed out twice, even before a value takes them.
//
// The table is collected on first use (a pass that rewrites nothing never
// pays for it), from the nest as it is then: a caller that
// asks AtMostOne about a value it is about to erase calls Ensure() while the
// value exists.
class NameTable {
 public:
  explicit NameTable(const Graph& root) : root_(&root) {}

  // Collects the names now, if not done yet.
  void Ensure() {
    if (collected_) return;
    collected_ = true;
    Collect(*root_);
  }
  // True when no value of the nest other than (possibly) one holds `name`.
  bool AtMostOne(const std::string& name) {
    Ensure();
    auto it = count_.find(name);
    return it == count_.end() || it->second <= 1;
  }
  // A new name from `hint`, unused anywhere in the nest; recorded as taken.
  std::string Fresh(Graph& g, absl::string_view hint) {
    Ensure();
    for (;;) {
      std::string name = g.UniqueName(hint);
      if (!count_.contains(name)) {
        count_[name] = 1;
        return name;
      }
    }
  }

 private:
  void Collect(const Graph& g) {
    for (const Value* v : g.Values()) ++count_[v->name()];
    if (g.may_hold_graphs())
      for (const Node* n : g.nodes())
        for (const Graph* s : n->subgraphs()) Collect(*s);
  }
  const Graph* root_;
  bool collected_ = false;
  absl::flat_hash_map<std::string, int> count_;
};

// Redirects the uses of every output of `n` and erases `n`. Output i goes to
// `values[i]` when that is non-null, else, when it has uses, becomes a
// constant holding `tensors[i]` (the same value: its name and uses stay).
// Outputs without uses need neither. Returns the replacement of each output
// (null for unused outputs without a value).
inline std::vector<Value*> ReplaceNodeOutputs(Graph& g, Node* n, const std::vector<Value*>& values,
                                              const std::vector<Tensor>& tensors) {
  std::vector<Value*> result(n->num_outputs(), nullptr);
  std::vector<Tensor> kept(n->num_outputs());
  for (int i = 0; i < n->num_outputs(); ++i) {
    Value* out = n->output(i);
    Value* repl = i < static_cast<int>(values.size()) ? values[i] : nullptr;
    if (repl) {
      if (out->has_uses()) out->ReplaceAllUsesWith(repl);
      result[i] = repl;
      continue;
    }
    if (!out->has_uses() || i >= static_cast<int>(tensors.size()) || !tensors[i].defined()) continue;
    kept[i] = tensors[i];
    result[i] = out;
  }
  g.EraseNodeKeepingConstants(n, kept);
  return result;
}

}  // namespace kiln
