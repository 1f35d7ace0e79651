//===- verifier.cc - Structural and semantic checks of the IR -------------===//
#include "graph/verifier/verifier.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/ir/printer.h"
#include "graph/support/checked_math.h"

namespace kiln {
namespace {

// Whether a tensor of `type` has an element count and a byte size that fit
// 64 bits, taking its static dims (a zero among them does not excuse the
// others: no pass or target should multiply them and wrap).
bool SizeFits(const Type& type) {
  if (!type.is_tensor() || !type.shape().ranked()) return true;
  std::vector<int64_t> dims;
  for (const Dim& d : type.shape().dims())
    if (d.is_static()) dims.push_back(d.value());
  std::optional<int64_t> n = CheckedProduct(dims);
  return n && CheckedMul(*n, std::max<int64_t>(1, static_cast<int64_t>(DTypeSize(type.dtype()))));
}

std::string NodeLabel(const Node& n, int index) {
  std::string s = index >= 0 ? absl::StrCat("node ", index, " ") : std::string("node ");
  if (!n.name().empty()) {
    absl::StrAppend(&s, "'", n.name(), "' (", n.QualifiedOp(), ")");
  } else {
    absl::StrAppend(&s, "(", n.QualifiedOp(), ")");
    if (n.num_outputs() > 0 && n.output(0)) absl::StrAppend(&s, " ", PrintValueName(n.output(0)->name()));
  }
  return s;
}

// Declared and inferred types agree unless their kinds, dtypes, ranks or
// static dims differ.
bool TypesAgree(const Type& declared, const Type& inferred) {
  if (declared.is_none() || inferred.is_none()) return true;
  if (declared.kind() != inferred.kind()) return false;
  if (!declared.is_tensor()) return TypesAgree(declared.element(), inferred.element());
  if (declared.dtype() != DType::kUndefined && inferred.dtype() != DType::kUndefined &&
      declared.dtype() != inferred.dtype())
    return false;
  const Shape& a = declared.shape();
  const Shape& b = inferred.shape();
  if (!a.ranked() || !b.ranked()) return true;
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i)
    if (a[i].is_static() && b[i].is_static() && a[i].value() != b[i].value()) return false;
  return true;
}

class Verifier {
 public:
  Verifier(const VerifyOptions& options)
      : options_(options), registry_(options.registry ? *options.registry : OpRegistry::Global()) {}

  absl::Status Run(const Graph& g) {
    CollectLive(g);
    std::string path = g.name();
    if (g.parent()) {
      std::vector<const Graph*> chain;
      for (const Graph* p = g.parent(); p; p = p->parent()) chain.insert(chain.begin(), p);
      path.clear();
      for (const Graph* p : chain) absl::StrAppend(&path, p->name(), "/");
      absl::StrAppend(&path, g.name());
      // Values of the enclosing graphs visible to g.
      for (size_t k = 0; k < chain.size(); ++k) {
        const Graph* p = chain[k];
        const Graph* child = k + 1 < chain.size() ? chain[k + 1] : &g;
        for (const Value* v : p->inputs()) if (v) Define(v);
        for (const Value* v : p->Constants()) Define(v);
        bool found = false;
        for (const Node* n : p->nodes()) {
          for (const Graph* s : n->subgraphs()) found |= s == child;
          if (found) break;
          for (const Value* o : n->outputs()) if (o) Define(o);
        }
        if (!found) {
          Add(absl::StrCat("graph '", path, "': [scope] the graph is not held by any node of its parent graph '",
                           p->name(), "'"));
        }
      }
    }
    VerifyGraphRec(g, path);
    if (errors_.empty()) return absl::OkStatus();
    std::string msg = absl::StrJoin(errors_, "\n");
    if (truncated_) absl::StrAppend(&msg, "\n(more errors not shown)");
    return absl::InvalidArgumentError(msg);
  }

  void Add(std::string e) {
    if (static_cast<int>(errors_.size()) >= options_.max_errors) {
      truncated_ = true;
      return;
    }
    errors_.push_back(std::move(e));
  }

 private:
  void CollectLive(const Graph& g) {
    live_graphs_.insert(&g);
    for (const Node* n : g.nodes()) {
      live_nodes_.insert(n);
      for (const Graph* s : n->subgraphs())
        if (s) CollectLive(*s);
    }
  }

  void Define(const Value* v) {
    visible_.insert(v);
    visible_names_.emplace(v->name(), v);
  }
  void Undefine(const Value* v) {
    visible_.erase(v);
    auto it = visible_names_.find(v->name());
    if (it != visible_names_.end() && it->second == v) visible_names_.erase(it);
  }

  bool IsAncestor(const Graph* a, const Graph& g) const {
    for (const Graph* p = g.parent(); p; p = p->parent())
      if (p == a) return true;
    return false;
  }

  std::string GraphLabel(const Graph* g) const {
    if (!g) return "no graph";
    if (!live_graphs_.count(g) && !IsAncestor(g, *current_)) return "a graph outside the one verified";
    return absl::StrCat("graph '", g->name(), "'");
  }

  // Values of `g` used by `sub` or the graphs nested in it.
  void CollectCaptures(const Graph& sub, const Graph& g, std::vector<const Value*>* out) {
    for (const Node* n : sub.nodes()) {
      for (const Value* v : n->inputs())
        if (v && v->owner() == &g) out->push_back(v);
      for (const Graph* s : n->subgraphs())
        if (s) CollectCaptures(*s, g, out);
    }
    for (const Value* v : sub.outputs())
      if (v && v->owner() == &g) out->push_back(v);
  }

  // Returns true when the nodes of g form a cycle (and reports it).
  bool FindCycle(const Graph& g, const std::string& gl, const std::vector<const Node*>& nodes) {
    absl::flat_hash_map<const Node*, int> index;
    for (size_t i = 0; i < nodes.size(); ++i) index[nodes[i]] = static_cast<int>(i);
    std::vector<std::vector<int>> succ(nodes.size());
    for (size_t j = 0; j < nodes.size(); ++j) {
      std::vector<const Value*> used(nodes[j]->inputs().begin(), nodes[j]->inputs().end());
      for (const Graph* s : nodes[j]->subgraphs())
        if (s) CollectCaptures(*s, g, &used);
      for (const Value* v : used) {
        if (!v || v->owner() != &g || !v->producer()) continue;
        auto it = index.find(v->producer());
        if (it != index.end()) succ[it->second].push_back(static_cast<int>(j));
      }
    }
    // Iterative DFS; color 0 = new, 1 = on stack, 2 = done.
    std::vector<int> color(nodes.size(), 0), parent(nodes.size(), -1);
    for (size_t root = 0; root < nodes.size(); ++root) {
      if (color[root]) continue;
      std::vector<std::pair<int, size_t>> stack = {{static_cast<int>(root), 0}};
      color[root] = 1;
      while (!stack.empty()) {
        auto& [u, next] = stack.back();
        if (next < succ[u].size()) {
          int w = succ[u][next++];
          if (color[w] == 0) {
            color[w] = 1;
            parent[w] = u;
            stack.push_back({w, 0});
          } else if (color[w] == 1) {
            std::vector<int> cyc = {w};
            for (int x = u; x != w && x >= 0; x = parent[x]) cyc.push_back(x);
            std::reverse(cyc.begin() + 1, cyc.end());
            std::string path;
            for (int x : cyc) absl::StrAppend(&path, NodeLabel(*nodes[x], x), " -> ");
            absl::StrAppend(&path, NodeLabel(*nodes[w], w));
            Add(absl::StrCat(gl, ": ", NodeLabel(*nodes[w], w), ": [cycle] nodes form a cycle: ", path));
            return true;
          }
        } else {
          color[u] = 2;
          stack.pop_back();
        }
      }
    }
    return false;
  }

  // Checks a use of `v` (input `what` of node or graph output) against the
  // visible values; returns false after reporting.
  bool CheckVisible(const Value* v, const Graph& g, const std::string& where, const std::string& what,
                    const absl::flat_hash_set<const Value*>& owned, bool report_order) {
    if (visible_.count(v)) return true;
    if (owned.count(v)) {
      if (report_order)
        Add(absl::StrCat(where, ": [order] ", what, " ", PrintValueName(v->name()), " is used before it is defined"));
      return false;
    }
    if (IsAncestor(v->owner(), g)) {
      Add(absl::StrCat(where, ": [scope] ", what, " ", PrintValueName(v->name()), " of enclosing ",
                       GraphLabel(v->owner()), " is not defined before the node holding this graph"));
      return false;
    }
    Add(absl::StrCat(where, ": [scope] ", what, " ", PrintValueName(v->name()), " belongs to ",
                     GraphLabel(v->owner()), ", which does not enclose this graph"));
    return false;
  }

  void VerifyGraphRec(const Graph& g, const std::string& path) {
    const Graph* saved_current = current_;
    current_ = &g;
    std::string gl = absl::StrCat("graph '", path, "'");
    std::vector<const Node*> nodes;
    for (const Node* n : g.nodes()) nodes.push_back(n);
    absl::flat_hash_set<const Node*> node_set(nodes.begin(), nodes.end());
    std::vector<Value*> values = g.Values();
    absl::flat_hash_set<const Value*> owned(values.begin(), values.end());
    absl::flat_hash_set<const Value*> inputs;
    absl::flat_hash_set<std::string> names;

    // [ssa] ownership, names, producers.
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const Value* v = g.inputs()[i];
      if (!v) {
        Add(absl::StrCat(gl, ": [ssa] graph input ", i, " is null"));
        continue;
      }
      if (!owned.count(v) || v->kind() != Value::Kind::kInput)
        Add(absl::StrCat(gl, ": [ssa] graph input ", i, " ", PrintValueName(v->name()),
                         " is not an input value of this graph"));
      if (!inputs.insert(v).second)
        Add(absl::StrCat(gl, ": [ssa] graph input ", PrintValueName(v->name()), " is listed twice"));
      if (v->initial().defined() && !(Type::Of(v->initial()) == v->type()))
        Add(absl::StrCat(gl, ": [types] graph input ", PrintValueName(v->name()), " has type ",
                         PrintType(v->type()), " but an initial value of ", PrintType(Type::Of(v->initial()))));
    }
    for (const Value* v : values) {
      std::string vn = PrintValueName(v->name());
      if (v->owner() != &g) Add(absl::StrCat(gl, ": [ssa] value ", vn, " is held by this graph but owned by another"));
      if (v->name().empty()) Add(absl::StrCat(gl, ": [ssa] a value has an empty name"));
      else if (!names.insert(v->name()).second)
        Add(absl::StrCat(gl, ": [ssa] value name ", vn, " is defined more than once"));
      if (!SizeFits(v->type()))
        Add(absl::StrCat(gl, ": [types] value ", vn, " has type ", PrintType(v->type()),
                         ", whose size does not fit 64 bits"));
      switch (v->kind()) {
        case Value::Kind::kInput:
          if (!inputs.count(v)) Add(absl::StrCat(gl, ": [ssa] input value ", vn, " is not among the graph inputs"));
          break;
        case Value::Kind::kConstant: {
          const Tensor& t = v->constant();
          if (t.defined()) {
            Type tt = Type::Of(t);
            if (v->type() != tt)
              Add(absl::StrCat(gl, ": [constant] constant ", vn, " has type ", PrintType(v->type()),
                               " but its data is ", PrintType(tt)));
          }
          break;
        }
        case Value::Kind::kNodeOutput: {
          const Node* p = v->producer();
          if (!p || !node_set.count(p)) {
            Add(absl::StrCat(gl, ": [ssa] value ", vn, " has no producer in this graph"));
          } else if (v->producer_index() < 0 || v->producer_index() >= p->num_outputs() ||
                     p->output(v->producer_index()) != v) {
            Add(absl::StrCat(gl, ": [ssa] value ", vn, " is not output ", v->producer_index(),
                             " of its producer"));
          }
          break;
        }
      }
    }

    // Graph inputs and constants are visible everywhere in g.
    std::vector<const Value*> defined_here;
    auto define_here = [&](const Value* v, const std::string& where) {
      auto it = visible_names_.find(v->name());
      if (it != visible_names_.end() && it->second != v && it->second->owner() != &g)
        Add(absl::StrCat(where, ": [scope] value ", PrintValueName(v->name()),
                         " redefines a value of an enclosing graph"));
      Define(v);
      defined_here.push_back(v);
    };
    for (const Value* v : g.inputs())
      if (v) define_here(v, gl);
    for (const Value* v : g.Constants()) define_here(v, gl);

    bool cycle = FindCycle(g, gl, nodes);

    for (size_t idx = 0; idx < nodes.size(); ++idx) {
      const Node& n = *nodes[idx];
      std::string where = absl::StrCat(gl, ": ", NodeLabel(n, static_cast<int>(idx)));
      size_t errors_before = errors_.size() + (truncated_ ? 1 : 0);
      if (n.owner() != &g) Add(absl::StrCat(where, ": [ssa] the node's owner is another graph"));
      for (int i = 0; i < n.num_outputs(); ++i) {
        const Value* o = n.output(i);
        if (!o) {
          Add(absl::StrCat(where, ": [ssa] output ", i, " is null"));
          continue;
        }
        if (o->owner() != &g || o->producer() != &n || o->producer_index() != i ||
            o->kind() != Value::Kind::kNodeOutput)
          Add(absl::StrCat(where, ": [ssa] output ", i, " ", PrintValueName(o->name()),
                           " does not name this node as its producer"));
      }
      for (int i = 0; i < n.num_inputs(); ++i) {
        const Value* v = n.input(i);
        if (!v) continue;
        std::string what = absl::StrCat("input ", i);
        CheckVisible(v, g, where, what, owned, !cycle);
        int count = 0;
        for (const Use& u : v->uses())
          if (u.user == &n && u.index == i && !u.graph) ++count;
        if (count != 1)
          Add(absl::StrCat(where, ": [uses] ", what, " ", PrintValueName(v->name()),
                           count == 0 ? " does not record this use" : " records this use more than once"));
      }
      const OpDef* def = registry_.Find(n);
      if (!def) {
        Add(absl::StrCat(where, ": [op] unknown op '", n.QualifiedOp(), "'"));
      } else {
        CheckArity(n, *def, where);
        CheckAttrs(n, *def, where);
      }
      // Nested graphs see what is defined before this node.
      for (const auto& [attr_name, a] : n.attrs()) {
        for (const auto& s : a.graphs()) {
          if (!s) {
            Add(absl::StrCat(where, ": [ssa] attribute '", attr_name, "' holds a null graph"));
            continue;
          }
          if (s->parent() != &g)
            Add(absl::StrCat(where, ": [scope] the graph '", s->name(), "' of attribute '", attr_name,
                             "' does not name this graph as its parent"));
          VerifyGraphRec(*s, absl::StrCat(path, "/", s->name()));
        }
      }
      bool node_ok = errors_.size() + (truncated_ ? 1 : 0) == errors_before;
      if (def && node_ok && options_.check_types) CheckTypes(n, *def, where);
      for (const Value* o : n.outputs())
        if (o) define_here(o, where);
    }

    for (size_t i = 0; i < g.outputs().size(); ++i) {
      const Value* v = g.outputs()[i];
      std::string what = absl::StrCat("graph output ", i);
      if (!v) {
        Add(absl::StrCat(gl, ": [ssa] ", what, " is null"));
        continue;
      }
      CheckVisible(v, g, gl, what, owned, true);
      int count = 0;
      for (const Use& u : v->uses())
        if (!u.user && u.graph == &g && u.index == static_cast<int>(i)) ++count;
      if (count != 1)
        Add(absl::StrCat(gl, ": [uses] ", what, " ", PrintValueName(v->name()),
                         count == 0 ? " does not record this use" : " records this use more than once"));
    }

    // [uses]: every recorded use of a value of g is real.
    for (const Value* v : values) {
      std::string vn = PrintValueName(v->name());
      for (const Use& u : v->uses()) {
        if (u.user) {
          if (!live_nodes_.count(u.user)) {
            Add(absl::StrCat(gl, ": [uses] value ", vn, " records a use by a node that is not in the graph"));
          } else if (u.index < 0 || u.index >= u.user->num_inputs() || u.user->input(u.index) != v) {
            Add(absl::StrCat(gl, ": [uses] value ", vn, " records a use as input ", u.index, " of ",
                             NodeLabel(*u.user, -1), ", which does not read it there"));
          }
        } else if (!u.graph || (!live_graphs_.count(u.graph) && !IsAncestor(u.graph, g))) {
          Add(absl::StrCat(gl, ": [uses] value ", vn, " records a use as output of a graph that is not verified"));
        } else if (u.index < 0 || u.index >= static_cast<int>(u.graph->outputs().size()) ||
                   u.graph->outputs()[u.index] != v) {
          Add(absl::StrCat(gl, ": [uses] value ", vn, " records a use as output ", u.index, " of graph '",
                           u.graph->name(), "', which is another value"));
        }
      }
    }

    for (const Value* v : defined_here) Undefine(v);
    current_ = saved_current;
  }

  void CheckArity(const Node& n, const OpDef& def, const std::string& where) {
    int ni = n.num_inputs();
    if (ni < def.min_inputs)
      Add(absl::StrCat(where, ": [arity] has ", ni, " inputs, ", def.QualifiedName(), " needs at least ",
                       def.min_inputs));
    else if (def.max_inputs >= 0 && ni > def.max_inputs)
      Add(absl::StrCat(where, ": [arity] has ", ni, " inputs, ", def.QualifiedName(), " takes at most ",
                       def.max_inputs));
    for (int i = 0; i < std::min(ni, def.min_inputs); ++i)
      if (!n.input(i) && def.InputRequired(i)) Add(absl::StrCat(where, ": [arity] required input ", i, " is missing"));
    int no = n.num_outputs();
    if (no < def.min_outputs)
      Add(absl::StrCat(where, ": [arity] has ", no, " outputs, ", def.QualifiedName(), " needs at least ",
                       def.min_outputs));
    else if (def.max_outputs >= 0 && no > def.max_outputs)
      Add(absl::StrCat(where, ": [arity] has ", no, " outputs, ", def.QualifiedName(), " has at most ",
                       def.max_outputs));
  }

  void CheckAttrs(const Node& n, const OpDef& def, const std::string& where) {
    for (const auto& [name, a] : n.attrs()) {
      const AttrDef* ad = def.FindAttr(name);
      if (!ad) {
        Add(absl::StrCat(where, ": [attribute] undeclared attribute '", name, "'"));
      } else if (ad->kind != a.kind()) {
        Add(absl::StrCat(where, ": [attribute] attribute '", name, "' is ", AttrKindName(a.kind()),
                         ", declared ", AttrKindName(ad->kind)));
      }
    }
    for (const AttrDef& ad : def.attrs)
      if (ad.required && !n.has_attr(ad.name))
        Add(absl::StrCat(where, ": [attribute] required attribute '", ad.name, "' is missing"));
  }

  void CheckTypes(const Node& n, const OpDef& def, const std::string& where) {
    if (!def.infer) return;
    for (const Value* v : n.inputs())
      if (v && v->type().is_none()) return;  // not everything is known yet
    auto inferred = InferNode(def, n);
    if (!inferred.ok()) {
      Add(absl::StrCat(where, ": [type] inference fails: ", inferred.status().message()));
      return;
    }
    for (int i = 0; i < n.num_outputs() && i < static_cast<int>(inferred->size()); ++i) {
      const Value* o = n.output(i);
      if (!TypesAgree(o->type(), (*inferred)[i]))
        Add(absl::StrCat(where, ": [type] output ", i, " ", PrintValueName(o->name()), " is declared ",
                         PrintType(o->type()), " but inference gives ", PrintType((*inferred)[i])));
    }
  }

  const VerifyOptions& options_;
  const OpRegistry& registry_;
  std::vector<std::string> errors_;
  bool truncated_ = false;
  absl::flat_hash_set<const Node*> live_nodes_;
  absl::flat_hash_set<const Graph*> live_graphs_;
  absl::flat_hash_set<const Value*> visible_;
  absl::flat_hash_map<std::string, const Value*> visible_names_;
  const Graph* current_ = nullptr;
};

}  // namespace

absl::Status VerifyGraph(const Graph& graph, const VerifyOptions& options) {
  return Verifier(options).Run(graph);
}

absl::Status VerifyModel(const Model& model, const VerifyOptions& options) {
  if (!model.graph) return absl::InvalidArgumentError("model: [ssa] the model has no graph");
  if (model.graph->parent())
    return absl::InvalidArgumentError(
        absl::StrCat("graph '", model.graph->name(), "': [scope] the main graph has a parent graph"));
  return VerifyGraph(*model.graph, options);
}

}  // namespace kiln
