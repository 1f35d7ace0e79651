//===- tile_parser.cc - The tile IR's text form, read ---------------------===//
//
// The parser reads the grammar the printer writes from a token stream
// (`//` starts a comment to the end of the line) and reports the first
// error with its line number.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_ir.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "target/backend/tile_text.h"

namespace kiln::target::tile {

using internal::kLoopNames;
using internal::kRoleNames;
using internal::ValueIn;

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
    if (word == "causal") {
      auto s = std::make_unique<Stmt>(Stmt::Kind::kCausal);
      KILN_ASSIGN_OR_RETURN(s->dst, Ref());
      for (int i = 0; i < 2; ++i) {
        KILN_RETURN_IF_ERROR(ExpectPunct(","));
        KILN_ASSIGN_OR_RETURN(Affine a, AffineExpr());
        s->origin.push_back(std::move(a));
      }
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

}  // namespace kiln::target::tile
