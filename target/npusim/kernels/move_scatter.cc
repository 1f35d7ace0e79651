//===- move_scatter.cc - ScatterElements by DMA, in place or not ----------===//
//
// ScatterElements(data, indices, updates, axis) without reduction on one AI
// core: unless the driver donated data's bytes to the output (in place),
// MTE2 and MTE3 first copy data to the output through two UB buffers; then
// the updates go out in runs. A run is the updates that share one index: one
// element in general, or, where the indices are an Expand that repeats one
// index along the axes after `axis`, the contiguous block those axes span
// (a KV cache's new position: one row of head_dim elements per head). For
// each run MTE2 brings its index and its updates into UB; the scalar unit
// reads the index (`ld`, a negative one counting from the end), addresses
// the run's place in the output and MTE3 writes it there. An index out of
// range puts the run's write outside the output: a run-time error. Runs are
// unrolled (their static offsets differ), a UB's worth at a time. Where the
// Expand also repeats the index along an axis before `axis` (a KV cache's
// heads), the runs along it share one index: one `ld`, and their updates
// in and out as the bursts of one strided copy each way.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/support/status.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/move.h"

namespace kiln::target::npusim {
namespace {

// Runs beyond which the op goes to the AICPU (the program is unrolled).
constexpr int64_t kMaxRuns = 4096;

bool IsScatter(const Node& n) {
  return n.domain().empty() && n.op() == "ScatterElements" && n.num_inputs() == 3 && n.num_outputs() == 1 &&
         n.GetString("reduction", "none") == "none";
}

// Per axis of `indices` (rank r): whether its index is the same all along
// it, known from an Expand whose input has extent 1 there.
std::vector<bool> ConstantAlong(const Value* indices, int64_t r) {
  std::vector<bool> c(r, false);
  const Node* p = indices->producer();
  if (!p || !p->domain().empty() || p->op() != "Expand" || !p->input(0)) return c;
  const Type& t = p->input(0)->type();
  if (!t.is_tensor() || !t.shape().is_static()) return c;
  const Dims e = t.shape().StaticDims();
  const int64_t lead = r - static_cast<int64_t>(e.size());
  if (lead < 0) return c;
  for (int64_t k = 0; k < r; ++k) c[k] = k < lead || e[k - lead] == 1;
  return c;
}

}  // namespace

bool IsIndexedMove(const Node& n) { return IsScatter(n); }

absl::StatusOr<GeneratedKernel> GenerateScatterKernel(const KernelRequest& req) {
  const Node& n = *req.node;
  const sim::Machine& m = *req.machine;
  if (!IsScatter(n)) return absl::UnimplementedError("ScatterElements with a reduction runs on the AICPU");
  const Value* data = n.input(0);
  const Value* idx = n.input(1);
  const Value* upd = n.input(2);
  const Value* y = n.output(0);
  for (const Value* v : {data, idx, upd, y})
    if (!v || !v->type().is_tensor() || !v->type().shape().is_static() || v->type().dtype() == DType::kString)
      return absl::FailedPreconditionError("ScatterElements without static shapes");
  const DType idt = idx->type().dtype();
  if (idt != DType::kI64 && idt != DType::kI32) return absl::FailedPreconditionError("indices of another dtype");
  const Dims dd = data->type().shape().StaticDims();
  const Dims id = idx->type().shape().StaticDims();
  const int64_t r = static_cast<int64_t>(dd.size());
  if (r == 0 || static_cast<int64_t>(id.size()) != r || upd->type().shape().StaticDims() != id)
    return absl::FailedPreconditionError("ScatterElements with indices and updates of different shapes");
  int64_t axis = n.GetInt("axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return absl::InvalidArgumentError("ScatterElements: axis out of range");
  for (int64_t k = 0; k < r; ++k)
    if (k != axis && id[k] > dd[k]) return absl::InvalidArgumentError("ScatterElements: updates wider than data");
  const int64_t es = static_cast<int64_t>(DTypeSize(data->type().dtype()));
  const int64_t ib = idt == DType::kI64 ? 8 : 4;
  const int64_t count = idx->type().shape().NumElements();
  const int64_t total = data->type().shape().NumElements() * es;

  // A run: the innermost axes after `axis` along which the index repeats,
  // as far as the run stays contiguous in the output too.
  const std::vector<bool> constant = ConstantAlong(idx, r);
  int64_t inner = r;  // axes inner.. r-1 make a run
  int64_t run = 1;
  while (inner - 1 > axis && constant[inner - 1]) {
    --inner;
    run *= id[inner];
    if (id[inner] != dd[inner]) break;
  }
  // A leading axis (before the run's) along which the index also repeats
  // (a KV cache's heads, whose new position is the same): its runs share
  // one index and go out as the bursts of one strided copy.
  int64_t gax = -1;
  for (int64_t k = 0; k < inner; ++k)
    if (k != axis && constant[k] && id[k] > 1 && id[k] <= 4095 && (gax < 0 || id[k] > id[gax])) gax = k;
  const int64_t bursts = gax < 0 ? 1 : id[gax];
  const int64_t runs = count == 0 ? 0 : count / run / bursts;
  if (runs > kMaxRuns)
    return absl::UnimplementedError(absl::StrCat("ScatterElements of ", runs, " runs (more than ", kMaxRuns, ")"));
  // Strides in elements of data (the output) and of indices/updates.
  std::vector<int64_t> ds(r, 1), is(r, 1);
  for (int64_t k = r - 2; k >= 0; --k) {
    ds[k] = ds[k + 1] * dd[k + 1];
    is[k] = is[k + 1] * id[k + 1];
  }

  const int64_t ub = m.core().ub_kib() * 1024;
  const int64_t run_bytes = run * es, run_a = RoundUp(run_bytes, 32);
  const int64_t per_chunk = std::min<int64_t>(runs, (ub - 64) / (32 + bursts * run_a));
  if (runs > 0 && per_chunk < 1)
    return absl::UnimplementedError(absl::StrCat("a run of ", run_bytes, " bytes does not fit UB"));
  std::string t = absl::StrCat(".program move_ScatterElements\n.regs 4\n", KasmByteArgLine("data", *data), "\n",
                               KasmByteArgLine("idx", *idx), "\n", KasmByteArgLine("upd", *upd), "\n",
                               KasmByteArgLine("y", *y), "\n");
  // The copy of data to the output: two UB buffers, loads and stores overlapping.
  const int64_t buf = std::min<int64_t>(64 << 10, ub / 2) / 32 * 32;
  int64_t copies = 0;
  if (!req.in_place && total > 0) {
    absl::StrAppend(&t, "  set_flag MTE3, MTE2, 0\n  set_flag MTE3, MTE2, 1\n");
    for (int64_t off = 0; off < total; off += buf, ++copies) {
      const int64_t len = std::min(buf, total - off), j = copies % 2;
      absl::StrAppendFormat(&t,
                            "  wait_flag MTE3, MTE2, %d\n  copy_gm_ub UB[%d], data[%d], len=%d\n"
                            "  set_flag MTE2, MTE3, %d\n  wait_flag MTE2, MTE3, %d\n"
                            "  copy_ub_gm y[%d], UB[%d], len=%d\n  set_flag MTE3, MTE2, %d\n",
                            j, j * buf, off, len, j, j, off, j * buf, len, j);
    }
    absl::StrAppend(&t, "  wait_flag MTE3, MTE2, 0\n  wait_flag MTE3, MTE2, 1\n");
  }
  // The runs, a chunk at a time: indices at UB[32 j], updates after them.
  // The output's stores queue on MTE3 behind the copy's, so they land after it.
  const int64_t upd_base = RoundUp(per_chunk * 32, 32);
  int64_t chunks = 0;
  std::vector<int64_t> at(r, 0);  // the run's multi-index (axes < inner)
  for (int64_t first = 0; first < runs; first += per_chunk, ++chunks) {
    const int64_t last = std::min(runs, first + per_chunk);
    std::vector<int64_t> u_off, y_base;  // per run: its element in indices/updates, its output offset sans index
    for (int64_t i = first; i < last; ++i) {
      int64_t rem = i, u = 0, yb = 0;
      for (int64_t k = inner - 1; k >= 0; --k) {
        if (k == gax) {  // the bursts of the run's copies
          at[k] = 0;
          continue;
        }
        at[k] = rem % id[k];
        rem /= id[k];
        u += at[k] * is[k];
        if (k != axis) yb += at[k] * ds[k];
      }
      u_off.push_back(u);
      y_base.push_back(yb * es);
    }
    if (chunks > 0) absl::StrAppend(&t, "  wait_flag MTE3, MTE2, 2\n");
    for (size_t j = 0; j < u_off.size(); ++j)
      absl::StrAppendFormat(&t, "  copy_gm_ub UB[%d], idx[%d], len=%d\n", j * 32, u_off[j] * ib, ib);
    // A run's bursts: its updates along the shared axis, one after another in UB.
    const std::string burst_in =
        gax < 0 ? "" : absl::StrFormat(", nburst=%d, src_stride=%d, dst_stride=%d", bursts, is[gax] * es, run_a);
    const std::string burst_out =
        gax < 0 ? "" : absl::StrFormat(", nburst=%d, src_stride=%d, dst_stride=%d", bursts, run_a, ds[gax] * es);
    for (size_t j = 0; j < u_off.size(); ++j)
      absl::StrAppendFormat(&t, "  copy_gm_ub UB[%d], upd[%d], len=%d%s\n", upd_base + j * bursts * run_a,
                            u_off[j] * es, run_bytes, burst_in);
    absl::StrAppend(&t, "  set_flag MTE2, SCALAR, 0\n  wait_flag MTE2, SCALAR, 0\n",
                    "  set_flag MTE2, MTE3, 2\n  wait_flag MTE2, MTE3, 2\n");
    for (size_t j = 0; j < u_off.size(); ++j)
      absl::StrAppendFormat(&t,
                            "  ld.s32 r1, UB[%d]\n  shr r2, r1, 63\n  and r2, r2, %d\n  add r1, r1, r2\n"
                            "  mul r1, r1, %d\n  add r1, r1, %d\n  copy_ub_gm y[r1], UB[%d], len=%d%s\n",
                            j * 32, dd[axis], ds[axis] * es, y_base[j], upd_base + j * bursts * run_a, run_bytes,
                            burst_out);
    absl::StrAppend(&t, "  set_flag MTE3, MTE2, 2\n");
  }
  if (chunks > 0) absl::StrAppend(&t, "  wait_flag MTE3, MTE2, 2\n");

  KILN_ASSIGN_OR_RETURN(GeneratedKernel k, AssembledKernel(t, "move_ScatterElements.kasm", "scatter", 1, "vector"));
  // The copy streams at one core's MTE rate (or HBM's); each chunk of runs
  // pays the HBM latency of its loads and of its stores.
  const double lat = m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles();
  const double rate = UbLoadBytesPerCycle(m, 1);
  k.estimated_cycles = (copies ? 2.0 * static_cast<double>(total) / rate + lat * 2 : 0) + lat * 2.0 * chunks +
                       static_cast<double>(runs) * (static_cast<double>(bursts * run_bytes) / rate + 8);
  k.plan = absl::StrFormat("ScatterElements: %d runs of %d B%s by indices read at run time (ld)%s", runs, run_bytes,
                           bursts > 1 ? absl::StrFormat(" x %d bursts sharing their index", bursts) : "",
                           req.in_place ? ", in place (the output is the donated data)"
                                        : absl::StrFormat(" after copying %d B of data", total));
  return k;
}

}  // namespace kiln::target::npusim
