//===- graph.cc - The kiln graph IR: Graph, Node, Value -------------------===//
#include "graph/ir/graph.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <limits>

#ifdef __linux__
#include <sys/mman.h>
#endif

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "graph/ir/interned.h"

namespace kiln {

//===----------------------------------------------------------------------===//
// Slab chunks
//===----------------------------------------------------------------------===//

namespace ir_internal {
namespace {

std::atomic<size_t> g_mapped_chunk_bytes{0};

}  // namespace

void* AllocateChunk(size_t bytes, size_t align, bool* mapped) {
  *mapped = false;
#ifdef __linux__
  if (bytes % kHugeChunkBytes == 0) {
    // Map one huge page more than asked and unmap the ends, leaving a
    // mapping that starts on a huge-page boundary.
    const size_t span = bytes + kHugeChunkBytes;
    void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw != MAP_FAILED) {
      const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
      const uintptr_t start = (begin + kHugeChunkBytes - 1) & ~(uintptr_t{kHugeChunkBytes} - 1);
      if (start > begin) munmap(raw, start - begin);
      if (const size_t tail = begin + span - (start + bytes); tail > 0)
        munmap(reinterpret_cast<void*>(start + bytes), tail);
      void* p = reinterpret_cast<void*>(start);
      // Only advice: where the system has no huge pages to give, the chunk
      // is ordinary memory.
      madvise(p, bytes, MADV_HUGEPAGE);
      g_mapped_chunk_bytes.fetch_add(bytes, std::memory_order_relaxed);
      *mapped = true;
      return p;
    }
    // No address space for the mapping: the heap may still serve it.
  }
#endif
  return ::operator new(bytes, std::align_val_t{align});
}

void FreeChunk(void* p, size_t bytes, size_t align, bool mapped) noexcept {
#ifdef __linux__
  if (mapped) {
    munmap(p, bytes);
    g_mapped_chunk_bytes.fetch_sub(bytes, std::memory_order_relaxed);
    return;
  }
#endif
  ::operator delete(p, std::align_val_t{align});
}

size_t MappedChunkBytes() { return g_mapped_chunk_bytes.load(std::memory_order_relaxed); }

}  // namespace ir_internal

//===----------------------------------------------------------------------===//
// Value
//===----------------------------------------------------------------------===//

namespace {

bool SameUse(const Use& a, const Use& b) { return a.user == b.user && a.index == b.index && a.graph == b.graph; }

}  // namespace

// Where the user of `u` records the position of `u` in its value's uses().
uint32_t& Value::UseSlot(const Use& u) {
  return u.user ? u.user->use_slots_[u.index] : u.graph->output_use_slots_[u.index];
}

void Value::AddUse(const Use& u) {
  UseSlot(u) = static_cast<uint32_t>(uses_.size());
  uses_.push_back(u);
}

void Value::RemoveUse(const Use& u) {
  size_t i = UseSlot(u);
  if (i >= uses_.size() || !SameUse(uses_[i], u)) {
    // Not where the slot says (never expected): fall back to a search.
    assert(false && "a use's recorded slot is stale");
    for (i = 0; i < uses_.size() && !SameUse(uses_[i], u); ++i) {
    }
    if (i == uses_.size()) {
      assert(false && "removing a use that is not recorded");
      return;
    }
  }
  if (i + 1 != uses_.size()) {
    uses_[i] = uses_.back();
    UseSlot(uses_[i]) = static_cast<uint32_t>(i);
  }
  uses_.pop_back();
}

void Value::ReplaceAllUsesWith(Value* other) {
  assert(other != this && "replacing a value with itself");
  absl::InlinedVector<Use, 1> uses = std::move(uses_);
  uses_.clear();
  // Grow `other`'s uses once (geometrically), not once per use moved.
  size_t needed = other->uses_.size() + uses.size();
  if (needed > other->uses_.capacity()) other->uses_.reserve(std::max(needed, 2 * other->uses_.capacity()));
  for (const Use& u : uses) {
    if (u.user) {
      u.user->inputs_[u.index] = other;  // Value is a friend of Node
      u.user->types_current_ = false;
    } else {
      u.graph->outputs_[u.index] = other;
    }
    other->AddUse(u);
  }
}

//===----------------------------------------------------------------------===//
// Node
//===----------------------------------------------------------------------===//

std::string Node::QualifiedOp() const {
  return domain_->empty() ? *op_ : absl::StrCat(*domain_, ".", *op_);
}

void Node::SetInput(int i, Value* v) {
  if (i >= num_inputs()) {
    inputs_.resize(i + 1, nullptr);
    use_slots_.resize(i + 1, 0);
  }
  if (inputs_[i]) inputs_[i]->RemoveUse({this, i, nullptr});
  inputs_[i] = v;
  if (v) v->AddUse({this, i, nullptr});
  types_current_ = false;
}

void Node::AddInput(Value* v) { SetInput(num_inputs(), v); }

void Node::RemoveTrailingInputs(int new_count) {
  for (int i = num_inputs() - 1; i >= new_count; --i) {
    if (inputs_[i]) inputs_[i]->RemoveUse({this, i, nullptr});
  }
  if (new_count < num_inputs()) {
    inputs_.resize(new_count);
    use_slots_.resize(new_count);
  }
  types_current_ = false;
}

namespace {

// The first attribute whose name is not before `name`.
template <typename It>
It AttrAt(It first, It last, absl::string_view name) {
  return std::lower_bound(first, last, name,
                          [](const auto& entry, absl::string_view n) { return absl::string_view(entry.first) < n; });
}

}  // namespace

void Node::SetAttr(std::string name, Attribute a) {
  types_current_ = false;
  if (!a.graphs().empty()) {
    holds_graphs_ = true;
    if (owner_) {
      owner_->nested_holders_.insert(this);
      for (const auto& g : a.graphs())
        if (g) owner_->RaiseSuffixBound(g->suffix_bound_);
    }
  }
  auto it = AttrAt(attrs_.begin(), attrs_.end(), name);
  if (it != attrs_.end() && it->first == name) {
    it->second = std::move(a);
  } else {
    attrs_.emplace(it, std::move(name), std::move(a));
  }
}

const Attribute* Node::attr(absl::string_view name) const {
  auto it = AttrAt(attrs_.begin(), attrs_.end(), name);
  return it != attrs_.end() && it->first == name ? &it->second : nullptr;
}

void Node::RemoveAttr(absl::string_view name) {
  types_current_ = false;
  auto it = AttrAt(attrs_.begin(), attrs_.end(), name);
  if (it != attrs_.end() && it->first == name) attrs_.erase(it);
}

int64_t Node::GetInt(absl::string_view name, int64_t dflt) const {
  const Attribute* a = attr(name);
  return a && a->kind() == AttrKind::kInt ? a->i() : dflt;
}

float Node::GetFloat(absl::string_view name, float dflt) const {
  const Attribute* a = attr(name);
  if (!a) return dflt;
  if (a->kind() == AttrKind::kFloat) return a->f();
  if (a->kind() == AttrKind::kInt) return static_cast<float>(a->i());
  return dflt;
}

std::string Node::GetString(absl::string_view name, absl::string_view dflt) const {
  const Attribute* a = attr(name);
  return a && a->kind() == AttrKind::kString ? a->s() : std::string(dflt);
}

std::vector<int64_t> Node::GetInts(absl::string_view name, std::vector<int64_t> dflt) const {
  const Attribute* a = attr(name);
  if (!a) return dflt;
  if (a->kind() == AttrKind::kInts) return a->ints();
  if (a->kind() == AttrKind::kInt) return {a->i()};
  return dflt;
}

std::vector<float> Node::GetFloats(absl::string_view name, std::vector<float> dflt) const {
  const Attribute* a = attr(name);
  if (!a) return dflt;
  if (a->kind() == AttrKind::kFloats) return a->floats();
  if (a->kind() == AttrKind::kFloat) return {a->f()};
  return dflt;
}

std::vector<Graph*> Node::subgraphs() const {
  std::vector<Graph*> out;
  if (!holds_graphs_) return out;
  for (const auto& [name, a] : attrs_)
    for (const auto& g : a.graphs()) out.push_back(g.get());
  return out;
}

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

Graph::Graph(std::string name, Graph* parent) : name_(std::move(name)), parent_(parent) {}

Graph::~Graph() {
  DropExternalUses();
  order_.clear();  // no upkeep while everything goes
  constants_.clear();
  // Last to first: a node's nested graphs go with it.
  while (last_node_) {
    Node* n = last_node_;
    UnlinkNode(n);
    node_slab_.Delete(n);
  }
  while (last_value_) DestroyValue(last_value_);
}

// Removes every use that a node or output of this graph, or of a graph nested
// in it, holds on a value owned elsewhere, while all of them are alive; the
// nest can then be destroyed in any order, even when it does not verify.
void Graph::DropExternalUses() {
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (outputs_[i] && outputs_[i]->owner_ != this) outputs_[i]->RemoveUse({nullptr, static_cast<int>(i), this});
  outputs_.clear();
  output_use_slots_.clear();
  for (Node* n = first_node_; n; n = n->next_) {
    for (int i = 0; i < n->num_inputs(); ++i) {
      if (n->inputs_[i] && n->inputs_[i]->owner_ != this) {
        n->inputs_[i]->RemoveUse({n, i, nullptr});
        n->inputs_[i] = nullptr;
      }
    }
    for (Graph* sub : n->subgraphs()) sub->DropExternalUses();
  }
  for (Node* n = first_node_; n; n = n->next_) {
    for (Value*& in : n->inputs_) in = nullptr;
    for (Value* o : n->outputs_) o->uses_.clear();
  }
}

namespace {

// One past the number that `name` ends in after its last '.' (0 when it does
// not end in one); the largest bound for a number too long to compare.
uint64_t SuffixBound(absl::string_view name) {
  size_t dot = name.rfind('.');
  if (dot == absl::string_view::npos || dot + 1 == name.size()) return 0;
  absl::string_view digits = name.substr(dot + 1);
  if (digits.size() > 18) return std::numeric_limits<uint64_t>::max();
  uint64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n + 1;
}

}  // namespace

void Graph::RaiseSuffixBound(uint64_t bound) {
  // Each graph's bound covers its nested graphs', so the walk up stops at
  // the first graph that already covers `bound`.
  for (Graph* g = this; g && g->suffix_bound_ < bound; g = g->parent_) g->suffix_bound_ = bound;
}

void Graph::set_parent(Graph* p) {
  parent_ = p;
  if (p) p->RaiseSuffixBound(suffix_bound_);
}

Graph* Graph::Root() {
  Graph* g = this;
  while (g->parent_) g = g->parent_;
  return g;
}

Value* Graph::NewValue(std::string name, Value::Kind kind) {
  if (name.empty()) name = UniqueName("v");
  Value* v = value_slab_.New();
  v->kind_ = kind;
  v->name_ = std::move(name);
  v->owner_ = this;
  v->prev_ = last_value_;
  (last_value_ ? last_value_->next_ : first_value_) = v;
  last_value_ = v;
  if (kind == Value::Kind::kConstant) LinkConstant(v);
  ++num_values_;
  IndexName(v);
  RaiseSuffixBound(SuffixBound(v->name_));
  return v;
}

void Graph::RenameValue(Value* v, std::string name) {
  UnindexName(v);
  v->name_ = std::move(name);
  IndexName(v);
  RaiseSuffixBound(SuffixBound(v->name_));
}

const absl::flat_hash_map<absl::string_view, Value*>& Graph::NameIndex() const {
  index_updates_ = 0;
  if (!names_indexed_) {
    by_name_.reserve(num_values_);
    // Creation order: of two values holding one name (which the verifier
    // refuses), the later one is found, as when the index was kept all along.
    for (Value* v = first_value_; v; v = v->next_) by_name_[v->name_] = v;
    names_indexed_ = true;
  }
  return by_name_;
}

void Graph::IndexName(Value* v) {
  if (!names_indexed_) return;
  by_name_[v->name_] = v;
  NoteIndexUpdate();
}

void Graph::UnindexName(Value* v) {
  if (!names_indexed_) return;
  by_name_.erase(v->name_);
  NoteIndexUpdate();
}

void Graph::NoteIndexUpdate() {
  if (++index_updates_ <= by_name_.size() / 2 + 64) return;
  by_name_ = {};
  names_indexed_ = false;
  index_updates_ = 0;
}

// Closes up the holes (nulls) of an array of objects that record their
// positions in it (`pos`), keeping their order; `line` is the offset of the
// line holding `pos`, asked for a few objects ahead.
template <typename T>
static void CloseUpHoles(std::vector<T*>& v, uint32_t T::*pos, size_t line) {
  constexpr size_t kAhead = 8;
  size_t out = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    T* x = v[i];
    if (!x) continue;
    if (i + kAhead < v.size() && v[i + kAhead]) __builtin_prefetch(reinterpret_cast<const char*>(v[i + kAhead]) + line);
    x->*pos = static_cast<uint32_t>(out);
    v[out++] = x;
  }
  v.resize(out);
}

// Appends `v` to the array of constants.
void Graph::LinkConstant(Value* v) {
  if (constants_.size() >= UINT32_MAX) CompactConstants();
  v->constant_pos_ = static_cast<uint32_t>(constants_.size());
  constants_.push_back(v);
}

void Graph::UnlinkConstant(Value* v) {
  size_t p = v->constant_pos_;
  v->constant_pos_ = UINT32_MAX;
  if (p >= constants_.size()) return;  // the graph is going
  constants_[p] = nullptr;
  ++constant_holes_;
  if (p == constants_begin_)
    while (constants_begin_ < constants_.size() && !constants_[constants_begin_]) ++constants_begin_;
  if (constant_holes_ > num_constants() / 2 + 64) CompactConstants();
}

void Graph::CompactConstants() {
  CloseUpHoles(constants_, &Value::constant_pos_, 0);  // the first line
  constants_begin_ = constant_holes_ = 0;
}

// Unlinks `v` from the value list and destroys it (its name stays in the
// index: callers unindex it first).
void Graph::DestroyValue(Value* v) {
  --num_values_;
  (v->prev_ ? v->prev_->next_ : first_value_) = v->next_;
  (v->next_ ? v->next_->prev_ : last_value_) = v->prev_;
  if (v->kind_ == Value::Kind::kConstant) {
    UnlinkConstant(v);
  }
  value_slab_.Delete(v);
}

// Links `n` into the node list before `before` (at the end when null).
void Graph::LinkNode(Node* n, Node* before) {
  Node* after = before ? before->prev_ : last_node_;
  n->prev_ = after;
  n->next_ = before;
  (after ? after->next_ : first_node_) = n;
  (before ? before->prev_ : last_node_) = n;
  ++num_nodes_;
  PlaceInOrder(n, before);
}

void Graph::UnlinkNode(Node* n) {
  DropFromOrder(n);
  (n->prev_ ? n->prev_->next_ : first_node_) = n->next_;
  (n->next_ ? n->next_->prev_ : last_node_) = n->prev_;
  n->prev_ = n->next_ = nullptr;
  --num_nodes_;
}

void Graph::PlaceInOrder(Node* n, Node* before) {
  if (!before) {
    if (order_.size() >= UINT32_MAX) return;  // too many for a position: left out
    n->order_pos_ = static_cast<uint32_t>(order_.size());
    order_.push_back(n);
    return;
  }
  size_t p = before->order_pos_;
  if (p < order_.size() && p > 0 && !order_[p - 1]) {
    order_[p - 1] = n;
    n->order_pos_ = static_cast<uint32_t>(p - 1);
    --order_holes_;
    return;
  }
  if (++order_missing_ > num_nodes_ / 8 + 16) RebuildOrder();
}

void Graph::DropFromOrder(Node* n) {
  size_t p = n->order_pos_;
  n->order_pos_ = UINT32_MAX;
  if (p >= order_.size()) {
    if (order_missing_ > 0) --order_missing_;
    return;
  }
  order_[p] = nullptr;
  if (++order_holes_ > num_nodes_ / 2 + 64) CompactOrder();
}

void Graph::RebuildOrder() {
  order_.clear();
  order_holes_ = order_missing_ = 0;
  for (Node* n = first_node_; n; n = n->next_) {
    n->order_pos_ = UINT32_MAX;
    PlaceInOrder(n, nullptr);
  }
}

bool Graph::WalkOrderIsConsistent() const {
  size_t placed = 0, holes = 0, last = 0;
  bool first = true;
  for (const Node* n = first_node_; n; n = n->next_) {
    size_t p = n->order_pos_;
    if (p == UINT32_MAX) continue;
    if (p >= order_.size() || order_[p] != n || (!first && p <= last)) return false;
    first = false;
    last = p;
    ++placed;
  }
  for (const Node* n : order_) holes += n == nullptr;
  return placed + holes == order_.size() && holes == order_holes_ && num_nodes_ - placed == order_missing_;
}

void Graph::CompactOrder() {
  CloseUpHoles(order_, &Node::order_pos_, 0);
  order_holes_ = 0;
}

Value* Graph::AddInput(std::string name, Type type) {
  Value* v = NewValue(std::move(name), Value::Kind::kInput);
  v->type_ = std::move(type);
  inputs_.push_back(v);
  return v;
}

namespace {

// Gives constant `v` its data and the type of that data.
void HoldData(Value* v, Tensor data) {
  v->set_type(Type::Of(data));
  v->set_constant(std::move(data));
}

}  // namespace

Value* Graph::AddConstant(std::string name, Tensor data) {
  Value* v = NewValue(std::move(name), Value::Kind::kConstant);
  HoldData(v, std::move(data));
  return v;
}

Value* Graph::AddElidedConstant(std::string name, Type type) {
  Value* v = NewValue(std::move(name), Value::Kind::kConstant);
  v->type_ = std::move(type);
  return v;
}

void Graph::AddOutput(Value* v) {
  outputs_.push_back(v);
  output_use_slots_.push_back(0);
  v->AddUse({nullptr, static_cast<int>(outputs_.size() - 1), this});
}

void Graph::SetOutput(int i, Value* v) {
  if (outputs_[i]) outputs_[i]->RemoveUse({nullptr, i, this});
  outputs_[i] = v;
  v->AddUse({nullptr, i, this});
}

void Graph::ClearOutputs() {
  for (size_t i = 0; i < outputs_.size(); ++i)
    outputs_[i]->RemoveUse({nullptr, static_cast<int>(i), this});
  outputs_.clear();
  output_use_slots_.clear();
}

void Graph::RemoveInput(int i) {
  Value* v = inputs_[i];
  assert(!v->has_uses() && "removing a graph input that is still used");
  inputs_.erase(inputs_.begin() + i);
  UnindexName(v);
  DestroyValue(v);
}

Node* Graph::AddNode(absl::string_view op, absl::Span<Value* const> inputs,
                     std::vector<std::string> output_names, absl::string_view domain,
                     Node* before) {
  assert((!before || before->owner_ == this) && "inserting before a node of another graph");
  Node* raw = node_slab_.New();
  raw->op_ = Intern(op).text;
  raw->domain_ = Intern(domain).text;
  raw->owner_ = this;
  ++op_counts_[*raw->op_];
  LinkNode(raw, before);
  for (Value* v : inputs) raw->AddInput(v);
  for (size_t i = 0; i < output_names.size(); ++i) {
    Value* out = NewValue(std::move(output_names[i]), Value::Kind::kNodeOutput);
    out->producer_ = raw;
    out->producer_index_ = static_cast<int>(i);
    raw->outputs_.push_back(out);
  }
  return raw;
}

Node* Graph::AddNode(absl::string_view op, absl::Span<Value* const> inputs, int num_outputs,
                     absl::string_view domain, Node* before) {
  return AddNode(op, inputs, std::vector<std::string>(num_outputs), domain, before);
}

void Graph::EraseNode(Node* n) { EraseNodeKeepingConstants(n, {}); }

void Graph::EraseNodeKeepingConstants(Node* n, absl::Span<const Tensor> data) {
  assert(n->owner_ == this && "erasing a node of another graph");
  for (size_t i = 0; i < n->outputs_.size(); ++i) {
    Value* o = n->outputs_[i];
    if (i < data.size() && data[i].defined()) {
      o->kind_ = Value::Kind::kConstant;
      o->producer_ = nullptr;
      o->producer_index_ = 0;
      HoldData(o, data[i]);
      LinkConstant(o);
      continue;
    }
    assert(!o->has_uses() && "erasing a node whose outputs are still used");
    UnindexName(o);
    DestroyValue(o);
  }
  n->RemoveTrailingInputs(0);
  if (!nested_holders_.empty()) nested_holders_.erase(n);
  if (auto it = op_counts_.find(*n->op_); it != op_counts_.end() && --it->second == 0) op_counts_.erase(it);
  UnlinkNode(n);
  node_slab_.Delete(n);
}

void Graph::EraseValue(Value* v) {
  assert(!v->has_uses() && v->kind_ == Value::Kind::kConstant && "erasing a used or non-constant value");
  UnindexName(v);
  DestroyValue(v);
}

void Graph::MoveNode(Node* n, Node* before) {
  if (n == before) return;
  UnlinkNode(n);
  LinkNode(n, before);
}

std::vector<Node*> Graph::NodeList() const {
  std::vector<Node*> out;
  out.reserve(num_nodes_);
  for (Node* n = first_node_; n; n = n->next_) out.push_back(n);
  return out;
}

std::vector<Value*> Graph::Constants() const {
  std::vector<Value*> out;
  out.reserve(num_constants());
  for (Value* v : constants_)
    if (v) out.push_back(v);
  return out;
}

std::vector<Value*> Graph::Values() const {
  std::vector<Value*> out;
  out.reserve(num_values_);
  for (Value* v = first_value_; v; v = v->next_) out.push_back(v);
  return out;
}

bool Graph::AnyNestedGraph(absl::FunctionRef<bool(const Graph&)> pred) const {
  // Through the graph attributes themselves: UniqueName asks NameInNest for
  // every name it makes, so no list of subgraphs is built per holder.
  for (const Node* n : nested_holders_)
    for (const auto& [attr, a] : n->attrs()) {
      if (a.kind() != AttrKind::kGraph && a.kind() != AttrKind::kGraphs) continue;
      for (const auto& s : a.graphs())
        if (s && pred(*s)) return true;
    }
  return false;
}

bool Graph::NameInNest(absl::string_view name) const {
  return NameIndex().contains(name) || AnyNestedGraph([&](const Graph& s) { return s.NameInNest(name); });
}

bool Graph::NestMayHoldOp(absl::string_view op) const {
  return op_counts_.contains(op) || AnyNestedGraph([&](const Graph& s) { return s.NestMayHoldOp(op); });
}

bool Graph::NameInUse(absl::string_view name) const {
  return Lookup(name) != nullptr || NameInNest(name);
}

bool Graph::NameInRootNest(absl::string_view name) const {
  const Graph* root = this;
  while (root->parent_) root = root->parent_;
  return Lookup(name) != nullptr || root->NameInNest(name);
}

std::string Graph::UniqueName(absl::string_view hint) {
  Graph* root = Root();
  for (;;) {
    // No name in the nest ends in a number at or past the root's bound: a
    // counter there needs no search (the common case once generated names
    // outnumber the model's own).
    bool fresh = root->next_name_ >= root->suffix_bound_;
    std::string name = absl::StrCat(hint, ".", root->next_name_++);
    if (fresh || (!NameInUse(name) && !root->NameInNest(name))) return name;
  }
}

Value* Graph::Lookup(absl::string_view name) const {
  for (const Graph* g = this; g; g = g->parent_) {
    const auto& index = g->NameIndex();
    auto it = index.find(name);
    if (it != index.end()) return it->second;
  }
  return nullptr;
}

std::unique_ptr<Graph> Graph::Clone(Graph* parent) const {
  auto g = std::make_unique<Graph>(name_, parent);
  absl::flat_hash_map<const Value*, Value*> map;
  auto remap = [&](Value* v) -> Value* {
    if (!v) return nullptr;
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    // A value of an enclosing graph: bind by name in the new enclosing graph,
    // which holds a copy of it when the whole nest is being cloned.
    if (parent)
      if (Value* outer = parent->Lookup(v->name_)) return outer;
    return v;
  };
  // Recreate values in creation order so names and order are preserved.
  map.reserve(num_values_);
  for (const Value* v : constants_) {
    if (!v) continue;
    Value* c = g->NewValue(v->name_, Value::Kind::kConstant);
    c->type_ = v->type_;
    c->SetData(v->constant_);
    map[v] = c;
  }
  for (Value* in : inputs_) {
    map[in] = g->AddInput(in->name_, in->type_);
    map[in]->SetData(in->constant_);
  }
  for (const Node* n = first_node_; n; n = n->next_) {
    std::vector<Value*> ins;
    for (Value* v : n->inputs_) ins.push_back(remap(v));
    std::vector<std::string> names;
    for (Value* o : n->outputs_) names.push_back(o->name_);
    Node* c = g->AddNode(*n->op_, std::move(ins), std::move(names), *n->domain_);
    c->name_ = n->name_;
    for (const auto& [k, a] : n->attrs_) c->SetAttr(k, a.Clone(g.get()));
    for (size_t i = 0; i < n->outputs_.size(); ++i) {
      c->outputs_[i]->type_ = n->outputs_[i]->type_;
      map[n->outputs_[i]] = c->outputs_[i];
    }
  }
  for (Value* o : outputs_) g->AddOutput(remap(o));
  g->next_name_ = next_name_;
  return g;
}

//===----------------------------------------------------------------------===//
// ScratchMarks
//===----------------------------------------------------------------------===//

namespace {

// Stamps handed out so far; 0 is the stamp of objects never marked. 64 bits
// never wrap around in practice, so a stale stamp is never taken for a
// fresh one.
std::atomic<uint64_t> g_last_stamp{0};

}  // namespace

ScratchMarks::ScratchMarks() : stamp_(g_last_stamp.fetch_add(1, std::memory_order_relaxed) + 1) {}

//===----------------------------------------------------------------------===//
// Model
//===----------------------------------------------------------------------===//

int64_t Model::OpsetFor(absl::string_view domain) const {
  std::string d(domain);
  if (d == "ai.onnx") d = "";
  auto it = opsets.find(d);
  return it == opsets.end() ? 0 : it->second;
}

Model Model::Clone() const {
  Model m;
  m.ir_version = ir_version;
  m.producer_name = producer_name;
  m.producer_version = producer_version;
  m.opsets = opsets;
  m.graph = graph->Clone();
  return m;
}

}  // namespace kiln
