//===- partition.cc - Fusion groups of one graph --------------------------===//
#include "graph/passes/fusion/partition.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "graph/ops/matmul.h"
#include "graph/passes/fusion/cost_model.h"

namespace kiln::fusion {

absl::string_view GroupKindName(GroupKind k) {
  switch (k) {
    case GroupKind::kElementwise: return "elementwise";
    case GroupKind::kReduction: return "reduction";
    case GroupKind::kMatMulEpilogue: return "matmul-epilogue";
    case GroupKind::kConvEpilogue: return "conv-epilogue";
  }
  return "elementwise";
}

namespace {

bool Contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

void SortUnique(std::vector<int>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

class Partitioner {
 public:
  Partitioner(const Graph& g, const PartitionOptions& options) : g_(g), options_(options) {}

  Partition Run() {
    Index();
    for (int i = 0; i < n_; ++i)
      if (info_[i].owner < 0 && (info_[i].role == Role::kMatMulAnchor || info_[i].role == Role::kConvAnchor))
        GrowEpilogue(i);
    for (int i = n_ - 1; i >= 0; --i) {
      Info& in = info_[i];
      if (in.owner >= 0 || (in.role != Role::kElementwise && in.role != Role::kTerminal)) continue;
      if (!Live(i)) {
        // Every user reads a copy now: the original goes once the groups exist.
        if (!in.dup_in.empty()) in.dead = true;
        continue;
      }
      GrowBackward(i);
    }
    Partition p;
    p.order = Order(&p.dissolved);
    // Renumber the groups that survived, in formation order.
    std::vector<int> renumber(groups_.size(), -1);
    for (size_t k = 0; k < groups_.size(); ++k) {
      if (groups_[k].dissolved) continue;
      renumber[k] = static_cast<int>(p.groups.size());
      Group out;
      out.kind = groups_[k].kind;
      out.anchor = nodes_[groups_[k].anchor];
      std::vector<int> all = groups_[k].members;
      SortUnique(all);
      for (int m : all) out.members.push_back({nodes_[m], info_[m].owner != static_cast<int>(k)});
      p.groups.push_back(std::move(out));
    }
    for (OrderItem& item : p.order)
      if (item.group >= 0) item.group = renumber[item.group];
    return p;
  }

 private:
  struct Info {
    Role role = Role::kNone;
    Shape shape;             // iteration shape
    int owner = -1;          // group that computes the node in place of the original
    std::vector<int> dup_in; // groups holding a copy
    bool dead = false;       // every user reads a copy
    bool read_by_group = false;
    bool graph_output = false;
  };
  struct GroupState {
    GroupKind kind = GroupKind::kElementwise;
    int anchor = -1;
    std::vector<int> members;  // owned and duplicated
    int min_pos = 0, max_pos = 0;
    bool dissolved = false;
  };

  //===--- Indexing ---------------------------------------------------===//

  void Index() {
    nodes_ = g_.NodeList();
    n_ = static_cast<int>(nodes_.size());
    index_.reserve(n_);
    for (int i = 0; i < n_; ++i) index_[nodes_[i]] = i;
    for (int i = 0; i < n_; ++i)
      for (const Graph* s : nodes_[i]->subgraphs()) MapHolder(*s, i);
    info_.resize(n_);
    users_.resize(n_);
    preds_.resize(n_);
    stamp_.assign(n_, -1);
    visit_.assign(n_, 0);
    for (int i = 0; i < n_; ++i) {
      Node* node = nodes_[i];
      Info& in = info_[i];
      in.role = RoleOf(*node);
      if ((in.role == Role::kElementwise || in.role == Role::kTerminal) && options_.memory_member &&
          !options_.memory_member(*node))
        in.role = Role::kNone;
      if (in.role != Role::kNone) {
        in.shape = IterationShape(*node, in.role);
        if (!IsIterationShape(in.shape)) in.role = Role::kNone;
      }
      for (const Value* o : node->outputs()) {
        for (const Use& u : o->uses()) {
          int user = LiftUse(u);
          if (user == kGraphOutput) in.graph_output = true;
          else if (user >= 0) users_[i].push_back(user);
        }
      }
      SortUnique(users_[i]);
      for (int u : users_[i]) preds_[u].push_back(i);
    }
    // preds_ were appended in increasing producer order: already sorted.
    for (auto& p : preds_) p.erase(std::unique(p.begin(), p.end()), p.end());
  }

  void MapHolder(const Graph& s, int holder) {
    holder_[&s] = holder;
    for (const Node* n : s.nodes())
      for (const Graph* t : n->subgraphs()) MapHolder(*t, holder);
  }

  static constexpr int kGraphOutput = -2;
  static constexpr int kElsewhere = -1;

  // The node of g_ a use belongs to (the holder for uses in nested graphs).
  int LiftUse(const Use& u) const {
    const Graph* owner = u.user ? u.user->owner() : u.graph;
    if (owner == &g_) {
      if (!u.user) return kGraphOutput;
      auto it = index_.find(u.user);
      return it == index_.end() ? kElsewhere : it->second;
    }
    auto it = holder_.find(owner);
    return it == holder_.end() ? kElsewhere : it->second;
  }

  // The node of g_ producing `v`, or -1.
  int ProducerIndex(const Value* v) const {
    if (!v || v->owner() != &g_ || !v->producer()) return -1;
    auto it = index_.find(v->producer());
    return it == index_.end() ? -1 : it->second;
  }

  bool InGroup(int node, int group) const {
    return info_[node].owner == group || Contains(info_[node].dup_in, group);
  }

  // Some user reads the original node (not a copy inside the user's group).
  bool Live(int i) const {
    const Info& in = info_[i];
    if (in.graph_output || in.read_by_group) return true;
    for (int u : users_[i]) {
      if (info_[u].dead) continue;
      if (info_[u].owner >= 0 && Contains(in.dup_in, info_[u].owner)) continue;
      return true;
    }
    return false;
  }

  //===--- Growing groups ---------------------------------------------===//

  int NewGroup(GroupKind kind, int seed) {
    GroupState gs;
    gs.kind = kind;
    gs.anchor = seed;
    gs.members = {seed};
    gs.min_pos = gs.max_pos = seed;
    groups_.push_back(std::move(gs));
    int id = static_cast<int>(groups_.size()) - 1;
    info_[seed].owner = id;
    return id;
  }

  void Own(int id, int node) {
    info_[node].owner = id;
    AddMember(id, node);
  }
  void Duplicate(int id, int node) {
    info_[node].dup_in.push_back(id);
    AddMember(id, node);
  }
  void AddMember(int id, int node) {
    GroupState& gs = groups_[id];
    gs.members.push_back(node);
    gs.min_pos = std::min(gs.min_pos, node);
    gs.max_pos = std::max(gs.max_pos, node);
  }

  // Keeps a group of two or more members; records what it reads from
  // outside. A smaller one is undone.
  void Finish(int id) {
    GroupState& gs = groups_[id];
    if (gs.members.size() < 2) {
      Undo(id);
      gs.dissolved = true;
      return;
    }
    for (int m : gs.members)
      for (int p : preds_[m])
        if (!InGroup(p, id)) info_[p].read_by_group = true;
  }

  void Undo(int id) {
    for (int m : groups_[id].members) {
      if (info_[m].owner == id) info_[m].owner = -1;
      auto& d = info_[m].dup_in;
      d.erase(std::remove(d.begin(), d.end(), id), d.end());
    }
  }

  // Phase 1: an anchor takes its elementwise consumers, first in node order.
  void GrowEpilogue(int a) {
    int id = NewGroup(info_[a].role == Role::kConvAnchor ? GroupKind::kConvEpilogue : GroupKind::kMatMulEpilogue, a);
    const Shape& shape = info_[a].shape;
    std::priority_queue<int, std::vector<int>, std::greater<int>> next;
    auto push_users = [&](int m) {
      for (int u : users_[m])
        if (stamp_[u] != id) {
          stamp_[u] = id;
          next.push(u);
        }
    };
    if (nodes_[a]->op() == "MatMul") TakeOperandTransposes(id, a);
    push_users(a);
    while (!next.empty() && static_cast<int>(groups_[id].members.size()) < options_.max_group_nodes) {
      int c = next.top();
      next.pop();
      const Info& ci = info_[c];
      if (ci.owner >= 0 || ci.role != Role::kElementwise || !(ci.shape == shape)) continue;
      if (!TargetTakes(id, c)) continue;
      // Every input from outside must not depend on the group.
      bool independent = true;
      for (int p : preds_[c])
        if (info_[p].owner != id && ReachesGroup(p, id)) {
          independent = false;
          break;
        }
      if (!independent) continue;
      Own(id, c);
      push_users(c);
    }
    Finish(id);
  }

  // A MatMul whose result is read takes, as a prologue, the Transposes its
  // operands are read through, last first, as long as their composition
  // keeps the operand a matrix view of their source (IsMatrixView: rows or
  // columns contiguous): the matrix unit reads the source in place. A
  // Transpose that others read too is copied into the group (it costs the
  // group nothing), and so is every one above it, so the choice does not
  // hang on users that later groups absorb.
  void TakeOperandTransposes(int id, int a) {
    if (users_[a].empty() && !info_[a].graph_output) return;
    const Node& mm = *nodes_[a];
    for (int i = 0; i < mm.num_inputs() && i < 2; ++i) {
      const Value* v = mm.input(i);
      if (!v || mm.input(1 - i) == v) continue;  // the same value as both operands
      std::vector<int64_t> view;                  // the operand as a permutation of v
      bool copy = false;
      for (int p = ProducerIndex(v); p >= 0 && info_[p].owner < 0; p = ProducerIndex(v)) {
        std::vector<int64_t> tp = TransposePerm(*nodes_[p]);
        std::vector<int64_t> total = view.empty() ? tp : ComposePerms(tp, view);
        if (tp.empty() || !IsMatrixView(total) || !TargetTakes(id, p)) break;
        copy |= users_[p].size() != 1 || info_[p].graph_output || v->uses().size() != 1;
        if (copy) Duplicate(id, p);
        else Own(id, p);
        view = std::move(total);
        v = nodes_[p]->input(0);
      }
    }
  }

  bool TargetTakes(int id, int candidate) const {
    if (!options_.matrix_member) return true;
    std::vector<const Node*> group;
    for (int m : groups_[id].members) group.push_back(nodes_[m]);
    return options_.matrix_member(group, *nodes_[candidate]);
  }

  // Phase 2: an unclaimed elementwise node or reduction takes its producers,
  // last first.
  void GrowBackward(int s) {
    const Info& si = info_[s];
    int id = NewGroup(si.role == Role::kTerminal ? GroupKind::kReduction : GroupKind::kElementwise, s);
    const Shape& shape = si.shape;
    absl::flat_hash_set<const Value*> reads;
    auto add_reads = [&](int m) {
      for (const Value* v : nodes_[m]->inputs())
        if (v) reads.insert(v);
    };
    std::priority_queue<int> next;
    auto push_preds = [&](int m) {
      for (int p : preds_[m])
        if (stamp_[p] != id) {
          stamp_[p] = id;
          next.push(p);
        }
    };
    add_reads(s);
    push_preds(s);
    while (!next.empty() && static_cast<int>(groups_[id].members.size()) < options_.max_group_nodes) {
      int p = next.top();
      next.pop();
      const Info& pi = info_[p];
      if (pi.owner >= 0 || pi.dead || !(pi.shape == shape)) continue;
      const bool normalization = pi.role == Role::kTerminal && groups_[id].kind == GroupKind::kElementwise &&
                                 KeepsShape(*nodes_[p]);
      if (pi.role != Role::kElementwise && !normalization) continue;
      std::vector<int> outside;
      bool others_recompute = !pi.graph_output;  // every other reader could take a copy too
      for (int u : users_[p]) {
        if (info_[u].owner == id || info_[u].dead) continue;
        outside.push_back(u);
        Role r = info_[u].role;
        if (r != Role::kElementwise && r != Role::kTerminal) others_recompute = false;
      }
      bool escapes = pi.graph_output || !outside.empty();
      if (normalization) {
        // The group's one row op, its elementwise members after it its epilogue.
        if (escapes && ReachedFrom(outside, id)) continue;
        Own(id, p);
        groups_[id].kind = GroupKind::kReduction;
      } else if (!escapes) {
        Own(id, p);
      } else if (IsCheapElementwise(*nodes_[p]) &&
                 RecomputeBeatsRoundTrip(*nodes_[p], NewInputBytes(p, reads), others_recompute)) {
        Duplicate(id, p);
      } else if (!ReachedFrom(outside, id)) {
        Own(id, p);
      } else {
        continue;
      }
      add_reads(p);
      push_preds(p);
    }
    Finish(id);
  }

  // A normalization whose one result has its input's shape (Softmax,
  // LayerNormalization with its statistics unused): elementwise consumers
  // of its rows may follow it in a group.
  static bool KeepsShape(const Node& n) {
    if (!n.input(0) || !n.output(0) || !(n.input(0)->type().shape() == n.output(0)->type().shape())) return false;
    for (int i = 1; i < n.num_outputs(); ++i)
      if (n.output(i) && (n.output(i)->has_uses())) return false;
    return true;
  }

  double NewInputBytes(int p, const absl::flat_hash_set<const Value*>& reads) const {
    double bytes = 0;
    absl::flat_hash_set<const Value*> seen;
    for (const Value* v : nodes_[p]->inputs())
      if (v && !reads.contains(v) && seen.insert(v).second) bytes += EstimatedBytes(v);
    return bytes;
  }

  //===--- Bounded searches -------------------------------------------===//

  // Whether a path leads from the group to node `p` (backwards from p over
  // nodes after the group's first member). Gives true when the search runs
  // out of budget.
  bool ReachesGroup(int p, int id) {
    const GroupState& gs = groups_[id];
    ++search_;
    std::vector<int> stack = {p};
    int visited = 0;
    while (!stack.empty()) {
      int x = stack.back();
      stack.pop_back();
      if (InGroup(x, id)) return true;
      if (x <= gs.min_pos || visit_[x] == search_) continue;
      visit_[x] = search_;
      if (++visited > options_.search_budget) return true;
      for (int q : preds_[x]) stack.push_back(q);
    }
    return false;
  }

  // Whether a path from any of `starts` (outside the group) enters the
  // group. Gives true when the search runs out of budget.
  bool ReachedFrom(const std::vector<int>& starts, int id) {
    const GroupState& gs = groups_[id];
    ++search_;
    std::vector<int> stack(starts.begin(), starts.end());
    int visited = 0;
    while (!stack.empty()) {
      int x = stack.back();
      stack.pop_back();
      if (x >= gs.max_pos || visit_[x] == search_) continue;
      visit_[x] = search_;
      if (++visited > options_.search_budget) return true;
      for (int u : users_[x]) {
        if (InGroup(u, id)) return true;
        stack.push_back(u);
      }
    }
    return false;
  }

  //===--- Ordering ---------------------------------------------------===//

  // A stable topological order of the contracted graph; dissolves groups
  // until there is one.
  std::vector<OrderItem> Order(int* dissolved) {
    for (;;) {
      std::vector<OrderItem> order;
      int cyclic = TryOrder(&order);
      if (cyclic < 0) return order;
      Undo(cyclic);
      groups_[cyclic].dissolved = true;
      ++*dissolved;
    }
  }

  // Fills `order` and returns -1, or returns the last-formed group left
  // unordered by a cycle.
  int TryOrder(std::vector<OrderItem>* order) {
    int num_groups = static_cast<int>(groups_.size());
    int total = n_ + num_groups;
    auto super = [&](int i) { return info_[i].owner >= 0 ? n_ + info_[i].owner : i; };
    std::vector<std::vector<int>> succ(total);
    std::vector<int> indegree(total, 0);
    std::vector<char> exists(total, 0);
    auto edge = [&](int from, int to) {
      if (from == to) return;
      succ[from].push_back(to);
      ++indegree[to];
    };
    for (int i = 0; i < n_; ++i) {
      int to = super(i);
      exists[to] = 1;
      for (int p : preds_[i]) {
        if (info_[i].owner >= 0 && InGroup(p, info_[i].owner)) continue;
        edge(super(p), to);
      }
    }
    // Copies read their inputs inside the group.
    for (int k = 0; k < num_groups; ++k) {
      if (groups_[k].dissolved) continue;
      for (int m : groups_[k].members) {
        if (info_[m].owner == k) continue;
        for (int p : preds_[m])
          if (!InGroup(p, k)) edge(super(p), n_ + k);
      }
    }
    auto key = [&](int s) { return s < n_ ? s : groups_[s - n_].max_pos; };
    using Entry = std::pair<int, int>;  // key, super node
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
    for (int s = 0; s < total; ++s)
      if (exists[s] && indegree[s] == 0) ready.push({key(s), s});
    int emitted = 0, present = 0;
    for (int s = 0; s < total; ++s) present += exists[s];
    while (!ready.empty()) {
      int s = ready.top().second;
      ready.pop();
      ++emitted;
      order->push_back(s < n_ ? OrderItem{nodes_[s], -1} : OrderItem{nullptr, s - n_});
      for (int t : succ[s])
        if (--indegree[t] == 0) ready.push({key(t), t});
    }
    if (emitted == present) return -1;
    for (int k = num_groups - 1; k >= 0; --k)
      if (exists[n_ + k] && indegree[n_ + k] > 0) return k;
    return -1;  // unreachable: a cycle holds a group (the input graph is acyclic)
  }

  const Graph& g_;
  const PartitionOptions& options_;
  std::vector<Node*> nodes_;
  int n_ = 0;
  absl::flat_hash_map<const Node*, int> index_;
  absl::flat_hash_map<const Graph*, int> holder_;
  std::vector<Info> info_;
  std::vector<std::vector<int>> users_;  // nodes of g_ reading a node's outputs (holders for nested reads)
  std::vector<std::vector<int>> preds_;  // the reverse
  std::vector<GroupState> groups_;
  std::vector<int> stamp_;
  std::vector<int> visit_;
  int search_ = 0;
};

}  // namespace

Partition PartitionGraph(const Graph& g, const PartitionOptions& options) {
  return Partitioner(g, options).Run();
}

}  // namespace kiln::fusion
