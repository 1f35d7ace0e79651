//===- checked_math.h - Size arithmetic that cannot wrap ---------*- C++ -*-===//
//
// The one home for the arithmetic of sizes kiln computes from what it reads
// (element counts, byte sizes, address ranges): a file, an artifact or a
// program may declare any numbers, so every product and sum of them is
// checked here and an overflow is an error, never a wrapped value that a
// later bounds check lets through. Header-only: graph/ir, the readers and
// sim/ (which sees no graph) all use it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kiln {

// a * b and a + b, or nullopt where the result does not fit int64_t.
inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The product of `dims` (1 for none), or nullopt where a dim is negative or
// the product of the dims other than zeros does not fit int64_t: a shape
// like [2^40, 2^40, 0] holds no element, but its strides would not fit
// either, so no reader takes it.
inline std::optional<int64_t> CheckedProduct(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    zero |= d == 0;
    std::optional<int64_t> m = CheckedMul(n, d == 0 ? 1 : d);
    if (!m) return std::nullopt;
    n = *m;
  }
  return zero ? 0 : n;
}

// The elements of a tensor of `dims`, or an InvalidArgument error naming
// `what` when a dim is negative or the count overflows.
inline absl::StatusOr<int64_t> ElementCount(absl::Span<const int64_t> dims, absl::string_view what) {
  std::optional<int64_t> n = CheckedProduct(dims);
  if (!n) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": shape [", absl::StrJoin(dims, ","), "] ",
                                                   "has a negative dimension or more elements than fit 64 bits"));
  }
  return *n;
}

// The bytes of a tensor of `dims` and `element_bytes` per element, checked
// the same way.
inline absl::StatusOr<int64_t> ByteSize(absl::Span<const int64_t> dims, int64_t element_bytes,
                                        absl::string_view what) {
  absl::StatusOr<int64_t> n = ElementCount(dims, what);
  if (!n.ok()) return n.status();
  std::optional<int64_t> bytes = CheckedMul(*n, element_bytes);
  if (!bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": shape [", absl::StrJoin(dims, ","), "] has more bytes than fit 64 bits"));
  }
  return *bytes;
}

}  // namespace kiln
