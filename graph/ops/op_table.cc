//===- op_table.cc - The table of operator families -----------------------===//
#include "graph/ops/op_table.h"

#include "graph/ops/op_registry.h"

namespace kiln {

void RegisterAllOps(OpRegistry& r) {
  RegisterElementwiseOps(r);
  RegisterReductionOps(r);
  RegisterNormalizationOps(r);
  RegisterMatMulOps(r);
  RegisterConvOps(r);
  RegisterShapeOps(r);
  RegisterMovementOps(r);
  RegisterGeneratorOps(r);
  RegisterControlFlowOps(r);
  RegisterRecurrentOps(r);
  RegisterResampleOps(r);
  RegisterSelectionOps(r);
  RegisterQuantizationOps(r);
  RegisterTextOps(r);
  RegisterSignalOps(r);
  RegisterTrainingOps(r);
  RegisterCompositeOps(r);
  RegisterFusedOps(r);
  RegisterCollectiveOps(r);
}

}  // namespace kiln
