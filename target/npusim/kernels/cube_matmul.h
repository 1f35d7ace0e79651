//===- cube_matmul.h - GEMM kernels on the cube ------------------*- C++ -*-===//
//
// The generator of tiled, multi-core, double-buffered GEMM programs for the
// simulated NPU: MatMul (2-D and batched with numpy broadcasting) and Gemm
// (transA/transB, alpha, beta, a broadcast C), f32 / f16 / bf16 with fp32
// accumulation. docs/npusim-kernels.md ("cube") describes the program.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/isa/isa.h"
#include "target/backend/tile_lowering.h"
#include "target/npusim/kernels/cube_figures.h"
#include "target/npusim/kernels/kernel.h"

namespace kiln::target::npusim {

class Emitter;

// A GEMM as the program computes it: for each output batch index,
// Y[M,N] = alpha * op(A) x op(B) + beta * C, then relu when asked.
struct GemmSpec {
  std::string name = "gemm";
  sim::DType dtype = sim::DType::kF16;  // A, B, C and Y
  // Y's dtype where it is not `dtype`: f32 from f16/bf16 operands (a Cast
  // epilogue; FIXP converts from L0C's f32 either way).
  sim::DType y_dtype = sim::DType::kNone;
  sim::DType YDType() const { return y_dtype == sim::DType::kNone ? dtype : y_dtype; }
  int64_t M = 1, N = 1, K = 1;
  bool trans_a = false, trans_b = false;
  // Elements between consecutive stored rows of A (of op(A) [M, K], or of
  // A^T [K, M] when trans_a) and of B ([K, N], or B^T [N, K]); 0: the
  // matrices are contiguous. A strided view (attention's heads read where
  // the projection wrote them) sets them, with its own batch strides.
  int64_t lda = 0, ldb = 0;
  int64_t ARowStride() const { return lda ? lda : trans_a ? M : K; }
  int64_t BRowStride() const { return ldb ? ldb : trans_b ? K : N; }
  // Output batch dims and, per dim, the element stride of A's and B's
  // matrices (0 where that operand broadcasts).
  std::vector<int64_t> batch_dims;
  std::vector<int64_t> a_batch_stride, b_batch_stride;
  float alpha = 1, beta = 1;
  // A GELU of the result (kiln.Gelu, erf or tanh form), in the UB
  // epilogue after C and the residual.
  enum class Gelu : uint8_t { kNone, kErf, kTanh } gelu = Gelu::kNone;
  enum class CKind { kNone, kRow, kCol, kFull, kScalar } c_kind = CKind::kNone;
  bool relu = false;
  // Program arguments: .arg lines in launch order and the indices of A, B,
  // C (-1: none) and Y among them.
  std::vector<std::string> arg_lines;
  std::vector<std::string> arg_names;
  int a_arg = 0, b_arg = 1, c_arg = -1, y_arg = 2;
  // A residual: a tensor laid out as Y (A's dtype) added after C, before the
  // relu, in the UB epilogue; its argument, -1: none.
  int r_arg = -1;
  sim::DType r_dtype = sim::DType::kNone;  // the residual's, where not `dtype` (f32 after a Cast)
  sim::DType RDType() const { return r_dtype == sim::DType::kNone ? dtype : r_dtype; }
  int max_blocks = 0;  // 0: all cores
  // The graph value bound to each argument (nullptr where none: the output,
  // a workspace), so that a constant A or B can be read as fractals.
  std::vector<const Value*> arg_values;
  // A / B are given as the fractal image (FractalConstant, kernel.h) of
  // op(A) [M, K] / op(B) [K, N] (transposition folded in, trans_a/trans_b
  // then false): each K stage of a tile is copied to L1 as one burst per band
  // of 16 rows instead of an nd2nz per matrix row. Set by UseFractalConstants.
  bool a_fractal = false, b_fractal = false;
  // Convolution mode (cube_conv.cc): the batch is `units` shares of the
  // work; block b takes units b, b + block_dim, ... and all the tiles of
  // each. Per unit, B is the unit's im2col matrix [K, N] (row-major, rows
  // padded to a multiple of 16 with zeros) that `emit_unit` builds in the
  // block's workspace slot at kUB, and the GEMM loads it with copy_gm_l1.
  struct ConvMode {
    int64_t units = 1;
    int64_t y_row_stride = 0;  // elements between rows of Y
    std::string ws;            // the workspace argument
    double unit_cycles = 0, unit_hbm_bytes = 0;  // the im2col of a unit, for the cost model
    int64_t ub_bytes = 0;  // UB the im2col uses, at the top of UB
    // A (the weights) may be read as fractals: `emit_unit` then sets kUA to
    // the unit's first output channel times ceil(K / K0) * 32 bytes (every
    // unit starts on a multiple of 16 channels).
    bool a_fractal_ok = false;
    // A is in the workspace at kUA (row-major [M, K], rows finite up to the
    // next multiple of K0 past K) rather than the argument a_arg.
    bool a_in_ws = false;
    // When set, B row k (k < K rounded up to 16) is at kBOff + b_row_offsets[k]
    // bytes (the K stages are unrolled) rather than at kBOff + k*N*elements.
    std::vector<int64_t> b_row_offsets;
    // When out_rows > 0, N is out_rows rows of out_pitch columns of which the
    // first out_cols are Y's (the rest are discarded): tiles leave through
    // UB, one copy per row, to Y columns r*out_cols ...
    int64_t out_rows = 0, out_pitch = 0, out_cols = 0;
    std::function<void(Emitter&)> emit_init;  // after the GEMM's flags: sets kUB, its own flags
    // kUnit -> kUA, kUY, kUC (byte offsets of the unit's A, Y, C) and the
    // im2col; MTE2 may read the slot after a `wait_flag MTE3, MTE2, 6`.
    std::function<void(Emitter&)> emit_unit;
    std::function<void(Emitter&)> emit_fini;  // takes back its flags
  };
  std::optional<ConvMode> conv;
};

// `s` as the shared GEMM cost model sees it: the problem (shape, dtypes,
// transpositions) and what the program adds (fractal operands, an
// epilogue through UB, convolution units, reserved UB).
struct CubeGemm {
  tile::GemmProblem problem;
  tile::GemmKernelTraits traits;
};
CubeGemm ProblemOf(const GemmSpec& s);

// Marks the constant operands of `s` that tiling `t` lets the program read as
// fractals (a_fractal / b_fractal, with their argument lines) and returns
// them for GeneratedKernel::fractal_constants.
std::vector<FractalConstant> UseFractalConstants(GemmSpec& s, const tile::GemmTiling& t);

// Bytes from one row of A (not transposed) to the next in its argument: K
// elements, or, read as fractals, a 16-row band's ceil(K / K0) fractals per
// 16 rows (for rows that start a band).
int64_t ARowBytes(const GemmSpec& s);

// The program for `s` with tiling `t` (from tile::ChooseGemmTiling with
// ProblemOf(s)), as .kasm text.
absl::StatusOr<std::string> GemmKasm(const GemmSpec& s, const tile::GemmTiling& t, const sim::Machine& m);

// Tiling, program and estimate for `s` (the tiling also in `*chosen` when given).
absl::StatusOr<GeneratedKernel> GenerateGemm(const GemmSpec& s, const sim::Machine& m,
                                             tile::GemmTiling* chosen = nullptr);

// The GEMM `node` computes as the program runs it: a MatMul, a Gemm, a
// pointwise Conv (1x1 kernel, stride 1, no padding, one group), or a
// kiln.Fused group of a MatMul (its operands possibly read through
// Transposes that keep them matrix views) or a Gemm followed by a Mul by a
// scalar, an Add of a row-broadcast (or one-element) bias, an Add of a
// residual (a tensor of the result's type), a Relu and a Cast to f32, each
// optional. `p` is the shared lowering's problem of `node`
// (tile::GemmProblemOf, cube_gemm_spec.cc); arguments are named from the
// node's inputs (a, b, c, y; x, w, bias, y; in<i>, y), and the body
// constants the program reads go to `constant_args` (arguments after Y).
// An error says why the cube does not run it.
absl::StatusOr<GemmSpec> GemmSpecOf(const Node& node, const tile::GemmProblem& p, int max_blocks,
                                    std::vector<const Value*>* constant_args);
// The same with the problem read here.
absl::StatusOr<GemmSpec> GemmSpecOfNode(const Node& node, int max_blocks,
                                        std::vector<const Value*>* constant_args = nullptr);

// Whether `v`, added to a matrix op's result `y`, is a residual the GEMM's
// epilogue reads per tile (a tensor of y's own type, not a constant) rather
// than a bias.
bool IsResidual(const Value& v, const Value& y);

}  // namespace kiln::target::npusim
