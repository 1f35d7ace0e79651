//===- cse.cc - common-subexpression elimination ---===//
//
// A node that has the same op, domain, attributes and inputs as an earlier
// node visible from it computes the same values, so its outputs are replaced
// by the earlier node's and it is removed.
//
// A node is looked for among the earlier readers of one of its inputs (a
// duplicate reads every input the node reads), or in a hash table keyed by
// op, domain, attributes and inputs when that input has many readers or
// every input is a constant; a constant's identity is its contents (two
// constants with the same dtype, dims and bytes are the same input). Only
// nodes visible from the node match: a node of a nested graph may be
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
#include <vector>

#include "absl/container/flat_hash_map.h"
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

// A constant with data is identified by its contents; every other input
// (a graph input, a node output, a constant whose bytes were elided) by
// itself.
bool ByContents(const Value* v) { return ConstantData(v) != nullptr; }

bool SameInput(const Value* a, const Value* b) {
  if (a == b) return true;
  return ByContents(a) && ByContents(b) && a->constant().Equals(b->constant());
}

uint64_t InputKey(const Value* v) {
  if (!v) return 0;
  return ByContents(v) ? v->constant().Hash() : reinterpret_cast<uintptr_t>(v);
}

// Whether `a` and `b` compute the same thing (the caller has excluded
// random ops and nodes holding graphs).
bool Same(const Node& a, const Node& b) {
  if (a.op() != b.op() || a.domain() != b.domain() || a.num_outputs() != b.num_outputs() ||
      a.num_inputs() != b.num_inputs() || a.attrs().size() != b.attrs().size())
    return false;
  auto ia = a.attrs().begin();
  for (auto ib = b.attrs().begin(); ib != b.attrs().end(); ++ia, ++ib)
    if (ia->first != ib->first || !(ia->second == ib->second)) return false;
  bool in_order = true;
  for (int i = 0; i < a.num_inputs() && in_order; ++i) in_order = SameInput(a.input(i), b.input(i));
  if (in_order) return true;
  return IsCommutativePair(a) && SameInput(a.input(0), b.input(1)) && SameInput(a.input(1), b.input(0));
}

// A hash consistent with Same.
uint64_t NodeHash(const Node& n) {
  uint64_t h = absl::HashOf(n.op(), n.domain(), n.num_outputs(), n.num_inputs());
  if (IsCommutativePair(n)) {
    uint64_t k0 = InputKey(n.input(0)), k1 = InputKey(n.input(1));
    h = Mix(Mix(h, std::min(k0, k1)), std::max(k0, k1));
  } else {
    for (const Value* v : n.inputs()) h = Mix(h, InputKey(v));
  }
  for (const auto& [name, a] : n.attrs()) h = absl::HashOf(h, name, AttrHash(a));
  return h;
}

// The input every node computing the same thing as `n` also reads, and
// which is identified by itself: the one at the lowest address (null when
// every input is a constant with data, or there is none). Nodes with the
// same inputs have the same anchor.
const Value* Anchor(const Node& n) {
  const Value* anchor = nullptr;
  for (const Value* v : n.inputs())
    if (v && !ByContents(v) && (!anchor || std::less<const Value*>()(v, anchor))) anchor = v;
  return anchor;
}

// Looks for an earlier node computing the same thing among the readers of
// the node's anchor, which it must read too: no table for most nodes, and
// the search reads nodes near the one visited. An anchor read by more than
// kScanLimit nodes is searched through a hash table instead, which then
// holds every entered reader anchored at it (so a value that gains readers
// as nodes merge never makes the search quadratic). Nodes without an anchor
// (only constant inputs, or none) always go through the table. A table
// entry stays until the pass ends; entries not visible from the node
// looked up (nodes of a nested graph the walk has left, or of a sibling)
// are skipped.
class CommonSubexpressions {
 public:
  void ProcessGraph(Graph& g) {
    // Straight through the list: only the node visited is ever erased.
    for (Node* n = g.first_node(), *next = nullptr; n; n = next) {
      next = n->next();
      g.PrefetchAhead(next);
      if (n->may_hold_graphs()) {
        if (std::vector<Graph*> subs = n->subgraphs(); !subs.empty()) {
          for (Graph* s : subs) ProcessGraph(*s);
          continue;
        }
      }
      if (IsNondeterministicOp(*n) || n->num_outputs() == 0) continue;
      const Value* anchor = Anchor(*n);
      Node* keep = nullptr;
      uint64_t hash = 0;
      bool tabled = !anchor || UseTable(anchor);
      if (tabled) {
        hash = NodeHash(*n);
        keep = FindInTable(*n, hash, g);
      } else {
        keep = FindAmongReaders(*n, anchor, g);
      }
      if (!keep) {
        entered_.Insert(n);
        if (tabled) Enter(n, hash);
        continue;
      }
      bool interface = false;
      for (const Value* o : n->outputs()) interface |= IsRootGraphOutput(o);
      if (interface) continue;
      for (int i = 0; i < n->num_outputs(); ++i) {
        Value* from = n->output(i);
        Value* to = keep->output(i);
        if (from->type() != to->type()) ++report.types_differed;
        auto merged = MergeTypes(to->type(), from->type());
        if (merged.ok()) to->set_type(*std::move(merged));
        if (from->has_uses()) from->ReplaceAllUsesWith(to);
      }
      // A constant read only by `n` (the kept node reads an equal one) is
      // left unused: dead-code elimination has work.
      for (const Value* v : n->inputs())
        if (v && v->is_constant() &&
            std::all_of(v->uses().begin(), v->uses().end(), [&](const Use& u) { return u.user == n; }))
          ++report.constants_left_unused;
      g.EraseNode(n);
      ++report.nodes_removed;
    }
  }

  CseReport report;

 private:
  static constexpr size_t kScanLimit = 16;

  // Whether `m`, an entered node, can stand for a node of `g`: it belongs to
  // g or to a graph enclosing it (entered nodes of an enclosing graph all
  // come before the node holding g).
  static bool Visible(const Node& m, const Graph& g) {
    for (const Graph* a = &g; a; a = a->parent())
      if (m.owner() == a) return true;
    return false;
  }

  Node* FindAmongReaders(const Node& n, const Value* anchor, const Graph& g) const {
    for (const Use& u : anchor->uses()) {
      Node* m = u.user;
      if (m && m != &n && entered_.Contains(m) && Same(*m, n) && Visible(*m, g)) return m;
    }
    return nullptr;
  }

  Node* FindInTable(const Node& n, uint64_t hash, const Graph& g) const {
    auto head = heads_.find(hash);
    if (head == heads_.end()) return nullptr;
    for (int k = head->second; k >= 0; k = entries_[k].next) {
      Node* m = entries_[k].node;
      if (Same(*m, n) && Visible(*m, g)) return m;
    }
    return nullptr;
  }

  void Enter(Node* n, uint64_t hash) {
    auto head = heads_.try_emplace(hash, -1).first;
    entries_.push_back({n, head->second});
    head->second = static_cast<int>(entries_.size() - 1);
  }

  // Whether the nodes anchored at `anchor` are looked up in the table; the
  // first time its readers outnumber kScanLimit, the entered ones move in.
  bool UseTable(const Value* anchor) {
    if (tabled_anchors_.Contains(anchor)) return true;
    if (anchor->uses().size() <= kScanLimit) return false;
    tabled_anchors_.Insert(anchor);
    for (const Use& u : anchor->uses())
      if (Node* m = u.user; m && entered_.Contains(m) && Anchor(*m) == anchor) Enter(m, NodeHash(*m));
    return true;
  }

  // An entered node. Entries with the same hash form a chain through `next`
  // (the previous one with that hash, or -1), newest first from heads_.
  struct Entry {
    Node* node;
    int next;
  };
  std::vector<Entry> entries_;
  absl::flat_hash_map<uint64_t, int> heads_;
  // Nodes kept and looked up against (a reader of an anchor that is not
  // tabled is found through the anchor's uses).
  ScratchMarks entered_;
  ScratchMarks tabled_anchors_;
};

}  // namespace

CseReport EliminateCommonSubexpressions(Graph& g) {
  CommonSubexpressions cse;
  cse.ProcessGraph(g);
  return cse.report;
}

namespace {

class CsePass : public Pass {
 public:
  absl::string_view name() const override { return "cse"; }
  // Merging duplicates and erasing never changes an op, attribute or
  // input into one that matches another node, but merges by other passes
  // (dedup-constants) may leave two nodes reading one constant.
  ChangeKinds woken_by(const Graph&) const override { return kChangeOther | kChangeMerged; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    CseReport r = EliminateCommonSubexpressions(graph);
    if (r.nodes_removed) stats().Add("nodes-removed", r.nodes_removed);
    // Nodes are visited in order and a merged node's readers come after
    // it, so one run leaves no duplicate. A merge of values whose types
    // differed changes what some readers read (shape inference has work),
    // and one that leaves a constant unused gives dead-code elimination
    // work: neither is a plain merge.
    NoteChange(r.types_differed || r.constants_left_unused ? kChangeOther : kChangeMerged);
    NoteSettled();
    return r.nodes_removed > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateCsePass() { return std::make_unique<CsePass>(); }

}  // namespace kiln
