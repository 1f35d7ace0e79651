//===- sweep_grid.h - The machines of a design-space sweep ------*- C++ -*-===//
//
// `kiln sweep --set FIELD=V1,V2,...`: each --set is an axis, a field of the
// machine description (sim/machine/machine.proto) by its path ("core.l1_kib",
// "chip.ai_cores", "energy.hbm_pj_per_byte") and the values it takes. The
// grid is every combination, the last axis varying fastest; each point's
// machine is the base with its values set, checked as a machine file is.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/machine/machine.pb.h"

namespace kiln::cli {

struct SweepAxis {
  std::string field;                // "core.l1_kib"
  std::vector<std::string> values;  // as given ("512", "1024")
};

// "core.l1_kib=512,1024": a field of the machine description and at least
// one value, each of the field's type.
absl::StatusOr<SweepAxis> ParseSweepAxis(const std::string& spec);

// Sets the field at `path` of `m` to `value` (an integer or a number, as
// the field is declared).
absl::Status SetMachineField(sim::Machine* m, const std::string& path, const std::string& value);

struct SweepPointSpec {
  std::vector<std::string> values;  // one per axis
  sim::Machine machine;
};
// Every point of the grid in order, each machine validated; at most
// `max_points` of them.
absl::StatusOr<std::vector<SweepPointSpec>> SweepGrid(const sim::Machine& base, const std::vector<SweepAxis>& axes,
                                                     int max_points);

}  // namespace kiln::cli
