//===- memory.h - The device's global memory (HBM) --------------*- C++ -*-===//
//
// Allocations live in a sparse 64-bit device address space: each is its own
// host buffer, placed at a 512-byte-aligned device address; unmapped
// addresses never alias. Capacity is the machine's HBM size. A buffer is
// zeroed lazily (calloc: the host maps pages as a run touches them), so a
// large declared allocation costs nothing until used, and one the host
// cannot make is an error, never an abort.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>

#include "absl/status/statusor.h"

namespace kiln::sim {

using DevAddr = uint64_t;

class DeviceMemory {
 public:
  explicit DeviceMemory(int64_t capacity_bytes) : capacity_(capacity_bytes) {}

  absl::StatusOr<DevAddr> Alloc(int64_t bytes);
  absl::Status Free(DevAddr addr);

  // The host pointer of [addr, addr + bytes), which must lie in one allocation.
  absl::StatusOr<uint8_t*> Resolve(DevAddr addr, int64_t bytes);

  int64_t used() const { return used_; }

 private:
  int64_t capacity_;
  int64_t used_ = 0;
  DevAddr next_ = 0x100000000ull;  // the first allocation's address
  struct FreeHost {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  struct Block {
    std::unique_ptr<uint8_t, FreeHost> data;
    uint64_t size = 0;
  };
  std::map<DevAddr, Block> blocks_;
};

}  // namespace kiln::sim
