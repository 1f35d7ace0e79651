//===- vector_elementwise.cc - Unary, binary and cast vector kernels ------===//
//
// Elementwise ops compose the vector ISA: activations are built from vexp,
// vln, vrec, ... and scalar-immediate ops (Softplus = relu(x) +
// ln(1 + exp(-|x|)), Elu = relu(x) + alpha * (exp(min(x, 0)) - 1), ...).
// Floats compute in f32 (f16/bf16 convert on the way in and out, so one
// rounding per op as the reference kernels do), except binary arithmetic on
// f16, which is a single correctly rounded instruction either way, and the
// unary ops that only select or negate their input (Relu, Abs, Neg, Clip to
// bounds f16 holds), whose f16 instructions give the same values.
//
// Binary broadcasting: same-size operands and scalars run flat; otherwise
// the output is seen as rows of its innermost merged dim and the other
// operand is a row vector ([M,N] + [N]), a per-row scalar ([B,S,H] *
// [B,S,1]) or a per-channel scalar ([N,C,H,W] + [1,C,1,1]).
//
//===----------------------------------------------------------------------===//
#include <array>
#include <cctype>
#include <cmath>
#include <optional>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/ops/kernel_util.h"
#include "graph/support/float16.h"
#include "graph/support/status.h"
#include "target/npusim/kernels/vector_internal.h"
#include "target/npusim/kernels/vector_pipeline.h"

namespace kiln::target::npusim::vec {
namespace {

using sim::DType;
using Body = std::function<void(Kasm&, const FlatOperands&, int64_t)>;

int64_t Numel(const Value* v) { return v->type().shape().NumElements(); }

absl::Status CheckFloatOrInt(const Node& n, DType dt, bool int_ok) {
  if (dt == DType::kF32 || dt == DType::kF16 || dt == DType::kBF16) return absl::OkStatus();
  if (dt == DType::kS32 && int_ok) return absl::OkStatus();
  return Unimpl(n, absl::StrCat("the vector unit does not compute on ", dt == DType::kNone ? "this dtype" : sim::DTypeName(dt)));
}

//===--- Unary --------------------------------------------------------------===//

struct UnaryDef {
  Body body;
  int temps = 0;
  bool int_ok = false;
  bool copy = false;
  // The op selects or negates its input: on f16 its f16 instructions give
  // what f32 and a rounding give, so it runs without conversions.
  bool exact_f16 = false;
};

Body Un(const char* op) {
  return [op](Kasm& k, const FlatOperands& o, int64_t n) { k.Vec(op, o.ct, o.out, {o.ins[0]}, n); };
}

absl::StatusOr<UnaryDef> UnaryFor(const Node& node) {
  const std::string& op = node.op();
  UnaryDef d;
  if (node.domain() == "kiln") {
    if (op != "Gelu") return Unimpl(node, "not an elementwise op of the vector unit");
    std::string approx = node.GetString("approximate", "none");
    d.temps = 1;
    if (approx == "none") {
      d.body = [](Kasm& k, const FlatOperands& o, int64_t n) {
        VArg t = V(o.temps[0]), x = o.ins[0];
        k.Vec("vmuls", o.ct, t, {x}, n, 1.0 / std::sqrt(2.0));
        k.Vec("verf", o.ct, t, {t}, n);
        k.Vec("vadds", o.ct, t, {t}, n, 1.0);
        k.Vec("vmul", o.ct, t, {t, x}, n);
        k.Vec("vmuls", o.ct, o.out, {t}, n, 0.5);
      };
    } else if (approx == "tanh") {
      d.body = [](Kasm& k, const FlatOperands& o, int64_t n) {
        VArg t = V(o.temps[0]), x = o.ins[0];
        k.Vec("vmul", o.ct, t, {x, x}, n);
        k.Vec("vmuls", o.ct, t, {t}, n, 0.044715);
        k.Vec("vadds", o.ct, t, {t}, n, 1.0);
        k.Vec("vmul", o.ct, t, {t, x}, n);
        k.Vec("vmuls", o.ct, t, {t}, n, std::sqrt(2.0 / std::numbers::pi));
        k.Vec("vtanh", o.ct, t, {t}, n);
        k.Vec("vadds", o.ct, t, {t}, n, 1.0);
        k.Vec("vmul", o.ct, t, {t, x}, n);
        k.Vec("vmuls", o.ct, o.out, {t}, n, 0.5);
      };
    } else {
      return Unimpl(node, absl::StrCat("approximate=\"", approx, "\""));
    }
    return d;
  }
  if (!node.domain().empty()) return Unimpl(node, "not an elementwise op of the vector unit");
  if (op == "Relu") { d.body = Un("vrelu"); d.int_ok = true; d.exact_f16 = true; return d; }
  if (op == "Abs") { d.body = Un("vabs"); d.int_ok = true; d.exact_f16 = true; return d; }
  if (op == "Sigmoid") { d.body = Un("vsigmoid"); return d; }
  if (op == "Tanh") { d.body = Un("vtanh"); return d; }
  if (op == "Exp") { d.body = Un("vexp"); return d; }
  if (op == "Log") { d.body = Un("vln"); return d; }
  if (op == "Sqrt") { d.body = Un("vsqrt"); return d; }
  if (op == "Reciprocal") { d.body = Un("vrec"); return d; }
  if (op == "Erf") { d.body = Un("verf"); return d; }
  if (op == "Neg") {
    d.int_ok = true;
    d.exact_f16 = true;
    d.body = [](Kasm& k, const FlatOperands& o, int64_t n) { k.Vec("vmuls", o.ct, o.out, {o.ins[0]}, n, -1.0); };
    return d;
  }
  if (op == "Identity") { d.copy = true; return d; }
  if (op == "Dropout") {
    if (node.num_outputs() > 1 && node.output(1) && node.output(1)->has_uses())
      return Unimpl(node, "the mask output is used");
    if (node.input(2)) {
      auto t = ConstScalar(node.input(2));
      if (!t || *t != 0) return Unimpl(node, "training mode is not known to be off");
    }
    d.copy = true;
    return d;
  }
  if (op == "LeakyRelu") {
    double alpha = node.GetFloat("alpha", 0.01f);
    d.temps = 1;
    d.body = [alpha](Kasm& k, const FlatOperands& o, int64_t n) {
      VArg t = V(o.temps[0]);
      k.Vec("vmins", o.ct, t, {o.ins[0]}, n, 0.0);
      k.Vec("vmuls", o.ct, t, {t}, n, alpha);
      k.Vec("vmaxs", o.ct, o.out, {o.ins[0]}, n, 0.0);
      k.Vec("vadd", o.ct, o.out, {o.out, t}, n);
    };
    return d;
  }
  if (op == "Clip") {
    std::optional<double> lo, hi;
    for (int i = 1; i <= 2; ++i) {
      const Value* v = node.input(i);
      if (!v) continue;
      auto c = ConstScalar(v);
      if (!c) return Unimpl(node, absl::StrCat(i == 1 ? "min" : "max", " is not a constant"));
      (i == 1 ? lo : hi) = *c;
    }
    d.int_ok = true;
    auto held = [](const std::optional<double>& b) { return !b || static_cast<double>(static_cast<float>(Half(static_cast<float>(*b)))) == *b; };
    d.exact_f16 = held(lo) && held(hi);
    d.body = [lo, hi](Kasm& k, const FlatOperands& o, int64_t n) {
      VArg src = o.ins[0];
      if (!lo && !hi) k.Vec("vmov", o.ct, o.out, {src}, n);
      if (lo) {
        k.Vec("vmaxs", o.ct, o.out, {src}, n, *lo);
        src = o.out;
      }
      if (hi) k.Vec("vmins", o.ct, o.out, {src}, n, *hi);
    };
    return d;
  }
  if (op == "HardSigmoid") {
    double alpha = node.GetFloat("alpha", 0.2f), beta = node.GetFloat("beta", 0.5f);
    d.body = [alpha, beta](Kasm& k, const FlatOperands& o, int64_t n) {
      k.Vec("vmuls", o.ct, o.out, {o.ins[0]}, n, alpha);
      k.Vec("vadds", o.ct, o.out, {o.out}, n, beta);
      k.Vec("vmaxs", o.ct, o.out, {o.out}, n, 0.0);
      k.Vec("vmins", o.ct, o.out, {o.out}, n, 1.0);
    };
    return d;
  }
  if (op == "HardSwish") {
    d.temps = 1;
    d.body = [](Kasm& k, const FlatOperands& o, int64_t n) {
      VArg t = V(o.temps[0]);
      k.Vec("vmuls", o.ct, t, {o.ins[0]}, n, static_cast<double>(static_cast<float>(1.0 / 6.0)));
      k.Vec("vadds", o.ct, t, {t}, n, 0.5);
      k.Vec("vmaxs", o.ct, t, {t}, n, 0.0);
      k.Vec("vmins", o.ct, t, {t}, n, 1.0);
      k.Vec("vmul", o.ct, o.out, {o.ins[0], t}, n);
    };
    return d;
  }
  if (op == "Softplus") {
    d.temps = 1;
    d.body = [](Kasm& k, const FlatOperands& o, int64_t n) {
      VArg t = V(o.temps[0]);
      k.Vec("vabs", o.ct, t, {o.ins[0]}, n);
      k.Vec("vmuls", o.ct, t, {t}, n, -1.0);
      k.Vec("vexp", o.ct, t, {t}, n);
      k.Vec("vadds", o.ct, t, {t}, n, 1.0);
      k.Vec("vln", o.ct, t, {t}, n);
      k.Vec("vrelu", o.ct, o.out, {o.ins[0]}, n);
      k.Vec("vadd", o.ct, o.out, {o.out, t}, n);
    };
    return d;
  }
  if (op == "Softsign") {
    d.temps = 1;
    d.body = [](Kasm& k, const FlatOperands& o, int64_t n) {
      VArg t = V(o.temps[0]);
      k.Vec("vabs", o.ct, t, {o.ins[0]}, n);
      k.Vec("vadds", o.ct, t, {t}, n, 1.0);
      k.Vec("vdiv", o.ct, o.out, {o.ins[0], t}, n);
    };
    return d;
  }
  if (op == "Elu" || op == "Selu") {
    double alpha = node.GetFloat("alpha", op == "Elu" ? 1.0f : 1.67326319217681884765625f);
    double gamma = op == "Elu" ? 1.0 : node.GetFloat("gamma", 1.05070102214813232421875f);
    d.temps = 1;
    d.body = [alpha, gamma](Kasm& k, const FlatOperands& o, int64_t n) {
      VArg t = V(o.temps[0]);
      k.Vec("vmins", o.ct, t, {o.ins[0]}, n, 0.0);
      k.Vec("vexp", o.ct, t, {t}, n);
      k.Vec("vadds", o.ct, t, {t}, n, -1.0);
      k.Vec("vmuls", o.ct, t, {t}, n, alpha);
      k.Vec("vrelu", o.ct, o.out, {o.ins[0]}, n);
      k.Vec("vadd", o.ct, o.out, {o.out, t}, n);
      if (gamma != 1.0) k.Vec("vmuls", o.ct, o.out, {o.out}, n, gamma);
    };
    return d;
  }
  return Unimpl(node, "no vector kernel for this op");
}

}  // namespace

bool IsUnaryOp(const Node& n) {
  static const char* const kOps[] = {"Relu", "Abs", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal",
                                     "Erf", "Neg", "Identity", "Dropout", "LeakyRelu", "Clip", "HardSigmoid",
                                     "HardSwish", "Softplus", "Softsign", "Elu", "Selu"};
  if (n.domain() == "kiln") return n.op() == "Gelu";
  if (!n.domain().empty()) return false;
  for (const char* o : kOps)
    if (n.op() == o) return true;
  return false;
}

absl::StatusOr<GeneratedKernel> GenerateUnary(const KernelRequest& req) {
  const Node& node = *req.node;
  KILN_ASSIGN_OR_RETURN(UnaryDef d, UnaryFor(node));
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!x || !x->type().is_tensor() || !x->type().shape().is_static() || !y->type().shape().is_static())
    return absl::FailedPreconditionError(absl::StrCat(node.QualifiedOp(), ": shapes are not static"));
  DType dt = IsaOf(x);
  if (!d.copy) KILN_RETURN_IF_ERROR(CheckFloatOrInt(node, dt, d.int_ok));
  if (dt == DType::kNone || dt == DType::kS8) return Unimpl(node, "the vector unit does not hold this dtype");
  FlatSpec s;
  s.name = KernelName(node);
  s.what = node.QualifiedOp();
  s.numel = Numel(x);
  s.ins = {{InArg(0), dt}};
  s.out = {OutArg(0), IsaOf(y)};
  s.ct = dt == DType::kF16 && d.exact_f16 ? DType::kF16 : ComputeOf(dt);
  s.temps = d.temps;
  s.raw_copy = d.copy;
  s.body = d.body;
  if (s.numel == 0) return Unimpl(node, "empty tensor");
  return EmitFlat(req, s);
}

//===--- Binary -------------------------------------------------------------===//

namespace {

struct BinDef {
  const char* vop = nullptr;   // the two-operand instruction
  const char* sop = nullptr;   // with an immediate on the right (may be null)
  bool commutes = false;
  bool int_ok = true;
};

std::optional<BinDef> BinFor(const Node& n) {
  if (!n.domain().empty()) return std::nullopt;
  const std::string& op = n.op();
  if (op == "Add" || op == "Sum") return BinDef{"vadd", "vadds", true, true};
  if (op == "Sub") return BinDef{"vsub", nullptr, false, true};
  if (op == "Mul") return BinDef{"vmul", "vmuls", true, true};
  if (op == "Div") return BinDef{"vdiv", nullptr, false, false};
  if (op == "Max") return BinDef{"vmax", "vmaxs", true, true};
  if (op == "Min") return BinDef{"vmin", "vmins", true, true};
  return std::nullopt;
}

// Pow with a constant scalar exponent, computed in f32.
absl::StatusOr<GeneratedKernel> GeneratePow(const KernelRequest& req) {
  const Node& node = *req.node;
  auto e = ConstScalar(node.input(1));
  if (!e) return Unimpl(node, "the exponent is not a constant scalar");
  DType dt = IsaOf(node.input(0));
  KILN_RETURN_IF_ERROR(CheckFloatOrInt(node, dt, false));
  double ex = *e;
  FlatSpec s;
  s.name = KernelName(node);
  s.what = absl::StrCat("Pow(x, ", ex, ")");
  s.numel = Numel(node.output(0));
  if (Numel(node.input(0)) != s.numel) return Unimpl(node, "the base is broadcast");
  s.ins = {{InArg(0), dt}};
  s.out = {OutArg(0), IsaOf(node.output(0))};
  s.ct = DType::kF32;
  s.temps = 1;
  if (ex == 0.5) {
    s.body = Un("vsqrt");
  } else if (ex == -0.5) {
    s.body = Un("vrsqrt");
  } else if (ex == 0) {
    s.body = [](Kasm& k, const FlatOperands& o, int64_t n) { k.Vec("vdup", o.ct, o.out, {}, n, 1.0); };
  } else if (ex == std::floor(ex) && std::fabs(ex) <= 64) {
    int64_t p = static_cast<int64_t>(std::fabs(ex));
    bool neg = ex < 0;
    // Square-and-multiply: out accumulates, t holds x^(2^i).
    s.body = [p, neg](Kasm& k, const FlatOperands& o, int64_t n) {
      VArg t = V(o.temps[0]);
      bool have = false, first_sq = true;
      int64_t q = p;
      while (q) {
        VArg base = first_sq ? o.ins[0] : t;
        if (q & 1) {
          if (!have) k.Vec("vmov", o.ct, o.out, {base}, n);
          else k.Vec("vmul", o.ct, o.out, {o.out, base}, n);
          have = true;
        }
        q >>= 1;
        if (q) {
          k.Vec("vmul", o.ct, t, {base, base}, n);
          first_sq = false;
        }
      }
      if (neg) k.Vec("vrec", o.ct, o.out, {o.out}, n);
    };
  } else {
    // exp(e * ln x): NaN for x < 0 as pow is for a non-integer exponent.
    s.body = [ex](Kasm& k, const FlatOperands& o, int64_t n) {
      VArg t = V(o.temps[0]);
      k.Vec("vln", o.ct, t, {o.ins[0]}, n);
      k.Vec("vmuls", o.ct, t, {t}, n, ex);
      k.Vec("vexp", o.ct, o.out, {t}, n);
    };
  }
  return EmitFlat(req, s);
}

// Output dims merged where both inputs walk contiguously (size-1 dims
// dropped), with each input's strides over them (0 where it broadcasts).
struct Merged {
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, 2> st;
};

Merged Merge(const Dims& out, const Dims& a, const Dims& b) {
  std::array<Dims, 2> s = {BroadcastStrides(a, out), BroadcastStrides(b, out)};
  Merged p;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    if (!p.dims.empty()) {
      bool merge = true;
      for (int k = 0; k < 2; ++k)
        if (p.st[k].back() != s[k][d] * out[d]) merge = false;
      if (merge) {
        p.dims.back() *= out[d];
        for (int k = 0; k < 2; ++k) p.st[k].back() = s[k][d];
        continue;
      }
    }
    p.dims.push_back(out[d]);
    for (int k = 0; k < 2; ++k) p.st[k].push_back(s[k][d]);
  }
  return p;
}

// Binary op where input `full` covers the output and input `other` is
// broadcast: a row vector, a per-row scalar or a per-channel scalar.
absl::StatusOr<GeneratedKernel> BroadcastRows(const KernelRequest& req, const BinDef& def, DType ct, int full) {
  const Node& node = *req.node;
  int other = 1 - full;
  Dims out = node.output(0)->type().shape().StaticDims();
  Dims da = node.input(0)->type().shape().StaticDims(), db = node.input(1)->type().shape().StaticDims();
  Merged m = Merge(out, da, db);
  const std::vector<int64_t>& so = m.st[other];
  int r = static_cast<int>(m.dims.size());
  std::string shapes = absl::StrCat("[", absl::StrJoin(da, ","), "] and [", absl::StrJoin(db, ","), "]");
  if (r < 2) return Unimpl(node, absl::StrCat("broadcast of ", shapes));
  int64_t cols = m.dims[r - 1], rows = 1;
  for (int i = 0; i < r - 1; ++i) rows *= m.dims[i];
  DType odt = IsaOf(node.input(other)), fdt = IsaOf(node.input(full));
  RowSpec s;
  s.name = KernelName(node);
  s.rows = rows;
  s.out = {OutArg(0), IsaOf(node.output(0))};
  s.out_cols = cols;
  s.ct = ct;
  s.temps = 1;
  s.ins.push_back({{InArg(full), fdt}, cols});
  const char* vop = def.vop;
  auto apply = [vop, full](Kasm& k, DType t, Ub dst, Ub x, VArg y, int64_t n) {
    if (full == 0) k.Vec(vop, t, V(dst), {V(x), y}, n);
    else k.Vec(vop, t, V(dst), {y, V(x)}, n);
  };
  int cts = sim::DTypeSize(ct), oes = sim::DTypeSize(odt);
  bool outer_zero = true;
  for (int i = 0; i < r - 1; ++i) outer_zero &= so[i] == 0;
  if (so[r - 1] == 1 && outer_zero) {
    // A row vector: resident, converted once.
    if (cols * cts > 64 * 1024) return Unimpl(node, absl::StrCat("the broadcast row of ", cols, " elements is too long"));
    int64_t raw = RoundUp(cols * oes, 256);
    s.resident_bytes = raw + RoundUp(cols * cts, 256);
    std::string arg = InArg(other);
    s.prologue = [=](Kasm& k, Ub res) {
      k.CopyIn(res, arg, -1, 0, cols * oes);
      k.SetFlag("MTE2", "VECTOR", 2);
      k.WaitFlag("MTE2", "VECTOR", 2);
      if (odt != ct) k.Conv(ct, odt, V(res.Plus(raw)), V(res), cols);
      else k.Vec("vmov", ct, V(res.Plus(raw)), {V(res)}, cols);
    };
    s.body = [=](Kasm& k, const RowOperands& o, Ub res) { apply(k, ct, o.out, o.ins[0], V(res.Plus(raw)), cols); };
    s.what = absl::StrCat(node.op(), " of ", shapes, " (row vector)");
    return EmitRows(req, s);
  }
  if (so[r - 1] != 0) return Unimpl(node, absl::StrCat("broadcast of ", shapes));
  // Per-row scalars: contiguous over the rows, or one per channel.
  bool contiguous = true;
  {
    int64_t expect = 1;
    for (int i = r - 2; i >= 0; --i) {
      contiguous &= so[i] == expect;
      expect *= m.dims[i];
    }
  }
  if (contiguous) {
    s.ins.push_back({{InArg(other), odt}, 1});
    s.body = [=](Kasm& k, const RowOperands& o, Ub) {
      Ub blk = o.temps[0].Plus(RoundUp(cols * cts, 256));
      k.Brcb(ct, blk, o.ins[1]);
      apply(k, ct, o.out, o.ins[0], Bcast(blk), cols);
    };
    s.what = absl::StrCat(node.op(), " of ", shapes, " (per-row scalar)");
    return EmitRows(req, s);
  }
  bool channel = so[r - 2] == 1;
  for (int i = 0; i < r - 2; ++i) channel &= so[i] == 0;
  if (!channel) return Unimpl(node, absl::StrCat("broadcast of ", shapes));
  int64_t C = m.dims[r - 2];
  if (C * 32 > 64 * 1024) return Unimpl(node, absl::StrCat("per-channel broadcast over ", C, " channels"));
  int64_t raw = RoundUp(C * oes, 256), conv = RoundUp(RoundUp(C, 8) * cts, 256);
  s.resident_bytes = raw + conv + RoundUp(C, 8) * 32;
  std::string arg = InArg(other);
  s.prologue = [=](Kasm& k, Ub res) {
    k.CopyIn(res, arg, -1, 0, C * oes);
    k.SetFlag("MTE2", "VECTOR", 2);
    k.WaitFlag("MTE2", "VECTOR", 2);
    if (odt != ct) k.Conv(ct, odt, V(res.Plus(raw)), V(res), C);
    else k.Vec("vmov", ct, V(res.Plus(raw)), {V(res)}, C);
    // Channel c's value fills block c.
    int64_t groups = CeilDiv(C, 8);
    for (int64_t g = 0; g < groups; g += 255)
      k.Brcb(ct, res.Plus(raw + conv + g * 256), res.Plus(raw + g * 8 * cts), std::min<int64_t>(255, groups - g));
  };
  s.body = [=](Kasm& k, const RowOperands& o, Ub res) {
    int a = k.Reg();
    k.Alu("rem", a, o.row, C);
    k.Alu("mul", a, a, 32);
    k.Alu("add", a, a, res.off + raw + conv);
    apply(k, ct, o.out, o.ins[0], Bcast(Ub{a, 0}), cols);
  };
  s.what = absl::StrCat(node.op(), " of ", shapes, " (per-channel scalar)");
  return EmitRows(req, s);
}

}  // namespace

bool IsBinaryOp(const Node& n) {
  if (!n.domain().empty()) return false;
  return BinFor(n).has_value() || n.op() == "Pow" || n.op() == "Mean";
}

absl::StatusOr<GeneratedKernel> GenerateBinary(const KernelRequest& req) {
  const Node& node = *req.node;
  if (node.op() == "Pow") return GeneratePow(req);
  for (const Value* v : node.inputs())
    if (!v || !v->type().is_tensor() || !v->type().shape().is_static())
      return absl::FailedPreconditionError(absl::StrCat(node.QualifiedOp(), ": shapes are not static"));
  if (node.num_inputs() == 1) {
    // Variadic Max/Min/Sum/Mean of one input: a copy.
    FlatSpec s;
    s.name = KernelName(node);
    s.what = node.QualifiedOp();
    s.numel = Numel(node.output(0));
    s.ins = {{InArg(0), IsaOf(node.input(0))}};
    s.out = {OutArg(0), IsaOf(node.output(0))};
    s.raw_copy = true;
    return EmitFlat(req, s);
  }
  if (node.num_inputs() != 2) return Unimpl(node, absl::StrCat(node.num_inputs(), " inputs"));
  bool mean = node.op() == "Mean";
  std::optional<BinDef> def = mean ? std::optional<BinDef>(BinDef{"vadd", "vadds", true, false}) : BinFor(node);
  if (!def) return Unimpl(node, "no vector kernel for this op");
  DType dt = IsaOf(node.input(0));
  KILN_RETURN_IF_ERROR(CheckFloatOrInt(node, dt, def->int_ok));
  if (IsaOf(node.input(1)) != dt) return Unimpl(node, "inputs of different dtypes");
  // f16 arithmetic is one correctly rounded instruction: run it natively.
  DType ct = dt == DType::kF16 && !mean ? DType::kF16 : ComputeOf(dt);
  const Value* a = node.input(0);
  const Value* b = node.input(1);
  int64_t n = Numel(node.output(0));
  if (n == 0) return Unimpl(node, "empty tensor");
  FlatSpec s;
  s.name = KernelName(node);
  s.numel = n;
  s.out = {OutArg(0), IsaOf(node.output(0))};
  s.ct = ct;
  const char* vop = def->vop;
  auto finish = [mean](Kasm& k, const FlatOperands& o, int64_t cnt) {
    if (mean) k.Vec("vmuls", o.ct, o.out, {o.out}, cnt, 0.5);
  };
  if (Numel(a) == n && Numel(b) == n) {
    s.ins = {{InArg(0), dt}, {InArg(1), dt}};
    s.body = [vop, finish](Kasm& k, const FlatOperands& o, int64_t cnt) {
      k.Vec(vop, o.ct, o.out, {o.ins[0], o.ins[1]}, cnt);
      finish(k, o, cnt);
    };
    s.what = node.QualifiedOp();
    return EmitFlat(req, s);
  }
  for (int sc = 0; sc < 2; ++sc) {
    const Value* scal = node.input(sc);
    const Value* full = node.input(1 - sc);
    if (Numel(scal) != 1 || Numel(full) != n) continue;
    s.ins = {{InArg(1 - sc), dt}};
    auto c = ConstScalar(scal);
    if (c && def->sop && (sc == 1 || def->commutes)) {
      double v = *c;
      const char* sop = def->sop;
      s.body = [sop, v, finish](Kasm& k, const FlatOperands& o, int64_t cnt) {
        k.Vec(sop, o.ct, o.out, {o.ins[0]}, cnt, v);
        finish(k, o, cnt);
      };
      s.what = absl::StrCat(node.QualifiedOp(), " with the constant ", v);
      return EmitFlat(req, s);
    }
    if (c && node.op() == "Sub" && sc == 1) {
      double v = -*c;
      s.body = [v](Kasm& k, const FlatOperands& o, int64_t cnt) { k.Vec("vadds", o.ct, o.out, {o.ins[0]}, cnt, v); };
      s.what = absl::StrCat(node.QualifiedOp(), " of the constant ", *c);
      return EmitFlat(req, s);
    }
    s.scalars = {{InArg(sc), dt}};
    s.body = [vop, sc, finish](Kasm& k, const FlatOperands& o, int64_t cnt) {
      if (sc == 1) k.Vec(vop, o.ct, o.out, {o.ins[0], o.scalars[0]}, cnt);
      else k.Vec(vop, o.ct, o.out, {o.scalars[0], o.ins[0]}, cnt);
      finish(k, o, cnt);
    };
    s.what = absl::StrCat(node.QualifiedOp(), " with a broadcast scalar");
    return EmitFlat(req, s);
  }
  if (mean) return Unimpl(node, "broadcast Mean");
  // An outer broadcast ([1,1,S,S] against [B,H,S,S]): the small input repeats
  // every Numel(small) elements of the output (leading dims 1, trailing equal).
  for (int sm = 0; sm < 2; ++sm) {
    const Value* small = node.input(sm);
    if (Numel(node.input(1 - sm)) != n) continue;
    Dims out = node.output(0)->type().shape().StaticDims(), d = small->type().shape().StaticDims();
    size_t first = 0;
    while (first < d.size() && d[first] == 1) ++first;
    bool periodic = d.size() <= out.size() && first < d.size();
    for (size_t i = first; periodic && i < d.size(); ++i) periodic = d[i] == out[out.size() - d.size() + i];
    if (!periodic || Numel(small) < 256) continue;
    s.ins = {{InArg(0), dt, sm == 0 ? Numel(small) : 0}, {InArg(1), dt, sm == 1 ? Numel(small) : 0}};
    s.body = [vop](Kasm& k, const FlatOperands& o, int64_t cnt) { k.Vec(vop, o.ct, o.out, {o.ins[0], o.ins[1]}, cnt); };
    s.what = absl::StrCat(node.QualifiedOp(), " with an outer broadcast (period ", Numel(small), ")");
    auto g = EmitFlat(req, s);
    if (g.ok()) return g;
  }
  if (Numel(a) == n) return BroadcastRows(req, *def, ct, 0);
  if (Numel(b) == n) return BroadcastRows(req, *def, ct, 1);
  return Unimpl(node, "both inputs are broadcast");
}

//===--- Cast ---------------------------------------------------------------===//

absl::StatusOr<GeneratedKernel> GenerateCast(const KernelRequest& req) {
  const Node& node = *req.node;
  const Value* x = node.input(0);
  const Value* y = node.output(0);
  if (!x || !x->type().shape().is_static() || !y->type().shape().is_static())
    return absl::FailedPreconditionError(absl::StrCat(node.QualifiedOp(), ": shapes are not static"));
  DType from = IsaOf(x), to = IsaOf(y);
  auto ok = [](DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kS32; };
  if (!ok(from) || !ok(to))
    return Unimpl(node, absl::StrCat("vconv does not convert ", DTypeName(x->type().dtype()), " to ",
                                     DTypeName(y->type().dtype())));
  FlatSpec s;
  s.name = KernelName(node);
  s.what = absl::StrCat("Cast ", sim::DTypeName(from), " -> ", sim::DTypeName(to));
  s.numel = Numel(x);
  if (s.numel == 0) return Unimpl(node, "empty tensor");
  s.ins = {{InArg(0), from}};
  s.out = {OutArg(0), to};
  if (from == to) {
    s.raw_copy = true;
    return EmitFlat(req, s);
  }
  // Through f32: the input converts to f32 on the way in, the output from it.
  s.ct = DType::kF32;
  s.body = [](Kasm& k, const FlatOperands& o, int64_t n) { k.Vec("vmov", o.ct, o.out, {o.ins[0]}, n); };
  return EmitFlat(req, s);
}

}  // namespace kiln::target::npusim::vec
