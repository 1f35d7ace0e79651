//===- kernel.h - Kernels the npusim target generates for AI cores -*- C++ -*-===//
//
// The contract between the npusim compile driver (target/npusim) and the
// kernel generators (cube: MatMul/Gemm/Conv; vector: elementwise,
// reductions, normalizations, pooling).
//
// A generator takes one node of an optimized graph whose tensors all have
// static shapes and returns a program for the simulated AI cores
// (sim/isa/isa.h; the .kasm text of docs/kasm.md assembles to one) or a status that says why it cannot (the driver then
// places the node on the AICPU and records the message as the reason).
//
// Program arguments, in order: the node's present inputs (in input order),
// then its outputs, then the constants listed in constant_args (for a
// kiln.Fused node, constants of its body the kernel reads from global
// memory: weights, biases), then, when workspace_bytes > 0, one s8
// workspace argument of that many bytes. Each tensor argument has the tensor's dtype
// (f32, f16, bf16 -> F32/F16/BF16; i32 -> S32; i8 -> S8) and its dims; the
// driver passes the device address of each tensor, laid out row-major and
// dense, except for the constant arguments a kernel asks to read as
// fractals (GeneratedKernel::fractal_constants): for those the driver passes
// a constant holding the same matrix laid out once at compile time.
//
// The program runs as `block_dim` blocks spread over the machine's AI
// cores (block_idx tells a block which share of the work it does); it must
// not read or write outside its arguments, and must leave every flag it
// sets consumed (the simulator checks).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/ir/graph.h"
#include "sim/isa/isa.h"
#include "sim/machine/machine.pb.h"

namespace kiln::target::npusim {

// What the driver asks for.
struct KernelRequest {
  const Node* node = nullptr;
  const sim::Machine* machine = nullptr;  // defaults filled in (sim::LoadMachine / WithDefaults)
  // Matrix operand precision when the graph's tensors are f32: false keeps
  // f32 on the cube (its fp32 rate); true lets a generator compute in fp16
  // with fp32 accumulation (the driver sets it for --precision=fp16).
  bool fp16_matrix = false;
  // The most blocks the kernel may launch (one per core at a time); 0: as
  // many as the machine has cores. Tests and benchmarks use 1 for one core.
  int max_blocks = 0;
  // Also record the kernel's tiling as tile IR (GeneratedKernel::tile_ir),
  // for `kiln tile`; compiling leaves it off.
  bool want_tile_ir = false;
  // A Conv's input / output lies in global memory as NC1HWC0 (16-channel
  // blocks, ConvLayouts in cube_img2col.h) instead of NCHW; the driver
  // chooses it where producer and consumers agree. Such a Conv runs
  // through img2col or not at all.
  bool x_c1hwc0 = false;
  bool y_c1hwc0 = false;
  // Output 0 shares input 0's bytes (the driver donated them: a step's
  // NAME.next over NAME; target/backend/donation.h): a ScatterElements
  // writes only its updates (WritesInPlace).
  bool in_place = false;
};

// A constant argument a kernel reads as its fractal image: the matrix
// [rows, cols] the kernel multiplies with (`transpose`: the constant holds
// [cols, rows] row-major), zero-padded to whole 16 x k0 fractals (k0 = 32
// bytes / element size) and stored as the row-major grid
// [ceil(rows/16), ceil(cols/k0), 16, k0] of row-major fractals: what `nd2nz`
// would make of the whole matrix in L1, so any band of 16 rows of a tile is
// one contiguous run of GM (docs/npusim-kernels.md, "Fractal constants").
// With `conv_weight` the constant is a Conv weight [Cout, Cin, KH, KW] and
// the matrix is img2col's B [ceil(Cin/k0)*KH*KW*k0, Cout]: row
// ((c1*KH + kh)*KW + kw)*k0 + c0 holds input channel c1*k0 + c0 at tap
// (kh, kw) (zero past Cin), column co output channel co. Of 16-bit dtypes
// it is stored as above (`load_l0b ... transpose=1` turns each fractal into
// L0B's form); of f32 in L0B's own form, the grid [rows/8, ceil(cols/16),
// 16, 8] whose fractal (r, c) holds B's rows r*8.. and columns c*16.. with
// each column's 8 elements contiguous (`load_l0b` copies it as it is).
struct FractalConstant {
  int arg = 0;
  int64_t rows = 0, cols = 0;
  bool transpose = false;
  bool conv_weight = false;
};

// The fractal image of `t` (f32, f16 or bf16 holding rows*cols elements).
Tensor FractalImage(const Tensor& t, const FractalConstant& f);
// Its dims, [ceil(rows/16), ceil(cols/k0), 16, k0].
std::vector<int64_t> FractalDims(int64_t rows, int64_t cols, int element_bytes);
// The dims of the fractal image of `f` for elements of `element_bytes`
// (FractalDims, or the L0B grid of an f32 Conv weight).
std::vector<int64_t> FractalConstantDims(const FractalConstant& f, int element_bytes);

struct GeneratedKernel {
  sim::Program program;
  int64_t block_dim = 1;
  std::string engine;            // "cube" or "vector"
  std::vector<const Value*> constant_args;  // body constants passed after the outputs
  std::vector<FractalConstant> fractal_constants;  // constant arguments read as fractals
  int64_t workspace_bytes = 0;   // size of the trailing s8 workspace argument, 0 for none
  double estimated_cycles = 0;   // the generator's cost-model estimate of the whole launch
  std::string plan;              // one line: the tiling chosen, for --explain-placement and reports
  // The kernel in kiln's tile IR (target/backend/tile_ir.h) when the request
  // wants it and the program follows the shared lowering's canonical form
  // with its own tiling (cube GEMMs); empty otherwise.
  std::string tile_ir;
  // The node inputs whose values the program's control flow reads (`ld`
  // of data it loaded: the decode attention's mask, which says which tiles
  // of the cache are live). A timing-only run computes them, and this
  // kernel, so that it takes the branches a functional run takes.
  std::vector<int> steering_inputs;
};

// The values a launch of `k` (generated for `node`) binds, in argument order:
// the node's present inputs, its outputs (from index *first_output), then
// k.constant_args; the workspace argument, if any, follows them.
std::vector<const Value*> LaunchValues(const Node& node, const GeneratedKernel& k, size_t* first_output);

// The ISA dtype that holds a tensor of `t` in global memory; kNone for
// dtypes the AI cores do not handle (i64, bool, f64, ...).
sim::DType IsaDTypeOf(DType t);
// The `.arg NAME DT[d0,...]` line for a value (static shape, ISA dtype).
absl::StatusOr<std::string> KasmArgLine(absl::string_view name, const Value& v);

// Whether the node's kernel (or its AICPU task, which reads its operands
// before it writes) may write its output over its input `input` of the
// same type: ScatterElements over its data (writing only its updates), and
// the elementwise ops and fused elementwise groups, whose tiles store where
// they loaded (a training step's parameter and optimizer-state updates).
bool WritesInPlace(const Node& n, int input);

// `text` assembled (named `file` in its errors) as a kernel of `block_dim`
// blocks on `engine`; an assembly error is an internal error naming the
// kernel (`what`: "scatter kernel: ...").
absl::StatusOr<GeneratedKernel> AssembledKernel(const std::string& text, const std::string& file,
                                                absl::string_view what, int64_t block_dim, std::string engine);

// The bytes per cycle one of `blocks` blocks streaming GM -> UB at once
// gets: its MTE2 rate, or its share of HBM.
double UbLoadBytesPerCycle(const sim::Machine& m, int64_t blocks);

// The single value of a constant with one element (nullopt otherwise).
std::optional<double> ConstScalar(const Value* v);

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

// Bytes of a tensor type with a static shape.
int64_t StaticBytes(const Type& t);
// The `.arg NAME s8[BYTES]` line for a value a kernel handles as plain bytes
// (copies, or an output it leaves alone); at least one byte.
std::string KasmByteArgLine(absl::string_view name, const Value& v);

}  // namespace kiln::target::npusim
