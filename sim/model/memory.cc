//===- memory.cc - The device's global memory -----------------------------===//
#include "sim/model/memory.h"

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"

namespace kiln::sim {

absl::StatusOr<DevAddr> DeviceMemory::Alloc(int64_t bytes) {
  if (bytes < 0) return InvalidArgument("cannot allocate ", bytes, " bytes");
  if (used_ + bytes > capacity_)
    return absl::ResourceExhaustedError(
        absl::StrCat("device memory exhausted: ", bytes, " bytes requested, ", capacity_ - used_, " free"));
  DevAddr addr = next_;
  next_ += (static_cast<uint64_t>(bytes) + 1023) / 512 * 512;  // a gap between allocations
  blocks_[addr].assign(static_cast<size_t>(bytes), 0);
  used_ += bytes;
  return addr;
}

absl::Status DeviceMemory::Free(DevAddr addr) {
  auto it = blocks_.find(addr);
  if (it == blocks_.end()) return InvalidArgument(absl::StrCat("free of 0x", absl::Hex(addr), ": not an allocation"));
  used_ -= static_cast<int64_t>(it->second.size());
  blocks_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<uint8_t*> DeviceMemory::Resolve(DevAddr addr, int64_t bytes) {
  auto it = blocks_.upper_bound(addr);
  if (it != blocks_.begin()) {
    --it;
    uint64_t off = addr - it->first;
    if (bytes >= 0 && off + static_cast<uint64_t>(bytes) <= it->second.size()) return it->second.data() + off;
  }
  return absl::OutOfRangeError(absl::StrCat("bad memory access: [0x", absl::Hex(addr), ", +", bytes,
                                            ") is not inside one device allocation"));
}

}  // namespace kiln::sim
