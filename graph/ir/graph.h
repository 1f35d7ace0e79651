//===- graph.h - The kiln graph IR: Graph, Node, Value ----------*- C++ -*-===//
//
// kiln's graph IR is SSA: every Value has at most one producer (a Node output,
// a graph input, or a constant) and any number of uses. A Graph owns its
// values and an ordered list of nodes; nested graphs (the bodies of If, Loop
// and Scan) are owned by node attributes and may use values of the graphs
// that enclose them. A Model is the top-level graph plus ONNX metadata.
//
// Node order is the execution order the verifier checks (every input is
// defined before its use). Iteration order never depends on pointer values,
// so everything printed from a graph is deterministic.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "graph/ir/attribute.h"
#include "graph/ir/tensor.h"
#include "graph/ir/type.h"

namespace kiln {

class Graph;
class Node;

namespace ir_internal {

// Memory for slab chunks. A chunk of kHugeChunkBytes is mapped on its own,
// aligned to that size, and asked to be backed by one huge page where the
// system offers them: a graph of 100k nodes then spans a few dozen TLB
// entries instead of about 14,000 4 KiB pages (the default pipeline on the
// 100k generated graphs ran 3-18% faster, benchmarks/RESULTS.md). Smaller
// chunks (and a huge one where the mapping fails) come from operator new;
// `mapped` tells FreeChunk which.
inline constexpr size_t kHugeChunkBytes = size_t{2} << 20;
void* AllocateChunk(size_t bytes, size_t align, bool* mapped);
void FreeChunk(void* p, size_t bytes, size_t align, bool mapped) noexcept;
// Bytes of huge chunks mapped now, over all graphs (they are not on the
// heap: memory figures add them).
size_t MappedChunkBytes();

// Storage for the objects of one kind that a graph creates: chunks of
// contiguous slots, filled in creation order, so that nodes (or values)
// created together sit together in memory and a walk over a graph streams
// through a few chunks instead of chasing separate heap objects. A destroyed
// object's slot is reused by the next one created. Chunks double with the
// graph (a small nested graph takes little) up to kHugeChunkBytes and are
// freed with the slab; every object must have been destroyed by then.
template <typename T>
class Slab {
 public:
  Slab() = default;
  Slab(const Slab&) = delete;
  Slab& operator=(const Slab&) = delete;
  ~Slab() {
    for (const Chunk& c : chunks_) FreeChunk(c.slots, c.size * sizeof(Slot), alignof(Slot), c.mapped);
  }

  T* New() {
    Slot* s = free_;
    if (s) {
      free_ = s->next_free;
    } else {
      if (next_ == end_) Grow();
      s = next_++;
    }
    return ::new (static_cast<void*>(s->bytes)) T();
  }
  void Delete(T* p) {
    p->~T();
    Slot* s = reinterpret_cast<Slot*>(p);
    s->next_free = free_;
    free_ = s;
  }

 private:
  // Slots start on a 128-byte boundary: this core fetches lines in
  // aligned pairs, and the first two lines of an object (what walks read)
  // then come as one pair instead of straddling two.
  static constexpr size_t kSlotAlign = alignof(T) > 128 ? alignof(T) : 128;
  union alignas(kSlotAlign) Slot {
    Slot* next_free;
    alignas(T) unsigned char bytes[sizeof(T)];
  };
  static_assert(sizeof(T) % 128 == 0, "a slot would not keep the next one on a 128-byte boundary");
  static constexpr size_t kFirstChunk = 8;
  static constexpr size_t kMaxChunk = std::max(kFirstChunk, kHugeChunkBytes / sizeof(Slot));
  struct Chunk {
    Slot* slots;
    size_t size;
    bool mapped;
  };
  void Grow() {
    // Recorded before it is allocated, so that neither step can leak it.
    Chunk& c = chunks_.emplace_back(Chunk{nullptr, 0, false});
    c.slots = static_cast<Slot*>(AllocateChunk(chunk_size_ * sizeof(Slot), alignof(Slot), &c.mapped));
    c.size = chunk_size_;
    next_ = c.slots;
    end_ = next_ + chunk_size_;
    chunk_size_ = std::min(chunk_size_ * 2, kMaxChunk);
  }
  std::vector<Chunk> chunks_;
  Slot* next_ = nullptr;  // the next never-used slot of the newest chunk
  Slot* end_ = nullptr;
  Slot* free_ = nullptr;  // slots of destroyed objects
  size_t chunk_size_ = kFirstChunk;
};

}  // namespace ir_internal

// One use of a value: input `index` of `user`, or, when `user` is null,
// output `index` of graph `graph`.
struct Use {
  Node* user = nullptr;
  int index = 0;
  Graph* graph = nullptr;
};

class alignas(64) Value {
 public:
  enum class Kind : uint8_t { kInput, kConstant, kNodeOutput };

  Kind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  const Type& type() const { return type_; }
  // Clears the types-current mark of the producer and the users.
  void set_type(Type t) {
    type_ = std::move(t);
    TypeOrDataChanged();
  }
  Graph* owner() const { return owner_; }

  Node* producer() const { return producer_; }
  int producer_index() const { return producer_index_; }
  bool is_input() const { return kind_ == Kind::kInput; }
  bool is_constant() const { return kind_ == Kind::kConstant; }
  // The data of a constant. A constant parsed from text whose bytes were
  // elided has a type but an undefined tensor.
  const Tensor& constant() const { return constant_; }
  void set_constant(Tensor t) { SetData(std::move(t)); }
  // A graph input's initial value: what a run that does not give the input
  // reads (a variable, such as a training step's parameter and optimizer
  // state, carried from step to step); undefined for an input that every
  // run must give. Its type is the input's.
  const Tensor& initial() const { return constant_; }
  void set_initial(Tensor t) { SetData(std::move(t)); }
  // Whether constant() (or initial()) is defined, answered from the value's
  // first line: walks that ask it of every operand do not load the tensor.
  bool has_data() const { return has_data_; }
  // The data of a constant that holds data; null for every other value (a
  // graph input, a node output, a constant whose bytes were elided). What
  // folding, simplification and kernel selection mean by "a known constant".
  const Tensor* constant_data() const { return kind_ == Kind::kConstant && has_data_ ? &constant_ : nullptr; }

  absl::Span<const Use> uses() const { return uses_; }
  bool has_uses() const { return !uses_.empty(); }
  // Redirects every use (node inputs and graph outputs) to `other`.
  void ReplaceAllUsesWith(Value* other);

 private:
  friend class Graph;
  friend class Node;
  friend class ScratchMarks;
  // What walks over values read comes first (a slot is line-aligned).
  // The first line holds all of it but the type: the producer, the kind,
  // the constant's place, the uses and the mark, so that walks asking who
  // produces or reads a value, whether it is a constant and whether it is
  // marked (dead-code elimination, CSE, the folder's refinement marks, the
  // walks over constants) read one line of each. The type fills the second
  // line (its shape) and spills into the third (a sequence's element).
  Node* producer_ = nullptr;
  int producer_index_ = 0;
  Kind kind_ = Kind::kInput;
  bool has_data_ = false;  // constant_.defined()
  // Where a constant sits in its owner's array of constants
  // (Graph::constants_); UINT32_MAX for other values.
  uint32_t constant_pos_ = UINT32_MAX;
  // Most values have one use: it is stored in the value itself.
  absl::InlinedVector<Use, 1> uses_;
  // The stamp of the last ScratchMarks that marked this value.
  mutable uint64_t mark_ = 0;
  Type type_;
  // Neighbours in the owner's list of values (creation order).
  Value* prev_ = nullptr;
  Value* next_ = nullptr;
  Graph* owner_ = nullptr;
  // The owner's name table refers to it: it changes only through
  // Graph::RenameValue, which keeps the table in step.
  std::string name_;
  Tensor constant_;  // a constant's data, or an input's initial value
  // Uses are added and removed in O(1): each user records where its use sits
  // in uses_ (Node::use_slots_, Graph::output_use_slots_).
  void AddUse(const Use& u);
  void RemoveUse(const Use& u);
  static uint32_t& UseSlot(const Use& u);
  void SetData(Tensor t) {
    constant_ = std::move(t);
    has_data_ = constant_.defined();
    TypeOrDataChanged();
  }
  inline void TypeOrDataChanged();
};

class alignas(128) Node {
 public:
  const std::string& op() const { return *op_; }
  const std::string& domain() const { return *domain_; }
  // "Conv", or "com.microsoft.FusedMatMul" for another domain.
  std::string QualifiedOp() const;
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  Graph* owner() const { return owner_; }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  // Null for an omitted optional input.
  Value* input(int i) const { return i < num_inputs() ? inputs_[i] : nullptr; }
  Value* output(int i) const { return outputs_[i]; }
  absl::Span<Value* const> inputs() const { return inputs_; }
  absl::Span<Value* const> outputs() const { return outputs_; }
  void SetInput(int i, Value* v);
  void AddInput(Value* v);
  void RemoveTrailingInputs(int new_count);

  // Attributes, sorted by name: one contiguous block per node (nodes have
  // a handful), searched without building a key.
  using Attrs = std::vector<std::pair<std::string, Attribute>>;
  const Attrs& attrs() const { return attrs_; }
  bool has_attr(absl::string_view name) const { return attr(name) != nullptr; }
  const Attribute* attr(absl::string_view name) const;
  void SetAttr(std::string name, Attribute a);
  void RemoveAttr(absl::string_view name);
  int64_t GetInt(absl::string_view name, int64_t dflt) const;
  float GetFloat(absl::string_view name, float dflt) const;
  std::string GetString(absl::string_view name, absl::string_view dflt) const;
  std::vector<int64_t> GetInts(absl::string_view name, std::vector<int64_t> dflt = {}) const;
  std::vector<float> GetFloats(absl::string_view name, std::vector<float> dflt = {}) const;
  // Subgraphs held by attributes, in attribute-name order.
  std::vector<Graph*> subgraphs() const;
  // False when no attribute of this node was ever given a graph (it holds
  // no subgraph): a cheaper test than subgraphs().empty().
  bool may_hold_graphs() const { return holds_graphs_; }

  // Neighbours in the owner's node list (null at its ends): a walk that
  // erases the node it stands on reads next() first.
  Node* next() const { return next_; }
  Node* prev() const { return prev_; }

  // Whether the output types are what shape inference last made them and
  // nothing inference reads has changed since: shape inference marks a
  // node after inferring it (MarkTypesCurrent), and setting an input, an
  // attribute, the type or data of an input, or the type of an output
  // clears the mark. A node holding graphs is never marked.
  bool types_current() const { return types_current_; }
  void MarkTypesCurrent() { types_current_ = !holds_graphs_; }

 private:
  friend class Graph;
  friend class Value;
  friend class ScratchMarks;
  // What walks over nodes read comes first: the first two cache lines (one
  // 128-byte pair, see Slab) hold the links, the op, whether it may hold
  // graphs, the mark, the results, the operands and where each operand's
  // use sits, so that a walk, and unlinking a node's uses when it is erased
  // or rewired, reads no other line of it.
  // Neighbours in the owner's node list (execution order).
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
  // Interned (the ops are few): one word instead of a string.
  const std::string* op_ = nullptr;
  // Whether an attribute was ever given graphs (subgraphs() is empty if not).
  bool holds_graphs_ = false;
  bool types_current_ = false;
  // Where this node sits in the owner's walk order (Graph::order_);
  // UINT32_MAX when it is not in it.
  uint32_t order_pos_ = UINT32_MAX;
  // The stamp of the last ScratchMarks that marked this node.
  mutable uint64_t mark_ = 0;
  // Operands and results are stored in the node itself up to the counts
  // nearly every op has, so a walk reads no other heap block for them.
  absl::InlinedVector<Value*, 2> outputs_;
  absl::InlinedVector<Value*, 3> inputs_;
  // use_slots_[i]: where this node's use of inputs_[i] sits in its uses().
  absl::InlinedVector<uint32_t, 4> use_slots_;
  // Interned: the domains are few, and most nodes have the empty one.
  const std::string* domain_ = nullptr;
  Graph* owner_ = nullptr;
  Attrs attrs_;
  std::string name_;
};

// The lines walks read of a value or node (see their fields).
static_assert(sizeof(Value) == 256 && alignof(Value) == 64);
static_assert(sizeof(Node) == 256 && alignof(Node) == 128);

void Value::TypeOrDataChanged() {
  if (producer_) producer_->types_current_ = false;
  for (const Use& u : uses_)
    if (u.user) u.user->types_current_ = false;
}

// constant_data() of `v`, or null for a null `v` (an omitted optional input).
inline const Tensor* ConstantData(const Value* v) { return v ? v->constant_data() : nullptr; }

// Asks for the first two lines of `p` (what walks read of a node or value).
[[gnu::always_inline]] inline void PrefetchLines(const void* p) {
  __builtin_prefetch(p);
  __builtin_prefetch(static_cast<const char*>(p) + 64);
}
// Asks for the values `n` reads and writes.
[[gnu::always_inline]] inline void PrefetchOperands(const Node* n) {
  for (const Value* v : n->inputs())
    if (v) PrefetchLines(v);
  for (const Value* v : n->outputs()) PrefetchLines(v);
}

class Graph {
 public:
  explicit Graph(std::string name = "main", Graph* parent = nullptr);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  // The graph enclosing this one (for subgraphs), and the node holding it.
  Graph* parent() const { return parent_; }
  void set_parent(Graph* p);

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* AddInput(std::string name, Type type);
  Value* AddConstant(std::string name, Tensor data);
  // Constant whose type is known but whose bytes are not (elided in text).
  Value* AddElidedConstant(std::string name, Type type);
  void AddOutput(Value* v);
  void SetOutput(int i, Value* v);
  void ClearOutputs();
  void RemoveInput(int i);  // the input must have no uses

  // Creates a node at the end (or before `before`) with `num_outputs` fresh
  // output values named from `output_names` (generated when empty).
  Node* AddNode(absl::string_view op, absl::Span<Value* const> inputs,
                std::vector<std::string> output_names, absl::string_view domain = "",
                Node* before = nullptr);
  Node* AddNode(absl::string_view op, absl::Span<Value* const> inputs, int num_outputs,
                absl::string_view domain = "", Node* before = nullptr);
  // Erases a node whose outputs have no uses.
  void EraseNode(Node* n);
  // Erases `n`, keeping each output i for which data[i] is defined as a
  // constant holding data[i]: the same value, so its name and uses stay (it
  // moves to the end of the constants). The other outputs must have no uses.
  void EraseNodeKeepingConstants(Node* n, absl::Span<const Tensor> data);
  // Erases a constant or input-less value with no uses.
  void EraseValue(Value* v);
  // Moves `n` to just before `before` (or to the end).
  void MoveNode(Node* n, Node* before);

  // The nodes in order. Erasing the node a loop stands on invalidates the
  // loop; iterate over NodeList() to erase.
  class NodeRange {
   public:
    struct Iter {
      Node* n;
      Node* operator*() const { return n; }
      const Graph* g;
      Iter& operator++() {
        n = n->next_;
        if (n) g->PrefetchAhead(n->next_);
        return *this;
      }
      bool operator!=(const Iter& o) const { return n != o.n; }
      bool operator==(const Iter& o) const { return n == o.n; }
    };
    explicit NodeRange(const Graph* g) : g_(g) {}
    Iter begin() const { return {g_->first_node_, g_}; }
    Iter end() const { return {nullptr, g_}; }
   private:
    const Graph* g_;
  };
  NodeRange nodes() const { return NodeRange(this); }
  Node* first_node() const { return first_node_; }
  Node* last_node() const { return last_node_; }
  // Whether a node with op `op` (in any domain) may be in this graph or a
  // graph nested in it: false means there is none, so a pass that looks
  // only at such nodes has nothing to do. Answered from a count of the
  // nodes of each op that every graph keeps, without walking the nodes.
  bool NestMayHoldOp(absl::string_view op) const;
  // False when no node of this graph was ever given a graph attribute: no
  // node holds a nested graph, and walks looking for them can be skipped.
  bool may_hold_graphs() const { return !nested_holders_.empty(); }
  // Called by a walk over the node list with the node it will visit next
  // (null at the end): asks for the nodes a few places further on and for
  // the operands and results of the nearer ones, while the walk works on
  // the current node. A walk over a list waits on each node's load before
  // it knows the next one; on a graph larger than the caches that is a
  // memory latency per node, and one per value it reads. The walk order
  // (order_) knows the nodes ahead without loading the ones between.
  [[gnu::always_inline]] void PrefetchAhead(const Node* next) const {
    if (!next) return;
    size_t p = next->order_pos_;
    if (p >= order_.size()) {
      if (const Node* after = next->next_) PrefetchLines(after);
      PrefetchOperands(next);
      return;
    }
    if (const Node* far = OrderAt(p + kPrefetchNodes, 1)) PrefetchLines(far);
    if (const Node* near = OrderAt(p + kPrefetchOperands, 1)) PrefetchOperands(near);
  }
  // The same for a walk from the last node to the first.
  [[gnu::always_inline]] void PrefetchBehind(const Node* prev) const {
    if (!prev) return;
    size_t p = prev->order_pos_;
    if (p >= order_.size()) {
      if (const Node* before = prev->prev_) PrefetchLines(before);
      PrefetchOperands(prev);
      return;
    }
    if (const Node* far = OrderAt(p - kPrefetchNodes, -1)) PrefetchLines(far);
    if (const Node* near = OrderAt(p - kPrefetchOperands, -1)) PrefetchOperands(near);
  }
  // Whether the walk order holds only nodes of this graph's list, each at
  // the position it records and in list order (a check for tests: walks
  // read the order only to prefetch).
  bool WalkOrderIsConsistent() const;
  // The node at walk-order position p, or past a hole the next one in
  // direction `step` (a few at most); null off either end.
  [[gnu::always_inline]] const Node* OrderAt(size_t p, int step) const {
    for (int k = 0; k < 3 && p < order_.size(); ++k, p += step)
      if (const Node* n = order_[p]) return n;
    return nullptr;
  }
  // Snapshot of the node list, safe to iterate while erasing.
  std::vector<Node*> NodeList() const;
  size_t num_nodes() const { return num_nodes_; }
  // Every constant, in creation order.
  std::vector<Value*> Constants() const;
  // The first constant (null when none), and the one after constant `c` of
  // this graph (creation order; null after the last), asking for the lines
  // of a few constants further on: a walk that erases the constant it
  // stands on reads the next one first.
  Value* first_constant() const { return ConstantFrom(constants_begin_); }
  Value* NextConstant(const Value* c) const { return ConstantFrom(size_t{c->constant_pos_} + 1); }
  size_t num_constants() const { return constants_.size() - constant_holes_; }
  // Every value owned by this graph, in creation order.
  std::vector<Value*> Values() const;

  // Names are unique across a graph and the graphs nested in it: a name is
  // in use in `g` when a value of g, of a graph enclosing g, or of a graph
  // nested in g (at any depth) holds it.
  bool NameInUse(absl::string_view name) const;
  // Whether a value anywhere in the nest of the root graph (enclosing,
  // nested and sibling graphs included) holds `name`.
  bool NameInRootNest(absl::string_view name) const;
  // A fresh "HINT.N" held by no value anywhere in the nest of the root graph.
  std::string UniqueName(absl::string_view hint);
  // Gives `v`, a value of this graph, the name `name`, which no value in the
  // nest of the root graph may hold (UniqueName gives one).
  void RenameValue(Value* v, std::string name);
  // Looks a value up by name here and in enclosing graphs.
  Value* Lookup(absl::string_view name) const;

  // Deep copy. Values of enclosing graphs used by the copy stay as they are.
  std::unique_ptr<Graph> Clone(Graph* parent = nullptr) const;

 private:
  friend class Value;
  friend class Node;
  Value* NewValue(std::string name, Value::Kind kind);
  void DestroyValue(Value* v);
  void LinkConstant(Value* v);
  void UnlinkConstant(Value* v);
  void CompactConstants();
  // The first constant at position `i` or after it.
  [[gnu::always_inline]] Value* ConstantFrom(size_t i) const {
    while (i < constants_.size() && !constants_[i]) ++i;
    if (i >= constants_.size()) return nullptr;
    // The lines of a value that walks over constants read: the first (the
    // uses and the mark), and the tensor's.
    if (i + kPrefetchNodes < constants_.size())
      if (const Value* ahead = constants_[i + kPrefetchNodes]) {
        __builtin_prefetch(ahead);
        __builtin_prefetch(&ahead->constant_);
      }
    return constants_[i];
  }
  void LinkNode(Node* n, Node* before);
  void UnlinkNode(Node* n);
  // Walk order upkeep (order_).
  void PlaceInOrder(Node* n, Node* before);
  void DropFromOrder(Node* n);
  void RebuildOrder();
  void CompactOrder();
  Graph* Root();
  void DropExternalUses();
  // Whether this graph or a graph nested in it holds a value named `name`.
  bool NameInNest(absl::string_view name) const;
  // Whether `pred` holds for a graph nested directly in this one (held by
  // an attribute of one of its nodes).
  bool AnyNestedGraph(absl::FunctionRef<bool(const Graph&)> pred) const;
  // Raises suffix_bound_ here and in every enclosing graph to at least
  // `bound`.
  void RaiseSuffixBound(uint64_t bound);

  std::string name_;
  Graph* parent_ = nullptr;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  // output_use_slots_[i]: where the use of outputs_[i] sits in its uses().
  std::vector<uint32_t> output_use_slots_;
  // Nodes and values live in slabs of this graph and are linked into lists
  // through their prev_/next_ pointers: nodes in execution order, values in
  // creation order.
  ir_internal::Slab<Node> node_slab_;
  ir_internal::Slab<Value> value_slab_;
  Node* first_node_ = nullptr;
  Node* last_node_ = nullptr;
  size_t num_nodes_ = 0;
  // The walk order: the nodes in list order as an array, which walks read
  // only to prefetch (PrefetchAhead), so it may be out of step with the
  // list without harm. order_[n->order_pos_] == n for a node in it; an
  // erased node leaves a hole (null), closed up once the holes outnumber
  // half the nodes; a node linked in the middle of the list takes the hole
  // just before its successor when there is one, or else stays out of the
  // array until it is rebuilt from the list (once an eighth of the nodes
  // are out). Appending keeps it exact, so a graph built in order and then
  // only erased from never rebuilds it.
  static constexpr size_t kPrefetchNodes = 8;
  static constexpr size_t kPrefetchOperands = 4;
  std::vector<Node*> order_;
  size_t order_holes_ = 0;
  size_t order_missing_ = 0;
  Value* first_value_ = nullptr;
  Value* last_value_ = nullptr;
  // The constants in creation order (a constant is only ever appended):
  // an erased one leaves a hole (null), closed up once the holes outnumber
  // half the constants; constants_begin_ is at or before the first that is
  // not a hole. An array rather than a list, so that a walk over the
  // constants knows the ones ahead of it without loading those between.
  std::vector<Value*> constants_;
  size_t constants_begin_ = 0;
  size_t constant_holes_ = 0;
  // Nodes of this graph that were given a graph attribute (a superset of
  // those holding subgraphs now), so that name lookups can search nested
  // graphs without walking every node.
  absl::flat_hash_set<const Node*> nested_holders_;
  // How many nodes of this graph have each op (any domain); an op whose
  // last node goes is dropped.
  absl::flat_hash_map<std::string, uint32_t> op_counts_;
  // The name index, built on the first look-up by name: keys are the
  // values' own names (Value::name_, which changes only through RenameValue
  // and lives as long as the value), and a value's entry is erased before it
  // is. While it exists every value created, renamed or destroyed updates
  // it; once the updates since the last look-up outnumber half its entries
  // (a pass creating and erasing many values while nothing asks for names)
  // it is dropped, and the next look-up builds it again from the value
  // list. Rebuilding costs no more than the updates it saved, so each
  // operation stays O(1) amortized, and passes that never look names up
  // do no hashing for them.
  mutable absl::flat_hash_map<absl::string_view, Value*> by_name_;
  mutable bool names_indexed_ = false;
  mutable size_t index_updates_ = 0;
  size_t num_values_ = 0;
  // The index, built if it is not there (look-ups call it).
  const absl::flat_hash_map<absl::string_view, Value*>& NameIndex() const;
  void IndexName(Value* v);
  void UnindexName(Value* v);
  void NoteIndexUpdate();
  uint64_t next_name_ = 0;
  // Every name held in this graph or a graph nested in it that ends in "."
  // and decimal digits ends in a number below this bound (a bound only:
  // erasing a value does not lower it). UniqueName's counter at or past the
  // root's bound makes a fresh name without searching the nest.
  uint64_t suffix_bound_ = 0;
};

// A set of nodes and values kept as a stamp in each object instead of a
// table: Insert and Contains touch only the object itself, so a walk that
// marks every node of a large graph does no hashing and no random probes. A
// new ScratchMarks is empty without clearing anything (it takes a stamp that
// no object holds yet). Each object holds one stamp: while a ScratchMarks is
// in use, no other one may mark the same objects, and two threads may not
// mark objects of one graph nest at once.
class ScratchMarks {
 public:
  ScratchMarks();
  ScratchMarks(const ScratchMarks&) = delete;
  ScratchMarks& operator=(const ScratchMarks&) = delete;

  bool Contains(const Node* n) const { return n->mark_ == stamp_; }
  bool Contains(const Value* v) const { return v->mark_ == stamp_; }
  // True when the object was not in the set yet.
  bool Insert(const Node* n) { return Stamp(n->mark_); }
  bool Insert(const Value* v) { return Stamp(v->mark_); }

 private:
  bool Stamp(uint64_t& mark) const {
    if (mark == stamp_) return false;
    mark = stamp_;
    return true;
  }
  uint64_t stamp_;
};

// The top-level graph and its ONNX metadata.
struct Model {
  int64_t ir_version = 8;
  std::string producer_name;
  std::string producer_version;
  // Operator set versions by domain ("" is the default ONNX domain).
  std::map<std::string, int64_t> opsets;
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();

  int64_t OpsetFor(absl::string_view domain) const;
  Model Clone() const;
};

}  // namespace kiln
