//===- infer_shapes.h - type and shape inference, Loop/Scan bodies to a fixpoint ---*- C++ -*-===//
#pragma once

#include <memory>

#include "graph/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateInferShapesPass();

}  // namespace kiln
