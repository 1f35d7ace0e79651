//===- gears.cc - static-shape gears: one static variant per gear behind a dispatch ---===//
//
// A gear is one assignment of static values to the symbolic dims a user
// names (--dynamic-batch for the leading dim of every input whose leading
// dim is symbolic, --dynamic-dims for other symbols); with gears requested,
// the graph computes exactly what it computed before, for inputs of any
// requested gear, through a kiln.GearDispatch node that runs the variant of
// the graph specialized to the inputs' shapes.
//
// Each variant is a deep copy of the whole graph (nested graphs included)
// in which every occurrence of a gear symbol in a type becomes its value,
// with types inferred again from the now static inputs, so that the folding
// passes that run after this one evaluate the shape plumbing (Shape, Gather,
// Concat, Reshape targets) of each variant to constants. The variants are
// siblings nested in the dispatch node; names the top-level graph keeps (its
// inputs and outputs) get fresh names inside them. The variant count is the
// product of the value counts and may not exceed kMaxGearVariants.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/gears.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/passes/infer_shapes.h"
#include "graph/passes/rewrite_helpers.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

// One varying quantity: "batch" (binding the leading symbols of the
// inputs) or one named symbol.
struct GearAxis {
  std::string name;
  std::vector<std::string> symbols;
  std::vector<int64_t> values;
};

using SymbolValues = absl::flat_hash_map<std::string, int64_t>;

Type Specialize(const Type& t, const SymbolValues& values) {
  switch (t.kind()) {
    case Type::Kind::kNone:
      return t;
    case Type::Kind::kSequence:
      return Type::Sequence(Specialize(t.element(), values));
    case Type::Kind::kOptional:
      return Type::Optional(Specialize(t.element(), values));
    case Type::Kind::kTensor:
      break;
  }
  if (!t.shape().ranked()) return t;
  DimVector dims = t.shape().dims();
  for (Dim& d : dims) {
    if (!d.is_symbolic()) continue;
    auto it = values.find(d.symbol());
    if (it != values.end()) d = Dim(it->second);
  }
  return Type::Tensor(t.dtype(), Shape(std::move(dims)));
}

// Deep copy of a graph nest with gear symbols replaced in every type and
// `reserved` names (those of the top-level graph) renamed.
class VariantCopier {
 public:
  VariantCopier(const SymbolValues& values, const absl::flat_hash_set<std::string>& reserved, NameTable& names)
      : values_(values), reserved_(reserved), names_(names) {}

  // Copies `src` (its outputs only when `with_outputs`).
  std::unique_ptr<Graph> Copy(const Graph& src, Graph* parent, std::string name, bool with_outputs) {
    auto dst = std::make_unique<Graph>(std::move(name), parent);
    for (Value* c : src.Constants()) {
      Value* d = c->constant().defined() ? dst->AddConstant(NameFor(*dst, c), c->constant())
                                         : dst->AddElidedConstant(NameFor(*dst, c), Specialize(c->type(), values_));
      map_[c] = d;
    }
    for (Value* in : src.inputs()) {
      map_[in] = dst->AddInput(NameFor(*dst, in), Specialize(in->type(), values_));
      map_[in]->set_initial(in->initial());
    }
    for (const Node* n : src.nodes()) {
      std::vector<Value*> ins;
      for (Value* v : n->inputs()) ins.push_back(Map(v));
      std::vector<std::string> out_names;
      for (const Value* o : n->outputs()) out_names.push_back(NameFor(*dst, o));
      Node* c = dst->AddNode(n->op(), std::move(ins), std::move(out_names), n->domain());
      c->set_name(n->name());
      for (const auto& [attr_name, a] : n->attrs()) {
        if (a.kind() == AttrKind::kGraph) {
          c->SetAttr(attr_name, Attribute::GraphValue(Copy(*a.g(), dst.get(), a.g()->name(), true)));
        } else if (a.kind() == AttrKind::kGraphs) {
          std::vector<std::unique_ptr<Graph>> gs;
          for (const auto& s : a.graphs()) gs.push_back(Copy(*s, dst.get(), s->name(), true));
          c->SetAttr(attr_name, Attribute::Graphs(std::move(gs)));
        } else if (a.kind() == AttrKind::kType) {
          c->SetAttr(attr_name, Attribute::TypeValue(Specialize(a.type(), values_)));
        } else {
          c->SetAttr(attr_name, a.Clone(dst.get()));
        }
      }
      for (int i = 0; i < n->num_outputs(); ++i) {
        c->output(i)->set_type(Specialize(n->output(i)->type(), values_));
        map_[n->output(i)] = c->output(i);
      }
    }
    if (with_outputs)
      for (Value* o : src.outputs()) dst->AddOutput(Map(o));
    return dst;
  }

  Value* Map(Value* v) const {
    if (!v) return nullptr;
    auto it = map_.find(v);
    return it == map_.end() ? v : it->second;
  }

 private:
  std::string NameFor(Graph& g, const Value* v) {
    return reserved_.contains(v->name()) ? names_.Fresh(g, v->name()) : v->name();
  }

  const SymbolValues& values_;
  const absl::flat_hash_set<std::string>& reserved_;
  NameTable& names_;
  absl::flat_hash_map<const Value*, Value*> map_;
};

std::string InputList(const Graph& g) {
  std::vector<std::string> parts;
  for (const Value* in : g.inputs()) parts.push_back(absl::StrCat(in->name(), ": ", in->type().ToString()));
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

absl::Status CheckValues(const std::string& what, const std::vector<int64_t>& values) {
  absl::flat_hash_set<int64_t> seen;
  for (int64_t v : values) {
    if (v <= 0) return InvalidArgument("gears: ", what, " value ", v, " is not a positive integer");
    if (!seen.insert(v).second) return InvalidArgument("gears: ", what, " lists ", v, " twice");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<GearAxis>> ReadAxes(const Graph& g, const GearsRequest& request) {
  std::vector<GearAxis> axes;
  absl::flat_hash_set<std::string> input_symbols;
  for (const Value* in : g.inputs()) {
    if (!in->type().is_tensor() || !in->type().shape().ranked()) continue;
    for (const Dim& d : in->type().shape().dims())
      if (d.is_symbolic()) input_symbols.insert(d.symbol());
  }
  if (!request.batch.empty()) {
    KILN_RETURN_IF_ERROR(CheckValues("--dynamic-batch", request.batch));
    GearAxis batch{"batch", {}, request.batch};
    for (const Value* in : g.inputs()) {
      const Type& t = in->type();
      if (!t.is_tensor() || !t.shape().ranked() || t.shape().rank() == 0 || !t.shape()[0].is_symbolic()) continue;
      const std::string& s = t.shape()[0].symbol();
      if (std::find(batch.symbols.begin(), batch.symbols.end(), s) == batch.symbols.end()) batch.symbols.push_back(s);
    }
    if (batch.symbols.empty())
      return InvalidArgument("gears: --dynamic-batch needs a graph input whose leading dim is symbolic; the inputs are ",
                             InputList(g));
    axes.push_back(std::move(batch));
  }
  for (const auto& [name, values] : request.dims) {
    KILN_RETURN_IF_ERROR(CheckValues(absl::StrCat("--dynamic-dims ", name), values));
    if (!request.batch.empty() &&
        (name == "batch" || std::find(axes[0].symbols.begin(), axes[0].symbols.end(), name) != axes[0].symbols.end()))
      return InvalidArgument("gears: --dynamic-dims names '", name,
                             "', which --dynamic-batch sets already; give its values once");
    if (!input_symbols.contains(name))
      return InvalidArgument("gears: --dynamic-dims names '", name, "', which is not a symbolic dim of any graph input; the inputs are ",
                             InputList(g));
    axes.push_back({name, {name}, values});
  }
  int64_t count = 1;
  std::vector<std::string> counts;
  for (const GearAxis& a : axes) {
    count *= static_cast<int64_t>(a.values.size());
    counts.push_back(absl::StrCat(a.name, ": ", a.values.size()));
    if (count > kMaxGearVariants) {
      for (size_t i = counts.size(); i < axes.size(); ++i) count *= static_cast<int64_t>(axes[i].values.size());
      for (size_t i = counts.size(); i < axes.size(); ++i)
        counts.push_back(absl::StrCat(axes[i].name, ": ", axes[i].values.size()));
      return InvalidArgument("gears: ", count, " variants requested (", absl::StrJoin(counts, " x "), " values); at most ",
                             kMaxGearVariants, " are allowed");
    }
  }
  return axes;
}

// The number of gears: the product of the axes' value counts.
int64_t GearCount(const std::vector<GearAxis>& axes) {
  int64_t count = 1;
  for (const GearAxis& a : axes) count *= static_cast<int64_t>(a.values.size());
  return count;
}

// Gear k's value of each axis, the first axis varying slowest.
std::vector<int64_t> GearRow(const std::vector<GearAxis>& axes, int64_t k) {
  std::vector<int64_t> row(axes.size());
  for (size_t a = axes.size(); a-- > 0;) {
    const int64_t n = static_cast<int64_t>(axes[a].values.size());
    row[a] = axes[a].values[static_cast<size_t>(k % n)];
    k /= n;
  }
  return row;
}

// The value each symbol takes in the gear of `row`.
SymbolValues BindSymbols(const std::vector<GearAxis>& axes, const std::vector<int64_t>& row) {
  SymbolValues values;
  for (size_t a = 0; a < axes.size(); ++a)
    for (const std::string& sym : axes[a].symbols) values[sym] = row[a];
  return values;
}

}  // namespace

absl::StatusOr<GearVariants> SpecializeGears(const Graph& g, const GearsRequest& request) {
  GearVariants out;
  if (request.batch.empty() && request.dims.empty()) return out;
  KILN_ASSIGN_OR_RETURN(std::vector<GearAxis> axes, ReadAxes(g, request));
  for (const GearAxis& a : axes) out.symbols.push_back(a.name);
  // A standalone copy renames nothing: no enclosing graph holds the names.
  const absl::flat_hash_set<std::string> reserved;
  NameTable names(g);
  for (int64_t k = 0, count = GearCount(axes); k < count; ++k) {
    GearVariant gear;
    gear.values = GearRow(axes, k);
    std::vector<std::string> label;
    for (size_t a = 0; a < axes.size(); ++a) label.push_back(absl::StrCat(axes[a].name, "=", gear.values[a]));
    const SymbolValues values = BindSymbols(axes, gear.values);
    VariantCopier copier(values, reserved, names);
    gear.graph = copier.Copy(g, nullptr, g.name(), true);
    auto inferred = InferShapesWithLoops(*gear.graph);
    if (!inferred.ok())
      return InvalidArgument("gears: variant ", absl::StrJoin(label, ", "), ": ", inferred.status().message());
    out.gears.push_back(std::move(gear));
  }
  return out;
}

absl::StatusOr<GearsReport> CompileGears(Graph& g, const GearsRequest& request) {
  GearsReport report;
  if (request.batch.empty() && request.dims.empty()) return report;
  for (const Node* n : g.nodes())
    if (n->domain() == "kiln" && n->op() == "GearDispatch")
      return InvalidArgument("gears: the graph already dispatches over gears");
  KILN_ASSIGN_OR_RETURN(std::vector<GearAxis> axes, ReadAxes(g, request));

  // What the dispatch node yields: each output that is not a graph input, once.
  absl::flat_hash_set<const Value*> inputs(g.inputs().begin(), g.inputs().end());
  std::vector<Value*> yields;
  absl::flat_hash_map<const Value*, int> yield_index;
  for (Value* o : g.outputs())
    if (!inputs.contains(o) && yield_index.emplace(o, static_cast<int>(yields.size())).second) yields.push_back(o);
  if (yields.empty()) return report;  // every output is an input: nothing to specialize

  absl::flat_hash_set<std::string> reserved;
  for (const Value* in : g.inputs()) reserved.insert(in->name());
  for (const Value* o : yields) reserved.insert(o->name());
  NameTable names(g);

  // Variants, first axis slowest.
  std::vector<std::unique_ptr<Graph>> variants;
  std::vector<int64_t> gear_values;
  for (int64_t k = 0, count = GearCount(axes); k < count; ++k) {
    const std::vector<int64_t> row = GearRow(axes, k);
    std::vector<std::string> label;
    for (size_t a = 0; a < axes.size(); ++a) {
      gear_values.push_back(row[a]);
      label.push_back(absl::StrCat(axes[a].name, row[a]));
    }
    const SymbolValues values = BindSymbols(axes, row);
    VariantCopier copier(values, reserved, names);
    std::unique_ptr<Graph> variant = copier.Copy(g, nullptr, absl::StrCat("gear_", absl::StrJoin(label, "_")), false);
    for (Value* o : yields) variant->AddOutput(copier.Map(o));
    auto inferred = InferShapesWithLoops(*variant);
    if (!inferred.ok())
      return InvalidArgument("gears: variant ", absl::StrJoin(label, ", "), ": ", inferred.status().message());
    variants.push_back(std::move(variant));
  }

  // The top-level graph keeps its inputs; everything else moves into the variants.
  std::vector<Value*> outputs = g.outputs();
  std::vector<std::string> yield_names;
  std::vector<Type> yield_types;
  for (const Value* o : yields) {
    yield_names.push_back(o->name());
    yield_types.push_back(o->type());
  }
  std::vector<int> slot;  // per output: its dispatch output, or -1 for an input
  for (Value* o : outputs) slot.push_back(inputs.contains(o) ? -1 : yield_index[o]);
  g.ClearOutputs();
  std::vector<Node*> nodes = g.NodeList();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) g.EraseNode(*it);
  for (Value* c : g.Constants()) g.EraseValue(c);

  Node* dispatch = g.AddNode("GearDispatch", g.inputs(), yield_names, "kiln");
  dispatch->set_name("gears");
  for (size_t i = 0; i < yield_types.size(); ++i) dispatch->output(i)->set_type(yield_types[i]);
  std::vector<std::string> symbols;
  for (const GearAxis& a : axes) symbols.push_back(a.name);
  for (const GearAxis& a : axes) report.symbols += static_cast<int64_t>(a.symbols.size());
  report.variants = static_cast<int64_t>(variants.size());
  for (auto& v : variants) v->set_parent(&g);
  dispatch->SetAttr("variants", Attribute::Graphs(std::move(variants)));
  dispatch->SetAttr("gear_symbols", Attribute::Strings(std::move(symbols)));
  dispatch->SetAttr("gear_values", Attribute::Ints(std::move(gear_values)));
  for (size_t i = 0; i < outputs.size(); ++i)
    g.AddOutput(slot[i] < 0 ? outputs[i] : dispatch->output(slot[i]));
  return report;
}

namespace {

class GearsPass : public Pass {
 public:
  absl::string_view name() const override { return "gears"; }
  absl::StatusOr<bool> Run(Graph& graph) override {
    GearsRequest request{options().dynamic_batch, options().dynamic_dims};
    KILN_ASSIGN_OR_RETURN(GearsReport r, CompileGears(graph, request));
    if (r.variants) stats().Add("variants", r.variants);
    if (r.symbols) stats().Add("symbols-specialized", r.symbols);
    return r.variants > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateGearsPass() { return std::make_unique<GearsPass>(); }

}  // namespace kiln
