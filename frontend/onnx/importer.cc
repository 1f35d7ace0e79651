//===- importer.cc - ONNX model import ------------------------------------===//
#include "frontend/onnx/importer.h"

#include <filesystem>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "frontend/onnx/tensor_proto.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"
#include "graph/support/status.h"
#include "graph/support/mapped_file.h"
#include "onnx/onnx_pb.h"

namespace kiln::onnx_import {
namespace {

std::string NodeLabel(const onnx::NodeProto& n) {
  std::string op = n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type()
                                                                 : absl::StrCat(n.domain(), ".", n.op_type());
  if (n.name().empty()) return absl::StrCat("node (", op, ")");
  return absl::StrCat("node '", n.name(), "' (", op, ")");
}

absl::StatusOr<Type> TypeFromProto(const onnx::TypeProto& t) {
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType: {
      const auto& tt = t.tensor_type();
      DType dt = DType::kUndefined;
      if (tt.elem_type() != 0) {
        auto d = DTypeFromOnnx(tt.elem_type());
        if (!d) return InvalidArgument("unknown element type ", tt.elem_type());
        dt = *d;
      }
      if (!tt.has_shape()) return Type::Tensor(dt, Shape());
      DimVector dims;
      for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value()) {
          if (d.dim_value() < 0) return InvalidArgument("negative dimension ", d.dim_value());
          dims.push_back(Dim(d.dim_value()));
        } else if (d.has_dim_param() && !d.dim_param().empty()) {
          dims.push_back(Dim::Symbol(d.dim_param()));
        } else {
          dims.push_back(Dim());
        }
      }
      return Type::Tensor(dt, Shape(std::move(dims)));
    }
    case onnx::TypeProto::kSequenceType: {
      Type elem;
      if (t.sequence_type().has_elem_type()) {
        KILN_ASSIGN_OR_RETURN(elem, TypeFromProto(t.sequence_type().elem_type()));
      }
      return Type::Sequence(elem);
    }
    case onnx::TypeProto::kOptionalType: {
      Type elem;
      if (t.optional_type().has_elem_type()) {
        KILN_ASSIGN_OR_RETURN(elem, TypeFromProto(t.optional_type().elem_type()));
      }
      return Type::Optional(elem);
    }
    case onnx::TypeProto::VALUE_NOT_SET:
      return Type();
    default:
      return Unimplemented("map and sparse tensor types are not supported");
  }
}

class Importer {
 public:
  Importer(const onnx::ModelProto& proto, std::string base_dir)
      : proto_(proto), base_dir_(std::move(base_dir)) {}

  absl::StatusOr<Model> Run(const ImportOptions& options) {
    Model m;
    m.ir_version = proto_.ir_version();
    m.producer_name = proto_.producer_name();
    m.producer_version = proto_.producer_version();
    for (const auto& op : proto_.opset_import()) {
      std::string d = op.domain() == "ai.onnx" ? "" : op.domain();
      m.opsets[d] = op.version();
    }
    if (proto_.opset_import_size() == 0) m.opsets[""] = kMinOpset;  // IR v3 and older
    auto it = m.opsets.find("");
    if (it != m.opsets.end() && (it->second < kMinOpset || it->second > kMaxOpset))
      return Unimplemented("opset ", it->second, " of the default ONNX domain is not supported (kiln imports opsets ",
                           kMinOpset, " to ", kMaxOpset, ")");
    if (!proto_.has_graph()) return InvalidArgument("the model has no graph");
    model_ = &m;
    KILN_RETURN_IF_ERROR(ImportGraph(proto_.graph(), m.graph.get()));
    if (options.infer_shapes) KILN_RETURN_IF_ERROR(InferShapes(*m.graph));
    return m;
  }

 private:
  absl::Status ImportGraph(const onnx::GraphProto& gp, Graph* g) {
    g->set_name(gp.name().empty() ? "main" : gp.name());
    if (gp.sparse_initializer_size() > 0)
      return Unimplemented("graph '", gp.name(), "' has sparse initializers, which kiln does not support");
    // Initializers first: an input with a same-named initializer is a constant.
    absl::flat_hash_set<std::string> initialized;
    for (const auto& init : gp.initializer()) {
      if (init.name().empty()) return InvalidArgument("an initializer of graph '", gp.name(), "' has no name");
      if (!initialized.insert(init.name()).second)
        return InvalidArgument("initializer '", init.name(), "' is defined twice");
      auto t = TensorFromProto(init, base_dir_);
      if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat("initializer: ", t.status().message()));
      g->AddConstant(init.name(), *std::move(t));
    }
    for (const auto& in : gp.input()) {
      if (initialized.contains(in.name())) continue;
      if (in.name().empty()) return InvalidArgument("an input of graph '", gp.name(), "' has no name");
      if (g->Lookup(in.name()) && g->Lookup(in.name())->owner() == g)
        return InvalidArgument("graph input '", in.name(), "' is defined twice");
      auto t = TypeFromProto(in.type());
      if (!t.ok()) return InvalidArgument("graph input '", in.name(), "': ", t.status().message());
      g->AddInput(in.name(), *t);
    }
    // Declared types of intermediate values and outputs.
    absl::flat_hash_map<std::string, Type> declared;
    for (const auto* list : {&gp.value_info(), &gp.output()}) {
      for (const auto& vi : *list) {
        if (!vi.has_type()) continue;
        auto t = TypeFromProto(vi.type());
        if (!t.ok()) return InvalidArgument("value '", vi.name(), "': ", t.status().message());
        declared[vi.name()] = *t;
      }
    }
    std::vector<int> order;
    KILN_RETURN_IF_ERROR(TopologicalOrder(gp, g, &order));
    for (int idx : order) {
      const onnx::NodeProto& np = gp.node(idx);
      absl::Status s = ImportNode(np, g, declared);
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat(NodeLabel(np), ": ", s.message()));
    }
    // Upgraded nodes are checked against the canonical schema here.
    for (Node* n : g->nodes()) {
      const OpDef* def = OpRegistry::Global().Find(*n);
      absl::Status s = def ? CheckArity(*def, n->num_inputs(), n->num_outputs())
                           : Unimplemented("unknown op '", n->QualifiedOp(), "'");
      if (!s.ok()) {
        std::string label = n->name().empty() ? absl::StrCat("node (", n->QualifiedOp(), ")")
                                              : absl::StrCat("node '", n->name(), "' (", n->QualifiedOp(), ")");
        return absl::Status(s.code(), absl::StrCat(label, ": ", s.message()));
      }
    }
    for (const auto& out : gp.output()) {
      Value* v = g->Lookup(out.name());
      if (!v) return InvalidArgument("graph output '", out.name(), "' is not produced by any node, input or initializer");
      auto dt = declared.find(out.name());
      if (dt != declared.end() && v->owner() == g && !v->is_constant()) {
        auto merged = MergeTypes(v->type(), dt->second);
        if (merged.ok()) v->set_type(*merged);
      }
      g->AddOutput(v);
    }
    return absl::OkStatus();
  }

  // Orders nodes so that every value is produced before it is used; ONNX
  // requires topological order, but kiln accepts any order and reports cycles.
  absl::Status TopologicalOrder(const onnx::GraphProto& gp, Graph* g, std::vector<int>* order) {
    absl::flat_hash_map<std::string, int> producer;
    for (int i = 0; i < gp.node_size(); ++i) {
      for (const std::string& o : gp.node(i).output()) {
        if (o.empty()) continue;
        if (!producer.emplace(o, i).second)
          return InvalidArgument(NodeLabel(gp.node(i)), ": output '", o, "' is already produced by ",
                                 NodeLabel(gp.node(producer[o])));
        Value* existing = g->Lookup(o);
        if (existing && existing->owner() == g)
          return InvalidArgument(NodeLabel(gp.node(i)), ": output '", o,
                                 "' redefines a graph input or initializer");
      }
    }
    // Dependencies include values used inside nested graphs.
    std::vector<std::vector<int>> users(gp.node_size());
    std::vector<int> pending(gp.node_size(), 0);
    for (int i = 0; i < gp.node_size(); ++i) {
      absl::flat_hash_set<int> deps;
      std::vector<std::string> names;
      CollectUsedNames(gp.node(i), &names);
      for (const std::string& in : names) {
        auto it = producer.find(in);
        if (it != producer.end() && it->second != i) deps.insert(it->second);
        else if (it != producer.end() && it->second == i)
          return InvalidArgument(NodeLabel(gp.node(i)), ": uses its own output '", in, "' (the graph has a cycle)");
      }
      std::vector<int> sorted(deps.begin(), deps.end());
      std::sort(sorted.begin(), sorted.end());
      for (int d : sorted) users[d].push_back(i);
      pending[i] = static_cast<int>(sorted.size());
    }
    // Kahn's algorithm, preferring the original order.
    std::vector<int> ready;
    for (int i = gp.node_size() - 1; i >= 0; --i)
      if (pending[i] == 0) ready.push_back(i);
    std::vector<bool> done(gp.node_size(), false);
    while (!ready.empty()) {
      std::sort(ready.begin(), ready.end(), std::greater<int>());
      int i = ready.back();
      ready.pop_back();
      done[i] = true;
      order->push_back(i);
      for (int u : users[i])
        if (--pending[u] == 0) ready.push_back(u);
    }
    if (static_cast<int>(order->size()) != gp.node_size()) {
      for (int i = 0; i < gp.node_size(); ++i)
        if (!done[i]) return InvalidArgument("the graph has a cycle through ", NodeLabel(gp.node(i)));
    }
    return absl::OkStatus();
  }

  static void CollectUsedNames(const onnx::NodeProto& n, std::vector<std::string>* out) {
    for (const std::string& in : n.input())
      if (!in.empty()) out->push_back(in);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectGraphFreeNames(a.g(), out);
      for (const auto& g : a.graphs()) CollectGraphFreeNames(g, out);
    }
  }

  static void CollectGraphFreeNames(const onnx::GraphProto& g, std::vector<std::string>* out) {
    // Over-approximates (inner names that shadow nothing are harmless here:
    // they are not produced by outer nodes).
    for (const auto& n : g.node()) CollectUsedNames(n, out);
  }

  absl::Status ImportNode(const onnx::NodeProto& np, Graph* g,
                          const absl::flat_hash_map<std::string, Type>& declared) {
    std::string domain = np.domain() == "ai.onnx" ? "" : np.domain();
    if (np.op_type().empty()) return InvalidArgument("a node has no op_type");
    auto opset_it = model_->opsets.find(domain);
    if (opset_it == model_->opsets.end())
      return InvalidArgument("domain '", domain, "' is not in the model's opset imports");
    const OpDef* def = OpRegistry::Global().Find(domain, np.op_type());
    if (!def) {
      if (!domain.empty() && !KnownDomain(domain)) return Unimplemented("unknown domain '", domain, "'");
      return Unimplemented("unknown op '", np.op_type(), "'");
    }
    int64_t opset = opset_it->second;
    // Constant nodes become constant values.
    if (domain.empty() && np.op_type() == "Constant") return ImportConstant(np, g);

    // Nodes of older opsets are checked against the canonical schema after
    // their upgrade (CheckArity); the upgrader validates the old form.
    const bool upgrades = def->upgrade && opset < kMaxOpset;
    if (!upgrades) KILN_RETURN_IF_ERROR(CheckArity(*def, np.input_size(), np.output_size()));
    std::vector<Value*> inputs;
    for (const std::string& in : np.input()) {
      if (in.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      Value* v = g->Lookup(in);
      if (!v) return InvalidArgument("input '", in, "' is not defined");
      inputs.push_back(v);
    }
    std::vector<std::string> names;
    for (const std::string& o : np.output()) names.push_back(o.empty() ? "" : o);
    Node* node = g->AddNode(np.op_type(), std::move(inputs), std::move(names), domain);
    node->set_name(np.name());
    for (const auto& a : np.attribute()) {
      if (a.name().empty()) return InvalidArgument("an attribute has no name");
      if (!a.ref_attr_name().empty())
        return Unimplemented("attribute '", a.name(), "' refers to a function attribute");
      KILN_ASSIGN_OR_RETURN(Attribute attr, ImportAttribute(a, g));
      node->SetAttr(a.name(), std::move(attr));
    }
    for (Value* out : node->outputs()) {
      auto it = declared.find(out->name());
      if (it != declared.end()) out->set_type(it->second);
    }
    if (upgrades) {
      // The upgrader may replace the node; ImportGraph checks the arity of
      // whatever stands in its place.
      absl::Status s = def->upgrade(*g, node, opset);
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat("opset ", opset, ": ", s.message()));
    }
    return absl::OkStatus();
  }

  static absl::Status CheckArity(const OpDef& def, int n_in, int n_out) {
    if (n_in < def.min_inputs || (def.max_inputs >= 0 && n_in > def.max_inputs))
      return InvalidArgument("takes ", ArityText(def.min_inputs, def.max_inputs), " inputs but has ", n_in);
    if (n_out < def.min_outputs || (def.max_outputs >= 0 && n_out > def.max_outputs))
      return InvalidArgument("has ", ArityText(def.min_outputs, def.max_outputs), " outputs but lists ", n_out);
    return absl::OkStatus();
  }

  static bool KnownDomain(const std::string& domain) {
    for (const OpDef* d : OpRegistry::Global().All())
      if (d->domain == domain) return true;
    return false;
  }

  static std::string ArityText(int min, int max) {
    if (max < 0) return absl::StrCat("at least ", min);
    if (min == max) return absl::StrCat(min);
    return absl::StrCat(min, " to ", max);
  }

  absl::Status ImportConstant(const onnx::NodeProto& np, Graph* g) {
    if (np.output_size() != 1 || np.output(0).empty())
      return InvalidArgument("must have exactly one output");
    if (np.attribute_size() != 1) return InvalidArgument("must have exactly one value attribute");
    const auto& a = np.attribute(0);
    Tensor t;
    if (a.name() == "value") {
      KILN_ASSIGN_OR_RETURN(t, TensorFromProto(a.t(), base_dir_));
    } else if (a.name() == "value_float") {
      t = Tensor::Scalar<float>(a.f());
    } else if (a.name() == "value_floats") {
      t = Tensor::FromVector<float>({a.floats().begin(), a.floats().end()}, {a.floats_size()});
    } else if (a.name() == "value_int") {
      t = Tensor::Scalar<int64_t>(a.i());
    } else if (a.name() == "value_ints") {
      t = Tensor::FromVector<int64_t>({a.ints().begin(), a.ints().end()}, {a.ints_size()});
    } else if (a.name() == "value_string") {
      t = Tensor::Scalar<std::string>(a.s());
    } else if (a.name() == "value_strings") {
      t = Tensor::FromVector<std::string>({a.strings().begin(), a.strings().end()}, {a.strings_size()});
    } else if (a.name() == "sparse_value") {
      return Unimplemented("sparse constants are not supported");
    } else {
      return InvalidArgument("unknown attribute '", a.name(), "'");
    }
    g->AddConstant(np.output(0), std::move(t));
    return absl::OkStatus();
  }

  absl::StatusOr<Attribute> ImportAttribute(const onnx::AttributeProto& a, Graph* g) {
    using A = onnx::AttributeProto;
    auto type = a.type();
    if (type == A::UNDEFINED) {  // IR v1 models: infer from the populated field
      if (a.has_f()) type = A::FLOAT;
      else if (a.has_i()) type = A::INT;
      else if (a.has_s()) type = A::STRING;
      else if (a.has_t()) type = A::TENSOR;
      else if (a.has_g()) type = A::GRAPH;
      else if (a.floats_size()) type = A::FLOATS;
      else if (a.ints_size()) type = A::INTS;
      else if (a.strings_size()) type = A::STRINGS;
      else if (a.tensors_size()) type = A::TENSORS;
      else if (a.graphs_size()) type = A::GRAPHS;
      else return InvalidArgument("attribute '", a.name(), "' has no type and no value");
    }
    switch (type) {
      case A::INT: return Attribute::Int(a.i());
      case A::FLOAT: return Attribute::Float(a.f());
      case A::STRING: return Attribute::String(a.s());
      case A::INTS: return Attribute::Ints({a.ints().begin(), a.ints().end()});
      case A::FLOATS: return Attribute::Floats({a.floats().begin(), a.floats().end()});
      case A::STRINGS: return Attribute::Strings({a.strings().begin(), a.strings().end()});
      case A::TENSOR: {
        auto t = TensorFromProto(a.t(), base_dir_);
        if (!t.ok()) return InvalidArgument("attribute '", a.name(), "': ", t.status().message());
        return Attribute::TensorValue(*std::move(t));
      }
      case A::TENSORS: {
        std::vector<Tensor> ts;
        for (const auto& tp : a.tensors()) {
          auto t = TensorFromProto(tp, base_dir_);
          if (!t.ok()) return InvalidArgument("attribute '", a.name(), "': ", t.status().message());
          ts.push_back(*std::move(t));
        }
        return Attribute::Tensors(std::move(ts));
      }
      case A::GRAPH: {
        auto sub = std::make_unique<Graph>("", g);
        absl::Status s = ImportGraph(a.g(), sub.get());
        if (!s.ok()) return absl::Status(s.code(), absl::StrCat("in subgraph '", a.name(), "': ", s.message()));
        return Attribute::GraphValue(std::move(sub));
      }
      case A::GRAPHS: {
        std::vector<std::unique_ptr<Graph>> subs;
        for (const auto& gp : a.graphs()) {
          auto sub = std::make_unique<Graph>("", g);
          KILN_RETURN_IF_ERROR(ImportGraph(gp, sub.get()));
          subs.push_back(std::move(sub));
        }
        return Attribute::Graphs(std::move(subs));
      }
      case A::TYPE_PROTO: {
        auto t = TypeFromProto(a.tp());
        if (!t.ok()) return InvalidArgument("attribute '", a.name(), "': ", t.status().message());
        return Attribute::TypeValue(*t);
      }
      default:
        return Unimplemented("attribute '", a.name(), "' has a kind kiln does not support (sparse tensor or type list)");
    }
  }

  const onnx::ModelProto& proto_;
  std::string base_dir_;
  Model* model_ = nullptr;
};

}  // namespace

absl::StatusOr<Model> ImportBytes(absl::string_view bytes, const std::string& display_name,
                                  const std::string& base_dir, const ImportOptions& options) {
  onnx::ModelProto proto;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return InvalidArgument(display_name, ": not a valid ONNX model (the protobuf does not parse)");
  Importer importer(proto, base_dir);
  auto m = importer.Run(options);
  if (!m.ok()) return absl::Status(m.status().code(), absl::StrCat(display_name, ": ", m.status().message()));
  return m;
}

absl::StatusOr<Model> ImportFile(const std::string& path, const ImportOptions& options) {
  KILN_ASSIGN_OR_RETURN(const MappedFile file, MappedFile::Open(path));
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return ImportBytes(file.bytes(), path, parent.empty() ? std::string(".") : parent.string(), options);
}

}  // namespace kiln::onnx_import
