//===- cube_conv.h - Convolutions on the cube via im2col ----------*- C++ -*-===//
//
// 2-D (and 1-D) Conv, NCHW, f32/f16/bf16, with strides, pads, dilations,
// groups and a bias, as the GEMM of cube_matmul.h in its convolution mode:
// the work splits into units (image, group, a chunk of R output rows, a
// chunk of output channels); a block builds a unit's im2col matrix
// [Cin/group * KH * KW, R * Wo] in its own workspace slot by DMA (gathers
// GM -> UB, zero borders and scatters UB -> GM), then multiplies the unit's
// weight rows by it. docs/npusim-kernels.md ("cube") describes it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "absl/status/statusor.h"
#include "target/npusim/kernels/kernel.h"

namespace kiln::target::npusim {

// A kernel for a Conv node that is not pointwise, or a kiln.Fused group of
// one whose epilogue is a Relu (FIXP applies it as the tiles go out), or an
// Unimplemented status that says why the cube does not run it (a channel
// multiplier, rank other than 3 or 4, taps too wide for UB, other epilogues).
absl::StatusOr<GeneratedKernel> GenerateCubeConv(const Node& node, const sim::Machine& m, int max_blocks);

}  // namespace kiln::target::npusim
