// Fuzz target for the .npy reader: any bytes read as a tensor or fail with
// a status; a tensor read writes back to bytes that read as the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "graph/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto t = kiln::ParseNpy(bytes);
  if (!t.ok()) return 0;
  auto written = kiln::SerializeNpy(*t);
  if (!written.ok()) return 0;  // a dtype .npy has no writer for
  auto back = kiln::ParseNpy(*written);
  if (!back.ok() || back->dims() != t->dims() || back->dtype() != t->dtype()) std::abort();
  auto again = kiln::SerializeNpy(*back);
  if (!again.ok() || *again != *written) std::abort();
  return 0;
}
