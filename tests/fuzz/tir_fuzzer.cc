// Fuzz target for the tile IR's text form: any text parses into a kernel or
// fails with a status; a kernel parsed prints to text that parses and
// prints the same again, and verifying it (against an NPU-like target's
// scopes) answers with a status.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "target/backend/tile_ir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::target::tile;
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto kernel = Parse(text);
  if (!kernel.ok()) return 0;
  const std::string once = Print(*kernel);
  auto again = Parse(once);
  if (!again.ok() || Print(*again) != once) std::abort();
  TileTarget target;
  target.name = "fuzz";
  target.capacity = {{Scope::kStage, 1 << 20}, {Scope::kOperandA, 64 << 10}, {Scope::kOperandB, 64 << 10},
                     {Scope::kAccumulator, 256 << 10}, {Scope::kVector, 256 << 10}};
  target.mma = {{16, 16, 16, kiln::DType::kF16, kiln::DType::kF32}};
  (void)Verify(*kernel, target);
  return 0;
}
