//===- tile_ir.cc - The tile IR: names of its parts, builders -------------===//
//
// The names of scopes, ops and argument roles, read both ways; the builders
// of statements; the renaming of a kernel's values to canonical names. The
// text form is written in tile_printer.cc and read in tile_parser.cc;
// tile_verifier.cc checks a kernel against the rules of docs/tile-ir.md.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_ir.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "target/backend/tile_text.h"

namespace kiln::target::tile {

using internal::kRoleNames;
using internal::NameIn;
using internal::ValueIn;

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

std::unique_ptr<Stmt> MakeCausal(TileRef dst, Affine row, Affine col) {
  auto s = std::make_unique<Stmt>(Stmt::Kind::kCausal);
  s->dst = std::move(dst);
  s->origin = {std::move(row), std::move(col)};
  return s;
}

TileRef Whole(std::string name, int rank) {
  return TileRef{std::move(name), std::vector<Affine>(static_cast<size_t>(std::max(rank, 0)))};
}

}  // namespace kiln::target::tile
