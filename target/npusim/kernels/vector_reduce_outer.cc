//===- vector_reduce_outer.cc - Reductions over outer axes ----------------===//
//
// ReduceSum/Mean/Max/Min whose reduced axes sit between kept ones: the input
// merges to [A, R, B] (kept, reduced, kept, B > 1) and out[a, :] is the
// reduction of the R rows x[a, r, :]. A unit of work is (a, a chunk of Bc
// columns); the last chunk of a row shifts inward (b0 = min(c*Bc, B - Bc)),
// so every chunk is whole and overlapping chunks write equal values. MTE2
// loads Rc rows of the chunk with one strided copy (nburst = rows), the
// vector unit converts them to f32 and folds them in halves (whole rows are
// contiguous at a 32-byte pitch, so each halving is one flat vadd/vmax/vmin),
// then folds the chunk's result into the accumulator row; after the last
// chunk of rows it scales (Mean), converts and MTE3 writes the Bc values.
// Row chunks are double-buffered (V->MTE2 / MTE2->V flags 0, two credits);
// the output row waits for MTE3 (flags 1).
//
//===----------------------------------------------------------------------===//
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"
#include "target/npusim/kernels/vector_internal.h"
#include "target/npusim/kernels/vector_pipeline.h"

namespace kiln::target::npusim::vec {

absl::StatusOr<GeneratedKernel> GenerateReduceOuter(const KernelRequest& req, int64_t A, int64_t R, int64_t B,
                                                    const std::string& kind, bool mean) {
  using sim::DType;
  const Node& node = *req.node;
  const sim::Machine& m = *req.machine;
  const DType dt = IsaOf(node.input(0));
  const int es = sim::DTypeSize(dt);
  const int64_t epb = 32 / es;  // elements per block of the input dtype
  const int64_t ub = UbBytes(m);
  // Columns per chunk, and rows per load: 2 slots of Rc x P (raw + f32) fit half of UB.
  int64_t Bc = std::min<int64_t>(B, 4096);
  auto P = [&](int64_t bc) { return RoundUp(bc, std::max<int64_t>(epb, 8)); };
  int64_t Rc = (ub / 2) / (2 * P(Bc) * (es + 4));
  Rc = std::min<int64_t>({Rc, R, 4095});
  if (Rc < 1) return absl::UnimplementedError(absl::StrCat(node.QualifiedOp(), ": rows do not fit UB"));
  const int64_t pitch = P(Bc);
  const int64_t raw_bytes = RoundUp(Rc * pitch * es, 256), f32_bytes = RoundUp(Rc * pitch * 4, 256);
  const int64_t slot_bytes = raw_bytes + f32_bytes;
  const int64_t acc_off = 2 * slot_bytes, acc_bytes = RoundUp(pitch * 4, 256);
  const int64_t out_off = acc_off + acc_bytes, out_bytes = RoundUp(pitch * 4, 256);
  if (out_off + out_bytes > ub) return absl::InternalError("reduce: UB plan overflows");
  const int64_t NB = CeilDiv(B, Bc), units = A * NB;
  const auto split = SplitBlocks(units, Cores(req), 1, 1);
  const int64_t blocks = split.first, per = split.second, last = units - (blocks - 1) * per;

  Kasm k(absl::StrCat("vec_", node.op(), "_outer"), m);
  KILN_RETURN_IF_ERROR(AddNodeArgs(k, node));
  const int blk = k.Reg(), u = k.Reg(), slot = k.Reg(), slot_size = k.Reg(), a = k.Reg(), b0 = k.Reg();
  const int gin = k.Reg(), gout = k.Reg(), i1 = k.Reg(), i2 = k.Reg();
  k.Op(absl::StrCat("block_idx r", blk));
  k.Alu("mul", u, blk, per);
  k.Mov(slot, 0);
  k.Mov(slot_size, slot_bytes);
  Prologue(k);
  const std::string vb = absl::StrCat("v", kind);
  const Ub acc{-1, acc_off}, outb{-1, out_off};
  double unit_vec = 0;
  // One chunk of `rc` rows: load, convert, fold, accumulate (first: copy).
  auto chunk = [&](int64_t rc, bool first) {
    Ub raw{slot, 0}, f{slot, raw_bytes};
    k.WaitFlag("VECTOR", "MTE2", 0);
    k.CopyIn(raw, InArg(0), gin, 0, Bc * es, rc, B * es, pitch * es);
    k.SetFlag("MTE2", "VECTOR", 0);
    k.WaitFlag("MTE2", "VECTOR", 0);
    double v0 = k.vector_cycles();
    if (dt == DType::kF32) k.CopyBits(DType::kF32, f, raw, rc * pitch);
    else k.Conv(DType::kF32, dt, V(f), V(raw), rc * pitch);
    int64_t n = rc;
    while (n > 1) {
      int64_t h = n / 2, keep = n - h;  // rows [keep, n) fold onto [0, h)
      k.Vec(vb, DType::kF32, V(f), {V(f), V(f.Plus(keep * pitch * 4))}, h * pitch);
      n = keep;
    }
    if (first) k.Vec("vmov", DType::kF32, V(acc), {V(f)}, Bc);
    else k.Vec(vb, DType::kF32, V(acc), {V(acc), V(f)}, Bc);
    unit_vec += k.vector_cycles() - v0;
    k.SetFlag("VECTOR", "MTE2", 0);
    k.AluR("sub", slot, slot_size, slot);
    k.Alu("add", gin, gin, rc * B * es);
  };
  auto unit = [&]() {
    // a = u / NB, b0 = min((u % NB) * Bc, B - Bc).
    k.Alu("div", a, u, NB);
    k.Alu("rem", b0, u, NB);
    k.Alu("mul", b0, b0, Bc);
    k.Alu("min", b0, b0, B - Bc);
    k.Alu("mul", gin, a, R * B);
    k.AluR("add", gin, gin, b0);
    k.Alu("mul", gin, gin, es);
    k.Alu("mul", gout, a, B);
    k.AluR("add", gout, gout, b0);
    k.Alu("mul", gout, gout, es);
    unit_vec = 0;
    chunk(std::min(Rc, R), true);
    int64_t rest = R - std::min(Rc, R), full = rest / Rc, tail = rest % Rc;
    if (full > 0) {
      k.Mov(i2, 0);
      std::string l = k.NewLabel("rows");
      k.Label(l);
      chunk(Rc, false);
      k.Alu("add", i2, i2, 1);
      k.Op(absl::StrCat("blt r", i2, ", ", full, ", ", l));
    }
    if (tail) chunk(tail, false);
    k.WaitFlag("MTE3", "VECTOR", 1);
    if (mean) k.Vec("vmuls", DType::kF32, V(acc), {V(acc)}, Bc, 1.0 / static_cast<double>(R));
    if (dt == DType::kF32) k.CopyBits(DType::kF32, outb, acc, Bc);
    else k.Conv(dt, DType::kF32, V(outb), V(acc), Bc);
    k.SetFlag("VECTOR", "MTE3", 1);
    k.WaitFlag("VECTOR", "MTE3", 1);
    k.CopyOut(OutArg(0), gout, 0, outb, Bc * es);
    k.SetFlag("MTE3", "VECTOR", 1);
    k.Alu("add", u, u, 1);
  };
  PerBlock(k, blk, blocks, per, last, [&](int64_t cnt) {
    k.Mov(i1, 0);
    std::string l = k.NewLabel("units");
    k.Label(l);
    unit();
    k.Alu("add", i1, i1, 1);
    k.Op(absl::StrCat("blt r", i1, ", ", cnt, ", ", l));
  });
  Epilogue(k);

  GeneratedKernel g;
  KILN_ASSIGN_OR_RETURN(g.program, k.Finish());
  g.block_dim = blocks;
  g.engine = "vector";
  const double in_bytes = static_cast<double>(A * R * B * es), hbm = HbmBytesPerCycle(m);
  const double lat = 2.0 * static_cast<double>(m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles());
  const double core = static_cast<double>(per) * std::max(static_cast<double>(R * Bc * es) / sim::GmUbBytesPerCycle(m),
                                                          unit_vec);
  g.estimated_cycles = std::max(in_bytes / hbm, core) + lat * static_cast<double>(std::max<int64_t>(1, per / 8)) + lat;
  g.plan = absl::StrCat(node.op(), " of [", A, ",", R, ",", B, "] over the middle axis: ", blocks, " blocks of ", per,
                        " units of ", Bc, " columns, ", Rc, " rows per load folded in halves, compute f32");
  return g;
}

}  // namespace kiln::target::npusim::vec
