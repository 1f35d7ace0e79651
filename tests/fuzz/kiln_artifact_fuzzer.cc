// Fuzz target for .kiln artifacts: the bytes are a whole .kiln file or an
// Artifact message, framed as a file with the magic, with a valid checksum
// either way (so mutations reach the loader, not only the checksum), read,
// and loaded by the npusim target when it is one; either step fails with a
// status or the artifact loads.
// Nothing runs: loading alone verifies every program, every buffer and
// every declared size, and allocates the device memory.
#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "target/artifact/artifact_io.h"
#include "target/npusim/npusim_executable.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A whole .kiln file (a seed, and what mutations make of one) keeps its
  // layout, message and constants' section, with its checksum made valid
  // again; other bytes stand for the message alone.
  const bool whole = size >= 12 && std::memcmp(data, "KILNART\n", 8) == 0;
  if (whole) {
    data += 8;
    size -= 12;
  }
  static const std::string path = "/tmp/kiln_artifact_fuzz_" + std::to_string(getpid()) + ".kiln";
  const uint32_t crc = static_cast<uint32_t>(crc32(0L, data, static_cast<uInt>(size)));
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write("KILNART\n", 8);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    for (int i = 0; i < 4; ++i) f.put(static_cast<char>((crc >> (8 * i)) & 0xff));
  }
  auto artifact = kiln::artifact::ReadArtifact(path);
  if (artifact.ok() && artifact->has_npusim()) {
    auto loaded = kiln::target::LoadNpusimArtifact(path);
    (void)loaded;
  }
  return 0;
}
