//===- l2_prefetch_plan.h - Weights read into the L2 ahead of use -*- C++ -*-===//
//
// A kernel that streams its weights from HBM (a decode step's GEMVs: one
// row of activations against a whole weight matrix) leaves HBM idle while
// the small kernels between such GEMVs run, and runs its own loads at HBM's
// latency. The plan reads each such kernel's constants into the chip's L2
// ahead of it, on a stream of prefetches of its own, so that the fills use
// the bandwidth those kernels leave and the kernel's loads hit the L2
// (Ascend's weight prefetch: torch_npu.npu_prefetch on a stream of its own,
// vLLM Ascend's weight_prefetch_config).
//
// Which kernels: matrix kernels on the cube (they read every byte of their
// weights, where a Gather reads a row) whose constants alone, read at HBM's
// rate, take at least kStreamingShare of their estimated cycles (bound by
// streaming weights, not by computing), of at least kMinPrefetchBytes; and
// every kernel whose constants are small (at most kSmallPrefetchBytes: a
// bias, a LayerNorm's scale and shift), which would otherwise pay HBM's
// latency for them. When: as early as the L2 holds, with the prefetch,
// every buffer the tasks from its start up to the kernel touch (kL2Share
// of the L2, so the lines are still there when the kernel reads them), and
// no earlier than the prefetch before it (they are issued in order). A
// weight larger than half of that is read in part, its first bytes. None
// where the tasks from the start leave HBM idle (by their estimates, less
// their own constants' time at HBM's rate) for less than kCoveredShare of
// the fill's time: the kernel would wait for the prefetch's fills rather
// than make its own.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "sim/machine/machine.pb.h"
#include "target/artifact/artifact.pb.h"

namespace kiln::target::npusim {

inline constexpr int64_t kMinPrefetchBytes = 256 << 10;
inline constexpr double kStreamingShare = 0.3;
inline constexpr int64_t kSmallPrefetchBytes = 64 << 10;
inline constexpr double kL2Share = 0.75;
inline constexpr double kCoveredShare = 0.25;

// Adds module.prefetches for its tasks (none on a machine without an L2).
void PlanL2Prefetches(artifact::NpusimModule& module, const sim::Machine& machine);

}  // namespace kiln::target::npusim
