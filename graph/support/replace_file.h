//===- replace_file.h - Writing a file that a reader may have mapped -*- C++ -*-===//
//
// kiln maps the large files it reads (.kiln artifacts, .npy inputs:
// mapped_file.h) and keeps the mappings while it uses their bytes. A file
// truncated and rewritten in place under a mapping faults its reader, so a
// regular file is written beside its path and renamed over it when it is
// complete: a process that has the old version mapped keeps reading it.
// Other paths (a pipe, /dev/stdout) are written in place.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln {

// Writes `path` through `write(fd)` (false: the write failed); the error
// is "cannot write 'PATH'".
inline absl::Status WriteReplacing(const std::string& path, const std::function<bool(int fd)>& write) {
  const absl::Status cannot = absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "'"));
  struct stat st;
  const bool in_place = ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  const std::string target = in_place ? path : absl::StrCat(path, ".tmp", ::getpid());
  const int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return cannot;
  bool ok = write(fd);
  ok = (::close(fd) == 0) && ok;
  if (!in_place) {
    ok = ok && std::rename(target.c_str(), path.c_str()) == 0;
    if (!ok) std::remove(target.c_str());
  }
  return ok ? absl::OkStatus() : cannot;
}

// Writes all of `n` bytes at `p` to `fd`; false on an error.
inline bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace kiln
