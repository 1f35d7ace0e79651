//===- cube_figures.h - A machine's figures as the cube kernels tile by -*- C++ -*-===//
//
// The cube kernels take their tiling from the shared backend's GEMM cost
// model (target/backend/tile_persistent_cost_model.cc) and read the
// machine's figures as it does: tile::FiguresOf the target's description of
// the machine being compiled for (npusim_description.h). The model's bound
// names the pipe of the AI core it stands for.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

#include "sim/machine/machine.pb.h"
#include "target/backend/tile_lowering.h"

namespace kiln::target::npusim {

// The figures of `m` (scope capacities, bandwidths, the cube's rates and
// the pipes' latencies).
tile::TileCostFigures CubeFiguresOf(const sim::Machine& m);

// Bytes of scope `s` per AI core (L1: stage, L0A/L0B: operands, L0C:
// accumulator, UB: vector).
int64_t ScopeBytes(const tile::TileCostFigures& f, tile::Scope s);

// The AI core's pipe a tiling's bound stands for ("HBM", "cube", "MTE2
// latency", "FIXP", "MTE1").
std::string PipeOfBound(const std::string& bound);

}  // namespace kiln::target::npusim
