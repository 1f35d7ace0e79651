//===- dce.h - dead-code elimination ---*- C++ -*-===//
#pragma once

#include <memory>

#include "graph/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateDcePass();

}  // namespace kiln
