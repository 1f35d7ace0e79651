// Fuzz target for the .kasm assembler: any text assembles (and verifies) or
// fails with a status; what assembles disassembles to text that assembles
// to the same file and prints the same again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "sim/isa/asm.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto file = kiln::sim::Assemble(text, "fuzz.kasm");
  if (!file.ok()) return 0;
  const std::string once = kiln::sim::Disassemble(*file);
  auto again = kiln::sim::Assemble(once, "fuzz.kasm");
  if (!again.ok() || kiln::sim::Disassemble(*again) != once) std::abort();
  return 0;
}
