//===- expand_composites.h - expand composite nodes back into ONNX ops ---*- C++ -*-===//
#pragma once

#include <memory>

#include "graph/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateExpandCompositesPass();

}  // namespace kiln
