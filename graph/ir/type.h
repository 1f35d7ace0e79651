//===- type.h - Shapes and value types --------------------------*- C++ -*-===//
//
// A Dim is a static extent, a named symbolic extent (from ONNX dim_param), or
// unknown. A Shape is a list of dims, or "unranked". A Type is what a Value
// carries: a tensor type (dtype + shape), a sequence of tensors, or an
// optional of either.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "graph/ir/dtype.h"

namespace kiln {

class Tensor;

class Dim {
 public:
  Dim() = default;                                      // unknown
  Dim(int64_t v) : value_(v >= 0 ? v : kUnknown) {}     // static (v >= 0); negative: unknown
  // A named extent; the empty name is unknown.
  static Dim Symbol(absl::string_view name);

  bool is_static() const { return value_ >= 0; }
  bool is_symbolic() const { return value_ < kUnknown; }
  bool is_unknown() const { return value_ == kUnknown; }
  // The extent, or -1 when not static.
  int64_t value() const { return value_ >= 0 ? value_ : kUnknown; }
  // The name of a symbolic dim ("" otherwise).
  const std::string& symbol() const;

  bool operator==(const Dim& o) const { return value_ == o.value_; }
  std::string ToString() const;  // "7", "batch", "?"

 private:
  static constexpr int64_t kUnknown = -1;
  // >= 0: static; -1: unknown; -2 - k: the symbol whose name is interned
  // as k (graph/ir/interned.h), so equal names are equal dims and a dim is
  // one word.
  int64_t value_ = kUnknown;
};

// The dims of a shape, held in the shape itself up to rank 4 (nearly every
// tensor), so a type is read and copied without touching the heap.
using DimVector = absl::InlinedVector<Dim, 4>;

class Shape {
 public:
  Shape() = default;  // unranked
  Shape(const DimVector& dims) : ranked_(true), dims_(dims.begin(), dims.end()) {}
  Shape(std::initializer_list<Dim> dims) : ranked_(true), dims_(dims) {}
  // Copies and moves take the dims one by one: a DimVector's own moves copy
  // its whole inline buffer, unused slots included, which GCC 12 reports as
  // reads of uninitialized memory wherever they are inlined.
  Shape(const Shape& o) : ranked_(o.ranked_), dims_(o.dims_.begin(), o.dims_.end()) {}
  Shape& operator=(const Shape& o) {
    if (this != &o) {
      ranked_ = o.ranked_;
      dims_.assign(o.dims_.begin(), o.dims_.end());
    }
    return *this;
  }
  Shape(Shape&& o) noexcept : Shape(static_cast<const Shape&>(o)) {}
  Shape& operator=(Shape&& o) noexcept { return *this = static_cast<const Shape&>(o); }
  static Shape Static(const std::vector<int64_t>& dims);
  static Shape Scalar() { return Shape(DimVector{}); }

  bool ranked() const { return ranked_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  const DimVector& dims() const { return dims_; }
  DimVector& dims() { return dims_; }
  const Dim& operator[](int i) const { return dims_[i]; }
  bool is_static() const;
  // Requires is_static().
  std::vector<int64_t> StaticDims() const;
  // Product of dims, or -1 when not static.
  int64_t NumElements() const;

  bool operator==(const Shape& o) const { return ranked_ == o.ranked_ && dims_ == o.dims_; }
  std::string ToString() const;  // "[2,batch,?]" or "[*]" when unranked

 private:
  bool ranked_ = false;
  DimVector dims_;
};

class Type {
 public:
  enum class Kind : uint8_t { kNone, kTensor, kSequence, kOptional };

  Type() = default;  // kNone: not yet inferred
  static Type Tensor(DType dtype, Shape shape = Shape());
  // The type of `data`: its dtype and static shape.
  static Type Of(const kiln::Tensor& data);
  static Type Sequence(Type element);
  static Type Optional(Type element);

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  Shape& mutable_shape() { return shape_; }
  // Element type of a sequence or optional.
  const Type& element() const { return *element_; }

  bool operator==(const Type& o) const;
  bool operator!=(const Type& o) const { return !(*this == o); }
  // "f32[1,3,224,224]", "seq<f32[*]>", "opt<i64[]>", "?"
  std::string ToString() const;

 private:
  Kind kind_ = Kind::kNone;
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  std::shared_ptr<const Type> element_;
};

}  // namespace kiln
