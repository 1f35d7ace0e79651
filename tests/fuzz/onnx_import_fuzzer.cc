// Fuzz target for the ONNX importer: any bytes must import or fail with a
// status, never crash, hang or leak. Built as a libFuzzer target with
// -DKILN_FUZZ=ON (clang), and always as a smoke driver (fuzz_smoke.cc) that
// runs deterministic mutations of a seed corpus under ctest.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "frontend/onnx/importer.h"
#include "graph/exec/executor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto model = kiln::onnx_import::ImportBytes(bytes, "fuzz.onnx", "");
  (void)model;
  return 0;
}
