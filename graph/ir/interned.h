//===- interned.h - Strings stored once for the life of the process -*- C++ -*-===//
//
// Names that many IR objects share (the names of symbolic dims, op domains)
// are interned: each distinct string is stored once and numbered in
// first-use order, and both its reference and its number stay valid until
// the process ends. Safe to call from several threads.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace kiln {

struct InternedString {
  int64_t id = 0;  // 0: the empty string
  const std::string* text = nullptr;
};

InternedString Intern(absl::string_view s);
// The text of an id that Intern returned.
const std::string& InternedText(int64_t id);

}  // namespace kiln
