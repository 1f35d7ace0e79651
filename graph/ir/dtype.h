//===- dtype.h - Element types of tensors -----------------------*- C++ -*-===//
//
// DType names the element type of a tensor. The text form ("f32", "i64", ...)
// is what the .kir printer and parser use.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/strings/string_view.h"

#include "graph/support/float16.h"

namespace kiln {

enum class DType : uint8_t {
  kUndefined,
  kF32, kF16, kBF16, kF64,
  kI8, kI16, kI32, kI64,
  kU8, kU16, kU32, kU64,
  kBool, kString,
  kC64, kC128,
};

// "f32", "bf16", "i64", "bool", "str", ...
absl::string_view DTypeName(DType t);
std::optional<DType> ParseDType(absl::string_view name);
// Bytes per element; strings report sizeof(std::string), undefined 0.
size_t DTypeSize(DType t);
bool IsFloat(DType t);     // f16, bf16, f32, f64
bool IsInteger(DType t);   // signed or unsigned integers (not bool)
bool IsSigned(DType t);    // signed integers and floats
bool IsNumeric(DType t);   // floats, integers and bool

// Conversion to and from ONNX's TensorProto.DataType numbers, which attributes
// such as Cast's `to` carry.
std::optional<DType> DTypeFromOnnx(int64_t onnx_type);
int DTypeToOnnx(DType t);

template <typename T> constexpr DType DTypeOf();
template <> constexpr DType DTypeOf<float>() { return DType::kF32; }
template <> constexpr DType DTypeOf<double>() { return DType::kF64; }
template <> constexpr DType DTypeOf<Half>() { return DType::kF16; }
template <> constexpr DType DTypeOf<BFloat16>() { return DType::kBF16; }
template <> constexpr DType DTypeOf<int8_t>() { return DType::kI8; }
template <> constexpr DType DTypeOf<int16_t>() { return DType::kI16; }
template <> constexpr DType DTypeOf<int32_t>() { return DType::kI32; }
template <> constexpr DType DTypeOf<int64_t>() { return DType::kI64; }
template <> constexpr DType DTypeOf<uint8_t>() { return DType::kU8; }
template <> constexpr DType DTypeOf<uint16_t>() { return DType::kU16; }
template <> constexpr DType DTypeOf<uint32_t>() { return DType::kU32; }
template <> constexpr DType DTypeOf<uint64_t>() { return DType::kU64; }
template <> constexpr DType DTypeOf<bool>() { return DType::kBool; }
template <> constexpr DType DTypeOf<std::string>() { return DType::kString; }

}  // namespace kiln
