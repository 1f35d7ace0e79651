//===- type.cc - Shapes and value types -----------------------------------===//
#include "graph/ir/type.h"

#include "graph/ir/interned.h"
#include "graph/ir/tensor.h"
#include "graph/support/checked_math.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {

Dim Dim::Symbol(absl::string_view name) {
  Dim d;
  if (!name.empty()) d.value_ = -2 - Intern(name).id;
  return d;
}

const std::string& Dim::symbol() const { return InternedText(is_symbolic() ? -2 - value_ : 0); }

std::string Dim::ToString() const {
  if (is_static()) return absl::StrCat(value_);
  if (is_symbolic()) return symbol();
  return "?";
}

Shape Shape::Static(const std::vector<int64_t>& dims) {
  DimVector d(dims.begin(), dims.end());
  return Shape(std::move(d));
}

bool Shape::is_static() const {
  if (!ranked_) return false;
  for (const Dim& d : dims_)
    if (!d.is_static()) return false;
  return true;
}

std::vector<int64_t> Shape::StaticDims() const {
  std::vector<int64_t> out;
  out.reserve(dims_.size());
  for (const Dim& d : dims_) out.push_back(d.value());
  return out;
}

int64_t Shape::NumElements() const {
  if (!is_static()) return -1;
  return CheckedProduct(StaticDims()).value_or(-1);
}

std::string Shape::ToString() const {
  if (!ranked_) return "[*]";
  return absl::StrCat("[", absl::StrJoin(dims_, ",", [](std::string* out, const Dim& d) {
                        out->append(d.ToString());
                      }),
                      "]");
}

Type Type::Of(const kiln::Tensor& data) { return Tensor(data.dtype(), Shape::Static(data.dims())); }

Type Type::Tensor(DType dtype, Shape shape) {
  Type t;
  t.kind_ = Kind::kTensor;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  return t;
}

Type Type::Sequence(Type element) {
  Type t;
  t.kind_ = Kind::kSequence;
  t.element_ = std::make_shared<const Type>(std::move(element));
  return t;
}

Type Type::Optional(Type element) {
  Type t;
  t.kind_ = Kind::kOptional;
  t.element_ = std::make_shared<const Type>(std::move(element));
  return t;
}

bool Type::operator==(const Type& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kNone: return true;
    case Kind::kTensor: return dtype_ == o.dtype_ && shape_ == o.shape_;
    case Kind::kSequence:
    case Kind::kOptional: return *element_ == *o.element_;
  }
  return false;
}

std::string Type::ToString() const {
  switch (kind_) {
    case Kind::kNone: return "?";
    case Kind::kTensor: return absl::StrCat(DTypeName(dtype_), shape_.ToString());
    case Kind::kSequence: return absl::StrCat("seq<", element_->ToString(), ">");
    case Kind::kOptional: return absl::StrCat("opt<", element_->ToString(), ">");
  }
  return "?";
}

}  // namespace kiln
