//===- tensor.h - Dense host tensors with shared storage --------*- C++ -*-===//
//
// A Tensor is a dtype, static dims and a reference to storage. Copies share
// storage (cheap, like a shared_ptr); Clone() makes a deep copy. Constants in
// the graph, kernel inputs and outputs, and .npy files all use this type.
// Numeric data is contiguous, row-major, 64-byte aligned; string tensors hold
// std::string elements.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/ir/dtype.h"

namespace kiln {

using Dims = std::vector<int64_t>;

// The elements of a tensor of `dims`; -1 where a dim is negative or the
// count does not fit int64_t (readers check with ElementCount,
// graph/support/checked_math.h, before they build a tensor).
int64_t NumElements(const Dims& dims);

class Tensor {
 public:
  Tensor() = default;  // undefined
  // Allocates zero-initialized storage.
  Tensor(DType dtype, Dims dims);

  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, Dims dims) {
    Tensor t(DTypeOf<T>(), std::move(dims));
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size() && i < static_cast<size_t>(t.numel()); ++i) p[i] = values[i];
    return t;
  }
  template <typename T>
  static Tensor Scalar(T value) { return FromVector<T>({value}, {}); }
  // A numeric tensor over `bytes` (64-byte aligned, nbytes() of them) that
  // someone else holds: `owner` keeps them alive while any copy of the
  // tensor lives (a mapped file's constants, read without a copy). The
  // bytes must stay writable by the tensor, as any tensor's are (a
  // copy-on-write mapping).
  static Tensor Borrowed(DType dtype, Dims dims, void* bytes, std::shared_ptr<const void> owner);

  bool defined() const { return dtype_ != DType::kUndefined; }
  DType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[i]; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * DTypeSize(dtype_); }

  template <typename T> T* data() { return reinterpret_cast<T*>(raw()); }
  template <typename T> const T* data() const { return reinterpret_cast<const T*>(raw()); }
  template <typename T> std::span<T> span() { return {data<T>(), static_cast<size_t>(numel_)}; }
  template <typename T> std::span<const T> span() const {
    return {data<T>(), static_cast<size_t>(numel_)};
  }
  void* raw();
  const void* raw() const;
  // Raw bytes of a numeric tensor.
  std::span<const uint8_t> bytes() const {
    return {static_cast<const uint8_t*>(raw()), nbytes()};
  }

  // Same storage, other dims (numel must match).
  Tensor Reshaped(Dims dims) const;
  // Deep copy with its own storage.
  Tensor Clone() const;
  // A copy of rows [first, first + count) of the leading dim (a numeric
  // tensor of rank 1 or more; the range must lie inside it): one shard of a
  // batch.
  Tensor LeadingRows(int64_t first, int64_t count) const;
  bool SharesStorageWith(const Tensor& o) const { return storage_ && storage_ == o.storage_; }
  // Same dtype, dims and bytes (strings compared by value).
  bool Equals(const Tensor& o) const;
  // Element i converted to double / int64 (numeric dtypes).
  double GetDouble(int64_t i) const;
  int64_t GetInt(int64_t i) const;
  // A 64-bit content hash of dtype, dims and data.
  uint64_t Hash() const;

 private:
  struct Storage;
  struct InlineStorage;
  DType dtype_ = DType::kUndefined;
  Dims dims_;
  int64_t numel_ = 0;
  std::shared_ptr<Storage> storage_;
};

// Converts a tensor to another dtype with ONNX Cast semantics.
Tensor CastTensor(const Tensor& t, DType to);

}  // namespace kiln
