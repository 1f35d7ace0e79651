//===- encode.cc - Programs to and from their protobuf form ---------------===//
#include "sim/isa/encode.h"

#include "graph/support/status.h"
#include "sim/isa/verify.h"

namespace kiln::sim {

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
  for (const Inst& in : p.insts) {
    isa::Instruction* x = out.add_insts();
    const OpInfo& info = Info(in.op);
    x->set_op(static_cast<isa::Opcode>(in.op));
    x->set_dtype(static_cast<isa::DType>(in.dtype));
    x->set_dtype2(static_cast<isa::DType>(in.dtype2));
    for (size_t k = 0; k < info.operands.size(); ++k) {
      const Operand& o = in.ops[k];
      if (o.kind == Operand::Kind::kNone) continue;
      isa::Operand* y = x->add_operands();
      switch (o.kind) {
        case Operand::Kind::kReg: y->set_reg(o.reg); break;
        case Operand::Kind::kImm: y->set_imm(o.imm); break;
        case Operand::Kind::kFloat: y->set_fimm(o.fimm); break;
        case Operand::Kind::kPipe: y->set_pipe(static_cast<isa::Pipe>(o.imm)); break;
        case Operand::Kind::kLabel: y->set_label(o.imm); break;
        case Operand::Kind::kAddr: {
          isa::Address* a = y->mutable_addr();
          a->set_space(static_cast<isa::Space>(o.space));
          a->set_arg(o.arg < 0 ? 0 : o.arg);
          if (o.reg >= 0) a->set_reg(o.reg);
          a->set_offset(o.imm);
          break;
        }
        case Operand::Kind::kNone: break;
      }
    }
    for (size_t k = 0; k < info.attrs.size(); ++k) x->add_attrs(in.attrs[k]);
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
  p.insts.reserve(static_cast<size_t>(x.insts_size()));
  for (int i = 0; i < x.insts_size(); ++i) {
    const isa::Instruction& y = x.insts(i);
    if (y.op() < 0 || y.op() >= static_cast<int>(Op::kNumOps)) return InvalidArgument("instruction ", i, ": bad opcode");
    Inst in;
    in.op = static_cast<Op>(y.op());
    const OpInfo& info = Info(in.op);
    if (y.dtype() < 0 || y.dtype() > isa::S8 || y.dtype2() < 0 || y.dtype2() > isa::S8)
      return InvalidArgument("instruction ", i, ": bad dtype");
    in.dtype = static_cast<DType>(y.dtype());
    in.dtype2 = static_cast<DType>(y.dtype2());
    if ((info.ndtypes >= 1) != (in.dtype != DType::kNone) || (info.ndtypes == 2) != (in.dtype2 != DType::kNone))
      return InvalidArgument("instruction ", i, " (", info.name, "): takes ", info.ndtypes, " dtypes");
    if (y.operands_size() > static_cast<int>(info.operands.size()))
      return InvalidArgument("instruction ", i, " (", info.name, "): too many operands");
    for (int k = 0; k < y.operands_size(); ++k) {
      const isa::Operand& z = y.operands(k);
      Operand& o = in.ops[k];
      switch (z.kind_case()) {
        case isa::Operand::kReg: o = Operand::Reg(z.reg()); break;
        case isa::Operand::kImm: o = Operand::Imm(z.imm()); break;
        case isa::Operand::kFimm: o = Operand::Float(z.fimm()); break;
        case isa::Operand::kPipe:
          if (z.pipe() < 0 || z.pipe() > isa::ALL) return InvalidArgument("instruction ", i, ": bad pipe");
          o = Operand::PipeOp(static_cast<Pipe>(z.pipe()));
          break;
        case isa::Operand::kLabel: o = Operand::Label(z.label()); break;
        case isa::Operand::kAddr: {
          const isa::Address& a = z.addr();
          if (a.space() <= isa::SPACE_NONE || a.space() > isa::UB) return InvalidArgument("instruction ", i, ": bad space");
          Space s = static_cast<Space>(a.space());
          o = Operand::Addr(s, a.has_reg() ? a.reg() : -1, a.offset(), s == Space::kGm ? a.arg() : -1);
          if (a.has_reg() && (a.reg() < 0 || a.reg() > 32767)) return InvalidArgument("instruction ", i, ": bad register");
          break;
        }
        case isa::Operand::KIND_NOT_SET: return InvalidArgument("instruction ", i, ": empty operand");
      }
      if (z.kind_case() == isa::Operand::kReg && (z.reg() < 0 || z.reg() > 32767))
        return InvalidArgument("instruction ", i, ": bad register");
    }
    if (y.attrs_size() != static_cast<int>(info.attrs.size()))
      return InvalidArgument("instruction ", i, " (", info.name, "): expected ", info.attrs.size(), " attributes, got ",
                             y.attrs_size());
    for (int k = 0; k < y.attrs_size(); ++k) in.attrs[k] = y.attrs(k);
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
