//===- roofline.h - Each kernel of a run under the machine's roofs -*- C++ -*-===//
//
// A kernel's work is its cube FLOPs (two per multiply-accumulate) plus the
// elements its vector instructions computed; its traffic is the bytes it
// moved through HBM; its intensity is work per byte. The machine's roofs
// bound the time any kernel with that work and traffic can take on the
// whole chip:
//
//   compute bound = max(cube cycles, vector cycles) / AI cores
//   memory bound  = HBM bytes / the chip's HBM bytes per cycle
//
// where the cube and vector cycles are what its instructions need at the
// units' peak rates for their dtypes (KernelStats::cube_cycles,
// vector_cycles). The roof at its intensity is work / max(the two bounds),
// and its efficiency is max(the two bounds) / the cycles it took: at most 1,
// since the model never runs a unit past its peak or HBM past its
// bandwidth. The limit names the larger bound ("cube", "vector", "HBM").
//
//===----------------------------------------------------------------------===//
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "sim/machine/machine.pb.h"
#include "sim/model/device.h"

namespace kiln::sim {

struct RooflinePoint {
  std::string name;
  int cores_used = 0;
  double cycles = 0;             // end - start
  double cube_flops = 0;         // 2 x multiply-accumulates
  double vector_elements = 0;
  double hbm_bytes = 0;          // read + written
  // Cycles on the whole chip: the cube's and the vector unit's work at
  // their peak rates on every core, and the HBM traffic at its bandwidth.
  double cube_bound = 0, vector_bound = 0;
  double memory_bound = 0;
  double compute_bound() const { return cube_bound > vector_bound ? cube_bound : vector_bound; }
  double work() const { return cube_flops + vector_elements; }
  // Work per HBM byte: infinite for work done without HBM traffic (its
  // data all in the L2), 0 for none.
  double intensity() const {
    return hbm_bytes > 0 ? work() / hbm_bytes : work() > 0 ? std::numeric_limits<double>::infinity() : 0;
  }
  // Work per cycle, achieved and allowed by the roofs.
  double attained() const { return cycles > 0 ? work() / cycles : 0; }
  double roof() const;
  // max(compute_bound(), memory_bound) / cycles.
  double efficiency() const;
  // The largest bound: "cube", "vector", "HBM" ("none": no work, no traffic).
  const char* limit() const;
};

// The chip's roofs, in work per cycle (and bytes per cycle for HBM).
struct Roofs {
  int cores = 0;
  double clock_mhz = 0;
  double hbm_bytes_per_cycle = 0;
  double cube_fp16 = 0, cube_fp32 = 0, cube_int8 = 0;  // FLOPs per cycle
  double vector_fp16 = 0, vector_fp32 = 0;             // elements per cycle
};

Roofs MachineRoofs(const Machine& m);
// One point per kernel of `s`, in launch order, named after the kernel.
std::vector<RooflinePoint> Roofline(const RunStats& s, const Machine& m);

// A table of the points with the roofs above it.
std::string RooflineText(const std::vector<RooflinePoint>& points, const Roofs& roofs);
std::string RooflineCsv(const std::vector<RooflinePoint>& points);
// The log-log roofline chart as a standalone SVG document: the HBM slope,
// the compute roofs, and one circle per kernel that did work and moved
// bytes (its area in proportion to its cycles, its colour its limit, its
// numbers in a tooltip). Deterministic for the same points.
std::string RooflineSvg(const std::vector<RooflinePoint>& points, const Roofs& roofs, const std::string& title);

}  // namespace kiln::sim
