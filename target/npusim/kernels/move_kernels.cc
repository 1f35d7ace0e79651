//===- move_kernels.cc - npusim data-movement kernels ----------------------===//
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/support/status.h"
#include "sim/machine/machine.h"
#include "target/backend/copy_pieces.h"
#include "target/npusim/kernels/move.h"

namespace kiln::target::npusim {
namespace {

// Transfers per kernel beyond which the op goes to the AICPU instead: the
// program is unrolled, one load and one store per transfer.
constexpr int64_t kMaxTransfers = 6000;
// Elements copied one by one (a non-contiguous innermost axis) beyond which
// the op goes to the AICPU.
constexpr int64_t kMaxElementwise = 1 << 16;
// Constant Gather indices beyond which the op goes to the AICPU: one
// transfer each.
constexpr int64_t kMaxGatherIndices = 4096;

// One DMA round trip through the unified buffer, in bytes.
struct Transfer {
  int src, dst;
  int64_t src_off, dst_off, nburst, len, src_stride, dst_stride;
};

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// Splits a piece into transfers that each fit one UB buffer of `buf` bytes.
absl::Status AddTransfers(CopyPiece p, int64_t es, int64_t buf, std::vector<Transfer>& out) {
  for (int64_t d : p.dims)
    if (d == 0) return absl::OkStatus();
  SimplifyPiece(p);
  if (p.dims.empty()) {
    p.dims = {1};
    p.src_strides = {1};
    p.dst_strides = {1};
  }
  const int n = static_cast<int>(p.dims.size());
  for (int i = 0; i < n; ++i)
    if (p.src_strides[i] < 0 || p.dst_strides[i] < 0)
      return absl::FailedPreconditionError("a negative stride (reversed slice)");
  // The run: the innermost dimension when contiguous on both sides, else one element.
  const bool contiguous = p.src_strides[n - 1] == 1 && p.dst_strides[n - 1] == 1;
  // The bursts of a transfer go along the longest other dimension (the order
  // of a box's dimensions is free): fewer transfers, each a DMA round trip.
  if (const int last = contiguous ? n - 2 : n - 1; last > 0) {
    int longest = last;
    for (int i = 0; i < last; ++i)
      if (p.dims[i] > p.dims[longest]) longest = i;
    for (auto* v : {&p.dims, &p.src_strides, &p.dst_strides})
      std::rotate(v->begin() + longest, v->begin() + longest + 1, v->begin() + last + 1);
  }
  const int64_t run_elems = contiguous ? p.dims[n - 1] : 1;
  const int burst_dim = contiguous ? n - 2 : n - 1;  // -1: a single burst
  if (!contiguous && p.elements() > kMaxElementwise)
    return absl::FailedPreconditionError(absl::StrCat("the innermost axis is not contiguous and the copy has ",
                                                      p.elements(), " elements (element-wise DMA up to ",
                                                      kMaxElementwise, ")"));
  const int64_t len = run_elems * es;
  const int64_t len_a = AlignUp(len, 32);
  const int64_t nb = burst_dim >= 0 ? p.dims[burst_dim] : 1;
  const int64_t sst = burst_dim >= 0 ? p.src_strides[burst_dim] * es : len;
  const int64_t dst = burst_dim >= 0 ? p.dst_strides[burst_dim] * es : len;
  const int outer_end = std::max(burst_dim, 0);
  // Odometer over the outer dimensions [0, outer_end).
  std::vector<int64_t> idx(std::max(outer_end, 0), 0);
  for (;;) {
    int64_t so = p.src_base, doff = p.dst_base;
    for (int i = 0; i < outer_end; ++i) {
      so += idx[i] * p.src_strides[i];
      doff += idx[i] * p.dst_strides[i];
    }
    so *= es;
    doff *= es;
    if (len_a <= buf) {
      const int64_t cap = std::min<int64_t>(4095, buf / len_a);
      for (int64_t b = 0; b < nb; b += cap) {
        int64_t k = std::min(cap, nb - b);
        out.push_back({p.src, p.dst, so + b * sst, doff + b * dst, k, len, k > 1 ? sst : len, k > 1 ? dst : len});
      }
    } else {
      // A run longer than the buffer: chunks of it, one burst each.
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t c = 0; c < len; c += buf) {
          int64_t l = std::min(buf, len - c);
          out.push_back({p.src, p.dst, so + b * sst + c, doff + b * dst + c, 1, l, l, l});
        }
    }
    if (static_cast<int64_t>(out.size()) > kMaxTransfers)
      return absl::FailedPreconditionError(
          absl::StrCat("the copy needs more than ", kMaxTransfers, " DMA transfers"));
    int i = outer_end - 1;
    while (i >= 0 && ++idx[i] == p.dims[i]) idx[i--] = 0;
    if (i < 0) break;
  }
  return absl::OkStatus();
}

// The node's copy pieces with `src` and `dst` as program arguments:
// `arg_of_input[i]` is input i's, outputs follow the inputs from
// `first_output`. A gather table becomes one piece per index; what the DMA
// cannot do (a negative Slice step, indices read at run time) is an error.
absl::StatusOr<std::vector<CopyPiece>> PiecesOf(const Node& n, const std::vector<int>& arg_of_input, int first_output) {
  KILN_ASSIGN_OR_RETURN(std::vector<CopyPiece> shared, CopyPiecesOf(n));
  std::vector<CopyPiece> pieces;
  for (CopyPiece& p : shared) {
    if (p.index_input >= 0)
      return absl::FailedPreconditionError(absl::StrCat("input ", p.index_input, " of ", n.op(), " is not a constant"));
    if (std::any_of(p.src_strides.begin(), p.src_strides.end(), [](int64_t s) { return s < 0; }))
      return absl::FailedPreconditionError("Slice with a non-positive step");
    p.src = arg_of_input[p.src];
    p.dst = first_output + p.dst;
    if (p.table_dim < 0) {
      pieces.push_back(std::move(p));
      continue;
    }
    if (static_cast<int64_t>(p.table.size()) > kMaxGatherIndices)
      return absl::FailedPreconditionError(absl::StrCat("Gather of more than ", kMaxGatherIndices, " constant indices"));
    const size_t t = static_cast<size_t>(p.table_dim);
    for (size_t j = 0; j < p.table.size(); ++j) {
      CopyPiece q = p;
      q.table_dim = -1;
      q.table.clear();
      q.src_base += p.table[j];
      q.dst_base += static_cast<int64_t>(j) * p.dst_strides[t];
      q.dims.erase(q.dims.begin() + t);
      q.src_strides.erase(q.src_strides.begin() + t);
      q.dst_strides.erase(q.dst_strides.begin() + t);
      pieces.push_back(std::move(q));
    }
  }
  return pieces;
}

// Gather along axis 0 with indices read at run time (an embedding lookup):
// each block copies all the indices into UB, reads its share of them with
// the scalar unit's `ld` (an i64 index by its low word; a negative one
// counts from the end) and gathers the rows they name into UB, a chunk at a
// time, which MTE3 writes out a row per transfer. An index out of range makes
// its row's DMA fall outside the table: a run-time error, not a wrong row.
absl::StatusOr<GeneratedKernel> GenerateIndexedGather(const KernelRequest& req) {
  const Node& n = *req.node;
  const sim::Machine& m = *req.machine;
  const Value* data = n.input(0);
  const Value* idx = n.input(1);
  const Value* y = n.output(0);
  const int64_t axis = n.GetInt("axis", 0);
  if (axis != 0 && axis != -data->type().shape().rank())
    return absl::UnimplementedError("a Gather with indices read at run time runs on the AI cores along axis 0 only");
  const DType idt = idx->type().dtype();
  if (idt != DType::kI64 && idt != DType::kI32) return absl::FailedPreconditionError("indices of another dtype");
  const Dims dd = data->type().shape().StaticDims();
  const int64_t rows_in = dd.empty() ? 0 : dd[0];
  const int64_t es = static_cast<int64_t>(DTypeSize(data->type().dtype()));
  int64_t inner = 1;
  for (size_t i = 1; i < dd.size(); ++i) inner *= dd[i];
  const int64_t row = inner * es, row_a = AlignUp(row, 32), ib = idt == DType::kI64 ? 8 : 4;
  const int64_t count = idx->type().shape().NumElements();
  const int64_t ub = m.core().ub_kib() * 1024;
  const int64_t idx_bytes = AlignUp(count * ib, 32);
  if (rows_in == 0 || count == 0 || row == 0) return absl::UnimplementedError("an empty Gather");
  if (idx_bytes > ub / 4) return absl::UnimplementedError(absl::StrCat(count, " indices do not fit a quarter of UB"));
  const int64_t cap = std::min<int64_t>(4095, (ub - idx_bytes) / row_a);
  if (cap < 1) return absl::UnimplementedError(absl::StrCat("a row of ", row, " bytes does not fit UB"));
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(m.chip().ai_cores(), count));
  const int64_t per = CeilDiv(count, blocks);
  const int64_t used = CeilDiv(count, per);
  std::string t = absl::StrCat(".program move_Gather\n.regs 12\n", KasmByteArgLine("data", *data), "\n",
                               KasmByteArgLine("idx", *idx), "\n", KasmByteArgLine("y", *y), "\n");
  // r0 block, r1 its first index, r2 its end, r3 index j, r4 a row's GM offset, r5 the chunk's first index,
  // r6 a row's UB slot, r7 the chunk's end (then its row count), r8 rows written.
  absl::StrAppend(&t, "  block_idx r0\n  mul r1, r0, ", per, "\n  add r2, r1, ", per, "\n  min r2, r2, ", count,
                  "\n  copy_gm_ub UB[0], idx[0], len=", count * ib,
                  "\n  set_flag MTE2, SCALAR, 0\n  wait_flag MTE2, SCALAR, 0\n  set_flag MTE3, MTE2, 0\n",
                  "  mov r5, r1\nchunk:\n  bge r5, r2, done\n  wait_flag MTE3, MTE2, 0\n  mov r3, r5\n  mov r6, ",
                  idx_bytes, "\n  add r7, r5, ", cap, "\n  min r7, r7, r2\nrow:\n  bge r3, r7, rows_done\n",
                  "  mul r4, r3, ", ib, "\n  ld.s32 r4, UB[r4]\n  bge r4, 0, positive\n  add r4, r4, ", rows_in,
                  "\npositive:\n  mul r4, r4, ", row, "\n  copy_gm_ub UB[r6], data[r4], len=", row,
                  "\n  add r6, r6, ", row_a, "\n  add r3, r3, 1\n  jmp row\nrows_done:\n",
                  "  set_flag MTE2, MTE3, 0\n  wait_flag MTE2, MTE3, 0\n  sub r7, r3, r5\n  mul r4, r5, ", row,
                  "\n");
  // MTE3 writes the chunk's rows, one transfer each (consecutive in Y).
  absl::StrAppend(&t, "  mov r6, ", idx_bytes, "\n  mov r8, 0\nout:\n  bge r8, r7, out_done\n",
                  "  copy_ub_gm y[r4], UB[r6], len=", row, "\n  add r4, r4, ", row, "\n  add r6, r6, ", row_a,
                  "\n  add r8, r8, 1\n  jmp out\nout_done:\n  set_flag MTE3, MTE2, 0\n  mov r5, r3\n  jmp chunk\n",
                  "done:\n  wait_flag MTE3, MTE2, 0\n");
  KILN_ASSIGN_OR_RETURN(GeneratedKernel k, AssembledKernel(t, "move_Gather.kasm", "gather", used, "vector"));
  // Per block: the indices' load, then each chunk's row loads (in flight
  // together) and its stores, each paying the HBM latency.
  const double lat = m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles();
  const double chunks = static_cast<double>(CeilDiv(per, cap));
  k.estimated_cycles =
      lat * (1 + 2 * chunks) + static_cast<double>(per) * (row / sim::GmUbBytesPerCycle(m) + 12);
  k.plan = absl::StrFormat("Gather of %d rows of %d B by indices read at run time (ld): %d per block over %d blocks",
                           count, row, per, used);
  return k;
}

}  // namespace

absl::StatusOr<GeneratedKernel> GenerateMoveKernel(const KernelRequest& req) {
  const Node& n = *req.node;
  const sim::Machine& m = *req.machine;
  if (IsIndexedMove(n)) return GenerateScatterKernel(req);
  if (!HasCopyPieces(n)) return absl::UnimplementedError(absl::StrCat("no data-movement kernel for ", n.QualifiedOp()));
  for (const Value* v : n.inputs())
    if (v && (!v->type().is_tensor() || !v->type().shape().is_static() || v->type().dtype() == DType::kString))
      return absl::FailedPreconditionError(absl::StrCat("'", v->name(), "' has no static shape or is a string"));
  for (const Value* v : n.outputs())
    if (!v->type().is_tensor() || !v->type().shape().is_static() || v->type().dtype() == DType::kString)
      return absl::FailedPreconditionError(absl::StrCat("'", v->name(), "' has no static shape or is a string"));
  if (n.op() == "Gather" && n.num_inputs() == 2 && n.input(1) && !n.input(1)->is_constant())
    return GenerateIndexedGather(req);

  // Arguments: every present input, then the outputs, as byte arrays (the
  // copy does not look at the values).
  std::vector<int> arg_of_input(n.num_inputs(), -1);
  std::string text = absl::StrCat(".program move_", n.op(), "\n.regs 2\n");
  int args = 0;
  auto add_arg = [&](const Value* v) {
    absl::StrAppend(&text, KasmByteArgLine(absl::StrCat("a", args), *v), "\n");
    return args++;
  };
  for (int i = 0; i < n.num_inputs(); ++i)
    if (n.input(i)) arg_of_input[i] = add_arg(n.input(i));
  const int first_output = args;
  for (const Value* v : n.outputs()) add_arg(v);

  KILN_ASSIGN_OR_RETURN(std::vector<CopyPiece> pieces, PiecesOf(n, arg_of_input, first_output));
  const int64_t es = static_cast<int64_t>(DTypeSize(n.input(0)->type().dtype()));
  const int64_t ub = m.core().ub_kib() * 1024;
  const int64_t buf = std::min<int64_t>(64 << 10, ub / 2) / 32 * 32;
  std::vector<Transfer> transfers;
  for (const CopyPiece& p : pieces) KILN_RETURN_IF_ERROR(AddTransfers(p, es, buf, transfers));

  int64_t total = 0;
  for (const Transfer& t : transfers) total += t.nburst * t.len;
  const int64_t cores = m.chip().ai_cores();
  const int64_t blocks =
      std::max<int64_t>(1, std::min(cores, static_cast<int64_t>(transfers.size())));
  // Contiguous ranges of transfers, balanced by bytes.
  std::vector<size_t> bounds = {0};
  {
    int64_t acc = 0;
    for (size_t i = 0; i < transfers.size(); ++i) {
      acc += transfers[i].nburst * transfers[i].len;
      if (static_cast<int64_t>(bounds.size()) < blocks && acc * blocks >= total * static_cast<int64_t>(bounds.size()))
        bounds.push_back(i + 1);
    }
    while (static_cast<int64_t>(bounds.size()) <= blocks) bounds.push_back(transfers.size());
    bounds.back() = transfers.size();
  }
  absl::StrAppend(&text, "  block_idx r0\n");
  for (int64_t b = 1; b < blocks; ++b) absl::StrAppend(&text, "  beq r0, ", b, ", block", b, "\n");
  for (int64_t b = 0; b < blocks; ++b) {
    if (b > 0) absl::StrAppend(&text, "block", b, ":\n");
    absl::StrAppend(&text, "  set_flag MTE3, MTE2, 0\n  set_flag MTE3, MTE2, 1\n");
    for (size_t i = bounds[b]; i < bounds[b + 1]; ++i) {
      const Transfer& t = transfers[i];
      const int j = static_cast<int>((i - bounds[b]) % 2);
      const int64_t len_a = AlignUp(t.len, 32);
      absl::StrAppendFormat(&text,
                            "  wait_flag MTE3, MTE2, %d\n"
                            "  copy_gm_ub UB[%d], a%d[%d], nburst=%d, len=%d, src_stride=%d, dst_stride=%d\n"
                            "  set_flag MTE2, MTE3, %d\n"
                            "  wait_flag MTE2, MTE3, %d\n"
                            "  copy_ub_gm a%d[%d], UB[%d], nburst=%d, len=%d, src_stride=%d, dst_stride=%d\n"
                            "  set_flag MTE3, MTE2, %d\n",
                            j, j * buf, t.src, t.src_off, t.nburst, t.len, t.src_stride,
                            t.nburst > 1 ? len_a : t.len, j, j, t.dst, t.dst_off, j * buf, t.nburst, t.len,
                            t.nburst > 1 ? len_a : t.len, t.dst_stride, j);
    }
    absl::StrAppend(&text, "  wait_flag MTE3, MTE2, 0\n  wait_flag MTE3, MTE2, 1\n  jmp done\n");
  }
  absl::StrAppend(&text, "done:\n");

  KILN_ASSIGN_OR_RETURN(GeneratedKernel k,
                        AssembledKernel(text, absl::StrCat("move_", n.op(), ".kasm"), "data-movement", blocks, "vector"));
  // Each block streams its bytes in and out through MTE2 and MTE3 (which
  // overlap), at the lesser of the MTE rate and its share of HBM, plus the
  // HBM latency of every transfer's load, and of the last one's store (the
  // other stores overlap the next loads through the second buffer).
  const double per_core = UbLoadBytesPerCycle(m, blocks);
  const double per_block_transfers = std::ceil(static_cast<double>(transfers.size()) / blocks);
  k.estimated_cycles = static_cast<double>(total) / blocks / per_core +
                       (per_block_transfers + 1) * (m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles());
  k.plan = absl::StrFormat("%s: %d DMA transfers (%d B) over %d blocks through two %d KiB UB buffers",
                           n.op(), transfers.size(), total, blocks, buf >> 10);
  return k;
}

}  // namespace kiln::target::npusim
