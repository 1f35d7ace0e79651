//===- memory_plan.h - Liveness-based placement of device buffers -*- C++ -*-===//
//
// Places every buffer of a compiled model in one device address range so
// that two buffers live at the same time never overlap, reusing the space of
// buffers whose last use has passed. Targets describe each buffer by its
// size and the first and last task that touch it; the plan gives offsets
// and the peak, beside the naive sum of all sizes.
//
// Buffers are placed largest first, each at the lowest aligned offset that
// clears every placed buffer whose lifetime it shares ("greedy by size"):
// deterministic, and within a few percent of the liveness lower bound on
// the graphs of DNNs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::target {

struct BufferLife {
  int64_t bytes = 0;
  int first = 0, last = 0;  // tasks (inclusive) between which the buffer holds a value
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // parallel to the buffers
  int64_t peak_bytes = 0;        // end of the highest buffer
  int64_t naive_bytes = 0;       // sum of the (aligned) sizes
  int64_t live_bound = 0;        // the largest total of buffers live at one task: no plan does better
};

MemoryPlan PlanMemory(const std::vector<BufferLife>& buffers, int64_t alignment);

}  // namespace kiln::target
