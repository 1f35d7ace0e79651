//===- codegen_util.h - Shared pieces of the CUDA code generator -*- C++ -*-===//
//
// What the GEMM, elementwise and row-reduction emitters share: C names and
// types of tile IR values, affine expressions as C, indexing of global
// tensor tiles (broadcasting, batch dimensions, ragged edges), and the
// per-element programs of elementwise steps (a GEMM's epilogue, an
// elementwise kernel's body).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "target/backend/tile_ir.h"
#include "target/cuda/codegen/cuda_codegen.h"

namespace kiln::target::cuda::internal {

// A C identifier for a tile IR name (letters, digits and '_'; never a
// leading digit).
std::string Ident(const std::string& name);
// The CUDA element type of a tensor: float, __half, __nv_bfloat16, bool;
// an error for the dtypes the generator has no CUDA form for.
absl::StatusOr<std::string> CType(DType t);
int64_t Bytes(DType t);
// `x` as a C float literal ("0.5f", "-INFINITY").
std::string FloatLit(double x);
// A copy statement from one tile reference.
bool IsCopy(const tile::Stmt& s);
// The affine expression as C over the loop variables' C names (ints).
std::string AffineC(const tile::Affine& a);
// The variables an affine expression uses.
std::vector<std::string> AffineVars(const tile::Affine& a);

// The arguments and buffers of a kernel by name.
struct Names {
  std::map<std::string, const tile::TileArg*> args;
  std::map<std::string, int> arg_index;
  std::map<std::string, const tile::Stmt*> buffers;
  Names() = default;
  // The arguments and every buffer of `k`, nested blocks included.
  explicit Names(const tile::TileKernel& k);

 private:
  void CollectBuffers(const tile::Block& b);
};

// The element of global tensor `arg` that element `local` (one C index
// expression per dimension of a local buffer of shape `local_shape`) of a
// copy `ref` <-> local buffer touches: the element offset, and whether it
// lies inside the tensor (ragged edges).
struct GlobalIndex {
  std::string offset;      // C expression (long long)
  std::string valid;       // C expression (bool); "true" when always inside
  int64_t inner_stride = 0;  // elements between consecutive values of the last local index (0: broadcast)
};
GlobalIndex IndexGlobal(const tile::TileArg& arg, const tile::TileRef& ref, const std::vector<std::string>& local,
                        const std::vector<int64_t>& local_shape, bool transpose);

// The start of `ref` along each of `rank` global dimensions: the starts it
// gives, aligned from the right, and 0 before them.
std::vector<tile::Affine> StartsOf(const tile::TileRef& ref, int rank);

// The element of X [N, C, H, W] that element `local` of a tile of X's
// im2col matrix (an im2col copy's source `ref`, starts over [N, G, K, P])
// reads: `offset` is a C expression (long long) that is -1 where the
// element lies in the padding and -2 past the matrix's edges (ragged
// tiles), the element offset otherwise; `valid` is empty.
GlobalIndex IndexIm2col(const tile::TileArg& x, const tile::TileRef& ref, const tile::Im2col& c,
                        const std::vector<std::string>& local, const std::vector<int64_t>& local_shape);

// A per-element program: the copies global -> local, the ew steps and the
// copies local -> global of an elementwise tail, run for one element at a
// time. Every local buffer is one float variable `v_NAME` (its element at
// the current position, broadcast numpy style).
struct ElementProgram {
  const Names* names = nullptr;
  // The C index of the current element along each dimension of the
  // iteration shape (the broadcast of every buffer's shape).
  std::vector<std::string> index;
  std::vector<int64_t> shape;
  // Buffers whose value is given (the accumulator): name -> C expression.
  std::map<std::string, std::string> given;
  // Overrides for the value a global -> local copy loads and for the store
  // of a local -> global copy (vector paths); may be empty.
  std::function<std::string(const tile::Stmt& copy, int stmt_index)> load;
  std::function<std::string(const tile::Stmt& copy, int stmt_index, const std::string& value)> store;
  bool atomic_stores = false;  // copies with `add` use atomics (several blocks add into one tile)
  // Buffers read after the program (loads into them are live even when no
  // statement of the program reads them).
  std::vector<std::string> read_after;
};
// The C statements (one per line, indented by `indent`) of `stmts` run on
// one element; an error for a statement with no per-element form.
absl::StatusOr<std::string> EmitElementProgram(const ElementProgram& p, const std::vector<const tile::Stmt*>& stmts,
                                               const std::string& indent);
// The prelude's struct combining two values of a reduction (kiln::SumOp,
// kiln::MaxOp, ...: `Op::apply(a, b)`), and the reduction's identity as a C
// literal.
const char* ReduceCombiner(tile::ReduceOp op);
const char* ReduceIdentity(tile::ReduceOp op);

// The C expression of an ew step on operand expressions.
absl::StatusOr<std::string> EwExpr(tile::EwOp op, const std::vector<std::string>& x);

// The kernel's parameter list: one pointer per argument, in order (`const`
// and __restrict__ for inputs; unused ones unnamed).
absl::StatusOr<std::string> ParamList(const tile::TileKernel& k, const std::vector<bool>& used);
// Marks the arguments a block of statements references.
void MarkUsed(const tile::Block& b, const Names& names, std::vector<bool>* used);

// The emitters of the canonical forms.
absl::StatusOr<CudaKernel> EmitGemm(const tile::TileKernel& k, const CudaArch& arch);
absl::StatusOr<CudaKernel> EmitElementwise(const tile::TileKernel& k);
absl::StatusOr<CudaKernel> EmitRowReduction(const tile::TileKernel& k);
absl::StatusOr<CudaKernel> EmitWindow(const tile::TileKernel& k);
absl::StatusOr<CudaKernel> EmitAttention(const tile::TileKernel& k, const CudaArch& arch);

}  // namespace kiln::target::cuda::internal
