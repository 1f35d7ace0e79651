//===- memory.cc - The device's global memory -----------------------------===//
#include "sim/model/memory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"

namespace kiln::sim {

absl::StatusOr<DevAddr> DeviceMemory::Alloc(int64_t bytes) {
  if (bytes < 0) return InvalidArgument("cannot allocate ", bytes, " bytes");
  if (bytes > capacity_ - used_)
    return absl::ResourceExhaustedError(
        absl::StrCat("device memory exhausted: ", bytes, " bytes requested, ", capacity_ - used_, " free"));
  // calloc maps fresh zero pages for a large block: nothing is touched
  // until a run writes or reads it.
  uint8_t* data = static_cast<uint8_t*>(std::calloc(static_cast<size_t>(std::max<int64_t>(bytes, 1)), 1));
  if (!data)
    return absl::ResourceExhaustedError(
        absl::StrCat("the host cannot hold ", bytes, " bytes of simulated device memory"));
  DevAddr addr = next_;
  next_ += (static_cast<uint64_t>(bytes) + 1023) / 512 * 512;  // a gap between allocations
  Block& b = blocks_[addr];
  b.data.reset(data);
  b.size = static_cast<uint64_t>(bytes);
  used_ += bytes;
  return addr;
}

absl::Status DeviceMemory::Free(DevAddr addr) {
  auto it = blocks_.find(addr);
  if (it == blocks_.end()) return InvalidArgument(absl::StrCat("free of 0x", absl::Hex(addr), ": not an allocation"));
  used_ -= static_cast<int64_t>(it->second.size);
  blocks_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<uint8_t*> DeviceMemory::Resolve(DevAddr addr, int64_t bytes) {
  auto it = blocks_.upper_bound(addr);
  if (it != blocks_.begin()) {
    --it;
    const uint64_t off = addr - it->first, size = it->second.size;
    if (bytes >= 0 && off <= size && static_cast<uint64_t>(bytes) <= size - off) return it->second.data.get() + off;
  }
  return absl::OutOfRangeError(absl::StrCat("bad memory access: [0x", absl::Hex(addr), ", +", bytes,
                                            ") is not inside one device allocation"));
}

}  // namespace kiln::sim
