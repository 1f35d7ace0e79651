//===- tile_lowering.h - Fused groups to tile IR, tiled by a shared cost model -*- C++ -*-===//
//
// The shared half of every target's code generator: a node of an
// optimized graph (one op, or a kiln.Fused group from the optimizer's
// fusion grouping) becomes a tile::TileKernel, tiled by an analytic cost
// model stated in the figures of a TargetDescription (buffer capacities,
// bandwidths, MMA and vector rates). Each target then prints the kernel in
// its own language (docs/tile-ir.md).
//
// Four kernel shapes come out, each in one canonical form that code
// generators recognize (docs/tile-ir.md shows each):
//
//  - GEMM (MatMul, Gemm, batched MatMul, and a kiln.Fused group of one of
//    them with an elementwise epilogue: bias row/column, residual, scalar
//    ops, activations, a cast):
//      grid [%b0 = B0, %b1 = B1, ...,] %m = Mt, %n = Nt [, %s = splits] {
//        (one %bI per output batch dim; A, B and Y keep their real shapes,
//        an operand that broadcasts a batch dim has extent 1 there)
//        buffer %As stage xS, %Bs stage xS
//        group %wm = bm/gm, %wn = bn/gn {
//          buffer %Aa operand_a [xT], %Bb operand_b [xT], %acc accumulator
//          [epilogue operand buffers, vector scope]
//          fill %acc, 0
//          pipelined(S) %k = Kt {
//            copy A tile -> %As  [transpose]
//            copy B tile -> %Bs  [transpose]
//            sync global -> stage
//            pipelined(T) %kk = bk/tk {        (omitted when bk == tk)
//              copy %As[%wm*gm, %kk*tk] -> %Aa
//              copy %Bs[%kk*tk, %wn*gn] -> %Bb
//              sync stage -> operand_a
//              mma %acc += %Aa * %Bb
//            }
//          }
//          copy epilogue operands (bias row, residual tile) -> vector buffers
//          ew ... %acc <- %acc, ...              (the epilogue, in order)
//          copy %acc -> %Y[...] [add]            (converting to Y's dtype; add under split-K)
//        }
//      }
//  - Elementwise (one op, or a kiln.Fused chain of elementwise ops): the
//    output viewed as [rows, cols] (cols the innermost dims that no input
//    broadcasts differently), a grid over row tiles, copies of each input's
//    tile (or its broadcast row/column/scalar) into vector buffers, the ew
//    steps in graph order, a copy out.
//    A Conv (1-D or 2-D) takes this form as an implicit GEMM: per batch
//    item and group, W [OC/G, K] x im2col(X) [K, OH*OW], the B copy reading
//    X through `im2col` (GemmProblem::conv).
//  - Row reduction (ReduceSum/Mean/Max/Min over the innermost axes,
//    GlobalAveragePool/GlobalMaxPool, Softmax/LogSoftmax and
//    LayerNormalization over the last axis, and composites of them): a
//    grid over row tiles, whole rows in vector buffers, reduce steps with
//    axis 1, ew steps, a copy out.
//  - Window (MaxPool, AveragePool, depthwise Conv with its epilogue): a
//    grid over tiles of channels x output positions, an im2col copy of
//    each position's window into a vector buffer [bc, KH*KW, bp], optional
//    depthwise weights, a reduce over the window axis, the epilogue.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "target/api/target.h"
#include "target/backend/tile_ir.h"

namespace kiln::target::tile {

// What the cost model needs beyond memory levels and MMA shapes: each
// target's own figures (TargetDescription::tiling).
using TileTuning = TilingFigures;

// The figures of a target the cost model uses, from its TargetDescription.
struct TileCostFigures : TileTuning {
  TileTarget target;               // scope capacities and MMA shapes (for Verify)
  int compute_units = 1;           // the units blocks run on, each with its matrix and vector engines
  double clock_ghz = 1;
  double global_bytes_per_cycle = 1200;   // chip-wide, shared by the units
  double stage_bytes_per_cycle = 256;     // global -> stage, per unit
  double operand_bytes_per_cycle = 512;   // stage -> operand, per unit
  double vector_bytes_per_cycle = 256;    // per unit
  // MACs per cycle per unit by matrix input dtype (f16, bf16, f32 (at the rate the unit takes it), i8).
  std::vector<std::pair<DType, double>> macs_per_cycle;
  // A chip-wide cache in front of global memory (a memory level with no
  // scope); 0: none. Blocks of one wave that read the same
  // tiles then fetch them from global memory once.
  int64_t cache_bytes = 0;
  double cache_bytes_per_cycle = 0;  // per unit
  double accumulator_bytes_per_cycle = 0;  // accumulator -> out, per unit (the accumulator level's figure)

  double MacsPerCycle(DType input) const;
};

// The figures of `d`: capacities and bandwidths from d.memory, whose levels
// each name the tile scope they hold (MemoryLevel::scope).
TileCostFigures FiguresOf(const TargetDescription& d);

// One step of a GEMM's epilogue, applied in order to the accumulator tile.
struct EpilogueStep {
  EwOp op = EwOp::kRelu;
  // The second operand of a binary op: none (unary), a scalar, a bias row
  // ([N], broadcast down the rows), a bias column ([M, 1]), or a full
  // [..., M, N] tensor (a residual), the last three kernel arguments.
  enum class Operand : uint8_t { kNone, kScalar, kRow, kCol, kFull } operand = Operand::kNone;
  int arg = -1;          // index in GemmProblem::args
  double scalar = 0;
  const Value* value = nullptr;  // the operand's graph value (a scalar's too)
  bool operand_first = false;  // op(operand, acc) rather than op(acc, operand) (Sub, Div)
};

// One GEMM: for each output batch index, Y[M, N] = epilogue(alpha * op(A) x op(B)).
struct GemmProblem {
  std::string name;
  std::vector<int64_t> batch;                          // output batch dims
  std::vector<int64_t> a_batch_stride, b_batch_stride; // per batch dim, elements (0: broadcast)
  int64_t M = 1, N = 1, K = 1;
  DType input = DType::kF16;      // A and B as the matrix engine reads them
  DType accumulator = DType::kF32;
  DType output = DType::kF16;     // Y
  bool trans_a = false, trans_b = false;  // A stored [K, M]; B stored [N, K]
  // Operands read through a fused body's leading Transposes, whose
  // permutations compose to a matrix view of their source (IsMatrixView,
  // graph/ops/matmul.h): the argument is the source as declared, the
  // operand's axis i its axis a_perm[i] (b_perm); lda / ldb are the
  // elements between the stored rows (of op(A) [M, K], or of [K, M] when
  // trans_a) and the batch strides the source's. Empty / 0: the operand is
  // its argument, contiguous. LowerGemm takes no views yet (a target's own
  // matrix kernels may read them where they lie).
  std::vector<int64_t> a_perm, b_perm;
  int64_t lda = 0, ldb = 0;
  double alpha = 1;
  std::vector<EpilogueStep> epilogue;
  std::vector<TileArg> args;      // kernel arguments in launch order (inputs, outputs, body constants)
  std::vector<const Value*> values;  // the graph value each argument stands for (the node's, or a body constant)
  int a_arg = 0, b_arg = 1, y_arg = 2;
  // A 2-D (or 1-D) convolution as an implicit GEMM: for batch item n and
  // group g, Y[n, g] [OC/G, OH*OW] = W[g] [OC/G, (C/G)*KH*KW] x im2col(X)[n, g]
  // (batch = {N, G}, M = OC/G, K = (C/G)*KH*KW, N = OH*OW). W, Y and the
  // epilogue operands are declared with these views of their tensors (W
  // [G, OC/G, K], Y [N, G, OC/G, OH*OW], a bias [1, G, OC/G, 1]); X keeps
  // [N, C, H, W] and B's copy reads it through `im2col`, which is absent
  // for a 1x1 convolution with stride 1 and no padding (X is then declared
  // [N, G, C/G, H*W]: a plain batched GEMM).
  bool conv = false;
  std::optional<Im2col> im2col;
  std::vector<int64_t> conv_y;    // Y's own shape [N, OC, OH, OW] (or [N, OC, L])
};

// The GEMM of a MatMul, Gemm or Conv node, or of a kiln.Fused group whose
// body is one of them followed by epilogue ops (a MatMul's operands
// possibly read through leading Transposes; a rank-1 operand is a matrix
// of one row or column, its argument and Y declared with that view); `matrix_input` is the dtype the
// matrix engine reads (f16 under --precision=fp16 for an f32 model, else the
// tensors' dtype; kF32 or kUndefined: the tensors' dtype). An error says why
// the node is no GEMM this lowering takes.
absl::StatusOr<GemmProblem> GemmProblemOf(const Node& node, DType matrix_input);

// Whether a GEMM epilogue has a step for `n`'s op (a one-step elementwise
// op, a Clip, a Cast between float dtypes), its operands' shapes aside: what
// a target whose matrix kernels come from this lowering tells fusion-group
// formation a matrix op may take.
bool GemmEpilogueTakes(const Node& n);

// The order a target's GEMM kernels visit their block tiles in, and what
// the cost model assumes of the blocks running together: down groups of
// this many tile rows (row fastest), then across the tile columns, so the
// blocks of a wave share their A and B panels in a chip-wide cache.
inline constexpr int64_t kGemmRasterRows = 8;

// A GEMM tiling and what the cost model says of it.
struct GemmTiling {
  int64_t bm = 128, bn = 128, bk = 32;  // the block tile (C tile of one grid iteration) and stage depth
  int64_t gm = 64, gn = 64;             // the group tile (one group loop iteration's)
  int64_t tk = 32;                      // the operand step (bk: no inner loop)
  int stages = 2;                       // stage-scope copies in flight
  int operand_stages = 1;               // operand-scope copies in flight
  int split_k = 1;
  // Accumulators per group: 2 lets a tile's write-out overlap the next
  // tile's MMAs (a persistent schedule's blocks walk several tiles).
  int accumulator_stages = 1;
  double estimated_cycles = 0;
  double compute_cycles = 0, global_cycles = 0;
  std::string bound;                    // "matrix", "global memory", "stage bandwidth", ...
  // Filled by a persistent schedule's estimate: the launch's blocks, and
  // whether tiles leave through the vector scope.
  int64_t blocks = 0;
  bool via_vector = false;
  std::string Describe() const;         // "128x128x32 tiles, 64x64 groups, 3 stages, est 12345 cycles (matrix)"
};

// What a kernel of a persistent schedule (TilingFigures::GemmSchedule::
// kPersistent) tells the cost model beyond its GemmProblem: how its operands
// arrive, how its tiles leave, and work it does per batch item.
struct GemmKernelTraits {
  // A or B is stored as MMA-shaped blocks (a constant laid out at compile
  // time): a stage of a tile arrives in one burst per band of rows.
  bool a_blocked = false, b_blocked = false;
  // Tiles pass through the vector scope (in the accumulator's dtype) for
  // epilogue work before global memory; `residual`: that work reads a
  // tensor of Y's shape per tile.
  bool epilogue_in_vector = false;
  bool residual = false;
  int64_t vector_reserved = 0;  // vector-scope bytes the kernel keeps for other work
  int max_units = 0;            // units the launch may use (0: all)
  // Each batch item's tiles stay on one block, after a prologue of
  // item_prologue_cycles (serial with the item's GEMM) that moves
  // item_prologue_bytes of global memory; B then comes into the stage one
  // row per copy (a convolution's im2col built per item).
  bool items_on_one_block = false;
  double item_prologue_cycles = 0, item_prologue_bytes = 0;
  // One tile spans N (bn >= N) and leaves through the vector scope: N holds
  // columns the kernel discards between the rows it writes.
  bool whole_n = false;
};

// Estimates `t` for `p` (fills its estimate fields); an error when it does
// not fit the target's capacities. A target of the persistent schedule
// passes its kernel's traits.
absl::Status EstimateGemm(const GemmProblem& p, const TileCostFigures& f, GemmTiling* t,
                          const GemmKernelTraits& traits = {});
// The cheapest tiling the cost model finds for `p` on `f`.
absl::StatusOr<GemmTiling> ChooseGemmTiling(const GemmProblem& p, const TileCostFigures& f,
                                            const GemmKernelTraits& traits = {});
// The canonical GEMM kernel of `p` tiled by `t` (verified against f.target).
absl::StatusOr<TileKernel> LowerGemm(const GemmProblem& p, const GemmTiling& t, const TileCostFigures& f);

// The elementwise or row-reduction kernel of a node (one op or a kiln.Fused
// group), tiled for `f`; an error says why the node has no such form.
// `values`, when given, receives the graph value each kernel argument
// stands for, in argument order: the node's inputs and outputs, and the
// constants of a fused body (a target binds its buffers by these, never by
// the arguments' names).
absl::StatusOr<TileKernel> LowerVectorNode(const Node& node, const TileCostFigures& f,
                                           std::vector<const Value*>* values = nullptr);

// kiln.Attention (tile_attention_lowering.cc) in FlashAttention's schedule:
// a grid over the batch dims and 64-row tiles of Q, a serial loop over
// 64-key tiles of K and V, S = Q K^T on the MMA, the online softmax
// (running row maximum and sum) in the vector scope, P into the stage scope
// for its product, O rescaled and accumulated in the accumulator scope.
// f16, bf16 or f32 Q, K, V (K given transposed or not), lengths multiples of
// 16, head sizes multiples of 16 up to 128, no mask or an additive one of
// Q's dtype, causal or not. Tiles of 64 rows and 64 keys, smaller where
// the target's scopes hold less; verified against f.target.
// `narrow` (f16 or bf16) lowers an f32 attention as a target's narrowing
// would leave it: its tensors declared in that dtype.
absl::StatusOr<TileKernel> LowerAttention(const Node& node, const TileCostFigures& f,
                                          DType narrow = DType::kUndefined);
// Whether LowerAttention takes `node`'s shapes, masks and attributes, its
// dtypes aside (a float mask, or a bool one that MakeAttentionMaskAdditive
// turns into one): what a target asks of an attention it will narrow.
absl::Status AttentionShapesLower(const Node& node);

// Any node: the window form for pools and depthwise convolutions, the GEMM
// form when GemmProblemOf takes it, else LowerVectorNode.
absl::StatusOr<TileKernel> LowerNode(const Node& node, DType matrix_input, const TileCostFigures& f,
                                     std::vector<const Value*>* values = nullptr);

}  // namespace kiln::target::tile
