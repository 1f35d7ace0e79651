//===- window_attrs.h - The window attributes of convolutions and pools -*- C++ -*-===//
//
// Conv, ConvTranspose and the pools read their input through a window:
// kernel_shape, strides, dilations, pads, auto_pad and ceil_mode. The
// kernels, their shape inference and the gradient rules read those
// attributes here, validated, with ONNX's defaults, and resolve auto_pad
// into explicit pads against the input's extents.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/ir/graph.h"

namespace kiln {

// Kernels index spatial dims with fixed-size arrays of this extent.
inline constexpr int kMaxSpatial = 8;
// Window attribute values are at most this, so index arithmetic on them
// cannot overflow.
inline constexpr int64_t kMaxAttrValue = (int64_t{1} << 31) - 1;

inline int64_t FloorDiv(int64_t a, int64_t b) {  // b > 0
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
inline int64_t CeilDiv(int64_t a, int64_t b) { return -FloorDiv(-a, b); }

// Window attributes shared by convolutions and pools, validated and filled
// with defaults for `nsp` spatial dims.
struct WindowAttrs {
  int nsp = 0;
  std::vector<int64_t> kernel;     // empty when unknown
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;       // begin..., end...
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;
};

// Reads kernel_shape/strides/dilations/pads/auto_pad/ceil_mode. `kernel_from_w`
// supplies kernel_shape when the attribute is absent (from the weights);
// when neither is known, `kernel` stays empty unless `require_kernel`.
absl::Status ReadWindowAttrs(const Node& n, int nsp, const std::vector<int64_t>* kernel_from_w,
                             bool require_kernel, WindowAttrs& a);

// Output extent of spatial dim `d` for input extent `in`; fills in the pads
// of that dim for SAME_*/VALID.
absl::StatusOr<int64_t> WindowOutDim(WindowAttrs& a, int d, int64_t in);

// Output spatial dims for known input dims (all static).
absl::StatusOr<Dims> WindowOutDims(WindowAttrs& a, const Dims& in_spatial);

}  // namespace kiln
