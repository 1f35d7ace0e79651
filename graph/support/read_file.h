//===- read_file.h - A file's bytes in one read -----------------*- C++ -*-===//
//
// Every reader of kiln (.kir text and its blobs, .npy arrays, machine
// files, programs) takes a file's bytes through ReadFileBytes: one
// allocation of the file's size and one read, where a stream copy would
// grow a buffer and copy it out again. The largest inputs, ONNX models and
// .kiln artifacts (a ResNet-50 is 100 MB), are mapped instead
// (mapped_file.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <sys/stat.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace kiln {

// The bytes of the file at `path`; "PATH: cannot open file" where it cannot
// be opened or read (a directory among them). Pipes and other files without
// a size are read to their end.
inline absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  auto cannot = [&] { return absl::NotFoundError(absl::StrCat(path, ": cannot open file")); };
  if (!f) return cannot();
  struct stat st;
  if (fstat(fileno(f.get()), &st) != 0 || S_ISDIR(st.st_mode)) return cannot();
  std::string out;
  size_t have = 0;
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    out.resize(static_cast<size_t>(st.st_size));
    have = std::fread(out.data(), 1, out.size(), f.get());
    if (have < out.size()) {
      if (std::ferror(f.get())) return cannot();
      out.resize(have);  // it shrank while being read
      return out;
    }
  }
  // Past the size it had (or a file without one): read on to the end.
  char chunk[1 << 16];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f.get())) > 0;) out.append(chunk, n);
  if (std::ferror(f.get())) return cannot();
  return out;
}

}  // namespace kiln
