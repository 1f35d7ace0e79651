//===- gears.h - static-shape gears: one static variant per gear behind a dispatch ---*- C++ -*-===//
#pragma once

#include <memory>

#include "graph/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateGearsPass();

}  // namespace kiln
