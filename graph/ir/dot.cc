//===- dot.cc - Graphviz export of a graph --------------------------------===//
#include "graph/ir/dot.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "graph/ir/printer.h"

namespace kiln {
namespace {

// A DOT double-quoted string body: quotes and backslashes escaped, newlines
// as \n (a centered line break in labels).
std::string Escape(absl::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': break;
      default: out.push_back(c);
    }
  }
  return out;
}

class DotWriter {
 public:
  std::string Run(const Graph& g) {
    out_ += "digraph ";
    out_ += Quote(g.name());
    out_ += " {\n";
    out_ += "  node [fontname=\"Helvetica\", fontsize=10];\n";
    out_ += "  edge [fontname=\"Helvetica\", fontsize=8];\n";
    EmitGraph(g, 1);
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  static std::string Quote(absl::string_view s) { return absl::StrCat("\"", Escape(s), "\""); }
  void Indent(int n) { out_.append(2 * n, ' '); }

  std::string NewId(absl::string_view prefix) { return absl::StrCat(prefix, next_id_++); }

  // The DOT node an edge for `v` starts from; a placeholder for values that
  // are not defined anywhere visible (a broken graph).
  std::string Source(const Value* v, int indent) {
    auto it = ids_.find(v);
    if (it != ids_.end()) return it->second;
    std::string id = NewId("x");
    Indent(indent);
    absl::StrAppend(&out_, id, " [label=", Quote(absl::StrCat(PrintValueName(v->name()), "\n(undefined)")),
                    ", shape=ellipse, color=red, fontcolor=red];\n");
    ids_[v] = id;
    return id;
  }

  void Edge(const Value* v, const std::string& to, int indent, const Graph& g, absl::string_view extra) {
    std::string from = Source(v, indent);
    Indent(indent);
    absl::StrAppend(&out_, from, " -> ", to);
    std::vector<std::string> attrs;
    if (v->producer() && v->producer()->num_outputs() > 1)
      attrs.push_back(absl::StrCat("label=", Quote(PrintValueName(v->name()))));
    if (v->owner() != &g) attrs.push_back("style=dashed");
    if (!extra.empty()) attrs.push_back(std::string(extra));
    if (!attrs.empty()) {
      out_ += " [";
      for (size_t i = 0; i < attrs.size(); ++i) absl::StrAppend(&out_, i ? ", " : "", attrs[i]);
      out_ += "]";
    }
    out_ += ";\n";
  }

  // Emits the values, nodes and edges of `g`; returns the ids of its output
  // sinks.
  std::vector<std::string> EmitGraph(const Graph& g, int indent) {
    for (const Value* v : g.inputs()) {
      if (!v) continue;
      std::string id = NewId("i");
      ids_[v] = id;
      Indent(indent);
      absl::StrAppend(&out_, id, " [label=",
                      Quote(absl::StrCat(PrintValueName(v->name()), "\n", PrintType(v->type()))),
                      ", shape=ellipse];\n");
    }
    for (const Value* c : g.Constants()) {
      std::string id = NewId("c");
      ids_[c] = id;
      Indent(indent);
      absl::StrAppend(&out_, id, " [label=",
                      Quote(absl::StrCat(PrintValueName(c->name()), "\n", PrintType(c->type()))),
                      ", shape=box, fontsize=7, height=0.2, margin=\"0.04,0.02\", style=filled, "
                      "fillcolor=\"#eeeeee\"];\n");
    }
    for (const Node* n : g.nodes()) {
      std::string id = NewId("n");
      std::string label = n->QualifiedOp();
      if (!n->name().empty()) absl::StrAppend(&label, "\n", n->name());
      for (const Value* o : n->outputs()) absl::StrAppend(&label, "\n", PrintType(o->type()));
      Indent(indent);
      absl::StrAppend(&out_, id, " [label=", Quote(label),
                      ", shape=box, style=\"rounded,filled\", fillcolor=\"#dde7f5\"];\n");
      for (const Value* v : n->inputs())
        if (v) Edge(v, id, indent, g, "");
      for (const auto& [attr_name, a] : n->attrs()) {
        for (size_t k = 0; k < a.graphs().size(); ++k) {
          const Graph* sub = a.graphs()[k].get();
          if (!sub) continue;
          Indent(indent);
          absl::StrAppend(&out_, "subgraph ", NewId("cluster_"), " {\n");
          std::string title = absl::StrCat(n->QualifiedOp(), " ", attr_name);
          if (a.graphs().size() > 1) absl::StrAppend(&title, "[", k, "]");
          std::string gname;
          kir::AppendName(&gname, '@', sub->name());
          absl::StrAppend(&title, ": ", gname);
          Indent(indent + 1);
          absl::StrAppend(&out_, "label=", Quote(title), ";\n");
          Indent(indent + 1);
          out_ += "style=rounded; color=\"#888888\";\n";
          std::vector<std::string> sinks = EmitGraph(*sub, indent + 1);
          Indent(indent);
          out_ += "}\n";
          for (const std::string& s : sinks) {
            Indent(indent);
            absl::StrAppend(&out_, s, " -> ", id, " [style=dotted];\n");
          }
        }
      }
      for (const Value* o : n->outputs()) ids_[o] = id;
    }
    std::vector<std::string> sinks;
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      const Value* v = g.outputs()[i];
      if (!v) continue;
      std::string id = NewId("o");
      Indent(indent);
      absl::StrAppend(&out_, id, " [label=", Quote(absl::StrCat("output ", i, "\n", PrintValueName(v->name()))),
                      ", shape=ellipse, style=dashed];\n");
      Edge(v, id, indent, g, "");
      sinks.push_back(id);
    }
    return sinks;
  }

  std::string out_;
  absl::flat_hash_map<const Value*, std::string> ids_;
  int next_id_ = 0;
};

}  // namespace

std::string ToDot(const Graph& graph) { return DotWriter().Run(graph); }

}  // namespace kiln
