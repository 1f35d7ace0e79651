//===- outline.cc - Fusion groups become kiln.Fused nodes -----------------===//
//
// Four steps, so that no value is erased while something still reads it and
// every outer name is free before a node takes it:
//   1. per group, copy the members into a body and add a placeholder node
//      that takes over every use of the members' results from outside;
//   2. erase the members, and duplicated originals no one reads any more,
//      last first, and constants copied into bodies that no one else reads;
//   3. per group, the final kiln.Fused node: the placeholder's used outputs,
//      under the names the members' results had;
//   4. put the nodes in the partition's order.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/fusion/outline.h"

#include <algorithm>
#include <cassert>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "graph/passes/patterns/composite_expanders.h"
#include "graph/passes/fusion/cost_model.h"

namespace kiln::fusion {
namespace {

struct Pending {
  Node* placeholder = nullptr;
  std::unique_ptr<Graph> body;
  std::vector<std::string> names;  // of the members' results the group yields
  std::vector<Value*> outputs;     // the same results inside the body
  std::vector<Value*> inputs;      // what the group reads from outside
  std::vector<Value*> leaving;     // the members' results read outside
  absl::flat_hash_set<const Node*> copies;  // body nodes that copy duplicated members
  std::string node_name, anchor;
  GroupKind kind = GroupKind::kElementwise;
};

// Removes body nodes, constants and inputs nothing reads (after outputs were
// dropped); returns which inputs stay.
std::vector<bool> TrimBody(Graph& body) {
  std::vector<Node*> nodes = body.NodeList();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    bool used = false;
    for (const Value* o : (*it)->outputs()) used |= o->has_uses();
    if (!used) body.EraseNode(*it);
  }
  for (Value* c : body.Constants())
    if (!c->has_uses()) body.EraseValue(c);
  std::vector<bool> keep;
  for (const Value* in : body.inputs()) keep.push_back(in->has_uses());
  for (int i = static_cast<int>(keep.size()) - 1; i >= 0; --i)
    if (!keep[i]) body.RemoveInput(i);
  return keep;
}

int64_t BytesSaved(const Graph& body, const absl::flat_hash_set<const Node*>& copies) {
  absl::flat_hash_set<const Value*> outputs(body.outputs().begin(), body.outputs().end());
  double saved = 0;
  for (const Node* n : body.nodes()) {
    for (const Value* v : n->outputs()) {
      double b = StaticBytes(v);
      int reads = 0;
      for (const Use& u : v->uses()) reads += u.user != nullptr;
      saved += reads * b;
      if (!copies.contains(n) && !outputs.contains(v)) saved += b;
    }
  }
  return static_cast<int64_t>(saved);
}

}  // namespace

OutlineReport OutlineGroups(Graph& g, const Partition& partition, NameTable& names, int* body_count) {
  OutlineReport report;
  if (partition.groups.empty()) return report;
  absl::flat_hash_map<const Node*, int> owner;
  for (size_t k = 0; k < partition.groups.size(); ++k)
    for (const Member& m : partition.groups[k].members)
      if (!m.duplicate) owner[m.node] = static_cast<int>(k);

  // Values some group reads from outside itself: a group's copy of another
  // group's member may read that group's results, which no outer node shows.
  absl::flat_hash_set<const Value*> read_by_groups;
  for (const Group& group : partition.groups) {
    absl::flat_hash_set<const Node*> members;
    for (const Member& m : group.members) members.insert(m.node);
    for (const Member& m : group.members)
      for (const Value* v : m.node->inputs())
        if (v && !(v->producer() && members.contains(v->producer()))) read_by_groups.insert(v);
  }

  // 1. Bodies, then placeholders.
  std::vector<Value*> inlined;  // constants of g copied into bodies
  std::vector<Pending> pending(partition.groups.size());
  for (size_t k = 0; k < partition.groups.size(); ++k) {
    const Group& group = partition.groups[k];
    Pending& p = pending[k];
    p.kind = group.kind;
    p.node_name = group.anchor->name();
    p.anchor = group.anchor->QualifiedOp();
    p.body = std::make_unique<Graph>(absl::StrCat("fused_", (*body_count)++), &g);
    Graph& body = *p.body;
    auto leaves_group = [&](const Value* v) {
      if (read_by_groups.contains(v)) return true;
      for (const Use& u : v->uses()) {
        if (!u.user) return true;
        auto it = owner.find(u.user);
        if (it == owner.end() || it->second != static_cast<int>(k)) return true;
      }
      return false;
    };
    absl::flat_hash_map<const Value*, Value*> map;
    std::vector<Value*>& inputs = p.inputs;
    std::vector<Value*>& leaving = p.leaving;
    for (const Member& m : group.members) {
      Node* n = m.node;
      std::vector<Value*> ins;
      for (Value* v : n->inputs()) {
        if (!v) {
          ins.push_back(nullptr);
          continue;
        }
        auto it = map.find(v);
        if (it != map.end()) {
          ins.push_back(it->second);
          continue;
        }
        Value* b;
        if (v->constant_data() && v->constant().numel() <= kInlineConstantElements) {
          b = body.AddConstant(names.Fresh(body, v->name()), v->constant());
          if (v->owner() == &g) inlined.push_back(v);
        } else {
          b = body.AddInput(names.Fresh(body, v->name()), v->type());
          inputs.push_back(v);
        }
        map[v] = b;
        ins.push_back(b);
      }
      std::vector<std::string> out_names;
      std::vector<bool> leaves;
      for (Value* o : n->outputs()) {
        bool l = !m.duplicate && leaves_group(o);
        leaves.push_back(l);
        out_names.push_back(m.duplicate || l ? names.Fresh(body, o->name()) : o->name());
      }
      Node* c = body.AddNode(n->op(), std::move(ins), std::move(out_names), n->domain());
      c->set_name(n->name());
      for (const auto& [name, a] : n->attrs()) c->SetAttr(name, a.Clone(&body));
      for (int i = 0; i < n->num_outputs(); ++i) {
        c->output(i)->set_type(n->output(i)->type());
        map[n->output(i)] = c->output(i);
        if (leaves[i]) {
          leaving.push_back(n->output(i));
          p.names.push_back(n->output(i)->name());
          p.outputs.push_back(c->output(i));
        }
      }
      if (m.duplicate) {
        p.copies.insert(c);
        ++report.nodes_duplicated;
      } else {
        ++report.nodes_fused;
      }
    }
  }
  // Bodies are copied from the untouched graph first: a group holding a copy
  // of another group's member reads the copy, not the other group's result.
  for (Pending& p : pending) {
    p.placeholder = g.AddNode("Fused", p.inputs, static_cast<int>(p.leaving.size()), "kiln");
    for (size_t i = 0; i < p.leaving.size(); ++i) p.placeholder->output(i)->set_type(p.leaving[i]->type());
  }
  for (Pending& p : pending)
    for (size_t i = 0; i < p.leaving.size(); ++i) p.leaving[i]->ReplaceAllUsesWith(p.placeholder->output(i));

  // 2. Members and unread originals (owned and duplicated), last first:
  // marked, then collected by a walk from the graph's last node.
  std::vector<Node*> originals;
  {
    ScratchMarks marked;
    for (const Group& group : partition.groups)
      for (const Member& m : group.members) marked.Insert(m.node);
    for (Node* n = g.last_node(); n; n = n->prev())
      if (marked.Contains(n)) originals.push_back(n);
  }
  absl::flat_hash_set<const Node*> erased;
  for (Node* n : originals) {
    bool used = false;
    for (const Value* o : n->outputs()) used |= o->has_uses();
    if (owner.contains(n)) {
      // Every outside use went to the placeholder; inside uses are by later members.
      assert(!used && "a fused member is still read");
    } else if (used) {
      continue;
    } else {
      ++report.duplicates_erased;
    }
    erased.insert(n);
    g.EraseNode(n);
  }

  // Constants every reader of which now holds a copy.
  absl::flat_hash_set<const Value*> seen;
  for (Value* c : inlined)
    if (seen.insert(c).second && !c->has_uses()) g.EraseValue(c);

  // 3. The final nodes.
  std::vector<Node*> fused(pending.size(), nullptr);
  for (size_t k = 0; k < pending.size(); ++k) {
    Pending& p = pending[k];
    Node* ph = p.placeholder;
    std::vector<int> used;
    for (int i = 0; i < ph->num_outputs(); ++i)
      if (ph->output(i)->has_uses()) used.push_back(i);
    if (used.empty()) {
      g.EraseNode(ph);
      continue;
    }
    std::vector<std::string> out_names;
    p.body->ClearOutputs();
    for (int i : used) {
      out_names.push_back(p.names[i]);
      p.body->AddOutput(p.outputs[i]);
    }
    std::vector<bool> keep = TrimBody(*p.body);
    std::vector<Value*> ins;
    for (int i = 0; i < ph->num_inputs(); ++i)
      if (keep[i]) ins.push_back(ph->input(i));
    Node* f = g.AddNode("Fused", std::move(ins), std::move(out_names), "kiln");
    f->set_name(p.node_name);
    for (size_t j = 0; j < used.size(); ++j) {
      f->output(j)->set_type(ph->output(used[j])->type());
      ph->output(used[j])->ReplaceAllUsesWith(f->output(j));
    }
    g.EraseNode(ph);
    ++report.groups[static_cast<int>(p.kind)];
    report.bytes_saved += BytesSaved(*p.body, p.copies);
    f->SetAttr("kind", Attribute::String(std::string(GroupKindName(p.kind))));
    f->SetAttr("anchor", Attribute::String(p.anchor));
    f->SetAttr("body", Attribute::GraphValue(std::move(p.body)));
    fused[k] = f;
  }

  // 4. Order.
  for (const OrderItem& item : partition.order) {
    Node* n = item.node ? (erased.contains(item.node) ? nullptr : item.node) : fused[item.group];
    if (n) g.MoveNode(n, nullptr);
  }
  return report;
}

void InlineFused(Graph& g, Node* n) {
  const Graph& body = *n->attr("body")->g();
  absl::flat_hash_map<const Value*, Value*> map;
  for (size_t i = 0; i < body.inputs().size(); ++i) map[body.inputs()[i]] = n->input(static_cast<int>(i));
  auto lookup = [&](Value* v) -> Value* {
    if (!v) return nullptr;
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    if (v->is_constant() && v->owner() == &body) {
      Value* c = g.AddConstant(g.UniqueName(v->name()), v->constant());
      c->set_type(v->type());
      map[v] = c;
      return c;
    }
    return v;  // a value of an enclosing graph
  };
  // Each copy's results take the names they had before the group was
  // formed: a result the group yields the node's output name (held by the
  // node until it goes), the rest their body names where those are free.
  absl::flat_hash_map<const Value*, std::string> wanted;
  for (size_t i = 0; i < body.outputs().size() && i < static_cast<size_t>(n->num_outputs()); ++i)
    wanted.try_emplace(body.outputs()[i], n->output(static_cast<int>(i))->name());
  auto want = [&](const Value* v) {
    auto it = wanted.find(v);
    return it == wanted.end() ? v->name() : it->second;
  };
  auto name_for = [&](const Value* v) {
    const std::string w = want(v);
    return g.NameInRootNest(w) ? g.UniqueName(w) : w;
  };
  auto copy = [&](const Node& from, std::vector<Value*> ins, std::vector<std::string> names, Node* before) {
    Node* c = g.AddNode(from.op(), ins, std::move(names), from.domain(), before);
    c->set_name(from.name());
    for (const auto& [k, a] : from.attrs()) c->SetAttr(k, a.Clone(&g));
    for (int i = 0; i < from.num_outputs(); ++i) c->output(i)->set_type(from.output(i)->type());
    return c;
  };
  // Each copy, with the names its results want (the body goes with `n`).
  std::vector<std::pair<Node*, std::vector<std::string>>> copies;
  for (Node* bn : body.nodes()) {
    std::vector<Value*> ins;
    for (Value* v : bn->inputs()) ins.push_back(lookup(v));
    std::vector<std::string> names, wants;
    for (Value* o : bn->outputs()) {
      names.push_back(name_for(o));
      wants.push_back(want(o));
    }
    Node* c = copy(*bn, std::move(ins), std::move(names), n);
    for (int i = 0; i < bn->num_outputs(); ++i) map[bn->output(i)] = c->output(i);
    copies.push_back({c, std::move(wants)});
  }
  for (int i = 0; i < n->num_outputs(); ++i) {
    Value* repl = lookup(body.outputs()[i]);
    if (n->output(i)->has_uses()) n->output(i)->ReplaceAllUsesWith(repl);
  }
  g.EraseNode(n);
  // The names the node held are free now: copies that wanted them are made
  // again under them.
  for (const auto& [c, wants] : copies) {
    bool renamed = false;
    std::vector<std::string> names;
    for (int i = 0; i < c->num_outputs(); ++i) {
      const std::string& w = wants[i];
      renamed |= c->output(i)->name() != w && !g.NameInRootNest(w);
      names.push_back(c->output(i)->name() != w && !g.NameInRootNest(w) ? w : g.UniqueName(w));
    }
    if (!renamed) continue;
    Node* d = copy(*c, std::vector<Value*>(c->inputs().begin(), c->inputs().end()), std::move(names), c);
    for (int i = 0; i < c->num_outputs(); ++i)
      if (c->output(i)->has_uses()) c->output(i)->ReplaceAllUsesWith(d->output(i));
    g.EraseNode(c);
  }
}

bool SplitBackKilnNodes(Graph& g, const std::function<bool(Node*)>& keep) {
  bool changed = false;
  for (Node* n : g.NodeList()) {
    if (n->domain() != "kiln" || keep(n)) continue;
    if (n->op() == "Fused") {
      InlineFused(g, n);
      changed = true;
      continue;
    }
    for (const patterns::CompositeExpander& e : patterns::CompositeExpanders())
      if (n->op() == e.op && e.apply(n)) {
        changed = true;
        break;
      }
  }
  return changed;
}

}  // namespace kiln::fusion
