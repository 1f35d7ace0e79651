//===- cube_figures.cc - A machine's figures as the cube kernels tile by -===//
#include "target/npusim/kernels/cube_figures.h"

#include "target/npusim/npusim_description.h"

namespace kiln::target::npusim {

tile::TileCostFigures CubeFiguresOf(const sim::Machine& m) { return tile::FiguresOf(DescriptionOf(m)); }

int64_t ScopeBytes(const tile::TileCostFigures& f, tile::Scope s) {
  auto it = f.target.capacity.find(s);
  return it == f.target.capacity.end() ? 0 : it->second;
}

std::string PipeOfBound(const std::string& bound) {
  if (bound == "global memory") return "HBM";
  if (bound == "matrix") return "cube";
  if (bound == "stage latency") return "MTE2 latency";
  if (bound == "write-out") return "FIXP";
  if (bound == "operand loads") return "MTE1";
  return bound;
}

}  // namespace kiln::target::npusim
