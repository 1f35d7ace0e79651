//===- vector_argmax.cc - ArgMax / ArgMin over the last axis ---------------===//
//
// One block per row (a decode step's logits: one row of the vocabulary).
// Two passes over the row, a chunk of 8,192 elements at a time (the second
// pass's loads hit the L2, which holds the row from the first):
//
//   1. vcmax (vcmin) per 64-element repeat, then over those: the row's
//      extreme M;
//   2. vcmp eq against M, vsel of the element's index (an iota built once in
//      UB, plus the chunk's start) or a sentinel past the row, and vcmin
//      (vcmax with select_last_index) over the candidates: the first (last)
//      index holding M.
//
// The index, exact in fp32 below 2^24, converts to s32 and goes out as the
// low word of the i64 (the high word 0). Each row's body is straight-line
// code whose flags PipeSync derives from the buffers it touches.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/support/status.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/cube_kasm.h"
#include "target/npusim/kernels/pipe_sync.h"
#include "target/npusim/kernels/vector_internal.h"

namespace kiln::target::npusim::vec {
namespace {

constexpr int64_t kChunk = 8192;        // elements of a chunk (128 repeats of fp32)
constexpr int64_t kMaxRow = 64 * 64 * 255;  // elements of a row: two levels of 255 repeats (exact in fp32)

std::string Ub(int64_t off) { return absl::StrCat("UB[", off, "]"); }

}  // namespace

absl::StatusOr<GeneratedKernel> GenerateArgMax(const KernelRequest& req) {
  const Node& n = *req.node;
  const sim::Machine& m = *req.machine;
  const bool is_max = n.op() == "ArgMax";
  const Value* x = n.input(0);
  const Value* y = n.output(0);
  if (!x || !x->type().shape().is_static() || !y->type().shape().is_static()) return Unimpl(n, "shapes not static");
  const DType dt = x->type().dtype();
  if (dt != DType::kF32 && dt != DType::kF16) return Unimpl(n, "f32 or f16 input");
  if (y->type().dtype() != DType::kI64) return Unimpl(n, "an i64 result");
  const Dims xd = x->type().shape().StaticDims();
  const int64_t r = static_cast<int64_t>(xd.size());
  int64_t axis = n.GetInt("axis", 0);
  if (axis < 0) axis += r;
  if (r == 0 || axis != r - 1) return Unimpl(n, "over the last axis only");
  const int64_t len = xd.back(), rows = x->type().shape().NumElements() / std::max<int64_t>(len, 1);
  if (len == 0 || len > kMaxRow) return Unimpl(n, absl::StrCat("rows of 1 to ", kMaxRow, " elements"));
  const bool last = n.GetInt("select_last_index", 0) != 0;
  const int64_t es = static_cast<int64_t>(DTypeSize(dt));
  const int64_t chunks = (len + kChunk - 1) / kChunk, reps = (len + 63) / 64;

  // UB, in bytes. The partial results are padded to whole repeats with NaN,
  // which no extreme and no comparison takes, so every reduction runs on
  // whole repeats and writes at aligned places.
  int64_t at = 0;
  auto take = [&](int64_t bytes) {
    const int64_t off = at;
    at += (bytes + 31) / 32 * 32;
    return off;
  };
  auto whole = [](int64_t count) { return (count + 63) / 64 * 64; };
  const int64_t xin[2] = {take(kChunk * es), take(kChunk * es)};
  const int64_t x32 = dt == DType::kF16 ? take(kChunk * 4) : -1;
  const int64_t iota = take(kChunk * 4), idx = take(kChunk * 4), cand = take(kChunk * 4), bits = take(kChunk / 8);
  const int64_t part = take(whole(reps) * 4), part2 = take(whole((reps + 63) / 64) * 4);
  const int64_t extb = take(256), sentinel = take(32), out = take(32);
  if (at > m.core().ub_kib() * 1024) return Unimpl(n, "its chunks do not fit UB");

  const int64_t cores = req.max_blocks > 0 ? req.max_blocks : m.chip().ai_cores();
  const int64_t blocks = std::max<int64_t>(1, std::min(rows, cores));
  std::string t = absl::StrCat(".program ", KernelName(n), "\n.regs 4\n", KasmByteArgLine("x", *x), "\n",
                               KasmByteArgLine("y", *y), "\n");
  Emitter e;
  e.L("block_idx r0");
  e.L("block_dim r1");
  // The iota 0 .. kChunk-1 in fp32: the first repeat by masked vdups, the rest by adds.
  for (int64_t i = 63; i >= 0; --i) e.L("vdup.f32 ", Ub(iota), ", ", i, ", mask=", i + 1);
  for (int64_t rep = 1; rep < kChunk / 64; ++rep) e.L("vadds.f32 ", Ub(iota + rep * 256), ", ", Ub(iota), ", ", rep * 64);
  // Past the row: no index is larger (the first) or smaller (the last).
  e.L("vdup.f32 ", Ub(sentinel), ", ", last ? -1 : len, ", mask=8");
  e.Label("row");
  e.L("bge r0, ", rows, ", done");
  e.L("mul r2, r0, ", len * es);
  e.L("mul r3, r0, 8");
  const char* reduce = is_max ? "vcmax.f32" : "vcmin.f32";
  const char* pick = last ? "vcmax.f32" : "vcmin.f32";
  PipeSync p;
  auto vec = [&](Emitter& v, std::vector<std::string> reads, std::vector<std::string> writes) {
    p.AddLines(sim::Pipe::kVector, v.text(), reads, writes);
    v.text().clear();
  };
  auto nan_fill = [&](int64_t off, int64_t count, const std::string& res) {
    Emitter v;
    VecOver(v, "vdup.f32", whole(count), 4, off, 0, 0, -1, ", nan");
    vec(v, {}, {res});
  };
  // Loads chunk c (its last repeat NaN past the row) and gives its fp32 buffer.
  auto load = [&](int64_t c, int64_t* count) {
    const int64_t first = c * kChunk, cnt = std::min(kChunk, len - first);
    *count = cnt;
    const int s = static_cast<int>(c % 2);
    const std::string slot = absl::StrCat("UB.x", s);
    const int64_t f32buf = dt == DType::kF32 ? xin[s] : x32;
    const std::string f32res = dt == DType::kF32 ? slot : "UB.x32";
    if (cnt % 64) {
      Emitter v;
      v.L("vdup.f32 ", Ub(f32buf + cnt / 64 * 256), ", nan");
      vec(v, {}, {f32res});
    }
    p.Add(sim::Pipe::kMte2, absl::StrCat("copy_gm_ub ", Ub(xin[s]), ", ", Addr("x", 2, first * es), ", len=", cnt * es),
          {}, {slot});
    if (dt == DType::kF16) {
      Emitter v;
      VecOver(v, "vconv.f32.f16", cnt, 4, x32, 2, xin[s], -1, "");
      vec(v, {slot, "UB.x32"}, {"UB.x32"});
    }
    return std::make_pair(f32buf, f32res);
  };
  // The extreme of `count` values at `part` (a multiple of 64 padded with
  // NaN), level by level into part2 and back: leaves it at *at.
  auto tree = [&](const char* op, int64_t count, int64_t* result) {
    int64_t cur = part;
    for (int level = 0; count > 1; ++level) {
      const int64_t dst = level % 2 == 0 ? part2 : part, outs = (count + 63) / 64;
      nan_fill(dst, outs, "UB.part");
      Emitter v;
      v.L(op, " ", Ub(dst), ", ", Ub(cur), ", repeat=", outs);
      vec(v, {"UB.part"}, {"UB.part"});
      cur = dst;
      count = outs;
    }
    *result = cur;
  };
  // Pass 1: each repeat's extreme, then the row's, spread over a block.
  nan_fill(part, reps, "UB.part");
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t cnt = 0;
    auto [buf, res] = load(c, &cnt);
    Emitter v;
    v.L(reduce, " ", Ub(part + c * (kChunk / 64) * 4), ", ", Ub(buf), ", repeat=", whole(cnt) / 64);
    vec(v, {res, "UB.part"}, {"UB.part"});
  }
  int64_t extreme = part;
  tree(reduce, reps, &extreme);
  {
    Emitter v;
    v.L("vbrcb.f32 ", Ub(extb), ", ", Ub(extreme));
    vec(v, {"UB.part"}, {"UB.ext"});
  }
  // Pass 2: each repeat's first (last) index holding it, then the row's.
  nan_fill(part, reps, "UB.part");
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t cnt = 0;
    auto [buf, res] = load(c, &cnt);
    const int64_t k = whole(cnt) / 64;
    Emitter v;
    v.L("vadds.f32 ", Ub(idx), ", ", Ub(iota), ", ", c * kChunk, ", repeat=", k);
    v.L("vcmp.f32 ", Ub(bits), ", ", Ub(buf), ", ", Ub(extb), ", cmp=eq, repeat=", k,
        ", src1_blk_stride=0, src1_rep_stride=0");
    v.L("vsel.f32 ", Ub(cand), ", ", Ub(bits), ", ", Ub(idx), ", ", Ub(sentinel), ", repeat=", k,
        ", src1_blk_stride=0, src1_rep_stride=0");
    v.L(pick, " ", Ub(part + c * (kChunk / 64) * 4), ", ", Ub(cand), ", repeat=", k);
    vec(v, {res, "UB.ext", "UB.part"}, {"UB.part"});
  }
  int64_t index = part;
  tree(pick, reps, &index);
  {
    Emitter v;
    v.L("vdup.s32 ", Ub(out), ", 0, mask=8");
    v.L("vconv.s32.f32 ", Ub(out), ", ", Ub(index), ", round=rint, mask=1");
    vec(v, {"UB.part"}, {"UB.out"});
  }
  p.Add(sim::Pipe::kMte3, absl::StrCat("copy_ub_gm ", Addr("y", 3, 0), ", ", Ub(out), ", len=8"), {"UB.out"}, {});
  absl::StrAppend(&e.text(), p.Emit());
  e.L("pipe_barrier ALL");
  e.L("add r0, r0, r1");
  e.L("jmp row");
  e.Label("done");
  absl::StrAppend(&t, e.text());

  KILN_ASSIGN_OR_RETURN(GeneratedKernel k,
                        AssembledKernel(t, absl::StrCat(KernelName(n), ".kasm"), "argmax", blocks, "vector"));
  const double rate = UbLoadBytesPerCycle(m, blocks);
  const double cpr = sim::VectorCyclesPerRepeat(m, sim::Op::kVadd, 4);
  const double per_row = 2.0 * static_cast<double>(len * es) / rate + static_cast<double>(reps) * 5 * cpr +
                         4.0 * (m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles());
  k.estimated_cycles = std::ceil(static_cast<double>(rows) / blocks) * per_row + kChunk / 64 * cpr;
  k.plan = absl::StrFormat("%s of %d rows of %d over %d blocks: the extreme, then its %s index, in chunks of %d",
                           n.op(), rows, len, blocks, last ? "last" : "first", kChunk);
  return k;
}

}  // namespace kiln::target::npusim::vec
