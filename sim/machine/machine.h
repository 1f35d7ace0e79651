//===- machine.h - Machine descriptions of the simulated NPU ----*- C++ -*-===//
//
// A machine description is a `kiln.sim.Machine` message (machine.proto) in
// protobuf text format. Loading one fills every field the file leaves out
// with its documented default (the ascend910-like figures), then validates
// it: unknown fields, negative sizes and zero clocks or bandwidths are
// errors that name the field. The model only ever sees a complete,
// validated Machine.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "sim/machine/machine.pb.h"

namespace kiln::sim {

// The defaults of machine.proto, every field set.
Machine DefaultMachine();

// Parses a text-format description; `source` names it in errors.
absl::StatusOr<Machine> ParseMachine(const std::string& text, const std::string& source);

// Reads and parses a file.
absl::StatusOr<Machine> LoadMachine(const std::string& path);

// Checks a complete description (every field set); names the first bad field.
absl::Status ValidateMachine(const Machine& m);

// Derived figures the model and the reports use.
double HbmBytesPerCycle(const Machine& m);       // chip HBM bandwidth in bytes per core cycle
double HostLinkBytesPerCycle(const Machine& m);  // PCIe bandwidth per direction in bytes per core cycle
double UsToCycles(const Machine& m, double us);  // microseconds to core cycles

}  // namespace kiln::sim
