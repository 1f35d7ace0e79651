//===- default_machine_text.h - The shipped default machine -----*- C++ -*-===//
//
// sim/machines/ascend910-like.textproto, byte for byte, embedded at build
// time (tools/embed_file.cmake): DefaultMachine() parses it, so the default
// machine's numbers live in that file alone.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "absl/strings/string_view.h"

namespace kiln::sim {

extern const absl::string_view kDefaultMachineText;

}  // namespace kiln::sim
