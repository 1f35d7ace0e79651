//===- mapped_file.h - A file's bytes mapped into memory --------*- C++ -*-===//
//
// A large input (a ResNet-50 ONNX file or .kiln artifact is 100 MB) read
// without a copy: a regular file is mapped read-only, so its bytes are the
// page cache's own and nothing is allocated, zeroed or copied to read them.
// Anything else (a pipe, an empty file, a file that cannot be mapped) is
// read whole with ReadFileBytes. The bytes are valid while the object lives;
// a file truncated by another process while mapped faults its reader, as
// with any mapping.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/support/read_file.h"

namespace kiln {

class MappedFile {
 public:
  // kCopyOnWrite: the mapped bytes may be written, each written page
  // becoming the process's own copy (the file never changes): for bytes
  // that tensors borrow, which are writable as any tensor's are.
  enum Access { kReadOnly, kCopyOnWrite };
  static absl::StatusOr<MappedFile> Open(const std::string& path, Access access = kReadOnly) {
    MappedFile m;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      const int prot = access == kCopyOnWrite ? PROT_READ | PROT_WRITE : PROT_READ;
      void* p = mmap(nullptr, static_cast<size_t>(st.st_size), prot, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        ::close(fd);
        m.map_ = p;
        m.size_ = static_cast<size_t>(st.st_size);
        return m;
      }
    }
    if (fd >= 0) ::close(fd);
    absl::StatusOr<std::string> bytes = ReadFileBytes(path);
    if (!bytes.ok()) return bytes.status();
    m.copy_ = *std::move(bytes);
    return m;
  }

  MappedFile(MappedFile&& o) noexcept
      : map_(std::exchange(o.map_, nullptr)), size_(std::exchange(o.size_, 0)), copy_(std::move(o.copy_)) {}
  MappedFile& operator=(MappedFile&& o) noexcept {
    if (this != &o) {
      Unmap();
      map_ = std::exchange(o.map_, nullptr);
      size_ = std::exchange(o.size_, 0);
      copy_ = std::move(o.copy_);
    }
    return *this;
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() { Unmap(); }

  // Whether the bytes are the page cache's own (a mapping), not a copy.
  bool mapped() const { return map_ != nullptr; }

  absl::string_view bytes() const {
    return map_ ? absl::string_view(static_cast<const char*>(map_), size_) : absl::string_view(copy_);
  }

 private:
  MappedFile() = default;
  void Unmap() {
    if (map_) munmap(map_, size_);
    map_ = nullptr;
  }

  void* map_ = nullptr;
  size_t size_ = 0;
  std::string copy_;
};

}  // namespace kiln
