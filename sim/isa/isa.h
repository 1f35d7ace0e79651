//===- isa.h - The instruction set of the simulated NPU ---------*- C++ -*-===//
//
// The in-memory form of NPU programs. An instruction is an opcode, up to two
// dtypes, up to four operands and up to kMaxAttrs named integer attributes;
// the table of OpInfo (Ops()) says, for each opcode, its assembly name, the
// pipe that executes it, the kinds of its operands and the names and
// defaults of its attributes. The assembler, the disassembler, the protobuf
// encoding (isa.proto), the verifier and the model are all driven by that
// one table. docs/kasm.md describes the instructions; docs/npu.md the
// layouts and the timing.
//
// Every address operand is a space, an optional base register and an
// immediate byte offset: `UB[r3 + 256]`, `L0A[0]`, or for global memory the
// name of a program argument, `A[r5 + 64]` (offset from that argument's
// base). The block index is read with `block_idx`, so one program runs on
// many cores on different tiles.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace kiln::sim {

enum class DType : uint8_t { kNone, kF32, kF16, kBF16, kS32, kS8 };
int DTypeSize(DType t);            // bytes; 0 for kNone
const char* DTypeName(DType t);    // "f32", "f16", "bf16", "s32", "s8"
bool ParseDType(absl::string_view s, DType* t);
inline bool IsFloat(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// Memory spaces. GM is the device's global memory (HBM), reached through a
// program argument; the others are a core's private buffers.
enum class Space : uint8_t { kNone, kGm, kL1, kL0A, kL0B, kL0C, kUb };
const char* SpaceName(Space s);  // "GM", "L1", "L0A", "L0B", "L0C", "UB"

// The pipes of an AI core, named as Ascend's tools name them. kAll is only
// an operand of pipe_barrier.
enum class Pipe : uint8_t { kScalar, kMte1, kMte2, kMte3, kCube, kVector, kFixp, kAll };
constexpr int kNumPipes = 7;
const char* PipeName(Pipe p);       // "SCALAR", "MTE1", ..., "CUBE", "VECTOR", "FIXP", "ALL"
const char* PipeTraceName(Pipe p);  // the trace track name: "Cube" for the cube, else PipeName
bool ParsePipe(absl::string_view s, Pipe* p);

constexpr int kFractalBytes = 512;   // one L0A/L0B fractal: 16 rows of 32 bytes
constexpr int kBlockBytes = 32;      // the vector unit's block and the UB/L1 alignment
constexpr int kRepeatBytes = 256;    // one vector repeat: 8 blocks (the machine sets its cycles)
constexpr int kTransposeElements = 256;  // one vtranspose repeat: a 16x16 matrix of 2-byte elements
constexpr int kTransposeElements32 = 64;  // one vtranspose.f32 repeat: an 8x8 matrix of 4-byte elements
constexpr int kNumEvents = 16;       // event ids of set_flag / wait_flag per pipe pair
constexpr int kMaxAttrs = 18;

struct Operand {
  enum class Kind : uint8_t { kNone, kReg, kImm, kFloat, kAddr, kPipe, kLabel };
  Kind kind = Kind::kNone;
  Space space = Space::kNone;  // kAddr
  int16_t reg = -1;            // kReg; the base register of kAddr, -1 for none
  int32_t arg = -1;            // kAddr in GM: the index of the program argument
  int64_t imm = 0;             // kImm; the byte offset of kAddr; the pipe of kPipe; the target of kLabel
  double fimm = 0;             // kFloat

  static Operand Reg(int r) { Operand o; o.kind = Kind::kReg; o.reg = static_cast<int16_t>(r); return o; }
  static Operand Imm(int64_t v) { Operand o; o.kind = Kind::kImm; o.imm = v; return o; }
  static Operand Float(double v) { Operand o; o.kind = Kind::kFloat; o.fimm = v; return o; }
  static Operand Addr(Space s, int reg, int64_t off, int arg = -1) {
    Operand o; o.kind = Kind::kAddr; o.space = s; o.reg = static_cast<int16_t>(reg); o.imm = off; o.arg = arg;
    return o;
  }
  static Operand PipeOp(Pipe p) { Operand o; o.kind = Kind::kPipe; o.imm = static_cast<int64_t>(p); return o; }
  static Operand Label(int64_t target) { Operand o; o.kind = Kind::kLabel; o.imm = target; return o; }
  bool operator==(const Operand&) const = default;
};

// Opcodes, grouped by the pipe that executes them.
enum class Op : uint16_t {
  // SCALAR
  kMov, kAdd, kSub, kMul, kDiv, kRem, kMin, kMax, kShl, kShr, kAnd, kOr,
  kBlockIdx, kBlockDim, kJmp, kBeq, kBne, kBlt, kBge,
  // MTE2: GM -> L1 / UB
  kCopyGmL1, kCopyGmUb, kNd2Nz,
  // MTE1: L1 -> L0A / L0B
  kLoadL0A, kLoadL0B, kImg2Col,
  // CUBE
  kMmad,
  // FIXP: L0C -> UB / GM
  kFixp,
  // VECTOR (UB only)
  kVadd, kVsub, kVmul, kVdiv, kVmax, kVmin,
  kVexp, kVln, kVsqrt, kVrsqrt, kVrec, kVtanh, kVsigmoid, kVerf, kVabs, kVrelu, kVmov,
  kVadds, kVmuls, kVmaxs, kVmins, kVdup,
  kVcmp, kVsel, kVconv, kVcadd, kVcmax, kVcmin, kVbrcb,
  // MTE3: UB -> GM
  kCopyUbGm,
  // Synchronization
  kSetFlag, kWaitFlag, kPipeBarrier,
  // VECTOR, added after the first encoding (opcodes keep their numbers)
  kVtranspose,
  // SCALAR: a word of UB into a register
  kLd,
  // SCALAR: a barrier across the blocks of the launch
  kSyncAll,
  kNumOps
};

// What an operand slot accepts.
enum class Spec : uint8_t {
  kReg,       // a register
  kValue,     // a register or an integer immediate
  kFloat,     // a floating-point immediate
  kAddr,      // an address in any space the op's rules allow
  kAddrOpt,   // an optional trailing address
  kPipe,      // a pipe other than ALL
  kPipeAll,   // a pipe or ALL
  kImm,       // an integer immediate
  kLabel,     // a branch target
};

// How an attribute gets its value when the assembly leaves it out.
enum class AttrDefault : uint8_t { kConst, kRequired, kAuto };

struct AttrInfo {
  const char* name;
  AttrDefault how = AttrDefault::kConst;
  int64_t value = 0;                        // the default of a kConst attribute
  const char* const* enum_names = nullptr;  // null-terminated names of values 0, 1, ...
};

struct OpInfo {
  Op op;
  const char* name;
  Pipe pipe;      // kScalar for scalar and sync ops; see ExecPipe()
  int ndtypes;    // dtype suffixes: 0, 1 ("vadd.f16") or 2 ("vconv.f16.f32": destination, source)
  std::vector<Spec> operands;
  std::vector<AttrInfo> attrs;
};

const OpInfo& Info(Op op);
const std::vector<OpInfo>& Ops();
bool FindOp(absl::string_view name, Op* op);
// The vector unit's special functions (exp, ln, sqrt, rsqrt, reciprocal,
// tanh, sigmoid, erf, division): slower per repeat than plain arithmetic
// (docs/npu.md, "Timing").
bool IsSpecialFunction(Op op);

// Attribute indices of the op families (the attrs of every family member
// are laid out the same way).
namespace attr {
// Burst copies (copy_gm_l1, copy_gm_ub, copy_ub_gm), in bytes.
enum { kNburst, kLen, kSrcStride, kDstStride };
// nd2nz, in elements.
enum { kNzRows, kNzCols, kNzSrcRowStride };
// load_l0a / load_l0b, in fractals.
enum { kLdRows, kLdCols, kLdSrcRowStride, kLdTranspose };
// img2col.
enum { kIcH, kIcW, kIcC1, kIcKh, kIcKw, kIcStrideH, kIcStrideW, kIcPadTop, kIcPadBottom, kIcPadLeft,
       kIcPadRight, kIcDilH, kIcDilW, kIcPos, kIcM, kIcKStart, kIcK };
// mmad, in fractals.
enum { kMmM, kMmK, kMmN, kMmInit };
// fixp.
enum { kFxM, kFxN, kFxDstRowStride, kFxRelu };
// Vector ops: repeat count, elements per repeat, strides in 32-byte blocks;
// kCmpMode (vcmp) and kRound (vconv) follow.
enum { kRepeat, kMask, kDstBlk, kSrc0Blk, kSrc1Blk, kDstRep, kSrc0Rep, kSrc1Rep, kVecExtra };
// set_flag / wait_flag have no attributes: src pipe, dst pipe, event are operands.
}  // namespace attr

enum class CmpMode : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };
enum class RoundMode : uint8_t { kRint, kTrunc, kFloor, kCeil };

struct Inst {
  Op op = Op::kMov;
  DType dtype = DType::kNone;   // the (destination) dtype
  DType dtype2 = DType::kNone;  // the source dtype of two-dtype ops
  std::array<Operand, 4> ops{};
  std::array<int64_t, kMaxAttrs> attrs{};
  bool operator==(const Inst&) const = default;
};

// The pipe an instruction runs on: its table pipe, or for set_flag the source
// pipe, for wait_flag the destination pipe, for pipe_barrier the scalar unit
// when the operand is ALL and the named pipe otherwise.
Pipe ExecPipe(const Inst& in);

// Vector elements per repeat (256 bytes / element size; for vconv the count
// set by the wider of its two dtypes; for vtranspose 256, a 16x16 matrix of
// 2-byte elements, or 64, an 8x8 matrix of 4-byte ones).
int ElementsPerRepeat(const Inst& in);

// Fills attributes left at their "auto" default from the others (burst
// strides from lengths, vector repeat strides from dtypes, ...).
void FillAutoAttrs(Inst& in);

// A global-memory argument of a program: a named buffer with dtype and shape.
// An argument holds at most 1 TiB (kMaxArgBytes); an instruction
// attribute is a 32-bit field (at most kMaxAttribute). The assembler, the
// decoder of artifacts' programs and the verifier hold programs to both, so
// no size or address computed from them wraps.
inline constexpr int64_t kMaxArgBytes = int64_t{1} << 40;
inline constexpr int64_t kMaxAttribute = (int64_t{1} << 32) - 1;

struct Arg {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  // The argument's bytes; INT64_MAX where the shape's product does not fit
  // (larger than any memory: bounds checks refuse it).
  int64_t Bytes() const;
  bool operator==(const Arg&) const = default;
};

// A kernel: what one AI core runs for one block. `labels` names branch
// targets for the disassembly (index, name), sorted by index.
struct Program {
  std::string name;
  int num_regs = 16;
  std::vector<Arg> args;
  std::vector<Inst> insts;
  std::vector<std::pair<int64_t, std::string>> labels;
  bool operator==(const Program&) const = default;
};

}  // namespace kiln::sim
