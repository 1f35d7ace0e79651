//===- exec.cc - Functional semantics and costs of NPU instructions -------===//
//
// Arithmetic follows the documented rules (docs/npu.md): fp16/bf16 values
// are computed in fp32 and rounded to nearest even (graph/support/float16.h);
// the cube multiplies and accumulates in fp32 in k order (int32 for int8);
// vector reductions accumulate in fp32 in element order.
//
//===----------------------------------------------------------------------===//
#include "sim/model/exec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "graph/support/float16.h"
#include "sim/machine/machine.h"

namespace kiln::sim {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

float LoadF(DType t, const uint8_t* p) {
  switch (t) {
    case DType::kF32: { float f; std::memcpy(&f, p, 4); return f; }
    case DType::kF16: { uint16_t h; std::memcpy(&h, p, 2); return HalfBitsToFloat(h); }
    case DType::kBF16: { uint16_t h; std::memcpy(&h, p, 2); return BFloat16BitsToFloat(h); }
    case DType::kS32: { int32_t v; std::memcpy(&v, p, 4); return static_cast<float>(v); }
    case DType::kS8: return static_cast<float>(static_cast<int8_t>(*p));
    default: return 0;
  }
}

void StoreF(DType t, uint8_t* p, float f) {
  switch (t) {
    case DType::kF32: std::memcpy(p, &f, 4); break;
    case DType::kF16: { uint16_t h = FloatToHalfBits(f); std::memcpy(p, &h, 2); break; }
    case DType::kBF16: { uint16_t h = FloatToBFloat16Bits(f); std::memcpy(p, &h, 2); break; }
    default: break;
  }
}

int32_t LoadI(const uint8_t* p) { int32_t v; std::memcpy(&v, p, 4); return v; }
void StoreI(uint8_t* p, int32_t v) { std::memcpy(p, &v, 4); }
int32_t Wrap(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

// float -> int32 with a rounding mode, saturating; NaN gives 0.
int32_t ToInt(float f, int64_t mode) {
  if (std::isnan(f)) return 0;
  double d = f;
  switch (static_cast<RoundMode>(mode)) {
    case RoundMode::kRint: d = std::nearbyint(d); break;
    case RoundMode::kTrunc: d = std::trunc(d); break;
    case RoundMode::kFloor: d = std::floor(d); break;
    case RoundMode::kCeil: d = std::ceil(d); break;
  }
  if (d >= 2147483647.0) return std::numeric_limits<int32_t>::max();
  if (d <= -2147483648.0) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(d);
}

uint8_t* Ptr(const Inst& in, int k, const std::array<int64_t, 4>& addr, const ExecContext& ctx) {
  const Operand& o = in.ops[k];
  if (o.space == Space::kGm) return (*ctx.gm_args)[o.arg] + addr[k];
  return ctx.local[static_cast<int>(o.space)] + addr[k];
}

void Copy(const Inst& in, uint8_t* dst, const uint8_t* src) {
  const auto& a = in.attrs;
  for (int64_t b = 0; b < a[attr::kNburst]; ++b)
    std::memmove(dst + b * a[attr::kDstStride], src + b * a[attr::kSrcStride], a[attr::kLen]);
}

void Nd2Nz(const Inst& in, uint8_t* dst, const uint8_t* src) {
  const auto& a = in.attrs;
  int es = DTypeSize(in.dtype);
  int64_t c0 = kBlockBytes / es, rows = a[attr::kNzRows], cols = a[attr::kNzCols];
  int64_t r1n = CeilDiv(rows, 16), c1n = CeilDiv(cols, c0), stride = a[attr::kNzSrcRowStride];
  for (int64_t r1 = 0; r1 < r1n; ++r1)
    for (int64_t c1 = 0; c1 < c1n; ++c1)
      for (int64_t r = 0; r < 16; ++r) {
        uint8_t* d = dst + ((r1 * c1n + c1) * 16 + r) * kBlockBytes;
        int64_t row = r1 * 16 + r, col = c1 * c0;
        if (row >= rows) {
          std::memset(d, 0, kBlockBytes);
          continue;
        }
        int64_t n = std::min<int64_t>(c0, cols - col);
        std::memcpy(d, src + (row * stride + col) * es, n * es);
        if (n < c0) std::memset(d + n * es, 0, (c0 - n) * es);
      }
}

void Load2d(const Inst& in, uint8_t* dst, const uint8_t* src) {
  const auto& a = in.attrs;
  if (a[attr::kLdTranspose] && DTypeSize(in.dtype) == 4) {
    // 32-bit: rows x cols 16x16 squares, square (r, c) being the source
    // fractals (r, 2c) and (r, 2c+1); its transpose's columns 0-7 go to
    // fractal (2r, c) and columns 8-15 to (2r+1, c) of a cols-wide grid.
    for (int64_t r = 0; r < a[attr::kLdRows]; ++r)
      for (int64_t c = 0; c < a[attr::kLdCols]; ++c) {
        const uint8_t* s = src + (r * a[attr::kLdSrcRowStride] + 2 * c) * kFractalBytes;
        uint8_t sq[2 * kFractalBytes];
        std::memcpy(sq, s, sizeof(sq));
        for (int h = 0; h < 2; ++h) {
          uint8_t* d = dst + ((2 * r + h) * a[attr::kLdCols] + c) * kFractalBytes;
          for (int j = 0; j < 16; ++j)
            for (int i = 0; i < 8; ++i) {
              int row = h * 8 + i;  // the square's row i of this half, column j
              std::memcpy(d + (j * 8 + i) * 4, sq + (j / 8) * kFractalBytes + (row * 8 + j % 8) * 4, 4);
            }
        }
      }
    return;
  }
  for (int64_t r = 0; r < a[attr::kLdRows]; ++r)
    for (int64_t c = 0; c < a[attr::kLdCols]; ++c) {
      const uint8_t* s = src + (r * a[attr::kLdSrcRowStride] + c) * kFractalBytes;
      uint8_t* d = dst + (r * a[attr::kLdCols] + c) * kFractalBytes;
      if (!a[attr::kLdTranspose]) {
        std::memmove(d, s, kFractalBytes);
        continue;
      }
      uint8_t tmp[kFractalBytes];
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) std::memcpy(tmp + (j * 16 + i) * 2, s + (i * 16 + j) * 2, 2);
      std::memcpy(d, tmp, kFractalBytes);
    }
}

void Img2Col(const Inst& in, uint8_t* dst, const uint8_t* src) {
  const auto& a = in.attrs;
  int64_t h = a[attr::kIcH], w = a[attr::kIcW], kh = a[attr::kIcKh], kw = a[attr::kIcKw];
  int64_t oh = (h + a[attr::kIcPadTop] + a[attr::kIcPadBottom] - a[attr::kIcDilH] * (kh - 1) - 1) / a[attr::kIcStrideH] + 1;
  int64_t ow = (w + a[attr::kIcPadLeft] + a[attr::kIcPadRight] - a[attr::kIcDilW] * (kw - 1) - 1) / a[attr::kIcStrideW] + 1;
  for (int64_t mi = 0; mi < a[attr::kIcM]; ++mi)
    for (int64_t ki = 0; ki < a[attr::kIcK]; ++ki)
      for (int64_t r = 0; r < 16; ++r) {
        uint8_t* d = dst + ((mi * a[attr::kIcK] + ki) * 16 + r) * kBlockBytes;
        int64_t p = a[attr::kIcPos] + mi * 16 + r;
        int64_t kt = a[attr::kIcKStart] + ki;
        int64_t c1 = kt / (kh * kw), khi = kt % (kh * kw) / kw, kwi = kt % kw;
        int64_t ih = -1, iw = -1;
        if (p < oh * ow) {
          ih = (p / ow) * a[attr::kIcStrideH] - a[attr::kIcPadTop] + khi * a[attr::kIcDilH];
          iw = (p % ow) * a[attr::kIcStrideW] - a[attr::kIcPadLeft] + kwi * a[attr::kIcDilW];
        }
        if (ih >= 0 && ih < h && iw >= 0 && iw < w) std::memcpy(d, src + ((c1 * h + ih) * w + iw) * kBlockBytes, kBlockBytes);
        else std::memset(d, 0, kBlockBytes);
      }
}

// Calls f(load, store) with the element access of float type t, each
// inlined where f uses it (no switch on the type per element).
template <typename F>
void WithFloatType(DType t, F f) {
  switch (t) {
    case DType::kF32:
      f([](const uint8_t* p) { float v; std::memcpy(&v, p, 4); return v; },
        [](uint8_t* p, float v) { std::memcpy(p, &v, 4); });
      return;
    case DType::kF16:
      f([](const uint8_t* p) { uint16_t h; std::memcpy(&h, p, 2); return HalfBitsToFloat(h); },
        [](uint8_t* p, float v) { uint16_t h = FloatToHalfBits(v); std::memcpy(p, &h, 2); });
      return;
    case DType::kBF16:
      f([](const uint8_t* p) { uint16_t h; std::memcpy(&h, p, 2); return BFloat16BitsToFloat(h); },
        [](uint8_t* p, float v) { uint16_t h = FloatToBFloat16Bits(v); std::memcpy(p, &h, 2); });
      return;
    default:
      f([t](const uint8_t* p) { return LoadF(t, p); }, [t](uint8_t* p, float v) { StoreF(t, p, v); });
      return;
  }
}

void Mmad(const Inst& in, uint8_t* c, const uint8_t* a_buf, const uint8_t* b_buf) {
  const auto& at = in.attrs;
  int es = DTypeSize(in.dtype);
  int64_t k0 = kBlockBytes / es, M = at[attr::kMmM], K = at[attr::kMmK], N = at[attr::kMmN];
  int64_t rows = M * 16, cols = N * 16, depth = K * k0;
  bool init = at[attr::kMmInit] != 0;
  if (in.dtype == DType::kS8) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        uint8_t* cp = c + (((i / 16) * N + j / 16) * 256 + (i % 16) * 16 + j % 16) * 4;
        int64_t acc = init ? 0 : LoadI(cp);
        for (int64_t kk = 0; kk < depth; ++kk) {
          int8_t x = static_cast<int8_t>(a_buf[((i / 16) * K + kk / k0) * 16 * k0 + (i % 16) * k0 + kk % k0]);
          int8_t y = static_cast<int8_t>(b_buf[((kk / k0) * N + j / 16) * 16 * k0 + (j % 16) * k0 + kk % k0]);
          acc += static_cast<int64_t>(x) * y;
        }
        StoreI(cp, Wrap(acc));
      }
    return;
  }
  // Unpack to row-major A (rows x depth) and row-major B (depth x cols),
  // fractal block by fractal block: A's blocks are 16 rows of k0, B's 16
  // columns of k0, each row of a block k0 contiguous elements.
  std::vector<float> A(rows * depth), B(depth * cols);
  auto unpack = [&](auto load) {
    for (int64_t ib = 0; ib < M; ++ib)
      for (int64_t kb = 0; kb < K; ++kb)
        for (int64_t r = 0; r < 16; ++r) {
          const uint8_t* src = a_buf + (((ib * K + kb) * 16 + r) * k0) * es;
          float* dst = &A[(ib * 16 + r) * depth + kb * k0];
          for (int64_t kc = 0; kc < k0; ++kc) dst[kc] = load(src + kc * es);
        }
    for (int64_t kb = 0; kb < K; ++kb)
      for (int64_t jb = 0; jb < N; ++jb)
        for (int64_t r = 0; r < 16; ++r) {
          const uint8_t* src = b_buf + (((kb * N + jb) * 16 + r) * k0) * es;
          float* dst = &B[kb * k0 * cols + jb * 16 + r];
          for (int64_t kc = 0; kc < k0; ++kc) dst[kc * cols] = load(src + kc * es);
        }
  };
  WithFloatType(in.dtype, [&](auto load, auto) { unpack(load); });
  // Each element of C accumulates over k in order, as one multiply and one
  // add at a time: a block of 4 rows by 8 columns of C is held in vector
  // registers over the whole of k (rows and cols are multiples of 16).
  typedef float F4 __attribute__((vector_size(16)));
  auto c_at = [&](int64_t i, int64_t j) { return c + (((i / 16) * N + j / 16) * 256 + (i % 16) * 16 + j % 16) * 4; };
  for (int64_t i = 0; i < rows; i += 4)
    for (int64_t j = 0; j < cols; j += 8) {
      F4 acc[4][2];
      for (int r = 0; r < 4; ++r)
        for (int h = 0; h < 2; ++h) {
          acc[r][h] = F4{0, 0, 0, 0};
          if (!init) std::memcpy(&acc[r][h], c_at(i + r, j + 4 * h), 16);  // 4 columns of one fractal row
        }
      // Named, so that they stay in registers.
      F4 c00 = acc[0][0], c01 = acc[0][1], c10 = acc[1][0], c11 = acc[1][1];
      F4 c20 = acc[2][0], c21 = acc[2][1], c30 = acc[3][0], c31 = acc[3][1];
      const float *a0 = &A[i * depth], *a1 = a0 + depth, *a2 = a1 + depth, *a3 = a2 + depth;
      const float* b = &B[j];
      for (int64_t kk = 0; kk < depth; ++kk, b += cols) {
        F4 y0, y1;
        std::memcpy(&y0, b, 16);
        std::memcpy(&y1, b + 4, 16);
        c00 += a0[kk] * y0, c01 += a0[kk] * y1;
        c10 += a1[kk] * y0, c11 += a1[kk] * y1;
        c20 += a2[kk] * y0, c21 += a2[kk] * y1;
        c30 += a3[kk] * y0, c31 += a3[kk] * y1;
      }
      const F4 out[4][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
      for (int r = 0; r < 4; ++r)
        for (int h = 0; h < 2; ++h) std::memcpy(c_at(i + r, j + 4 * h), &out[r][h], 16);
    }
}

void Fixp(const Inst& in, uint8_t* dst, const uint8_t* c, const uint8_t* bias) {
  const auto& a = in.attrs;
  int64_t N = a[attr::kFxN], rows = a[attr::kFxM] * 16, cols = N * 16, stride = a[attr::kFxDstRowStride];
  int des = DTypeSize(in.dtype);
  bool relu = a[attr::kFxRelu] != 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const uint8_t* cp = c + (((i / 16) * N + j / 16) * 256 + (i % 16) * 16 + j % 16) * 4;
      uint8_t* d = dst + (i * stride + j) * des;
      if (in.dtype2 == DType::kS32) {
        int64_t v = LoadI(cp);
        if (bias) v += LoadI(bias + j * 4);
        if (relu) v = std::max<int64_t>(v, 0);
        if (in.dtype == DType::kS32) StoreI(d, Wrap(v));
        else StoreF(in.dtype, d, static_cast<float>(Wrap(v)));
        continue;
      }
      float v;
      std::memcpy(&v, cp, 4);
      if (bias) {
        float b;
        std::memcpy(&b, bias + j * 4, 4);
        v += b;
      }
      if (relu) v = std::max(v, 0.0f);
      if (in.dtype == DType::kF32) std::memcpy(d, &v, 4);
      else StoreF(in.dtype, d, v);
    }
}

float Unary(Op op, float x) {
  switch (op) {
    case Op::kVexp: return std::exp(x);
    case Op::kVln: return std::log(x);
    case Op::kVsqrt: return std::sqrt(x);
    case Op::kVrsqrt: return 1.0f / std::sqrt(x);
    case Op::kVrec: return 1.0f / x;
    case Op::kVtanh: return std::tanh(x);
    case Op::kVsigmoid: return 1.0f / (1.0f + std::exp(-x));
    case Op::kVerf: return std::erf(x);
    case Op::kVabs: return std::fabs(x);
    case Op::kVrelu: return std::max(x, 0.0f);
    default: return x;  // vmov
  }
}

int64_t BinaryI(Op op, int64_t x, int64_t y) {
  switch (op) {
    case Op::kVadd: case Op::kVadds: return x + y;
    case Op::kVsub: return x - y;
    case Op::kVmul: case Op::kVmuls: return x * y;
    case Op::kVmax: case Op::kVmaxs: return std::max(x, y);
    default: return std::min(x, y);
  }
}

bool Compare(int64_t mode, float x, float y) {
  switch (static_cast<CmpMode>(mode)) {
    case CmpMode::kEq: return x == y;
    case CmpMode::kNe: return x != y;
    case CmpMode::kLt: return x < y;
    case CmpMode::kLe: return x <= y;
    case CmpMode::kGt: return x > y;
    case CmpMode::kGe: return x >= y;
  }
  return false;
}

// Calls f(fn) with Binary(op, ., .) as a function of its own.
template <typename F>
void WithBinary(Op op, F f) {
  switch (op) {
    case Op::kVadd: case Op::kVadds: return f([](float x, float y) { return x + y; });
    case Op::kVsub: return f([](float x, float y) { return x - y; });
    case Op::kVmul: case Op::kVmuls: return f([](float x, float y) { return x * y; });
    case Op::kVdiv: return f([](float x, float y) { return x / y; });
    case Op::kVmax: case Op::kVmaxs: return f([](float x, float y) { return std::max(x, y); });
    default: return f([](float x, float y) { return std::min(x, y); });
  }
}

// Walks the elements of a vector instruction: f(repeat, element, offsets of
// dst, src0, src1), the offsets kept incrementally (no division per element).
template <typename F>
void ForElements(const Inst& in, int dst_es, int src_es, F f) {
  const auto& a = in.attrs;
  const int64_t dst_epb = kBlockBytes / dst_es, src_epb = kBlockBytes / src_es;
  const int64_t dblk = a[attr::kDstBlk] * kBlockBytes, s0blk = a[attr::kSrc0Blk] * kBlockBytes,
                s1blk = a[attr::kSrc1Blk] * kBlockBytes;
  for (int64_t r = 0; r < a[attr::kRepeat]; ++r) {
    int64_t od_blk = r * a[attr::kDstRep] * kBlockBytes, o0_blk = r * a[attr::kSrc0Rep] * kBlockBytes,
            o1_blk = r * a[attr::kSrc1Rep] * kBlockBytes;
    int64_t od = od_blk, o0 = o0_blk, o1 = o1_blk, cd = 0, cs = 0;
    for (int64_t e = 0; e < a[attr::kMask]; ++e) {
      f(r, e, od, o0, o1);
      od += dst_es;
      o0 += src_es;
      o1 += src_es;
      if (++cd == dst_epb) {
        cd = 0;
        od = od_blk += dblk;
      }
      if (++cs == src_epb) {
        cs = 0;
        o0 = o0_blk += s0blk;
        o1 = o1_blk += s1blk;
      }
    }
  }
}

// vtranspose: each repeat's matrix of E elements (a 32-byte block a row:
// 16x16 of 2-byte elements, 8x8 of 4-byte ones). Source row i is the block
// at (r*src0_rep + i*src0_blk) blocks; it becomes column i of the
// destination, whose row j is at (r*dst_rep + j*dst_blk) blocks. Each
// matrix is read whole first.
template <typename E>
void Transpose(const Inst& in, uint8_t* d, const uint8_t* s0) {
  constexpr int n = kBlockBytes / sizeof(E);
  const auto& a = in.attrs;
  for (int64_t r = 0; r < a[attr::kRepeat]; ++r) {
    E m[n][n];
    for (int i = 0; i < n; ++i)
      std::memcpy(m[i], s0 + (r * a[attr::kSrc0Rep] + i * a[attr::kSrc0Blk]) * kBlockBytes, kBlockBytes);
    for (int j = 0; j < n; ++j) {
      E row[n];
      for (int i = 0; i < n; ++i) row[i] = m[i][j];
      std::memcpy(d + (r * a[attr::kDstRep] + j * a[attr::kDstBlk]) * kBlockBytes, row, kBlockBytes);
    }
  }
}

void Vector(const Inst& in, const std::array<int64_t, 4>& addr, const ExecContext& ctx) {
  DType t = in.dtype;
  int es = DTypeSize(t);
  uint8_t* ub = ctx.local[static_cast<int>(Space::kUb)];
  uint8_t* d = ub + addr[0];
  const uint8_t* s0 = ub + addr[1];
  const uint8_t* s1 = ub + addr[2];
  const auto& a = in.attrs;
  int64_t epr = ElementsPerRepeat(in);
  switch (in.op) {
    case Op::kVadd: case Op::kVsub: case Op::kVmul: case Op::kVdiv: case Op::kVmax: case Op::kVmin:
      if (t == DType::kS32)
        ForElements(in, es, es, [&](int64_t, int64_t, int64_t od, int64_t o0, int64_t o1) {
          StoreI(d + od, Wrap(BinaryI(in.op, LoadI(s0 + o0), LoadI(s1 + o1))));
        });
      else
        WithFloatType(t, [&](auto load, auto store) {
          WithBinary(in.op, [&](auto op) {
            ForElements(in, es, es, [&](int64_t, int64_t, int64_t od, int64_t o0, int64_t o1) {
              store(d + od, op(load(s0 + o0), load(s1 + o1)));
            });
          });
        });
      return;
    case Op::kVadds: case Op::kVmuls: case Op::kVmaxs: case Op::kVmins: {
      if (t == DType::kS32) {
        int64_t y = static_cast<int64_t>(in.ops[2].fimm);
        ForElements(in, es, es, [&](int64_t, int64_t, int64_t od, int64_t o0, int64_t) {
          StoreI(d + od, Wrap(BinaryI(in.op, LoadI(s0 + o0), y)));
        });
        return;
      }
      uint8_t tmp[4];
      StoreF(t, tmp, static_cast<float>(in.ops[2].fimm));
      float y = LoadF(t, tmp);  // the scalar in the instruction's dtype
      WithFloatType(t, [&](auto load, auto store) {
        WithBinary(in.op, [&](auto op) {
          ForElements(in, es, es, [&](int64_t, int64_t, int64_t od, int64_t o0, int64_t) {
            store(d + od, op(load(s0 + o0), y));
          });
        });
      });
      return;
    }
    case Op::kVdup:
      ForElements(in, es, es, [&](int64_t, int64_t, int64_t od, int64_t, int64_t) {
        if (t == DType::kS32) StoreI(d + od, static_cast<int32_t>(in.ops[1].fimm));
        else StoreF(t, d + od, static_cast<float>(in.ops[1].fimm));
      });
      return;
    case Op::kVabs: case Op::kVrelu: case Op::kVmov:
      if (t == DType::kS32) {
        ForElements(in, es, es, [&](int64_t, int64_t, int64_t od, int64_t o0, int64_t) {
          int64_t x = LoadI(s0 + o0);
          if (in.op == Op::kVabs) x = x < 0 ? -x : x;
          if (in.op == Op::kVrelu) x = std::max<int64_t>(x, 0);
          StoreI(d + od, Wrap(x));
        });
        return;
      }
      [[fallthrough]];
    case Op::kVexp: case Op::kVln: case Op::kVsqrt: case Op::kVrsqrt: case Op::kVrec: case Op::kVtanh:
    case Op::kVsigmoid: case Op::kVerf:
      WithFloatType(t, [&](auto load, auto store) {
        if (in.op == Op::kVrelu)  // the commonest, inlined
          ForElements(in, es, es, [&](int64_t, int64_t, int64_t od, int64_t o0, int64_t) {
            store(d + od, std::max(load(s0 + o0), 0.0f));
          });
        else
          ForElements(in, es, es, [&](int64_t, int64_t, int64_t od, int64_t o0, int64_t) {
            store(d + od, Unary(in.op, load(s0 + o0)));
          });
      });
      return;
    case Op::kVconv: {
      DType st = in.dtype2;
      ForElements(in, es, DTypeSize(st), [&](int64_t, int64_t, int64_t od, int64_t o0, int64_t) {
        if (t == DType::kS32) StoreI(d + od, ToInt(LoadF(st, s0 + o0), a[attr::kVecExtra]));
        else if (st == DType::kS32) StoreF(t, d + od, static_cast<float>(LoadI(s0 + o0)));
        else StoreF(t, d + od, LoadF(st, s0 + o0));
      });
      return;
    }
    case Op::kVcmp: {
      int64_t bytes = a[attr::kRepeat] * epr / 8;
      std::vector<uint8_t> bits(bytes, 0);
      ForElements(in, es, es, [&](int64_t r, int64_t e, int64_t, int64_t o0, int64_t o1) {
        if (Compare(a[attr::kVecExtra], LoadF(t, s0 + o0), LoadF(t, s1 + o1)))
          bits[(r * epr + e) / 8] |= static_cast<uint8_t>(1u << ((r * epr + e) % 8));
      });
      std::memcpy(d, bits.data(), bytes);
      return;
    }
    case Op::kVsel: {
      const uint8_t* mask = ub + addr[1];
      const uint8_t* x = ub + addr[2];
      const uint8_t* y = ub + addr[3];
      // Operands 2 and 3 use the src0 / src1 strides.
      ForElements(in, es, es, [&](int64_t r, int64_t e, int64_t od, int64_t o0, int64_t o1) {
        int64_t bit = r * epr + e;
        bool on = (mask[bit / 8] >> (bit % 8)) & 1;
        std::memmove(d + od, on ? x + o0 : y + o1, es);
      });
      return;
    }
    case Op::kVcadd: case Op::kVcmax: case Op::kVcmin: {
      std::vector<float> acc(a[attr::kRepeat]);
      std::vector<bool> first(a[attr::kRepeat], true);
      ForElements(in, es, es, [&](int64_t r, int64_t, int64_t, int64_t o0, int64_t) {
        float x = LoadF(t, s0 + o0);
        if (first[r]) acc[r] = in.op == Op::kVcadd ? 0.0f + x : x;
        else if (in.op == Op::kVcadd) acc[r] += x;
        else acc[r] = in.op == Op::kVcmax ? std::max(acc[r], x) : std::min(acc[r], x);
        first[r] = false;
      });
      for (int64_t r = 0; r < a[attr::kRepeat]; ++r) StoreF(t, d + r * es, acc[r]);
      return;
    }
    case Op::kVbrcb: {
      int64_t epb = kBlockBytes / es;
      for (int64_t r = 0; r < a[attr::kRepeat]; ++r)
        for (int64_t b = 0; b < 8; ++b) {
          uint8_t v[4];
          std::memcpy(v, s0 + (r * 8 + b) * es, es);
          uint8_t* blk = d + r * a[attr::kDstRep] * kBlockBytes + b * a[attr::kDstBlk] * kBlockBytes;
          for (int64_t e = 0; e < epb; ++e) std::memcpy(blk + e * es, v, es);
        }
      return;
    }
    case Op::kVtranspose:
      if (es == 4) Transpose<uint32_t>(in, d, s0);
      else Transpose<uint16_t>(in, d, s0);
      return;
    default:
      return;
  }
}

// A DMA pipe starts one burst every `gap` cycles: `runs` bursts of `bytes`
// in all move at most bytes / (runs * gap) per cycle.
double BurstCap(double pipe_rate, int64_t bytes, int64_t runs, double gap) {
  if (gap <= 0 || runs <= 0 || bytes <= 0) return pipe_rate;
  return std::min(pipe_rate, static_cast<double>(bytes) / (static_cast<double>(runs) * gap));
}

}  // namespace

void Execute(const Inst& in, const std::array<int64_t, 4>& addr, const ExecContext& ctx) {
  switch (in.op) {
    case Op::kCopyGmL1: case Op::kCopyGmUb: case Op::kCopyUbGm:
      Copy(in, Ptr(in, 0, addr, ctx), Ptr(in, 1, addr, ctx));
      return;
    case Op::kNd2Nz: Nd2Nz(in, Ptr(in, 0, addr, ctx), Ptr(in, 1, addr, ctx)); return;
    case Op::kLoadL0A: case Op::kLoadL0B: Load2d(in, Ptr(in, 0, addr, ctx), Ptr(in, 1, addr, ctx)); return;
    case Op::kImg2Col: Img2Col(in, Ptr(in, 0, addr, ctx), Ptr(in, 1, addr, ctx)); return;
    case Op::kMmad: Mmad(in, Ptr(in, 0, addr, ctx), Ptr(in, 1, addr, ctx), Ptr(in, 2, addr, ctx)); return;
    case Op::kFixp:
      Fixp(in, Ptr(in, 0, addr, ctx), Ptr(in, 1, addr, ctx),
           in.ops[2].kind == Operand::Kind::kAddr ? Ptr(in, 2, addr, ctx) : nullptr);
      return;
    default:
      if (Info(in.op).pipe == Pipe::kVector) Vector(in, addr, ctx);
  }
}

namespace {

// The bursts a DMA instruction moves in GM: `runs` of `len` bytes, `stride`
// apart, through its operand `operand` (-1: the instruction moves nothing
// through GM).
struct GmBursts {
  int operand = -1;
  int64_t runs = 0, len = 0, stride = 0;
};

GmBursts GmBurstsOf(const Inst& in) {
  const auto& a = in.attrs;
  switch (in.op) {
    case Op::kCopyGmL1: case Op::kCopyGmUb:
      return {1, a[attr::kNburst], a[attr::kLen], a[attr::kSrcStride]};
    case Op::kCopyUbGm:
      return {0, a[attr::kNburst], a[attr::kLen], a[attr::kDstStride]};
    case Op::kNd2Nz: {
      const int64_t es = DTypeSize(in.dtype);
      return {1, a[attr::kNzRows], a[attr::kNzCols] * es, a[attr::kNzSrcRowStride] * es};
    }
    case Op::kFixp: {
      if (in.ops[0].space != Space::kGm) return {};
      const int64_t es = DTypeSize(in.dtype);
      return {0, a[attr::kFxM] * 16, a[attr::kFxN] * 16 * es, a[attr::kFxDstRowStride] * es};
    }
    default:
      return {};
  }
}

}  // namespace

int64_t GmRuns(const Inst& in) {
  const GmBursts b = GmBurstsOf(in);
  if (b.operand < 0) return 0;
  return b.stride == b.len ? 1 : b.runs;
}

void ForEachGmRun(const Inst& in, const std::array<int64_t, 4>& addr,
                  absl::FunctionRef<void(int operand, int64_t offset, int64_t bytes)> f) {
  const GmBursts b = GmBurstsOf(in);
  if (b.operand < 0) return;
  const int64_t start = addr[b.operand];
  if (b.stride == b.len) {
    f(b.operand, start, b.runs * b.len);
  } else {
    for (int64_t r = 0; r < b.runs; ++r) f(b.operand, start + r * b.stride, b.len);
  }
}

Cost InstCost(const Inst& in, const Machine& m) {
  const Core& k = m.core();
  const Energy& e = m.energy();
  const auto& a = in.attrs;
  double hbm_lat = static_cast<double>(m.chip().hbm_latency_cycles());
  Cost c;
  switch (in.op) {
    case Op::kCopyGmL1: case Op::kCopyGmUb:
      c.dma = true;
      c.gm_bytes = a[attr::kNburst] * a[attr::kLen];
      c.rate_cap = BurstCap(in.op == Op::kCopyGmUb ? GmUbCopyBytesPerCycle(m, static_cast<double>(c.gm_bytes))
                                                   : k.mte2_bytes_per_cycle(),
                            c.gm_bytes, GmRuns(in), k.mte_burst_cycles());
      c.latency = hbm_lat + k.mte2_latency_cycles() + (in.op == Op::kCopyGmUb ? k.mte2_ub_extra_latency_cycles() : 0);
      c.hbm_latency = hbm_lat;
      c.energy_pj = c.gm_bytes * (e.hbm_pj_per_byte() + (in.op == Op::kCopyGmL1 ? e.l1_pj_per_byte() : e.ub_pj_per_byte()));
      break;
    case Op::kNd2Nz:
      c.dma = true;
      c.gm_bytes = a[attr::kNzRows] * a[attr::kNzCols] * DTypeSize(in.dtype);
      c.rate_cap = BurstCap(k.mte2_bytes_per_cycle(), c.gm_bytes, GmRuns(in), k.mte_burst_cycles());
      c.latency = hbm_lat + k.mte2_latency_cycles();
      c.hbm_latency = hbm_lat;
      c.energy_pj = c.gm_bytes * (e.hbm_pj_per_byte() + e.l1_pj_per_byte());
      break;
    case Op::kCopyUbGm:
      c.dma = true;
      c.gm_write = true;
      c.gm_bytes = a[attr::kNburst] * a[attr::kLen];
      c.rate_cap = BurstCap(UbGmCopyBytesPerCycle(m, static_cast<double>(c.gm_bytes)), c.gm_bytes, GmRuns(in),
                            k.mte_burst_cycles());
      c.latency = hbm_lat + k.mte3_latency_cycles();
      c.hbm_latency = hbm_lat;
      c.energy_pj = c.gm_bytes * (e.ub_pj_per_byte() + e.hbm_pj_per_byte());
      break;
    case Op::kLoadL0A: case Op::kLoadL0B:
      c.busy = a[attr::kLdRows] * a[attr::kLdCols] * kFractalBytes /
               (in.op == Op::kLoadL0B ? L0bBytesPerCycle(m) : k.mte1_bytes_per_cycle());
      if (a[attr::kLdTranspose] && DTypeSize(in.dtype) == 4) c.busy *= 2;  // squares of two fractals
      c.latency = k.mte1_latency_cycles();
      c.energy_pj = static_cast<double>(a[attr::kLdRows] * a[attr::kLdCols] * kFractalBytes) *
                    (e.l1_pj_per_byte() + e.l0_pj_per_byte());
      break;
    case Op::kImg2Col:
      c.busy = a[attr::kIcM] * a[attr::kIcK] * kFractalBytes / k.mte1_bytes_per_cycle();
      c.latency = k.mte1_latency_cycles();
      c.energy_pj = static_cast<double>(a[attr::kIcM] * a[attr::kIcK] * kFractalBytes) *
                    (e.l1_pj_per_byte() + e.l0_pj_per_byte());
      break;
    case Op::kMmad: {
      int64_t k0 = kBlockBytes / DTypeSize(in.dtype);
      c.macs = a[attr::kMmM] * a[attr::kMmK] * a[attr::kMmN] * 16 * 16 * k0;
      int64_t rate = in.dtype == DType::kS8    ? k.cube_int8_macs_per_cycle()
                     : in.dtype == DType::kF32 ? k.cube_fp32_macs_per_cycle()
                                               : k.cube_fp16_macs_per_cycle();
      c.busy = static_cast<double>(c.macs) / static_cast<double>(rate);
      c.latency = k.cube_latency_cycles();
      // The MACs, the operand fractals read from L0A and L0B, and the fp32
      // accumulators read and written in L0C.
      const double pj_per_mac = in.dtype == DType::kS8    ? e.cube_int8_pj_per_mac()
                                : in.dtype == DType::kF32 ? e.cube_fp32_pj_per_mac()
                                                          : e.cube_fp16_pj_per_mac();
      const int64_t mm = a[attr::kMmM], kk = a[attr::kMmK], nn = a[attr::kMmN];
      c.energy_pj = static_cast<double>(c.macs) * pj_per_mac +
                    static_cast<double>((mm * kk + kk * nn) * kFractalBytes + 2 * mm * nn * 256 * 4) *
                        e.l0_pj_per_byte();
      break;
    }
    case Op::kFixp: {
      double l0c_bytes = a[attr::kFxM] * a[attr::kFxN] * 256 * 4;
      c.latency = k.fixp_latency_cycles();
      if (in.ops[0].space == Space::kGm) {
        c.dma = true;
        c.gm_write = true;
        c.gm_bytes = a[attr::kFxM] * a[attr::kFxN] * 256 * DTypeSize(in.dtype);
        // The read-out of L0C bounds the rate at which output bytes leave.
        c.rate_cap = k.fixp_bytes_per_cycle() * c.gm_bytes / l0c_bytes;
        if (k.fixp_gm_write_min_cycles() > 0) {
          c.posted_min_cycles = static_cast<double>(k.fixp_gm_write_min_cycles());
        } else {
          c.latency += hbm_lat;
          c.hbm_latency = hbm_lat;
        }
        c.energy_pj = l0c_bytes * e.l0_pj_per_byte() + static_cast<double>(c.gm_bytes) * e.hbm_pj_per_byte();
      } else {
        c.busy = l0c_bytes / k.fixp_bytes_per_cycle();
        c.energy_pj = l0c_bytes * e.l0_pj_per_byte() +
                      static_cast<double>(a[attr::kFxM] * a[attr::kFxN] * 256 * DTypeSize(in.dtype)) *
                          e.ub_pj_per_byte();
      }
      break;
    }
    default:
      if (Info(in.op).pipe == Pipe::kVector) {
        if (in.op == Op::kVtranspose)  // 512 bytes a repeat (256 for an 8x8 matrix of 4-byte elements)
          c.busy = a[attr::kRepeat] * (DTypeSize(in.dtype) == 4 ? 1 : 2) * VectorCyclesPerRepeat(m, in.op, DTypeSize(in.dtype));
        else
          c.busy = VectorInstructionCycles(m, in.op, DTypeSize(in.dtype), a[attr::kRepeat]);
        c.elements = a[attr::kRepeat] * a[attr::kMask];  // the active elements of each repeat
        c.latency = k.vector_latency_cycles();
        // Its elements' arithmetic (by their width), and a repeat's bytes
        // read or written in UB for each memory operand.
        int operands = 0;
        for (const Operand& o : in.ops) operands += o.kind == Operand::Kind::kAddr;
        const double per_element = IsSpecialFunction(in.op) ? e.vector_special_pj_per_element() : e.vector_pj_per_element();
        c.energy_pj = static_cast<double>(c.elements) * per_element * static_cast<double>(DTypeSize(in.dtype)) / 2 +
                      static_cast<double>(a[attr::kRepeat] * kRepeatBytes * operands) * e.ub_pj_per_byte();
      }
  }
  return c;
}

}  // namespace kiln::sim
