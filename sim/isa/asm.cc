//===- asm.cc - Assembler and disassembler of .kasm -----------------------===//
#include "sim/isa/asm.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "graph/support/status.h"
#include "graph/support/float16.h"
#include "sim/isa/verify.h"

namespace kiln::sim {
namespace {

// ----- Printing -----

std::string FloatText(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string AddrText(const Program& p, const Operand& o) {
  std::string base = o.space == Space::kGm
                         ? (o.arg >= 0 && o.arg < static_cast<int>(p.args.size()) ? p.args[o.arg].name
                                                                                   : absl::StrCat("arg", o.arg))
                         : SpaceName(o.space);
  std::string inner;
  if (o.reg >= 0) {
    inner = absl::StrCat("r", o.reg);
    if (o.imm > 0) absl::StrAppend(&inner, " + ", o.imm);
    if (o.imm < 0) absl::StrAppend(&inner, " - ", -o.imm);
  } else {
    inner = absl::StrCat(o.imm);
  }
  return absl::StrCat(base, "[", inner, "]");
}

std::string LabelName(const Program& p, int64_t target) {
  auto it = std::lower_bound(p.labels.begin(), p.labels.end(), std::make_pair(target, std::string()));
  if (it != p.labels.end() && it->first == target) return it->second;
  return absl::StrCat("L", target);
}

std::string OperandText(const Program& p, const Operand& o) {
  switch (o.kind) {
    case Operand::Kind::kReg: return absl::StrCat("r", o.reg);
    case Operand::Kind::kImm: return absl::StrCat(o.imm);
    case Operand::Kind::kFloat: return FloatText(o.fimm);
    case Operand::Kind::kAddr: return AddrText(p, o);
    case Operand::Kind::kPipe: return PipeName(static_cast<Pipe>(o.imm));
    case Operand::Kind::kLabel: return LabelName(p, o.imm);
    case Operand::Kind::kNone: return "";
  }
  return "";
}

std::string AttrValueText(const AttrInfo& a, int64_t v) {
  if (a.enum_names) {
    int n = 0;
    while (a.enum_names[n]) ++n;
    if (v >= 0 && v < n) return a.enum_names[v];
  }
  return absl::StrCat(v);
}

// ----- Parsing helpers -----

bool ParseInt(absl::string_view s, int64_t* v) {
  s = absl::StripAsciiWhitespace(s);
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  uint64_t u = 0;
  if (absl::StartsWith(s, "0x") || absl::StartsWith(s, "0X")) {
    auto r = std::from_chars(s.data() + 2, s.data() + s.size(), u, 16);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || s.size() == 2) return false;
  } else {
    auto r = std::from_chars(s.data(), s.data() + s.size(), u, 10);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || s.empty()) return false;
  }
  if (u > static_cast<uint64_t>(INT64_MAX)) return false;
  *v = neg ? -static_cast<int64_t>(u) : static_cast<int64_t>(u);
  return true;
}

bool ParseFloat(absl::string_view s, double* v) {
  s = absl::StripAsciiWhitespace(s);
  if (s == "inf" || s == "+inf") { *v = INFINITY; return true; }
  if (s == "-inf") { *v = -INFINITY; return true; }
  if (s == "nan") { *v = NAN; return true; }
  auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
  if (r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty()) return true;
  if (!s.empty() && s[0] == '+') return ParseFloat(s.substr(1), v);
  return false;
}

bool ParseReg(absl::string_view s, int* r) {
  s = absl::StripAsciiWhitespace(s);
  int64_t v;
  if (s.size() < 2 || s[0] != 'r' || !std::isdigit(static_cast<unsigned char>(s[1])) || !ParseInt(s.substr(1), &v) ||
      v > 32767)
    return false;
  *r = static_cast<int>(v);
  return true;
}

bool IsIdent(absl::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// Splits on commas outside brackets, parentheses and quotes (views of `s`).
std::vector<absl::string_view> SplitTop(absl::string_view s) {
  std::vector<absl::string_view> out;
  int depth = 0;
  bool quote = false;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') quote = !quote;
    if (!quote && (c == '[' || c == '(')) ++depth;
    if (!quote && (c == ']' || c == ')')) --depth;
    if (c == ',' && depth == 0 && !quote) {
      out.push_back(absl::StripAsciiWhitespace(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  const absl::string_view last = absl::StripAsciiWhitespace(s.substr(start));
  if (!last.empty() || !out.empty()) out.push_back(last);
  return out;
}

absl::string_view StripComment(absl::string_view line) {
  bool quote = false;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '"') quote = !quote;
    if (quote) continue;
    if (line[i] == '#' || line[i] == ';' || (line[i] == '/' && i + 1 < line.size() && line[i + 1] == '/'))
      return line.substr(0, i);
  }
  return line;
}

class Assembler {
 public:
  Assembler(const std::string& source) : source_(source) {}

  absl::StatusOr<KasmFile> Run(absl::string_view text) {
    std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
    file_.program.insts.reserve(lines.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      line_ = static_cast<int>(i) + 1;
      KILN_RETURN_IF_ERROR(Line(absl::StripAsciiWhitespace(StripComment(lines[i]))));
    }
    // Resolve branch targets.
    Program& p = file_.program;
    for (const auto& [name, target] : labels_) p.labels.emplace_back(target, name);
    std::sort(p.labels.begin(), p.labels.end());
    for (const auto& fix : fixups_) {
      auto it = labels_.find(fix.label);
      if (it == labels_.end()) return Error(fix.line, "unknown label '", fix.label, "'");
      p.insts[fix.inst].ops[fix.operand].imm = it->second;
    }
    file_.data.resize(p.args.size());
    absl::Status s = VerifyProgram(p);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(source_, ": ", s.message()));
    return std::move(file_);
  }

 private:
  struct Fixup {
    size_t inst;
    int operand;
    std::string label;
    int line;
  };

  template <typename... A>
  absl::Status Error(int line, const A&... a) {
    return absl::InvalidArgumentError(absl::StrCat(source_, ":", line, ": ", a...));
  }
  template <typename... A>
  absl::Status Error(const A&... a) {
    return Error(line_, a...);
  }

  absl::Status Line(absl::string_view s) {
    if (s.empty()) return absl::OkStatus();
    // Labels: `name:` (an instruction may follow on the same line).
    size_t colon = s.find(':');
    if (colon != absl::string_view::npos && s[0] != '.' && IsIdent(absl::StripAsciiWhitespace(s.substr(0, colon)))) {
      std::string name(absl::StripAsciiWhitespace(s.substr(0, colon)));
      if (!labels_.emplace(name, file_.program.insts.size()).second) return Error("label '", name, "' defined twice");
      return Line(absl::StripAsciiWhitespace(s.substr(colon + 1)));
    }
    if (s[0] == '.') return Directive(s);
    return Instruction(s);
  }

  absl::Status Directive(absl::string_view s) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(s, absl::MaxSplits(absl::ByAnyChar(" \t"), 1));
    absl::string_view rest = absl::StripAsciiWhitespace(kv.second);
    Program& p = file_.program;
    int64_t v;
    if (kv.first == ".program") {
      if (!IsIdent(rest)) return Error(".program needs a name");
      p.name = std::string(rest);
    } else if (kv.first == ".regs") {
      if (!ParseInt(rest, &v) || v < 1 || v > 256) return Error(".regs needs a count from 1 to 256");
      p.num_regs = static_cast<int>(v);
    } else if (kv.first == ".block_dim") {
      if (!ParseInt(rest, &v) || v < 1 || v > (1 << 24)) return Error(".block_dim needs a count from 1 to 16777216");
      file_.block_dim = v;
    } else if (kv.first == ".arg") {
      return ArgDirective(rest);
    } else {
      return Error("unknown directive '", kv.first, "'");
    }
    return absl::OkStatus();
  }

  // .arg NAME DTYPE[d0,d1,...] [init=zero|random(SEED)|npy("file")] [output="file"]
  absl::Status ArgDirective(absl::string_view s) {
    size_t sp = s.find_first_of(" \t");
    if (sp == absl::string_view::npos) return Error(".arg needs NAME DTYPE[SHAPE]");
    Arg a;
    a.name = std::string(s.substr(0, sp));
    if (!IsIdent(a.name) || a.name == "L1" || a.name == "L0A" || a.name == "L0B" || a.name == "L0C" || a.name == "UB")
      return Error("bad argument name '", a.name, "'");
    for (const Arg& b : file_.program.args)
      if (b.name == a.name) return Error("argument '", a.name, "' declared twice");
    absl::string_view rest = absl::StripAsciiWhitespace(s.substr(sp));
    size_t lb = rest.find('['), rb = rest.find(']');
    if (lb == absl::string_view::npos || rb == absl::string_view::npos || rb < lb)
      return Error(".arg ", a.name, ": expected DTYPE[SHAPE]");
    if (!ParseDType(std::string(rest.substr(0, lb)), &a.dtype))
      return Error(".arg ", a.name, ": unknown dtype '", rest.substr(0, lb), "'");
    absl::string_view dims = absl::StripAsciiWhitespace(rest.substr(lb + 1, rb - lb - 1));
    if (!dims.empty())
      for (absl::string_view d : absl::StrSplit(dims, ',')) {
        int64_t v;
        if (!ParseInt(d, &v) || v < 0 || v > kMaxArgBytes) return Error(".arg ", a.name, ": bad dimension '", d, "'");
        a.shape.push_back(v);
      }
    if (a.Bytes() > kMaxArgBytes) return Error(".arg ", a.name, ": too large (more than ", kMaxArgBytes, " bytes)");
    ArgData data;
    for (absl::string_view clause : absl::StrSplit(rest.substr(rb + 1), ' ', absl::SkipWhitespace())) {
      if (clause == "init=zero") {
        data.init = InitKind::kZero;
      } else if (absl::ConsumePrefix(&clause, "init=random(") && absl::ConsumeSuffix(&clause, ")")) {
        int64_t seed;
        if (!ParseInt(clause, &seed) || seed < 0) return Error(".arg ", a.name, ": bad random seed");
        data.init = InitKind::kRandom;
        data.seed = static_cast<uint64_t>(seed);
      } else if (absl::ConsumePrefix(&clause, "init=npy(\"") && absl::ConsumeSuffix(&clause, "\")")) {
        data.init = InitKind::kNpy;
        data.npy = std::string(clause);
      } else if (absl::ConsumePrefix(&clause, "output=\"") && absl::ConsumeSuffix(&clause, "\"")) {
        data.output = std::string(clause);
      } else {
        return Error(".arg ", a.name, ": unknown clause '", clause,
                     "' (expected init=zero, init=random(SEED), init=npy(\"FILE\") or output=\"FILE\")");
      }
    }
    file_.program.args.push_back(std::move(a));
    file_.data.push_back(std::move(data));
    return absl::OkStatus();
  }

  absl::Status Instruction(absl::string_view s) {
    size_t sp = s.find_first_of(" \t");
    absl::string_view mnem = s.substr(0, sp);
    absl::string_view rest = sp == absl::string_view::npos ? "" : s.substr(sp + 1);
    std::vector<absl::string_view> parts = absl::StrSplit(mnem, '.');
    Inst in;
    if (!FindOp(parts[0], &in.op)) return Error("unknown instruction '", parts[0], "'");
    const OpInfo& info = Info(in.op);
    if (static_cast<int>(parts.size()) - 1 != info.ndtypes)
      return Error("'", info.name, "' takes ", info.ndtypes, " dtype suffix", info.ndtypes == 1 ? "" : "es",
                   info.ndtypes ? absl::StrCat(" (", info.name, info.ndtypes == 1 ? ".f16" : ".f16.f32", ")") : "");
    if (info.ndtypes >= 1 && !ParseDType(parts[1], &in.dtype)) return Error("unknown dtype '", parts[1], "'");
    if (info.ndtypes == 2 && !ParseDType(parts[2], &in.dtype2)) return Error("unknown dtype '", parts[2], "'");

    for (size_t i = 0; i < info.attrs.size(); ++i)
      in.attrs[i] = info.attrs[i].how == AttrDefault::kConst ? info.attrs[i].value : -1;
    std::vector<bool> given(info.attrs.size(), false);
    size_t nops = 0;
    for (const absl::string_view part : SplitTop(rest)) {
      if (part.empty()) return Error("empty operand in '", s, "'");
      size_t eq = part.find('=');
      if (eq != absl::string_view::npos && part.find('[') == absl::string_view::npos) {
        const absl::string_view key = absl::StripAsciiWhitespace(part.substr(0, eq));
        const absl::string_view val = absl::StripAsciiWhitespace(part.substr(eq + 1));
        size_t i = 0;
        while (i < info.attrs.size() && key != info.attrs[i].name) ++i;
        if (i == info.attrs.size()) return Error("'", info.name, "' has no attribute '", key, "'");
        if (given[i]) return Error("attribute '", key, "' given twice");
        given[i] = true;
        int64_t v;
        bool ok = ParseInt(val, &v);
        if (!ok && info.attrs[i].enum_names)
          for (int k = 0; info.attrs[i].enum_names[k]; ++k)
            if (val == info.attrs[i].enum_names[k]) {
              v = k;
              ok = true;
            }
        if (!ok) return Error("bad value '", val, "' of attribute '", key, "'");
        if (v < 0) return Error("attribute '", key, "' must not be negative");
        in.attrs[i] = v;
        continue;
      }
      if (nops >= info.operands.size()) return Error("'", info.name, "' takes ", info.operands.size(), " operands");
      KILN_RETURN_IF_ERROR(ParseOperand(info.operands[nops], part, in, static_cast<int>(nops)));
      ++nops;
    }
    size_t needed = info.operands.size();
    if (!info.operands.empty() && info.operands.back() == Spec::kAddrOpt) --needed;
    if (nops < needed) return Error("'", info.name, "' takes ", needed, " operands, got ", nops);
    for (size_t i = 0; i < info.attrs.size(); ++i)
      if (info.attrs[i].how == AttrDefault::kRequired && !given[i])
        return Error("'", info.name, "' needs attribute '", info.attrs[i].name, "'");
    FillAutoAttrs(in);
    file_.program.insts.push_back(in);
    return absl::OkStatus();
  }

  absl::Status ParseOperand(Spec spec, absl::string_view text, Inst& in, int index) {
    Operand& o = in.ops[index];
    int r;
    int64_t v;
    switch (spec) {
      case Spec::kReg:
        if (!ParseReg(text, &r)) return Error("expected a register, got '", text, "'");
        o = Operand::Reg(r);
        return absl::OkStatus();
      case Spec::kValue:
        if (ParseReg(text, &r)) o = Operand::Reg(r);
        else if (ParseInt(text, &v)) o = Operand::Imm(v);
        else return Error("expected a register or an integer, got '", text, "'");
        return absl::OkStatus();
      case Spec::kImm:
        if (!ParseInt(text, &v)) return Error("expected an integer, got '", text, "'");
        o = Operand::Imm(v);
        return absl::OkStatus();
      case Spec::kFloat: {
        double d;
        if (!ParseFloat(text, &d)) return Error("expected a number, got '", text, "'");
        o = Operand::Float(d);
        return absl::OkStatus();
      }
      case Spec::kPipe: case Spec::kPipeAll: {
        Pipe p;
        if (!ParsePipe(text, &p) || (p == Pipe::kAll && spec == Spec::kPipe))
          return Error("expected a pipe (SCALAR, MTE1, MTE2, MTE3, CUBE, VECTOR, FIXP", spec == Spec::kPipeAll ? ", ALL" : "",
                       "), got '", text, "'");
        o = Operand::PipeOp(p);
        return absl::OkStatus();
      }
      case Spec::kLabel:
        if (!IsIdent(text)) return Error("expected a label, got '", text, "'");
        o = Operand::Label(-1);
        fixups_.push_back({file_.program.insts.size(), index, std::string(text), line_});
        return absl::OkStatus();
      case Spec::kAddr: case Spec::kAddrOpt:
        return ParseAddr(text, o);
    }
    return absl::OkStatus();
  }

  absl::Status ParseAddr(absl::string_view text, Operand& o) {
    size_t lb = text.find('[');
    if (lb == absl::string_view::npos || text.back() != ']')
      return Error("expected an address SPACE[rN + OFFSET], got '", text, "'");
    const absl::string_view base = absl::StripAsciiWhitespace(text.substr(0, lb));
    const absl::string_view inner = absl::StripAsciiWhitespace(text.substr(lb + 1, text.size() - lb - 2));
    Space space = Space::kGm;
    int arg = -1;
    for (Space s : {Space::kL1, Space::kL0A, Space::kL0B, Space::kL0C, Space::kUb})
      if (base == SpaceName(s)) space = s;
    if (space == Space::kGm) {
      for (size_t i = 0; i < file_.program.args.size(); ++i)
        if (file_.program.args[i].name == base) arg = static_cast<int>(i);
      if (arg < 0) return Error("unknown buffer '", base, "' (not L1, L0A, L0B, L0C, UB or a declared .arg)");
    }
    int reg = -1;
    int64_t off = 0;
    size_t op = inner.find_first_of("+-", 1);
    const absl::string_view first = absl::StripAsciiWhitespace(inner.substr(0, op));
    if (ParseReg(first, &reg)) {
      if (op != absl::string_view::npos) {
        const absl::string_view tail = absl::StripAsciiWhitespace(inner.substr(op + 1));
        if (!ParseInt(tail, &off)) return Error("bad offset in '", text, "'");
        if (inner[op] == '-') off = -off;
      }
    } else if (!ParseInt(inner, &off)) {
      return Error("bad address '", text, "'");
    }
    o = Operand::Addr(space, reg, off, arg);
    return absl::OkStatus();
  }

  std::string source_;
  int line_ = 0;
  KasmFile file_;
  std::map<std::string, int64_t> labels_;
  std::vector<Fixup> fixups_;
};

void PrintProgram(const Program& p, const std::vector<ArgData>* data, int64_t block_dim, std::string* out) {
  absl::StrAppend(out, ".program ", p.name.empty() ? "kernel" : p.name, "\n.regs ", p.num_regs, "\n");
  if (data) absl::StrAppend(out, ".block_dim ", block_dim, "\n");
  for (size_t i = 0; i < p.args.size(); ++i) {
    const Arg& a = p.args[i];
    absl::StrAppend(out, ".arg ", a.name, " ", DTypeName(a.dtype), "[", absl::StrJoin(a.shape, ","), "]");
    if (data && i < data->size()) {
      const ArgData& d = (*data)[i];
      if (d.init == InitKind::kRandom) absl::StrAppend(out, " init=random(", d.seed, ")");
      if (d.init == InitKind::kNpy) absl::StrAppend(out, " init=npy(\"", d.npy, "\")");
      if (!d.output.empty()) absl::StrAppend(out, " output=\"", d.output, "\"");
    }
    out->push_back('\n');
  }
  // Targets without a name get L<index>.
  std::vector<std::pair<int64_t, std::string>> labels = p.labels;
  for (const Inst& in : p.insts)
    for (const Operand& o : in.ops)
      if (o.kind == Operand::Kind::kLabel) labels.emplace_back(o.imm, LabelName(p, o.imm));
  std::sort(labels.begin(), labels.end());
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  size_t li = 0;
  for (size_t i = 0; i <= p.insts.size(); ++i) {
    for (; li < labels.size() && labels[li].first <= static_cast<int64_t>(i); ++li)
      absl::StrAppend(out, labels[li].second, ":\n");
    if (i < p.insts.size()) absl::StrAppend(out, "  ", InstText(p, p.insts[i]), "\n");
  }
  for (; li < labels.size(); ++li) absl::StrAppend(out, labels[li].second, ":\n");
}

}  // namespace

absl::StatusOr<KasmFile> Assemble(absl::string_view text, const std::string& source) {
  return Assembler(source).Run(text);
}

std::string InstText(const Program& p, const Inst& in) {
  const OpInfo& info = Info(in.op);
  std::string s = info.name;
  if (info.ndtypes >= 1) absl::StrAppend(&s, ".", DTypeName(in.dtype));
  if (info.ndtypes == 2) absl::StrAppend(&s, ".", DTypeName(in.dtype2));
  std::vector<std::string> parts;
  for (size_t i = 0; i < info.operands.size(); ++i)
    if (in.ops[i].kind != Operand::Kind::kNone) parts.push_back(OperandText(p, in.ops[i]));
  // Attributes that differ from what the assembler would fill in.
  Inst def = in;
  for (size_t i = 0; i < info.attrs.size(); ++i)
    if (info.attrs[i].how == AttrDefault::kAuto) def.attrs[i] = -1;
  FillAutoAttrs(def);
  for (size_t i = 0; i < info.attrs.size(); ++i) {
    const AttrInfo& a = info.attrs[i];
    bool show = a.how == AttrDefault::kRequired || (a.how == AttrDefault::kConst && in.attrs[i] != a.value) ||
                (a.how == AttrDefault::kAuto && in.attrs[i] != def.attrs[i]);
    if (show) parts.push_back(absl::StrCat(a.name, "=", AttrValueText(a, in.attrs[i])));
  }
  if (!parts.empty()) absl::StrAppend(&s, " ", absl::StrJoin(parts, ", "));
  return s;
}

void RandomFill(DType dtype, uint64_t seed, void* dst, int64_t count) {
  uint8_t* out = static_cast<uint8_t*>(dst);
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  for (int64_t i = 0; i < count; ++i) {
    // splitmix64
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    float f = static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
    int32_t k = static_cast<int32_t>(z >> 60) - 8;
    switch (dtype) {
      case DType::kF32: std::memcpy(out + i * 4, &f, 4); break;
      case DType::kF16: { uint16_t h = FloatToHalfBits(f); std::memcpy(out + i * 2, &h, 2); break; }
      case DType::kBF16: { uint16_t h = FloatToBFloat16Bits(f); std::memcpy(out + i * 2, &h, 2); break; }
      case DType::kS32: std::memcpy(out + i * 4, &k, 4); break;
      case DType::kS8: out[i] = static_cast<uint8_t>(static_cast<int8_t>(k)); break;
      case DType::kNone: break;
    }
  }
}

std::string Disassemble(const KasmFile& file) {
  std::string out;
  PrintProgram(file.program, &file.data, file.block_dim, &out);
  return out;
}

std::string Disassemble(const Program& program) {
  std::string out;
  PrintProgram(program, nullptr, 1, &out);
  return out;
}

}  // namespace kiln::sim
