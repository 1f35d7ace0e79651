//===- verify.cc - Load-time and issue-time checks of NPU programs --------===//
#include "sim/isa/verify.h"

#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "sim/isa/asm.h"

namespace kiln::sim {
namespace {

// Spans and ends are computed in 128 bits: attributes are at most
// kMaxAttribute (32 bits), so no product of the few of them a span
// multiplies overflows, and an end past int64_t is kUnboundedEnd.
using Wide = __int128;

Wide CeilDiv(Wide a, Wide b) { return (a + b - 1) / b; }

template <typename... A>
absl::Status Rule(const Program& p, size_t index, const A&... a) {
  return InvalidArgument("instruction ", index, " (", InstText(p, p.insts[index]), "): ", a...);
}

bool OneOf(DType t, std::initializer_list<DType> list) {
  for (DType d : list)
    if (t == d) return true;
  return false;
}

// The span in bytes of a vector operand of element size `esize`.
Wide VecSpan(const Inst& in, int esize, Wide blk, Wide rep) {
  Wide repeat = in.attrs[attr::kRepeat];
  Wide blocks = CeilDiv(Wide{in.attrs[attr::kMask]} * esize, kBlockBytes);
  return (repeat - 1) * rep * kBlockBytes + (blocks - 1) * blk * kBlockBytes + kBlockBytes;
}

// The alignment an address in `space` needs.
int64_t Alignment(Space s, const Inst& in) {
  switch (s) {
    case Space::kL0A: case Space::kL0B: case Space::kL0C: return kFractalBytes;
    case Space::kL1: case Space::kUb: return kBlockBytes;
    default: return 1;
  }
}

}  // namespace

int Accesses(const Inst& in, const std::array<int64_t, 4>& addr, std::array<Access, 4>* out) {
  std::array<Wide, kMaxAttrs> a;
  for (size_t k = 0; k < a.size(); ++k) a[k] = in.attrs[k];
  int n = 0;
  auto add = [&](int operand, Wide span, bool write) {
    const Operand& o = in.ops[operand];
    const Wide end = Wide{addr[operand]} + span;
    const bool fits = end >= Wide{INT64_MIN} && end < Wide{kUnboundedEnd};
    (*out)[n++] = Access{operand, o.space, o.arg, addr[operand], fits ? static_cast<int64_t>(end) : kUnboundedEnd,
                         write};
  };
  int es = DTypeSize(in.dtype);
  switch (in.op) {
    case Op::kCopyGmL1: case Op::kCopyGmUb: case Op::kCopyUbGm:
      add(0, (a[attr::kNburst] - 1) * a[attr::kDstStride] + a[attr::kLen], true);
      add(1, (a[attr::kNburst] - 1) * a[attr::kSrcStride] + a[attr::kLen], false);
      break;
    case Op::kNd2Nz: {
      Wide c0 = kBlockBytes / es;
      add(0, CeilDiv(a[attr::kNzRows], 16) * CeilDiv(a[attr::kNzCols], c0) * kFractalBytes, true);
      add(1, ((a[attr::kNzRows] - 1) * a[attr::kNzSrcRowStride] + a[attr::kNzCols]) * es, false);
      break;
    }
    case Op::kLoadL0A: case Op::kLoadL0B: {
      // A 32-bit transpose works on 16x16 squares of two fractals.
      Wide w = a[attr::kLdTranspose] && es == 4 ? 2 : 1;
      add(0, w * a[attr::kLdRows] * a[attr::kLdCols] * kFractalBytes, true);
      add(1, ((a[attr::kLdRows] - 1) * a[attr::kLdSrcRowStride] + w * a[attr::kLdCols]) * kFractalBytes, false);
      break;
    }
    case Op::kImg2Col:
      add(0, a[attr::kIcM] * a[attr::kIcK] * kFractalBytes, true);
      add(1, a[attr::kIcC1] * a[attr::kIcH] * a[attr::kIcW] * kBlockBytes, false);
      break;
    case Op::kMmad:
      add(0, a[attr::kMmM] * a[attr::kMmN] * 256 * 4, true);
      add(1, a[attr::kMmM] * a[attr::kMmK] * kFractalBytes, false);
      add(2, a[attr::kMmK] * a[attr::kMmN] * kFractalBytes, false);
      break;
    case Op::kFixp:
      add(0, ((a[attr::kFxM] * 16 - 1) * a[attr::kFxDstRowStride] + a[attr::kFxN] * 16) * es, true);
      add(1, a[attr::kFxM] * a[attr::kFxN] * 256 * 4, false);
      if (in.ops[2].kind == Operand::Kind::kAddr) add(2, a[attr::kFxN] * 16 * 4, false);
      break;
    default:
      if (Info(in.op).pipe != Pipe::kVector) break;
      {
        Wide repeat = a[attr::kRepeat];
        Wide mask_bytes = repeat * ElementsPerRepeat(in) / 8;
        int src_es = in.op == Op::kVconv ? DTypeSize(in.dtype2) : es;
        switch (in.op) {
          case Op::kVdup: add(0, VecSpan(in, es, a[attr::kDstBlk], a[attr::kDstRep]), true); break;
          case Op::kVcmp:
            add(0, mask_bytes, true);
            add(1, VecSpan(in, es, a[attr::kSrc0Blk], a[attr::kSrc0Rep]), false);
            add(2, VecSpan(in, es, a[attr::kSrc1Blk], a[attr::kSrc1Rep]), false);
            break;
          case Op::kVsel:
            add(0, VecSpan(in, es, a[attr::kDstBlk], a[attr::kDstRep]), true);
            add(1, mask_bytes, false);
            add(2, VecSpan(in, es, a[attr::kSrc0Blk], a[attr::kSrc0Rep]), false);
            add(3, VecSpan(in, es, a[attr::kSrc1Blk], a[attr::kSrc1Rep]), false);
            break;
          case Op::kVcadd: case Op::kVcmax: case Op::kVcmin:
            add(0, repeat * es, true);
            add(1, VecSpan(in, es, a[attr::kSrc0Blk], a[attr::kSrc0Rep]), false);
            break;
          case Op::kVtranspose: {
            const int64_t last = es == 4 ? 7 : 15;  // the matrix's last row
            add(0, ((repeat - 1) * a[attr::kDstRep] + last * a[attr::kDstBlk] + 1) * kBlockBytes, true);
            add(1, ((repeat - 1) * a[attr::kSrc0Rep] + last * a[attr::kSrc0Blk] + 1) * kBlockBytes, false);
            break;
          }
          case Op::kVbrcb:
            add(0, (repeat - 1) * a[attr::kDstRep] * kBlockBytes + 7 * a[attr::kDstBlk] * kBlockBytes + kBlockBytes,
                true);
            add(1, repeat * 8 * es, false);
            break;
          default: {
            add(0, VecSpan(in, es, a[attr::kDstBlk], a[attr::kDstRep]), true);
            add(1, VecSpan(in, src_es, a[attr::kSrc0Blk], a[attr::kSrc0Rep]), false);
            const auto& ops = Info(in.op).operands;
            if (ops.size() >= 3 && ops[2] == Spec::kAddr)
              add(2, VecSpan(in, es, a[attr::kSrc1Blk], a[attr::kSrc1Rep]), false);
          }
        }
      }
  }
  return n;
}

absl::Status CheckAccesses(const Program& p, size_t index, const std::array<int64_t, 4>& addr,
                           const BufferSizes* sizes) {
  const Inst& in = p.insts[index];
  std::array<Access, 4> acc;
  int n = Accesses(in, addr, &acc);
  for (int i = 0; i < n; ++i) {
    const Access& x = acc[i];
    const char* sn = SpaceName(x.space);
    int64_t align = Alignment(x.space, in);
    if (x.space == Space::kGm) {
      const Arg& arg = p.args[x.arg];
      int es = DTypeSize(arg.dtype);
      bool elementwise = in.op == Op::kNd2Nz || in.op == Op::kFixp;
      if (elementwise && x.begin % es != 0)
        return Rule(p, index, "GM address ", arg.name, "+", x.begin, " is not aligned to its ", DTypeName(arg.dtype),
                    " elements (", es, " bytes)");
      if (x.begin < 0 || x.end > arg.Bytes())
        return Rule(p, index, "GM access [", x.begin, ", ", x.end, ") is outside argument ", arg.name, " (",
                    arg.Bytes(), " bytes)");
      continue;
    }
    if (x.begin % align != 0)
      return Rule(p, index, sn, " address ", x.begin, " is not ", align, "-byte aligned");
    if (x.begin < 0) return Rule(p, index, sn, " address ", x.begin, " is negative");
    if (sizes) {
      int64_t cap = sizes->bytes[static_cast<int>(x.space)];
      if (x.end > cap)
        return Rule(p, index, sn, " access [", x.begin, ", ", x.end, ") is outside ", sn, " (", cap, " bytes)");
    }
  }
  return absl::OkStatus();
}

namespace {

absl::Status CheckSpaces(const Program& p, size_t i, std::initializer_list<Space> spaces) {
  const Inst& in = p.insts[i];
  int k = 0;
  for (Space s : spaces) {
    const Operand& o = in.ops[k];
    if (o.kind == Operand::Kind::kAddr && o.space != s)
      return Rule(p, i, "operand ", k + 1, " must be in ", SpaceName(s), ", not ", SpaceName(o.space));
    ++k;
  }
  return absl::OkStatus();
}

absl::Status CheckDType(const Program& p, size_t i, std::initializer_list<DType> allowed) {
  if (!OneOf(p.insts[i].dtype, allowed)) {
    std::string names;
    for (DType d : allowed) absl::StrAppend(&names, names.empty() ? "" : ", ", DTypeName(d));
    return Rule(p, i, Info(p.insts[i].op).name, " takes dtype ", names, ", not ", DTypeName(p.insts[i].dtype));
  }
  return absl::OkStatus();
}

absl::Status CheckOp(const Program& p, size_t i) {
  const Inst& in = p.insts[i];
  const OpInfo& info = Info(in.op);
  const auto& a = in.attrs;
  using D = DType;
  // Attributes must not be negative (the assembler says so too; a decoded program may not).
  for (size_t k = 0; k < info.attrs.size(); ++k) {
    if (a[k] < 0) return Rule(p, i, "attribute ", info.attrs[k].name, " is negative");
    if (a[k] > kMaxAttribute)
      return Rule(p, i, "attribute ", info.attrs[k].name, " is ", a[k], ", more than a 32-bit field holds");
  }
  auto positive = [&](std::initializer_list<int> ids) -> absl::Status {
    for (int k : ids)
      if (a[k] < 1) return Rule(p, i, "attribute ", info.attrs[k].name, " must be at least 1");
    return absl::OkStatus();
  };
  auto w = [&](int k) { return Wide{a[k]}; };  // an attribute, for products that may pass 64 bits
  auto at_most = [&](int k, int64_t hi) -> absl::Status {
    if (a[k] > hi) return Rule(p, i, "attribute ", info.attrs[k].name, " must be at most ", hi, ", got ", a[k]);
    return absl::OkStatus();
  };
  switch (in.op) {
    case Op::kDiv: case Op::kRem:
      if (in.ops[2].kind == Operand::Kind::kImm && in.ops[2].imm == 0) return Rule(p, i, "division by zero");
      break;
    case Op::kCopyGmL1: KILN_RETURN_IF_ERROR(CheckSpaces(p, i, {Space::kL1, Space::kGm})); goto copy;
    case Op::kCopyGmUb: KILN_RETURN_IF_ERROR(CheckSpaces(p, i, {Space::kUb, Space::kGm})); goto copy;
    case Op::kCopyUbGm: KILN_RETURN_IF_ERROR(CheckSpaces(p, i, {Space::kGm, Space::kUb})); goto copy;
    copy:
      KILN_RETURN_IF_ERROR(positive({attr::kNburst, attr::kLen}));
      KILN_RETURN_IF_ERROR(at_most(attr::kNburst, 4095));
      break;
    case Op::kNd2Nz:
      KILN_RETURN_IF_ERROR(CheckSpaces(p, i, {Space::kL1, Space::kGm}));
      KILN_RETURN_IF_ERROR(CheckDType(p, i, {D::kF16, D::kBF16, D::kF32, D::kS8}));
      KILN_RETURN_IF_ERROR(positive({attr::kNzRows, attr::kNzCols}));
      if (in.dtype != p.args[in.ops[1].arg].dtype)
        return Rule(p, i, "nd2nz.", DTypeName(in.dtype), " reads argument ", p.args[in.ops[1].arg].name, " of dtype ",
                    DTypeName(p.args[in.ops[1].arg].dtype));
      break;
    case Op::kLoadL0A: case Op::kLoadL0B:
      KILN_RETURN_IF_ERROR(CheckSpaces(p, i, {in.op == Op::kLoadL0A ? Space::kL0A : Space::kL0B, Space::kL1}));
      KILN_RETURN_IF_ERROR(CheckDType(p, i, {D::kF16, D::kBF16, D::kF32, D::kS8}));
      KILN_RETURN_IF_ERROR(positive({attr::kLdRows, attr::kLdCols}));
      KILN_RETURN_IF_ERROR(at_most(attr::kLdTranspose, 1));
      if (a[attr::kLdTranspose] && DTypeSize(in.dtype) == 1)
        return Rule(p, i, "transpose needs a 16- or 32-bit dtype (16x16 squares)");
      break;
    case Op::kImg2Col:
      KILN_RETURN_IF_ERROR(CheckSpaces(p, i, {Space::kL0A, Space::kL1}));
      KILN_RETURN_IF_ERROR(CheckDType(p, i, {D::kF16, D::kBF16, D::kF32}));
      KILN_RETURN_IF_ERROR(positive({attr::kIcH, attr::kIcW, attr::kIcC1, attr::kIcKh, attr::kIcKw, attr::kIcStrideH,
                                     attr::kIcStrideW, attr::kIcDilH, attr::kIcDilW, attr::kIcM, attr::kIcK}));
      if (w(attr::kIcKStart) + w(attr::kIcK) > w(attr::kIcC1) * w(attr::kIcKh) * w(attr::kIcKw))
        return Rule(p, i, "k_start + k exceeds the c1*kh*kw = ", a[attr::kIcC1], "*", a[attr::kIcKh], "*",
                    a[attr::kIcKw], " k-fractals of the window");
      if (w(attr::kIcH) + w(attr::kIcPadTop) + w(attr::kIcPadBottom) < (w(attr::kIcKh) - 1) * w(attr::kIcDilH) + 1 ||
          w(attr::kIcW) + w(attr::kIcPadLeft) + w(attr::kIcPadRight) < (w(attr::kIcKw) - 1) * w(attr::kIcDilW) + 1)
        return Rule(p, i, "the kernel window is larger than the padded image");
      break;
    case Op::kMmad:
      KILN_RETURN_IF_ERROR(CheckSpaces(p, i, {Space::kL0C, Space::kL0A, Space::kL0B}));
      KILN_RETURN_IF_ERROR(CheckDType(p, i, {D::kF16, D::kBF16, D::kF32, D::kS8}));
      KILN_RETURN_IF_ERROR(positive({attr::kMmM, attr::kMmK, attr::kMmN}));
      KILN_RETURN_IF_ERROR(at_most(attr::kMmInit, 1));
      break;
    case Op::kFixp: {
      KILN_RETURN_IF_ERROR(CheckSpaces(p, i, {in.ops[0].space == Space::kGm ? Space::kGm : Space::kUb, Space::kL0C,
                                               Space::kUb}));
      KILN_RETURN_IF_ERROR(positive({attr::kFxM, attr::kFxN}));
      KILN_RETURN_IF_ERROR(at_most(attr::kFxRelu, 1));
      bool ok = (in.dtype2 == D::kF32 && OneOf(in.dtype, {D::kF32, D::kF16, D::kBF16})) ||
                (in.dtype2 == D::kS32 && OneOf(in.dtype, {D::kS32, D::kF16}));
      if (!ok)
        return Rule(p, i, "fixp converts f32 to f32/f16/bf16 or s32 to s32/f16, not ", DTypeName(in.dtype2), " to ",
                    DTypeName(in.dtype));
      if (in.ops[0].space == Space::kGm && p.args[in.ops[0].arg].dtype != in.dtype)
        return Rule(p, i, "fixp writes ", DTypeName(in.dtype), " into argument ", p.args[in.ops[0].arg].name,
                    " of dtype ", DTypeName(p.args[in.ops[0].arg].dtype));
      if (a[attr::kFxDstRowStride] < a[attr::kFxN] * 16)
        return Rule(p, i, "dst_row_stride ", a[attr::kFxDstRowStride], " is shorter than a row of n*16 = ",
                    a[attr::kFxN] * 16, " elements");
      break;
    }
    case Op::kLd:
      KILN_RETURN_IF_ERROR(CheckSpaces(p, i, {Space::kNone, Space::kUb}));
      KILN_RETURN_IF_ERROR(CheckDType(p, i, {D::kS32}));
      if (in.ops[1].imm % 4) return Rule(p, i, "the word's offset ", in.ops[1].imm, " is not a multiple of 4");
      break;
    case Op::kSetFlag: case Op::kWaitFlag:
      if (in.ops[0].imm == in.ops[1].imm) return Rule(p, i, "a flag connects two different pipes");
      if (in.ops[2].imm < 0 || in.ops[2].imm >= kNumEvents)
        return Rule(p, i, "event id ", in.ops[2].imm, " is outside 0..", kNumEvents - 1);
      break;
    default:
      break;
  }
  if (info.pipe == Pipe::kVector) {
    for (size_t k = 0; k < info.operands.size(); ++k)
      if (in.ops[k].kind == Operand::Kind::kAddr && in.ops[k].space != Space::kUb)
        return Rule(p, i, "vector operands are in UB, operand ", k + 1, " is in ", SpaceName(in.ops[k].space));
    switch (in.op) {
      case Op::kVadd: case Op::kVsub: case Op::kVmul: case Op::kVmax: case Op::kVmin: case Op::kVabs: case Op::kVrelu:
      case Op::kVmov: case Op::kVadds: case Op::kVmuls: case Op::kVmaxs: case Op::kVmins: case Op::kVdup:
      case Op::kVbrcb:
        KILN_RETURN_IF_ERROR(CheckDType(p, i, {D::kF16, D::kF32, D::kS32}));
        break;
      case Op::kVconv: {
        std::pair<DType, DType> pairs[] = {{D::kF16, D::kF32}, {D::kF32, D::kF16}, {D::kBF16, D::kF32},
                                           {D::kF32, D::kBF16}, {D::kS32, D::kF32}, {D::kF32, D::kS32}};
        bool ok = false;
        for (auto [d, s] : pairs) ok |= in.dtype == d && in.dtype2 == s;
        if (!ok)
          return Rule(p, i, "vconv converts f32 to and from f16, bf16 and s32, not ", DTypeName(in.dtype2), " to ",
                      DTypeName(in.dtype));
        KILN_RETURN_IF_ERROR(at_most(attr::kVecExtra, 3));
        break;
      }
      case Op::kVtranspose:
        KILN_RETURN_IF_ERROR(CheckDType(p, i, {D::kF16, D::kBF16, D::kF32}));
        if (a[attr::kMask] != ElementsPerRepeat(in))
          return Rule(p, i, "vtranspose moves whole ", in.dtype == D::kF32 ? "8x8" : "16x16", " matrices: mask must be ",
                      ElementsPerRepeat(in));
        break;
      case Op::kVcmp:
        KILN_RETURN_IF_ERROR(at_most(attr::kVecExtra, 5));
        [[fallthrough]];
      default:
        KILN_RETURN_IF_ERROR(CheckDType(p, i, {D::kF16, D::kF32}));
    }
    KILN_RETURN_IF_ERROR(positive({attr::kRepeat, attr::kMask}));
    KILN_RETURN_IF_ERROR(at_most(attr::kRepeat, 255));
    KILN_RETURN_IF_ERROR(at_most(attr::kMask, ElementsPerRepeat(in)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyProgram(const Program& p, const BufferSizes* sizes) {
  if (p.num_regs < 1 || p.num_regs > 256) return InvalidArgument("program ", p.name, ": .regs must be 1..256");
  const int64_t n = static_cast<int64_t>(p.insts.size());
  // Registers never written hold 0; one written once, by `mov rd, IMM`, holds
  // that value (a use before the mov would see 0: such loops are checked at issue).
  std::vector<int> writes(p.num_regs, 0);
  std::vector<int64_t> known(p.num_regs, 0);
  for (int64_t i = 0; i < n; ++i)
    if (static_cast<size_t>(p.insts[i].op) >= Ops().size())
      return InvalidArgument("instruction ", i, ": unknown opcode ", static_cast<int>(p.insts[i].op));
  for (const Inst& in : p.insts) {
    const OpInfo& info = Info(in.op);
    if (info.pipe == Pipe::kScalar && !info.operands.empty() && info.operands[0] == Spec::kReg && in.ops[0].reg >= 0 &&
        in.ops[0].reg < p.num_regs) {
      ++writes[in.ops[0].reg];
      if (in.op == Op::kMov && in.ops[1].kind == Operand::Kind::kImm) known[in.ops[0].reg] = in.ops[1].imm;
      else writes[in.ops[0].reg] += 2;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const Inst& in = p.insts[i];
    const OpInfo& info = Info(in.op);
    for (size_t k = 0; k < info.operands.size(); ++k) {
      const Operand& o = in.ops[k];
      Spec s = info.operands[k];
      bool kind_ok = false;
      switch (s) {
        case Spec::kReg: kind_ok = o.kind == Operand::Kind::kReg; break;
        case Spec::kValue: kind_ok = o.kind == Operand::Kind::kReg || o.kind == Operand::Kind::kImm; break;
        case Spec::kFloat: kind_ok = o.kind == Operand::Kind::kFloat; break;
        case Spec::kAddr: kind_ok = o.kind == Operand::Kind::kAddr; break;
        case Spec::kAddrOpt: kind_ok = o.kind == Operand::Kind::kAddr || o.kind == Operand::Kind::kNone; break;
        case Spec::kPipe:
          kind_ok = o.kind == Operand::Kind::kPipe && o.imm >= 0 && o.imm < kNumPipes;
          break;
        case Spec::kPipeAll: kind_ok = o.kind == Operand::Kind::kPipe && o.imm >= 0 && o.imm <= kNumPipes; break;
        case Spec::kImm: kind_ok = o.kind == Operand::Kind::kImm; break;
        case Spec::kLabel: kind_ok = o.kind == Operand::Kind::kLabel; break;
      }
      if (!kind_ok) return Rule(p, i, "operand ", k + 1, " has the wrong kind");
      if ((o.kind == Operand::Kind::kReg || o.kind == Operand::Kind::kAddr) && o.reg >= p.num_regs)
        return Rule(p, i, "register r", o.reg, " is outside the program's ", p.num_regs, " registers");
      if (o.kind == Operand::Kind::kAddr && o.space == Space::kGm &&
          (o.arg < 0 || o.arg >= static_cast<int>(p.args.size())))
        return Rule(p, i, "operand ", k + 1, " names no argument");
      if (o.kind == Operand::Kind::kAddr && o.space == Space::kNone) return Rule(p, i, "operand ", k + 1, " has no space");
      if (o.kind == Operand::Kind::kLabel && (o.imm < 0 || o.imm > n))
        return Rule(p, i, "branch target ", o.imm, " is outside the program (0..", n, ")");
    }
    KILN_RETURN_IF_ERROR(CheckOp(p, i));
    // Static addresses: no base register, or one that is set once from an immediate.
    bool is_static = true;
    std::array<int64_t, 4> addr{};
    for (size_t k = 0; k < info.operands.size(); ++k) {
      const Operand& o = in.ops[k];
      if (o.kind != Operand::Kind::kAddr) continue;
      if (o.reg >= 0 && o.reg < p.num_regs && writes[o.reg] > 1) is_static = false;
      addr[k] = o.imm + (o.reg >= 0 ? known[o.reg] : 0);
    }
    if (is_static) KILN_RETURN_IF_ERROR(CheckAccesses(p, i, addr, sizes));
  }
  return absl::OkStatus();
}

}  // namespace kiln::sim
