//===- move_kernels.cc - npusim data-movement kernels ----------------------===//
#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/passes/rewrite_helpers.h"
#include "graph/support/status.h"
#include "sim/isa/asm.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/move.h"

namespace kiln::target::npusim {
namespace {

// Transfers per kernel beyond which the op goes to the AICPU instead: the
// program is unrolled, one load and one store per transfer.
constexpr int64_t kMaxTransfers = 6000;
// Elements copied one by one (a non-contiguous innermost axis) beyond which
// the op goes to the AICPU.
constexpr int64_t kMaxElementwise = 1 << 16;

// A box of elements copied from argument `src` to argument `dst`.
struct Piece {
  int src = 0, dst = 0;
  int64_t src_base = 0, dst_base = 0;        // elements
  std::vector<int64_t> dims, src_strides, dst_strides;  // elements
};

// One DMA round trip through the unified buffer, in bytes.
struct Transfer {
  int src, dst;
  int64_t src_off, dst_off, nburst, len, src_stride, dst_stride;
};

std::vector<int64_t> DenseStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

int64_t Numel(const std::vector<int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
}

// Drops unit dimensions and merges dimensions contiguous on both sides.
void Simplify(Piece& p) {
  Piece q = p;
  q.dims.clear();
  q.src_strides.clear();
  q.dst_strides.clear();
  for (size_t i = 0; i < p.dims.size(); ++i) {
    if (p.dims[i] == 1) continue;
    q.dims.push_back(p.dims[i]);
    q.src_strides.push_back(p.src_strides[i]);
    q.dst_strides.push_back(p.dst_strides[i]);
  }
  for (int i = static_cast<int>(q.dims.size()) - 2; i >= 0; --i) {
    if (q.src_strides[i] == q.src_strides[i + 1] * q.dims[i + 1] &&
        q.dst_strides[i] == q.dst_strides[i + 1] * q.dims[i + 1]) {
      q.dims[i] *= q.dims[i + 1];
      q.src_strides[i] = q.src_strides[i + 1];
      q.dst_strides[i] = q.dst_strides[i + 1];
      q.dims.erase(q.dims.begin() + i + 1);
      q.src_strides.erase(q.src_strides.begin() + i + 1);
      q.dst_strides.erase(q.dst_strides.begin() + i + 1);
    }
  }
  p = std::move(q);
}

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// Splits a piece into transfers that each fit one UB buffer of `buf` bytes.
absl::Status AddTransfers(Piece p, int64_t es, int64_t buf, std::vector<Transfer>& out) {
  for (int64_t d : p.dims)
    if (d == 0) return absl::OkStatus();
  Simplify(p);
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
  const int64_t run_elems = contiguous ? p.dims[n - 1] : 1;
  const int burst_dim = contiguous ? n - 2 : n - 1;  // -1: a single burst
  if (!contiguous && Numel(p.dims) > kMaxElementwise)
    return absl::FailedPreconditionError(absl::StrCat("the innermost axis is not contiguous and the copy has ",
                                                      Numel(p.dims), " elements (element-wise DMA up to ",
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

std::vector<int64_t> DimsOf(const Value* v) { return v->type().shape().StaticDims(); }

absl::StatusOr<std::vector<int64_t>> ConstInts(const Node& n, int input) {
  const Value* v = n.input(input);
  if (!v || !v->is_constant() || !v->constant().defined())
    return absl::FailedPreconditionError(absl::StrCat("input ", input, " of ", n.op(), " is not a constant"));
  std::vector<int64_t> r;
  for (int64_t i = 0; i < v->constant().numel(); ++i) r.push_back(v->constant().GetInt(i));
  return r;
}

int64_t NormAxis(int64_t a, int64_t rank) { return a < 0 ? a + rank : a; }

// The pieces of `n`; `arg_of_input[i]` is input i's program argument,
// outputs follow the inputs.
absl::StatusOr<std::vector<Piece>> PiecesOf(const Node& n, const std::vector<int>& arg_of_input, int first_output) {
  const std::string& op = n.op();
  std::vector<Piece> pieces;
  const Value* x = n.input(0);
  const std::vector<int64_t> in_dims = DimsOf(x);
  const std::vector<int64_t> in_strides = DenseStrides(in_dims);
  const int64_t rank = static_cast<int64_t>(in_dims.size());
  auto whole = [&](int out) {
    Piece p;
    p.src = arg_of_input[0];
    p.dst = first_output + out;
    p.dims = DimsOf(n.output(out));
    p.dst_strides = DenseStrides(p.dims);
    return p;
  };
  if (op == "Identity" || op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" ||
      op == "Dropout") {
    Piece p = whole(0);
    p.dims = {Numel(in_dims)};
    p.src_strides = p.dst_strides = {1};
    pieces.push_back(p);
  } else if (op == "Transpose") {
    std::vector<int64_t> perm = n.GetInts("perm");
    if (perm.empty())
      for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
    Piece p = whole(0);
    for (int64_t a : perm) p.src_strides.push_back(in_strides[a]);
    pieces.push_back(p);
  } else if (op == "Expand") {
    Piece p = whole(0);
    const int64_t out_rank = static_cast<int64_t>(p.dims.size());
    for (int64_t i = 0; i < out_rank; ++i) {
      int64_t j = i - (out_rank - rank);
      p.src_strides.push_back(j < 0 || in_dims[j] == 1 ? 0 : in_strides[j]);
    }
    pieces.push_back(p);
  } else if (op == "Tile") {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> reps, ConstInts(n, 1));
    Piece p;
    p.src = arg_of_input[0];
    p.dst = first_output;
    std::vector<int64_t> out_dims = DimsOf(n.output(0));
    std::vector<int64_t> out_strides = DenseStrides(out_dims);
    for (int64_t i = 0; i < rank; ++i) {
      p.dims.push_back(reps[i]);
      p.src_strides.push_back(0);
      p.dst_strides.push_back(in_dims[i] * out_strides[i]);
      p.dims.push_back(in_dims[i]);
      p.src_strides.push_back(in_strides[i]);
      p.dst_strides.push_back(out_strides[i]);
    }
    pieces.push_back(p);
  } else if (op == "Concat") {
    const std::vector<int64_t> out_dims = DimsOf(n.output(0));
    const std::vector<int64_t> out_strides = DenseStrides(out_dims);
    const int64_t axis = NormAxis(n.GetInt("axis", 0), static_cast<int64_t>(out_dims.size()));
    int64_t offset = 0;
    for (int i = 0; i < n.num_inputs(); ++i) {
      const Value* v = n.input(i);
      if (!v) continue;
      Piece p;
      p.src = arg_of_input[i];
      p.dst = first_output;
      p.dims = DimsOf(v);
      p.src_strides = DenseStrides(p.dims);
      p.dst_strides = out_strides;
      p.dst_base = offset * out_strides[axis];
      offset += p.dims[axis];
      pieces.push_back(p);
    }
  } else if (op == "Split") {
    const int64_t axis = NormAxis(n.GetInt("axis", 0), rank);
    int64_t offset = 0;
    for (int o = 0; o < n.num_outputs(); ++o) {
      Piece p = whole(o);
      p.src_strides = in_strides;
      p.src_base = offset * in_strides[axis];
      offset += p.dims[axis];
      pieces.push_back(p);
    }
  } else if (op == "Slice") {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ConstInts(n, 1));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ends, ConstInts(n, 2));
    std::vector<int64_t> axes, steps;
    if (n.input(3)) {
      KILN_ASSIGN_OR_RETURN(axes, ConstInts(n, 3));
    } else {
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    if (n.input(4)) {
      KILN_ASSIGN_OR_RETURN(steps, ConstInts(n, 4));
    } else {
      steps.assign(starts.size(), 1);
    }
    Piece p = whole(0);
    p.src_strides = in_strides;
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = NormAxis(axes[i], rank);
      int64_t d = in_dims[a], s = steps[i];
      if (s <= 0) return absl::FailedPreconditionError("Slice with a non-positive step");
      int64_t b = starts[i] < 0 ? starts[i] + d : starts[i];
      b = std::clamp<int64_t>(b, 0, d);
      p.src_base += b * in_strides[a];
      p.src_strides[a] = s * in_strides[a];
    }
    pieces.push_back(p);
  } else if (op == "Gather") {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> indices, ConstInts(n, 1));
    const int64_t axis = NormAxis(n.GetInt("axis", 0), rank);
    if (static_cast<int64_t>(indices.size()) > 4096)
      return absl::FailedPreconditionError("Gather of more than 4096 constant indices");
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= in_dims[i];
    for (int64_t i = axis + 1; i < rank; ++i) inner *= in_dims[i];
    const int64_t k = static_cast<int64_t>(indices.size());
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = indices[j] < 0 ? indices[j] + in_dims[axis] : indices[j];
      if (v < 0 || v >= in_dims[axis]) return absl::FailedPreconditionError("Gather index out of range");
      Piece p;
      p.src = arg_of_input[0];
      p.dst = first_output;
      p.dims = {outer, inner};
      p.src_strides = {in_dims[axis] * inner, 1};
      p.dst_strides = {k * inner, 1};
      p.src_base = v * inner;
      p.dst_base = j * inner;
      pieces.push_back(p);
    }
  } else {
    return absl::UnimplementedError(absl::StrCat("no data-movement kernel for ", n.QualifiedOp()));
  }
  return pieces;
}

}  // namespace

bool IsMoveOp(const Node& n) {
  static const char* const kOps[] = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Dropout",
                                     "Transpose", "Expand", "Tile", "Concat", "Split", "Slice", "Gather"};
  if (!n.domain().empty()) return false;
  return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* s) { return n.op() == s; });
}

absl::StatusOr<GeneratedKernel> GenerateMoveKernel(const KernelRequest& req) {
  const Node& n = *req.node;
  const sim::Machine& m = *req.machine;
  if (!IsMoveOp(n)) return absl::UnimplementedError(absl::StrCat("no data-movement kernel for ", n.QualifiedOp()));
  if (n.op() == "Dropout") {
    if (n.num_outputs() > 1 && n.output(1)->has_uses())
      return absl::FailedPreconditionError("Dropout's mask output is used");
    if (IsNondeterministicOp(n)) return absl::FailedPreconditionError("Dropout in training mode draws random numbers");
  }
  for (const Value* v : n.inputs())
    if (v && (!v->type().is_tensor() || !v->type().shape().is_static() || v->type().dtype() == DType::kString))
      return absl::FailedPreconditionError(absl::StrCat("'", v->name(), "' has no static shape or is a string"));
  for (const Value* v : n.outputs())
    if (!v->type().is_tensor() || !v->type().shape().is_static() || v->type().dtype() == DType::kString)
      return absl::FailedPreconditionError(absl::StrCat("'", v->name(), "' has no static shape or is a string"));

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

  KILN_ASSIGN_OR_RETURN(std::vector<Piece> pieces, PiecesOf(n, arg_of_input, first_output));
  const int64_t es = static_cast<int64_t>(DTypeSize(n.input(0)->type().dtype()));
  const int64_t ub = m.core().ub_kib() * 1024;
  const int64_t buf = std::min<int64_t>(64 << 10, ub / 2) / 32 * 32;
  std::vector<Transfer> transfers;
  for (const Piece& p : pieces) KILN_RETURN_IF_ERROR(AddTransfers(p, es, buf, transfers));

  int64_t total = 0;
  for (const Transfer& t : transfers) total += t.nburst * t.len;
  const int64_t cores = m.chip().ai_cores();
  const int64_t blocks =
      std::max<int64_t>(1, std::min({cores, static_cast<int64_t>(transfers.size()), total / (16 << 10) + 1}));
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

  auto file = sim::Assemble(text, absl::StrCat("move_", n.op(), ".kasm"));
  if (!file.ok()) return absl::InternalError(absl::StrCat("data-movement kernel: ", file.status().message()));
  GeneratedKernel k;
  k.program = std::move(file->program);
  k.block_dim = blocks;
  k.engine = "vector";
  // Each block streams its bytes in and out through MTE2 and MTE3 (which
  // overlap), at the lesser of the MTE rate and its share of HBM, plus the
  // HBM latency of every transfer.
  const double per_core = std::min(m.core().mte2_bytes_per_cycle(), sim::HbmBytesPerCycle(m) / blocks);
  const double per_block_transfers = static_cast<double>(transfers.size()) / blocks;
  k.estimated_cycles = static_cast<double>(total) / blocks / per_core +
                       per_block_transfers * (m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles());
  k.plan = absl::StrFormat("%s: %d DMA transfers (%d B) over %d blocks through two %d KiB UB buffers",
                           n.op(), transfers.size(), total, blocks, buf >> 10);
  return k;
}

}  // namespace kiln::target::npusim
