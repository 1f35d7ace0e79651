//===- dtype_dispatch.h - Run a generic lambda for a runtime dtype -*- C++ -*-===//
//
// DispatchNumeric(dtype, []<typename T>() { ... }) instantiates the lambda for
// the C++ type of `dtype`. Kernels check dtypes before dispatching, so reaching
// an unsupported dtype here is a bug in kiln and aborts with a message.
//
// Element conversion follows ONNX Cast: float to integer truncates toward zero
// (NaN becomes 0, out-of-range values saturate so the conversion is defined),
// anything to bool is "!= 0", f16/bf16 round to nearest even.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

#include "graph/ir/dtype.h"

namespace kiln {

[[noreturn]] inline void DispatchFailure(DType t) {
  std::fprintf(stderr, "kiln: internal error: no kernel instantiation for dtype %s\n",
               std::string(DTypeName(t)).c_str());
  std::abort();
}

template <typename T> constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <typename T> constexpr bool kIsFloatLike = std::is_floating_point_v<T> || kIsHalfLike<T>;

template <typename T>
inline double ToDouble(T v) {
  if constexpr (kIsHalfLike<T>) return static_cast<float>(v);
  else return static_cast<double>(v);
}

template <typename U>
inline U FromDouble(double v) {
  if constexpr (std::is_same_v<U, bool>) {
    return v != 0;
  } else if constexpr (kIsHalfLike<U>) {
    return U(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<U>) {
    return static_cast<U>(v);
  } else {
    if (std::isnan(v)) return 0;
    constexpr double lo = static_cast<double>(std::numeric_limits<U>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<U>::max());
    if (v <= lo) return std::numeric_limits<U>::lowest();
    if (v >= hi) return std::numeric_limits<U>::max();
    return static_cast<U>(v);
  }
}

// Converts one element with ONNX Cast semantics.
template <typename U, typename T>
inline U ConvertElement(T v) {
  if constexpr (std::is_same_v<U, T>) {
    return v;
  } else if constexpr (std::is_integral_v<T> && std::is_integral_v<U>) {
    if constexpr (std::is_same_v<U, bool>) return v != 0;
    else return static_cast<U>(v);  // Two's-complement wrap, as numpy does.
  } else if constexpr (std::is_integral_v<T> && kIsHalfLike<U>) {
    return U(static_cast<float>(v));
  } else if constexpr (kIsHalfLike<T> && kIsHalfLike<U>) {
    return U(static_cast<float>(v));
  } else {
    return FromDouble<U>(ToDouble(v));
  }
}

#define KILN_DISPATCH_CASE(DT, T) \
  case DType::DT:                 \
    return f.template operator()<T>();

// Floats only: f32, f64, f16, bf16.
template <typename F>
decltype(auto) DispatchFloat(DType t, F&& f) {
  switch (t) {
    KILN_DISPATCH_CASE(kF32, float)
    KILN_DISPATCH_CASE(kF64, double)
    KILN_DISPATCH_CASE(kF16, Half)
    KILN_DISPATCH_CASE(kBF16, BFloat16)
    default: DispatchFailure(t);
  }
}

// Integers only (signed and unsigned, not bool).
template <typename F>
decltype(auto) DispatchInteger(DType t, F&& f) {
  switch (t) {
    KILN_DISPATCH_CASE(kI8, int8_t)
    KILN_DISPATCH_CASE(kI16, int16_t)
    KILN_DISPATCH_CASE(kI32, int32_t)
    KILN_DISPATCH_CASE(kI64, int64_t)
    KILN_DISPATCH_CASE(kU8, uint8_t)
    KILN_DISPATCH_CASE(kU16, uint16_t)
    KILN_DISPATCH_CASE(kU32, uint32_t)
    KILN_DISPATCH_CASE(kU64, uint64_t)
    default: DispatchFailure(t);
  }
}

// Every numeric dtype, bool included.
template <typename F>
decltype(auto) DispatchNumeric(DType t, F&& f) {
  switch (t) {
    KILN_DISPATCH_CASE(kF32, float)
    KILN_DISPATCH_CASE(kF64, double)
    KILN_DISPATCH_CASE(kF16, Half)
    KILN_DISPATCH_CASE(kBF16, BFloat16)
    KILN_DISPATCH_CASE(kI8, int8_t)
    KILN_DISPATCH_CASE(kI16, int16_t)
    KILN_DISPATCH_CASE(kI32, int32_t)
    KILN_DISPATCH_CASE(kI64, int64_t)
    KILN_DISPATCH_CASE(kU8, uint8_t)
    KILN_DISPATCH_CASE(kU16, uint16_t)
    KILN_DISPATCH_CASE(kU32, uint32_t)
    KILN_DISPATCH_CASE(kU64, uint64_t)
    KILN_DISPATCH_CASE(kBool, bool)
    default: DispatchFailure(t);
  }
}

// Every numeric dtype; used where the meaning is "any element".
template <typename F>
decltype(auto) DispatchAll(DType t, F&& f) {
  return DispatchNumeric(t, std::forward<F>(f));
}

// Dispatch on the element size only: for ops that move data without looking
// at it (Transpose, Gather, Concat, ...). Strings dispatch to std::string.
template <typename F>
decltype(auto) DispatchBySize(DType t, F&& f) {
  if (t == DType::kString) return f.template operator()<std::string>();
  switch (DTypeSize(t)) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    case 8: return f.template operator()<uint64_t>();
    case 16: {
      struct alignas(16) U128 { uint64_t a, b; };
      return f.template operator()<U128>();
    }
    default: DispatchFailure(t);
  }
}

#undef KILN_DISPATCH_CASE

}  // namespace kiln
