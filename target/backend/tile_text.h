//===- tile_text.h - Names and statement lines of the tile IR's text form -*- C++ -*-===//
//
// What tile_ir.cc, the printer, the parser and the verifier share of the
// text form: the names of argument roles and loop kinds, lookups in tables
// of (value, name) pairs, and the Printer of references and statement
// lines (the verifier quotes the statement it rejects with it). Internal to
// target/backend; tile_ir.h is the public header.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "target/backend/tile_ir.h"

namespace kiln::target::tile::internal {

inline constexpr std::pair<TileArg::Role, absl::string_view> kRoleNames[] = {
    {TileArg::Role::kIn, "in"}, {TileArg::Role::kOut, "out"},
    {TileArg::Role::kConst, "const"}, {TileArg::Role::kWorkspace, "workspace"}};

inline constexpr std::pair<Stmt::LoopKind, absl::string_view> kLoopNames[] = {
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

// Whether every start of `r` is the constant 0 (a local tile at the origin).
bool AllZero(const TileRef& r);

// References and statements as the text form writes them (tile_printer.cc);
// given a kernel, references to its arguments keep their starts.
class Printer {
 public:
  Printer() = default;  // no kernel: every reference is local
  explicit Printer(const TileKernel& k);

  // A reference: bare `%name` for a local tile at the origin, else with its starts.
  std::string Ref(const TileRef& r) const;

  std::string Operand(const tile::Operand& o) const;

  static std::string Im2colText(const Im2col& c);

  // One statement's line (a loop's header ends with " {").
  std::string Line(const Stmt& s) const;

  void Block(const tile::Block& b, int depth, std::string* out) const;

 private:
  std::set<std::string> args_;
};

}  // namespace kiln::target::tile::internal
