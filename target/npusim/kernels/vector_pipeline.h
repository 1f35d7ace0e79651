//===- vector_pipeline.h - Tiled, double-buffered vector kernel skeletons -*- C++ -*-===//
//
// The skeletons every vector kernel is built on. Work is split into equal
// contiguous shares per block (the last block takes the remainder), and each
// block walks its share tile by tile through two UB slots (ping-pong):
//
//   MTE2   wait V->MTE2 (slot free)   copy_gm_ub ins -> slot   set MTE2->V
//   VECTOR wait MTE2->V, wait MTE3->V (output slot free)   compute   set V->MTE2, set V->MTE3
//   MTE3   wait V->MTE3   copy_ub_gm slot -> out   set MTE3->V
//
// Flags count, so one event id per direction carries both slots: the
// prologue grants two credits each way and the epilogue takes back what is
// left. Every wait depends only on sets issued before it in program order,
// so full pipe queues never deadlock the scalar unit. Tile sizes are static
// (a loop of full tiles and one tail tile), so DMA lengths and vector masks
// are exact and no byte outside a tensor is read or written.
//
// Flat kernels see the output as one run of elements (every input either
// covers the whole output or is one broadcast element); row kernels see it
// as rows of `cols` elements, each row padded to 32 bytes in UB, and emit
// their compute once per row with a runtime row loop.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/kernel.h"
#include "target/npusim/kernels/vector_kasm.h"

namespace kiln::target::npusim::vec {

// The program argument names of a node's tensors: "in0", "in1", ... (absent
// inputs keep their index), "out0", ...
std::string InArg(int i);
std::string OutArg(int i);
// Adds the .arg lines of the node's present inputs and outputs; an error
// when a tensor is not static or has a dtype AI cores do not hold.
absl::Status AddNodeArgs(Kasm& k, const Node& node);
// The ISA dtype of a value (kNone when the AI cores do not hold it).
sim::DType IsaOf(const Value* v);
// The dtype vector arithmetic runs in for data of dtype `t`: f32 for every
// float type (f16 and bf16 convert on the way in and out), s32 for s32.
sim::DType ComputeOf(sim::DType t);

//===--- Pieces shared by the skeletons and the custom kernels ---------------===//

int64_t UbBytes(const sim::Machine& m);
// The most blocks a kernel launches: one per core, or the request's limit.
int64_t Cores(const KernelRequest& req);
// Splits `total` units over at most `cores` blocks, each taking at least
// `min_share` units (a multiple of `grain`): (blocks, units per block).
std::pair<int64_t, int64_t> SplitBlocks(int64_t total, int64_t cores, int64_t min_share, int64_t grain);
// The two-credit handshake of the ping-pong slots (V->MTE2 0, MTE3->V 1).
void Prologue(Kasm& k);
void Epilogue(Kasm& k);
// `count` units as a loop of full tiles of `tile` units and a tail tile;
// emit_tile(n) emits one tile, then `slot` flips between 0 and `slot_size`.
void TileLoop(Kasm& k, int64_t count, int64_t tile, int slot, int slot_size,
              const std::function<void(int64_t)>& emit_tile);
// Per-block bodies: blocks 0..blocks-2 run body(per), the last body(last).
void PerBlock(Kasm& k, int blk, int64_t blocks, int64_t per, int64_t last, const std::function<void(int64_t)>& body);

// dst[0] = reduction ("add", "max", "min") of the n elements at src. The
// scratch row (n elements, rounded up to whole repeats) is clobbered; src is
// not. `slot` is a spare 32-byte-aligned element.
void RowReduce(Kasm& k, const std::string& kind, sim::DType ct, Ub dst, Ub src, int64_t n, Ub scratch, Ub slot);

//===--- Flat kernels -------------------------------------------------------===//

struct FlatTensor {
  std::string arg;
  sim::DType dt = sim::DType::kF32;
  // > 0: the input repeats every `period` output elements (an outer
  // broadcast, [1,1,S,S] against [B,H,S,S]): element e reads e % period.
  int64_t period = 0;
};

// What the body of a flat kernel works on, all in the compute dtype `ct`.
struct FlatOperands {
  sim::DType ct = sim::DType::kF32;
  std::vector<VArg> ins;      // the tile of each input
  std::vector<VArg> scalars;  // a broadcast block per scalar input
  VArg out;                   // where the result goes
  std::vector<VArg> more_outs;  // where FlatSpec::more_outs go
  std::vector<Ub> temps;      // scratch buffers of a tile each
};

struct FlatSpec {
  std::string name;
  int64_t numel = 0;
  std::vector<FlatTensor> ins;      // read over the same element range as the output
  std::vector<FlatTensor> scalars;  // one element each, loaded once per block
  FlatTensor out;
  // Further outputs over the same elements (a fused group's extra results);
  // the body writes them in the compute dtype as it writes `out`.
  std::vector<FlatTensor> more_outs;
  // .arg lines after the node's inputs and outputs (a fused body's constants).
  std::vector<std::string> more_args;
  // The dtype the body computes in; inputs and output of another dtype are
  // converted with vconv (f16/bf16 <-> f32, s32 <-> f32).
  sim::DType ct = sim::DType::kF32;
  int temps = 0;
  // True: the output is input 0 bit for bit (no conversion, no body).
  bool raw_copy = false;
  // True: no conversion on the way in or out; the body sees each input, the
  // output and the scalars (broadcast bit for bit) in their own dtypes. For
  // tensors the vector unit cannot convert (bool as s8).
  bool manual = false;
  std::function<void(Kasm&, const FlatOperands&, int64_t n)> body;
  std::string what;  // for the plan line ("Relu")
};

absl::StatusOr<GeneratedKernel> EmitFlat(const KernelRequest& req, const FlatSpec& spec);

//===--- Row kernels --------------------------------------------------------===//

// What the per-row body of a row kernel works on. Addresses are of the
// current row (a register walks the rows of the tile); `row` holds the
// global row index (for per-channel parameters).
struct RowOperands {
  sim::DType ct = sim::DType::kF32;
  std::vector<Ub> ins;   // the row of each row input (ct), `cols` elements
  Ub out;                // the output row (ct), out_cols elements
  std::vector<Ub> more_outs;  // the rows of RowSpec::more_outs (ct)
  std::vector<Ub> temps; // scratch rows of max(cols, out_cols) elements, plus one 256-byte block each
  int row = -1;          // register: the global row index
};

struct RowInput {
  FlatTensor t;
  int64_t cols = 0;  // elements per row
};

struct RowSpec {
  std::string name;
  int64_t rows = 0;
  std::vector<RowInput> ins;  // each row-major [rows, cols_k]
  FlatTensor out;
  int64_t out_cols = 0;
  // Further outputs, each [rows, cols_k] (a fused group's extra results).
  std::vector<RowInput> more_outs;
  std::vector<std::string> more_args;  // as FlatSpec::more_args
  sim::DType ct = sim::DType::kF32;
  int temps = 0;
  // Resident data loaded once per block before the rows (parameters):
  // their UB bytes; `prologue` emits the loads and their conversion.
  int64_t resident_bytes = 0;
  std::function<void(Kasm&, Ub resident)> prologue;
  std::function<void(Kasm&, const RowOperands&, Ub resident)> body;
  // Vector cycles of one row's body (for the estimate); filled by EmitRows.
  std::string what;
};

absl::StatusOr<GeneratedKernel> EmitRows(const KernelRequest& req, const RowSpec& spec);

}  // namespace kiln::target::npusim::vec
