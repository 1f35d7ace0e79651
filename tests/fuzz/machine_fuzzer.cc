// Fuzz target for machine files: any text parses into a validated machine
// or fails with a status; a machine parsed describes a device the model can
// be built for (its HBM in bytes fits 64 bits).
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/machine/machine.h"
#include "sim/model/device.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto m = kiln::sim::ParseMachine(text, "fuzz.textproto");
  if (!m.ok()) return 0;
  auto device = kiln::sim::Device::Create(*m);
  (void)device;
  return 0;
}
