//===- isa.cc - The table of NPU instructions -----------------------------===//
#include "sim/isa/isa.h"

#include <algorithm>
#include <limits>

#include "absl/container/flat_hash_map.h"

#include "graph/support/checked_math.h"

namespace kiln::sim {

int DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: case DType::kS32: return 4;
    case DType::kF16: case DType::kBF16: return 2;
    case DType::kS8: return 1;
    case DType::kNone: return 0;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kS32: return "s32";
    case DType::kS8: return "s8";
    case DType::kNone: return "none";
  }
  return "?";
}

bool ParseDType(absl::string_view s, DType* t) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kS32, DType::kS8})
    if (s == DTypeName(d)) {
      *t = d;
      return true;
    }
  return false;
}

const char* SpaceName(Space s) {
  switch (s) {
    case Space::kGm: return "GM";
    case Space::kL1: return "L1";
    case Space::kL0A: return "L0A";
    case Space::kL0B: return "L0B";
    case Space::kL0C: return "L0C";
    case Space::kUb: return "UB";
    case Space::kNone: return "none";
  }
  return "?";
}

const char* PipeName(Pipe p) {
  static const char* const kNames[] = {"SCALAR", "MTE1", "MTE2", "MTE3", "CUBE", "VECTOR", "FIXP", "ALL"};
  return kNames[static_cast<int>(p)];
}

const char* PipeTraceName(Pipe p) { return p == Pipe::kCube ? "Cube" : PipeName(p); }

bool ParsePipe(absl::string_view s, Pipe* p) {
  for (int i = 0; i <= kNumPipes; ++i)
    if (s == PipeName(static_cast<Pipe>(i))) {
      *p = static_cast<Pipe>(i);
      return true;
    }
  return false;
}

namespace {

const char* const kCmpNames[] = {"eq", "ne", "lt", "le", "gt", "ge", nullptr};
const char* const kRoundNames[] = {"rint", "trunc", "floor", "ceil", nullptr};

constexpr AttrDefault kC = AttrDefault::kConst, kR = AttrDefault::kRequired, kA = AttrDefault::kAuto;

std::vector<AttrInfo> CopyAttrs() {
  return {{"nburst", kC, 1}, {"len", kR}, {"src_stride", kA}, {"dst_stride", kA}};
}
std::vector<AttrInfo> VecAttrs() {
  return {{"repeat", kC, 1},      {"mask", kA},           {"dst_blk_stride", kC, 1}, {"src0_blk_stride", kC, 1},
          {"src1_blk_stride", kC, 1}, {"dst_rep_stride", kA}, {"src0_rep_stride", kA}, {"src1_rep_stride", kA}};
}
std::vector<AttrInfo> VecAttrsWith(AttrInfo extra) {
  auto v = VecAttrs();
  v.push_back(extra);
  return v;
}

std::vector<OpInfo> BuildTable() {
  using S = Spec;
  const Pipe kS = Pipe::kScalar;
  std::vector<OpInfo> t;
  auto add = [&](Op op, const char* name, Pipe pipe, int ndt, std::vector<Spec> ops, std::vector<AttrInfo> attrs) {
    t.push_back(OpInfo{op, name, pipe, ndt, std::move(ops), std::move(attrs)});
  };
  add(Op::kMov, "mov", kS, 0, {S::kReg, S::kValue}, {});
  const std::pair<Op, const char*> alu[] = {{Op::kAdd, "add"}, {Op::kSub, "sub"}, {Op::kMul, "mul"},
                                            {Op::kDiv, "div"}, {Op::kRem, "rem"}, {Op::kMin, "min"},
                                            {Op::kMax, "max"}, {Op::kShl, "shl"}, {Op::kShr, "shr"},
                                            {Op::kAnd, "and"}, {Op::kOr, "or"}};
  for (auto [op, name] : alu) add(op, name, kS, 0, {S::kReg, S::kReg, S::kValue}, {});
  add(Op::kBlockIdx, "block_idx", kS, 0, {S::kReg}, {});
  add(Op::kBlockDim, "block_dim", kS, 0, {S::kReg}, {});
  add(Op::kJmp, "jmp", kS, 0, {S::kLabel}, {});
  const std::pair<Op, const char*> br[] = {{Op::kBeq, "beq"}, {Op::kBne, "bne"}, {Op::kBlt, "blt"}, {Op::kBge, "bge"}};
  for (auto [op, name] : br) add(op, name, kS, 0, {S::kReg, S::kValue, S::kLabel}, {});

  add(Op::kCopyGmL1, "copy_gm_l1", Pipe::kMte2, 0, {S::kAddr, S::kAddr}, CopyAttrs());
  add(Op::kCopyGmUb, "copy_gm_ub", Pipe::kMte2, 0, {S::kAddr, S::kAddr}, CopyAttrs());
  add(Op::kNd2Nz, "nd2nz", Pipe::kMte2, 1, {S::kAddr, S::kAddr},
      {{"rows", kR}, {"cols", kR}, {"src_row_stride", kA}});

  std::vector<AttrInfo> load = {{"rows", kC, 1}, {"cols", kC, 1}, {"src_row_stride", kA}, {"transpose", kC, 0}};
  add(Op::kLoadL0A, "load_l0a", Pipe::kMte1, 1, {S::kAddr, S::kAddr}, load);
  add(Op::kLoadL0B, "load_l0b", Pipe::kMte1, 1, {S::kAddr, S::kAddr}, load);
  add(Op::kImg2Col, "img2col", Pipe::kMte1, 1, {S::kAddr, S::kAddr},
      {{"h", kR}, {"w", kR}, {"c1", kR}, {"kh", kR}, {"kw", kR}, {"stride_h", kC, 1}, {"stride_w", kC, 1},
       {"pad_top", kC, 0}, {"pad_bottom", kC, 0}, {"pad_left", kC, 0}, {"pad_right", kC, 0}, {"dil_h", kC, 1},
       {"dil_w", kC, 1}, {"pos", kC, 0}, {"m", kR}, {"k_start", kC, 0}, {"k", kR}});

  add(Op::kMmad, "mmad", Pipe::kCube, 1, {S::kAddr, S::kAddr, S::kAddr},
      {{"m", kR}, {"k", kR}, {"n", kR}, {"init", kC, 0}});
  add(Op::kFixp, "fixp", Pipe::kFixp, 2, {S::kAddr, S::kAddr, S::kAddrOpt},
      {{"m", kR}, {"n", kR}, {"dst_row_stride", kA}, {"relu", kC, 0}});

  const std::pair<Op, const char*> bin[] = {{Op::kVadd, "vadd"}, {Op::kVsub, "vsub"}, {Op::kVmul, "vmul"},
                                            {Op::kVdiv, "vdiv"}, {Op::kVmax, "vmax"}, {Op::kVmin, "vmin"}};
  for (auto [op, name] : bin) add(op, name, Pipe::kVector, 1, {S::kAddr, S::kAddr, S::kAddr}, VecAttrs());
  const std::pair<Op, const char*> un[] = {
      {Op::kVexp, "vexp"}, {Op::kVln, "vln"},         {Op::kVsqrt, "vsqrt"},       {Op::kVrsqrt, "vrsqrt"},
      {Op::kVrec, "vrec"}, {Op::kVtanh, "vtanh"},     {Op::kVsigmoid, "vsigmoid"}, {Op::kVerf, "verf"},
      {Op::kVabs, "vabs"}, {Op::kVrelu, "vrelu"},     {Op::kVmov, "vmov"}};
  for (auto [op, name] : un) add(op, name, Pipe::kVector, 1, {S::kAddr, S::kAddr}, VecAttrs());
  const std::pair<Op, const char*> sc[] = {
      {Op::kVadds, "vadds"}, {Op::kVmuls, "vmuls"}, {Op::kVmaxs, "vmaxs"}, {Op::kVmins, "vmins"}};
  for (auto [op, name] : sc) add(op, name, Pipe::kVector, 1, {S::kAddr, S::kAddr, S::kFloat}, VecAttrs());
  add(Op::kVdup, "vdup", Pipe::kVector, 1, {S::kAddr, S::kFloat}, VecAttrs());
  add(Op::kVcmp, "vcmp", Pipe::kVector, 1, {S::kAddr, S::kAddr, S::kAddr},
      VecAttrsWith({"cmp", kR, 0, kCmpNames}));
  add(Op::kVsel, "vsel", Pipe::kVector, 1, {S::kAddr, S::kAddr, S::kAddr, S::kAddr}, VecAttrs());
  add(Op::kVconv, "vconv", Pipe::kVector, 2, {S::kAddr, S::kAddr},
      VecAttrsWith({"round", kC, 0, kRoundNames}));
  add(Op::kVcadd, "vcadd", Pipe::kVector, 1, {S::kAddr, S::kAddr}, VecAttrs());
  add(Op::kVcmax, "vcmax", Pipe::kVector, 1, {S::kAddr, S::kAddr}, VecAttrs());
  add(Op::kVcmin, "vcmin", Pipe::kVector, 1, {S::kAddr, S::kAddr}, VecAttrs());
  add(Op::kVbrcb, "vbrcb", Pipe::kVector, 1, {S::kAddr, S::kAddr}, VecAttrs());
  add(Op::kVtranspose, "vtranspose", Pipe::kVector, 1, {S::kAddr, S::kAddr}, VecAttrs());

  add(Op::kCopyUbGm, "copy_ub_gm", Pipe::kMte3, 0, {S::kAddr, S::kAddr}, CopyAttrs());

  add(Op::kLd, "ld", kS, 1, {S::kReg, S::kAddr}, {});

  add(Op::kSetFlag, "set_flag", kS, 0, {S::kPipe, S::kPipe, S::kImm}, {});
  add(Op::kWaitFlag, "wait_flag", kS, 0, {S::kPipe, S::kPipe, S::kImm}, {});
  add(Op::kPipeBarrier, "pipe_barrier", kS, 0, {S::kPipeAll}, {});
  add(Op::kSyncAll, "sync_all", kS, 0, {}, {});
  return t;
}

}  // namespace

const std::vector<OpInfo>& Ops() {
  static const std::vector<OpInfo>* table = [] {
    auto* t = new std::vector<OpInfo>(BuildTable());
    std::sort(t->begin(), t->end(), [](const OpInfo& a, const OpInfo& b) { return a.op < b.op; });
    return t;
  }();
  return *table;
}

const OpInfo& Info(Op op) { return Ops()[static_cast<size_t>(op)]; }

bool FindOp(absl::string_view name, Op* op) {
  // By name, built once (the assembler looks up every instruction's).
  static const auto* by_name = [] {
    auto* m = new absl::flat_hash_map<absl::string_view, Op>;
    for (const OpInfo& i : Ops()) m->emplace(i.name, i.op);
    return m;
  }();
  auto it = by_name->find(name);
  if (it == by_name->end()) return false;
  *op = it->second;
  return true;
}

bool IsSpecialFunction(Op op) {
  switch (op) {
    case Op::kVexp: case Op::kVln: case Op::kVsqrt: case Op::kVrsqrt: case Op::kVrec: case Op::kVtanh:
    case Op::kVsigmoid: case Op::kVerf: case Op::kVdiv:
      return true;
    default:
      return false;
  }
}

Pipe ExecPipe(const Inst& in) {
  switch (in.op) {
    case Op::kSetFlag: return static_cast<Pipe>(in.ops[0].imm);
    case Op::kWaitFlag: return static_cast<Pipe>(in.ops[1].imm);
    case Op::kPipeBarrier: {
      Pipe p = static_cast<Pipe>(in.ops[0].imm);
      return p == Pipe::kAll ? Pipe::kScalar : p;
    }
    default: return Info(in.op).pipe;
  }
}

int ElementsPerRepeat(const Inst& in) {
  if (in.op == Op::kVtranspose) return DTypeSize(in.dtype) == 4 ? kTransposeElements32 : kTransposeElements;
  int size = std::max(DTypeSize(in.dtype), DTypeSize(in.dtype2));
  return size ? kRepeatBytes / size : 0;
}

void FillAutoAttrs(Inst& in) {
  const OpInfo& info = Info(in.op);
  auto set = [&](int i, int64_t v) {
    if (i < static_cast<int>(info.attrs.size()) && info.attrs[i].how == AttrDefault::kAuto && in.attrs[i] < 0)
      in.attrs[i] = v;
  };
  switch (in.op) {
    case Op::kCopyGmL1: case Op::kCopyGmUb: case Op::kCopyUbGm:
      set(attr::kSrcStride, in.attrs[attr::kLen]);
      set(attr::kDstStride, in.attrs[attr::kLen]);
      break;
    case Op::kNd2Nz: set(attr::kNzSrcRowStride, in.attrs[attr::kNzCols]); break;
    case Op::kLoadL0A: case Op::kLoadL0B: set(attr::kLdSrcRowStride, in.attrs[attr::kLdCols]); break;
    case Op::kFixp: set(attr::kFxDstRowStride, in.attrs[attr::kFxN] * 16); break;
    default:
      if (info.pipe == Pipe::kVector) {
        int epr = ElementsPerRepeat(in);
        int dst_blocks = epr * DTypeSize(in.dtype) / kBlockBytes;
        int src_blocks = epr * DTypeSize(in.dtype2 == DType::kNone ? in.dtype : in.dtype2) / kBlockBytes;
        // One matrix: 16 rows of 2-byte elements, or 8 of 4-byte ones, a block each.
        if (in.op == Op::kVtranspose) dst_blocks = src_blocks = DTypeSize(in.dtype) == 4 ? 8 : 16;
        set(attr::kMask, epr);
        set(attr::kDstRep, dst_blocks);
        set(attr::kSrc0Rep, src_blocks);
        set(attr::kSrc1Rep, src_blocks);
      }
  }
}

int64_t Arg::Bytes() const {
  return ByteSize(shape, DTypeSize(dtype), name).value_or(std::numeric_limits<int64_t>::max());
}

}  // namespace kiln::sim
