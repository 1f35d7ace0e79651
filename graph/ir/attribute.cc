//===- attribute.cc - Typed node attributes -------------------------------===//
#include "graph/ir/attribute.h"

#include "graph/ir/graph.h"

namespace kiln {

absl::string_view AttrKindName(AttrKind k) {
  switch (k) {
    case AttrKind::kInt: return "int";
    case AttrKind::kFloat: return "float";
    case AttrKind::kString: return "string";
    case AttrKind::kTensor: return "tensor";
    case AttrKind::kGraph: return "graph";
    case AttrKind::kType: return "type";
    case AttrKind::kInts: return "ints";
    case AttrKind::kFloats: return "floats";
    case AttrKind::kStrings: return "strings";
    case AttrKind::kTensors: return "tensors";
    case AttrKind::kGraphs: return "graphs";
  }
  return "?";
}

Attribute::Attribute(Attribute&&) noexcept = default;
Attribute& Attribute::operator=(Attribute&&) noexcept = default;
Attribute::~Attribute() = default;

Attribute Attribute::Int(int64_t v) { Attribute a; a.kind_ = AttrKind::kInt; a.i_ = v; return a; }
Attribute Attribute::Float(float v) { Attribute a; a.kind_ = AttrKind::kFloat; a.f_ = v; return a; }
Attribute Attribute::String(std::string v) {
  Attribute a; a.kind_ = AttrKind::kString; a.s_ = std::move(v); return a;
}
Attribute Attribute::TensorValue(Tensor v) {
  Attribute a; a.kind_ = AttrKind::kTensor; a.t_ = std::move(v); return a;
}
Attribute Attribute::GraphValue(std::unique_ptr<Graph> g) {
  Attribute a; a.kind_ = AttrKind::kGraph; a.graphs_.push_back(std::move(g)); return a;
}
Attribute Attribute::TypeValue(Type t) {
  Attribute a; a.kind_ = AttrKind::kType; a.type_ = std::move(t); return a;
}
Attribute Attribute::Ints(std::vector<int64_t> v) {
  Attribute a; a.kind_ = AttrKind::kInts; a.ints_ = std::move(v); return a;
}
Attribute Attribute::Floats(std::vector<float> v) {
  Attribute a; a.kind_ = AttrKind::kFloats; a.floats_ = std::move(v); return a;
}
Attribute Attribute::Strings(std::vector<std::string> v) {
  Attribute a; a.kind_ = AttrKind::kStrings; a.strings_ = std::move(v); return a;
}
Attribute Attribute::Tensors(std::vector<Tensor> v) {
  Attribute a; a.kind_ = AttrKind::kTensors; a.tensors_ = std::move(v); return a;
}
Attribute Attribute::Graphs(std::vector<std::unique_ptr<Graph>> v) {
  Attribute a; a.kind_ = AttrKind::kGraphs; a.graphs_ = std::move(v); return a;
}

Attribute Attribute::Clone(Graph* parent) const {
  Attribute a;
  a.kind_ = kind_;
  a.i_ = i_;
  a.f_ = f_;
  a.s_ = s_;
  a.t_ = t_;  // Tensor storage is shared; constants are immutable.
  a.type_ = type_;
  a.ints_ = ints_;
  a.floats_ = floats_;
  a.strings_ = strings_;
  a.tensors_ = tensors_;
  for (const auto& g : graphs_) a.graphs_.push_back(g->Clone(parent));
  return a;
}

bool Attribute::operator==(const Attribute& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case AttrKind::kInt: return i_ == o.i_;
    case AttrKind::kFloat: return f_ == o.f_ || (f_ != f_ && o.f_ != o.f_);
    case AttrKind::kString: return s_ == o.s_;
    case AttrKind::kTensor: return t_.Equals(o.t_);
    case AttrKind::kType: return type_ == o.type_;
    case AttrKind::kInts: return ints_ == o.ints_;
    case AttrKind::kFloats: return floats_ == o.floats_;
    case AttrKind::kStrings: return strings_ == o.strings_;
    case AttrKind::kTensors:
      if (tensors_.size() != o.tensors_.size()) return false;
      for (size_t i = 0; i < tensors_.size(); ++i)
        if (!tensors_[i].Equals(o.tensors_[i])) return false;
      return true;
    case AttrKind::kGraph:
    case AttrKind::kGraphs:
      if (graphs_.size() != o.graphs_.size()) return false;
      for (size_t i = 0; i < graphs_.size(); ++i)
        if (graphs_[i] != o.graphs_[i]) return false;
      return true;
  }
  return false;
}

}  // namespace kiln
