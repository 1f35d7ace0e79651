//===- recurrent.cc - LSTM, GRU and RNN -----------------------------------===//
//
// The ONNX recurrent layers: forward, reverse and bidirectional, per-batch
// sequence lengths, initial states, LSTM peepholes, configurable gate
// activations (with their alpha/beta), clipping, GRU's linear_before_reset,
// and the batch-major layout of opset 14.
//
// Each direction precomputes the input projection of every time step with
// one GEMM, then runs the recurrence with one [batch, hidden] x [hidden,
// gates*hidden] GEMM per step. f16/bf16 compute in float.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

enum class CellKind { kLstm, kGru, kRnn };

int NumGates(CellKind k) { return k == CellKind::kLstm ? 4 : k == CellKind::kGru ? 3 : 1; }
int ActsPerDirection(CellKind k) { return k == CellKind::kLstm ? 3 : k == CellKind::kGru ? 2 : 1; }

//===--- Activations ------------------------------------------------------===//

enum class Act {
  kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu,
  kScaledTanh, kHardSigmoid, kElu, kSoftsign, kSoftplus,
};

struct Activation {
  Act kind = Act::kSigmoid;
  float alpha = 0, beta = 0;
};

// Parses the activations attribute: `per_dir` functions per direction, with
// alpha/beta values consumed in order by the functions that take them.
absl::StatusOr<std::vector<Activation>> ParseActivations(const Node& n, CellKind kind, int dirs) {
  const int per_dir = ActsPerDirection(kind);
  std::vector<std::string> names;
  if (const Attribute* a = n.attr("activations")) names = a->strings();
  if (names.empty()) {
    std::vector<std::string> dflt = kind == CellKind::kLstm ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                    : kind == CellKind::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                             : std::vector<std::string>{"Tanh"};
    for (int d = 0; d < dirs; ++d) names.insert(names.end(), dflt.begin(), dflt.end());
  } else if (static_cast<int>(names.size()) == per_dir && dirs == 2) {
    std::vector<std::string> twice = names;
    names.insert(names.end(), twice.begin(), twice.end());
  }
  if (static_cast<int>(names.size()) != per_dir * dirs)
    return InvalidArgument("activations has ", names.size(), " functions, expected ", per_dir * dirs);
  std::vector<float> alphas = n.GetFloats("activation_alpha");
  std::vector<float> betas = n.GetFloats("activation_beta");
  size_t ai = 0, bi = 0;
  auto take = [](const std::vector<float>& v, size_t& i, float dflt) { return i < v.size() ? v[i++] : dflt; };
  std::vector<Activation> out;
  for (const std::string& raw : names) {
    std::string name = absl::AsciiStrToLower(raw);
    Activation a;
    if (name == "relu") a.kind = Act::kRelu;
    else if (name == "tanh") a.kind = Act::kTanh;
    else if (name == "sigmoid") a.kind = Act::kSigmoid;
    else if (name == "affine") {
      a.kind = Act::kAffine;
      a.alpha = take(alphas, ai, 1.0f);
      a.beta = take(betas, bi, 0.0f);
    } else if (name == "leakyrelu") {
      a.kind = Act::kLeakyRelu;
      a.alpha = take(alphas, ai, 0.01f);
    } else if (name == "thresholdedrelu") {
      a.kind = Act::kThresholdedRelu;
      a.alpha = take(alphas, ai, 1.0f);
    } else if (name == "scaledtanh") {
      a.kind = Act::kScaledTanh;
      a.alpha = take(alphas, ai, 1.0f);
      a.beta = take(betas, bi, 1.0f);
    } else if (name == "hardsigmoid") {
      a.kind = Act::kHardSigmoid;
      a.alpha = take(alphas, ai, 0.2f);
      a.beta = take(betas, bi, 0.5f);
    } else if (name == "elu") {
      a.kind = Act::kElu;
      a.alpha = take(alphas, ai, 1.0f);
    } else if (name == "softsign") a.kind = Act::kSoftsign;
    else if (name == "softplus") a.kind = Act::kSoftplus;
    else return InvalidArgument("unknown activation function '", raw, "'");
    out.push_back(a);
  }
  return out;
}

// x[i] = act(clip(x[i])) for i < n; clip <= 0 means no clipping.
template <typename C>
void Apply(const Activation& a, C clip, C* x, int64_t n) {
  if (clip > 0)
    for (int64_t i = 0; i < n; ++i) x[i] = std::clamp(x[i], -clip, clip);
  const C al = a.alpha, be = a.beta;
  switch (a.kind) {
    case Act::kRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0 ? x[i] : C(0);
      break;
    case Act::kTanh:
      for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
      break;
    case Act::kSigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = C(1) / (C(1) + std::exp(-x[i]));
      break;
    case Act::kAffine:
      for (int64_t i = 0; i < n; ++i) x[i] = al * x[i] + be;
      break;
    case Act::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] < 0 ? al * x[i] : x[i];
      break;
    case Act::kThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > al ? x[i] : C(0);
      break;
    case Act::kScaledTanh:
      for (int64_t i = 0; i < n; ++i) x[i] = al * std::tanh(be * x[i]);
      break;
    case Act::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = std::clamp(al * x[i] + be, C(0), C(1));
      break;
    case Act::kElu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] < 0 ? al * (std::exp(x[i]) - C(1)) : x[i];
      break;
    case Act::kSoftsign:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (C(1) + std::abs(x[i]));
      break;
    case Act::kSoftplus:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 20 ? x[i] : std::log1p(std::exp(x[i]));
      break;
  }
}

//===--- Shapes -----------------------------------------------------------===//

absl::StatusOr<int> NumDirections(const Node& n) {
  std::string d = n.GetString("direction", "forward");
  if (d == "forward" || d == "reverse") return 1;
  if (d == "bidirectional") return 2;
  return InvalidArgument("direction '", d, "' is not one of forward, reverse, bidirectional");
}

// Input indices: X, W, R, B, sequence_lens, initial_h, initial_c (LSTM), P (LSTM).
template <CellKind kKind>
absl::Status InferRecurrent(InferContext& ctx) {
  const Node& n = ctx.node();
  if (!ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2))
    return ctx.Error("inputs X, W and R are required");
  auto dirs_or = NumDirections(n);
  if (!dirs_or.ok()) return ctx.Error(dirs_or.status().message());
  const int dirs = *dirs_or;
  const int64_t layout = n.GetInt("layout", 0);
  if (layout != 0 && layout != 1) return ctx.Error("layout must be 0 or 1, got ", layout);
  auto acts = ParseActivations(n, kKind, dirs);
  if (!acts.ok()) return ctx.Error(acts.status().message());
  const int G = NumGates(kKind);
  DType dt = ctx.input_type(0).dtype();
  if (dt != DType::kUndefined && !IsFloat(dt)) return ctx.Error("expects a float input, got ", DTypeName(dt));
  for (int i : {1, 2}) {
    DType d = ctx.input_type(i).dtype();
    if (dt != DType::kUndefined && d != DType::kUndefined && d != dt)
      return ctx.Error("input ", i, " has dtype ", DTypeName(d), ", expected ", DTypeName(dt));
  }
  auto shape = [&](int i) -> const Shape* {
    if (!ctx.has_input(i) || !ctx.input_type(i).is_tensor() || !ctx.input_type(i).shape().ranked()) return nullptr;
    return &ctx.input_type(i).shape();
  };
  const Shape* x = shape(0);
  const Shape* w = shape(1);
  const Shape* r = shape(2);
  if (x && x->rank() != 3) return ctx.Error("input 0 (X) has rank ", x->rank(), ", expected 3");
  if (w && w->rank() != 3) return ctx.Error("input 1 (W) has rank ", w->rank(), ", expected 3");
  if (r && r->rank() != 3) return ctx.Error("input 2 (R) has rank ", r->rank(), ", expected 3");
  Dim hidden;
  if (n.has_attr("hidden_size")) {
    int64_t h = n.GetInt("hidden_size", 0);
    if (h <= 0 || h > (int64_t{1} << 31)) return ctx.Error("hidden_size must be in [1, 2^31], got ", h);
    hidden = Dim(h);
  } else if (r && (*r)[2].is_static()) {
    hidden = (*r)[2];
  }
  for (const Shape* s : {w, r}) {
    if (!s) continue;
    if ((*s)[0].is_static() && (*s)[0].value() != dirs)
      return ctx.Error("weights have ", (*s)[0].value(), " directions, expected ", dirs);
    if (hidden.is_static() && (*s)[1].is_static() && (*s)[1].value() != G * hidden.value())
      return ctx.Error("weights have ", (*s)[1].value(), " rows, expected ", G * hidden.value());
  }
  if (r && hidden.is_static() && (*r)[2].is_static() && (*r)[2].value() != hidden.value())
    return ctx.Error("R has hidden size ", (*r)[2].value(), ", expected ", hidden.value());
  if (x && w && (*x)[2].is_static() && (*w)[2].is_static() && (*x)[2].value() != (*w)[2].value())
    return ctx.Error("X has input size ", (*x)[2].value(), " but W expects ", (*w)[2].value());
  Dim seq = x ? (*x)[layout == 0 ? 0 : 1] : Dim();
  Dim batch = x ? (*x)[layout == 0 ? 1 : 0] : Dim();
  Dim D(dirs);
  Shape y = layout == 0 ? Shape({seq, D, batch, hidden}) : Shape({batch, seq, D, hidden});
  Shape yh = layout == 0 ? Shape({D, batch, hidden}) : Shape({batch, D, hidden});
  for (int i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, Type::Tensor(dt, i == 0 ? y : yh));
  return absl::OkStatus();
}

//===--- Kernel -----------------------------------------------------------===//

// y[m*ldy + p] += sum_k a[m*lda + k] * b[k*ldb + p].
template <typename C>
void GemmAcc(int64_t M, int64_t K, int64_t P, const C* a, int64_t lda, const C* b, int64_t ldb, C* y,
             int64_t ldy) {
  for (int64_t m = 0; m < M; ++m) {
    C* __restrict yr = y + m * ldy;
    const C* ar = a + m * lda;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
      const C a0 = ar[k], a1 = ar[k + 1], a2 = ar[k + 2], a3 = ar[k + 3];
      const C* __restrict b0 = b + k * ldb;
      const C* __restrict b1 = b0 + ldb;
      const C* __restrict b2 = b1 + ldb;
      const C* __restrict b3 = b2 + ldb;
      for (int64_t p = 0; p < P; ++p) yr[p] += a0 * b0[p] + a1 * b1[p] + a2 * b2[p] + a3 * b3[p];
    }
    for (; k < K; ++k) {
      const C a0 = ar[k];
      const C* __restrict b0 = b + k * ldb;
      for (int64_t p = 0; p < P; ++p) yr[p] += a0 * b0[p];
    }
  }
}

template <typename C>
std::vector<C> ToCompute(const Tensor& t) {
  std::vector<C> out(t.numel());
  DispatchFloat(t.dtype(), [&]<typename T>() {
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<C>(ToDouble(p[i]));
  });
  return out;
}

// Swaps the first two dims of a [a, b, c] array.
template <typename C>
std::vector<C> Swap01(const std::vector<C>& v, int64_t a, int64_t b, int64_t c) {
  std::vector<C> out(v.size());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j) std::copy_n(&v[(i * b + j) * c], c, &out[(j * a + i) * c]);
  return out;
}

struct RecurrentArgs {
  CellKind kind;
  int64_t T, B, I, H;
  int dirs;
  int64_t layout;
  bool reverse_only;
  std::vector<Activation> acts;
  double clip;  // <= 0: none
  bool linear_before_reset;
  bool input_forget;
  std::vector<int64_t> seq_lens;
};

template <typename C>
struct RecurrentOut {
  std::vector<C> y;   // [T, D, B, H]
  std::vector<C> yh;  // [D, B, H]
  std::vector<C> yc;  // [D, B, H] (LSTM)
};

// Runs all directions. Inputs are in compute type and layout 0.
template <typename C>
void RunRecurrent(const RecurrentArgs& a, const std::vector<C>& X, const std::vector<C>& W,
                  const std::vector<C>& R, const std::vector<C>* Bias, const std::vector<C>* H0,
                  const std::vector<C>* C0, const std::vector<C>* P, RecurrentOut<C>& out) {
  const int64_t T = a.T, B = a.B, I = a.I, H = a.H;
  const int G = NumGates(a.kind);
  const int64_t GH = G * H;
  const int A = ActsPerDirection(a.kind);
  const C clip = static_cast<C>(a.clip);
  out.y.assign(T * a.dirs * B * H, C(0));
  out.yh.assign(a.dirs * B * H, C(0));
  if (a.kind == CellKind::kLstm) out.yc.assign(a.dirs * B * H, C(0));
  std::vector<C> wt(I * GH), rt(H * GH), xw(T * B * GH), gates(B * GH), h(B * H), c(B * H);
  std::vector<C> hnew(B * H), cnew(B * H), tmp(B * H);
  for (int d = 0; d < a.dirs; ++d) {
    const bool reverse = a.reverse_only || d == 1;
    const Activation* act = &a.acts[d * A];
    // Transposed weights: wt [I, GH], rt [H, GH].
    for (int64_t g = 0; g < GH; ++g) {
      for (int64_t i = 0; i < I; ++i) wt[i * GH + g] = W[(d * GH + g) * I + i];
      for (int64_t i = 0; i < H; ++i) rt[i * GH + g] = R[(d * GH + g) * H + i];
    }
    // Input projection plus the biases that do not depend on the state.
    const C* wb = Bias ? &(*Bias)[d * 2 * GH] : nullptr;
    const C* rb = Bias ? wb + GH : nullptr;
    std::vector<C> row_bias(GH, C(0));
    for (int64_t g = 0; g < GH; ++g) {
      if (!wb) break;
      bool rec_in_row = a.kind != CellKind::kGru || g < 2 * H;
      row_bias[g] = wb[g] + (rec_in_row ? rb[g] : C(0));
    }
    for (int64_t r = 0; r < T * B; ++r) std::copy(row_bias.begin(), row_bias.end(), &xw[r * GH]);
    GemmAcc<C>(T * B, I, GH, X.data(), I, wt.data(), GH, xw.data(), GH);
    // Initial states.
    for (int64_t i = 0; i < B * H; ++i) {
      h[i] = H0 ? (*H0)[d * B * H + i] : C(0);
      c[i] = C0 ? (*C0)[d * B * H + i] : C(0);
    }
    const C* pi = P ? &(*P)[d * 3 * H] : nullptr;
    const C* po = pi ? pi + H : nullptr;
    const C* pf = pi ? pi + 2 * H : nullptr;
    for (int64_t step = 0; step < T; ++step) {
      const int64_t t = reverse ? T - 1 - step : step;
      std::copy(&xw[t * B * GH], &xw[(t + 1) * B * GH], gates.begin());
      if (a.kind == CellKind::kLstm) {
        GemmAcc<C>(B, H, GH, h.data(), H, rt.data(), GH, gates.data(), GH);
        for (int64_t b = 0; b < B; ++b) {
          C* gi = &gates[b * GH];  // gate order i, o, f, c
          C* go = gi + H;
          C* gf = gi + 2 * H;
          C* gc = gi + 3 * H;
          const C* cp = &c[b * H];
          if (pi)
            for (int64_t k = 0; k < H; ++k) {
              gi[k] += pi[k] * cp[k];
              gf[k] += pf[k] * cp[k];
            }
          Apply(act[0], clip, gi, H);
          if (a.input_forget) {
            for (int64_t k = 0; k < H; ++k) gf[k] = C(1) - gi[k];
          } else {
            Apply(act[0], clip, gf, H);
          }
          Apply(act[1], clip, gc, H);
          C* cn = &cnew[b * H];
          for (int64_t k = 0; k < H; ++k) cn[k] = gf[k] * cp[k] + gi[k] * gc[k];
          if (po)
            for (int64_t k = 0; k < H; ++k) go[k] += po[k] * cn[k];
          Apply(act[0], clip, go, H);
          C* th = &tmp[b * H];
          std::copy(cn, cn + H, th);
          Apply(act[2], C(0), th, H);
          C* hn = &hnew[b * H];
          for (int64_t k = 0; k < H; ++k) hn[k] = go[k] * th[k];
        }
      } else if (a.kind == CellKind::kGru) {
        // Recurrent parts of z and r accumulate in place; with
        // linear_before_reset, h_prev * Rh^T goes to tmp.
        GemmAcc<C>(B, H, 2 * H, h.data(), H, rt.data(), GH, gates.data(), GH);
        if (a.linear_before_reset) {
          std::fill(tmp.begin(), tmp.end(), C(0));
          GemmAcc<C>(B, H, H, h.data(), H, rt.data() + 2 * H, GH, tmp.data(), H);
        }
        for (int64_t b = 0; b < B; ++b) {
          C* gz = &gates[b * GH];  // gate order z, r, h
          C* gr = gz + H;
          C* gh = gz + 2 * H;
          Apply(act[0], clip, gz, H);
          Apply(act[0], clip, gr, H);
          const C* hp = &h[b * H];
          if (a.linear_before_reset) {
            const C* rh = &tmp[b * H];
            for (int64_t k = 0; k < H; ++k) gh[k] += gr[k] * (rh[k] + (rb ? rb[2 * H + k] : C(0)));
          } else {
            C* rhp = &cnew[b * H];  // r * h_prev, scratch
            for (int64_t k = 0; k < H; ++k) rhp[k] = gr[k] * hp[k];
          }
        }
        if (!a.linear_before_reset) {
          // gh += (r * h_prev) * Rh^T + Rbh
          GemmAcc<C>(B, H, H, cnew.data(), H, rt.data() + 2 * H, GH, gates.data() + 2 * H, GH);
          if (rb)
            for (int64_t b = 0; b < B; ++b)
              for (int64_t k = 0; k < H; ++k) gates[b * GH + 2 * H + k] += rb[2 * H + k];
        }
        for (int64_t b = 0; b < B; ++b) {
          C* gz = &gates[b * GH];
          C* gh = gz + 2 * H;
          Apply(act[1], clip, gh, H);
          const C* hp = &h[b * H];
          C* hn = &hnew[b * H];
          for (int64_t k = 0; k < H; ++k) hn[k] = (C(1) - gz[k]) * gh[k] + gz[k] * hp[k];
        }
      } else {
        GemmAcc<C>(B, H, H, h.data(), H, rt.data(), GH, gates.data(), GH);
        for (int64_t b = 0; b < B; ++b) {
          C* g = &gates[b * GH];
          Apply(act[0], clip, g, H);
          std::copy(g, g + H, &hnew[b * H]);
        }
      }
      // Commit the step for sequences that are still running.
      for (int64_t b = 0; b < B; ++b) {
        if (t >= a.seq_lens[b]) continue;
        std::copy(&hnew[b * H], &hnew[(b + 1) * H], &h[b * H]);
        if (a.kind == CellKind::kLstm) std::copy(&cnew[b * H], &cnew[(b + 1) * H], &c[b * H]);
        std::copy(&hnew[b * H], &hnew[(b + 1) * H], &out.y[((t * a.dirs + d) * B + b) * H]);
      }
    }
    std::copy(h.begin(), h.end(), &out.yh[d * B * H]);
    if (a.kind == CellKind::kLstm) std::copy(c.begin(), c.end(), &out.yc[d * B * H]);
  }
}

absl::Status CheckInputShape(KernelContext& ctx, int i, const Dims& want, const char* what) {
  if (!ctx.has_input(i)) return absl::OkStatus();
  if (ctx.input(i).dims() != want) {
    std::string w;
    for (size_t k = 0; k < want.size(); ++k) absl::StrAppend(&w, k ? "," : "", want[k]);
    return ctx.Error("input ", i, " (", what, ") must have shape [", w, "]");
  }
  return absl::OkStatus();
}

template <CellKind kKind>
absl::Status Recurrent(KernelContext& ctx) {
  const Node& n = ctx.node();
  for (int i : {0, 1, 2})
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is required");
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& r = ctx.input(2);
  if (!IsFloat(x.dtype())) return ctx.Error("expects a float input, got ", DTypeName(x.dtype()));
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i) || i == 4) continue;
    if (ctx.input(i).dtype() != x.dtype())
      return ctx.Error("input ", i, " has dtype ", DTypeName(ctx.input(i).dtype()), ", expected ", DTypeName(x.dtype()));
  }
  if (x.rank() != 3) return ctx.Error("input 0 (X) has rank ", x.rank(), ", expected 3");
  if (w.rank() != 3) return ctx.Error("input 1 (W) has rank ", w.rank(), ", expected 3");
  if (r.rank() != 3) return ctx.Error("input 2 (R) has rank ", r.rank(), ", expected 3");
  RecurrentArgs a;
  a.kind = kKind;
  auto dirs = NumDirections(n);
  if (!dirs.ok()) return ctx.Error(dirs.status().message());
  a.dirs = *dirs;
  a.reverse_only = n.GetString("direction", "forward") == "reverse";
  a.layout = n.GetInt("layout", 0);
  if (a.layout != 0 && a.layout != 1) return ctx.Error("layout must be 0 or 1, got ", a.layout);
  a.T = x.dim(a.layout == 0 ? 0 : 1);
  a.B = x.dim(a.layout == 0 ? 1 : 0);
  a.I = x.dim(2);
  a.H = n.has_attr("hidden_size") ? n.GetInt("hidden_size", 0) : r.dim(2);
  if (a.H <= 0 || a.H > (int64_t{1} << 31)) return ctx.Error("hidden_size must be in [1, 2^31], got ", a.H);
  const int G = NumGates(kKind);
  const int64_t D = a.dirs, T = a.T, B = a.B, I = a.I, H = a.H;
  KILN_RETURN_IF_ERROR(CheckInputShape(ctx, 1, {D, G * H, I}, "W"));
  KILN_RETURN_IF_ERROR(CheckInputShape(ctx, 2, {D, G * H, H}, "R"));
  KILN_RETURN_IF_ERROR(CheckInputShape(ctx, 3, {D, 2 * G * H}, "B"));
  KILN_RETURN_IF_ERROR(CheckInputShape(ctx, 4, {B}, "sequence_lens"));
  Dims state = a.layout == 0 ? Dims{D, B, H} : Dims{B, D, H};
  KILN_RETURN_IF_ERROR(CheckInputShape(ctx, 5, state, "initial_h"));
  if (kKind == CellKind::kLstm) {
    KILN_RETURN_IF_ERROR(CheckInputShape(ctx, 6, state, "initial_c"));
    KILN_RETURN_IF_ERROR(CheckInputShape(ctx, 7, {D, 3 * H}, "P"));
  }
  auto acts = ParseActivations(n, kKind, a.dirs);
  if (!acts.ok()) return ctx.Error(acts.status().message());
  a.acts = std::move(*acts);
  a.clip = n.has_attr("clip") ? n.GetFloat("clip", 0) : 0.0;
  if (n.has_attr("clip") && a.clip <= 0) return ctx.Error("clip must be positive");
  a.linear_before_reset = n.GetInt("linear_before_reset", 0) != 0;
  a.input_forget = n.GetInt("input_forget", 0) != 0;
  if (ctx.has_input(4)) {
    const Tensor& sl = ctx.input(4);
    if (!IsInteger(sl.dtype())) return ctx.Error("sequence_lens must be an integer tensor");
    a.seq_lens = ToInt64Vector(sl);
    for (int64_t v : a.seq_lens)
      if (v < 0 || v > T) return ctx.Error("sequence length ", v, " is out of range [0, ", T, "]");
  } else {
    a.seq_lens.assign(B, T);
  }
  auto run = [&]<typename Cm>() {
    std::vector<Cm> X = ToCompute<Cm>(x);
    if (a.layout == 1) X = Swap01(X, B, T, I);
    std::vector<Cm> W = ToCompute<Cm>(w), R = ToCompute<Cm>(r);
    std::vector<Cm> Bv, H0, C0, P;
    auto opt = [&](int i, std::vector<Cm>& v, bool state_layout) -> const std::vector<Cm>* {
      if (!ctx.has_input(i)) return nullptr;
      v = ToCompute<Cm>(ctx.input(i));
      if (state_layout && a.layout == 1) v = Swap01(v, B, D, H);
      return &v;
    };
    const std::vector<Cm>* pb = opt(3, Bv, false);
    const std::vector<Cm>* ph = opt(5, H0, true);
    const std::vector<Cm>* pc = kKind == CellKind::kLstm ? opt(6, C0, true) : nullptr;
    const std::vector<Cm>* pp = kKind == CellKind::kLstm ? opt(7, P, false) : nullptr;
    RecurrentOut<Cm> out;
    RunRecurrent<Cm>(a, X, W, R, pb, ph, pc, pp, out);
    auto store = [&](int i, const std::vector<Cm>& v, Dims dims) {
      if (i >= ctx.num_outputs()) return;
      Tensor& t = ctx.AllocOutput(i, x.dtype(), std::move(dims));
      DispatchFloat(x.dtype(), [&]<typename T>() {
        T* p = t.data<T>();
        for (size_t k = 0; k < v.size(); ++k) p[k] = static_cast<T>(v[k]);
      });
    };
    if (a.layout == 0) {
      store(0, out.y, {T, D, B, H});
      store(1, out.yh, {D, B, H});
      if (kKind == CellKind::kLstm) store(2, out.yc, {D, B, H});
    } else {
      // [T, D, B, H] -> [B, T, D, H]
      if (ctx.num_outputs() > 0) {
        std::vector<Cm> yb(out.y.size());
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < D; ++d)
            for (int64_t b = 0; b < B; ++b)
              std::copy_n(&out.y[((t * D + d) * B + b) * H], H, &yb[((b * T + t) * D + d) * H]);
        store(0, yb, {B, T, D, H});
      }
      store(1, Swap01(out.yh, D, B, H), {B, D, H});
      if (kKind == CellKind::kLstm) store(2, Swap01(out.yc, D, B, H), {B, D, H});
    }
  };
  if (x.dtype() == DType::kF64) run.template operator()<double>();
  else run.template operator()<float>();
  return absl::OkStatus();
}

template <CellKind kKind>
OpCost RecurrentCost(const Node& n) {
  OpCost c;
  for (Value* v : n.inputs()) {
    if (!v || !v->type().is_tensor()) continue;
    int64_t e = v->type().shape().NumElements();
    if (e > 0) c.bytes_read += static_cast<double>(e) * DTypeSize(v->type().dtype());
  }
  for (Value* v : n.outputs()) {
    if (!v || !v->type().is_tensor()) continue;
    int64_t e = v->type().shape().NumElements();
    if (e > 0) c.bytes_written += static_cast<double>(e) * DTypeSize(v->type().dtype());
  }
  const Value* x = n.input(0);
  const Value* w = n.input(1);
  const Value* r = n.input(2);
  if (!x || !w || !r) return c;
  auto xd = StaticDims(x->type());
  auto wd = StaticDims(w->type());
  auto rd = StaticDims(r->type());
  if (!xd || !wd || !rd || xd->size() != 3 || wd->size() != 3 || rd->size() != 3) return c;
  const double tb = static_cast<double>((*xd)[0] * (*xd)[1]);
  const double dirs = static_cast<double>((*wd)[0]), gh = static_cast<double>((*wd)[1]);
  const double in = static_cast<double>((*wd)[2]), h = static_cast<double>((*rd)[2]);
  // Two matrix products per step plus a handful of elementwise ops per gate.
  c.flops = dirs * tb * (2.0 * (in + h) * gh + 6.0 * gh);
  return c;
}

// Opset 1 carried output_sequence, which later opsets dropped (outputs are
// optional instead).
absl::Status UpgradeRecurrent(Graph& g, Node* node, int64_t opset) {
  if (opset < 7) node->RemoveAttr("output_sequence");
  if (node->op() == "GRU" && node->GetString("direction", "forward") == "foward")
    node->SetAttr("direction", Attribute::String("forward"));
  return absl::OkStatus();
}

}  // namespace

void RegisterRecurrentOps(OpRegistry& r) {
  auto common = [](OpDefBuilder b) {
    return b.Attr("activation_alpha", AttrKind::kFloats, "per activation")
        .Attr("activation_beta", AttrKind::kFloats, "per activation")
        .Attr("activations", AttrKind::kStrings, "per op")
        .Attr("clip", AttrKind::kFloat, "none")
        .Attr("direction", AttrKind::kString, "forward")
        .Attr("hidden_size", AttrKind::kInt, "from R")
        .Attr("layout", AttrKind::kInt, "0")
        .Class(OpClass::kRecurrent)
        .Upgrade(UpgradeRecurrent);
  };
  common(r.Register("LSTM").Inputs(3, 8).Outputs(0, 3))
      .Attr("input_forget", AttrKind::kInt, "0")
      .Infer(InferRecurrent<CellKind::kLstm>).Kernel(Recurrent<CellKind::kLstm>)
      .Cost(RecurrentCost<CellKind::kLstm>);
  common(r.Register("GRU").Inputs(3, 6).Outputs(0, 2))
      .Attr("linear_before_reset", AttrKind::kInt, "0")
      .Infer(InferRecurrent<CellKind::kGru>).Kernel(Recurrent<CellKind::kGru>)
      .Cost(RecurrentCost<CellKind::kGru>);
  common(r.Register("RNN").Inputs(3, 6).Outputs(0, 2))
      .Infer(InferRecurrent<CellKind::kRnn>).Kernel(Recurrent<CellKind::kRnn>)
      .Cost(RecurrentCost<CellKind::kRnn>);
}

}  // namespace kiln
