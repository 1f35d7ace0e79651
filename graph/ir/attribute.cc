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
  Attribute a; a.kind_ = AttrKind::kString; a.mutable_rare().s = std::move(v); return a;
}
Attribute Attribute::TensorValue(Tensor v) {
  Attribute a; a.kind_ = AttrKind::kTensor; a.mutable_rare().t = std::move(v); return a;
}
Attribute Attribute::GraphValue(std::unique_ptr<Graph> g) {
  Attribute a; a.kind_ = AttrKind::kGraph; a.mutable_rare().graphs.push_back(std::move(g)); return a;
}
Attribute Attribute::TypeValue(Type t) {
  Attribute a; a.kind_ = AttrKind::kType; a.mutable_rare().type = std::move(t); return a;
}
Attribute Attribute::Ints(std::vector<int64_t> v) {
  Attribute a; a.kind_ = AttrKind::kInts; a.ints_ = std::move(v); return a;
}
Attribute Attribute::Floats(std::vector<float> v) {
  Attribute a; a.kind_ = AttrKind::kFloats; a.mutable_rare().floats = std::move(v); return a;
}
Attribute Attribute::Strings(std::vector<std::string> v) {
  Attribute a; a.kind_ = AttrKind::kStrings; a.mutable_rare().strings = std::move(v); return a;
}
Attribute Attribute::Tensors(std::vector<Tensor> v) {
  Attribute a; a.kind_ = AttrKind::kTensors; a.mutable_rare().tensors = std::move(v); return a;
}
Attribute Attribute::Graphs(std::vector<std::unique_ptr<Graph>> v) {
  Attribute a; a.kind_ = AttrKind::kGraphs; a.mutable_rare().graphs = std::move(v); return a;
}

const Attribute::Rare& Attribute::rare() const {
  static const Rare* const kEmpty = new Rare();
  return rare_ ? *rare_ : *kEmpty;
}

Attribute::Rare& Attribute::mutable_rare() {
  if (!rare_) rare_ = std::make_unique<Rare>();
  return *rare_;
}

Attribute Attribute::Clone(Graph* parent) const {
  Attribute a;
  a.kind_ = kind_;
  a.i_ = i_;
  a.f_ = f_;
  a.ints_ = ints_;
  if (rare_) {
    Rare& r = a.mutable_rare();
    r.s = rare_->s;
    r.t = rare_->t;  // Tensor storage is shared; constants are immutable.
    r.type = rare_->type;
    r.floats = rare_->floats;
    r.strings = rare_->strings;
    r.tensors = rare_->tensors;
    for (const auto& g : rare_->graphs) r.graphs.push_back(g->Clone(parent));
  }
  return a;
}

bool Attribute::operator==(const Attribute& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case AttrKind::kInt: return i_ == o.i_;
    case AttrKind::kFloat: return f_ == o.f_ || (f_ != f_ && o.f_ != o.f_);
    case AttrKind::kString: return s() == o.s();
    case AttrKind::kTensor: return t().Equals(o.t());
    case AttrKind::kType: return type() == o.type();
    case AttrKind::kInts: return ints_ == o.ints_;
    case AttrKind::kFloats: return floats() == o.floats();
    case AttrKind::kStrings: return strings() == o.strings();
    case AttrKind::kTensors:
      if (tensors().size() != o.tensors().size()) return false;
      for (size_t i = 0; i < tensors().size(); ++i)
        if (!tensors()[i].Equals(o.tensors()[i])) return false;
      return true;
    case AttrKind::kGraph:
    case AttrKind::kGraphs:
      if (graphs().size() != o.graphs().size()) return false;
      for (size_t i = 0; i < graphs().size(); ++i)
        if (graphs()[i] != o.graphs()[i]) return false;
      return true;
  }
  return false;
}

}  // namespace kiln
