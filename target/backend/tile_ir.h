//===- tile_ir.h - The kernel-level IR every target's code generator reads -*- C++ -*-===//
//
// The tile IR is kiln's kernel-level IR, shared by every target's code
// generator: one TileKernel is one launch of one fused group (a GEMM with its
// epilogue, a chain of elementwise ops, a row reduction), written as loops
// over tiles with buffers in named memory scopes, copies between scopes,
// MMA steps in units of the target's MMA shape, elementwise and reduction
// steps on tiles, and explicit synchronization.
//
// The memory scopes are target-neutral names for the levels every matrix
// machine has; each target maps them onto its own (TileTarget says how big
// each is; docs/tile-ir.md gives each built-in target's level for each):
//
//   global       the device's memory
//   stage        on-chip memory the tiles of global tensors are staged in
//   operand_a    A tiles the matrix engine reads
//   operand_b    B tiles the matrix engine reads
//   accumulator  what the matrix engine accumulates into
//   vector       tiles the elementwise and reduction units compute on
//
// Loops come in four kinds: `grid` loops are spread over compute units (one
// iteration of the grid nest is one block), `group` loops over the
// sub-units of one compute unit (TileTarget::max_group of them; one
// iteration where the unit has a single matrix engine), `serial` loops run in order, and
// `pipelined(S)` loops run in order with the copies of iteration i+S-1
// issued while iteration i computes: a buffer declared with `x S` copies
// rotates through its copies one iteration at a time, and a reference to
// it inside the loop means the current iteration's copy.
//
// Copies are the only statements that address parts of tensors: a copy's
// source or destination gives, per dimension, the element index of the
// tile's first element as an affine expression of the loop variables in
// scope, and the tile's extent is the shape of the local buffer on the
// other side (the destination's when both are local). Tiles of a global
// tensor may run past its end (the ragged edge of a tiling): elements past
// the end read as zero and are not written. A global dimension of extent 1
// broadcasts (a bias [1, N] read into a [128, 64] tile), and a global
// reference with fewer dimensions than the buffer broadcasts along the
// leading ones, numpy style; one with more dimensions than the buffer
// takes its extra leading dimensions with extent 1 (one batch item's
// matrix: `copy %A[%b, %m*128, %k*32] -> %As` with %As of rank 2). Tiles of
// a local buffer never run past it. `transpose` on a copy reads the source
// tile with the last two extents swapped (A stored [K, M] read into an
// [m, k] buffer).
// Every other statement (fill, mma, ew, reduce) works on whole local
// buffers, printed by name alone; an ew operand whose shape is smaller
// broadcasts numpy style (a [1, 64] bias row against a [64, 64] tile).
//
// Inside a group loop, a statement that uses no group variable is done
// once for the compute unit by all its groups together (a cooperative copy
// of a stage tile); one that uses them is done by each group for
// its own share.
//
// The text form (Print / Parse round-trip exact):
//
//   kernel @gemm_relu {
//     arg %A : f16[512,256] in
//     arg %B : f16[256,1024] in
//     arg %Y : f16[512,1024] out
//     grid %m = 4, %n = 8 {
//       buffer %As : f16[128,32] stage x2
//       buffer %Bs : f16[32,128] stage x2
//       buffer %Aa : f16[128,32] operand_a
//       buffer %Bb : f16[32,128] operand_b
//       buffer %acc : f32[128,128] accumulator
//       fill %acc, 0
//       pipelined(2) %k = 8 {
//         copy %A[%m*128, %k*32] -> %As
//         copy %B[%k*32, %n*128] -> %Bs
//         sync global -> stage
//         copy %As -> %Aa
//         copy %Bs -> %Bb
//         sync stage -> operand_a
//         mma %acc += %Aa * %Bb
//       }
//       ew relu %acc <- %acc
//       copy %acc -> %Y[%m*128, %n*128]
//     }
//   }
//
// docs/tile-ir.md describes every statement and the verifier's rules.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/ir/dtype.h"

namespace kiln::target::tile {

enum class Scope : uint8_t { kGlobal, kStage, kOperandA, kOperandB, kAccumulator, kVector };
absl::string_view ScopeName(Scope s);  // "global", "stage", ...
std::optional<Scope> ParseScope(absl::string_view name);

// An affine expression of loop variables: constant + sum(coeff * var).
struct Affine {
  int64_t constant = 0;
  std::vector<std::pair<std::string, int64_t>> terms;  // (variable, coefficient), no zero coefficients

  static Affine Const(int64_t c) { return Affine{c, {}}; }
  static Affine Var(std::string v, int64_t coeff = 1) { return Affine{0, {{std::move(v), coeff}}}; }
  bool is_constant() const { return terms.empty(); }
};

// A tile of a kernel argument or buffer: `name[start_0, start_1, ...]`.
struct TileRef {
  std::string name;           // an argument or buffer, without the '%'
  std::vector<Affine> start;  // one per dimension of the referenced tensor or fewer (broadcast)
};

// A kernel argument: a tensor in global memory.
struct TileArg {
  enum class Role : uint8_t { kIn, kOut, kConst, kWorkspace };
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  Role role = Role::kIn;
};
absl::string_view RoleName(TileArg::Role r);  // "in", "out", "const", "workspace"

// Elementwise operations a tile step may apply. Binary ops take two
// operands (each a TileRef or a scalar); unary ops one; kCast converts to
// the destination's dtype; kSelect takes (condition, a, b).
enum class EwOp : uint8_t {
  kCopy, kCast, kAdd, kSub, kMul, kDiv, kMax, kMin, kPow,
  kNeg, kAbs, kRelu, kExp, kLog, kSqrt, kRsqrt, kRecip, kTanh, kSigmoid, kErf, kGelu, kGeluTanh, kSelect,
  kCmpLt, kCmpLe, kCmpGt, kCmpGe, kCmpEq,
};
absl::string_view EwOpName(EwOp op);  // "copy", "cast", "add", ...
std::optional<EwOp> ParseEwOp(absl::string_view name);
int EwOpArity(EwOp op);               // 1, 2 or 3

enum class ReduceOp : uint8_t { kSum, kMax, kMin, kProd };
absl::string_view ReduceOpName(ReduceOp op);
std::optional<ReduceOp> ParseReduceOp(absl::string_view name);

// How a copy reads a 4-D global tensor X [N, C, H, W] as the im2col matrix
// of a 2-D convolution or pooling window: the copy's source reference
// addresses the virtual tensor [N, G, (C/G)*KH*KW, OH*OW] whose element
// (n, g, (c*KH + r)*KW + s, oh*OW + ow) is
//   X[n, g*C/G + c, oh*SH - PH + r*DH, ow*SW - PW + s*DW],
// or `fill` where that lies in the padding (outside X's spatial extent).
// Rows past (C/G)*KH*KW and columns past OH*OW are the ragged edge (zero).
// Text: `im2col kernel=[KH,KW] stride=[SH,SW] pad=[PH,PW] dilation=[DH,DW]
// out=[OH,OW] [groups=G] [fill=V]`.
struct Im2col {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t pad[2] = {0, 0};  // leading padding of H and W (the trailing one only bounds OH, OW)
  int64_t dilation[2] = {1, 1};
  int64_t out[2] = {1, 1};
  int64_t groups = 1;
  double fill = 0;
};
// The virtual shape [N, G, (C/G)*KH*KW, OH*OW] of X [N, C, H, W] read through `c`.
std::vector<int64_t> Im2colShape(const std::vector<int64_t>& x_shape, const Im2col& c);

struct Stmt;
using Block = std::vector<std::unique_ptr<Stmt>>;

// A loop variable and its trip count (the variable runs 0 .. extent-1).
struct LoopVar {
  std::string name;
  int64_t extent = 1;
};

struct Operand {
  std::optional<TileRef> ref;  // a tile, or
  double scalar = 0;           // a scalar when ref is empty
};

struct Stmt {
  enum class Kind : uint8_t { kBuffer, kLoop, kCopy, kFill, kMma, kEw, kReduce, kSync, kCausal };
  Kind kind;

  // kBuffer: `buffer %NAME : DT[SHAPE] SCOPE [xCOPIES]`, visible to the rest
  // of the enclosing block (nested blocks included).
  std::string buffer;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  Scope scope = Scope::kVector;
  int copies = 1;

  // kLoop: `KIND %v = E, ... { BODY }`.
  enum class LoopKind : uint8_t { kGrid, kGroup, kSerial, kPipelined } loop = LoopKind::kSerial;
  int stages = 1;  // pipelined: iterations in flight
  std::vector<LoopVar> vars;
  Block body;

  // kCopy: `copy SRC -> DST [transpose] [add]`: the tile of DST's buffer
  // shape (or of SRC's when DST is a global tensor) moves from SRC to DST,
  // converting dtypes; `transpose` reads SRC with its last two dimensions
  // swapped; `add` (accumulate = true) adds into DST instead of storing
  // (split-K partial sums; atomic where several blocks write one tile). A
  // local side prints as `%name` when its starts are all zero.
  // `im2col ...` reads a 4-D global SRC through an Im2col (above).
  // kFill: `fill DST, VALUE`.
  // kMma: `mma DST += A * B` (accumulate) or `mma DST = A * B` (init):
  //   A is an operand_a tile [m, k], B an operand_b tile [k, n], DST an
  //   accumulator tile [m, n]; m, n, k multiples of the target's MMA shape.
  // kEw: `ew OP DST <- X[, Y[, Z]]`.
  // kReduce: `reduce OP DST <- SRC axis A`: DST has SRC's shape with
  //   dimension A of extent 1 (kept).
  TileRef dst;
  std::vector<Operand> srcs;  // copy: 1; mma: 2 (A, B); ew: its arity; reduce: 1
  bool transpose = false;     // copy
  std::optional<Im2col> im2col;  // copy: SRC is read as its im2col matrix
  bool accumulate = false;    // mma: += rather than =; copy: add into DST
  double value = 0;           // fill
  EwOp ew = EwOp::kCopy;
  ReduceOp reduce = ReduceOp::kSum;
  int axis = 0;

  // kCausal: `causal DST, ROW, COL`: DST's last two dimensions are a tile
  //   of attention scores whose element (r, c) is query row ROW + r's score
  //   for key COL + c (ROW, COL affine in the loop variables); elements
  //   whose key comes after their row (COL + c > ROW + r) become -inf, the
  //   causal mask of a decoder.
  std::vector<Affine> origin;  // causal: ROW, COL

  // kSync: `sync FROM -> TO`: work that wrote scope FROM is complete and
  // visible to the work that reads it into scope TO (each target prints
  // its own synchronization; docs/tile-ir.md).
  Scope sync_from = Scope::kGlobal, sync_to = Scope::kGlobal;

  explicit Stmt(Kind k) : kind(k) {}
};

// What a target offers the tile IR: per-scope capacities (bytes per compute
// unit; 0: unlimited) and the MMA shapes its matrix engine takes.
struct TileMma {
  int m = 16, n = 16, k = 16;
  DType input = DType::kF16;
  DType accumulator = DType::kF32;
};
struct TileTarget {
  std::string name;  // the target's
  std::map<Scope, int64_t> capacity;
  std::vector<TileMma> mma;
  int max_group = 1;  // group loops' total iterations per compute unit (its sub-units per block)
};

struct TileKernel {
  std::string name;
  std::vector<TileArg> args;
  Block body;
  // One line for reports: what the lowering chose and why ("tiles 128x128x32, 3 stages, ...").
  std::string plan;
};

// The text form; Parse(Print(k)) prints back to the same text. A kernel's
// plan prints as a `plan "..."` line before its arguments; `//` starts a
// comment to the end of the line. A bare `%name` parses as the whole of
// what it names (starts of its rank); Parse's errors start "line N: ".
std::string Print(const TileKernel& k);
absl::StatusOr<TileKernel> Parse(absl::string_view text);
// One statement as its line of the text form, for diagnostics: a loop's
// header without its body; a reference whose starts are all zero prints by
// name alone (Print keeps the starts of kernel arguments).
std::string PrintStatement(const Stmt& s);

// Checks a kernel against the rules of docs/tile-ir.md: names defined
// before use and unique, loop variables in scope, references with the
// right number of dimensions, local tiles inside their buffers and global
// tiles starting inside their tensors for every value of the loop
// variables, copies only between scopes that have a path on every target
// (global <-> stage/vector, stage -> operand_a/operand_b, accumulator ->
// vector/global), MMA operands in their scopes with shapes in units of one
// of the target's MMA shapes and its dtypes, multi-copy buffers used only
// inside a pipelined loop of at most that many stages, and every scope's
// buffers within the target's capacity. The error names the statement and
// the rule.
absl::Status Verify(const TileKernel& k, const TileTarget& target);

// Renames the kernel's arguments to %a0, %a1, ... (in order) and buffers
// named after graph values (%t_*) to %t0, %t1, ... (in declaration order),
// so kernels that differ only in the names of the values they read print
// the same (one generated function serves every node of that shape).
void CanonicalizeNames(TileKernel& k);

// Helpers for building kernels in code.
std::unique_ptr<Stmt> MakeBuffer(std::string name, DType dtype, std::vector<int64_t> shape, Scope scope,
                                 int copies = 1);
std::unique_ptr<Stmt> MakeLoop(Stmt::LoopKind kind, std::vector<LoopVar> vars, int stages = 1);
std::unique_ptr<Stmt> MakeCopy(TileRef src, TileRef dst, bool transpose = false);
std::unique_ptr<Stmt> MakeFill(TileRef dst, double value);
std::unique_ptr<Stmt> MakeMma(TileRef dst, TileRef a, TileRef b, bool accumulate);
std::unique_ptr<Stmt> MakeEw(EwOp op, TileRef dst, std::vector<Operand> srcs);
std::unique_ptr<Stmt> MakeReduce(ReduceOp op, TileRef dst, TileRef src, int axis);
std::unique_ptr<Stmt> MakeSync(Scope from, Scope to);
std::unique_ptr<Stmt> MakeCausal(TileRef dst, Affine row, Affine col);

// A reference with all-zero starts of `rank` dimensions (a whole local buffer).
TileRef Whole(std::string name, int rank);

}  // namespace kiln::target::tile
