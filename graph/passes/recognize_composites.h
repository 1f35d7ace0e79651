//===- recognize_composites.h - recognize LayerNorm, GELU, Softmax and attention patterns ---*- C++ -*-===//
#pragma once

#include <memory>

#include "graph/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> CreateRecognizeCompositesPass();

}  // namespace kiln
