//===- conv.cc - Convolution and pooling operators ------------------------===//
//
// Conv, ConvTranspose, ConvInteger, QLinearConv and the pooling family
// (Average/Max/Lp pooling, their global forms, MaxUnpool, MaxRoiPool and
// RoiAlign) over any number of spatial dims.
//
// Convolutions lower to im2col over a block of output positions followed by
// a blocked GEMM whose inner loop runs over contiguous output positions;
// ConvTranspose is the transposed form (GEMM into columns, then col2im).
// f16/bf16 compute in float and round once on store; integer convolutions
// accumulate in int64 after subtracting zero points.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/ops/window_attrs.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

template <typename T> struct ComputeType { using type = T; };
template <> struct ComputeType<Half> { using type = float; };
template <> struct ComputeType<BFloat16> { using type = float; };
template <typename T> using ComputeT = typename ComputeType<T>::type;

//===--- Attributes and output geometry -----------------------------------===//

// Geometry of a window sweep: `grid` window positions over an `img` of
// spatial dims, position o in dim d reads image coordinate
// o*stride - pad_begin + k*dilation for kernel index k.
struct Geometry {
  int nsp = 0;
  int64_t img[kMaxSpatial], grid[kMaxSpatial], kernel[kMaxSpatial];
  int64_t stride[kMaxSpatial], dilation[kMaxSpatial], pad_begin[kMaxSpatial];
  int64_t img_stride[kMaxSpatial];
  int64_t img_size = 1, grid_size = 1, kvol = 1;
};

Geometry MakeGeometry(const Dims& img, const Dims& grid, const WindowAttrs& a) {
  Geometry g;
  g.nsp = a.nsp;
  for (int d = 0; d < a.nsp; ++d) {
    g.img[d] = img[d];
    g.grid[d] = grid[d];
    g.kernel[d] = a.kernel[d];
    g.stride[d] = a.strides[d];
    g.dilation[d] = a.dilations[d];
    g.pad_begin[d] = a.pads[d];
    g.img_size *= img[d];
    g.grid_size *= grid[d];
    g.kvol *= a.kernel[d];
  }
  int64_t s = 1;
  for (int d = a.nsp - 1; d >= 0; --d) {
    g.img_stride[d] = s;
    s *= img[d];
  }
  return g;
}

// A run of grid positions [pos, pos+len) that read image offsets
// img_off + t*step, or padding when img_off < 0.
struct Run {
  int64_t pos, len, img_off, step;
};

// Appends the runs of kernel offset `kidx` over flat grid positions [p0, p1).
void CollectRuns(const Geometry& g, const int64_t* kidx, int64_t p0, int64_t p1, std::vector<Run>& runs) {
  runs.clear();
  const int last = g.nsp - 1;
  int64_t o[kMaxSpatial];
  int64_t rem = p0;
  for (int d = last; d >= 0; --d) {
    o[d] = rem % g.grid[d];
    rem /= g.grid[d];
  }
  const int64_t s = g.stride[last];
  const int64_t c0 = kidx[last] * g.dilation[last] - g.pad_begin[last];
  const int64_t img_last = g.img[last];
  // Valid innermost positions: 0 <= o*s + c0 < img_last.
  const int64_t valid_lo = CeilDiv(-c0, s);
  const int64_t valid_hi = FloorDiv(img_last - 1 - c0, s) + 1;
  int64_t p = p0;
  while (p < p1) {
    int64_t len = std::min(g.grid[last] - o[last], p1 - p);
    bool valid = true;
    int64_t off = 0;
    for (int d = 0; d < last; ++d) {
      int64_t c = o[d] * g.stride[d] - g.pad_begin[d] + kidx[d] * g.dilation[d];
      if (c < 0 || c >= g.img[d]) {
        valid = false;
        break;
      }
      off += c * g.img_stride[d];
    }
    if (!valid) {
      runs.push_back({p, len, -1, 0});
    } else {
      int64_t a = o[last], b = o[last] + len;
      int64_t lo = std::clamp(valid_lo, a, b);
      int64_t hi = std::clamp(valid_hi, lo, b);
      if (lo > a) runs.push_back({p, lo - a, -1, 0});
      if (hi > lo) runs.push_back({p + lo - a, hi - lo, off + lo * s + c0, s});
      if (b > hi) runs.push_back({p + hi - a, b - hi, -1, 0});
    }
    p += len;
    o[last] += len;
    if (o[last] == g.grid[last]) {
      o[last] = 0;
      for (int d = last - 1; d >= 0; --d) {
        if (++o[d] < g.grid[d]) break;
        o[d] = 0;
      }
    }
  }
}

// Advances a kernel multi-index odometer.
inline void NextKernelIndex(const Geometry& g, int64_t* kidx) {
  for (int d = g.nsp - 1; d >= 0; --d) {
    if (++kidx[d] < g.kernel[d]) return;
    kidx[d] = 0;
  }
}

// col[(c*kvol + kk) * (p1-p0) + (p-p0)] = image value read by kernel offset
// kk of channel c at grid position p (0 in padding).
template <typename T>
void Im2Col(const Geometry& g, const T* x, int64_t channels, int64_t p0, int64_t p1, T* col,
            std::vector<Run>& runs) {
  const int64_t pc = p1 - p0;
  int64_t kidx[kMaxSpatial] = {};
  for (int64_t kk = 0; kk < g.kvol; ++kk, NextKernelIndex(g, kidx)) {
    CollectRuns(g, kidx, p0, p1, runs);
    for (int64_t c = 0; c < channels; ++c) {
      T* row = col + (c * g.kvol + kk) * pc - p0;
      const T* xc = x + c * g.img_size;
      for (const Run& r : runs) {
        T* dst = row + r.pos;
        if (r.img_off < 0) {
          std::fill(dst, dst + r.len, T(0));
        } else if (r.step == 1) {
          std::copy(xc + r.img_off, xc + r.img_off + r.len, dst);
        } else {
          const T* src = xc + r.img_off;
          for (int64_t t = 0; t < r.len; ++t) dst[t] = src[t * r.step];
        }
      }
    }
  }
}

// The transpose of Im2Col: adds every column value into the image element it
// was read from.
template <typename T>
void Col2ImAdd(const Geometry& g, const T* col, int64_t channels, int64_t p0, int64_t p1, T* y,
               std::vector<Run>& runs) {
  const int64_t pc = p1 - p0;
  int64_t kidx[kMaxSpatial] = {};
  for (int64_t kk = 0; kk < g.kvol; ++kk, NextKernelIndex(g, kidx)) {
    CollectRuns(g, kidx, p0, p1, runs);
    for (int64_t c = 0; c < channels; ++c) {
      const T* row = col + (c * g.kvol + kk) * pc - p0;
      T* yc = y + c * g.img_size;
      for (const Run& r : runs) {
        if (r.img_off < 0) continue;
        const T* src = row + r.pos;
        T* dst = yc + r.img_off;
        if (r.step == 1) {
          for (int64_t t = 0; t < r.len; ++t) dst[t] += src[t];
        } else {
          for (int64_t t = 0; t < r.len; ++t) dst[t * r.step] += src[t];
        }
      }
    }
  }
}

// y[m*ldy + p] += sum_k w[m*ldw + k] * b[k*ldb + p] for m < M, k < K, p < P.
// Blocked over P and K. Inside a block, a tile of 4 rows x 2 vectors of y
// stays in registers while k runs (i-k-j order over contiguous j), so each
// segment of a b row serves four output rows. The vectors are 16-byte
// GCC/Clang vector-extension types, which compile to SSE without -march.
template <typename T>
void GemmAcc(int64_t M, int64_t K, int64_t P, const T* w, int64_t ldw, const T* b, int64_t ldb, T* y,
             int64_t ldy) {
  constexpr int64_t VL = 16 / sizeof(T);
  typedef T V __attribute__((vector_size(VL * sizeof(T))));
  constexpr int64_t kBlockP = 256, kBlockK = 256, NR = 2 * VL;
  auto load = [](const T* p) {
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
  };
  auto store = [](T* p, const V& v) { std::memcpy(p, &v, sizeof(V)); };
  for (int64_t p0 = 0; p0 < P; p0 += kBlockP) {
    const int64_t pn = std::min(kBlockP, P - p0);
    const int64_t pv = pn - pn % NR;  // columns covered by vector tiles
    for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
      const int64_t kn = std::min(kBlockK, K - k0);
      const T* bb = b + k0 * ldb + p0;
      int64_t m = 0;
      for (; m + 4 <= M; m += 4) {
        const T* w0 = w + m * ldw + k0;
        const T* w1 = w0 + ldw;
        const T* w2 = w1 + ldw;
        const T* w3 = w2 + ldw;
        T* y0 = y + m * ldy + p0;
        T* y1 = y0 + ldy;
        T* y2 = y1 + ldy;
        T* y3 = y2 + ldy;
        for (int64_t p = 0; p < pv; p += NR) {
          V a00 = load(y0 + p), a01 = load(y0 + p + VL), a10 = load(y1 + p), a11 = load(y1 + p + VL);
          V a20 = load(y2 + p), a21 = load(y2 + p + VL), a30 = load(y3 + p), a31 = load(y3 + p + VL);
          const T* br = bb + p;
          for (int64_t k = 0; k < kn; ++k, br += ldb) {
            const V b0 = load(br), b1 = load(br + VL);
            const T x0 = w0[k], x1 = w1[k], x2 = w2[k], x3 = w3[k];
            a00 += x0 * b0;
            a01 += x0 * b1;
            a10 += x1 * b0;
            a11 += x1 * b1;
            a20 += x2 * b0;
            a21 += x2 * b1;
            a30 += x3 * b0;
            a31 += x3 * b1;
          }
          store(y0 + p, a00), store(y0 + p + VL, a01), store(y1 + p, a10), store(y1 + p + VL, a11);
          store(y2 + p, a20), store(y2 + p + VL, a21), store(y3 + p, a30), store(y3 + p + VL, a31);
        }
      }
      for (; m < M; ++m) {
        const T* w0 = w + m * ldw + k0;
        T* y0 = y + m * ldy + p0;
        for (int64_t p = 0; p < pv; p += NR) {
          V a0 = load(y0 + p), a1 = load(y0 + p + VL);
          const T* br = bb + p;
          for (int64_t k = 0; k < kn; ++k, br += ldb) {
            a0 += w0[k] * load(br);
            a1 += w0[k] * load(br + VL);
          }
          store(y0 + p, a0), store(y0 + p + VL, a1);
        }
      }
      // Columns past the last full tile.
      if (pv < pn) {
        for (int64_t mm = 0; mm < M; ++mm) {
          const T* wr = w + mm * ldw + k0;
          T* yr = y + mm * ldy + p0;
          for (int64_t k = 0; k < kn; ++k) {
            const T a = wr[k];
            const T* br = bb + k * ldb;
            for (int64_t p = pv; p < pn; ++p) yr[p] += a * br[p];
          }
        }
      }
    }
  }
}

// Positions per im2col block: about 256K column elements, at least 256
// positions, at most P.
inline int64_t ChunkSize(int64_t rows, int64_t P) {
  int64_t c = std::max<int64_t>((int64_t{1} << 18) / std::max<int64_t>(rows, 1), 256);
  return std::max<int64_t>(std::min(c, P), 1);
}

// Shape of one convolution: N images of C channels over geometry g (img =
// input spatial, grid = output spatial), M output channels in `group` groups.
struct ConvShape {
  int64_t N, C, M, group;
  Geometry g;
};

// y[N, M, grid] = conv(x[N, C, img], w[M, C/group, kernel]) + bias[M].
template <typename T>
void ConvForward(const ConvShape& s, const T* x, const T* w, const T* bias, T* y) {
  const Geometry& g = s.g;
  const int64_t Cg = s.C / s.group, Mg = s.M / s.group, K = Cg * g.kvol;
  const int64_t P = g.grid_size, I = g.img_size;
  bool direct = g.kvol == 1;
  for (int d = 0; d < g.nsp && direct; ++d)
    direct = g.stride[d] == 1 && g.pad_begin[d] == 0 && g.img[d] == g.grid[d];
  const int64_t chunk = direct ? std::max<int64_t>(P, 1) : ChunkSize(K, P);
  std::vector<T> col(direct ? 0 : K * chunk);
  std::vector<Run> runs;
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t gi = 0; gi < s.group; ++gi) {
      const T* xg = x + (n * s.C + gi * Cg) * I;
      T* yg = y + (n * s.M + gi * Mg) * P;
      const T* wg = w + gi * Mg * K;
      for (int64_t m = 0; m < Mg; ++m) std::fill(yg + m * P, yg + (m + 1) * P, bias ? bias[gi * Mg + m] : T(0));
      for (int64_t p0 = 0; p0 < P; p0 += chunk) {
        const int64_t p1 = std::min(P, p0 + chunk);
        if (direct) {
          GemmAcc(Mg, K, p1 - p0, wg, K, xg + p0, I, yg + p0, P);
        } else {
          Im2Col(g, xg, Cg, p0, p1, col.data(), runs);
          GemmAcc(Mg, K, p1 - p0, wg, K, col.data(), p1 - p0, yg + p0, P);
        }
      }
    }
  }
}

// y[N, M, img] = conv_transpose(x[N, C, grid], w[C, M/group, kernel]) + bias.
template <typename T>
void ConvTransposeForward(const ConvShape& s, const T* x, const T* w, const T* bias, T* y) {
  const Geometry& g = s.g;
  const int64_t Cg = s.C / s.group, Mg = s.M / s.group, R = Mg * g.kvol;
  const int64_t P = g.grid_size, I = g.img_size;
  const int64_t chunk = ChunkSize(R, P);
  std::vector<T> col(R * chunk);
  std::vector<T> wt(R * Cg);  // the group's weights as [R, Cg]
  std::vector<Run> runs;
  for (int64_t m = 0; m < s.N * s.M; ++m) {
    T b = bias ? bias[m % s.M] : T(0);
    std::fill(y + m * I, y + (m + 1) * I, b);
  }
  for (int64_t gi = 0; gi < s.group; ++gi) {
    const T* wg = w + gi * Cg * R;
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t r = 0; r < R; ++r) wt[r * Cg + c] = wg[c * R + r];
    for (int64_t n = 0; n < s.N; ++n) {
      const T* xg = x + (n * s.C + gi * Cg) * P;
      T* yg = y + (n * s.M + gi * Mg) * I;
      for (int64_t p0 = 0; p0 < P; p0 += chunk) {
        const int64_t p1 = std::min(P, p0 + chunk);
        std::fill(col.begin(), col.begin() + R * (p1 - p0), T(0));
        GemmAcc(R, Cg, p1 - p0, wt.data(), Cg, xg + p0, P, col.data(), p1 - p0);
        Col2ImAdd(g, col.data(), Mg, p0, p1, yg, runs);
      }
    }
  }
}

//===--- Shared helpers for kernels ---------------------------------------===//

// A tensor's elements in compute type C (a copy; f32/f64 kernels use the
// tensor's storage directly instead).
template <typename C>
std::vector<C> ToCompute(const Tensor& t) {
  std::vector<C> out(t.numel());
  DispatchNumeric(t.dtype(), [&]<typename T>() {
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<C>(ToDouble(p[i]));
  });
  return out;
}

Dims SpatialOf(const Dims& d) { return Dims(d.begin() + 2, d.end()); }

// Bytes of every static input and output of a node.
void AddIoBytes(const Node& n, OpCost& c) {
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
}

int64_t StaticNumel(const Value* v) {
  if (!v || !v->type().is_tensor()) return -1;
  return v->type().shape().NumElements();
}

// Shape of a typed input, or null when not a ranked tensor.
const Shape* RankedShape(const InferContext& ctx, int i) {
  if (!ctx.has_input(i)) return nullptr;
  const Type& t = ctx.input_type(i);
  if (!t.is_tensor() || !t.shape().ranked()) return nullptr;
  return &t.shape();
}

// Static kernel dims from weights of shape [M, C/group, k...].
std::optional<std::vector<int64_t>> KernelFromWeights(const Shape* w, int nsp) {
  if (!w || w->rank() != nsp + 2) return std::nullopt;
  std::vector<int64_t> k;
  for (int d = 0; d < nsp; ++d) {
    if (!(*w)[d + 2].is_static()) return std::nullopt;
    k.push_back((*w)[d + 2].value());
  }
  return k;
}

// Output spatial dims for a possibly partial input shape (rank already checked).
absl::StatusOr<DimVector> InferWindowDims(const InferContext& ctx, WindowAttrs& a, const Shape& x) {
  DimVector out;
  for (int d = 0; d < a.nsp; ++d) {
    const Dim& in = x[d + 2];
    if (!in.is_static() || a.kernel.empty()) {
      out.push_back(Dim());
      continue;
    }
    auto o = WindowOutDim(a, d, in.value());
    if (!o.ok()) return ctx.Error(o.status().message());
    out.push_back(Dim(*o));
  }
  return out;
}

absl::Status CheckRankAtLeast3(const InferContext& ctx, const Shape& x, int input) {
  if (x.rank() < 3)
    return ctx.Error("input ", input, " has rank ", x.rank(), ", expected at least 3 (N, C, spatial...)");
  return absl::OkStatus();
}

//===--- Conv -------------------------------------------------------------===//

// Output type of a convolution whose input is input 0 and weights input
// `w_input` ([M, C/group, k...]).
absl::Status InferConvLike(InferContext& ctx, int w_input, DType out_dtype) {
  const Shape* x = RankedShape(ctx, 0);
  const Shape* w = RankedShape(ctx, w_input);
  if (!x) {
    ctx.set_output(0, Type::Tensor(out_dtype, Shape()));
    return absl::OkStatus();
  }
  KILN_RETURN_IF_ERROR(CheckRankAtLeast3(ctx, *x, 0));
  int nsp = x->rank() - 2;
  if (w && w->rank() != x->rank())
    return ctx.Error("input ", w_input, " (weights) has rank ", w->rank(), ", expected ", x->rank());
  int64_t group = ctx.node().GetInt("group", 1);
  if (group <= 0) return ctx.Error("group must be positive, got ", group);
  if (w && (*w)[0].is_static() && (*w)[0].value() % group != 0)
    return ctx.Error("output channels (", (*w)[0].value(), ") are not divisible by group ", group);
  if (w && (*x)[1].is_static() && (*w)[1].is_static() && (*w)[1].value() * group != (*x)[1].value())
    return ctx.Error("input has ", (*x)[1].value(), " channels but the weights expect ", (*w)[1].value(),
                     " x group ", group);
  auto kw = KernelFromWeights(w, nsp);
  WindowAttrs a;
  absl::Status st = ReadWindowAttrs(ctx.node(), nsp, kw ? &*kw : nullptr, false, a);
  if (!st.ok()) return ctx.Error(st.message());
  KILN_ASSIGN_OR_RETURN(DimVector sp, InferWindowDims(ctx, a, *x));
  DimVector dims = {(*x)[0], w ? (*w)[0] : Dim()};
  for (const Dim& d : sp) dims.push_back(d);
  ctx.set_output(0, Type::Tensor(out_dtype, Shape(std::move(dims))));
  return absl::OkStatus();
}

absl::Status InferConv(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.Error("inputs X and W are required");
  DType dt = ctx.input_type(0).dtype();
  if (dt != DType::kUndefined && !IsFloat(dt)) return ctx.Error("expects a float input, got ", DTypeName(dt));
  DType wdt = ctx.input_type(1).dtype();
  if (dt != DType::kUndefined && wdt != DType::kUndefined && wdt != dt)
    return ctx.Error("input 1 has dtype ", DTypeName(wdt), ", expected ", DTypeName(dt));
  if (const Shape* b = RankedShape(ctx, 2)) {
    if (b->rank() != 1) return ctx.Error("input 2 (bias) has rank ", b->rank(), ", expected 1");
    const Shape* w = RankedShape(ctx, 1);
    if (w && (*w)[0].is_static() && (*b)[0].is_static() && (*w)[0].value() != (*b)[0].value())
      return ctx.Error("bias has ", (*b)[0].value(), " values, expected ", (*w)[0].value());
  }
  return InferConvLike(ctx, 1, dt);
}

// Validates a convolution's tensors and fills in its shape and output dims.
// `w_in` is [M, C/group, k...]; the output is [N, M, out...].
absl::Status PrepareConv(KernelContext& ctx, const Tensor& x, const Tensor& w, ConvShape& cs, Dims& out_dims) {
  if (x.rank() < 3) return ctx.Error("input 0 has rank ", x.rank(), ", expected at least 3");
  if (w.rank() != x.rank()) return ctx.Error("weights have rank ", w.rank(), ", expected ", x.rank());
  int nsp = x.rank() - 2;
  int64_t group = ctx.node().GetInt("group", 1);
  if (group <= 0) return ctx.Error("group must be positive, got ", group);
  cs.N = x.dim(0);
  cs.C = x.dim(1);
  cs.M = w.dim(0);
  cs.group = group;
  if (cs.C % group != 0 || w.dim(1) * group != cs.C)
    return ctx.Error("input has ", cs.C, " channels but the weights expect ", w.dim(1), " x group ", group);
  if (cs.M % group != 0) return ctx.Error("output channels (", cs.M, ") are not divisible by group ", group);
  std::vector<int64_t> kw(w.dims().begin() + 2, w.dims().end());
  WindowAttrs a;
  absl::Status st = ReadWindowAttrs(ctx.node(), nsp, &kw, true, a);
  if (!st.ok()) return ctx.Error(st.message());
  auto sp = WindowOutDims(a, SpatialOf(x.dims()));
  if (!sp.ok()) return ctx.Error(sp.status().message());
  cs.g = MakeGeometry(SpatialOf(x.dims()), *sp, a);
  out_dims = {cs.N, cs.M};
  out_dims.insert(out_dims.end(), sp->begin(), sp->end());
  return absl::OkStatus();
}

absl::Status CheckBias(KernelContext& ctx, int i, int64_t m, DType dt) {
  if (!ctx.has_input(i)) return absl::OkStatus();
  const Tensor& b = ctx.input(i);
  if (b.rank() != 1 || b.dim(0) != m) return ctx.Error("bias must have shape [", m, "]");
  if (b.dtype() != dt) return ctx.Error("bias has dtype ", DTypeName(b.dtype()), ", expected ", DTypeName(dt));
  return absl::OkStatus();
}

// Runs a float convolution (forward or transposed) in its compute type.
template <bool kTranspose>
absl::Status RunFloatConv(KernelContext& ctx, const ConvShape& cs, const Dims& out_dims) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out_dims);
  auto run = [&](auto* xp, auto* wp, auto* bp, auto* yp) {
    if constexpr (kTranspose) ConvTransposeForward(cs, xp, wp, bp, yp);
    else ConvForward(cs, xp, wp, bp, yp);
  };
  if (x.dtype() == DType::kF32) {
    run(x.data<float>(), w.data<float>(), b ? b->data<float>() : nullptr, y.data<float>());
  } else if (x.dtype() == DType::kF64) {
    run(x.data<double>(), w.data<double>(), b ? b->data<double>() : nullptr, y.data<double>());
  } else {
    std::vector<float> xf = ToCompute<float>(x), wf = ToCompute<float>(w), bf;
    if (b) bf = ToCompute<float>(*b);
    std::vector<float> yf(y.numel());
    run(xf.data(), wf.data(), b ? bf.data() : nullptr, yf.data());
    DispatchFloat(y.dtype(), [&]<typename T>() {
      T* out = y.data<T>();
      for (int64_t i = 0; i < y.numel(); ++i) out[i] = static_cast<T>(yf[i]);
    });
  }
  return absl::OkStatus();
}

absl::Status Conv(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (!IsFloat(x.dtype())) return ctx.Error("expects a float input, got ", DTypeName(x.dtype()));
  if (w.dtype() != x.dtype()) return ctx.Error("weights have dtype ", DTypeName(w.dtype()), ", expected ", DTypeName(x.dtype()));
  ConvShape cs;
  Dims out_dims;
  KILN_RETURN_IF_ERROR(PrepareConv(ctx, x, w, cs, out_dims));
  KILN_RETURN_IF_ERROR(CheckBias(ctx, 2, cs.M, x.dtype()));
  return RunFloatConv<false>(ctx, cs, out_dims);
}

// 2 * N * M * out_spatial * (C/group) * kernel volume: each output element
// takes one multiply-add per weight of its output channel.
template <int kWeightInput>
OpCost ConvCost(const Node& n) {
  OpCost c;
  AddIoBytes(n, c);
  int64_t y = StaticNumel(n.output(0));
  const Value* w = n.input(kWeightInput);
  int64_t wn = StaticNumel(w);
  if (y > 0 && wn > 0 && w->type().shape().rank() >= 1) {
    int64_t m = w->type().shape()[0].value();
    if (m > 0) c.flops = 2.0 * static_cast<double>(y) * static_cast<double>(wn / m);
  }
  return c;
}

//===--- ConvTranspose ----------------------------------------------------===//

// Output spatial dims and pads of a ConvTranspose with known input dims.
absl::StatusOr<Dims> ConvTransposeOutDims(const Node& n, WindowAttrs& a, const Dims& in) {
  std::vector<int64_t> out_pad = n.GetInts("output_padding", std::vector<int64_t>(a.nsp, 0));
  if (out_pad.empty()) out_pad.assign(a.nsp, 0);
  if (static_cast<int>(out_pad.size()) != a.nsp)
    return InvalidArgument("output_padding has ", out_pad.size(), " values, expected ", a.nsp);
  for (int64_t p : out_pad)
    if (p < 0 || p > kMaxAttrValue) return InvalidArgument("output_padding must be in [0, ", kMaxAttrValue, "]");
  std::vector<int64_t> out_shape = n.GetInts("output_shape");
  if (static_cast<int>(out_shape.size()) == a.nsp + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && static_cast<int>(out_shape.size()) != a.nsp)
    return InvalidArgument("output_shape has ", out_shape.size(), " values, expected ", a.nsp);
  Dims out(a.nsp);
  for (int d = 0; d < a.nsp; ++d) {
    int64_t ek = (a.kernel[d] - 1) * a.dilations[d] + 1;
    int64_t full = a.strides[d] * (in[d] - 1) + out_pad[d] + ek;
    int64_t& pb = a.pads[d];
    int64_t& pe = a.pads[d + a.nsp];
    bool same = a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER";
    if (!out_shape.empty() || same) {
      int64_t target = !out_shape.empty() ? out_shape[d] : in[d] * a.strides[d];
      if (target < 0 || target > kMaxAttrValue)
        return InvalidArgument("output_shape values must be in [0, ", kMaxAttrValue, "]");
      int64_t total = std::max<int64_t>(0, full - target);
      if (a.auto_pad == "SAME_UPPER") {
        pb = total / 2;
        pe = total - pb;
      } else {
        pb = total - total / 2;
        pe = total / 2;
      }
      out[d] = target;
    } else {
      if (a.auto_pad == "VALID") pb = pe = 0;
      out[d] = full - pb - pe;
      if (out[d] < 0) return InvalidArgument("pads exceed the output extent of spatial dim ", d);
    }
  }
  return out;
}

absl::Status InferConvTranspose(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.Error("inputs X and W are required");
  DType dt = ctx.input_type(0).dtype();
  if (dt != DType::kUndefined && !IsFloat(dt)) return ctx.Error("expects a float input, got ", DTypeName(dt));
  const Shape* x = RankedShape(ctx, 0);
  const Shape* w = RankedShape(ctx, 1);
  if (!x) {
    ctx.set_output(0, Type::Tensor(dt, Shape()));
    return absl::OkStatus();
  }
  KILN_RETURN_IF_ERROR(CheckRankAtLeast3(ctx, *x, 0));
  int nsp = x->rank() - 2;
  if (w && w->rank() != x->rank()) return ctx.Error("input 1 (weights) has rank ", w->rank(), ", expected ", x->rank());
  int64_t group = ctx.node().GetInt("group", 1);
  if (group <= 0) return ctx.Error("group must be positive, got ", group);
  if (w && (*x)[1].is_static() && (*w)[0].is_static() && (*w)[0].value() != (*x)[1].value())
    return ctx.Error("input has ", (*x)[1].value(), " channels but the weights have ", (*w)[0].value());
  auto kw = KernelFromWeights(w, nsp);
  WindowAttrs a;
  absl::Status st = ReadWindowAttrs(ctx.node(), nsp, kw ? &*kw : nullptr, false, a);
  if (!st.ok()) return ctx.Error(st.message());
  Dim m = (w && (*w)[1].is_static()) ? Dim((*w)[1].value() * group) : Dim();
  DimVector dims = {(*x)[0], m};
  bool static_in = !a.kernel.empty();
  Dims in(nsp);
  for (int d = 0; d < nsp; ++d) {
    if ((*x)[d + 2].is_static()) in[d] = (*x)[d + 2].value();
    else static_in = false;
  }
  std::vector<int64_t> out_shape = ctx.node().GetInts("output_shape");
  if (static_in) {
    auto o = ConvTransposeOutDims(ctx.node(), a, in);
    if (!o.ok()) return ctx.Error(o.status().message());
    for (int64_t v : *o) dims.push_back(Dim(v));
  } else {
    if (static_cast<int>(out_shape.size()) == nsp + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
    for (int d = 0; d < nsp; ++d)
      dims.push_back(static_cast<int>(out_shape.size()) == nsp ? Dim(out_shape[d]) : Dim());
  }
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(dims))));
  return absl::OkStatus();
}

absl::Status ConvTranspose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (!IsFloat(x.dtype())) return ctx.Error("expects a float input, got ", DTypeName(x.dtype()));
  if (w.dtype() != x.dtype()) return ctx.Error("weights have dtype ", DTypeName(w.dtype()), ", expected ", DTypeName(x.dtype()));
  if (x.rank() < 3) return ctx.Error("input 0 has rank ", x.rank(), ", expected at least 3");
  if (w.rank() != x.rank()) return ctx.Error("weights have rank ", w.rank(), ", expected ", x.rank());
  int nsp = x.rank() - 2;
  int64_t group = ctx.node().GetInt("group", 1);
  if (group <= 0) return ctx.Error("group must be positive, got ", group);
  ConvShape cs;
  cs.N = x.dim(0);
  cs.C = x.dim(1);
  cs.group = group;
  if (w.dim(0) != cs.C) return ctx.Error("input has ", cs.C, " channels but the weights have ", w.dim(0));
  if (cs.C % group != 0) return ctx.Error("input channels (", cs.C, ") are not divisible by group ", group);
  cs.M = w.dim(1) * group;
  std::vector<int64_t> kw(w.dims().begin() + 2, w.dims().end());
  WindowAttrs a;
  absl::Status st = ReadWindowAttrs(ctx.node(), nsp, &kw, true, a);
  if (!st.ok()) return ctx.Error(st.message());
  auto sp = ConvTransposeOutDims(ctx.node(), a, SpatialOf(x.dims()));
  if (!sp.ok()) return ctx.Error(sp.status().message());
  KILN_RETURN_IF_ERROR(CheckBias(ctx, 2, cs.M, x.dtype()));
  // The image is the output; the window positions are the input elements.
  cs.g = MakeGeometry(*sp, SpatialOf(x.dims()), a);
  Dims out_dims = {cs.N, cs.M};
  out_dims.insert(out_dims.end(), sp->begin(), sp->end());
  return RunFloatConv<true>(ctx, cs, out_dims);
}

OpCost ConvTransposeCost(const Node& n) {
  OpCost c;
  AddIoBytes(n, c);
  int64_t xn = StaticNumel(n.input(0));
  const Value* w = n.input(1);
  int64_t wn = StaticNumel(w);
  if (xn > 0 && wn > 0 && w->type().shape().rank() >= 1) {
    int64_t cin = w->type().shape()[0].value();
    if (cin > 0) c.flops = 2.0 * static_cast<double>(xn) * static_cast<double>(wn / cin);
  }
  return c;
}

//===--- ConvInteger / QLinearConv ----------------------------------------===//

bool IsInt8Like(DType t) { return t == DType::kU8 || t == DType::kI8; }

// Integer conv input minus its zero point, as int64.
absl::StatusOr<std::vector<int64_t>> ShiftedInt(KernelContext& ctx, int data, int zp, const char* what) {
  const Tensor& t = ctx.input(data);
  std::vector<int64_t> v = ToInt64Vector(t);
  if (ctx.has_input(zp)) {
    const Tensor& z = ctx.input(zp);
    if (z.dtype() != t.dtype())
      return ctx.Error(what, " zero point has dtype ", DTypeName(z.dtype()), ", expected ", DTypeName(t.dtype()));
    if (z.numel() != 1) return ctx.Error(what, " zero point must be a scalar");
    int64_t zv = z.GetInt(0);
    for (int64_t& e : v) e -= zv;
  }
  return v;
}

// Weights minus a per-tensor or per-output-channel zero point, as int64.
absl::StatusOr<std::vector<int64_t>> ShiftedWeights(KernelContext& ctx, int data, int zp) {
  const Tensor& w = ctx.input(data);
  std::vector<int64_t> v = ToInt64Vector(w);
  if (!ctx.has_input(zp)) return v;
  const Tensor& z = ctx.input(zp);
  if (z.dtype() != w.dtype())
    return ctx.Error("weight zero point has dtype ", DTypeName(z.dtype()), ", expected ", DTypeName(w.dtype()));
  int64_t m = w.dim(0);
  if (z.numel() != 1 && !(z.rank() == 1 && z.numel() == m))
    return ctx.Error("weight zero point must be a scalar or have ", m, " values");
  std::vector<int64_t> zv = ToInt64Vector(z);
  int64_t per = m > 0 ? w.numel() / m : 0;
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) v[i] -= zv.size() == 1 ? zv[0] : zv[i / per];
  return v;
}

absl::Status InferConvInteger(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.Error("inputs x and w are required");
  for (int i : {0, 1}) {
    DType dt = ctx.input_type(i).dtype();
    if (dt != DType::kUndefined && !IsInt8Like(dt))
      return ctx.Error("input ", i, " has dtype ", DTypeName(dt), ", expected u8 or i8");
  }
  return InferConvLike(ctx, 1, DType::kI32);
}

absl::Status ConvInteger(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (!IsInt8Like(x.dtype()) || !IsInt8Like(w.dtype())) return ctx.Error("inputs must be u8 or i8");
  ConvShape cs;
  Dims out_dims;
  KILN_RETURN_IF_ERROR(PrepareConv(ctx, x, w, cs, out_dims));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> xv, ShiftedInt(ctx, 0, 2, "input"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> wv, ShiftedWeights(ctx, 1, 3));
  std::vector<int64_t> acc(NumElements(out_dims));
  ConvForward<int64_t>(cs, xv.data(), wv.data(), nullptr, acc.data());
  Tensor& y = ctx.AllocOutput(0, DType::kI32, out_dims);
  int32_t* out = y.data<int32_t>();
  for (size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<int32_t>(acc[i]);
  return absl::OkStatus();
}

// QLinearConv inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point,
// y_scale, y_zero_point, B.
absl::Status InferQLinearConv(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(3)) return ctx.Error("inputs x and w are required");
  for (int i : {0, 3}) {
    DType dt = ctx.input_type(i).dtype();
    if (dt != DType::kUndefined && !IsInt8Like(dt))
      return ctx.Error("input ", i, " has dtype ", DTypeName(dt), ", expected u8 or i8");
  }
  DType out = ctx.has_input(7) ? ctx.input_type(7).dtype() : ctx.input_type(0).dtype();
  return InferConvLike(ctx, 3, out);
}

absl::Status QLinearConv(KernelContext& ctx) {
  for (int i = 0; i < 8; ++i)
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is required");
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  if (!IsInt8Like(x.dtype()) || !IsInt8Like(w.dtype())) return ctx.Error("inputs x and w must be u8 or i8");
  DType out_dt = ctx.input(7).dtype();
  if (!IsInt8Like(out_dt)) return ctx.Error("y_zero_point must be u8 or i8");
  if (ctx.input(7).numel() != 1) return ctx.Error("y_zero_point must be a scalar");
  for (int i : {1, 4, 6})
    if (ctx.input(i).dtype() != DType::kF32) return ctx.Error("input ", i, " (a scale) must be f32");
  if (ctx.input(1).numel() != 1 || ctx.input(6).numel() != 1) return ctx.Error("x_scale and y_scale must be scalars");
  ConvShape cs;
  Dims out_dims;
  KILN_RETURN_IF_ERROR(PrepareConv(ctx, x, w, cs, out_dims));
  const Tensor& ws = ctx.input(4);
  if (ws.numel() != 1 && !(ws.rank() == 1 && ws.numel() == cs.M))
    return ctx.Error("w_scale must be a scalar or have ", cs.M, " values");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> xv, ShiftedInt(ctx, 0, 2, "x"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> wv, ShiftedWeights(ctx, 3, 5));
  std::vector<int64_t> bias;
  if (ctx.has_input(8)) {
    const Tensor& b = ctx.input(8);
    if (b.dtype() != DType::kI32 || b.rank() != 1 || b.dim(0) != cs.M)
      return ctx.Error("B must be i32 of shape [", cs.M, "]");
    bias = ToInt64Vector(b);
  }
  std::vector<int64_t> acc(NumElements(out_dims));
  ConvForward<int64_t>(cs, xv.data(), wv.data(), bias.empty() ? nullptr : bias.data(), acc.data());
  const float xs = ctx.input(1).data<float>()[0], ys = ctx.input(6).data<float>()[0];
  const float* wsp = ws.data<float>();
  const int64_t yzp = ctx.input(7).GetInt(0);
  const int64_t plane = cs.g.grid_size;
  Tensor& y = ctx.AllocOutput(0, out_dt, out_dims);
  auto store = [&]<typename T>() {
    T* out = y.data<T>();
    constexpr float lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    for (int64_t i = 0; i < static_cast<int64_t>(acc.size()); ++i) {
      int64_t m = plane > 0 ? (i / plane) % cs.M : 0;
      float scale = xs * wsp[ws.numel() == 1 ? 0 : m] / ys;
      float v = std::nearbyint(static_cast<float>(acc[i]) * scale) + static_cast<float>(yzp);
      out[i] = static_cast<T>(std::clamp(v, lo, hi));
    }
  };
  if (out_dt == DType::kU8) store.template operator()<uint8_t>();
  else store.template operator()<int8_t>();
  return absl::OkStatus();
}

//===--- Pooling ----------------------------------------------------------===//

// Per spatial dim and output index: first image coordinate of the window
// and the range of kernel indices that land inside the image.
struct PoolTables {
  std::vector<int64_t> start[kMaxSpatial], klo[kMaxSpatial], khi[kMaxSpatial];
  std::vector<int64_t> incl[kMaxSpatial];  // window positions inside image + pads
};

PoolTables MakePoolTables(const Geometry& g, const WindowAttrs& a) {
  PoolTables t;
  for (int d = 0; d < g.nsp; ++d) {
    const int64_t n = g.grid[d], dil = g.dilation[d], img = g.img[d], k = g.kernel[d];
    const int64_t pe = a.pads[d + g.nsp];
    t.start[d].resize(n);
    t.klo[d].resize(n);
    t.khi[d].resize(n);
    t.incl[d].resize(n);
    for (int64_t o = 0; o < n; ++o) {
      int64_t s = o * g.stride[d] - g.pad_begin[d];
      t.start[d][o] = s;
      int64_t lo = std::max<int64_t>(0, CeilDiv(-s, dil));
      int64_t hi = std::min<int64_t>(k, FloorDiv(img - 1 - s, dil) + 1);
      t.klo[d][o] = std::min(lo, k);
      t.khi[d][o] = std::max(hi, t.klo[d][o]);
      t.incl[d][o] = std::clamp<int64_t>(FloorDiv(img + pe - 1 - s, dil) + 1, 0, k);
    }
  }
  return t;
}

// Calls visit(out_index, window) for every output position of one plane,
// where window.for_each(f) calls f(image_offset) for each valid position.
struct Window {
  const Geometry* g;
  int64_t start[kMaxSpatial], lo[kMaxSpatial], hi[kMaxSpatial];
  int64_t count() const {
    int64_t c = 1;
    for (int d = 0; d < g->nsp; ++d) c *= hi[d] - lo[d];
    return c;
  }
  template <typename F>
  void ForEach(F&& f) const {
    const int nsp = g->nsp, last = nsp - 1;
    for (int d = 0; d < nsp; ++d)
      if (hi[d] <= lo[d]) return;
    int64_t k[kMaxSpatial];
    for (int d = 0; d < nsp; ++d) k[d] = lo[d];
    const int64_t dl = g->dilation[last];
    while (true) {
      int64_t off = 0;
      for (int d = 0; d < last; ++d) off += (start[d] + k[d] * g->dilation[d]) * g->img_stride[d];
      off += start[last];
      for (int64_t kk = lo[last]; kk < hi[last]; ++kk) f(off + kk * dl);
      int d = last - 1;
      for (; d >= 0; --d) {
        if (++k[d] < hi[d]) break;
        k[d] = lo[d];
      }
      if (d < 0) return;
    }
  }
};

template <typename Visit>
void ForEachWindow(const Geometry& g, const PoolTables& t, Visit&& visit) {
  Window w;
  w.g = &g;
  int64_t o[kMaxSpatial] = {};
  for (int64_t i = 0; i < g.grid_size; ++i) {
    for (int d = 0; d < g.nsp; ++d) {
      w.start[d] = t.start[d][o[d]];
      w.lo[d] = t.klo[d][o[d]];
      w.hi[d] = t.khi[d][o[d]];
    }
    visit(i, w, o);
    for (int d = g.nsp - 1; d >= 0; --d) {
      if (++o[d] < g.grid[d]) break;
      o[d] = 0;
    }
  }
}

// Reads pooling attributes and computes the geometry for input x.
absl::Status PreparePool(KernelContext& ctx, const Tensor& x, WindowAttrs& a, Geometry& g, Dims& out_dims) {
  if (x.rank() < 3) return ctx.Error("input 0 has rank ", x.rank(), ", expected at least 3");
  int nsp = x.rank() - 2;
  absl::Status st = ReadWindowAttrs(ctx.node(), nsp, nullptr, true, a);
  if (!st.ok()) return ctx.Error(st.message());
  auto sp = WindowOutDims(a, SpatialOf(x.dims()));
  if (!sp.ok()) return ctx.Error(sp.status().message());
  g = MakeGeometry(SpatialOf(x.dims()), *sp, a);
  out_dims = {x.dim(0), x.dim(1)};
  out_dims.insert(out_dims.end(), sp->begin(), sp->end());
  return absl::OkStatus();
}

absl::Status InferPool(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.Error("input 0 is missing");
  const Type& xt = ctx.input_type(0);
  DType dt = xt.dtype();
  const Shape* x = RankedShape(ctx, 0);
  Shape out;
  if (x) {
    KILN_RETURN_IF_ERROR(CheckRankAtLeast3(ctx, *x, 0));
    WindowAttrs a;
    absl::Status st = ReadWindowAttrs(ctx.node(), x->rank() - 2, nullptr, true, a);
    if (!st.ok()) return ctx.Error(st.message());
    KILN_ASSIGN_OR_RETURN(DimVector sp, InferWindowDims(ctx, a, *x));
    DimVector dims = {(*x)[0], (*x)[1]};
    for (const Dim& d : sp) dims.push_back(d);
    out = Shape(std::move(dims));
  }
  ctx.set_output(0, Type::Tensor(dt, out));
  if (ctx.num_outputs() > 1) ctx.set_output(1, Type::Tensor(DType::kI64, out));
  return absl::OkStatus();
}

absl::Status InferFloatPool(InferContext& ctx) {
  if (ctx.has_input(0)) {
    DType dt = ctx.input_type(0).dtype();
    if (dt != DType::kUndefined && !IsFloat(dt)) return ctx.Error("expects a float input, got ", DTypeName(dt));
  }
  return InferPool(ctx);
}

absl::Status InferMaxPool(InferContext& ctx) {
  if (ctx.has_input(0)) {
    DType dt = ctx.input_type(0).dtype();
    if (dt != DType::kUndefined && !IsFloat(dt) && dt != DType::kI8 && dt != DType::kU8)
      return ctx.Error("expects a float, i8 or u8 input, got ", DTypeName(dt));
  }
  int64_t so = ctx.node().GetInt("storage_order", 0);
  if (so != 0 && so != 1) return ctx.Error("storage_order must be 0 or 1, got ", so);
  return InferPool(ctx);
}

absl::Status AveragePool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("expects a float input, got ", DTypeName(x.dtype()));
  WindowAttrs a;
  Geometry g;
  Dims out_dims;
  KILN_RETURN_IF_ERROR(PreparePool(ctx, x, a, g, out_dims));
  const bool include_pad = ctx.node().GetInt("count_include_pad", 0) != 0;
  PoolTables t = MakePoolTables(g, a);
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out_dims);
  const int64_t planes = x.dim(0) * x.dim(1);
  DispatchFloat(x.dtype(), [&]<typename T>() {
    using C = ComputeT<T>;
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* in = x.data<T>() + pl * g.img_size;
      T* out = y.data<T>() + pl * g.grid_size;
      ForEachWindow(g, t, [&](int64_t i, const Window& w, const int64_t* o) {
        C sum = 0;
        w.ForEach([&](int64_t off) { sum += static_cast<C>(in[off]); });
        int64_t count = 1;
        if (include_pad) {
          for (int d = 0; d < g.nsp; ++d) count *= t.incl[d][o[d]];
        } else {
          count = w.count();
        }
        out[i] = static_cast<T>(sum / static_cast<C>(count));
      });
    }
  });
  return absl::OkStatus();
}

template <typename F>
void DispatchMaxPoolType(DType t, F&& f) {
  if (t == DType::kI8) f.template operator()<int8_t>();
  else if (t == DType::kU8) f.template operator()<uint8_t>();
  else DispatchFloat(t, f);
}

absl::Status MaxPool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype()) && x.dtype() != DType::kI8 && x.dtype() != DType::kU8)
    return ctx.Error("expects a float, i8 or u8 input, got ", DTypeName(x.dtype()));
  WindowAttrs a;
  Geometry g;
  Dims out_dims;
  KILN_RETURN_IF_ERROR(PreparePool(ctx, x, a, g, out_dims));
  int64_t storage_order = ctx.node().GetInt("storage_order", 0);
  if (storage_order != 0 && storage_order != 1) return ctx.Error("storage_order must be 0 or 1");
  PoolTables t = MakePoolTables(g, a);
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out_dims);
  const bool want_indices = ctx.num_outputs() > 1;
  int64_t* idx = want_indices ? ctx.AllocOutput(1, DType::kI64, out_dims).data<int64_t>() : nullptr;
  // Column-major strides of the spatial dims for storage_order = 1.
  int64_t col_stride[kMaxSpatial];
  for (int d = 0, s = 1; d < g.nsp; ++d) {
    col_stride[d] = s;
    s *= g.img[d];
  }
  const int64_t planes = x.dim(0) * x.dim(1);
  DispatchMaxPoolType(x.dtype(), [&]<typename T>() {
    using C = ComputeT<T>;
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* in = x.data<T>() + pl * g.img_size;
      T* out = y.data<T>() + pl * g.grid_size;
      ForEachWindow(g, t, [&](int64_t i, const Window& w, const int64_t*) {
        C best = std::numeric_limits<C>::lowest();
        int64_t best_off = -1;
        w.ForEach([&](int64_t off) {
          C v = static_cast<C>(in[off]);
          if (best_off < 0 || v > best) {
            best = v;
            best_off = off;
          }
        });
        out[i] = static_cast<T>(best);
        if (idx) {
          int64_t r = -1;
          if (best_off >= 0) {
            if (storage_order == 0) {
              r = pl * g.img_size + best_off;
            } else {
              r = pl * g.img_size;
              int64_t rem = best_off;
              for (int d = 0; d < g.nsp; ++d) {
                r += (rem / g.img_stride[d]) * col_stride[d];
                rem %= g.img_stride[d];
              }
            }
          }
          idx[pl * g.grid_size + i] = r;
        }
      });
    }
  });
  return absl::OkStatus();
}

absl::Status LpPool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("expects a float input, got ", DTypeName(x.dtype()));
  WindowAttrs a;
  Geometry g;
  Dims out_dims;
  KILN_RETURN_IF_ERROR(PreparePool(ctx, x, a, g, out_dims));
  const int64_t p = ctx.node().GetInt("p", 2);
  if (p <= 0) return ctx.Error("p must be positive, got ", p);
  PoolTables t = MakePoolTables(g, a);
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out_dims);
  const int64_t planes = x.dim(0) * x.dim(1);
  DispatchFloat(x.dtype(), [&]<typename T>() {
    using C = ComputeT<T>;
    const C pc = static_cast<C>(p), inv = C(1) / pc;
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* in = x.data<T>() + pl * g.img_size;
      T* out = y.data<T>() + pl * g.grid_size;
      ForEachWindow(g, t, [&](int64_t i, const Window& w, const int64_t*) {
        C sum = 0;
        if (p == 1) w.ForEach([&](int64_t off) { sum += std::abs(static_cast<C>(in[off])); });
        else if (p == 2) w.ForEach([&](int64_t off) { C v = static_cast<C>(in[off]); sum += v * v; });
        else w.ForEach([&](int64_t off) { sum += std::pow(std::abs(static_cast<C>(in[off])), pc); });
        out[i] = static_cast<T>(p == 1 ? sum : p == 2 ? std::sqrt(sum) : std::pow(sum, inv));
      });
    }
  });
  return absl::OkStatus();
}

OpCost PoolCost(const Node& n) {
  OpCost c;
  AddIoBytes(n, c);
  int64_t y = StaticNumel(n.output(0));
  std::vector<int64_t> k = n.GetInts("kernel_shape");
  double kvol = 1;
  for (int64_t v : k) kvol *= static_cast<double>(v);
  if (y > 0) c.flops = static_cast<double>(y) * kvol * (n.op() == "LpPool" ? 3 : 1);
  return c;
}

//===--- Global pooling ---------------------------------------------------===//

absl::Status InferGlobalPool(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.Error("input 0 is missing");
  DType dt = ctx.input_type(0).dtype();
  if (dt != DType::kUndefined && !IsFloat(dt)) return ctx.Error("expects a float input, got ", DTypeName(dt));
  const Shape* x = RankedShape(ctx, 0);
  Shape out;
  if (x) {
    KILN_RETURN_IF_ERROR(CheckRankAtLeast3(ctx, *x, 0));
    DimVector dims = {(*x)[0], (*x)[1]};
    for (int d = 2; d < x->rank(); ++d) dims.push_back(Dim(1));
    out = Shape(std::move(dims));
  }
  ctx.set_output(0, Type::Tensor(dt, out));
  return absl::OkStatus();
}

enum class GlobalKind { kAvg, kMax, kLp };

template <GlobalKind kKind>
absl::Status GlobalPool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("expects a float input, got ", DTypeName(x.dtype()));
  if (x.rank() < 3) return ctx.Error("input 0 has rank ", x.rank(), ", expected at least 3");
  const int64_t p = ctx.node().GetInt("p", 2);
  if (kKind == GlobalKind::kLp && p <= 0) return ctx.Error("p must be positive, got ", p);
  Dims out_dims(x.rank(), 1);
  out_dims[0] = x.dim(0);
  out_dims[1] = x.dim(1);
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out_dims);
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t size = planes > 0 ? x.numel() / planes : 0;
  DispatchFloat(x.dtype(), [&]<typename T>() {
    using C = ComputeT<T>;
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* in = x.data<T>() + pl * size;
      C r;
      if constexpr (kKind == GlobalKind::kAvg) {
        C sum = 0;
        for (int64_t i = 0; i < size; ++i) sum += static_cast<C>(in[i]);
        r = sum / static_cast<C>(size);
      } else if constexpr (kKind == GlobalKind::kMax) {
        r = size > 0 ? static_cast<C>(in[0]) : std::numeric_limits<C>::lowest();
        for (int64_t i = 1; i < size; ++i) r = std::max(r, static_cast<C>(in[i]));
      } else {
        C sum = 0;
        const C pc = static_cast<C>(p);
        for (int64_t i = 0; i < size; ++i) {
          C v = std::abs(static_cast<C>(in[i]));
          sum += p == 1 ? v : p == 2 ? v * v : std::pow(v, pc);
        }
        r = p == 1 ? sum : p == 2 ? std::sqrt(sum) : std::pow(sum, C(1) / pc);
      }
      y.data<T>()[pl] = static_cast<T>(r);
    }
  });
  return absl::OkStatus();
}

OpCost GlobalPoolCost(const Node& n) {
  OpCost c;
  AddIoBytes(n, c);
  int64_t x = StaticNumel(n.input(0));
  if (x > 0) c.flops = static_cast<double>(x) * (n.op() == "GlobalLpPool" ? 3 : 1);
  return c;
}

//===--- MaxUnpool --------------------------------------------------------===//

// Default output spatial dims of MaxUnpool: (in-1)*stride + kernel - pads.
absl::StatusOr<Dims> UnpoolDims(const WindowAttrs& a, const Dims& in) {
  Dims out(a.nsp);
  for (int d = 0; d < a.nsp; ++d) {
    out[d] = (in[d] - 1) * a.strides[d] + a.kernel[d] - a.pads[d] - a.pads[d + a.nsp];
    if (out[d] < 0) return InvalidArgument("pads exceed the output extent of spatial dim ", d);
  }
  return out;
}

absl::Status InferMaxUnpool(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.Error("inputs X and I are required");
  DType dt = ctx.input_type(0).dtype();
  DType it = ctx.input_type(1).dtype();
  if (it != DType::kUndefined && it != DType::kI64) return ctx.Error("input 1 (indices) must be i64, got ", DTypeName(it));
  const Shape* x = RankedShape(ctx, 0);
  if (ctx.has_input(2)) {
    if (const Tensor* os = ctx.const_input(2)) {
      std::vector<int64_t> v = ToInt64Vector(*os);
      if (x && static_cast<int>(v.size()) != x->rank())
        return ctx.Error("output_shape has ", v.size(), " values, expected ", x->rank());
      ctx.set_output(0, Type::Tensor(dt, Shape::Static(v)));
      return absl::OkStatus();
    }
    DimVector dims(x ? x->rank() : 0);
    ctx.set_output(0, Type::Tensor(dt, x ? Shape(dims) : Shape()));
    return absl::OkStatus();
  }
  if (!x) {
    ctx.set_output(0, Type::Tensor(dt, Shape()));
    return absl::OkStatus();
  }
  KILN_RETURN_IF_ERROR(CheckRankAtLeast3(ctx, *x, 0));
  WindowAttrs a;
  absl::Status st = ReadWindowAttrs(ctx.node(), x->rank() - 2, nullptr, true, a);
  if (!st.ok()) return ctx.Error(st.message());
  DimVector dims = {(*x)[0], (*x)[1]};
  for (int d = 0; d < a.nsp; ++d) {
    const Dim& in = (*x)[d + 2];
    if (!in.is_static()) {
      dims.push_back(Dim());
      continue;
    }
    int64_t v = (in.value() - 1) * a.strides[d] + a.kernel[d] - a.pads[d] - a.pads[d + a.nsp];
    if (v < 0) return ctx.Error("pads exceed the output extent of spatial dim ", d);
    dims.push_back(Dim(v));
  }
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(dims))));
  return absl::OkStatus();
}

absl::Status MaxUnpool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  if (x.rank() < 3) return ctx.Error("input 0 has rank ", x.rank(), ", expected at least 3");
  if (ind.dtype() != DType::kI64) return ctx.Error("indices must be i64");
  if (ind.dims() != x.dims()) return ctx.Error("indices must have the shape of X");
  WindowAttrs a;
  absl::Status st = ReadWindowAttrs(ctx.node(), x.rank() - 2, nullptr, true, a);
  if (!st.ok()) return ctx.Error(st.message());
  auto sp = UnpoolDims(a, SpatialOf(x.dims()));
  if (!sp.ok()) return ctx.Error(sp.status().message());
  Dims inferred = {x.dim(0), x.dim(1)};
  inferred.insert(inferred.end(), sp->begin(), sp->end());
  Dims out_dims = inferred;
  if (ctx.has_input(2)) {
    out_dims = ToInt64Vector(ctx.input(2));
    if (static_cast<int>(out_dims.size()) != x.rank())
      return ctx.Error("output_shape has ", out_dims.size(), " values, expected ", x.rank());
    for (int64_t v : out_dims)
      if (v < 0) return ctx.Error("output_shape values must be non-negative");
  }
  // Indices address the tensor of the inferred shape; with an explicit
  // output_shape that tensor is placed at the origin of the output.
  const int64_t total = NumElements(inferred);
  const int64_t* I = ind.data<int64_t>();
  for (int64_t i = 0; i < ind.numel(); ++i)
    if (I[i] < 0 || I[i] >= total) return ctx.Error("index ", I[i], " is out of range [0, ", total, ")");
  Tensor& y = ctx.AllocOutput(0, x.dtype(), out_dims);
  const bool same = out_dims == inferred;
  Dims in_strides = StridesOf(inferred), out_strides = StridesOf(out_dims);
  DispatchBySize(x.dtype(), [&]<typename T>() {
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t dst = I[i];
      if (!same) {
        int64_t rem = dst, o = 0;
        bool inside = true;
        for (size_t d = 0; d < inferred.size(); ++d) {
          int64_t c = rem / in_strides[d];
          rem %= in_strides[d];
          if (c >= out_dims[d]) inside = false;
          o += c * out_strides[d];
        }
        if (!inside) continue;
        dst = o;
      }
      out[dst] = in[i];
    }
  });
  return absl::OkStatus();
}

//===--- MaxRoiPool -------------------------------------------------------===//

// Rounds half away from zero into [-2^40, 2^40]; NaN becomes -1.
int64_t RoundClamped(double v) {
  if (std::isnan(v)) return -1;
  constexpr double kLim = static_cast<double>(int64_t{1} << 40);
  return static_cast<int64_t>(std::round(std::clamp(v, -kLim, kLim)));
}

absl::Status InferRoiPool(InferContext& ctx, int64_t ph, int64_t pw) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.Error("inputs X and rois are required");
  DType dt = ctx.input_type(0).dtype();
  if (dt != DType::kUndefined && !IsFloat(dt)) return ctx.Error("expects a float input, got ", DTypeName(dt));
  const Shape* x = RankedShape(ctx, 0);
  const Shape* r = RankedShape(ctx, 1);
  if (x && x->rank() != 4) return ctx.Error("input 0 has rank ", x->rank(), ", expected 4");
  if (r && r->rank() != 2) return ctx.Error("input 1 (rois) has rank ", r->rank(), ", expected 2");
  ctx.set_output(0, Type::Tensor(dt, Shape({r ? (*r)[0] : Dim(), x ? (*x)[1] : Dim(), Dim(ph), Dim(pw)})));
  return absl::OkStatus();
}

absl::Status InferMaxRoiPool(InferContext& ctx) {
  std::vector<int64_t> ps = ctx.node().GetInts("pooled_shape");
  if (ps.size() != 2 || ps[0] <= 0 || ps[1] <= 0) return ctx.Error("pooled_shape must be two positive values");
  const Shape* r = RankedShape(ctx, 1);
  if (r && r->rank() == 2 && (*r)[1].is_static() && (*r)[1].value() != 5)
    return ctx.Error("rois must have shape [num_rois, 5]");
  return InferRoiPool(ctx, ps[0], ps[1]);
}

absl::Status MaxRoiPool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  if (!IsFloat(x.dtype())) return ctx.Error("expects a float input, got ", DTypeName(x.dtype()));
  if (x.rank() != 4) return ctx.Error("input 0 has rank ", x.rank(), ", expected 4");
  if (rois.rank() != 2 || rois.dim(1) != 5) return ctx.Error("rois must have shape [num_rois, 5]");
  if (rois.dtype() != x.dtype()) return ctx.Error("rois must have the dtype of X");
  std::vector<int64_t> ps = ctx.node().GetInts("pooled_shape");
  if (ps.size() != 2 || ps[0] <= 0 || ps[1] <= 0) return ctx.Error("pooled_shape must be two positive values");
  const float scale = ctx.node().GetFloat("spatial_scale", 1.0f);
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), R = rois.dim(0);
  const int64_t PH = ps[0], PW = ps[1];
  std::vector<double> rv = ToDoubleVector(rois);
  Tensor& y = ctx.AllocOutput(0, x.dtype(), {R, C, PH, PW});
  DispatchFloat(x.dtype(), [&]<typename T>() {
    using Cm = ComputeT<T>;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t r = 0; r < R; ++r) {
      const double* roi = &rv[r * 5];
      int64_t b = RoundClamped(std::trunc(roi[0]));
      if (b < 0 || b >= N) {
        std::fill(out + r * C * PH * PW, out + (r + 1) * C * PH * PW, T(0));
        continue;
      }
      int64_t x1 = RoundClamped(roi[1] * scale), y1 = RoundClamped(roi[2] * scale);
      int64_t x2 = RoundClamped(roi[3] * scale), y2 = RoundClamped(roi[4] * scale);
      int64_t rh = std::max<int64_t>(y2 - y1 + 1, 1), rw = std::max<int64_t>(x2 - x1 + 1, 1);
      double bh = static_cast<double>(rh) / PH, bw = static_cast<double>(rw) / PW;
      for (int64_t c = 0; c < C; ++c) {
        const T* plane = in + (b * C + c) * H * W;
        T* o = out + ((r * C + c) * PH) * PW;
        for (int64_t i = 0; i < PH; ++i) {
          int64_t hs = std::clamp<int64_t>(static_cast<int64_t>(std::floor(i * bh)) + y1, 0, H);
          int64_t he = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((i + 1) * bh)) + y1, 0, H);
          for (int64_t j = 0; j < PW; ++j) {
            int64_t ws = std::clamp<int64_t>(static_cast<int64_t>(std::floor(j * bw)) + x1, 0, W);
            int64_t we = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((j + 1) * bw)) + x1, 0, W);
            Cm best = 0;
            bool any = false;
            for (int64_t h = hs; h < he; ++h)
              for (int64_t w = ws; w < we; ++w) {
                Cm v = static_cast<Cm>(plane[h * W + w]);
                if (!any || v > best) best = v;
                any = true;
              }
            o[i * PW + j] = static_cast<T>(best);
          }
        }
      }
    }
  });
  return absl::OkStatus();
}

//===--- RoiAlign ---------------------------------------------------------===//

absl::Status InferRoiAlign(InferContext& ctx) {
  const Node& n = ctx.node();
  int64_t oh = n.GetInt("output_height", 1), ow = n.GetInt("output_width", 1);
  if (oh <= 0 || ow <= 0) return ctx.Error("output_height and output_width must be positive");
  std::string mode = n.GetString("mode", "avg");
  if (mode != "avg" && mode != "max") return ctx.Error("mode must be 'avg' or 'max', got '", mode, "'");
  std::string ctm = n.GetString("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return ctx.Error("coordinate_transformation_mode must be 'half_pixel' or 'output_half_pixel'");
  const Shape* r = RankedShape(ctx, 1);
  if (r && r->rank() == 2 && (*r)[1].is_static() && (*r)[1].value() != 4)
    return ctx.Error("rois must have shape [num_rois, 4]");
  if (const Shape* bi = RankedShape(ctx, 2)) {
    if (bi->rank() != 1) return ctx.Error("input 2 (batch_indices) has rank ", bi->rank(), ", expected 1");
  }
  return InferRoiPool(ctx, oh, ow);
}

absl::Status RoiAlign(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  if (!ctx.has_input(2)) return ctx.Error("input 2 (batch_indices) is required");
  const Tensor& bidx = ctx.input(2);
  if (!IsFloat(x.dtype())) return ctx.Error("expects a float input, got ", DTypeName(x.dtype()));
  if (x.rank() != 4) return ctx.Error("input 0 has rank ", x.rank(), ", expected 4");
  if (rois.rank() != 2 || rois.dim(1) != 4) return ctx.Error("rois must have shape [num_rois, 4]");
  if (!IsFloat(rois.dtype())) return ctx.Error("rois must be float");
  if (!IsInteger(bidx.dtype()) || bidx.rank() != 1 || bidx.dim(0) != rois.dim(0))
    return ctx.Error("batch_indices must be an integer tensor of shape [", rois.dim(0), "]");
  const Node& n = ctx.node();
  const int64_t PH = n.GetInt("output_height", 1), PW = n.GetInt("output_width", 1);
  if (PH <= 0 || PW <= 0) return ctx.Error("output_height and output_width must be positive");
  const int64_t sampling = n.GetInt("sampling_ratio", 0);
  if (sampling < 0) return ctx.Error("sampling_ratio must be non-negative");
  const float scale = n.GetFloat("spatial_scale", 1.0f);
  const std::string mode = n.GetString("mode", "avg");
  if (mode != "avg" && mode != "max") return ctx.Error("mode must be 'avg' or 'max', got '", mode, "'");
  const std::string ctm = n.GetString("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return ctx.Error("coordinate_transformation_mode must be 'half_pixel' or 'output_half_pixel'");
  const bool half_pixel = ctm == "half_pixel";
  const bool is_max = mode == "max";
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), R = rois.dim(0);
  std::vector<double> rv = ToDoubleVector(rois);
  std::vector<int64_t> bv = ToInt64Vector(bidx);
  for (int64_t b : bv)
    if (b < 0 || b >= N) return ctx.Error("batch index ", b, " is out of range [0, ", N, ")");
  Tensor& y = ctx.AllocOutput(0, x.dtype(), {R, C, PH, PW});
  // One bilinear sample: four image offsets and weights.
  struct Sample {
    int64_t pos[4];
    float w[4];
  };
  std::vector<Sample> samples;
  return DispatchFloat(x.dtype(), [&]<typename T>() -> absl::Status {
    using Cm = ComputeT<T>;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t r = 0; r < R; ++r) {
      const double* roi = &rv[r * 4];
      const float offset = half_pixel ? 0.5f : 0.0f;
      float sw = static_cast<float>(roi[0]) * scale - offset;
      float sh = static_cast<float>(roi[1]) * scale - offset;
      float ew = static_cast<float>(roi[2]) * scale - offset;
      float eh = static_cast<float>(roi[3]) * scale - offset;
      float rw = ew - sw, rh = eh - sh;
      if (!half_pixel) {
        rw = std::max(rw, 1.0f);
        rh = std::max(rh, 1.0f);
      }
      const float bin_h = rh / PH, bin_w = rw / PW;
      // Samples per bin; bounded so that an absurd RoI cannot exhaust memory.
      auto grid = [&](float extent, int64_t bins) -> int64_t {
        if (sampling > 0) return sampling;
        float g = std::ceil(extent / static_cast<float>(bins));
        return g >= 1.0f ? static_cast<int64_t>(std::min(g, 1048576.0f)) : 0;
      };
      const int64_t gh_n = grid(rh, PH), gw_n = grid(rw, PW);
      if (static_cast<double>(gh_n) * static_cast<double>(gw_n) * static_cast<double>(PH * PW) > (1 << 24))
        return ctx.Error("RoI ", r, " needs too many samples (", gh_n, "x", gw_n, " per bin)");
      const float count = static_cast<float>(std::max<int64_t>(gh_n * gw_n, 1));
      // Sample positions and weights are the same for every channel.
      samples.assign(PH * PW * gh_n * gw_n, Sample{});
      size_t si = 0;
      for (int64_t ph = 0; ph < PH; ++ph)
        for (int64_t pw = 0; pw < PW; ++pw)
          for (int64_t iy = 0; iy < gh_n; ++iy) {
            const float yy = sh + ph * bin_h + (iy + 0.5f) * bin_h / static_cast<float>(gh_n);
            for (int64_t ix = 0; ix < gw_n; ++ix, ++si) {
              const float xx = sw + pw * bin_w + (ix + 0.5f) * bin_w / static_cast<float>(gw_n);
              Sample& s = samples[si];
              float yv = yy, xv = xx;
              // Outside the feature map (or NaN): contributes 0.
              if (!(yv >= -1.0f && yv <= H && xv >= -1.0f && xv <= W)) continue;
              if (yv <= 0) yv = 0;
              if (xv <= 0) xv = 0;
              int64_t yl = static_cast<int64_t>(yv), xl = static_cast<int64_t>(xv), yh, xh;
              if (yl >= H - 1) {
                yh = yl = H - 1;
                yv = static_cast<float>(yl);
              } else {
                yh = yl + 1;
              }
              if (xl >= W - 1) {
                xh = xl = W - 1;
                xv = static_cast<float>(xl);
              } else {
                xh = xl + 1;
              }
              const float ly = yv - yl, lx = xv - xl, hy = 1.0f - ly, hx = 1.0f - lx;
              s.pos[0] = yl * W + xl;
              s.pos[1] = yl * W + xh;
              s.pos[2] = yh * W + xl;
              s.pos[3] = yh * W + xh;
              s.w[0] = hy * hx;
              s.w[1] = hy * lx;
              s.w[2] = ly * hx;
              s.w[3] = ly * lx;
            }
          }
      const int64_t per_bin = gh_n * gw_n;
      for (int64_t c = 0; c < C; ++c) {
        const T* plane = in + (bv[r] * C + c) * H * W;
        T* o = out + (r * C + c) * PH * PW;
        for (int64_t b = 0; b < PH * PW; ++b) {
          const Sample* sp = samples.data() + b * per_bin;
          Cm acc = 0;
          for (int64_t k = 0; k < per_bin; ++k) {
            const Sample& s = sp[k];
            if (H == 0 || W == 0) break;
            Cm v0 = s.w[0] * static_cast<Cm>(plane[s.pos[0]]), v1 = s.w[1] * static_cast<Cm>(plane[s.pos[1]]);
            Cm v2 = s.w[2] * static_cast<Cm>(plane[s.pos[2]]), v3 = s.w[3] * static_cast<Cm>(plane[s.pos[3]]);
            if (is_max) {
              Cm v = std::max(std::max(v0, v1), std::max(v2, v3));
              acc = k == 0 ? v : std::max(acc, v);
            } else {
              acc += v0 + v1 + v2 + v3;
            }
          }
          o[b] = static_cast<T>(is_max ? acc : acc / static_cast<Cm>(count));
        }
      }
    }
    return absl::OkStatus();
  });
}

OpCost RoiCost(const Node& n) {
  OpCost c;
  AddIoBytes(n, c);
  int64_t y = StaticNumel(n.output(0));
  if (y > 0) c.flops = static_cast<double>(y) * (n.op() == "RoiAlign" ? 4 * 8 : 4);
  return c;
}

//===--- Upgraders --------------------------------------------------------===//

// LpPool-1 and GlobalLpPool-1 carried p as a float.
absl::Status UpgradeLpPool(Graph& g, Node* node, int64_t opset) {
  if (opset < 2) {
    if (const Attribute* p = node->attr("p"); p && p->kind() == AttrKind::kFloat) {
      float v = p->f();
      node->SetAttr("p", Attribute::Int(static_cast<int64_t>(std::lround(v))));
    }
  }
  return absl::OkStatus();
}

// RoiAlign before opset 16 used what opset 16 calls output_half_pixel.
absl::Status UpgradeRoiAlign(Graph& g, Node* node, int64_t opset) {
  if (opset < 16 && !node->has_attr("coordinate_transformation_mode"))
    node->SetAttr("coordinate_transformation_mode", Attribute::String("output_half_pixel"));
  return absl::OkStatus();
}

}  // namespace

void RegisterConvOps(OpRegistry& r) {
  auto conv_attrs = [](OpDefBuilder b) {
    return b.Attr("auto_pad", AttrKind::kString, "NOTSET")
        .Attr("dilations", AttrKind::kInts, "1 per spatial dim")
        .Attr("group", AttrKind::kInt, "1")
        .Attr("kernel_shape", AttrKind::kInts, "from the weights")
        .Attr("pads", AttrKind::kInts, "0 per spatial dim begin and end")
        .Attr("strides", AttrKind::kInts, "1 per spatial dim");
  };
  conv_attrs(r.Register("Conv").Inputs(2, 3).Outputs(1).Class(OpClass::kConv))
      .Infer(InferConv).Kernel(Conv).Cost(ConvCost<1>);
  conv_attrs(r.Register("ConvTranspose").Inputs(2, 3).Outputs(1).Class(OpClass::kConv))
      .Attr("output_padding", AttrKind::kInts, "0 per spatial dim")
      .Attr("output_shape", AttrKind::kInts, "computed from pads")
      .Infer(InferConvTranspose).Kernel(ConvTranspose).Cost(ConvTransposeCost);
  conv_attrs(r.Register("ConvInteger").Inputs(2, 4).Outputs(1).Class(OpClass::kConv).Since(10))
      .Infer(InferConvInteger).Kernel(ConvInteger).Cost(ConvCost<1>);
  conv_attrs(r.Register("QLinearConv").Inputs(8, 9).Outputs(1).Class(OpClass::kConv).Since(10))
      .Infer(InferQLinearConv).Kernel(QLinearConv).Cost(ConvCost<3>);

  auto pool_attrs = [](OpDefBuilder b) {
    return b.Attr("auto_pad", AttrKind::kString, "NOTSET")
        .RequiredAttr("kernel_shape", AttrKind::kInts)
        .Attr("pads", AttrKind::kInts, "0 per spatial dim begin and end")
        .Attr("strides", AttrKind::kInts, "1 per spatial dim");
  };
  pool_attrs(r.Register("AveragePool").Inputs(1).Outputs(1).Class(OpClass::kPool))
      .Attr("ceil_mode", AttrKind::kInt, "0")
      .Attr("count_include_pad", AttrKind::kInt, "0")
      .Attr("dilations", AttrKind::kInts, "1 per spatial dim")
      .Infer(InferFloatPool).Kernel(AveragePool).Cost(PoolCost);
  pool_attrs(r.Register("MaxPool").Inputs(1).Outputs(1, 2).Class(OpClass::kPool))
      .Attr("ceil_mode", AttrKind::kInt, "0")
      .Attr("dilations", AttrKind::kInts, "1 per spatial dim")
      .Attr("storage_order", AttrKind::kInt, "0")
      .Infer(InferMaxPool).Kernel(MaxPool).Cost(PoolCost);
  pool_attrs(r.Register("LpPool").Inputs(1).Outputs(1).Class(OpClass::kPool))
      .Attr("ceil_mode", AttrKind::kInt, "0")
      .Attr("dilations", AttrKind::kInts, "1 per spatial dim")
      .Attr("p", AttrKind::kInt, "2")
      .Infer(InferFloatPool).Kernel(LpPool).Cost(PoolCost).Upgrade(UpgradeLpPool);
  r.Register("MaxUnpool").Inputs(2, 3).Outputs(1).Class(OpClass::kPool).Since(9)
      .RequiredAttr("kernel_shape", AttrKind::kInts)
      .Attr("pads", AttrKind::kInts, "0 per spatial dim begin and end")
      .Attr("strides", AttrKind::kInts, "1 per spatial dim")
      .Infer(InferMaxUnpool).Kernel(MaxUnpool);

  r.Register("GlobalAveragePool").Inputs(1).Outputs(1).Class(OpClass::kPool)
      .Infer(InferGlobalPool).Kernel(GlobalPool<GlobalKind::kAvg>).Cost(GlobalPoolCost);
  r.Register("GlobalMaxPool").Inputs(1).Outputs(1).Class(OpClass::kPool)
      .Infer(InferGlobalPool).Kernel(GlobalPool<GlobalKind::kMax>).Cost(GlobalPoolCost);
  r.Register("GlobalLpPool").Inputs(1).Outputs(1).Class(OpClass::kPool)
      .Attr("p", AttrKind::kInt, "2")
      .Infer(InferGlobalPool).Kernel(GlobalPool<GlobalKind::kLp>).Cost(GlobalPoolCost)
      .Upgrade(UpgradeLpPool);

  r.Register("MaxRoiPool").Inputs(2).Outputs(1).Class(OpClass::kPool)
      .RequiredAttr("pooled_shape", AttrKind::kInts)
      .Attr("spatial_scale", AttrKind::kFloat, "1.0")
      .Infer(InferMaxRoiPool).Kernel(MaxRoiPool).Cost(RoiCost);
  r.Register("RoiAlign").Inputs(3).Outputs(1).Class(OpClass::kPool).Since(10)
      .Attr("coordinate_transformation_mode", AttrKind::kString, "half_pixel")
      .Attr("mode", AttrKind::kString, "avg")
      .Attr("output_height", AttrKind::kInt, "1")
      .Attr("output_width", AttrKind::kInt, "1")
      .Attr("sampling_ratio", AttrKind::kInt, "0")
      .Attr("spatial_scale", AttrKind::kFloat, "1.0")
      .Infer(InferRoiAlign).Kernel(RoiAlign).Cost(RoiCost).Upgrade(UpgradeRoiAlign);
}

}  // namespace kiln
