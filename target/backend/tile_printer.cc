//===- tile_printer.cc - The tile IR's text form, written -----------------===//
//
// The printer writes one statement a line, two spaces an indentation
// level; a number prints as the shortest decimal text that reads back as
// exactly that number.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_ir.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "target/backend/tile_text.h"

namespace kiln::target::tile {

namespace {

// The shortest decimal text that reads back as exactly `v`.
std::string FormatNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string FormatAffine(const Affine& a) {
  std::string out;
  for (const auto& [var, coeff] : a.terms) {
    if (out.empty()) {
      if (coeff < 0) out += "-";
    } else {
      out += coeff < 0 ? " - " : " + ";
    }
    absl::StrAppend(&out, "%", var);
    const int64_t mag = coeff < 0 ? -coeff : coeff;
    if (mag != 1) absl::StrAppend(&out, "*", mag);
  }
  if (out.empty()) return absl::StrCat(a.constant);
  if (a.constant > 0) absl::StrAppend(&out, " + ", a.constant);
  if (a.constant < 0) absl::StrAppend(&out, " - ", -a.constant);
  return out;
}

std::string FormatShape(DType dtype, const std::vector<int64_t>& shape) {
  return absl::StrCat(DTypeName(dtype), "[", absl::StrJoin(shape, ","), "]");
}

std::string FormatVars(const std::vector<LoopVar>& vars) {
  return absl::StrJoin(vars, ", ", [](std::string* out, const LoopVar& v) {
    absl::StrAppend(out, "%", v.name, " = ", v.extent);
  });
}

std::string QuoteString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

namespace internal {

bool AllZero(const TileRef& r) {
  return std::all_of(r.start.begin(), r.start.end(),
                     [](const Affine& a) { return a.is_constant() && a.constant == 0; });
}

Printer::Printer(const TileKernel& k) {
  for (const TileArg& a : k.args) args_.insert(a.name);
}

std::string Printer::Ref(const TileRef& r) const {
  if (!args_.count(r.name) && AllZero(r)) return absl::StrCat("%", r.name);
  return absl::StrCat("%", r.name, "[",
                      absl::StrJoin(r.start, ", ",
                                    [](std::string* out, const Affine& a) { out->append(FormatAffine(a)); }),
                      "]");
}

std::string Printer::Operand(const tile::Operand& o) const { return o.ref ? Ref(*o.ref) : FormatNumber(o.scalar); }

std::string Printer::Im2colText(const Im2col& c) {
  auto pair = [](const int64_t (&v)[2]) { return absl::StrCat("[", v[0], ",", v[1], "]"); };
  return absl::StrCat(" im2col kernel=", pair(c.kernel), " stride=", pair(c.stride), " pad=", pair(c.pad),
                      " dilation=", pair(c.dilation), " out=", pair(c.out),
                      c.groups != 1 ? absl::StrCat(" groups=", c.groups) : "",
                      c.fill != 0 ? absl::StrCat(" fill=", FormatNumber(c.fill)) : "");
}

std::string Printer::Line(const Stmt& s) const {
  switch (s.kind) {
    case Stmt::Kind::kBuffer:
      return absl::StrCat("buffer %", s.buffer, " : ", FormatShape(s.dtype, s.shape), " ", ScopeName(s.scope),
                          s.copies != 1 ? absl::StrCat(" x", s.copies) : "");
    case Stmt::Kind::kLoop:
      return absl::StrCat(NameIn(kLoopNames, s.loop),
                          s.loop == Stmt::LoopKind::kPipelined ? absl::StrCat("(", s.stages, ")") : "", " ",
                          FormatVars(s.vars), " {");
    case Stmt::Kind::kCopy:
      return absl::StrCat("copy ", s.srcs.empty() ? "?" : Operand(s.srcs[0]), " -> ", Ref(s.dst),
                          s.im2col ? Im2colText(*s.im2col) : "", s.transpose ? " transpose" : "",
                          s.accumulate ? " add" : "");
    case Stmt::Kind::kFill:
      return absl::StrCat("fill ", Ref(s.dst), ", ", FormatNumber(s.value));
    case Stmt::Kind::kMma:
      return absl::StrCat("mma ", Ref(s.dst), s.accumulate ? " += " : " = ",
                          s.srcs.size() > 0 ? Operand(s.srcs[0]) : "?", " * ",
                          s.srcs.size() > 1 ? Operand(s.srcs[1]) : "?");
    case Stmt::Kind::kEw:
      return absl::StrCat("ew ", EwOpName(s.ew), " ", Ref(s.dst), " <- ",
                          absl::StrJoin(s.srcs, ", ", [this](std::string* out, const tile::Operand& o) {
                            out->append(Operand(o));
                          }));
    case Stmt::Kind::kReduce:
      return absl::StrCat("reduce ", ReduceOpName(s.reduce), " ", Ref(s.dst), " <- ",
                          s.srcs.empty() ? "?" : Operand(s.srcs[0]), " axis ", s.axis);
    case Stmt::Kind::kSync:
      return absl::StrCat("sync ", ScopeName(s.sync_from), " -> ", ScopeName(s.sync_to));
    case Stmt::Kind::kCausal:
      return absl::StrCat("causal ", Ref(s.dst),
                          absl::StrJoin(s.origin, "", [](std::string* out, const Affine& a) {
                            absl::StrAppend(out, ", ", FormatAffine(a));
                          }));
  }
  return "?";
}

void Printer::Block(const tile::Block& b, int depth, std::string* out) const {
  const std::string indent(2 * depth, ' ');
  for (const auto& s : b) {
    absl::StrAppend(out, indent, Line(*s), "\n");
    if (s->kind == Stmt::Kind::kLoop) {
      Block(s->body, depth + 1, out);
      absl::StrAppend(out, indent, "}\n");
    }
  }
}

}  // namespace internal

using internal::Printer;

std::string Print(const TileKernel& k) {
  Printer p(k);
  std::string out = absl::StrCat("kernel @", k.name, " {\n");
  if (!k.plan.empty()) absl::StrAppend(&out, "  plan ", QuoteString(k.plan), "\n");
  for (const TileArg& a : k.args) {
    absl::StrAppend(&out, "  arg %", a.name, " : ", FormatShape(a.dtype, a.shape), " ", RoleName(a.role), "\n");
  }
  p.Block(k.body, 1, &out);
  out += "}\n";
  return out;
}

std::string PrintStatement(const Stmt& s) {
  std::string line = Printer().Line(s);
  if (absl::EndsWith(line, " {")) line.resize(line.size() - 2);
  return line;
}

}  // namespace kiln::target::tile
