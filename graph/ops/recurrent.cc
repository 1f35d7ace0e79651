//===- recurrent.cc - Reference kernels: see op_table.h ------------------------===//
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"

namespace kiln {

void RegisterRecurrentOps(OpRegistry& r) {}

}  // namespace kiln
