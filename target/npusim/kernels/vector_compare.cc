//===- vector_compare.cc - Comparisons, Where and bool logic --------------===//
//
// Bool tensors are one byte per element (0 or 1) in global memory and s8
// program arguments. The vector unit has no byte arithmetic and no byte
// conversions, and its operands move in whole 32-byte blocks, so bytes and
// the bitmasks of vcmp / vsel meet through fp16 subnormals, whose bit
// patterns are small integers:
//
// bytes -> values: two bool bytes b0, b1 read as one fp16 are the subnormal
//   (b0 + 256 b1) * 2^-24; vconv to f32 and x 2^24 gives b0 + 256 b1, which
//   s32 arithmetic turns into b0 + 65536 b1 (b1 = min(max(v - 255, 0), 1);
//   v + 65280 b1); that word read as two fp16 is the pair of subnormals
//   b0 * 2^-24, b1 * 2^-24, one per element, in element order. vconv to f32
//   gives each element's b * 2^-24; vcmp gt 0 gives the bitmask.
// values -> bytes: vsel of 2^-24 / 0 (or b * 2^-24 from the logic ops),
//   vconv to fp16 gives one 0x0001 / 0x0000 half per element; two of them
//   read as an s32 word are c0 + 65536 c1, which s32 arithmetic turns into
//   c0 + 256 c1; vconv to f32, x 2^-24 and vconv to fp16 writes the half
//   whose bytes are c0, c1.
//
// About 12 vector instructions per tile for each conversion, each over half
// or a quarter of the elements: cheap next to the DMA.
//
// Inputs are the same size as the output, one element (broadcast), or an
// outer broadcast that repeats every `period` elements ([1,1,S,S] against
// [B,H,S,S], GPT-2's causal mask).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"
#include "target/npusim/kernels/vector_internal.h"
#include "target/npusim/kernels/vector_pipeline.h"

namespace kiln::target::npusim::vec {
namespace {

using sim::DType;

constexpr double kTiny = 5.9604644775390625e-08;  // 2^-24, the fp16 subnormal unit

// vcmp / vsel over whole repeats covering n elements (the lanes past n are
// junk, inside the 256-byte rounded buffers); the mask advances 32-byte
// aligned (252 repeats per instruction).
void Cmp(Kasm& k, DType dt, absl::string_view mode, Ub mask, VArg a, VArg b, int64_t n) {
  int es = sim::DTypeSize(dt);
  int64_t epr = 256 / es, reps = CeilDiv(n, epr);
  std::string mn = absl::StrCat("vcmp.", sim::DTypeName(dt));
  for (int64_t r = 0; r < reps; r += 252) {
    int64_t rep = std::min<int64_t>(252, reps - r);
    std::string extra = absl::StrCat("cmp=", mode);
    for (int i = 0; i < 2; ++i) {
      const VArg& x = i == 0 ? a : b;
      if (x.bcast) absl::StrAppend(&extra, ", src", i, "_blk_stride=0, src", i, "_rep_stride=0");
    }
    Ub ua = a.bcast ? a.at : a.at.Plus(r * 256), ub = b.bcast ? b.at : b.at.Plus(r * 256);
    k.Raw(mn, mask.Plus(r * epr / 8), {ua, ub}, rep, epr, epr, extra);
  }
}

void Sel(Kasm& k, DType dt, Ub dst, Ub mask, VArg a, VArg b, int64_t n) {
  int es = sim::DTypeSize(dt);
  int64_t epr = 256 / es, reps = CeilDiv(n, epr);
  std::string mn = absl::StrCat("vsel.", sim::DTypeName(dt));
  for (int64_t r = 0; r < reps; r += 252) {
    int64_t rep = std::min<int64_t>(252, reps - r);
    std::string extra;
    for (int i = 0; i < 2; ++i) {
      const VArg& x = i == 0 ? a : b;
      if (x.bcast) absl::StrAppend(&extra, extra.empty() ? "" : ", ", "src", i, "_blk_stride=0, src", i, "_rep_stride=0");
    }
    Ub ua = a.bcast ? a.at : a.at.Plus(r * 256), ub = b.bcast ? b.at : b.at.Plus(r * 256);
    k.Raw(mn, dst.Plus(r * 256), {mask.Plus(r * epr / 8), ua, ub}, rep, epr, epr, extra);
  }
}

// Bool bytes at `bytes` -> f32 b * 2^-24 at t1 (n elements); t2 scratch.
void Unpack(Kasm& k, Ub bytes, int64_t n, Ub t1, Ub t2) {
  int64_t h = CeilDiv(n, 2);
  k.Conv(DType::kF32, DType::kF16, V(t1), V(bytes), h);
  k.Vec("vmuls", DType::kF32, V(t1), {V(t1)}, h, 16777216.0);
  k.Conv(DType::kS32, DType::kF32, V(t2), V(t1), h, "trunc");
  k.Vec("vadds", DType::kS32, V(t1), {V(t2)}, h, -255);
  k.Vec("vmaxs", DType::kS32, V(t1), {V(t1)}, h, 0);
  k.Vec("vmins", DType::kS32, V(t1), {V(t1)}, h, 1);
  k.Vec("vmuls", DType::kS32, V(t1), {V(t1)}, h, 65280);
  k.Vec("vadd", DType::kS32, V(t2), {V(t2), V(t1)}, h);
  k.Conv(DType::kF32, DType::kF16, V(t1), V(t2), 2 * h);
}

// f32 values in {0, 2^-24} at t1 (n elements, and element n too when n is
// odd) -> bool bytes at `bytes`; t2 scratch.
void Pack(Kasm& k, Ub t1, int64_t n, Ub bytes, Ub t2) {
  int64_t h = CeilDiv(n, 2);
  k.Conv(DType::kF16, DType::kF32, V(t2), V(t1), 2 * h);
  k.Vec("vadds", DType::kS32, V(t1), {V(t2)}, h, -65535);
  k.Vec("vmaxs", DType::kS32, V(t1), {V(t1)}, h, 0);
  k.Vec("vmins", DType::kS32, V(t1), {V(t1)}, h, 1);
  k.Vec("vmuls", DType::kS32, V(t1), {V(t1)}, h, 65280);
  k.Vec("vsub", DType::kS32, V(t2), {V(t2), V(t1)}, h);
  k.Conv(DType::kF32, DType::kS32, V(t1), V(t2), h);
  k.Vec("vmuls", DType::kF32, V(t1), {V(t1)}, h, kTiny);
  k.Conv(DType::kF16, DType::kF32, V(bytes), V(t1), h);
}

std::string DimsText(const Dims& d) { return absl::StrCat("[", absl::StrJoin(d, ","), "]"); }

// How input `v` meets the output: 0 full, 1 scalar, 2 periodic (period set).
absl::StatusOr<int> Role(const Node& node, const Value* v, const Dims& out, int64_t* period) {
  Dims d = v->type().shape().StaticDims();
  int64_t n = v->type().shape().NumElements(), total = 1;
  for (int64_t x : out) total *= x;
  if (n == total) return 0;
  if (n == 1) return 1;
  // Trailing dims equal to the output's, leading ones all 1.
  size_t r = out.size();
  if (d.size() <= r) {
    size_t off = r - d.size();
    size_t first = 0;
    while (first < d.size() && d[first] == 1) ++first;
    bool ok = true;
    for (size_t i = first; i < d.size(); ++i) ok &= d[i] == out[off + i];
    if (ok) {
      *period = n;
      return 2;
    }
  }
  return Unimpl(node, absl::StrCat("broadcast of ", DimsText(d), " to ", DimsText(out),
                                   " (only same-size, one-element and outer broadcasts)"));
}

const char* CmpMode(const std::string& op) {
  if (op == "Equal") return "eq";
  if (op == "Less") return "lt";
  if (op == "Greater") return "gt";
  if (op == "LessOrEqual") return "le";
  if (op == "GreaterOrEqual") return "ge";
  return nullptr;
}

}  // namespace

bool IsCompareOp(const Node& n) {
  if (!n.domain().empty()) return false;
  const std::string& op = n.op();
  return CmpMode(op) || op == "Where" || op == "Not" || op == "And" || op == "Or" || op == "Xor";
}

absl::StatusOr<GeneratedKernel> GenerateCompare(const KernelRequest& req) {
  const Node& node = *req.node;
  const std::string& op = node.op();
  for (const Value* v : node.inputs())
    if (!v || !v->type().is_tensor() || !v->type().shape().is_static())
      return absl::FailedPreconditionError(absl::StrCat(node.QualifiedOp(), ": shapes are not static"));
  const Value* y = node.output(0);
  if (!y->type().shape().is_static())
    return absl::FailedPreconditionError(absl::StrCat(node.QualifiedOp(), ": shapes are not static"));
  Dims out = y->type().shape().StaticDims();
  int64_t numel = y->type().shape().NumElements();
  if (numel == 0) return Unimpl(node, "empty tensor");
  auto is_bool = [](const Value* v) { return v->type().dtype() == kiln::DType::kBool; };

  FlatSpec s;
  s.name = KernelName(node);
  s.numel = numel;
  s.manual = true;
  s.out = {OutArg(0), IsaOf(y)};
  if (is_bool(y)) s.out.dt = DType::kS8;
  // Inputs: full and periodic tensors are tiles, scalars broadcast blocks.
  std::vector<int> where;  // per input: index into ins (>= 0) or ~index into scalars
  for (int i = 0; i < node.num_inputs(); ++i) {
    const Value* v = node.input(i);
    DType dt = is_bool(v) ? DType::kS8 : IsaOf(v);
    if (dt == DType::kNone) return Unimpl(node, absl::StrCat("input ", i, " has a dtype the AI cores do not hold"));
    int64_t period = 0;
    KILN_ASSIGN_OR_RETURN(int role, Role(node, v, out, &period));
    if (role == 1) {
      if (dt == DType::kS8 && !(op == "Where" && i == 0)) return Unimpl(node, "a one-element bool input");
      where.push_back(~static_cast<int>(s.scalars.size()));
      s.scalars.push_back({InArg(i), dt});
    } else {
      where.push_back(static_cast<int>(s.ins.size()));
      s.ins.push_back({InArg(i), dt, role == 2 ? period : 0});
    }
  }
  if (s.ins.empty()) return Unimpl(node, "every input is one element");
  auto arg = [&](const FlatOperands& o, int i) { return where[i] >= 0 ? o.ins[where[i]] : o.scalars[~where[i]]; };
  s.temps = 5;  // t1, t2, a, b (f32), mask + constants
  // Constants: a zero block and a 2^-24 block after the mask (mask bytes are
  // at most tile / 8, rounded to repeats).
  auto consts = [](Kasm& k, const FlatOperands& o, int64_t n) {
    Ub c = o.temps[4].Plus(RoundUp(CeilDiv(n, 64) * 8 + 32, 256));
    k.Vec("vdup", DType::kF32, V(c), {}, 8, 0.0);
    k.Vec("vdup", DType::kF32, V(c.Plus(32)), {}, 8, kTiny);
    return c;
  };

  if (const char* mode = CmpMode(op)) {
    DType dt = s.ins.empty() ? DType::kNone : IsaOf(node.input(0));
    if (dt != DType::kF32 && dt != DType::kF16 && dt != DType::kBF16)
      return Unimpl(node, "vcmp compares only floats (f32, f16, bf16)");
    if (IsaOf(node.input(1)) != dt) return Unimpl(node, "inputs of different dtypes");
    std::string md = mode;
    s.body = [=](Kasm& k, const FlatOperands& o, int64_t n) {
      Ub t1 = o.temps[0], t2 = o.temps[1], mask = o.temps[4];
      Ub c = consts(k, o, n);
      VArg ab[2];
      for (int i = 0; i < 2; ++i) {
        VArg x = arg(o, i);
        if (dt == DType::kF32) {
          ab[i] = x;
        } else {
          Ub t = o.temps[2 + i];
          k.Conv(DType::kF32, dt, V(t), V(x.at), x.bcast ? 8 : n);
          ab[i] = x.bcast ? Bcast(t) : V(t);
        }
      }
      Cmp(k, DType::kF32, md, mask, ab[0], ab[1], n);
      Sel(k, DType::kF32, t1, mask, Bcast(c.Plus(32)), Bcast(c), n);
      Pack(k, t1, n, o.out.at, t2);
    };
    s.what = absl::StrCat(op, " of ", sim::DTypeName(dt), " to bool");
    return EmitFlat(req, s);
  }

  if (op == "Where") {
    if (node.num_inputs() != 3 || !is_bool(node.input(0))) return Unimpl(node, "the condition is not a bool tensor");
    DType dt = IsaOf(node.input(1));
    if (IsaOf(node.input(2)) != dt || dt == DType::kNone || dt == DType::kS8)
      return Unimpl(node, "X and Y must share a dtype of 2 or 4 bytes");
    DType sel = sim::DTypeSize(dt) == 4 ? DType::kF32 : DType::kF16;
    const bool one_condition = where[0] < 0;  // one bool for every element: its byte in a zeroed word
    s.body = [=](Kasm& k, const FlatOperands& o, int64_t n) {
      Ub t1 = o.temps[0], t2 = o.temps[1], a = o.temps[2], mask = o.temps[4];
      Ub c = consts(k, o, n);
      if (one_condition) {
        Unpack(k, arg(o, 0).at, 1, t1, t2);
        k.Brcb(DType::kF32, a, t1);
        Cmp(k, DType::kF32, "gt", mask, Bcast(a), Bcast(c), n);
      } else {
        Unpack(k, arg(o, 0).at, n, t1, t2);
        Cmp(k, DType::kF32, "gt", mask, V(t1), Bcast(c), n);
      }
      Sel(k, sel, o.out.at, mask, arg(o, 1), arg(o, 2), n);
    };
    s.what = absl::StrCat("Where of ", sim::DTypeName(dt));
    return EmitFlat(req, s);
  }

  // Not / And / Or / Xor on bool: min, max, |a - b| of the b * 2^-24 values.
  for (int i = 0; i < node.num_inputs(); ++i)
    if (!is_bool(node.input(i))) return Unimpl(node, "logic ops run only on bool tensors");
  if (op != "Not" && where[1] < 0) return Unimpl(node, "a one-element bool input");
  s.body = [=](Kasm& k, const FlatOperands& o, int64_t n) {
    Ub t1 = o.temps[0], t2 = o.temps[1], a = o.temps[2];
    Unpack(k, arg(o, 0).at, n, t1, t2);
    int64_t m = 2 * CeilDiv(n, 2);
    if (op == "Not") {
      k.Vec("vmuls", DType::kF32, V(t1), {V(t1)}, m, -1.0);
      k.Vec("vadds", DType::kF32, V(t1), {V(t1)}, m, kTiny);
    } else {
      k.Vec("vmov", DType::kF32, V(a), {V(t1)}, m);
      Unpack(k, arg(o, 1).at, n, t1, t2);
      if (op == "And") k.Vec("vmin", DType::kF32, V(t1), {V(t1), V(a)}, m);
      else if (op == "Or") k.Vec("vmax", DType::kF32, V(t1), {V(t1), V(a)}, m);
      else {
        k.Vec("vsub", DType::kF32, V(t1), {V(t1), V(a)}, m);
        k.Vec("vabs", DType::kF32, V(t1), {V(t1)}, m);
      }
    }
    Pack(k, t1, n, o.out.at, t2);
  };
  s.what = absl::StrCat(op, " of bool");
  return EmitFlat(req, s);
}

}  // namespace kiln::target::npusim::vec
