//===- kernel_util.h - Helpers shared by reference kernels ------*- C++ -*-===//
//
// Broadcasting (numpy rules) for inference and for kernels, axis
// normalization, strides, and the common inference functions.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/tensor.h"
#include "graph/ir/type.h"
#include "graph/ops/op_registry.h"

namespace kiln {

// Row-major strides (in elements) of `dims`.
Dims StridesOf(const Dims& dims);

// Maps a possibly negative axis into [0, rank); errors when out of range.
absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank);
// The same for a list of axes; rejects duplicates.
absl::StatusOr<std::vector<int>> NormalizeAxes(const std::vector<int64_t>& axes, int rank);

// Numpy broadcast of two shapes; symbolic dims broadcast when equal or
// against 1. Errors on incompatible static dims.
absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b);
absl::StatusOr<Dims> BroadcastDims(const Dims& a, const Dims& b);

// For output index iteration under broadcasting: the strides of `in`
// aligned to `out` rank, 0 along broadcast dims.
Dims BroadcastStrides(const Dims& in, const Dims& out);

// Calls f(out_index, in_offsets...) for each element of the output of an
// n-ary broadcast, visiting outputs in order and advancing input offsets
// incrementally (no per-element division).
template <size_t N, typename F>
void ForEachBroadcast(const Dims& out, const std::array<Dims, N>& in_strides, F&& f) {
  int rank = static_cast<int>(out.size());
  int64_t total = NumElements(out);
  if (total == 0) return;
  std::array<int64_t, N> off{};
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < total; ++i) {
    f(i, off);
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[d] < out[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += in_strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= in_strides[k][d] * (out[d] - 1);
      idx[d] = 0;
    }
  }
}

// Reads an integer tensor (any integer dtype) as int64 values.
std::vector<int64_t> ToInt64Vector(const Tensor& t);
std::vector<double> ToDoubleVector(const Tensor& t);

// Common inference functions.
absl::Status InferSameAsInput0(InferContext& ctx);        // output 0 = type of input 0
absl::Status InferBroadcast(InferContext& ctx);           // output dtype of input 0, broadcast shape of all inputs
absl::Status InferBroadcastBool(InferContext& ctx);       // broadcast shape, bool dtype

// Shape of a static tensor type as Dims, or nullopt.
std::optional<Dims> StaticDims(const Type& t);

}  // namespace kiln
