//===- fold_constants.h - evaluate nodes whose inputs are constant or whose output depends only on static shapes ---*- C++ -*-===//
#pragma once

#include <memory>

#include "graph/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateFoldConstantsPass();

}  // namespace kiln
