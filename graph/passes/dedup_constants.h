//===- dedup_constants.h - merge constants with identical dtype, shape and bytes ---*- C++ -*-===//
#pragma once

#include <memory>

#include "graph/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateDedupConstantsPass();

}  // namespace kiln
