//===- dtype.cc - Element types of tensors --------------------------------===//
#include "graph/ir/dtype.h"

#include <array>

namespace kiln {
namespace {

struct DTypeInfo {
  DType type;
  absl::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 17> kInfo = {{
    {DType::kUndefined, "undef", 0},
    {DType::kF32, "f32", 4},
    {DType::kF16, "f16", 2},
    {DType::kBF16, "bf16", 2},
    {DType::kF64, "f64", 8},
    {DType::kI8, "i8", 1},
    {DType::kI16, "i16", 2},
    {DType::kI32, "i32", 4},
    {DType::kI64, "i64", 8},
    {DType::kU8, "u8", 1},
    {DType::kU16, "u16", 2},
    {DType::kU32, "u32", 4},
    {DType::kU64, "u64", 8},
    {DType::kBool, "bool", 1},
    {DType::kString, "str", sizeof(std::string)},
    {DType::kC64, "c64", 8},
    {DType::kC128, "c128", 16},
}};

}  // namespace

absl::string_view DTypeName(DType t) { return kInfo[static_cast<size_t>(t)].name; }

std::optional<DType> ParseDType(absl::string_view name) {
  for (const DTypeInfo& info : kInfo)
    if (info.name == name) return info.type;
  return std::nullopt;
}

size_t DTypeSize(DType t) { return kInfo[static_cast<size_t>(t)].size; }

static constexpr std::array<DType, 17> kOnnxOrder = {
    DType::kUndefined, DType::kF32, DType::kU8, DType::kI8, DType::kU16, DType::kI16,
    DType::kI32, DType::kI64, DType::kString, DType::kBool, DType::kF16, DType::kF64,
    DType::kU32, DType::kU64, DType::kC64, DType::kC128, DType::kBF16};

std::optional<DType> DTypeFromOnnx(int64_t onnx_type) {
  if (onnx_type <= 0 || onnx_type >= static_cast<int64_t>(kOnnxOrder.size())) return std::nullopt;
  return kOnnxOrder[onnx_type];
}

int DTypeToOnnx(DType t) {
  for (size_t i = 0; i < kOnnxOrder.size(); ++i)
    if (kOnnxOrder[i] == t) return static_cast<int>(i);
  return 0;
}

bool IsFloat(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64;
}

bool IsInteger(DType t) {
  switch (t) {
    case DType::kI8: case DType::kI16: case DType::kI32: case DType::kI64:
    case DType::kU8: case DType::kU16: case DType::kU32: case DType::kU64:
      return true;
    default:
      return false;
  }
}

bool IsSigned(DType t) {
  return IsFloat(t) || t == DType::kI8 || t == DType::kI16 || t == DType::kI32 ||
         t == DType::kI64;
}

bool IsNumeric(DType t) { return IsFloat(t) || IsInteger(t) || t == DType::kBool; }

}  // namespace kiln
