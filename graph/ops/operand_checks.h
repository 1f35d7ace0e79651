//===- operand_checks.h - Checks of operands and their errors ---*- C++ -*-===//
//
// What the resample, selection, quantization, text, signal and training
// families share: the text of dims and nodes in errors, dtype checks in
// inference, one-element inputs, and the guard on output sizes.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "graph/ops/op_registry.h"

namespace kiln {

inline std::string DimsText(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) absl::StrAppend(&s, i ? "," : "", d[i]);
  return s + "]";
}

// Outputs larger than this are refused (a user error, not an allocation crash).
constexpr int64_t kMaxElements = int64_t{1} << 32;

template <typename Ctx>
absl::Status CheckOutputSize(const Ctx& ctx, const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return ctx.Error("output shape ", DimsText(dims), " has a negative dim");
    if (d == 0) return absl::OkStatus();
  }
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements)
      return ctx.Error("output shape ", DimsText(dims), " is too large");
  return absl::OkStatus();
}

inline std::string Label(const Node& n) {
  return n.name().empty() ? absl::StrCat("node (", n.QualifiedOp(), ")")
                          : absl::StrCat("node '", n.name(), "' (", n.QualifiedOp(), ")");
}

// True when `t` is a tensor type whose dtype is known and not in `ok`.
inline bool DTypeIsNot(const Type& t, std::initializer_list<DType> ok) {
  if (!t.is_tensor() || t.dtype() == DType::kUndefined) return false;
  return std::find(ok.begin(), ok.end(), t.dtype()) == ok.end();
}

// Reads a one-element integer input.
template <typename Ctx>
absl::StatusOr<int64_t> ScalarInt(const Ctx& ctx, const Tensor& t, absl::string_view what) {
  if (t.numel() != 1 || !IsInteger(t.dtype()))
    return ctx.Error(what, " must be a single integer, got ", DTypeName(t.dtype()), DimsText(t.dims()));
  return t.GetInt(0);
}

template <typename Ctx>
absl::StatusOr<double> ScalarFloat(const Ctx& ctx, const Tensor& t, absl::string_view what) {
  if (t.numel() != 1 || t.dtype() == DType::kString || t.dtype() == DType::kBool)
    return ctx.Error(what, " must be a single number, got ", DTypeName(t.dtype()), DimsText(t.dims()));
  return t.GetDouble(0);
}

}  // namespace kiln
