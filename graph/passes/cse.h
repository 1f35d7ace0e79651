//===- cse.h - common-subexpression elimination ---*- C++ -*-===//
#pragma once

#include <memory>

#include "graph/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateCsePass();

}  // namespace kiln
