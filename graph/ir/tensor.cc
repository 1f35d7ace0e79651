//===- tensor.cc - Dense host tensors with shared storage ----------------===//
#include "graph/ir/tensor.h"

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/hash/hash.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "graph/ir/dtype_dispatch.h"
#include "graph/support/checked_math.h"

namespace kiln {

int64_t NumElements(const Dims& dims) { return CheckedProduct(dims).value_or(-1); }

struct Tensor::Storage {
  void* bytes = nullptr;  // 64-byte aligned
  void* block = nullptr;  // a separate allocation holding `bytes`, if any
  std::shared_ptr<const void> owner;  // who holds `bytes` when the tensor borrows them
  std::vector<std::string> strings;
  ~Storage() { std::free(block); }
};

namespace {

constexpr size_t kAlignment = 64;

// Payloads of at most kInlinePayload bytes (scalars, shapes, small weights:
// most constants of a graph) live in the same allocation as their Storage
// and its shared_ptr control block, aligned by hand within `buf`: one heap
// block per tensor instead of two, and reading a small constant touches one
// place in memory. glibc's aligned_alloc, used for larger payloads, also
// bypasses its per-thread caches and splits a larger chunk on every call.
constexpr size_t kInlinePayload = 64;

}  // namespace

struct Tensor::InlineStorage : Tensor::Storage {
  unsigned char buf[kInlinePayload + kAlignment - 1];
};

Tensor::Tensor(DType dtype, Dims dims) : dtype_(dtype), dims_(std::move(dims)) {
  numel_ = NumElements(dims_);
  assert(numel_ >= 0 && "negative dimension in Tensor");
  if (dtype == DType::kString) {
    storage_ = std::make_shared<Storage>();
    storage_->strings.resize(numel_);
    return;
  }
  size_t n = nbytes();
  size_t alloc = (n + kAlignment - 1) / kAlignment * kAlignment;
  if (alloc == 0) alloc = kAlignment;
  if (alloc <= kInlinePayload) {
    auto s = std::make_shared<InlineStorage>();
    uintptr_t p = reinterpret_cast<uintptr_t>(s->buf);
    s->bytes = reinterpret_cast<void*>((p + kAlignment - 1) & ~uintptr_t{kAlignment - 1});
    storage_ = std::move(s);
  } else {
    storage_ = std::make_shared<Storage>();
    storage_->block = storage_->bytes = std::aligned_alloc(kAlignment, alloc);
    if (!storage_->bytes) throw std::bad_alloc();
  }
  std::memset(storage_->bytes, 0, alloc);
}

Tensor Tensor::Borrowed(DType dtype, Dims dims, void* bytes, std::shared_ptr<const void> owner) {
  assert(dtype != DType::kString && "a borrowed tensor is numeric");
  assert(reinterpret_cast<uintptr_t>(bytes) % kAlignment == 0 && "borrowed bytes are 64-byte aligned");
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.numel_ = NumElements(t.dims_);
  t.storage_ = std::make_shared<Storage>();
  t.storage_->bytes = bytes;
  t.storage_->owner = std::move(owner);
  return t;
}

void* Tensor::raw() {
  if (!storage_) return nullptr;
  return dtype_ == DType::kString ? static_cast<void*>(storage_->strings.data()) : storage_->bytes;
}

const void* Tensor::raw() const {
  if (!storage_) return nullptr;
  return dtype_ == DType::kString ? static_cast<const void*>(storage_->strings.data())
                                  : storage_->bytes;
}

Tensor Tensor::Reshaped(Dims dims) const {
  assert(NumElements(dims) == numel_ && "Reshaped changes the element count");
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

Tensor Tensor::LeadingRows(int64_t first, int64_t count) const {
  assert(rank() > 0 && first >= 0 && count >= 0 && first + count <= dims_[0] && "LeadingRows outside the tensor");
  Dims dims = dims_;
  dims[0] = count;
  Tensor s(dtype_, dims);
  const size_t row = dims_[0] > 0 ? nbytes() / static_cast<size_t>(dims_[0]) : 0;
  if (s.nbytes() > 0) std::memcpy(s.raw(), static_cast<const uint8_t*>(raw()) + first * row, s.nbytes());
  return s;
}

Tensor Tensor::Clone() const {
  if (!defined()) return Tensor();
  Tensor t(dtype_, dims_);
  if (dtype_ == DType::kString) {
    t.storage_->strings = storage_->strings;
  } else {
    std::memcpy(t.raw(), raw(), nbytes());
  }
  return t;
}

bool Tensor::Equals(const Tensor& o) const {
  if (dtype_ != o.dtype_ || dims_ != o.dims_) return false;
  if (dtype_ == DType::kString) return storage_->strings == o.storage_->strings;
  return nbytes() == 0 || std::memcmp(raw(), o.raw(), nbytes()) == 0;
}

// A bool element read as its byte: any non-zero byte is true (bytes from a
// file or from device memory need not be 0 or 1, and loading another value
// as a bool is undefined).
static bool BoolAt(const Tensor& t, int64_t i) { return static_cast<const uint8_t*>(t.raw())[i] != 0; }

double Tensor::GetDouble(int64_t i) const {
  return DispatchAll(dtype_, [&]<typename T>() -> double {
    if constexpr (std::is_same_v<T, bool>) return BoolAt(*this, i) ? 1.0 : 0.0;
    else return ToDouble(data<T>()[i]);
  });
}

int64_t Tensor::GetInt(int64_t i) const {
  return DispatchAll(dtype_, [&]<typename T>() -> int64_t {
    if constexpr (std::is_same_v<T, bool>) return BoolAt(*this, i) ? 1 : 0;
    else if constexpr (std::is_integral_v<T>) return static_cast<int64_t>(data<T>()[i]);
    else return static_cast<int64_t>(ToDouble(data<T>()[i]));
  });
}

uint64_t Tensor::Hash() const {
  if (dtype_ == DType::kString)
    return absl::HashOf(static_cast<int>(dtype_), dims_, storage_->strings);
  absl::string_view b(static_cast<const char*>(raw()), nbytes());
  return absl::HashOf(static_cast<int>(dtype_), dims_, b);
}

// The shortest decimal text that reads back to the same value (as numpy
// prints it).
template <typename T>
static std::string ShortestString(T v) {
  char buf[64];
  std::to_chars_result r;
  if constexpr (std::is_same_v<T, double>) r = std::to_chars(buf, buf + sizeof buf, v);
  else r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  return std::string(buf, r.ptr);
}

Tensor CastTensor(const Tensor& t, DType to) {
  if (t.dtype() == to) return t.Clone();
  Tensor out(to, t.dims());
  int64_t n = t.numel();
  if (t.dtype() == DType::kString) {
    const std::string* src = t.data<std::string>();
    DispatchNumeric(to, [&]<typename U>() {
      U* dst = out.data<U>();
      for (int64_t i = 0; i < n; ++i) {
        double v = 0;
        const std::string& s = src[i];
        if constexpr (std::is_integral_v<U> && !std::is_same_v<U, bool>) {
          // Integers parse exactly (beyond 2^53) when the text is an integer.
          int64_t iv;
          uint64_t uv;
          if (absl::SimpleAtoi(s, &iv)) {
            dst[i] = static_cast<U>(iv);
            continue;
          }
          if (absl::SimpleAtoi(s, &uv)) {
            dst[i] = static_cast<U>(uv);
            continue;
          }
        }
        if (s == "INF" || s == "inf" || s == "+INF" || s == "+inf" || s == "Infinity")
          v = INFINITY;
        else if (s == "-INF" || s == "-inf" || s == "-Infinity")
          v = -INFINITY;
        else if (s == "NaN" || s == "nan" || s == "NAN")
          v = NAN;
        else if (!absl::SimpleAtod(s, &v))
          v = 0;
        dst[i] = FromDouble<U>(v);
      }
    });
    return out;
  }
  if (to == DType::kString) {
    std::string* dst = out.data<std::string>();
    DispatchNumeric(t.dtype(), [&]<typename T>() {
      const T* src = t.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        double v = ToDouble(src[i]);
        if (std::isnan(v)) dst[i] = "NaN";
        else if (std::isinf(v)) dst[i] = v > 0 ? "INF" : "-INF";
        else if constexpr (std::is_same_v<T, bool>) dst[i] = src[i] ? "True" : "False";
        else if constexpr (std::is_integral_v<T>) dst[i] = absl::StrCat(src[i]);
        else dst[i] = ShortestString(src[i]);
      }
    });
    return out;
  }
  DispatchNumeric(t.dtype(), [&]<typename T>() {
    const T* src = t.data<T>();
    DispatchNumeric(to, [&]<typename U>() {
      U* dst = out.data<U>();
      for (int64_t i = 0; i < n; ++i) dst[i] = ConvertElement<U>(src[i]);
    });
  });
  return out;
}

}  // namespace kiln
