//===- parser.cc - The .kir text form of the graph IR: parsing ------------===//
//
// A hand-written lexer and recursive-descent parser. Every function returns
// false after recording the first error; nothing throws, nothing asserts,
// and every allocation is bounded by the size of the text (a dense tensor is
// allocated only once its elements have been read and counted).
//
//===----------------------------------------------------------------------===//
#include "graph/ir/parser.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "graph/support/checked_math.h"

namespace kiln {
namespace {

//===----------------------------------------------------------------------===//
// Lexer
//===----------------------------------------------------------------------===//

enum class Tok : uint8_t {
  kEof,
  kIdent,      // [A-Za-z_][A-Za-z0-9_.]*
  kValue,      // %name or %"quoted"; text is the name
  kGraphName,  // @name or @"quoted"; text is the name
  kString,     // "..."; text is the decoded string
  kNumber,     // -?digits(.digits)?(e[+-]digits)? or -?0xHEX; text as written
  kPunct,      // ( ) { } [ ] < > , = : :: ? * -
  kError,      // text is the message
};

struct Token {
  Tok kind = Tok::kEof;
  std::string text;
  int line = 1, col = 1;

  bool Is(Tok k, absl::string_view t) const { return kind == k && text == t; }
  bool IsPunct(absl::string_view t) const { return Is(Tok::kPunct, t); }
  bool IsIdent(absl::string_view t) const { return Is(Tok::kIdent, t); }
};

std::string Describe(const Token& t) {
  switch (t.kind) {
    case Tok::kEof: return "end of input";
    case Tok::kIdent: return absl::StrCat("'", t.text, "'");
    case Tok::kValue: return absl::StrCat("value ", PrintValueName(t.text));
    case Tok::kGraphName: {
      std::string s = "graph name ";
      kir::AppendName(&s, '@', t.text);
      return s;
    }
    case Tok::kString: return absl::StrCat("string ", QuoteString(t.text));
    case Tok::kNumber: return absl::StrCat("number ", t.text);
    case Tok::kPunct: return absl::StrCat("'", t.text, "'");
    case Tok::kError: return "invalid token";
  }
  return "?";
}

class Lexer {
 public:
  explicit Lexer(absl::string_view text) : s_(text) {}

  Token Next() {
    SkipSpaceAndComments();
    Token t;
    t.line = line_;
    t.col = col_;
    if (pos_ >= s_.size()) return t;
    char c = s_[pos_];
    if (c == '%' || c == '@') {
      Advance(1);
      t.kind = c == '%' ? Tok::kValue : Tok::kGraphName;
      if (pos_ < s_.size() && s_[pos_] == '"') {
        if (!LexString(&t)) return t;
        t.kind = c == '%' ? Tok::kValue : Tok::kGraphName;
        return t;
      }
      size_t start = pos_;
      while (pos_ < s_.size() && kir::IsNameChar(s_[pos_])) Advance(1);
      if (pos_ == start) return Error(t, absl::StrCat("expected a name after '", std::string(1, c), "'"));
      t.text = std::string(s_.substr(start, pos_ - start));
      return t;
    }
    if (c == '"') {
      LexString(&t);
      return t;
    }
    if (IsDigit(c) || (c == '-' && pos_ + 1 < s_.size() && IsDigit(s_[pos_ + 1]))) return LexNumber(t);
    if (kir::IsIdentStart(c)) {
      size_t start = pos_;
      while (pos_ < s_.size() && kir::IsNameChar(s_[pos_])) Advance(1);
      t.kind = Tok::kIdent;
      t.text = std::string(s_.substr(start, pos_ - start));
      return t;
    }
    if (c == ':' && pos_ + 1 < s_.size() && s_[pos_ + 1] == ':') {
      Advance(2);
      t.kind = Tok::kPunct;
      t.text = "::";
      return t;
    }
    if (std::strchr("(){}[]<>,=:?*-", c) && c != '\0') {
      Advance(1);
      t.kind = Tok::kPunct;
      t.text = std::string(1, c);
      return t;
    }
    unsigned char uc = static_cast<unsigned char>(c);
    std::string shown = uc >= 0x20 && uc < 0x7f ? std::string(1, c) : absl::StrCat("\\x", absl::Hex(uc, absl::kZeroPad2));
    Advance(1);
    return Error(t, absl::StrCat("unexpected character '", shown, "'"));
  }

 private:
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }
  static bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

  static Token Error(Token t, std::string msg) {
    t.kind = Tok::kError;
    t.text = std::move(msg);
    return t;
  }

  void Advance(size_t n) {
    for (size_t i = 0; i < n && pos_ < s_.size(); ++i, ++pos_) {
      if (s_[pos_] == '\n') {
        ++line_;
        col_ = 1;
      } else {
        ++col_;
      }
    }
  }

  void SkipSpaceAndComments() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        Advance(1);
      } else if (c == '/' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '/') {
        while (pos_ < s_.size() && s_[pos_] != '\n') Advance(1);
      } else {
        break;
      }
    }
  }

  Token LexNumber(Token t) {
    size_t start = pos_;
    if (s_[pos_] == '-') Advance(1);
    if (pos_ + 1 < s_.size() && s_[pos_] == '0' && (s_[pos_ + 1] == 'x' || s_[pos_ + 1] == 'X')) {
      Advance(2);
      size_t digits = pos_;
      while (pos_ < s_.size() && IsHex(s_[pos_])) Advance(1);
      if (pos_ == digits) return Error(t, "expected hex digits after '0x'");
    } else {
      while (pos_ < s_.size() && IsDigit(s_[pos_])) Advance(1);
      if (pos_ < s_.size() && s_[pos_] == '.') {
        Advance(1);
        while (pos_ < s_.size() && IsDigit(s_[pos_])) Advance(1);
      }
      if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
        size_t p = pos_ + 1;
        if (p < s_.size() && (s_[p] == '+' || s_[p] == '-')) ++p;
        if (p < s_.size() && IsDigit(s_[p])) {
          Advance(p - pos_);
          while (pos_ < s_.size() && IsDigit(s_[pos_])) Advance(1);
        }
      }
    }
    t.kind = Tok::kNumber;
    t.text = std::string(s_.substr(start, pos_ - start));
    return t;
  }

  // At '"': decodes a string literal into t (kind kString) or an error.
  bool LexString(Token* t) {
    Advance(1);
    std::string out;
    while (true) {
      if (pos_ >= s_.size() || s_[pos_] == '\n') {
        *t = Error(*t, "unterminated string");
        return false;
      }
      char c = s_[pos_];
      if (c == '"') {
        Advance(1);
        break;
      }
      if (c != '\\') {
        out.push_back(c);
        Advance(1);
        continue;
      }
      if (pos_ + 1 >= s_.size()) {
        *t = Error(*t, "unterminated string");
        return false;
      }
      char e = s_[pos_ + 1];
      switch (e) {
        case '"': out.push_back('"'); Advance(2); break;
        case '\\': out.push_back('\\'); Advance(2); break;
        case 'n': out.push_back('\n'); Advance(2); break;
        case 't': out.push_back('\t'); Advance(2); break;
        case 'r': out.push_back('\r'); Advance(2); break;
        case 'x': {
          if (pos_ + 3 >= s_.size() || !IsHex(s_[pos_ + 2]) || !IsHex(s_[pos_ + 3])) {
            *t = Error(*t, "bad \\x escape in string (expected two hex digits)");
            return false;
          }
          auto hex = [](char h) {
            return h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10;
          };
          out.push_back(static_cast<char>(hex(s_[pos_ + 2]) * 16 + hex(s_[pos_ + 3])));
          Advance(4);
          break;
        }
        default: {
          unsigned char ue = static_cast<unsigned char>(e);
          std::string shown = ue >= 0x20 && ue < 0x7f ? std::string(1, e) : absl::StrCat("x", absl::Hex(ue, absl::kZeroPad2));
          *t = Error(*t, absl::StrCat("unknown escape '\\", shown, "' in string"));
          return false;
        }
      }
    }
    t->kind = Tok::kString;
    t->text = std::move(out);
    return true;
  }

  absl::string_view s_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

//===----------------------------------------------------------------------===//
// Numbers
//===----------------------------------------------------------------------===//

bool IsIntText(absl::string_view s) {
  for (char c : s)
    if (c == '.' || c == 'e' || c == 'E' || c == 'x' || c == 'X') return false;
  return true;
}

bool IsHexText(absl::string_view s) { return s.find('x') != absl::string_view::npos || s.find('X') != absl::string_view::npos; }

// A floating-point literal as written: a decimal number, +-inf, +-nan, or
// nan(0xBITS).
struct FloatLit {
  enum Kind { kNumber, kInf, kNan, kNanBits } kind = kNumber;
  bool negative = false;
  std::string text;   // kNumber
  uint64_t bits = 0;  // kNanBits
  int line = 0, col = 0;
};

template <typename F>
bool ParseDecimal(const std::string& text, F* out) {
  const char* b = text.data();
  const char* e = b + text.size();
  auto r = std::from_chars(b, e, *out);
  return r.ec == std::errc() && r.ptr == e;
}

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

struct Scope {
  Graph* graph;
  absl::flat_hash_map<std::string, Value*> names;
};

class Parser {
 public:
  Parser(absl::string_view text, absl::string_view filename, const BlobStore* blobs)
      : lex_(text), filename_(filename), blobs_(blobs) {
    Advance();
  }

  absl::Status status() const { return status_; }

  bool ParseModelText(Model* m) {
    if (tok_.IsIdent("kiln.model")) {
      Advance();
      if (!ParseHeader(m)) return false;
    }
    auto g = std::make_unique<Graph>();
    if (!ParseGraphText(g.get(), 0)) return false;
    if (!ExpectEof()) return false;
    m->graph = std::move(g);
    return true;
  }

  bool ParseSingleGraph(std::unique_ptr<Graph>* out) {
    auto g = std::make_unique<Graph>();
    if (!ParseGraphText(g.get(), 0)) return false;
    if (!ExpectEof()) return false;
    *out = std::move(g);
    return true;
  }

  bool ParseTypeOnly(Type* t) {
    if (!ParseType(t, 0)) return false;
    return ExpectEof();
  }

 private:
  //===--- Token handling -----------------------------------------------===//

  void Advance() {
    tok_ = lex_.Next();
    if (tok_.kind == Tok::kError) Fail(tok_, tok_.text);
  }

  bool Fail(int line, int col, absl::string_view msg) {
    if (status_.ok())
      status_ = absl::InvalidArgumentError(absl::StrCat(filename_, ":", line, ":", col, ": ", msg));
    return false;
  }
  bool Fail(const Token& at, absl::string_view msg) { return Fail(at.line, at.col, msg); }
  bool Fail(const FloatLit& at, absl::string_view msg) { return Fail(at.line, at.col, msg); }
  bool FailHere(absl::string_view msg) { return Fail(tok_, msg); }
  bool Expected(absl::string_view what) {
    return FailHere(absl::StrCat("expected ", what, ", found ", Describe(tok_)));
  }

  bool ExpectPunct(absl::string_view p, absl::string_view context = "") {
    if (!tok_.IsPunct(p)) {
      std::string what = absl::StrCat("'", p, "'");
      if (!context.empty()) absl::StrAppend(&what, " ", context);
      return Expected(what);
    }
    Advance();
    return true;
  }
  bool ExpectIdent(absl::string_view word) {
    if (!tok_.IsIdent(word)) return Expected(absl::StrCat("'", word, "'"));
    Advance();
    return true;
  }
  bool ExpectString(std::string* out, absl::string_view what = "a string") {
    if (tok_.kind != Tok::kString) return Expected(what);
    *out = tok_.text;
    Advance();
    return true;
  }
  bool ExpectEof() {
    if (tok_.kind != Tok::kEof) return FailHere(absl::StrCat("unexpected ", Describe(tok_), " after the end of the graph"));
    return true;
  }
  bool ConsumePunct(absl::string_view p) {
    if (!tok_.IsPunct(p)) return false;
    Advance();
    return true;
  }

  bool ParseInt64(int64_t* v, absl::string_view what) {
    if (tok_.kind != Tok::kNumber || !IsIntText(tok_.text)) return Expected(what);
    if (!ParseDecimal(tok_.text, v)) return FailHere(absl::StrCat("integer ", tok_.text, " is out of range"));
    Advance();
    return true;
  }

  //===--- Model header ---------------------------------------------------===//

  bool ParseHeader(Model* m) {
    bool seen_ir = false, seen_producer = false, seen_version = false, seen_opset = false;
    auto once = [&](bool* seen) {
      if (*seen) return FailHere(absl::StrCat("duplicate '", tok_.text, "' in the model header"));
      *seen = true;
      Advance();
      return true;
    };
    while (tok_.kind == Tok::kIdent && !tok_.IsIdent("graph")) {
      if (tok_.IsIdent("ir_version")) {
        if (!once(&seen_ir) || !ParseInt64(&m->ir_version, "an IR version")) return false;
      } else if (tok_.IsIdent("producer")) {
        if (!once(&seen_producer) || !ExpectString(&m->producer_name, "the producer name (a string)"))
          return false;
      } else if (tok_.IsIdent("producer_version")) {
        if (!once(&seen_version) || !ExpectString(&m->producer_version, "the producer version (a string)"))
          return false;
      } else if (tok_.IsIdent("opset")) {
        if (!once(&seen_opset) || !ExpectPunct("{", "after 'opset'")) return false;
        while (!tok_.IsPunct("}")) {
          Token at = tok_;
          std::string domain;
          int64_t version;
          if (!ExpectString(&domain, "an opset domain (a string such as \"\")") || !ExpectPunct("=") ||
              !ParseInt64(&version, "an opset version"))
            return false;
          if (!m->opsets.emplace(domain, version).second)
            return Fail(at, absl::StrCat("duplicate opset domain ", QuoteString(domain)));
          if (!ConsumePunct(",")) break;
        }
        if (!ExpectPunct("}", "to close the opset list")) return false;
      } else {
        return FailHere(absl::StrCat("unknown model header field '", tok_.text, "'"));
      }
    }
    return true;
  }

  //===--- Scopes ---------------------------------------------------------===//

  Value* Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->names.find(name);
      if (f != it->names.end()) return f->second;
    }
    return nullptr;
  }

  // Checks that `name` may be defined in the current graph.
  bool CheckNewName(const Token& at) {
    if (at.text.empty()) return Fail(at, "empty value name");
    for (size_t i = scopes_.size(); i-- > 0;) {
      if (scopes_[i].names.count(at.text)) {
        if (i + 1 == scopes_.size())
          return Fail(at, absl::StrCat("redefinition of value ", PrintValueName(at.text)));
        return Fail(at, absl::StrCat("value ", PrintValueName(at.text),
                                     " is already defined in an enclosing graph"));
      }
    }
    return true;
  }

  void Define(Value* v) { scopes_.back().names[v->name()] = v; }

  //===--- Types ----------------------------------------------------------===//

  bool ParseType(Type* out, int depth) {
    if (depth > kMaxKirNesting) return FailHere("types are nested too deeply");
    if (tok_.IsPunct("?")) {
      Advance();
      *out = Type();
      return true;
    }
    if (tok_.kind != Tok::kIdent) return Expected("a type");
    if (tok_.text == "seq" || tok_.text == "opt") {
      bool seq = tok_.text == "seq";
      Advance();
      if (!ExpectPunct("<")) return false;
      Type elem;
      if (!ParseType(&elem, depth + 1)) return false;
      if (!ExpectPunct(">", seq ? "to close seq<...>" : "to close opt<...>")) return false;
      *out = seq ? Type::Sequence(std::move(elem)) : Type::Optional(std::move(elem));
      return true;
    }
    std::optional<DType> dt = ParseDType(tok_.text);
    if (!dt) return FailHere(absl::StrCat("unknown element type '", tok_.text, "'"));
    Advance();
    if (!ExpectPunct("[", "after the element type (a shape such as [1,3], [] or [*])")) return false;
    if (ConsumePunct("*")) {
      if (!ExpectPunct("]")) return false;
      *out = Type::Tensor(*dt, Shape());
      return true;
    }
    DimVector dims;
    while (!tok_.IsPunct("]")) {
      if (tok_.IsPunct("?")) {
        dims.push_back(Dim());
        Advance();
      } else if (tok_.kind == Tok::kNumber) {
        int64_t v;
        if (!IsIntText(tok_.text) || tok_.text[0] == '-' || !ParseDecimal(tok_.text, &v))
          return FailHere(absl::StrCat("bad dimension ", tok_.text, " (expected a non-negative integer)"));
        dims.push_back(Dim(v));
        Advance();
      } else if (tok_.kind == Tok::kIdent || tok_.kind == Tok::kString) {
        if (tok_.text.empty()) return FailHere("empty dimension name");
        dims.push_back(Dim::Symbol(tok_.text));
        Advance();
      } else {
        return Expected("a dimension (a number, a name or '?')");
      }
      if (!ConsumePunct(",")) break;
    }
    if (!ExpectPunct("]", "to close the shape")) return false;
    *out = Type::Tensor(*dt, Shape(std::move(dims)));
    return true;
  }

  //===--- Numbers --------------------------------------------------------===//

  bool AtFloatStart() const {
    return tok_.kind == Tok::kNumber || tok_.IsPunct("-") || tok_.IsIdent("inf") || tok_.IsIdent("nan");
  }

  bool ParseFloatLit(FloatLit* lit) {
    lit->line = tok_.line;
    lit->col = tok_.col;
    if (tok_.kind == Tok::kNumber) {
      if (IsHexText(tok_.text)) return FailHere(absl::StrCat("hex number ", tok_.text, " where a value was expected"));
      lit->kind = FloatLit::kNumber;
      lit->text = tok_.text;
      Advance();
      return true;
    }
    if (tok_.IsPunct("-")) {
      lit->negative = true;
      Advance();
      if (!tok_.IsIdent("inf") && !tok_.IsIdent("nan")) return Expected("'inf' or 'nan' after '-'");
    }
    if (tok_.IsIdent("inf")) {
      lit->kind = FloatLit::kInf;
      Advance();
      return true;
    }
    if (!tok_.IsIdent("nan")) return Expected("a number");
    Advance();
    lit->kind = FloatLit::kNan;
    if (tok_.IsPunct("(")) {
      if (lit->negative) return FailHere("'-nan(...)': put the sign bit in the NaN bits instead");
      Advance();
      if (tok_.kind != Tok::kNumber || !IsHexText(tok_.text) || tok_.text[0] == '-')
        return Expected("the NaN bits in hex (0x...)");
      const std::string& h = tok_.text;
      if (h.size() > 18) return FailHere("NaN bits do not fit in 64 bits");
      uint64_t bits = 0;
      for (size_t i = 2; i < h.size(); ++i) {
        char c = h[i];
        int d = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
        bits = bits * 16 + d;
      }
      lit->kind = FloatLit::kNanBits;
      lit->bits = bits;
      Advance();
      if (!ExpectPunct(")")) return false;
    }
    return true;
  }

  // Converts a literal to a float type F (float or double).
  template <typename F, typename Bits>
  bool ToFloat(const FloatLit& lit, Bits canonical_nan, F* out) {
    constexpr Bits kSign = Bits{1} << (sizeof(Bits) * 8 - 1);
    switch (lit.kind) {
      case FloatLit::kNumber:
        if (!ParseDecimal(lit.text, out))
          return Fail(lit, absl::StrCat("number ", lit.text, " is out of range for ",
                                           sizeof(F) == 4 ? "f32" : "f64"));
        return true;
      case FloatLit::kInf:
        *out = lit.negative ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
        return true;
      case FloatLit::kNan:
        *out = std::bit_cast<F>(static_cast<Bits>(lit.negative ? (canonical_nan | kSign) : canonical_nan));
        return true;
      case FloatLit::kNanBits: {
        if (lit.bits > std::numeric_limits<Bits>::max())
          return Fail(lit, "NaN bits are wider than the element type");
        F v = std::bit_cast<F>(static_cast<Bits>(lit.bits));
        if (!std::isnan(v)) return Fail(lit, "nan(...) bits do not encode a NaN");
        *out = v;
        return true;
      }
    }
    return false;
  }

  bool To16(const FloatLit& lit, bool bf16, uint16_t* out) {
    uint16_t canonical = bf16 ? kir::kBF16CanonicalNan : kir::kF16CanonicalNan;
    if (lit.kind == FloatLit::kNanBits) {
      if (lit.bits > 0xffff) return Fail(lit, "NaN bits are wider than the element type");
      uint16_t b = static_cast<uint16_t>(lit.bits);
      float v = bf16 ? BFloat16BitsToFloat(b) : HalfBitsToFloat(b);
      if (!std::isnan(v)) return Fail(lit, "nan(...) bits do not encode a NaN");
      *out = b;
      return true;
    }
    if (lit.kind == FloatLit::kNan) {
      *out = lit.negative ? static_cast<uint16_t>(canonical | 0x8000u) : canonical;
      return true;
    }
    float f;
    if (!ToFloat<float, uint32_t>(lit, kir::kF32CanonicalNan, &f)) return false;
    *out = bf16 ? FloatToBFloat16Bits(f) : FloatToHalfBits(f);
    return true;
  }

  //===--- Tensors --------------------------------------------------------===//

  static bool StaticTensorType(const Type& t) {
    return t.is_tensor() && t.shape().is_static() && t.dtype() != DType::kUndefined;
  }

  // Element count of static dims, or -1 when it overflows.

  // `[ elements ]` for a tensor of type `type` (static); fills *out.
  bool ParseDense(const Token& at, const Type& type, Tensor* out) {
    DType dt = type.dtype();
    Dims dims = type.shape().StaticDims();
    const std::optional<int64_t> counted = CheckedProduct(dims);
    if (!counted) return Fail(at, absl::StrCat(PrintType(type), " has more elements than fit 64 bits"));
    const int64_t expected = *counted;
    if (!ExpectPunct("[", "to start the dense elements")) return false;
    std::string raw;                  // numeric elements, little-endian bytes
    std::vector<std::string> strings;  // str elements
    int64_t count = 0;
    size_t size = DTypeSize(dt);
    auto put = [&](const void* p) { raw.append(static_cast<const char*>(p), size); };
    while (!tok_.IsPunct("]")) {
      const int el_line = tok_.line, el_col = tok_.col;
      switch (dt) {
        case DType::kString: {
          std::string s;
          if (!ExpectString(&s, "a string element")) return false;
          strings.push_back(std::move(s));
          break;
        }
        case DType::kBool: {
          uint8_t b;
          if (tok_.IsIdent("true") || tok_.IsIdent("false")) {
            b = tok_.text == "true";
          } else if (tok_.Is(Tok::kNumber, "0") || tok_.Is(Tok::kNumber, "1")) {
            b = tok_.text == "1";
          } else {
            return Expected("'true' or 'false'");
          }
          Advance();
          put(&b);
          break;
        }
        case DType::kF32: case DType::kF64: case DType::kF16: case DType::kBF16: {
          FloatLit lit;
          if (!ParseFloatLit(&lit) || !PutFloat(dt, lit, &raw)) return false;
          break;
        }
        case DType::kC64: case DType::kC128: {
          if (!ExpectPunct("(", "to start a complex element (re, im)")) return false;
          FloatLit re, im;
          DType part = dt == DType::kC64 ? DType::kF32 : DType::kF64;
          if (!ParseFloatLit(&re) || !PutFloat(part, re, &raw) || !ExpectPunct(",") ||
              !ParseFloatLit(&im) || !PutFloat(part, im, &raw) || !ExpectPunct(")"))
            return false;
          break;
        }
        default: {
          if (!PutInt(dt, &raw)) return false;
          break;
        }
      }
      ++count;
      if (expected >= 0 && count > expected)
        return Fail(el_line, el_col, absl::StrCat("too many elements for ", PrintType(type), " (expected ", expected, ")"));
      if (!ConsumePunct(",")) break;
    }
    if (!ExpectPunct("]", "to close the dense elements")) return false;
    if (count != expected)
      return Fail(at, absl::StrCat("dense tensor has ", count, " elements, ", PrintType(type), " needs ",
                                   expected < 0 ? std::string("more") : absl::StrCat(expected)));
    Tensor t(dt, dims);
    if (dt == DType::kString) {
      std::string* p = t.data<std::string>();
      for (int64_t i = 0; i < count; ++i) p[i] = std::move(strings[i]);
    } else if (!raw.empty()) {
      std::memcpy(t.raw(), raw.data(), raw.size());
    }
    *out = std::move(t);
    return true;
  }

  bool PutFloat(DType dt, const FloatLit& lit, std::string* raw) {
    switch (dt) {
      case DType::kF32: {
        float f;
        if (!ToFloat<float, uint32_t>(lit, kir::kF32CanonicalNan, &f)) return false;
        raw->append(reinterpret_cast<const char*>(&f), 4);
        return true;
      }
      case DType::kF64: {
        double d;
        if (!ToFloat<double, uint64_t>(lit, kir::kF64CanonicalNan, &d)) return false;
        raw->append(reinterpret_cast<const char*>(&d), 8);
        return true;
      }
      default: {
        uint16_t b;
        if (!To16(lit, dt == DType::kBF16, &b)) return false;
        raw->append(reinterpret_cast<const char*>(&b), 2);
        return true;
      }
    }
  }

  bool PutInt(DType dt, std::string* raw) {
    if (tok_.kind != Tok::kNumber || !IsIntText(tok_.text))
      return Expected(absl::StrCat("an integer element of type ", DTypeName(dt)));
    bool is_signed = IsSigned(dt);
    int64_t s = 0;
    uint64_t u = 0;
    bool ok = is_signed ? ParseDecimal(tok_.text, &s) : (tok_.text[0] != '-' && ParseDecimal(tok_.text, &u));
    auto range = [&] {
      return FailHere(absl::StrCat(tok_.text, " is out of range for ", DTypeName(dt)));
    };
    if (!ok) return range();
    auto put_s = [&](auto v, int64_t lo, int64_t hi) {
      if (s < lo || s > hi) return range();
      v = static_cast<decltype(v)>(s);
      raw->append(reinterpret_cast<const char*>(&v), sizeof(v));
      return true;
    };
    auto put_u = [&](auto v, uint64_t hi) {
      if (u > hi) return range();
      v = static_cast<decltype(v)>(u);
      raw->append(reinterpret_cast<const char*>(&v), sizeof(v));
      return true;
    };
    bool r;
    switch (dt) {
      case DType::kI8: r = put_s(int8_t{}, INT8_MIN, INT8_MAX); break;
      case DType::kI16: r = put_s(int16_t{}, INT16_MIN, INT16_MAX); break;
      case DType::kI32: r = put_s(int32_t{}, INT32_MIN, INT32_MAX); break;
      case DType::kI64: r = put_s(int64_t{}, INT64_MIN, INT64_MAX); break;
      case DType::kU8: r = put_u(uint8_t{}, UINT8_MAX); break;
      case DType::kU16: r = put_u(uint16_t{}, UINT16_MAX); break;
      case DType::kU32: r = put_u(uint32_t{}, UINT32_MAX); break;
      case DType::kU64: r = put_u(uint64_t{}, UINT64_MAX); break;
      default: return FailHere(absl::StrCat("no dense form for element type ", DTypeName(dt)));
    }
    if (!r) return false;
    Advance();
    return true;
  }

  // `blob "HASH"`: the stored tensor, or an undefined tensor when the store
  // does not have it.
  bool ParseBlob(const Type& type, Tensor* out, bool* missing, uint64_t* hash_out) {
    Token at = tok_;
    std::string hex;
    if (!ExpectString(&hex, "the blob hash (a string of hex digits)")) return false;
    if (hex.empty() || hex.size() > 16) return Fail(at, "a blob hash has 1 to 16 hex digits");
    uint64_t h = 0;
    for (char c : hex) {
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else return Fail(at, "a blob hash has 1 to 16 hex digits");
      h = h * 16 + d;
    }
    *hash_out = h;
    const Tensor* t = blobs_ ? blobs_->Find(h) : nullptr;
    if (!t) {
      *missing = true;
      return true;
    }
    *missing = false;
    if (t->dtype() != type.dtype() || t->dims() != type.shape().StaticDims())
      return Fail(at, absl::StrCat("blob \"", hex, "\" holds ",
                                   PrintType(Type::Of(*t)),
                                   ", declared ", PrintType(type)));
    *out = *t;
    return true;
  }

  // After `tensor`: `undef`, or a static tensor type and `dense [...]` or
  // `blob "HASH"`.
  bool ParseTensorLiteral(Tensor* out) {
    if (tok_.IsIdent("undef") ) {
      Advance();
      *out = Tensor();
      return true;
    }
    Token type_at = tok_;
    Type type;
    if (!ParseType(&type, 0)) return false;
    if (!StaticTensorType(type))
      return Fail(type_at, absl::StrCat("a tensor literal needs a static tensor type, got ", PrintType(type)));
    Token at = tok_;
    if (tok_.IsIdent("dense")) {
      Advance();
      return ParseDense(at, type, out);
    }
    if (tok_.IsIdent("blob")) {
      Advance();
      bool missing;
      uint64_t h;
      if (!ParseBlob(type, out, &missing, &h)) return false;
      if (missing)
        return Fail(at, absl::StrCat("tensor attribute blob \"", BlobHashString(h),
                                     "\" is not in the blob store"));
      return true;
    }
    return Expected("'dense' or 'blob'");
  }

  //===--- Attributes -----------------------------------------------------===//

  bool ParseAttrValue(Attribute* out, int depth) {
    if (depth > kMaxKirNesting) return FailHere("attributes are nested too deeply");
    if (tok_.kind == Tok::kString) {
      *out = Attribute::String(tok_.text);
      Advance();
      return true;
    }
    if (tok_.kind == Tok::kNumber && IsIntText(tok_.text)) {
      int64_t v;
      if (!ParseInt64(&v, "an integer")) return false;
      *out = Attribute::Int(v);
      return true;
    }
    if (AtFloatStart()) {
      FloatLit lit;
      float f;
      if (!ParseFloatLit(&lit) || !ToFloat<float, uint32_t>(lit, kir::kF32CanonicalNan, &f)) return false;
      *out = Attribute::Float(f);
      return true;
    }
    if (tok_.IsPunct("[")) return ParseList(out, std::nullopt, depth);
    if (tok_.kind != Tok::kIdent) return Expected("an attribute value");
    const std::string word = tok_.text;
    if (word == "tensor") {
      Advance();
      Tensor t;
      if (!ParseTensorLiteral(&t)) return false;
      *out = Attribute::TensorValue(std::move(t));
      return true;
    }
    if (word == "graph") {
      std::unique_ptr<Graph> g;
      if (!ParseSubgraph(&g, depth)) return false;
      *out = Attribute::GraphValue(std::move(g));
      return true;
    }
    if (word == "type") {
      Advance();
      Type t;
      if (!ParseType(&t, 0)) return false;
      *out = Attribute::TypeValue(std::move(t));
      return true;
    }
    static const std::map<std::string, AttrKind> kListKinds = {
        {"ints", AttrKind::kInts}, {"floats", AttrKind::kFloats}, {"strings", AttrKind::kStrings},
        {"tensors", AttrKind::kTensors}, {"graphs", AttrKind::kGraphs}};
    auto it = kListKinds.find(word);
    if (it != kListKinds.end()) {
      Advance();
      return ParseList(out, it->second, depth);
    }
    return FailHere(absl::StrCat("expected an attribute value, found ", Describe(tok_)));
  }

  // `[ ... ]`, of `kind` when given, else of the kind its first element shows.
  bool ParseList(Attribute* out, std::optional<AttrKind> kind, int depth) {
    Token open = tok_;
    const bool explicit_kind = kind.has_value();
    if (!ExpectPunct("[")) return false;
    if (!kind) {
      if (tok_.IsPunct("]"))
        return Fail(open, "an empty list needs its kind: ints [], floats [], strings [], tensors [] or graphs []");
      if (tok_.kind == Tok::kString) kind = AttrKind::kStrings;
      else if (tok_.IsIdent("tensor")) kind = AttrKind::kTensors;
      else if (tok_.IsIdent("graph")) kind = AttrKind::kGraphs;
      else if (AtFloatStart()) kind = AttrKind::kInts;  // becomes floats if any element is a float
      else return Expected("a list element");
    }
    std::vector<FloatLit> numbers;
    std::vector<std::string> strings;
    std::vector<Tensor> tensors;
    std::vector<std::unique_ptr<Graph>> graphs;
    while (!tok_.IsPunct("]")) {
      switch (*kind) {
        case AttrKind::kInts:
        case AttrKind::kFloats: {
          FloatLit lit;
          if (!AtFloatStart()) return Expected("a number");
          if (!ParseFloatLit(&lit)) return false;
          numbers.push_back(std::move(lit));
          break;
        }
        case AttrKind::kStrings: {
          std::string s;
          if (!ExpectString(&s, "a string")) return false;
          strings.push_back(std::move(s));
          break;
        }
        case AttrKind::kTensors: {
          if (!ExpectIdent("tensor")) return false;
          Tensor t;
          if (!ParseTensorLiteral(&t)) return false;
          tensors.push_back(std::move(t));
          break;
        }
        case AttrKind::kGraphs: {
          std::unique_ptr<Graph> g;
          if (!ParseSubgraph(&g, depth)) return false;
          graphs.push_back(std::move(g));
          break;
        }
        default:
          return FailHere("internal: bad list kind");
      }
      if (!ConsumePunct(",")) break;
    }
    if (!ExpectPunct("]", "to close the list")) return false;
    switch (*kind) {
      case AttrKind::kInts:
      case AttrKind::kFloats: {
        bool floats = *kind == AttrKind::kFloats;
        if (!floats && !explicit_kind)
          for (const FloatLit& l : numbers)
            if (l.kind != FloatLit::kNumber || !IsIntText(l.text)) floats = true;
        if (floats) {
          std::vector<float> v;
          for (const FloatLit& l : numbers) {
            float f;
            if (!ToFloat<float, uint32_t>(l, kir::kF32CanonicalNan, &f)) return false;
            v.push_back(f);
          }
          *out = Attribute::Floats(std::move(v));
        } else {
          std::vector<int64_t> v;
          for (const FloatLit& l : numbers) {
            if (l.kind != FloatLit::kNumber || !IsIntText(l.text)) return Fail(l, "expected an integer");
            int64_t x;
            if (!ParseDecimal(l.text, &x)) return Fail(l, absl::StrCat("integer ", l.text, " is out of range"));
            v.push_back(x);
          }
          *out = Attribute::Ints(std::move(v));
        }
        return true;
      }
      case AttrKind::kStrings: *out = Attribute::Strings(std::move(strings)); return true;
      case AttrKind::kTensors: *out = Attribute::Tensors(std::move(tensors)); return true;
      case AttrKind::kGraphs: *out = Attribute::Graphs(std::move(graphs)); return true;
      default: return false;
    }
  }

  bool ParseAttrs(std::map<std::string, Attribute>* attrs, int depth) {
    // At '{'.
    Advance();
    while (!tok_.IsPunct("}")) {
      Token at = tok_;
      std::string name;
      if (tok_.kind == Tok::kIdent || tok_.kind == Tok::kString) {
        name = tok_.text;
        Advance();
      } else {
        return Expected("an attribute name");
      }
      if (attrs->count(name)) return Fail(at, absl::StrCat("duplicate attribute '", name, "'"));
      if (!ExpectPunct("=", "after the attribute name")) return false;
      Attribute a;
      if (!ParseAttrValue(&a, depth + 1)) return false;
      attrs->emplace(std::move(name), std::move(a));
      if (!ConsumePunct(",")) break;
    }
    return ExpectPunct("}", "to close the attributes");
  }

  //===--- Graphs ---------------------------------------------------------===//

  // At `graph`: a nested graph whose parent is the current graph.
  bool ParseSubgraph(std::unique_ptr<Graph>* out, int depth) {
    if (depth > kMaxKirNesting) return FailHere("graphs are nested too deeply");
    auto g = std::make_unique<Graph>("", scopes_.empty() ? nullptr : scopes_.back().graph);
    if (!ParseGraphText(g.get(), depth + 1)) return false;
    *out = std::move(g);
    return true;
  }

  bool ParseGraphText(Graph* g, int depth) {
    if (!ExpectIdent("graph")) return false;
    if (tok_.kind != Tok::kGraphName) return Expected("a graph name (@name)");
    g->set_name(tok_.text);
    Advance();
    scopes_.push_back(Scope{g, {}});
    bool ok = ParseGraphRest(g, depth);
    scopes_.pop_back();
    return ok;
  }

  bool ParseGraphRest(Graph* g, int depth) {
    if (!ExpectPunct("(", "to start the graph inputs")) return false;
    while (!tok_.IsPunct(")")) {
      if (tok_.kind != Tok::kValue) return Expected("a graph input (%name: type)");
      Token at = tok_;
      if (!CheckNewName(at)) return false;
      Advance();
      Type t;
      Token type_at = tok_;
      if (ConsumePunct(":")) {
        type_at = tok_;
        if (!ParseType(&t, 0)) return false;
      }
      Tensor initial;
      if (ConsumePunct("=")) {
        // An initial value: `dense [...]` or `blob "HASH"` of the input's type.
        if (!StaticTensorType(t))
          return Fail(type_at, absl::StrCat("an input with an initial value needs a static tensor type, got ",
                                            PrintType(t)));
        Token data_at = tok_;
        if (!tok_.IsIdent("dense") && !tok_.IsIdent("blob"))
          return Expected("'dense' or 'blob' (the input's initial value)");
        bool missing;
        if (!ParseTensorData(t, &initial, &missing)) return false;
        if (missing)
          return Fail(data_at, absl::StrCat("the initial value of input ", PrintValueName(at.text),
                                            " is a blob that is not in the blob store"));
      }
      Value* in = g->AddInput(at.text, std::move(t));
      in->set_initial(std::move(initial));
      Define(in);
      if (!ConsumePunct(",")) break;
    }
    if (!ExpectPunct(")", "to close the graph inputs")) return false;
    if (!ExpectPunct("{", "to start the graph body")) return false;
    while (true) {
      if (tok_.IsPunct("}")) {
        Advance();
        return true;
      }
      if (tok_.IsIdent("return")) {
        Advance();
        if (!ParseReturn(g)) return false;
        if (!tok_.IsPunct("}")) return FailHere(absl::StrCat("expected '}' after return, found ", Describe(tok_)));
        Advance();
        return true;
      }
      if (!ParseStatement(g, depth)) return false;
    }
  }

  bool ParseReturn(Graph* g) {
    if (tok_.IsPunct("}")) return true;
    std::vector<Value*> outs;
    while (true) {
      if (tok_.kind != Tok::kValue) return Expected("a value to return");
      Value* v = Lookup(tok_.text);
      if (!v) return FailHere(absl::StrCat("use of undefined value ", PrintValueName(tok_.text)));
      outs.push_back(v);
      Advance();
      if (!ConsumePunct(",")) break;
    }
    for (Value* v : outs) g->AddOutput(v);
    return true;
  }

  bool ParseStatement(Graph* g, int depth) {
    if (tok_.kind == Tok::kEof) return FailHere("unexpected end of input: missing '}' to close the graph");
    std::vector<Token> outs;
    if (tok_.kind == Tok::kValue) {
      while (true) {
        if (tok_.kind != Tok::kValue) return Expected("a value name");
        if (!CheckNewName(tok_)) return false;
        for (const Token& o : outs)
          if (o.text == tok_.text) return FailHere(absl::StrCat("redefinition of value ", PrintValueName(tok_.text)));
        outs.push_back(tok_);
        Advance();
        if (!ConsumePunct(",")) break;
      }
      if (!ExpectPunct("=", "after the defined values")) return false;
      if (tok_.IsIdent("const")) {
        if (outs.size() != 1) return Fail(outs[1], "a constant defines exactly one value");
        Advance();
        return ParseConstant(g, outs[0]);
      }
    } else if (tok_.kind != Tok::kIdent && tok_.kind != Tok::kString) {
      return Expected("a statement (%value = ..., an op call, or return)");
    }
    return ParseNode(g, outs, depth);
  }

  bool ParseConstant(Graph* g, const Token& name) {
    Token type_at = tok_;
    Type type;
    if (!ParseType(&type, 0)) return false;
    if (tok_.IsIdent("elided")) {
      Advance();
      Define(g->AddElidedConstant(name.text, std::move(type)));
      return true;
    }
    if (!tok_.IsIdent("dense") && !tok_.IsIdent("blob")) return Expected("'dense', 'blob' or 'elided'");
    if (!StaticTensorType(type))
      return Fail(type_at, absl::StrCat("a constant with data needs a static tensor type, got ", PrintType(type)));
    Tensor t;
    bool missing;
    if (!ParseTensorData(type, &t, &missing)) return false;
    Define(missing ? g->AddElidedConstant(name.text, std::move(type)) : g->AddConstant(name.text, std::move(t)));
    return true;
  }

  // At `dense [...]` or `blob "HASH"`: the data of a tensor of static
  // `type`; `missing` when the blob is not in the store (`t` undefined).
  bool ParseTensorData(const Type& type, Tensor* t, bool* missing) {
    Token at = tok_;
    const bool dense = tok_.IsIdent("dense");
    Advance();
    *missing = false;
    if (dense) return ParseDense(at, type, t);
    uint64_t h;
    return ParseBlob(type, t, missing, &h);
  }

  bool ParseOpRef(std::string* op, std::string* domain) {
    Token at = tok_;
    if (tok_.kind == Tok::kString) {
      std::string first = tok_.text;
      Advance();
      if (ConsumePunct("::")) {
        *domain = std::move(first);
        if (!ExpectString(op, "the op name (a string) after '::'")) return false;
      } else {
        *op = std::move(first);
      }
      if (op->empty()) return Fail(at, "empty op name");
      return true;
    }
    if (tok_.kind != Tok::kIdent) return Expected("an op name");
    const std::string& word = tok_.text;
    if (kir::IsKeyword(word))
      return FailHere(absl::StrCat("'", word, "' is a keyword; write the op name as a string: \"", word, "\""));
    size_t dot = word.rfind('.');
    if (dot == std::string::npos) {
      *op = word;
    } else {
      *domain = word.substr(0, dot);
      *op = word.substr(dot + 1);
      if (op->empty() || domain->empty() || domain->back() == '.' ||
          domain->find("..") != std::string::npos)
        return FailHere(absl::StrCat("malformed op name '", word, "'"));
    }
    Advance();
    return true;
  }

  bool ParseNode(Graph* g, const std::vector<Token>& outs, int depth) {
    Token op_at = tok_;
    std::string op, domain;
    if (!ParseOpRef(&op, &domain)) return false;
    if (!ExpectPunct("(", "after the op name")) return false;
    std::vector<Value*> inputs;
    while (!tok_.IsPunct(")")) {
      if (tok_.IsIdent("_")) {
        inputs.push_back(nullptr);
      } else if (tok_.kind == Tok::kValue) {
        Value* v = Lookup(tok_.text);
        if (!v) return FailHere(absl::StrCat("use of undefined value ", PrintValueName(tok_.text)));
        inputs.push_back(v);
      } else {
        return Expected("an input (%value or _)");
      }
      Advance();
      if (!ConsumePunct(",")) break;
    }
    if (!ExpectPunct(")", "to close the inputs")) return false;
    std::map<std::string, Attribute> attrs;
    if (tok_.IsPunct("{") && !ParseAttrs(&attrs, depth)) return false;
    std::vector<Type> types;
    if (tok_.IsPunct(":")) {
      Token colon = tok_;
      Advance();
      while (true) {
        Type t;
        if (!ParseType(&t, 0)) return false;
        types.push_back(std::move(t));
        if (!ConsumePunct(",")) break;
      }
      if (types.size() != outs.size())
        return Fail(colon, absl::StrCat(types.size(), " output types for ", outs.size(), " outputs"));
    }
    std::string node_name;
    if (tok_.IsIdent("name")) {
      Advance();
      if (!ExpectString(&node_name, "the node name (a string) after 'name'")) return false;
    }
    std::vector<std::string> names;
    for (const Token& o : outs) names.push_back(o.text);
    Node* n = g->AddNode(op, std::move(inputs), std::move(names), domain);
    n->set_name(std::move(node_name));
    for (auto& [k, a] : attrs) n->SetAttr(k, std::move(a));
    for (size_t i = 0; i < types.size(); ++i) n->output(static_cast<int>(i))->set_type(std::move(types[i]));
    for (Value* o : n->outputs()) Define(o);
    return true;
  }

  Lexer lex_;
  std::string filename_;
  const BlobStore* blobs_;
  Token tok_;
  absl::Status status_;
  std::vector<Scope> scopes_;
};

}  // namespace

absl::StatusOr<Model> ParseModel(absl::string_view text, absl::string_view filename,
                                 const BlobStore* blobs) {
  Parser p(text, filename, blobs);
  Model m;
  if (!p.ParseModelText(&m)) return p.status();
  return m;
}

absl::StatusOr<std::unique_ptr<Graph>> ParseGraph(absl::string_view text, absl::string_view filename,
                                                  const BlobStore* blobs) {
  Parser p(text, filename, blobs);
  std::unique_ptr<Graph> g;
  if (!p.ParseSingleGraph(&g)) return p.status();
  return g;
}

absl::StatusOr<Type> ParseTypeText(absl::string_view text) {
  Parser p(text, "<type>", nullptr);
  Type t;
  if (!p.ParseTypeOnly(&t)) return p.status();
  return t;
}

}  // namespace kiln
