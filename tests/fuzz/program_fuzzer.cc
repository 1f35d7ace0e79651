// Fuzz target for programs in their artifact form (sim/isa/isa.proto, the
// instructions packed as integers): any bytes decode (and verify) or fail
// with a status; what decodes encodes to a program that decodes to the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sim/isa/encode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto program = kiln::sim::ParseProgram(std::string(reinterpret_cast<const char*>(data), size));
  if (!program.ok()) return 0;
  auto again = kiln::sim::ParseProgram(kiln::sim::SerializeProgram(*program));
  if (!again.ok() || !(*again == *program)) std::abort();
  return 0;
}
