//===- progress_line.h - A progress line on a terminal ----------*- C++ -*-===//
//
// What a long run shows while it lasts: one line on stderr, rewritten in
// place at most four times a second and cleared when the run ends (or the
// line is destroyed), so that what the command prints after starts on a
// clean line. Nothing at all when stderr is not a terminal (a pipe, a log,
// a test).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <chrono>
#include <string>

namespace kiln::cli {

class ProgressLine {
 public:
  ProgressLine();
  ~ProgressLine() { Clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Whether the line shows anything (stderr is a terminal).
  bool active() const { return active_; }
  // Shows "kiln: TEXT", unless the last showing was under 250 ms ago.
  void Show(const std::string& text);
  // Removes the line if one is shown.
  void Clear();

 private:
  bool active_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace kiln::cli
