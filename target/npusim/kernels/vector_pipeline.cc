//===- vector_pipeline.cc - Tiled, double-buffered vector kernel skeletons ===//
#include "target/npusim/kernels/vector_pipeline.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"

namespace kiln::target::npusim::vec {

std::string InArg(int i) { return absl::StrCat("in", i); }
std::string OutArg(int i) { return absl::StrCat("out", i); }

namespace {

// Bool tensors are one byte per element: s8 arguments of the tensor's dims.
std::optional<std::string> BoolArgLine(const std::string& name, const Value* v) {
  if (!v->type().is_tensor() || v->type().dtype() != DType::kBool || !v->type().shape().is_static())
    return std::nullopt;
  std::vector<int64_t> dims = v->type().shape().StaticDims();
  if (dims.empty()) dims = {1};
  return absl::StrCat(".arg ", name, " s8[", absl::StrJoin(dims, ","), "]");
}

}  // namespace

absl::Status AddNodeArgs(Kasm& k, const Node& node) {
  for (int i = 0; i < node.num_inputs(); ++i) {
    const Value* v = node.input(i);
    if (!v) continue;
    if (auto b = BoolArgLine(InArg(i), v)) {
      k.AddArg(*b);
      continue;
    }
    if (v->is_constant() && IsaOf(v) == sim::DType::kNone) {
      // A constant the kernel does not read (ReduceSum's i64 axes): its bytes.
      int64_t bytes = static_cast<int64_t>(v->constant().nbytes());
      k.AddArg(absl::StrCat(".arg ", InArg(i), " s8[", std::max<int64_t>(bytes, 1), "]"));
      continue;
    }
    auto line = KasmArgLine(InArg(i), *v);
    if (!line.ok()) return line.status();
    k.AddArg(*line);
  }
  for (int i = 0; i < node.num_outputs(); ++i) {
    const Value* v = node.output(i);
    if (auto b = BoolArgLine(OutArg(i), v)) {
      k.AddArg(*b);
      continue;
    }
    if (!v->has_uses() && i > 0 && IsaOf(v) == sim::DType::kNone && v->type().shape().is_static()) {
      // An unused extra output the kernel does not write (MaxPool's i64 Indices): its bytes.
      k.AddArg(KasmByteArgLine(OutArg(i), *v));
      continue;
    }
    auto line = KasmArgLine(OutArg(i), *node.output(i));
    if (!line.ok()) return line.status();
    k.AddArg(*line);
  }
  return absl::OkStatus();
}

sim::DType IsaOf(const Value* v) {
  if (!v || !v->type().is_tensor()) return sim::DType::kNone;
  return IsaDTypeOf(v->type().dtype());
}

sim::DType ComputeOf(sim::DType t) { return t == sim::DType::kS32 ? sim::DType::kS32 : sim::DType::kF32; }

namespace {

constexpr const char* kV = "VECTOR";
constexpr const char* kM2 = "MTE2";
constexpr const char* kM3 = "MTE3";

}  // namespace

int64_t UbBytes(const sim::Machine& m) { return m.core().ub_kib() * 1024; }

// The most blocks a kernel launches: one per core, or the request's limit.
int64_t Cores(const KernelRequest& req) {
  int64_t c = req.machine->chip().ai_cores();
  return req.max_blocks > 0 ? std::min<int64_t>(c, req.max_blocks) : c;
}

// Splits `total` units over at most `cores` blocks, each taking at least
// `min_share` units (a multiple of `grain`): (blocks, units per block).
std::pair<int64_t, int64_t> SplitBlocks(int64_t total, int64_t cores, int64_t min_share, int64_t grain) {
  int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(cores, total / std::max<int64_t>(min_share, 1)));
  int64_t per = RoundUp(CeilDiv(total, blocks), grain);
  blocks = CeilDiv(total, per);
  return {blocks, per};
}

// The two-credit handshake of the ping-pong slots.
void Prologue(Kasm& k) {
  for (int i = 0; i < 2; ++i) k.SetFlag(kV, kM2, 0);
  for (int i = 0; i < 2; ++i) k.SetFlag(kM3, kV, 1);
}
void Epilogue(Kasm& k) {
  for (int i = 0; i < 2; ++i) k.WaitFlag(kV, kM2, 0);
  for (int i = 0; i < 2; ++i) k.WaitFlag(kM3, kV, 1);
}

// Emits `count` units of work for this block: a loop of full tiles of
// `tile` units and a tail tile. emit_tile(n) emits one tile of n units and
// advances the walking registers; `slot`/`slot_size` toggle the ping-pong.
void TileLoop(Kasm& k, int64_t count, int64_t tile, int slot, int slot_size,
              const std::function<void(int64_t)>& emit_tile) {
  int64_t full = count / tile, tail = count % tile;
  auto one = [&](int64_t n) {
    emit_tile(n);
    k.AluR("sub", slot, slot_size, slot);
  };
  if (full == 1) {
    one(tile);
  } else if (full > 1) {
    int i = k.Reg();
    k.Mov(i, 0);
    std::string loop = k.NewLabel("tile");
    k.Label(loop);
    one(tile);
    k.Alu("add", i, i, 1);
    k.Op(absl::StrCat("blt r", i, ", ", full, ", ", loop));
  }
  if (tail) one(tail);
}

// Per-block bodies: the first blocks run body(per), the last body(last).
void PerBlock(Kasm& k, int blk, int64_t blocks, int64_t per, int64_t last, const std::function<void(int64_t)>& body) {
  if (blocks == 1 || last == per) {
    body(blocks == 1 ? last : per);
    return;
  }
  std::string l_last = k.NewLabel("last_block"), l_end = k.NewLabel("blocks_done");
  k.Op(absl::StrCat("bge r", blk, ", ", blocks - 1, ", ", l_last));
  body(per);
  k.Op(absl::StrCat("jmp ", l_end));
  k.Label(l_last);
  body(last);
  k.Label(l_end);
}

//===--- Flat kernels -------------------------------------------------------===//

absl::StatusOr<GeneratedKernel> EmitFlat(const KernelRequest& req, const FlatSpec& s) {
  const sim::Machine& m = *req.machine;
  Kasm k(s.name, m);
  KILN_RETURN_IF_ERROR(AddNodeArgs(k, *req.node));
  for (const std::string& line : s.more_args) k.AddArg(line);
  const int ct_es = sim::DTypeSize(s.ct);
  std::vector<FlatTensor> outs = {s.out};
  outs.insert(outs.end(), s.more_outs.begin(), s.more_outs.end());
  // Per-element bytes of the layout, and fixed bytes.
  int64_t slot_per_elem = 0, static_per_elem = 0;
  const bool convert = !s.raw_copy && !s.manual;
  for (const FlatTensor& t : s.ins) {
    slot_per_elem += sim::DTypeSize(t.dt);
    if (convert && t.dt != s.ct) static_per_elem += ct_es;
  }
  for (const FlatTensor& t : outs) {
    slot_per_elem += sim::DTypeSize(t.dt);
    if (convert && t.dt != s.ct) static_per_elem += ct_es;
  }
  static_per_elem += s.temps * ct_es;
  int64_t fixed = 1024 + 512 * static_cast<int64_t>(s.scalars.size()) + (s.manual ? 512 * s.temps : 0);
  int64_t per_elem = 2 * slot_per_elem + static_per_elem;
  int64_t cap = (UbBytes(m) - fixed) / per_elem / 128 * 128;
  if (cap < 128) return absl::ResourceExhaustedError(absl::StrCat(s.what, ": a tile does not fit UB"));
  // Periodic inputs: tiles divide the period, so no tile wraps around it.
  int64_t period = 0;
  for (const FlatTensor& t : s.ins)
    if (t.period > 0) {
      if (period > 0 && t.period != period)
        return absl::UnimplementedError(absl::StrCat(s.what, ": inputs repeat with different periods"));
      period = t.period;
    }
  int64_t grain = 128, tile_cap = std::min<int64_t>(cap, 16384);
  if (period > 0) {
    grain = 0;
    for (int64_t d = std::min(period, tile_cap); d >= 1; --d)
      if (period % d == 0) {
        grain = d;
        break;
      }
    if (grain < std::min<int64_t>(period, 256))
      return absl::UnimplementedError(
          absl::StrCat(s.what, ": the broadcast period ", period, " has no divisor that makes a useful tile"));
  }
  // A block per core down to 1,024 elements, or to one tile of a period
  // (whose tiles are fixed and may be smaller: each costs a round trip).
  const auto split = SplitBlocks(s.numel, Cores(req), period > 0 ? grain : std::max<int64_t>(grain, 1024), grain);
  const int64_t blocks = split.first, per = split.second;
  int64_t last = s.numel - (blocks - 1) * per;
  int64_t tile = period > 0 ? grain : std::min<int64_t>({cap, 16384, RoundUp(per, 128)});

  // UB layout.
  int64_t off = 0;
  std::vector<int64_t> in_off;
  for (const FlatTensor& t : s.ins) {
    in_off.push_back(off);
    off += RoundUp(tile * sim::DTypeSize(t.dt), 256);
  }
  std::vector<int64_t> out_off;
  for (const FlatTensor& t : outs) {
    out_off.push_back(off);
    off += RoundUp(tile * sim::DTypeSize(t.dt), 256);
  }
  const int64_t slot_bytes = off;
  off = 2 * slot_bytes;
  std::vector<int64_t> cin_off(s.ins.size(), -1);
  if (convert)
    for (size_t i = 0; i < s.ins.size(); ++i)
      if (s.ins[i].dt != s.ct) {
        cin_off[i] = off;
        off += RoundUp(tile * ct_es, 256);
      }
  std::vector<int64_t> cout_off(outs.size(), -1);
  if (convert)
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i].dt != s.ct) {
        cout_off[i] = off;
        off += RoundUp(tile * ct_es, 256);
      }
  std::vector<Ub> temps;
  for (int i = 0; i < s.temps; ++i) {
    temps.push_back(Ub{-1, off});
    off += RoundUp(tile * ct_es, 256) + (s.manual ? 512 : 0);
  }
  std::vector<VArg> scalar_args;
  std::vector<int64_t> scalar_stage;
  for (size_t i = 0; i < s.scalars.size(); ++i) {
    scalar_stage.push_back(off);
    scalar_args.push_back(Bcast(Ub{-1, off + 256}));
    off += 512;
  }

  const int blk = k.Reg(), elem = k.Reg(), slot = k.Reg(), slot_size = k.Reg();
  std::map<int, int> byte_reg;  // element size -> register of the byte offset
  for (const FlatTensor& t : s.ins) byte_reg[sim::DTypeSize(t.dt)] = -1;
  for (const FlatTensor& t : outs) byte_reg[sim::DTypeSize(t.dt)] = -1;
  for (auto& [es, r] : byte_reg) r = k.Reg();
  std::vector<int> period_reg(s.ins.size(), -1);
  for (size_t i = 0; i < s.ins.size(); ++i)
    if (s.ins[i].period > 0) period_reg[i] = k.Reg();

  k.Op(absl::StrCat("block_idx r", blk));
  k.Alu("mul", elem, blk, per);
  k.Mov(slot, 0);
  k.Mov(slot_size, slot_bytes);
  // Scalar inputs: one element each, converted and spread over a block.
  // A one-byte scalar (a bool) of a manual kernel is its byte in a zeroed
  // word, as the kernel's own unpacking of bools reads it.
  if (!s.scalars.empty()) {
    bool bytes = false;
    for (size_t i = 0; i < s.scalars.size(); ++i)
      if (s.manual && sim::DTypeSize(s.scalars[i].dt) == 1) {
        k.Vec("vdup", sim::DType::kS32, V(Ub{-1, scalar_stage[i]}), {}, 8, 0.0);
        bytes = true;
      }
    if (bytes) {
      k.SetFlag(kV, kM2, 3);
      k.WaitFlag(kV, kM2, 3);
    }
    for (size_t i = 0; i < s.scalars.size(); ++i)
      k.CopyIn(Ub{-1, scalar_stage[i]}, s.scalars[i].arg, -1, 0, sim::DTypeSize(s.scalars[i].dt));
    k.SetFlag(kM2, kV, 2);
    k.WaitFlag(kM2, kV, 2);
    for (size_t i = 0; i < s.scalars.size(); ++i) {
      Ub src{-1, scalar_stage[i]};
      if (s.manual) {
        int es = sim::DTypeSize(s.scalars[i].dt);
        if (es == 1) {
          scalar_args[i] = V(src);
          continue;
        }
        k.Brcb(es == 4 ? sim::DType::kF32 : sim::DType::kF16, scalar_args[i].at, src);
        continue;
      }
      if (s.scalars[i].dt != s.ct) {
        k.Conv(s.ct, s.scalars[i].dt, V(Ub{-1, scalar_stage[i] + 128}), V(src), 1);
        src = Ub{-1, scalar_stage[i] + 128};
      }
      k.Brcb(s.ct, scalar_args[i].at, src);
    }
  }
  // Manual kernels read one-byte (bool) inputs a word or two at a time: the
  // bytes past a tile's end must read as zero, so their slots start zeroed
  // and are zeroed again after each tile.
  auto zero_bytes = [&](int slot_reg_or_none, int which) {
    for (size_t i = 0; i < s.ins.size(); ++i)
      if (s.manual && sim::DTypeSize(s.ins[i].dt) == 1)
        k.Vec("vdup", sim::DType::kS32, V(Ub{slot_reg_or_none, in_off[i] + which * slot_bytes}), {},
              RoundUp(tile, 256) / 4, 0.0);
  };
  zero_bytes(-1, 0);
  zero_bytes(-1, 1);
  Prologue(k);
  double vec_before = k.vector_cycles();
  double tile_vec = 0;
  auto emit_tile = [&](int64_t n) {
    for (auto& [es, r] : byte_reg) k.Alu("mul", r, elem, es);
    for (size_t i = 0; i < s.ins.size(); ++i)
      if (period_reg[i] >= 0) {
        k.Alu("rem", period_reg[i], elem, s.ins[i].period);
        k.Alu("mul", period_reg[i], period_reg[i], sim::DTypeSize(s.ins[i].dt));
      }
    k.WaitFlag(kV, kM2, 0);
    for (size_t i = 0; i < s.ins.size(); ++i) {
      int es = sim::DTypeSize(s.ins[i].dt);
      int reg = period_reg[i] >= 0 ? period_reg[i] : byte_reg[es];
      k.CopyIn(Ub{slot, in_off[i]}, s.ins[i].arg, reg, 0, n * es);
    }
    k.SetFlag(kM2, kV, 0);
    k.WaitFlag(kM2, kV, 0);
    k.WaitFlag(kM3, kV, 1);
    double v0 = k.vector_cycles();
    if (s.raw_copy) {
      k.CopyBits(s.ins[0].dt, Ub{slot, out_off[0]}, Ub{slot, in_off[0]}, n);
    } else {
      FlatOperands ops;
      ops.ct = s.ct;
      for (size_t i = 0; i < s.ins.size(); ++i) {
        if (cin_off[i] >= 0) {
          k.Conv(s.ct, s.ins[i].dt, V(Ub{-1, cin_off[i]}), V(Ub{slot, in_off[i]}), n);
          ops.ins.push_back(V(Ub{-1, cin_off[i]}));
        } else {
          ops.ins.push_back(V(Ub{slot, in_off[i]}));
        }
      }
      ops.scalars = scalar_args;
      for (size_t i = 0; i < outs.size(); ++i) {
        VArg at = cout_off[i] >= 0 ? V(Ub{-1, cout_off[i]}) : V(Ub{slot, out_off[i]});
        if (i == 0) ops.out = at;
        else ops.more_outs.push_back(at);
      }
      ops.temps = temps;
      s.body(k, ops, n);
      zero_bytes(slot, 0);
      for (size_t i = 0; i < outs.size(); ++i)
        if (cout_off[i] >= 0) {
          bool to_int = outs[i].dt == sim::DType::kS32;
          k.Conv(outs[i].dt, s.ct, V(Ub{slot, out_off[i]}), V(Ub{-1, cout_off[i]}), n, to_int ? "trunc" : "");
        }
    }
    tile_vec = std::max(tile_vec, k.vector_cycles() - v0);
    k.SetFlag(kV, kM2, 0);
    k.SetFlag(kV, kM3, 1);
    k.WaitFlag(kV, kM3, 1);
    for (size_t i = 0; i < outs.size(); ++i)
      k.CopyOut(outs[i].arg, byte_reg[sim::DTypeSize(outs[i].dt)], 0, Ub{slot, out_off[i]},
                n * sim::DTypeSize(outs[i].dt));
    k.SetFlag(kM3, kV, 1);
    k.Alu("add", elem, elem, n);
  };
  PerBlock(k, blk, blocks, per, last, [&](int64_t count) { TileLoop(k, count, tile, slot, slot_size, emit_tile); });
  Epilogue(k);
  (void)vec_before;

  GeneratedKernel g;
  KILN_ASSIGN_OR_RETURN(g.program, k.Finish());
  g.block_dim = blocks;
  g.engine = "vector";
  // Estimate: the larger of the chip's HBM time, one core's DMA time and one
  // core's vector time, plus the latency of the first load and last store.
  int64_t elem_bytes = 0;
  for (const FlatTensor& t : s.ins) elem_bytes += sim::DTypeSize(t.dt);
  for (const FlatTensor& t : outs) elem_bytes += sim::DTypeSize(t.dt);
  double hbm = static_cast<double>(s.numel * elem_bytes) / HbmBytesPerCycle(m);
  double core_dma = static_cast<double>(per * elem_bytes) / sim::GmUbBytesPerCycle(m);
  double tiles = static_cast<double>(CeilDiv(per, tile));
  double core_vec = tiles * tile_vec;
  double lat = 2.0 * static_cast<double>(m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles());
  // Each tile's load holds MTE2 until its data lands (the hand-off after
  // it waits for the HBM latency), and each store MTE3: many small tiles (a
  // broadcast period's) cost a round trip each, which two slots do not hide.
  int64_t in_bytes = 0, out_bytes = 0;
  for (const FlatTensor& t : s.ins) in_bytes += sim::DTypeSize(t.dt);
  for (const FlatTensor& t : outs) out_bytes += sim::DTypeSize(t.dt);
  const double hbm_lat = static_cast<double>(m.chip().hbm_latency_cycles());
  const double tile_in = hbm_lat + static_cast<double>(m.core().mte2_latency_cycles()) +
                         static_cast<double>(tile * in_bytes) / sim::GmUbBytesPerCycle(m);
  const double tile_out = hbm_lat + static_cast<double>(m.core().mte3_latency_cycles()) +
                          static_cast<double>(tile * out_bytes) / m.core().mte3_bytes_per_cycle();
  const double chain = tiles * std::max(tile_in, tile_out) + std::min(tile_in, tile_out);
  g.estimated_cycles = std::max(std::max({hbm, core_dma, core_vec}) + lat, chain) + tile_vec;
  g.plan = absl::StrCat(s.what, ": flat ", s.numel, " elements over ", blocks, " blocks of ", per, ", tiles of ",
                        tile, " double-buffered in UB (", 2 * slot_bytes / 1024, " KiB), compute ",
                        sim::DTypeName(s.ct));
  return g;
}

//===--- Row kernels --------------------------------------------------------===//

absl::StatusOr<GeneratedKernel> EmitRows(const KernelRequest& req, const RowSpec& s) {
  const sim::Machine& m = *req.machine;
  Kasm k(s.name, m);
  KILN_RETURN_IF_ERROR(AddNodeArgs(k, *req.node));
  for (const std::string& line : s.more_args) k.AddArg(line);
  const int ct_es = sim::DTypeSize(s.ct);
  std::vector<RowInput> outs = {{s.out, s.out_cols}};
  outs.insert(outs.end(), s.more_outs.begin(), s.more_outs.end());
  int64_t max_cols = 0;
  std::vector<int64_t> pitch, out_pitch;
  int64_t slot_per_row = 0;
  for (const RowInput& in : s.ins) {
    pitch.push_back(RoundUp(in.cols * sim::DTypeSize(in.t.dt), 32));
    slot_per_row += pitch.back();
    max_cols = std::max(max_cols, in.cols);
  }
  for (const RowInput& o : outs) {
    out_pitch.push_back(RoundUp(o.cols * sim::DTypeSize(o.t.dt), 32));
    slot_per_row += out_pitch.back();
    max_cols = std::max(max_cols, o.cols);
  }
  // Static buffers: one converted row per converted input, the output row,
  // temps (each a row plus a 256-byte block), the resident data.
  int64_t row_ct = RoundUp(max_cols * ct_es, 256);
  int64_t fixed = 1024 + RoundUp(s.resident_bytes, 256) + s.temps * (row_ct + 256);
  for (const RowInput& in : s.ins)
    if (in.t.dt != s.ct) fixed += row_ct;
  for (const RowInput& o : outs)
    if (o.t.dt != s.ct) fixed += row_ct;
  int64_t avail = UbBytes(m) - fixed;
  int64_t cap = avail / (2 * slot_per_row);
  if (cap < 1)
    return absl::ResourceExhaustedError(
        absl::StrCat(s.what, ": a row of ", max_cols, " elements does not fit UB with its buffers"));
  cap = std::min<int64_t>({cap, 4095, 1024});
  // A block per core down to 256 elements of rows: a row's instructions
  // wait out their latency one after the other, so rows spread.
  int64_t min_rows = std::max<int64_t>(1, 256 / std::max<int64_t>(max_cols, 1));
  const auto split = SplitBlocks(s.rows, Cores(req), min_rows, 1);
  const int64_t blocks = split.first, per = split.second;
  int64_t last = s.rows - (blocks - 1) * per;
  int64_t tile = std::min(cap, per);

  // UB layout.
  int64_t off = 0;
  std::vector<int64_t> in_off;
  for (size_t i = 0; i < s.ins.size(); ++i) {
    in_off.push_back(off);
    off += RoundUp(tile * pitch[i], 32);
  }
  std::vector<int64_t> out_off;
  for (size_t i = 0; i < outs.size(); ++i) {
    out_off.push_back(off);
    off += RoundUp(tile * out_pitch[i], 32);
  }
  off = RoundUp(off, 256);
  const int64_t slot_bytes = off;
  off = 2 * slot_bytes;
  std::vector<int64_t> cin_off(s.ins.size(), -1);
  for (size_t i = 0; i < s.ins.size(); ++i)
    if (s.ins[i].t.dt != s.ct) {
      cin_off[i] = off;
      off += row_ct;
    }
  std::vector<int64_t> cout_off(outs.size(), -1);
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].t.dt != s.ct) {
      cout_off[i] = off;
      off += row_ct;
    }
  std::vector<Ub> temps;
  for (int i = 0; i < s.temps; ++i) {
    temps.push_back(Ub{-1, off});
    off += row_ct + 256;
  }
  Ub resident{-1, off};
  off += RoundUp(s.resident_bytes, 256);

  const int blk = k.Reg(), row = k.Reg(), slot = k.Reg(), slot_size = k.Reg(), j = k.Reg();
  std::vector<int> in_reg, ptr;
  for (size_t i = 0; i < s.ins.size(); ++i) in_reg.push_back(k.Reg());
  std::vector<int> out_reg, out_ptr;
  for (size_t i = 0; i < outs.size(); ++i) out_reg.push_back(k.Reg());
  for (size_t i = 0; i < s.ins.size(); ++i) ptr.push_back(k.Reg());
  for (size_t i = 0; i < outs.size(); ++i) out_ptr.push_back(k.Reg());

  k.Op(absl::StrCat("block_idx r", blk));
  k.Alu("mul", row, blk, per);
  k.Mov(slot, 0);
  k.Mov(slot_size, slot_bytes);
  const int64_t loads_before = k.copies_in();
  if (s.prologue) s.prologue(k, resident);
  // Resident data the prologue loads: the rows wait out its round trip.
  const bool prologue_loads = k.copies_in() > loads_before;
  Prologue(k);
  double row_vec = 0;
  auto emit_tile = [&](int64_t n) {
    for (size_t i = 0; i < s.ins.size(); ++i)
      k.Alu("mul", in_reg[i], row, s.ins[i].cols * sim::DTypeSize(s.ins[i].t.dt));
    for (size_t i = 0; i < outs.size(); ++i)
      k.Alu("mul", out_reg[i], row, outs[i].cols * sim::DTypeSize(outs[i].t.dt));
    k.WaitFlag(kV, kM2, 0);
    for (size_t i = 0; i < s.ins.size(); ++i) {
      int64_t len = s.ins[i].cols * sim::DTypeSize(s.ins[i].t.dt);
      if (len == pitch[i]) k.CopyIn(Ub{slot, in_off[i]}, s.ins[i].t.arg, in_reg[i], 0, n * len);
      else k.CopyIn(Ub{slot, in_off[i]}, s.ins[i].t.arg, in_reg[i], 0, len, n, len, pitch[i]);
    }
    k.SetFlag(kM2, kV, 0);
    k.WaitFlag(kM2, kV, 0);
    k.WaitFlag(kM3, kV, 1);
    // The row loop: ptr registers walk the rows of this slot.
    for (size_t i = 0; i < s.ins.size(); ++i) k.Alu("add", ptr[i], slot, in_off[i]);
    for (size_t i = 0; i < outs.size(); ++i) k.Alu("add", out_ptr[i], slot, out_off[i]);
    k.Mov(j, 0);
    std::string loop = k.NewLabel("row");
    k.Label(loop);
    double v0 = k.vector_cycles();
    RowOperands ops;
    ops.ct = s.ct;
    ops.row = row;
    for (size_t i = 0; i < s.ins.size(); ++i) {
      if (cin_off[i] >= 0) {
        k.Conv(s.ct, s.ins[i].t.dt, V(Ub{-1, cin_off[i]}), V(Ub{ptr[i], 0}), s.ins[i].cols);
        ops.ins.push_back(Ub{-1, cin_off[i]});
      } else {
        ops.ins.push_back(Ub{ptr[i], 0});
      }
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      Ub at = cout_off[i] >= 0 ? Ub{-1, cout_off[i]} : Ub{out_ptr[i], 0};
      if (i == 0) ops.out = at;
      else ops.more_outs.push_back(at);
    }
    ops.temps = temps;
    s.body(k, ops, resident);
    for (size_t i = 0; i < outs.size(); ++i)
      if (cout_off[i] >= 0) {
        bool to_int = outs[i].t.dt == sim::DType::kS32;
        k.Conv(outs[i].t.dt, s.ct, V(Ub{out_ptr[i], 0}), V(Ub{-1, cout_off[i]}), outs[i].cols, to_int ? "trunc" : "");
      }
    row_vec = k.vector_cycles() - v0;
    for (size_t i = 0; i < s.ins.size(); ++i) k.Alu("add", ptr[i], ptr[i], pitch[i]);
    for (size_t i = 0; i < outs.size(); ++i) k.Alu("add", out_ptr[i], out_ptr[i], out_pitch[i]);
    k.Alu("add", row, row, 1);
    k.Alu("add", j, j, 1);
    k.Op(absl::StrCat("blt r", j, ", ", n, ", ", loop));
    k.SetFlag(kV, kM2, 0);
    k.SetFlag(kV, kM3, 1);
    k.WaitFlag(kV, kM3, 1);
    for (size_t i = 0; i < outs.size(); ++i) {
      int64_t len = outs[i].cols * sim::DTypeSize(outs[i].t.dt);
      if (len == out_pitch[i]) k.CopyOut(outs[i].t.arg, out_reg[i], 0, Ub{slot, out_off[i]}, n * len);
      else k.CopyOut(outs[i].t.arg, out_reg[i], 0, Ub{slot, out_off[i]}, len, n, out_pitch[i], len);
    }
    k.SetFlag(kM3, kV, 1);
  };
  PerBlock(k, blk, blocks, per, last, [&](int64_t count) { TileLoop(k, count, tile, slot, slot_size, emit_tile); });
  Epilogue(k);

  GeneratedKernel g;
  KILN_ASSIGN_OR_RETURN(g.program, k.Finish());
  g.block_dim = blocks;
  g.engine = "vector";
  int64_t row_bytes = 0;
  for (const RowInput& in : s.ins) row_bytes += in.cols * sim::DTypeSize(in.t.dt);
  for (const RowInput& o : outs) row_bytes += o.cols * sim::DTypeSize(o.t.dt);
  double hbm = static_cast<double>(s.rows * row_bytes) / HbmBytesPerCycle(m);
  double core_dma = static_cast<double>(per * row_bytes) / sim::GmUbBytesPerCycle(m);
  // Each row also costs its loop's scalar instructions (about 4 + inputs).
  const double per_row = row_vec + 4 + static_cast<double>(s.ins.size());
  double core_vec = static_cast<double>(per) * per_row;
  double lat = 2.0 * static_cast<double>(m.chip().hbm_latency_cycles() + m.core().mte2_latency_cycles());
  // As for flat kernels: plus one tile's compute, which no copy overlaps
  // (the first tile's wait for its load, the last tile's before its store).
  g.estimated_cycles = std::max({hbm, core_dma, core_vec}) + lat + static_cast<double>(tile) * per_row +
                       (prologue_loads ? lat / 2 : 0);
  g.plan = absl::StrCat(s.what, ": ", s.rows, " rows of ", max_cols, " over ", blocks, " blocks of ", per,
                        " rows, tiles of ", tile, " rows double-buffered in UB (", 2 * slot_bytes / 1024,
                        " KiB), compute ", sim::DTypeName(s.ct), " row by row");
  return g;
}

}  // namespace kiln::target::npusim::vec
