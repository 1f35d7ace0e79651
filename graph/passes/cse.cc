//===- cse.cc - common-subexpression elimination ---===//
//
// A node that has the same op, domain, attributes and inputs as an earlier
// node visible from it computes the same values, so its outputs are replaced
// by the earlier node's and it is removed.
//
// Nodes are looked up in a hash table keyed by op, domain, attributes and the
// identities of their inputs; a constant's identity is its contents (two
// constants with the same dtype, dims and bytes are the same input). The
// table is scoped like the values it names: a node of a nested graph may be
// merged into a node of an enclosing graph that comes before the node
// holding the nested graph, never the other way round. The two inputs of
// Add, Mul, And, Or, Xor, Equal and the bitwise ops match in either order.
// Nodes holding graphs and random ops are never merged, and a node whose
// output is an output of the top graph is kept (its name is the model's
// interface).
//
//===----------------------------------------------------------------------===//
#include "graph/passes/cse.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/rewrite_helpers.h"

namespace kiln {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) { return absl::HashOf(h, v); }

uint64_t FloatBits(float f) {
  if (f != f) return 0x7fc00000u;  // every NaN compares equal in Attribute::operator==
  if (f == 0) return 0;            // 0.0 == -0.0
  return std::bit_cast<uint32_t>(f);
}

// A hash consistent with Attribute::operator== (graphs are never hashed:
// nodes holding graphs are not merged).
uint64_t AttrHash(const Attribute& a) {
  uint64_t h = static_cast<uint64_t>(a.kind());
  switch (a.kind()) {
    case AttrKind::kInt: return Mix(h, static_cast<uint64_t>(a.i()));
    case AttrKind::kFloat: return Mix(h, FloatBits(a.f()));
    case AttrKind::kString: return absl::HashOf(h, a.s());
    case AttrKind::kTensor: return Mix(h, a.t().defined() ? a.t().Hash() : 0);
    case AttrKind::kType: return absl::HashOf(h, a.type().ToString());
    case AttrKind::kInts: return absl::HashOf(h, a.ints());
    case AttrKind::kFloats:
      for (float f : a.floats()) h = Mix(h, FloatBits(f));
      return h;
    case AttrKind::kStrings: return absl::HashOf(h, a.strings());
    case AttrKind::kTensors:
      for (const Tensor& t : a.tensors()) h = Mix(h, t.defined() ? t.Hash() : 0);
      return h;
    case AttrKind::kGraph:
    case AttrKind::kGraphs: return h;
  }
  return h;
}

bool IsCommutativePair(const Node& n) {
  if (n.num_inputs() != 2 || !n.input(0) || !n.input(1)) return false;
  if (!n.domain().empty() && n.domain() != "ai.onnx") return false;
  const std::string& op = n.op();
  return op == "Add" || op == "Mul" || op == "And" || op == "Or" || op == "Xor" || op == "Equal" ||
         op == "BitwiseAnd" || op == "BitwiseOr" || op == "BitwiseXor";
}

class CommonSubexpressions {
 public:
  explicit CommonSubexpressions() = default;

  void ProcessGraph(Graph& g) {
    size_t mark = entries_.size();
    if (mark == 0) {
      entries_.reserve(g.num_nodes());
      heads_.reserve(g.num_nodes());
    }
    // Straight through the list: only the node visited is ever erased.
    for (Node* n = g.first_node(), *next = nullptr; n; n = next) {
      next = n->next();
      g.PrefetchAhead(next);
      if (std::vector<Graph*> subs = n->subgraphs(); !subs.empty()) {
        for (Graph* s : subs) ProcessGraph(*s);
        continue;
      }
      if (IsNondeterministicOp(*n) || n->num_outputs() == 0) continue;
      Ids ids = InputIds(*n);
      uint64_t h = NodeHash(*n, ids);
      auto head = heads_.find(h);
      const Entry* match = nullptr;
      for (int k = head == heads_.end() ? -1 : head->second; k >= 0; k = entries_[k].next)
        if (Same(*entries_[k].node, InputIds(*entries_[k].node), *n, ids)) {
          match = &entries_[k];
          break;
        }
      if (!match) {
        int next = head == heads_.end() ? -1 : head->second;
        entries_.push_back({n, h, next});
        heads_[h] = static_cast<int>(entries_.size() - 1);
        continue;
      }
      bool interface = false;
      for (const Value* o : n->outputs()) interface |= IsRootGraphOutput(o);
      if (interface) continue;
      Node* keep = match->node;
      for (int i = 0; i < n->num_outputs(); ++i) {
        Value* from = n->output(i);
        Value* to = keep->output(i);
        auto merged = MergeTypes(to->type(), from->type());
        if (merged.ok()) to->set_type(*std::move(merged));
        if (from->has_uses()) from->ReplaceAllUsesWith(to);
      }
      g.EraseNode(n);
      ++removed;
    }
    // Leaving the scope: forget its nodes, newest first (all at once when
    // leaving the outermost graph).
    if (mark == 0) {
      entries_.clear();
      heads_.clear();
      return;
    }
    while (entries_.size() > mark) {
      const Entry& e = entries_.back();
      if (e.next < 0) heads_.erase(e.hash);
      else heads_[e.hash] = e.next;
      entries_.pop_back();
    }
  }

  int64_t removed = 0;

 private:
  using Ids = absl::InlinedVector<const Value*, 4>;
  // A node in scope. Entries with the same hash form a chain through `next`
  // (the previous one with that hash, or -1), newest first from heads_; at
  // most one entry of a chain matches a node (a later match was merged).
  // The input identities of an entry's node are computed again when its hash
  // matches (they do not change while it is in scope: its users come after
  // it), which keeps an entry to 24 bytes.
  struct Entry {
    Node* node;
    uint64_t hash;
    int next;
  };

  // The identity of an input: the value itself, or for a constant the first
  // constant seen with the same contents.
  const Value* Identity(const Value* v) {
    if (!v || !v->is_constant() || !v->constant().defined()) return v;
    auto it = canon_.find(v);
    if (it != canon_.end()) return it->second;
    const Tensor& t = v->constant();
    std::vector<const Value*>& same_hash = by_content_[t.Hash()];
    const Value* rep = v;
    for (const Value* c : same_hash)
      if (c->constant().Equals(t)) {
        rep = c;
        break;
      }
    if (rep == v) same_hash.push_back(v);
    canon_[v] = rep;
    return rep;
  }

  Ids InputIds(const Node& n) {
    Ids ids;
    ids.reserve(n.num_inputs());
    for (const Value* v : n.inputs()) ids.push_back(Identity(v));
    // Only whether two nodes match depends on this order, not what is kept.
    if (IsCommutativePair(n) && std::less<const Value*>()(ids[1], ids[0])) std::swap(ids[0], ids[1]);
    return ids;
  }

  static uint64_t NodeHash(const Node& n, const Ids& ids) {
    uint64_t h = absl::HashOf(n.op(), n.domain(), n.num_outputs(), ids.size());
    for (const Value* v : ids) h = Mix(h, reinterpret_cast<uintptr_t>(v));
    for (const auto& [name, a] : n.attrs()) h = absl::HashOf(h, name, AttrHash(a));
    return h;
  }

  static bool Same(const Node& a, const Ids& a_ids, const Node& b, const Ids& b_ids) {
    if (a.op() != b.op() || a.domain() != b.domain() || a.num_outputs() != b.num_outputs() || a_ids != b_ids)
      return false;
    if (a.attrs().size() != b.attrs().size()) return false;
    auto ia = a.attrs().begin();
    for (auto ib = b.attrs().begin(); ib != b.attrs().end(); ++ia, ++ib)
      if (ia->first != ib->first || !(ia->second == ib->second)) return false;
    return true;
  }

  std::vector<Entry> entries_;  // the nodes in scope, in visiting order
  absl::flat_hash_map<uint64_t, int> heads_;
  absl::flat_hash_map<const Value*, const Value*> canon_;
  absl::flat_hash_map<uint64_t, std::vector<const Value*>> by_content_;
};

}  // namespace

int64_t EliminateCommonSubexpressions(Graph& g) {
  CommonSubexpressions cse;
  cse.ProcessGraph(g);
  return cse.removed;
}

namespace {

class CsePass : public Pass {
 public:
  absl::string_view name() const override { return "cse"; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    int64_t removed = EliminateCommonSubexpressions(graph);
    if (removed) stats().Add("nodes-removed", removed);
    return removed > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateCsePass() { return std::make_unique<CsePass>(); }

}  // namespace kiln
