//===- kernel.cc - Shared helpers of the npusim kernel generators ---------===//
#include "target/npusim/kernels/kernel.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::target::npusim {

sim::DType IsaDTypeOf(DType t) {
  switch (t) {
    case DType::kF32: return sim::DType::kF32;
    case DType::kF16: return sim::DType::kF16;
    case DType::kBF16: return sim::DType::kBF16;
    case DType::kI32: return sim::DType::kS32;
    case DType::kI8: return sim::DType::kS8;
    default: return sim::DType::kNone;
  }
}

absl::StatusOr<std::string> KasmArgLine(absl::string_view name, const Value& v) {
  if (!v.type().is_tensor() || !v.type().shape().is_static())
    return absl::FailedPreconditionError(absl::StrCat("'", v.name(), "' has no static shape"));
  sim::DType dt = IsaDTypeOf(v.type().dtype());
  if (dt == sim::DType::kNone)
    return absl::FailedPreconditionError(
        absl::StrCat("'", v.name(), "' is ", DTypeName(v.type().dtype()), ", which AI cores do not hold"));
  std::vector<int64_t> dims = v.type().shape().StaticDims();
  if (dims.empty()) dims = {1};
  return absl::StrCat(".arg ", name, " ", sim::DTypeName(dt), "[", absl::StrJoin(dims, ","), "]");
}

int64_t StaticBytes(const Type& t) {
  return t.shape().NumElements() * static_cast<int64_t>(DTypeSize(t.dtype()));
}

std::string KasmByteArgLine(absl::string_view name, const Value& v) {
  return absl::StrCat(".arg ", name, " s8[", std::max<int64_t>(StaticBytes(v.type()), 1), "]");
}

}  // namespace kiln::target::npusim
