//===- simplify.h - algebraic simplification ---*- C++ -*-===//
#pragma once

#include <memory>

#include "graph/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateSimplifyPass();

}  // namespace kiln
