//===- csv_field.h - One field of a CSV record --------------------*- C++ -*-===//
//
// A field as RFC 4180 writes it: as it is, or quoted (quotes doubled) when
// it holds a comma, a quote or a line break. What every CSV kiln writes
// (tasks reports, sweeps) quotes its text fields with.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

namespace kiln {

inline std::string CsvField(const std::string& f) {
  if (f.find_first_of(",\"\n\r") == std::string::npos) return f;
  std::string q = "\"";
  for (char c : f) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace kiln
