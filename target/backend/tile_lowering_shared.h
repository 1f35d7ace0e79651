//===- tile_lowering_shared.h - What the tile lowerings share -*- C++ -*-===//
//
// Internal to target/backend; tile_lowering.h is the public header. The
// GEMM, vector and window lowerings (tile_gemm_lowering.cc,
// tile_vector_lowering.cc, tile_window_lowering.cc) and LowerNode share:
// a node's kernel arguments and names, static shapes and scalar constants,
// the ONNX ops that are one elementwise step, shorthands for references and
// operands (tile_lowering.cc); the lookups of the cost model's figures
// (tile_cost_model.cc); the window problems LowerNode hands pools and
// depthwise convolutions to (tile_window_lowering.cc).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/ir/graph.h"
#include "target/backend/tile_ir.h"
#include "target/backend/tile_lowering.h"

namespace kiln::target::tile::internal {

//===----------------------------------------------------------------------===//
// Kernel arguments and building blocks (tile_lowering.cc)
//===----------------------------------------------------------------------===//

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }
int64_t Product(const std::vector<int64_t>& v);

// The dims of `v`, or an error when it has no static shape.
absl::StatusOr<std::vector<int64_t>> StaticShape(const Value* v);

// A constant of one element, as a scalar operand.
std::optional<double> ScalarConstant(const Value* v);

// Names of one kernel: loop variables and buffers the forms use are taken
// first; arguments get identifiers made from their values' names.
class NameTable {
 public:
  NameTable();
  std::string Unique(absl::string_view hint);

 private:
  std::set<std::string> used_;
};

// The kernel's name: the node's (else its first output's, else its op),
// made an identifier.
std::string KernelName(const Node& node);

// The kernel arguments of a node: its present inputs (`in`), its outputs
// (`out`), then the body constants a lowering reads (`const`). Inside a
// kiln.Fused body, the body's inputs and outputs stand for the node's.
class KernelArgs {
 public:
  static absl::StatusOr<KernelArgs> Of(const Node& node);

  // The nodes the kernel computes, in order.
  std::vector<const Node*> Nodes(const Node& node) const;
  // The values the kernel writes.
  std::vector<const Value*> Outputs(const Node& node) const;

  // The argument of `v` (a body constant becomes a `const` argument), or an error.
  absl::StatusOr<int> ArgOf(const Value* v);
  bool IsArg(const Value* v) const { return index_.count(v) != 0; }

  // Declares argument `i` with `view`, a shape of the same elements (a
  // reshape); an argument read through two different views has none.
  absl::Status View(int i, std::vector<int64_t> view);

  std::vector<TileArg> args;
  std::vector<const Value*> values;  // the value each argument stands for
  NameTable names;

 private:
  absl::Status Add(const Value* inner, const Value* outer, TileArg::Role role);

  const Graph* body_ = nullptr;
  std::map<const Value*, int> index_;
  std::set<int> viewed_;
};

inline TileRef Ref(const std::string& name, std::vector<Affine> start) { return TileRef{name, std::move(start)}; }
Affine Terms(std::vector<std::pair<std::string, int64_t>> terms, int64_t constant = 0);
inline Operand Of(TileRef r) { return Operand{std::move(r)}; }
inline Operand Scalar(double v) { return Operand{std::nullopt, v}; }

// The elementwise op of `n` as one step, if it is one (either form of kiln.Gelu included).
std::optional<EwOp> OneStepEwOp(const Node& n);

//===----------------------------------------------------------------------===//
// The cost model's lookups (tile_cost_model.cc)
//===----------------------------------------------------------------------===//

// The target's MMA shape for matrix inputs of `input`, or null.
const TileMma* MmaFor(const TileCostFigures& f, DType input);

// The capacity of scope `s` in bytes per compute unit (0: unlimited).
int64_t Capacity(const TileCostFigures& f, Scope s);

// The rows and columns of an epilogue operand's buffer for a gm x gn group tile.
std::pair<int64_t, int64_t> OperandTile(const EpilogueStep& e, const GemmTiling& t);

// The GEMM cost model of the persistent schedule
// (tile_persistent_cost_model.cc); EstimateGemm and ChooseGemmTiling hand
// a target of that schedule to these.
absl::Status EstimatePersistentGemm(const GemmProblem& p, const TileCostFigures& f, const GemmKernelTraits& traits,
                                    GemmTiling* t);
absl::StatusOr<GemmTiling> ChoosePersistentGemmTiling(const GemmProblem& p, const TileCostFigures& f,
                                                      const GemmKernelTraits& traits);

//===----------------------------------------------------------------------===//
// Window problems (tile_window_lowering.cc)
//===----------------------------------------------------------------------===//

// Whether a convolution GEMM is depthwise (one input and one output
// channel per group): a window kernel on the vector scope, not an MMA.
bool Depthwise(const GemmProblem& p);

// The window kernel: im2col tiles [bc, KH*KW, bp] of bc channels and bp
// output positions in vector buffers, optionally weighted (depthwise
// weights [bc, KH*KW, 1]), reduced over the window axis, then the epilogue.
struct WindowProblem {
  std::string name;
  std::vector<TileArg> args;
  int x_arg = 0, y_arg = 1, w_arg = -1;  // w: depthwise weights, declared [C, KH*KW, 1]
  Im2col im2col;                         // groups = C
  ReduceOp reduce = ReduceOp::kMax;
  double scale = 1;                      // applied after the reduction (AveragePool's 1/window)
  std::vector<EpilogueStep> epilogue;    // operands declared [n', c', 1, p'] (c' = C or 1, p' = P or 1)
  std::vector<const Value*> values;      // the value each argument stands for
};

absl::StatusOr<TileKernel> LowerWindow(const WindowProblem& w, const TileCostFigures& f);

// A depthwise convolution's GEMM problem as a window problem.
WindowProblem DepthwiseWindow(const GemmProblem& g);

// A MaxPool or AveragePool node as a window problem.
absl::StatusOr<WindowProblem> PoolWindow(const Node& node);

}  // namespace kiln::target::tile::internal
