// Fuzz target for the .kir parser: any text parses into a model or fails
// with a status; a model parsed prints to text that parses and prints the
// same again (constants inline, so no blob store is needed).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto model = kiln::ParseModel(text, "fuzz.kir");
  if (!model.ok()) return 0;
  kiln::PrintOptions options;
  options.inline_all_constants = true;
  const std::string once = kiln::PrintModel(*model, options);
  auto again = kiln::ParseModel(once, "fuzz.kir");
  if (!again.ok() || kiln::PrintModel(*again, options) != once) std::abort();
  return 0;
}
