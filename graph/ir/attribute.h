//===- attribute.h - Typed node attributes ----------------------*- C++ -*-===//
//
// An Attribute is one typed value attached to a node under a name: an
// integer, float, string, tensor, subgraph, type, or a list of one of those.
// Subgraphs are owned by the attribute; Clone() copies them deeply.
// An attribute holds an int, a float and a list of ints in itself, and
// every other kind in one heap block.
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
  const std::string& s() const { return rare().s; }
  const Tensor& t() const { return rare().t; }
  Graph* g() const { return graphs().empty() ? nullptr : graphs()[0].get(); }
  const Type& type() const { return rare().type; }
  const std::vector<int64_t>& ints() const { return ints_; }
  const std::vector<float>& floats() const { return rare().floats; }
  const std::vector<std::string>& strings() const { return rare().strings; }
  const std::vector<Tensor>& tensors() const { return rare().tensors; }
  const std::vector<std::unique_ptr<Graph>>& graphs() const { return rare().graphs; }
  std::vector<std::unique_ptr<Graph>>& mutable_graphs() { return mutable_rare().graphs; }

  // Deep copy; subgraphs are cloned with `parent` as their enclosing graph.
  Attribute Clone(Graph* parent) const;
  // Structural equality for scalar/list/tensor kinds; graphs compare by identity.
  bool operator==(const Attribute& o) const;

 private:
  // The payloads of the kinds other than ints and floats (and lists of
  // ints), in a block of their own: most attributes are an int or a list
  // of ints (axes, perm, pads, strides), and a node's attribute map stays
  // small.
  struct Rare {
    std::string s;
    Tensor t;
    Type type;
    std::vector<float> floats;
    std::vector<std::string> strings;
    std::vector<Tensor> tensors;
    std::vector<std::unique_ptr<Graph>> graphs;  // one for kGraph, many for kGraphs
  };
  const Rare& rare() const;
  Rare& mutable_rare();

  AttrKind kind_ = AttrKind::kInt;
  float f_ = 0;
  int64_t i_ = 0;
  std::vector<int64_t> ints_;
  std::unique_ptr<Rare> rare_;
};

}  // namespace kiln
