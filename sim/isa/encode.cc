//===- encode.cc - Programs to and from their protobuf form ---------------===//
#include "sim/isa/encode.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "absl/base/casts.h"
#include "graph/support/status.h"
#include "sim/isa/verify.h"

namespace kiln::sim {

namespace {

// The head word of an instruction (isa.proto, Program.code).
constexpr int64_t kOpRange = 1024, kDTypeRange = 16;

// Reads Program.code word by word; false past its end.
class CodeReader {
 public:
  explicit CodeReader(const google::protobuf::RepeatedField<int64_t>& code) : code_(code) {}
  bool done() const { return at_ >= code_.size(); }
  bool Next(int64_t* v) {
    if (at_ >= code_.size()) return false;
    *v = code_.Get(at_++);
    return true;
  }

 private:
  const google::protobuf::RepeatedField<int64_t>& code_;
  int at_ = 0;
};

}  // namespace

isa::Program ToProto(const Program& p) {
  isa::Program out;
  out.set_name(p.name);
  out.set_num_regs(p.num_regs);
  for (const Arg& a : p.args) {
    isa::Arg* x = out.add_args();
    x->set_name(a.name);
    x->set_dtype(static_cast<isa::DType>(a.dtype));
    for (int64_t d : a.shape) x->add_shape(d);
  }
  for (const auto& [index, name] : p.labels) {
    isa::Label* l = out.add_labels();
    l->set_index(index);
    l->set_name(name);
  }
  google::protobuf::RepeatedField<int64_t>& code = *out.mutable_code();
  code.Reserve(static_cast<int>(std::min<size_t>(p.insts.size() * 16, INT32_MAX / 2)));
  for (const Inst& in : p.insts) {
    const OpInfo& info = Info(in.op);
    int64_t operands = 0;
    for (size_t k = 0; k < info.operands.size(); ++k) operands += in.ops[k].kind != Operand::Kind::kNone;
    code.Add(static_cast<int64_t>(in.op) +
             kOpRange * (static_cast<int64_t>(in.dtype) +
                         kDTypeRange * (static_cast<int64_t>(in.dtype2) + kDTypeRange * operands)));
    for (size_t k = 0; k < info.operands.size(); ++k) {
      const Operand& o = in.ops[k];
      if (o.kind == Operand::Kind::kNone) continue;
      code.Add(static_cast<int64_t>(o.kind));
      switch (o.kind) {
        case Operand::Kind::kReg: code.Add(o.reg); break;
        case Operand::Kind::kFloat: code.Add(absl::bit_cast<int64_t>(o.fimm)); break;
        case Operand::Kind::kAddr:
          code.Add(static_cast<int64_t>(o.space));
          code.Add(o.reg);
          code.Add(o.space == Space::kGm ? o.arg : -1);
          code.Add(o.imm);
          break;
        case Operand::Kind::kImm: case Operand::Kind::kPipe: case Operand::Kind::kLabel: code.Add(o.imm); break;
        case Operand::Kind::kNone: break;
      }
    }
    for (size_t k = 0; k < info.attrs.size(); ++k) code.Add(in.attrs[k]);
  }
  return out;
}

absl::StatusOr<Program> FromProto(const isa::Program& x) {
  Program p;
  p.name = x.name();
  p.num_regs = x.num_regs();
  for (const isa::Arg& a : x.args()) {
    Arg arg;
    arg.name = a.name();
    if (a.dtype() <= isa::DTYPE_NONE || a.dtype() > isa::S8) return InvalidArgument("argument ", a.name(), ": bad dtype");
    arg.dtype = static_cast<DType>(a.dtype());
    for (int64_t d : a.shape()) {
      if (d < 0) return InvalidArgument("argument ", a.name(), ": negative dimension");
      arg.shape.push_back(d);
    }
    if (arg.Bytes() > kMaxArgBytes)
      return InvalidArgument("argument ", a.name(), ": more than ", kMaxArgBytes, " bytes");
    p.args.push_back(arg);
  }
  for (const isa::Label& l : x.labels()) p.labels.emplace_back(l.index(), l.name());
  std::sort(p.labels.begin(), p.labels.end());
  CodeReader r(x.code());
  for (int64_t i = 0; !r.done(); ++i) {
    auto truncated = [&] { return InvalidArgument("instruction ", i, ": the code ends inside it"); };
    int64_t head = 0;
    r.Next(&head);
    if (head < 0) return InvalidArgument("instruction ", i, ": bad head word ", head);
    const int64_t op = head % kOpRange, dtype = head / kOpRange % kDTypeRange,
                  dtype2 = head / (kOpRange * kDTypeRange) % kDTypeRange,
                  operands = head / (kOpRange * kDTypeRange * kDTypeRange);
    if (op >= static_cast<int64_t>(Op::kNumOps)) return InvalidArgument("instruction ", i, ": bad opcode");
    Inst in;
    in.op = static_cast<Op>(op);
    const OpInfo& info = Info(in.op);
    if (dtype > isa::S8 || dtype2 > isa::S8) return InvalidArgument("instruction ", i, ": bad dtype");
    in.dtype = static_cast<DType>(dtype);
    in.dtype2 = static_cast<DType>(dtype2);
    if ((info.ndtypes >= 1) != (in.dtype != DType::kNone) || (info.ndtypes == 2) != (in.dtype2 != DType::kNone))
      return InvalidArgument("instruction ", i, " (", info.name, "): takes ", info.ndtypes, " dtypes");
    if (operands > static_cast<int64_t>(info.operands.size()))
      return InvalidArgument("instruction ", i, " (", info.name, "): too many operands");
    auto reg_ok = [](int64_t reg) { return reg >= 0 && reg <= 32767; };
    for (int64_t k = 0; k < operands; ++k) {
      Operand& o = in.ops[k];
      int64_t kind = 0, v = 0;
      if (!r.Next(&kind) || !r.Next(&v)) return truncated();
      switch (kind) {
        case static_cast<int64_t>(Operand::Kind::kReg):
          if (!reg_ok(v)) return InvalidArgument("instruction ", i, ": bad register");
          o = Operand::Reg(static_cast<int>(v));
          break;
        case static_cast<int64_t>(Operand::Kind::kImm): o = Operand::Imm(v); break;
        case static_cast<int64_t>(Operand::Kind::kFloat): o = Operand::Float(absl::bit_cast<double>(v)); break;
        case static_cast<int64_t>(Operand::Kind::kPipe):
          if (v < 0 || v > isa::ALL) return InvalidArgument("instruction ", i, ": bad pipe");
          o = Operand::PipeOp(static_cast<Pipe>(v));
          break;
        case static_cast<int64_t>(Operand::Kind::kLabel): o = Operand::Label(v); break;
        case static_cast<int64_t>(Operand::Kind::kAddr): {
          int64_t reg = 0, arg = 0, offset = 0;
          if (!r.Next(&reg) || !r.Next(&arg) || !r.Next(&offset)) return truncated();
          if (v <= isa::SPACE_NONE || v > isa::UB) return InvalidArgument("instruction ", i, ": bad space");
          if (reg != -1 && !reg_ok(reg)) return InvalidArgument("instruction ", i, ": bad register");
          const Space s = static_cast<Space>(v);
          if (s == Space::kGm ? (arg < 0 || arg > INT32_MAX) : arg != -1)
            return InvalidArgument("instruction ", i, ": bad argument index");
          o = Operand::Addr(s, static_cast<int>(reg), offset, static_cast<int>(arg));
          break;
        }
        default: return InvalidArgument("instruction ", i, ": bad operand kind ", kind);
      }
    }
    for (size_t k = 0; k < info.attrs.size(); ++k)
      if (!r.Next(&in.attrs[k])) return truncated();
    p.insts.push_back(in);
  }
  KILN_RETURN_IF_ERROR(VerifyProgram(p));
  return p;
}

std::string SerializeProgram(const Program& p) { return ToProto(p).SerializeAsString(); }

absl::StatusOr<Program> ParseProgram(const std::string& bytes) {
  isa::Program x;
  if (!x.ParseFromString(bytes)) return InvalidArgument("malformed program (not a kiln.sim.isa.Program)");
  return FromProto(x);
}

}  // namespace kiln::sim
