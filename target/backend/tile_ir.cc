//===- tile_ir.cc - The tile IR: names, builders, text form, verifier -----===//
//
// The printer writes one statement a line, two spaces an indentation level;
// the parser reads the same grammar from a token stream (`//` starts a
// comment to the end of the line) and reports the first error with its
// line number. The verifier walks the kernel once with the names, loop
// variables and enclosing loops in scope, checking each statement against
// the rules of docs/tile-ir.md; its errors quote the statement's printed
// form and name the rule it breaks.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_ir.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"

namespace kiln::target::tile {

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

namespace {

constexpr std::pair<Scope, absl::string_view> kScopeNames[] = {
    {Scope::kGlobal, "global"},       {Scope::kStage, "stage"},
    {Scope::kOperandA, "operand_a"},  {Scope::kOperandB, "operand_b"},
    {Scope::kAccumulator, "accumulator"}, {Scope::kVector, "vector"},
};

struct EwOpInfo {
  EwOp op;
  absl::string_view name;
  int arity;
};
constexpr EwOpInfo kEwOps[] = {
    {EwOp::kCopy, "copy", 1},    {EwOp::kCast, "cast", 1},       {EwOp::kAdd, "add", 2},
    {EwOp::kSub, "sub", 2},      {EwOp::kMul, "mul", 2},         {EwOp::kDiv, "div", 2},
    {EwOp::kMax, "max", 2},      {EwOp::kMin, "min", 2},         {EwOp::kPow, "pow", 2},
    {EwOp::kNeg, "neg", 1},      {EwOp::kAbs, "abs", 1},         {EwOp::kRelu, "relu", 1},
    {EwOp::kExp, "exp", 1},      {EwOp::kLog, "log", 1},         {EwOp::kSqrt, "sqrt", 1},
    {EwOp::kRsqrt, "rsqrt", 1},  {EwOp::kRecip, "recip", 1},     {EwOp::kTanh, "tanh", 1},
    {EwOp::kSigmoid, "sigmoid", 1}, {EwOp::kErf, "erf", 1},      {EwOp::kGelu, "gelu", 1},
    {EwOp::kGeluTanh, "gelu_tanh", 1},
    {EwOp::kSelect, "select", 3}, {EwOp::kCmpLt, "cmp_lt", 2},   {EwOp::kCmpLe, "cmp_le", 2},
    {EwOp::kCmpGt, "cmp_gt", 2}, {EwOp::kCmpGe, "cmp_ge", 2},    {EwOp::kCmpEq, "cmp_eq", 2},
};

constexpr std::pair<ReduceOp, absl::string_view> kReduceNames[] = {
    {ReduceOp::kSum, "sum"}, {ReduceOp::kMax, "max"}, {ReduceOp::kMin, "min"}, {ReduceOp::kProd, "prod"}};

constexpr std::pair<TileArg::Role, absl::string_view> kRoleNames[] = {
    {TileArg::Role::kIn, "in"}, {TileArg::Role::kOut, "out"},
    {TileArg::Role::kConst, "const"}, {TileArg::Role::kWorkspace, "workspace"}};

constexpr std::pair<Stmt::LoopKind, absl::string_view> kLoopNames[] = {
    {Stmt::LoopKind::kGrid, "grid"}, {Stmt::LoopKind::kGroup, "group"},
    {Stmt::LoopKind::kSerial, "serial"}, {Stmt::LoopKind::kPipelined, "pipelined"}};

// The name of `v` in a table of (value, name) pairs.
template <typename T, size_t N>
absl::string_view NameIn(const std::pair<T, absl::string_view> (&table)[N], T v) {
  for (const auto& [value, name] : table) {
    if (value == v) return name;
  }
  return "?";
}
template <typename T, size_t N>
std::optional<T> ValueIn(const std::pair<T, absl::string_view> (&table)[N], absl::string_view name) {
  for (const auto& [value, n] : table) {
    if (n == name) return value;
  }
  return std::nullopt;
}

const EwOpInfo* EwInfo(EwOp op) {
  for (const EwOpInfo& info : kEwOps) {
    if (info.op == op) return &info;
  }
  return nullptr;
}

}  // namespace

absl::string_view ScopeName(Scope s) { return NameIn(kScopeNames, s); }
std::optional<Scope> ParseScope(absl::string_view name) { return ValueIn(kScopeNames, name); }
absl::string_view RoleName(TileArg::Role r) { return NameIn(kRoleNames, r); }
absl::string_view ReduceOpName(ReduceOp op) { return NameIn(kReduceNames, op); }
std::optional<ReduceOp> ParseReduceOp(absl::string_view name) { return ValueIn(kReduceNames, name); }

absl::string_view EwOpName(EwOp op) {
  const EwOpInfo* info = EwInfo(op);
  return info ? info->name : "?";
}
std::optional<EwOp> ParseEwOp(absl::string_view name) {
  for (const EwOpInfo& info : kEwOps) {
    if (info.name == name) return info.op;
  }
  return std::nullopt;
}
int EwOpArity(EwOp op) {
  const EwOpInfo* info = EwInfo(op);
  return info ? info->arity : 1;
}

//===----------------------------------------------------------------------===//
// Builders
//===----------------------------------------------------------------------===//

std::unique_ptr<Stmt> MakeBuffer(std::string name, DType dtype, std::vector<int64_t> shape, Scope scope,
                                 int copies) {
  auto s = std::make_unique<Stmt>(Stmt::Kind::kBuffer);
  s->buffer = std::move(name);
  s->dtype = dtype;
  s->shape = std::move(shape);
  s->scope = scope;
  s->copies = copies;
  return s;
}

std::unique_ptr<Stmt> MakeLoop(Stmt::LoopKind kind, std::vector<LoopVar> vars, int stages) {
  auto s = std::make_unique<Stmt>(Stmt::Kind::kLoop);
  s->loop = kind;
  s->vars = std::move(vars);
  s->stages = stages;
  return s;
}

namespace {

void RenameIn(Block& b, std::map<std::string, std::string>& names, int* next_buffer) {
  auto rename = [&](TileRef& r) {
    auto it = names.find(r.name);
    if (it != names.end()) r.name = it->second;
  };
  for (auto& s : b) {
    if (s->kind == Stmt::Kind::kBuffer && absl::StartsWith(s->buffer, "t_")) {
      std::string fresh = absl::StrCat("t", (*next_buffer)++);
      names[s->buffer] = fresh;
      s->buffer = fresh;
    }
    rename(s->dst);
    for (Operand& o : s->srcs)
      if (o.ref) rename(*o.ref);
    if (s->kind == Stmt::Kind::kLoop) RenameIn(s->body, names, next_buffer);
  }
}

}  // namespace

void CanonicalizeNames(TileKernel& k) {
  std::map<std::string, std::string> names;
  for (size_t i = 0; i < k.args.size(); ++i) {
    std::string fresh = absl::StrCat("a", i);
    names[k.args[i].name] = fresh;
    k.args[i].name = fresh;
  }
  int next_buffer = 0;
  RenameIn(k.body, names, &next_buffer);
}

std::vector<int64_t> Im2colShape(const std::vector<int64_t>& x, const Im2col& c) {
  if (x.size() != 4 || c.groups < 1) return {};
  return {x[0], c.groups, x[1] / c.groups * c.kernel[0] * c.kernel[1], c.out[0] * c.out[1]};
}

std::unique_ptr<Stmt> MakeCopy(TileRef src, TileRef dst, bool transpose) {
  auto s = std::make_unique<Stmt>(Stmt::Kind::kCopy);
  s->srcs.push_back(Operand{std::move(src)});
  s->dst = std::move(dst);
  s->transpose = transpose;
  return s;
}

std::unique_ptr<Stmt> MakeFill(TileRef dst, double value) {
  auto s = std::make_unique<Stmt>(Stmt::Kind::kFill);
  s->dst = std::move(dst);
  s->value = value;
  return s;
}

std::unique_ptr<Stmt> MakeMma(TileRef dst, TileRef a, TileRef b, bool accumulate) {
  auto s = std::make_unique<Stmt>(Stmt::Kind::kMma);
  s->dst = std::move(dst);
  s->srcs.push_back(Operand{std::move(a)});
  s->srcs.push_back(Operand{std::move(b)});
  s->accumulate = accumulate;
  return s;
}

std::unique_ptr<Stmt> MakeEw(EwOp op, TileRef dst, std::vector<Operand> srcs) {
  auto s = std::make_unique<Stmt>(Stmt::Kind::kEw);
  s->ew = op;
  s->dst = std::move(dst);
  s->srcs = std::move(srcs);
  return s;
}

std::unique_ptr<Stmt> MakeReduce(ReduceOp op, TileRef dst, TileRef src, int axis) {
  auto s = std::make_unique<Stmt>(Stmt::Kind::kReduce);
  s->reduce = op;
  s->dst = std::move(dst);
  s->srcs.push_back(Operand{std::move(src)});
  s->axis = axis;
  return s;
}

std::unique_ptr<Stmt> MakeSync(Scope from, Scope to) {
  auto s = std::make_unique<Stmt>(Stmt::Kind::kSync);
  s->sync_from = from;
  s->sync_to = to;
  return s;
}

TileRef Whole(std::string name, int rank) {
  return TileRef{std::move(name), std::vector<Affine>(static_cast<size_t>(std::max(rank, 0)))};
}

//===----------------------------------------------------------------------===//
// Printer
//===----------------------------------------------------------------------===//

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

bool AllZero(const TileRef& r) {
  return std::all_of(r.start.begin(), r.start.end(),
                     [](const Affine& a) { return a.is_constant() && a.constant == 0; });
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

class Printer {
 public:
  Printer() = default;  // no kernel: every reference is local
  explicit Printer(const TileKernel& k) {
    for (const TileArg& a : k.args) args_.insert(a.name);
  }

  // A reference: bare `%name` for a local tile at the origin, else with its starts.
  std::string Ref(const TileRef& r) const {
    if (!args_.count(r.name) && AllZero(r)) return absl::StrCat("%", r.name);
    return absl::StrCat("%", r.name, "[",
                        absl::StrJoin(r.start, ", ",
                                      [](std::string* out, const Affine& a) { out->append(FormatAffine(a)); }),
                        "]");
  }

  std::string Operand(const tile::Operand& o) const { return o.ref ? Ref(*o.ref) : FormatNumber(o.scalar); }

  static std::string Im2colText(const Im2col& c) {
    auto pair = [](const int64_t (&v)[2]) { return absl::StrCat("[", v[0], ",", v[1], "]"); };
    return absl::StrCat(" im2col kernel=", pair(c.kernel), " stride=", pair(c.stride), " pad=", pair(c.pad),
                        " dilation=", pair(c.dilation), " out=", pair(c.out),
                        c.groups != 1 ? absl::StrCat(" groups=", c.groups) : "",
                        c.fill != 0 ? absl::StrCat(" fill=", FormatNumber(c.fill)) : "");
  }

  // One statement's line (a loop's header ends with " {").
  std::string Line(const Stmt& s) const {
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
    }
    return "?";
  }

  void Block(const tile::Block& b, int depth, std::string* out) const {
    const std::string indent(2 * depth, ' ');
    for (const auto& s : b) {
      absl::StrAppend(out, indent, Line(*s), "\n");
      if (s->kind == Stmt::Kind::kLoop) {
        Block(s->body, depth + 1, out);
        absl::StrAppend(out, indent, "}\n");
      }
    }
  }

 private:
  std::set<std::string> args_;
};

}  // namespace

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

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

namespace {

struct Token {
  enum class Kind : uint8_t { kEnd, kWord, kLocal, kGlobal, kNumber, kString, kPunct } kind = Kind::kEnd;
  std::string text;  // a word, a name without its sigil, a number's digits, a string's contents, punctuation
  int line = 0;
};

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

absl::StatusOr<std::vector<Token>> Lex(absl::string_view text) {
  std::vector<Token> tokens;
  int line = 1;
  size_t i = 0;
  auto error = [&](absl::string_view what) { return InvalidArgument("line ", line, ": ", what); };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (text.substr(i, 2) == "//") {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    Token t;
    t.line = line;
    if (c == '%' || c == '@') {
      size_t j = i + 1;
      while (j < text.size() && IsWordChar(text[j])) ++j;
      if (j == i + 1) return error(absl::StrCat("expected a name after '", std::string(1, c), "'"));
      t.kind = c == '%' ? Token::Kind::kLocal : Token::Kind::kGlobal;
      t.text = std::string(text.substr(i + 1, j - i - 1));
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '.' ||
              ((text[j] == '-' || text[j] == '+') && (text[j - 1] == 'e' || text[j - 1] == 'E')))) {
        ++j;
      }
      t.kind = Token::Kind::kNumber;
      t.text = std::string(text.substr(i, j - i));
      i = j;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < text.size() && IsWordChar(text[j])) ++j;
      t.kind = Token::Kind::kWord;
      t.text = std::string(text.substr(i, j - i));
      i = j;
    } else if (c == '"') {
      size_t j = i + 1;
      while (j < text.size() && text[j] != '"' && text[j] != '\n') {
        if (text[j] == '\\' && j + 1 < text.size()) ++j;
        t.text += text[j];
        ++j;
      }
      if (j >= text.size() || text[j] != '"') return error("unterminated string");
      t.kind = Token::Kind::kString;
      i = j + 1;
    } else {
      static constexpr absl::string_view kTwo[] = {"->", "<-", "+="};
      t.kind = Token::Kind::kPunct;
      for (absl::string_view p : kTwo) {
        if (text.substr(i, 2) == p) t.text = std::string(p);
      }
      if (t.text.empty()) {
        if (absl::string_view("{}[](),:=*+-").find(c) == absl::string_view::npos) {
          return error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
        }
        t.text = std::string(1, c);
      }
      i += t.text.size();
    }
    tokens.push_back(std::move(t));
  }
  Token end;
  end.line = line;
  tokens.push_back(end);
  return tokens;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<TileKernel> Kernel() {
    TileKernel k;
    KILN_RETURN_IF_ERROR(ExpectWord("kernel"));
    if (Peek().kind != Token::Kind::kGlobal) return Error("expected the kernel's name '@NAME'");
    k.name = Next().text;
    KILN_RETURN_IF_ERROR(ExpectPunct("{"));
    names_.emplace_back();
    if (IsWord("plan")) {
      Next();
      if (Peek().kind != Token::Kind::kString) return Error("expected a quoted plan after 'plan'");
      k.plan = Next().text;
    }
    while (IsWord("arg")) {
      Next();
      TileArg a;
      KILN_ASSIGN_OR_RETURN(a.name, LocalName());
      KILN_RETURN_IF_ERROR(ExpectPunct(":"));
      KILN_RETURN_IF_ERROR(TypedShape(&a.dtype, &a.shape));
      KILN_ASSIGN_OR_RETURN(std::string role, Word("an argument role"));
      auto r = ValueIn(kRoleNames, role);
      if (!r) return Error(absl::StrCat("unknown argument role '", role, "' (in, out, const, workspace)"), -1);
      a.role = *r;
      names_.back()[a.name] = static_cast<int>(a.shape.size());
      k.args.push_back(std::move(a));
    }
    KILN_RETURN_IF_ERROR(BlockBody(&k.body));
    names_.pop_back();
    if (Peek().kind != Token::Kind::kEnd) return Error("expected the end of the text after the kernel");
    return k;
  }

 private:
  const Token& Peek() const { return tokens_[pos_]; }
  const Token& Next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  bool IsWord(absl::string_view w) const { return Peek().kind == Token::Kind::kWord && Peek().text == w; }
  bool IsPunct(absl::string_view p) const { return Peek().kind == Token::Kind::kPunct && Peek().text == p; }

  // An error at the next token (or, with `back` = -1, at the one just read).
  absl::Status Error(absl::string_view what, int back = 0) const {
    const Token& t = tokens_[pos_ + back < tokens_.size() ? pos_ + back : pos_];
    const std::string found = t.kind == Token::Kind::kEnd ? "the end of the text"
                              : t.kind == Token::Kind::kLocal ? absl::StrCat("'%", t.text, "'")
                              : t.kind == Token::Kind::kGlobal ? absl::StrCat("'@", t.text, "'")
                                                               : absl::StrCat("'", t.text, "'");
    if (back == 0) return InvalidArgument("line ", t.line, ": ", what, ", found ", found);
    return InvalidArgument("line ", t.line, ": ", what);
  }

  absl::Status ExpectPunct(absl::string_view p) {
    if (!IsPunct(p)) return Error(absl::StrCat("expected '", p, "'"));
    Next();
    return absl::OkStatus();
  }
  absl::Status ExpectWord(absl::string_view w) {
    if (!IsWord(w)) return Error(absl::StrCat("expected '", w, "'"));
    Next();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Word(absl::string_view what) {
    if (Peek().kind != Token::Kind::kWord) return Error(absl::StrCat("expected ", what));
    return Next().text;
  }
  absl::StatusOr<std::string> LocalName() {
    if (Peek().kind != Token::Kind::kLocal) return Error("expected a '%NAME'");
    return Next().text;
  }
  absl::StatusOr<int64_t> Integer(absl::string_view what) {
    int64_t v = 0;
    if (Peek().kind != Token::Kind::kNumber || !absl::SimpleAtoi(Peek().text, &v)) {
      return Error(absl::StrCat("expected ", what, " (an integer)"));
    }
    Next();
    return v;
  }
  // A scalar: an optionally signed decimal number, inf or nan.
  absl::StatusOr<double> Scalar() {
    bool negative = false;
    if (IsPunct("-")) {
      Next();
      negative = true;
    }
    const Token& t = Peek();
    double v = 0;
    if (t.kind == Token::Kind::kWord && (t.text == "inf" || t.text == "nan")) {
      v = t.text == "inf" ? INFINITY : NAN;
    } else if (t.kind == Token::Kind::kNumber) {
      char* end = nullptr;
      v = std::strtod(t.text.c_str(), &end);
      if (end != t.text.c_str() + t.text.size()) return Error("expected a number");
    } else {
      return Error("expected a number");
    }
    Next();
    return negative ? -v : v;
  }

  // `DT[D0,D1,...]`
  absl::Status TypedShape(DType* dtype, std::vector<int64_t>* shape) {
    KILN_ASSIGN_OR_RETURN(std::string dt, Word("a dtype"));
    auto parsed = ParseDType(dt);
    if (!parsed) return Error(absl::StrCat("unknown dtype '", dt, "'"), -1);
    *dtype = *parsed;
    KILN_RETURN_IF_ERROR(ExpectPunct("["));
    while (!IsPunct("]")) {
      if (!shape->empty()) KILN_RETURN_IF_ERROR(ExpectPunct(","));
      KILN_ASSIGN_OR_RETURN(int64_t d, Integer("a dimension"));
      shape->push_back(d);
    }
    Next();
    return absl::OkStatus();
  }

  absl::StatusOr<Scope> ScopeWord() {
    KILN_ASSIGN_OR_RETURN(std::string w, Word("a scope"));
    auto s = ParseScope(w);
    if (!s) return Error(absl::StrCat("unknown scope '", w, "'"), -1);
    return *s;
  }

  // `TERM (+|- TERM)*`, TERM one of INT, %v, %v*INT, INT*%v.
  absl::StatusOr<Affine> AffineExpr() {
    Affine a;
    int sign = 1;
    if (IsPunct("-")) {
      Next();
      sign = -1;
    }
    while (true) {
      std::string var;
      int64_t coeff = 1;
      if (Peek().kind == Token::Kind::kLocal) {
        var = Next().text;
        if (IsPunct("*")) {
          Next();
          KILN_ASSIGN_OR_RETURN(coeff, Integer("a coefficient"));
        }
      } else {
        KILN_ASSIGN_OR_RETURN(coeff, Integer("an index expression"));
        if (IsPunct("*")) {
          Next();
          KILN_ASSIGN_OR_RETURN(var, LocalName());
        }
      }
      coeff *= sign;
      if (var.empty()) {
        a.constant += coeff;
      } else {
        auto it = std::find_if(a.terms.begin(), a.terms.end(), [&](const auto& t) { return t.first == var; });
        if (it == a.terms.end()) {
          a.terms.emplace_back(var, coeff);
        } else {
          it->second += coeff;
        }
      }
      if (IsPunct("+")) {
        sign = 1;
      } else if (IsPunct("-")) {
        sign = -1;
      } else {
        break;
      }
      Next();
    }
    a.terms.erase(std::remove_if(a.terms.begin(), a.terms.end(), [](const auto& t) { return t.second == 0; }),
                  a.terms.end());
    return a;
  }

  // `%name` (the whole of what it names) or `%name[E, ...]`.
  absl::StatusOr<TileRef> Ref() {
    TileRef r;
    KILN_ASSIGN_OR_RETURN(r.name, LocalName());
    if (!IsPunct("[")) {
      r.start.resize(static_cast<size_t>(std::max(RankOf(r.name), 0)));
      return r;
    }
    Next();
    while (!IsPunct("]")) {
      if (!r.start.empty()) KILN_RETURN_IF_ERROR(ExpectPunct(","));
      KILN_ASSIGN_OR_RETURN(Affine a, AffineExpr());
      r.start.push_back(std::move(a));
    }
    Next();
    return r;
  }

  // `kernel=[KH,KW] stride=[..] pad=[..] dilation=[..] out=[..] [groups=G] [fill=V]`.
  absl::StatusOr<Im2col> Im2colParams() {
    Im2col c;
    auto pair = [&](const char* key, int64_t (&v)[2]) -> absl::Status {
      if (!IsWord(key)) return Error(absl::StrCat("expected '", key, "=' in im2col"));
      Next();
      KILN_RETURN_IF_ERROR(ExpectPunct("="));
      KILN_RETURN_IF_ERROR(ExpectPunct("["));
      KILN_ASSIGN_OR_RETURN(v[0], Integer("an im2col extent"));
      KILN_RETURN_IF_ERROR(ExpectPunct(","));
      KILN_ASSIGN_OR_RETURN(v[1], Integer("an im2col extent"));
      return ExpectPunct("]");
    };
    KILN_RETURN_IF_ERROR(pair("kernel", c.kernel));
    KILN_RETURN_IF_ERROR(pair("stride", c.stride));
    KILN_RETURN_IF_ERROR(pair("pad", c.pad));
    KILN_RETURN_IF_ERROR(pair("dilation", c.dilation));
    KILN_RETURN_IF_ERROR(pair("out", c.out));
    if (IsWord("groups")) {
      Next();
      KILN_RETURN_IF_ERROR(ExpectPunct("="));
      KILN_ASSIGN_OR_RETURN(c.groups, Integer("a group count"));
    }
    if (IsWord("fill")) {
      Next();
      KILN_RETURN_IF_ERROR(ExpectPunct("="));
      KILN_ASSIGN_OR_RETURN(c.fill, Scalar());
    }
    return c;
  }

  absl::StatusOr<tile::Operand> OperandExpr() {
    tile::Operand o;
    if (Peek().kind == Token::Kind::kLocal) {
      KILN_ASSIGN_OR_RETURN(o.ref, Ref());
    } else {
      KILN_ASSIGN_OR_RETURN(o.scalar, Scalar());
    }
    return o;
  }

  // The rank of the argument or buffer `name` in scope (0 when unknown).
  int RankOf(const std::string& name) const {
    for (auto it = names_.rbegin(); it != names_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return 0;
  }

  // Statements up to the closing '}' (consumed).
  absl::Status BlockBody(tile::Block* block) {
    names_.emplace_back();
    while (!IsPunct("}")) {
      if (Peek().kind == Token::Kind::kEnd) return Error("expected '}'");
      KILN_ASSIGN_OR_RETURN(auto s, Statement());
      block->push_back(std::move(s));
    }
    Next();
    names_.pop_back();
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Stmt>> Statement() {
    KILN_ASSIGN_OR_RETURN(std::string word, Word("a statement"));
    if (word == "buffer") {
      auto s = std::make_unique<Stmt>(Stmt::Kind::kBuffer);
      KILN_ASSIGN_OR_RETURN(s->buffer, LocalName());
      KILN_RETURN_IF_ERROR(ExpectPunct(":"));
      KILN_RETURN_IF_ERROR(TypedShape(&s->dtype, &s->shape));
      KILN_ASSIGN_OR_RETURN(s->scope, ScopeWord());
      if (Peek().kind == Token::Kind::kWord && Peek().text.size() > 1 && Peek().text[0] == 'x') {
        int copies = 0;
        if (!absl::SimpleAtoi(absl::string_view(Peek().text).substr(1), &copies)) {
          return Error("expected a copy count 'xN'");
        }
        Next();
        s->copies = copies;
      }
      names_.back()[s->buffer] = static_cast<int>(s->shape.size());
      return s;
    }
    if (auto loop = ValueIn(kLoopNames, word)) {
      auto s = std::make_unique<Stmt>(Stmt::Kind::kLoop);
      s->loop = *loop;
      if (*loop == Stmt::LoopKind::kPipelined) {
        KILN_RETURN_IF_ERROR(ExpectPunct("("));
        KILN_ASSIGN_OR_RETURN(int64_t stages, Integer("a stage count"));
        s->stages = static_cast<int>(stages);
        KILN_RETURN_IF_ERROR(ExpectPunct(")"));
      }
      do {
        if (!s->vars.empty()) Next();
        LoopVar v;
        KILN_ASSIGN_OR_RETURN(v.name, LocalName());
        KILN_RETURN_IF_ERROR(ExpectPunct("="));
        KILN_ASSIGN_OR_RETURN(v.extent, Integer("a trip count"));
        s->vars.push_back(std::move(v));
      } while (IsPunct(","));
      KILN_RETURN_IF_ERROR(ExpectPunct("{"));
      KILN_RETURN_IF_ERROR(BlockBody(&s->body));
      return s;
    }
    if (word == "copy") {
      auto s = std::make_unique<Stmt>(Stmt::Kind::kCopy);
      KILN_ASSIGN_OR_RETURN(TileRef src, Ref());
      s->srcs.push_back(tile::Operand{std::move(src)});
      KILN_RETURN_IF_ERROR(ExpectPunct("->"));
      KILN_ASSIGN_OR_RETURN(s->dst, Ref());
      if (IsWord("im2col")) {
        Next();
        KILN_ASSIGN_OR_RETURN(s->im2col, Im2colParams());
      }
      if (IsWord("transpose")) {
        Next();
        s->transpose = true;
      }
      if (IsWord("add")) {
        Next();
        s->accumulate = true;
      }
      return s;
    }
    if (word == "fill") {
      auto s = std::make_unique<Stmt>(Stmt::Kind::kFill);
      KILN_ASSIGN_OR_RETURN(s->dst, Ref());
      KILN_RETURN_IF_ERROR(ExpectPunct(","));
      KILN_ASSIGN_OR_RETURN(s->value, Scalar());
      return s;
    }
    if (word == "mma") {
      auto s = std::make_unique<Stmt>(Stmt::Kind::kMma);
      KILN_ASSIGN_OR_RETURN(s->dst, Ref());
      if (IsPunct("+=")) {
        s->accumulate = true;
      } else if (!IsPunct("=")) {
        return Error("expected '+=' or '='");
      }
      Next();
      KILN_ASSIGN_OR_RETURN(TileRef a, Ref());
      KILN_RETURN_IF_ERROR(ExpectPunct("*"));
      KILN_ASSIGN_OR_RETURN(TileRef b, Ref());
      s->srcs.push_back(tile::Operand{std::move(a)});
      s->srcs.push_back(tile::Operand{std::move(b)});
      return s;
    }
    if (word == "ew") {
      auto s = std::make_unique<Stmt>(Stmt::Kind::kEw);
      KILN_ASSIGN_OR_RETURN(std::string op, Word("an elementwise op"));
      auto ew = ParseEwOp(op);
      if (!ew) return Error(absl::StrCat("unknown elementwise op '", op, "'"), -1);
      s->ew = *ew;
      KILN_ASSIGN_OR_RETURN(s->dst, Ref());
      KILN_RETURN_IF_ERROR(ExpectPunct("<-"));
      do {
        if (!s->srcs.empty()) Next();
        KILN_ASSIGN_OR_RETURN(tile::Operand o, OperandExpr());
        s->srcs.push_back(std::move(o));
      } while (IsPunct(","));
      return s;
    }
    if (word == "reduce") {
      auto s = std::make_unique<Stmt>(Stmt::Kind::kReduce);
      KILN_ASSIGN_OR_RETURN(std::string op, Word("a reduction op"));
      auto r = ParseReduceOp(op);
      if (!r) return Error(absl::StrCat("unknown reduction op '", op, "'"), -1);
      s->reduce = *r;
      KILN_ASSIGN_OR_RETURN(s->dst, Ref());
      KILN_RETURN_IF_ERROR(ExpectPunct("<-"));
      KILN_ASSIGN_OR_RETURN(TileRef src, Ref());
      s->srcs.push_back(tile::Operand{std::move(src)});
      KILN_RETURN_IF_ERROR(ExpectWord("axis"));
      KILN_ASSIGN_OR_RETURN(int64_t axis, Integer("an axis"));
      s->axis = static_cast<int>(axis);
      return s;
    }
    if (word == "sync") {
      auto s = std::make_unique<Stmt>(Stmt::Kind::kSync);
      KILN_ASSIGN_OR_RETURN(s->sync_from, ScopeWord());
      KILN_RETURN_IF_ERROR(ExpectPunct("->"));
      KILN_ASSIGN_OR_RETURN(s->sync_to, ScopeWord());
      return s;
    }
    return Error(absl::StrCat("unknown statement '", word, "'"), -1);
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  std::vector<std::map<std::string, int>> names_;  // ranks of the arguments and buffers in scope
};

}  // namespace

absl::StatusOr<TileKernel> Parse(absl::string_view text) {
  KILN_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(text));
  return Parser(std::move(tokens)).Kernel();
}

//===----------------------------------------------------------------------===//
// Verifier
//===----------------------------------------------------------------------===//

namespace {

// What a name in scope stands for.
struct Entity {
  bool is_arg = false;
  const TileArg* arg = nullptr;
  const Stmt* buffer = nullptr;
  size_t depth = 0;  // the loop nesting depth of its declaration (buffers)

  Scope scope() const { return is_arg ? Scope::kGlobal : buffer->scope; }
  const std::vector<int64_t>& shape() const { return is_arg ? arg->shape : buffer->shape; }
  DType dtype() const { return is_arg ? arg->dtype : buffer->dtype; }
};

int64_t ProductOf(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

// Whether data may move from scope `from` to scope `to` on every target.
bool CopyPath(Scope from, Scope to) {
  switch (from) {
    case Scope::kGlobal: return to == Scope::kStage || to == Scope::kVector;
    case Scope::kStage: return to == Scope::kGlobal || to == Scope::kOperandA || to == Scope::kOperandB;
    case Scope::kVector: return to == Scope::kGlobal;
    case Scope::kAccumulator: return to == Scope::kVector || to == Scope::kGlobal;
    default: return false;
  }
}

class Verifier {
 public:
  Verifier(const TileKernel& k, const TileTarget& t) : kernel_(k), target_(t), printer_(k) {}

  absl::Status Run() {
    names_.emplace_back();
    for (const TileArg& a : kernel_.args) {
      if (!names_.back().emplace(a.name, Entity{true, &a, nullptr, 0}).second || !all_names_.insert(a.name).second) {
        return Fail(absl::StrCat("arg %", a.name), "names are unique", "the name is declared twice");
      }
      for (int64_t d : a.shape) {
        if (d < 1) return Fail(absl::StrCat("arg %", a.name), "shapes are positive", "a dimension is below 1");
      }
    }
    KILN_RETURN_IF_ERROR(Block(kernel_.body));
    return absl::OkStatus();
  }

 private:
  struct LoopFrame {
    const Stmt* loop;
    size_t depth;  // its body's nesting depth
  };

  absl::Status Fail(absl::string_view stmt, absl::string_view rule, absl::string_view detail) const {
    return absl::InvalidArgumentError(
        absl::StrCat("tile kernel @", kernel_.name, ": '", stmt, "': rule '", rule, "': ", detail));
  }
  absl::Status Fail(const Stmt& s, absl::string_view rule, absl::string_view detail) const {
    std::string line = printer_.Line(s);
    if (s.kind == Stmt::Kind::kLoop) line.resize(line.size() - 2);  // without " {"
    return Fail(line, rule, detail);
  }

  const Entity* Lookup(const std::string& name) const {
    for (auto it = names_.rbegin(); it != names_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return &found->second;
    }
    return nullptr;
  }
  bool IsGroupVar(const std::string& name) const {
    for (const LoopFrame& f : loops_) {
      if (f.loop->loop != Stmt::LoopKind::kGroup) continue;
      for (const LoopVar& v : f.loop->vars)
        if (v.name == name) return true;
    }
    return false;
  }
  const LoopVar* LookupVar(const std::string& name) const {
    for (const LoopFrame& f : loops_) {
      for (const LoopVar& v : f.loop->vars) {
        if (v.name == name) return &v;
      }
    }
    return nullptr;
  }

  // The least and greatest values of `a` over the loop variables' ranges.
  // With `groups_at_zero`, group loop variables count as 0.
  absl::Status Range(const Stmt& s, const Affine& a, int64_t* lo, int64_t* hi, bool groups_at_zero = false) const {
    *lo = *hi = a.constant;
    for (const auto& [var, coeff] : a.terms) {
      const LoopVar* v = LookupVar(var);
      if (!v) return Fail(s, "loop variables in scope", absl::StrCat("%", var, " is no enclosing loop's variable"));
      if (groups_at_zero && IsGroupVar(var)) continue;
      const int64_t span = coeff * (v->extent - 1);
      (span < 0 ? *lo : *hi) += span;
    }
    return absl::OkStatus();
  }

  // The entity `r` names, with the rules every reference obeys: defined,
  // a start per dimension (a global tensor's leading ones may be left
  // out), loop variables in scope; multi-copy buffers inside their loop.
  absl::StatusOr<const Entity*> Resolve(const Stmt& s, const TileRef& r) {
    const Entity* e = Lookup(r.name);
    if (!e) {
      return Fail(s, "names are defined before use", absl::StrCat("%", r.name, " is no argument or buffer in scope"));
    }
    const size_t rank = e->shape().size();
    if (e->is_arg ? r.start.size() > rank : (r.start.size() != rank && !r.start.empty())) {
      return Fail(s, "references have the rank of what they name",
                  absl::StrCat("%", r.name, " has ", rank, " dimensions, the reference gives ", r.start.size()));
    }
    for (const Affine& a : r.start) {
      int64_t lo, hi;
      KILN_RETURN_IF_ERROR(Range(s, a, &lo, &hi));
    }
    if (!e->is_arg && e->buffer->copies > 1) KILN_RETURN_IF_ERROR(CheckRotation(s, *e));
    return e;
  }

  // A multi-copy buffer is used only inside a pipelined loop of its block
  // with at most that many stages.
  absl::Status CheckRotation(const Stmt& s, const Entity& e) {
    const char* rule = "multi-copy buffers are used inside a pipelined loop of at most that many stages";
    int least = 0;
    for (const LoopFrame& f : loops_) {
      if (f.depth <= e.depth || f.loop->loop != Stmt::LoopKind::kPipelined) continue;
      if (f.loop->stages <= e.buffer->copies) return absl::OkStatus();
      least = least == 0 ? f.loop->stages : std::min(least, f.loop->stages);
    }
    if (least == 0) {
      return Fail(s, rule, absl::StrCat("%", e.buffer->buffer, " has ", e.buffer->copies,
                                        " copies and is used outside a pipelined loop"));
    }
    return Fail(s, rule, absl::StrCat("%", e.buffer->buffer, " has ", e.buffer->copies, " copies, the loop ",
                                      least, " stages"));
  }

  // A local reference that must be its whole buffer.
  absl::StatusOr<const Entity*> WholeLocal(const Stmt& s, const TileRef& r) {
    KILN_ASSIGN_OR_RETURN(const Entity* e, Resolve(s, r));
    if (e->is_arg) {
      return Fail(s, "only copies address global tensors", absl::StrCat("%", r.name, " is a kernel argument"));
    }
    if (!AllZero(r)) {
      return Fail(s, "statements other than copies work on whole buffers",
                  absl::StrCat("the reference to %", r.name, " has nonzero starts"));
    }
    return e;
  }

  absl::Status Block(const tile::Block& block) {
    names_.emplace_back();
    for (const auto& s : block) KILN_RETURN_IF_ERROR(Statement(*s));
    names_.pop_back();
    return absl::OkStatus();
  }

  absl::Status Statement(const Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::kBuffer: return Buffer(s);
      case Stmt::Kind::kLoop: return Loop(s);
      case Stmt::Kind::kCopy: return Copy(s);
      case Stmt::Kind::kFill: return WholeLocal(s, s.dst).status();
      case Stmt::Kind::kMma: return Mma(s);
      case Stmt::Kind::kEw: return Ew(s);
      case Stmt::Kind::kReduce: return Reduce(s);
      case Stmt::Kind::kSync: return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  absl::Status Buffer(const Stmt& s) {
    if (!all_names_.insert(s.buffer).second) {
      return Fail(s, "names are unique", absl::StrCat("%", s.buffer, " is declared twice"));
    }
    if (s.scope == Scope::kGlobal) {
      return Fail(s, "buffers live in local scopes", "global tensors are kernel arguments");
    }
    if (s.copies < 1) return Fail(s, "buffers have at least one copy", absl::StrCat(s.copies, " copies"));
    for (int64_t d : s.shape) {
      if (d < 1) return Fail(s, "shapes are positive", absl::StrCat("dimension ", d));
    }
    int64_t groups = 1;
    for (const LoopFrame& f : loops_) {
      if (f.loop->loop == Stmt::LoopKind::kGroup) {
        for (const LoopVar& v : f.loop->vars) groups *= v.extent;
      }
    }
    const int64_t total =
        bytes_[s.scope] += ProductOf(s.shape) * static_cast<int64_t>(DTypeSize(s.dtype)) * s.copies * groups;
    auto cap = target_.capacity.find(s.scope);
    if (cap != target_.capacity.end() && cap->second > 0 && total > cap->second) {
      return Fail(s, "buffers fit the target's capacity",
                  absl::StrCat(ScopeName(s.scope), " holds ", total, " bytes with this buffer (", groups,
                               " groups), ", target_.name, " has ", cap->second));
    }
    names_.back()[s.buffer] = Entity{false, nullptr, &s, loops_.size()};
    return absl::OkStatus();
  }

  absl::Status Loop(const Stmt& s) {
    if (s.vars.empty()) return Fail(s, "loops have variables", "none given");
    for (const LoopVar& v : s.vars) {
      if (!all_names_.insert(v.name).second) {
        return Fail(s, "names are unique", absl::StrCat("%", v.name, " is declared twice"));
      }
      if (v.extent < 1) return Fail(s, "loops run at least once", absl::StrCat("%", v.name, " = ", v.extent));
    }
    const bool inside_non_grid = std::any_of(loops_.begin(), loops_.end(), [](const LoopFrame& f) {
      return f.loop->loop != Stmt::LoopKind::kGrid;
    });
    switch (s.loop) {
      case Stmt::LoopKind::kGrid:
        if (inside_non_grid) {
          return Fail(s, "grid loops are outermost", "it is inside a serial, pipelined or group loop");
        }
        break;
      case Stmt::LoopKind::kGroup: {
        if (inside_non_grid) {
          return Fail(s, "group loops nest only in grid loops", "it is inside a serial, pipelined or group loop");
        }
        int64_t groups = 1;
        for (const LoopVar& v : s.vars) groups *= v.extent;
        if (groups > target_.max_group) {
          return Fail(s, "group loops within the target's groups per unit",
                      absl::StrCat(groups, " groups, ", target_.name, " runs at most ", target_.max_group));
        }
        break;
      }
      case Stmt::LoopKind::kPipelined:
        if (s.stages < 1) return Fail(s, "pipelined loops have at least one stage", absl::StrCat(s.stages));
        break;
      case Stmt::LoopKind::kSerial: break;
    }
    loops_.push_back(LoopFrame{&s, loops_.size() + 1});
    absl::Status st = Block(s.body);
    loops_.pop_back();
    return st;
  }

  absl::Status Copy(const Stmt& s) {
    if (s.srcs.size() != 1 || !s.srcs[0].ref) return Fail(s, "copies read one tile", "no source tile");
    const TileRef& src_ref = *s.srcs[0].ref;
    KILN_ASSIGN_OR_RETURN(const Entity* src, Resolve(s, src_ref));
    KILN_ASSIGN_OR_RETURN(const Entity* dst, Resolve(s, s.dst));
    if (!CopyPath(src->scope(), dst->scope())) {
      return Fail(s, "copies follow a path between scopes",
                  absl::StrCat("no path from ", ScopeName(src->scope()), " to ", ScopeName(dst->scope())));
    }
    if (dst->is_arg && (dst->arg->role == TileArg::Role::kIn || dst->arg->role == TileArg::Role::kConst)) {
      return Fail(s, "copies write only out and workspace arguments",
                  absl::StrCat("%", dst->arg->name, " is ", RoleName(dst->arg->role)));
    }
    // The tile's extents at each side: the local buffer on the other side
    // defines them (the destination's when both are local).
    const bool dst_defines = !dst->is_arg;
    std::vector<int64_t> ext = dst_defines ? dst->shape() : src->shape();
    if (s.transpose) {
      if (ext.size() < 2) return Fail(s, "transposed copies are of matrices", "the tile has fewer than 2 dimensions");
      std::swap(ext[ext.size() - 1], ext[ext.size() - 2]);
    }
    const std::vector<int64_t>& src_ext = dst_defines ? ext : src->shape();
    const std::vector<int64_t>& dst_ext = dst_defines ? dst->shape() : ext;
    if (s.im2col) return Im2colCopy(s, *src, *dst);
    KILN_RETURN_IF_ERROR(CheckTile(s, src_ref, *src, src_ext, /*write=*/false));
    return CheckTile(s, s.dst, *dst, dst_ext, /*write=*/true);
  }

  // An im2col copy: a 4-D global tensor read as its virtual im2col tensor
  // into a local buffer.
  absl::Status Im2colCopy(const Stmt& s, const Entity& src, const Entity& dst) {
    const char* rule = "im2col copies read a 4-D global tensor into a local buffer";
    const Im2col& c = *s.im2col;
    if (!src.is_arg || dst.is_arg) return Fail(s, rule, "the source is no global tensor or the destination no buffer");
    if (src.shape().size() != 4) return Fail(s, rule, absl::StrCat("%", src.arg->name, " has rank ", src.shape().size()));
    if (s.transpose || s.accumulate) return Fail(s, rule, "an im2col copy neither transposes nor adds");
    for (int i = 0; i < 2; ++i) {
      if (c.kernel[i] < 1 || c.stride[i] < 1 || c.dilation[i] < 1 || c.out[i] < 1 || c.pad[i] < 0) {
        return Fail(s, "im2col windows are well formed", "kernel, stride, dilation and out at least 1, pad at least 0");
      }
    }
    if (c.groups < 1 || src.shape()[1] % c.groups != 0) {
      return Fail(s, "im2col windows are well formed",
                  absl::StrCat(c.groups, " groups do not divide ", src.shape()[1], " channels"));
    }
    TileArg virt = *src.arg;
    virt.shape = Im2colShape(src.shape(), c);
    Entity v{true, &virt, nullptr, 0};
    return CheckTile(s, *s.srcs[0].ref, v, dst.shape(), /*write=*/false);
  }

  // A tile of extents `ext` at `r` inside what `e` names.
  absl::Status CheckTile(const Stmt& s, const TileRef& r, const Entity& e, const std::vector<int64_t>& ext,
                         bool write) {
    const std::vector<int64_t>& shape = e.shape();
    if (!e.is_arg) {
      if (shape.size() != ext.size()) {
        return Fail(s, "local copies keep the rank",
                    absl::StrCat("%", r.name, " has ", shape.size(), " dimensions, the tile ", ext.size()));
      }
      for (size_t d = 0; d < shape.size(); ++d) {
        int64_t lo = 0, hi = 0;
        if (d < r.start.size()) KILN_RETURN_IF_ERROR(Range(s, r.start[d], &lo, &hi));
        if (lo < 0 || hi + ext[d] > shape[d]) {
          return Fail(s, "local tiles stay inside their buffers",
                      absl::StrCat("dimension ", d, " of %", r.name, " spans ", lo, " .. ", hi + ext[d] - 1,
                                   ", the buffer has ", shape[d]));
        }
      }
      return absl::OkStatus();
    }
    // A global tensor: dimensions align at the end; extra leading tensor
    // dimensions have extent 1, missing ones broadcast (reads only). A
    // written tile wider than a dimension of extent 1 is a ragged edge.
    const size_t rank = shape.size(), lead = rank - r.start.size();
    if (write && rank < ext.size()) {
      return Fail(s, "copies to global tensors do not broadcast",
                  absl::StrCat("%", r.name, " has ", rank, " dimensions, the tile ", ext.size()));
    }
    // The block's tile starts inside (group variables at 0): a group's
    // share of a ragged block tile may lie wholly past the edge.
    for (size_t d = 0; d < rank; ++d) {
      int64_t lo = 0, hi = 0;
      if (d >= lead) KILN_RETURN_IF_ERROR(Range(s, r.start[d - lead], &lo, &hi, /*groups_at_zero=*/true));
      if (lo < 0 || hi >= shape[d]) {
        return Fail(s, "global tiles start inside their tensors",
                    absl::StrCat("dimension ", d, " of %", r.name, " starts at ", lo, " .. ", hi,
                                 ", the tensor has ", shape[d]));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Mma(const Stmt& s) {
    if (s.srcs.size() != 2 || !s.srcs[0].ref || !s.srcs[1].ref) {
      return Fail(s, "mma multiplies two tiles", "two operand tiles expected");
    }
    KILN_ASSIGN_OR_RETURN(const Entity* c, WholeLocal(s, s.dst));
    KILN_ASSIGN_OR_RETURN(const Entity* a, WholeLocal(s, *s.srcs[0].ref));
    KILN_ASSIGN_OR_RETURN(const Entity* b, WholeLocal(s, *s.srcs[1].ref));
    const char* scopes = "mma operands are in their scopes";
    if (c->scope() != Scope::kAccumulator) return Fail(s, scopes, "the destination is not in accumulator scope");
    if (a->scope() != Scope::kOperandA) return Fail(s, scopes, "A is not in operand_a scope");
    if (b->scope() != Scope::kOperandB) return Fail(s, scopes, "B is not in operand_b scope");
    const auto &cs = c->shape(), &as = a->shape(), &bs = b->shape();
    if (cs.size() != 2 || as.size() != 2 || bs.size() != 2 || as[0] != cs[0] || bs[1] != cs[1] || as[1] != bs[0]) {
      return Fail(s, "mma shapes agree", "A [m, k], B [k, n] and the destination [m, n] expected");
    }
    bool shape_ok = false;
    for (const TileMma& m : target_.mma) {
      if (cs[0] % m.m != 0 || cs[1] % m.n != 0 || as[1] % m.k != 0) continue;
      shape_ok = true;
      if (a->dtype() == m.input && b->dtype() == m.input && c->dtype() == m.accumulator) return absl::OkStatus();
    }
    if (!shape_ok) {
      return Fail(s, "mma shapes are in units of the target's mma shapes",
                  absl::StrCat("m ", cs[0], ", n ", cs[1], ", k ", as[1], " fit no mma shape of ", target_.name));
    }
    return Fail(s, "mma dtypes are the target's",
                absl::StrCat(DTypeName(a->dtype()), " x ", DTypeName(b->dtype()), " -> ", DTypeName(c->dtype()),
                             " is no mma of ", target_.name));
  }

  // Whether `from` broadcasts to `to` numpy style.
  static bool Broadcasts(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
    if (from.size() > to.size()) return false;
    for (size_t i = 0; i < from.size(); ++i) {
      const int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
      if (f != t && f != 1) return false;
    }
    return true;
  }

  absl::Status Ew(const Stmt& s) {
    if (static_cast<int>(s.srcs.size()) != EwOpArity(s.ew)) {
      return Fail(s, "ew steps take their op's operands",
                  absl::StrCat(EwOpName(s.ew), " takes ", EwOpArity(s.ew), ", given ", s.srcs.size()));
    }
    KILN_ASSIGN_OR_RETURN(const Entity* dst, WholeLocal(s, s.dst));
    KILN_RETURN_IF_ERROR(ComputeScope(s, *dst));
    for (const tile::Operand& o : s.srcs) {
      if (!o.ref) continue;
      KILN_ASSIGN_OR_RETURN(const Entity* src, WholeLocal(s, *o.ref));
      KILN_RETURN_IF_ERROR(ComputeScope(s, *src));
      if (!Broadcasts(src->shape(), dst->shape())) {
        return Fail(s, "ew operands broadcast to the destination",
                    absl::StrCat("%", o.ref->name, " does not broadcast to %", s.dst.name));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ComputeScope(const Stmt& s, const Entity& e) const {
    if (e.scope() == Scope::kVector || e.scope() == Scope::kAccumulator) return absl::OkStatus();
    return Fail(s, "ew and reduce steps work in vector or accumulator scope",
                absl::StrCat("%", e.buffer->buffer, " is in ", ScopeName(e.scope()), " scope"));
  }

  absl::Status Reduce(const Stmt& s) {
    if (s.srcs.size() != 1 || !s.srcs[0].ref) return Fail(s, "reduce steps read one tile", "no source tile");
    KILN_ASSIGN_OR_RETURN(const Entity* dst, WholeLocal(s, s.dst));
    KILN_ASSIGN_OR_RETURN(const Entity* src, WholeLocal(s, *s.srcs[0].ref));
    KILN_RETURN_IF_ERROR(ComputeScope(s, *dst));
    KILN_RETURN_IF_ERROR(ComputeScope(s, *src));
    std::vector<int64_t> want = src->shape();
    if (s.axis < 0 || s.axis >= static_cast<int>(want.size())) {
      return Fail(s, "reduce axes are dimensions of the source", absl::StrCat("axis ", s.axis));
    }
    want[s.axis] = 1;
    if (dst->shape() != want) {
      return Fail(s, "reduce keeps the reduced dimension with extent 1",
                  absl::StrCat("the destination should be [", absl::StrJoin(want, ","), "]"));
    }
    return absl::OkStatus();
  }

  const TileKernel& kernel_;
  const TileTarget& target_;
  Printer printer_;
  std::vector<std::map<std::string, Entity>> names_;  // per block
  std::set<std::string> all_names_;                   // every name declared so far
  std::vector<LoopFrame> loops_;                      // enclosing loops, outermost first
  std::map<Scope, int64_t> bytes_;                    // per scope, per compute unit
};

}  // namespace

absl::Status Verify(const TileKernel& k, const TileTarget& target) { return Verifier(k, target).Run(); }

}  // namespace kiln::target::tile
