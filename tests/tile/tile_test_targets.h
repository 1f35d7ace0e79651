//===- tile_test_targets.h - Target descriptions the tile tests use -*- C++ -*-===//
//
// An Ascend-like AI core's figures as a description (32 units; L1 1 MiB,
// L0A/L0B 64 KiB, L0C 256 KiB, UB 256 KiB; MTE2 256, MTE1 512 and FIXP 256
// bytes per cycle; HBM 1.2 TB/s at 1 GHz; a 16x16x16 fp16 MMA at 4096 MACs
// per cycle), with the default (waves) tiling figures.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "target/api/target.h"

namespace kiln::target::tile {

inline TargetDescription NpusimLike() {
  TargetDescription d;
  d.name = "npusim";
  d.memory = {{"GM", int64_t{32} << 30, 256, "global"}, {"L1", 1 << 20, 256, "stage"},
              {"L0A", 64 << 10, 512, "operand_a"},       {"L0B", 64 << 10, 512, "operand_b"},
              {"L0C", 256 << 10, 256, "accumulator"},    {"UB", 256 << 10, 256, "vector"}};
  d.mma = {{16, 16, 16, DType::kF16, DType::kF32, 4096}, {16, 16, 8, DType::kF32, DType::kF32, 1024}};
  d.compute_units = 32;
  d.clock_ghz = 1.0;
  d.global_bytes_per_second = 1.2e12;
  d.vector_bytes_per_cycle = 256;
  return d;
}

}  // namespace kiln::target::tile
