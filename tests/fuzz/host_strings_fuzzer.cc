// Fuzz target for the string tensors a package's host tasks exchange
// (runtime::DeserializeStrings): the first byte gives the element count
// (0-15), the rest is read as that many elements or fails with a status;
// what reads writes back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "runtime/host_ops.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int64_t n = data[0] % 16;
  auto t = kiln::runtime::DeserializeStrings({n}, data + 1, size - 1);
  if (!t.ok()) return 0;
  const std::string back = kiln::runtime::SerializeStrings(*t);
  if (back.size() != size - 1 || std::memcmp(back.data(), data + 1, back.size()) != 0) std::abort();
  return 0;
}
