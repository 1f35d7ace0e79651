//===- window.h - The sliding window of a convolution or pooling node -*- C++ -*-===//
//
// Conv, MaxPool and AveragePool read their input through a window
// (kernel_shape, strides, dilations, pads or auto_pad, group). WindowOf
// resolves those attributes once, against the node's static shapes, in
// 2-D terms: a 1-D window is a 2-D one of height 1 (H = KH = OH = 1).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"

namespace kiln::target {

struct Window2d {
  int64_t n = 1, c = 1, h = 1, w = 1;  // X [N, C, H, W]
  int64_t oc = 1, oh = 1, ow = 1;      // Y [N, OC, OH, OW] (OC = C for pools)
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t dilation[2] = {1, 1};
  int64_t pad_begin[2] = {0, 0};
  int64_t pad_end[2] = {0, 0};
  int64_t groups = 1;                  // Conv's group (1 for pools)
  bool one_d = false;                  // X was [N, C, L]

  // The window covers each input element once, with no padding: a 1x1
  // kernel at stride 1 (Y is then X's spatial extent).
  bool pointwise() const;
  // One input and one output channel per group (a depthwise convolution
  // without a channel multiplier).
  bool depthwise() const { return groups > 1 && c == groups && oc == groups; }
};

// The window of a Conv, MaxPool or AveragePool node whose input and first
// output have static shapes of rank 3 or 4 (NCL or NCHW); auto_pad SAME_*
// padding is resolved. An error says what does not fit (other ranks,
// missing shapes, attributes that disagree with the shapes).
absl::StatusOr<Window2d> WindowOf(const Node& node);

}  // namespace kiln::target
