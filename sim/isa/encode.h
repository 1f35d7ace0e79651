//===- encode.h - Programs to and from their protobuf form ------*- C++ -*-===//
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "sim/isa/isa.h"
#include "sim/isa/isa.pb.h"

namespace kiln::sim {

isa::Program ToProto(const Program& p);

// Decodes and verifies (VerifyProgram without buffer sizes).
absl::StatusOr<Program> FromProto(const isa::Program& p);

// The same through the wire format.
std::string SerializeProgram(const Program& p);
absl::StatusOr<Program> ParseProgram(const std::string& bytes);

}  // namespace kiln::sim
