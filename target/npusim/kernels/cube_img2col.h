//===- cube_img2col.h - Convolutions through img2col from L1 -----*- C++ -*-===//
//
// 2-D Conv of f16/bf16 tensors (NCHW, one group, any strides, pads and
// dilations, an optional bias) with the convolution's input built into L0A by
// the `img2col` load, as the Ascend cube does, instead of an im2col matrix
// written to and read back from global memory:
//
//   - the work splits into units (image, band of R output rows, group of
//     output channels); a block converts its unit's input rows (all input
//     channels, the window's halo included) from NCHW to C1HWC0 on the way
//     through UB (`vtranspose`) into its workspace slot, and copies that band
//     into L1 once;
//   - per tile of Nt*16 output channels, each K step (Kt of the c1*KH*KW
//     k-fractals) is an `img2col` of the band into L0A, a `load_l0b` of the
//     weights' step into L0B and one `mmad` (double-buffered);
//   - FIXP adds the bias and writes the tile to UB in f16/bf16; `vtranspose`
//     turns its [pixel][channel] rows into NCHW channel rows and MTE3 writes
//     them out;
//   - with X in NC1HWC0 the band is one copy into L1, and with Y in NC1HWC0
//     the tile goes out as 16-channel blocks of pixels (ConvLayouts).
//
// The weights are a fractal constant (FractalConstant::conv_weight): the
// matrix B[c1*KH*KW*16, Cout] whose row ((c1*KH + kh)*KW + kw)*16 + c0 holds
// input channel c1*16 + c0 at tap (kh, kw), laid out at compile time.
// docs/npusim-kernels.md ("Conv through img2col") describes the program.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "target/npusim/kernels/kernel.h"

namespace kiln::target::npusim {

// How the Conv's input X and output Y lie in global memory: NCHW, or
// NC1HWC0 ([N, C/16, H, W, 16]: 16-channel blocks of each pixel, the
// blocks of one c1 plane contiguous; C a multiple of 16), the layout img2col
// reads and the npusim driver keeps between convolutions. An NC1HWC0 X goes
// into L1 in one copy, with no conversion; an NC1HWC0 Y (f16 only) is
// written in 16-channel blocks.
struct ConvLayouts {
  bool x_c1hwc0 = false;
  bool y_c1hwc0 = false;
};

// One step of a fused Conv's epilogue that the vector unit applies to each
// output tile in UB.
struct ConvStep {
  enum Kind { kAdd, kRelu, kMaxs, kMins } kind;  // kAdd: the residual
  double scalar = 0;                             // kMaxs, kMins
};

// The convolution a cube kernel runs for `node` and the values it binds: a
// Conv node, or a kiln.Fused group whose body is a Conv followed by a chain
// of Relu, Clip to constant bounds and at most one Add of a tensor of the
// output's type (a residual). Leading Relus (and a lower bound of 0) are
// FIXP's relu; the rest are vector steps.
struct ConvOperands {
  const Node* conv = nullptr;  // in the body, for a group
  const Value *x = nullptr, *w = nullptr, *bias = nullptr, *res = nullptr, *y = nullptr;
  // The launch's arguments in order (the node's inputs, its output, then
  // body constants), each with its role: "x", "w", "bias", "res" or "y".
  std::vector<std::pair<const Value*, std::string>> args;
  std::vector<const Value*> constant_args;  // body constants among them
  bool fixp_relu = false;
  std::vector<ConvStep> steps;
};
absl::StatusOr<ConvOperands> ConvOperandsOf(const Node& node);

// A kernel for a 2-D, one-group Conv of f16, bf16 or f32 tensors through img2col, or
// an Unimplemented status that says why this program does not run it.
// A Conv it runs with NCHW tensors it also runs with either one in NC1HWC0
// (given whole blocks of 16 channels; f16 or f32 for Y). `node` may be a
// fused group (ConvOperandsOf): FIXP applies the relu, and the vector unit
// the other steps to each tile before it goes out (f16 and f32), reading the
// residual's tile in the output's layout.
absl::StatusOr<GeneratedKernel> GenerateImg2ColConv(const Node& node, const sim::Machine& m, int max_blocks,
                                                    ConvLayouts layouts = {});
// Whether GenerateImg2ColConv makes a kernel for `node` (OK) or why not,
// without making its program.
absl::Status Img2ColConvRuns(const Node& node, const sim::Machine& m, int max_blocks, ConvLayouts layouts = {});

}  // namespace kiln::target::npusim
