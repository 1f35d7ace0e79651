//===- generator.cc - Reference kernels: see op_table.h ------------------------===//
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"

namespace kiln {

void RegisterGeneratorOps(OpRegistry& r) {}

}  // namespace kiln
