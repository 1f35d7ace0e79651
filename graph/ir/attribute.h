//===- attribute.h - Typed node attributes ----------------------*- C++ -*-===//
//
// An Attribute is one typed value attached to a node under a name: an
// integer, float, string, tensor, subgraph, type, or a list of one of those.
// Subgraphs are owned by the attribute; Clone() copies them deeply.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "graph/ir/tensor.h"
#include "graph/ir/type.h"

namespace kiln {

class Graph;

enum class AttrKind : uint8_t {
  kInt, kFloat, kString, kTensor, kGraph, kType,
  kInts, kFloats, kStrings, kTensors, kGraphs,
};

absl::string_view AttrKindName(AttrKind k);

class Attribute {
 public:
  Attribute() = default;
  Attribute(Attribute&&) noexcept;
  Attribute& operator=(Attribute&&) noexcept;
  ~Attribute();

  static Attribute Int(int64_t v);
  static Attribute Float(float v);
  static Attribute String(std::string v);
  static Attribute TensorValue(Tensor v);
  static Attribute GraphValue(std::unique_ptr<Graph> g);
  static Attribute TypeValue(Type t);
  static Attribute Ints(std::vector<int64_t> v);
  static Attribute Floats(std::vector<float> v);
  static Attribute Strings(std::vector<std::string> v);
  static Attribute Tensors(std::vector<Tensor> v);
  static Attribute Graphs(std::vector<std::unique_ptr<Graph>> v);

  AttrKind kind() const { return kind_; }
  int64_t i() const { return i_; }
  float f() const { return f_; }
  const std::string& s() const { return s_; }
  const Tensor& t() const { return t_; }
  Graph* g() const { return graphs_.empty() ? nullptr : graphs_[0].get(); }
  const Type& type() const { return type_; }
  const std::vector<int64_t>& ints() const { return ints_; }
  const std::vector<float>& floats() const { return floats_; }
  const std::vector<std::string>& strings() const { return strings_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const std::vector<std::unique_ptr<Graph>>& graphs() const { return graphs_; }
  std::vector<std::unique_ptr<Graph>>& mutable_graphs() { return graphs_; }

  // Deep copy; subgraphs are cloned with `parent` as their enclosing graph.
  Attribute Clone(Graph* parent) const;
  // Structural equality for scalar/list/tensor kinds; graphs compare by identity.
  bool operator==(const Attribute& o) const;

 private:
  AttrKind kind_ = AttrKind::kInt;
  int64_t i_ = 0;
  float f_ = 0;
  std::string s_;
  Tensor t_;
  Type type_;
  std::vector<int64_t> ints_;
  std::vector<float> floats_;
  std::vector<std::string> strings_;
  std::vector<Tensor> tensors_;
  std::vector<std::unique_ptr<Graph>> graphs_;  // one for kGraph, many for kGraphs
};

}  // namespace kiln
