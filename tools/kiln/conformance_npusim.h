//===- conformance_npusim.h - `kiln conformance --target=npusim` -*- C++ -*-===//
//
// Each ONNX test model goes the way `kiln compile --target=npusim` and
// `kiln run` take it: the optimizer's pipeline (--passes), the npusim code
// generator, then the runtime on the SystemC model. Every compiled model
// appends its task count per engine to a tally file (the tests run in forked
// children), which the command sums up before the closing summary line.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "tools/conformance/conformance.h"

namespace kiln::cli {

ModelRunner MakeNpusimRunner(const std::string& tally_path);

// "tasks per engine over N compiled models: cube A, vector B, ..." from the
// tally file.
std::string SummarizeEngineTally(const std::string& tally_path);

}  // namespace kiln::cli
