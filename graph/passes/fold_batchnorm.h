//===- fold_batchnorm.h - fold BatchNormalization into the preceding Conv or Gemm ---*- C++ -*-===//
#pragma once

#include <memory>

#include "graph/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateFoldBatchNormPass();

}  // namespace kiln
