//===- progress_line.cc - A progress line on a terminal -------------------===//
#include "tools/kiln/progress_line.h"

#include <unistd.h>

#include <iostream>

namespace kiln::cli {

ProgressLine::ProgressLine() : active_(isatty(STDERR_FILENO) != 0), last_(std::chrono::steady_clock::now()) {}

void ProgressLine::Show(const std::string& text) {
  if (!active_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(250)) return;
  last_ = now;
  shown_ = true;
  std::cerr << "\rkiln: " << text << "\033[K" << std::flush;
}

void ProgressLine::Clear() {
  if (shown_) std::cerr << "\r\033[K" << std::flush;
  shown_ = false;
}

}  // namespace kiln::cli
