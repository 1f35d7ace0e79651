//===- matmul.cc - MatMul, Gemm, Einsum, integer and quantized matmul, Det -===//
//
// One GEMM core serves MatMul, Gemm, MatMulInteger and QLinearMatMul: a
// cache-blocked i-k-j loop (contiguous inner loop over the rows of B, four
// rows of C at a time). It runs on f32, f64 and u64: f16/bf16 operands are
// widened to f32 (accumulating in f32, rounded once on store), integer
// operands to u64, whose wrap-around arithmetic gives the same low bits as
// the narrower integer type would.
//
// Einsum handles any equation: implicit and explicit outputs, ellipsis
// broadcasting and repeated labels (diagonals), by a generic contraction
// loop with precomputed operand offsets.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <map>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/matmul.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

//===--- Helpers ----------------------------------------------------------===//

double NumelOf(const Value* v) {
  if (!v || !v->type().is_tensor()) return 0;
  int64_t n = v->type().shape().NumElements();
  return n > 0 ? static_cast<double>(n) : 0;
}

double BytesOf(const Value* v) {
  if (!v || !v->type().is_tensor()) return 0;
  return NumelOf(v) * static_cast<double>(DTypeSize(v->type().dtype()));
}

void IoBytes(const Node& n, OpCost& c) {
  for (Value* v : n.inputs()) c.bytes_read += BytesOf(v);
  for (Value* v : n.outputs()) c.bytes_written += BytesOf(v);
}

// Computation dtype of a matmul operand: f32 for f16/bf16/f32, f64, or u64
// for every integer type.
DType ComputeDType(DType t) {
  if (t == DType::kF64) return DType::kF64;
  if (IsFloat(t)) return DType::kF32;
  return DType::kU64;
}

Tensor ToCompute(const Tensor& t) {
  DType c = ComputeDType(t.dtype());
  return t.dtype() == c ? t : CastTensor(t, c);
}

Tensor FromCompute(const Tensor& t, DType to) { return t.dtype() == to ? t : CastTensor(t, to); }

template <typename F>
decltype(auto) DispatchCompute(DType t, F&& f) {
  switch (t) {
    case DType::kF32: return f.template operator()<float>();
    case DType::kF64: return f.template operator()<double>();
    case DType::kU64: return f.template operator()<uint64_t>();
    default: DispatchFailure(t);
  }
}

// The dtypes MatMul and Gemm accept.
bool IsMatMulDType(DType t) {
  switch (t) {
    case DType::kF16: case DType::kBF16: case DType::kF32: case DType::kF64:
    case DType::kI32: case DType::kI64: case DType::kU32: case DType::kU64:
      return true;
    default:
      return false;
  }
}

// Errors unless the first `n` inputs are present (an omitted required input
// reaches the kernel as null).
absl::Status RequireInputs(const KernelContext& ctx, int n) {
  for (int i = 0; i < n; ++i)
    if (!ctx.has_input(i)) return ctx.Error("required input ", i, " is missing");
  return absl::OkStatus();
}

//===--- GEMM core ----------------------------------------------------------===//

// c[0..n) += a * b[0..n), in chunks of 8 the compiler vectorizes.
template <typename T>
inline void Axpy(int64_t n, T a, const T* __restrict b, T* __restrict c) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int u = 0; u < 8; ++u) c[j + u] += a * b[j + u];
  for (; j < n; ++j) c[j] += a * b[j];
}

// Four rows of C at once, so each loaded element of B is used four times.
template <typename T>
inline void Axpy4(int64_t n, T a0, T a1, T a2, T a3, const T* __restrict b, T* __restrict c0, T* __restrict c1,
                  T* __restrict c2, T* __restrict c3) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int u = 0; u < 8; ++u) {
      T bv = b[j + u];
      c0[j + u] += a0 * bv;
      c1[j + u] += a1 * bv;
      c2[j + u] += a2 * bv;
      c3[j + u] += a3 * bv;
    }
  }
  for (; j < n; ++j) {
    T bv = b[j];
    c0[j] += a0 * bv;
    c1[j] += a1 * bv;
    c2[j] += a2 * bv;
    c3[j] += a3 * bv;
  }
}

// C[M,N] (row-major, leading dim ldc) += A * B, where A(i,k) = A[i*a_rs + k*a_cs]
// and B is row-major [K,N] with leading dim ldb.
template <typename T>
void GemmAcc(int64_t M, int64_t N, int64_t K, const T* A, int64_t a_rs, int64_t a_cs, const T* B, int64_t ldb,
             T* C, int64_t ldc) {
  constexpr int64_t kBlockK = 256, kBlockN = 1024;
  for (int64_t jb = 0; jb < N; jb += kBlockN) {
    int64_t nb = std::min(kBlockN, N - jb);
    for (int64_t kb = 0; kb < K; kb += kBlockK) {
      int64_t ke = std::min(K, kb + kBlockK);
      int64_t i = 0;
      for (; i + 4 <= M; i += 4) {
        const T* a = A + i * a_rs;
        T* c = C + i * ldc + jb;
        for (int64_t k = kb; k < ke; ++k) {
          const T* ak = a + k * a_cs;
          Axpy4<T>(nb, ak[0], ak[a_rs], ak[2 * a_rs], ak[3 * a_rs], B + k * ldb + jb, c, c + ldc, c + 2 * ldc,
                   c + 3 * ldc);
        }
      }
      for (; i < M; ++i) {
        const T* a = A + i * a_rs;
        T* c = C + i * ldc + jb;
        for (int64_t k = kb; k < ke; ++k) Axpy<T>(nb, a[k * a_cs], B + k * ldb + jb, c);
      }
    }
  }
}

//===--- MatMul -------------------------------------------------------------===//

// Shapes of a numpy-style matmul; 1-D operands promoted to 2-D.
struct MatMulShapes {
  Dims a, b;        // promoted, rank >= 2
  Dims batch;       // broadcast batch dims
  Dims out_full;    // batch + [M, N]
  Dims out;         // with promoted dims removed
  int64_t M = 0, K = 0, N = 0;
};

absl::StatusOr<MatMulShapes> PlanMatMul(const Dims& a_in, const Dims& b_in) {
  if (a_in.empty() || b_in.empty()) return InvalidArgument("matmul operands must have rank >= 1");
  MatMulShapes s;
  s.a = a_in.size() == 1 ? Dims{1, a_in[0]} : a_in;
  s.b = b_in.size() == 1 ? Dims{b_in[0], 1} : b_in;
  s.M = s.a[s.a.size() - 2];
  s.K = s.a.back();
  s.N = s.b.back();
  if (s.b[s.b.size() - 2] != s.K)
    return InvalidArgument("inner dims differ: A has ", s.K, ", B has ", s.b[s.b.size() - 2]);
  Dims ba(s.a.begin(), s.a.end() - 2), bb(s.b.begin(), s.b.end() - 2);
  KILN_ASSIGN_OR_RETURN(s.batch, BroadcastDims(ba, bb));
  s.out_full = s.batch;
  s.out_full.push_back(s.M);
  s.out_full.push_back(s.N);
  s.out = s.batch;
  if (a_in.size() > 1) s.out.push_back(s.M);
  if (b_in.size() > 1) s.out.push_back(s.N);
  return s;
}

// C (out_full, row-major) = A x B with batch broadcasting.
template <typename T>
void BatchedMatMul(const T* A, const T* B, T* C, const MatMulShapes& s) {
  const int64_t M = s.M, K = s.K, N = s.N;
  int64_t total = NumElements(s.out_full);
  std::fill(C, C + total, T(0));
  if (total == 0 || K == 0) return;
  Dims ba(s.a.begin(), s.a.end() - 2), bb(s.b.begin(), s.b.end() - 2);
  // B shared by every batch and A's batches contiguous: one tall GEMM.
  if (NumElements(bb) == 1 && NumElements(ba) == NumElements(s.batch)) {
    GemmAcc<T>(NumElements(s.batch) * M, N, K, A, K, 1, B, N, C, N);
    return;
  }
  std::array<Dims, 2> strides = {BroadcastStrides(ba, s.batch), BroadcastStrides(bb, s.batch)};
  ForEachBroadcast<2>(s.batch, strides, [&](int64_t i, const std::array<int64_t, 2>& off) {
    GemmAcc<T>(M, N, K, A + off[0] * M * K, K, 1, B + off[1] * K * N, N, C + i * M * N, N);
  });
}

// Output shape of a matmul from (possibly partial) operand shapes.
absl::Status InferMatMulShape(InferContext& ctx, const Shape& a, const Shape& b, Shape* out) {
  *out = Shape();
  if (!a.ranked() || !b.ranked()) return absl::OkStatus();
  if (a.rank() == 0 || b.rank() == 0) return ctx.Error("matmul operands must have rank >= 1");
  DimVector da = a.dims(), db = b.dims();
  if (da.size() == 1) da.insert(da.begin(), Dim(1));
  if (db.size() == 1) db.push_back(Dim(1));
  const Dim& ka = da.back();
  const Dim& kb = db[db.size() - 2];
  if (ka.is_static() && kb.is_static() && ka.value() != kb.value())
    return ctx.Error("inner dims differ: A has ", ka.value(), ", B has ", kb.value());
  Shape ba(DimVector(da.begin(), da.end() - 2)), bb(DimVector(db.begin(), db.end() - 2));
  auto batch = BroadcastShapes(ba, bb);
  if (!batch.ok()) return ctx.Error(batch.status().message());
  DimVector dims = batch->dims();
  if (a.rank() > 1) dims.push_back(da[da.size() - 2]);
  if (b.rank() > 1) dims.push_back(db.back());
  *out = Shape(std::move(dims));
  return absl::OkStatus();
}

absl::Status CheckTensor(InferContext& ctx, int i, bool* known) {
  *known = false;
  if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
  const Type& t = ctx.input_type(i);
  if (t.is_none()) return absl::OkStatus();
  if (!t.is_tensor()) return ctx.Error("input ", i, " must be a tensor, got ", t.ToString());
  *known = true;
  return absl::OkStatus();
}

absl::Status InferMatMul(InferContext& ctx) {
  bool ka, kb;
  KILN_RETURN_IF_ERROR(CheckTensor(ctx, 0, &ka));
  KILN_RETURN_IF_ERROR(CheckTensor(ctx, 1, &kb));
  DType dt = ka ? ctx.input_type(0).dtype() : kb ? ctx.input_type(1).dtype() : DType::kUndefined;
  if (ka && kb && ctx.input_type(0).dtype() != DType::kUndefined && ctx.input_type(1).dtype() != DType::kUndefined &&
      ctx.input_type(0).dtype() != ctx.input_type(1).dtype())
    return ctx.Error("operand dtypes differ: ", DTypeName(ctx.input_type(0).dtype()), " and ",
                     DTypeName(ctx.input_type(1).dtype()));
  if (dt != DType::kUndefined && !IsMatMulDType(dt))
    return ctx.Error("dtype ", DTypeName(dt), " is not supported");
  Shape out;
  if (ka && kb) KILN_RETURN_IF_ERROR(InferMatMulShape(ctx, ctx.input_type(0).shape(), ctx.input_type(1).shape(), &out));
  ctx.set_output(0, Type::Tensor(dt, out));
  return absl::OkStatus();
}

absl::Status MatMulKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype())
    return ctx.Error("operand dtypes differ: ", DTypeName(a.dtype()), " and ", DTypeName(b.dtype()));
  if (!IsMatMulDType(a.dtype())) return ctx.Error("dtype ", DTypeName(a.dtype()), " is not supported");
  auto s = PlanMatMul(a.dims(), b.dims());
  if (!s.ok()) return ctx.Error(s.status().message());
  Tensor ca = ToCompute(a), cb = ToCompute(b);
  Tensor cy(ca.dtype(), s->out_full);
  DispatchCompute(ca.dtype(), [&]<typename T>() { BatchedMatMul<T>(ca.data<T>(), cb.data<T>(), cy.data<T>(), *s); });
  ctx.set_output(0, FromCompute(cy, a.dtype()).Reshaped(s->out));
  return absl::OkStatus();
}

// 2*M*N*K per batch: output elements times 2K.
OpCost MatMulCost(const Node& n) {
  OpCost c;
  IoBytes(n, c);
  const Value* a = n.input(0);
  if (a && a->type().is_tensor() && a->type().shape().ranked() && a->type().shape().rank() > 0) {
    const Dim& k = a->type().shape().dims().back();
    if (k.is_static()) c.flops = 2.0 * NumelOf(n.output(0)) * static_cast<double>(k.value());
  }
  return c;
}

//===--- Gemm ---------------------------------------------------------------===//

absl::Status InferGemm(InferContext& ctx) {
  bool ka, kb;
  KILN_RETURN_IF_ERROR(CheckTensor(ctx, 0, &ka));
  KILN_RETURN_IF_ERROR(CheckTensor(ctx, 1, &kb));
  DType dt = ka ? ctx.input_type(0).dtype() : kb ? ctx.input_type(1).dtype() : DType::kUndefined;
  for (int i = 0; i < 3; ++i) {
    if (!ctx.has_input(i) || !ctx.input_type(i).is_tensor()) continue;
    DType d = ctx.input_type(i).dtype();
    if (d != DType::kUndefined && dt != DType::kUndefined && d != dt)
      return ctx.Error("input ", i, " has dtype ", DTypeName(d), ", expected ", DTypeName(dt));
  }
  if (dt != DType::kUndefined && !IsMatMulDType(dt)) return ctx.Error("dtype ", DTypeName(dt), " is not supported");
  bool ta = ctx.node().GetInt("transA", 0) != 0, tb = ctx.node().GetInt("transB", 0) != 0;
  Dim M, N, Ka, Kb;
  if (ka && ctx.input_type(0).shape().ranked()) {
    const Shape& s = ctx.input_type(0).shape();
    if (s.rank() != 2) return ctx.Error("input 0 has rank ", s.rank(), ", expected 2");
    M = s[ta ? 1 : 0];
    Ka = s[ta ? 0 : 1];
  }
  if (kb && ctx.input_type(1).shape().ranked()) {
    const Shape& s = ctx.input_type(1).shape();
    if (s.rank() != 2) return ctx.Error("input 1 has rank ", s.rank(), ", expected 2");
    N = s[tb ? 0 : 1];
    Kb = s[tb ? 1 : 0];
  }
  if (Ka.is_static() && Kb.is_static() && Ka.value() != Kb.value())
    return ctx.Error("inner dims differ: A has ", Ka.value(), ", B has ", Kb.value());
  Shape out({M, N});
  if (ctx.has_input(2) && ctx.input_type(2).is_tensor() && ctx.input_type(2).shape().ranked()) {
    const Shape& cs = ctx.input_type(2).shape();
    if (cs.rank() > 2) return ctx.Error("input 2 (C) has rank ", cs.rank(), ", expected at most 2");
    auto b = BroadcastShapes(cs, out);
    if (!b.ok()) return ctx.Error("C does not broadcast to the output: ", b.status().message());
    // Unidirectional: C's static dims must be 1 or match.
    for (int i = 0; i < cs.rank(); ++i) {
      const Dim& d = cs[i];
      const Dim& o = out[i + 2 - cs.rank()];
      if (d.is_static() && d.value() != 1 && o.is_static() && d.value() != o.value())
        return ctx.Error("C does not broadcast to the output");
    }
    // A static C dim that is not 1 tells an unknown output dim.
    DimVector od = out.dims();
    for (int i = 0; i < cs.rank(); ++i) {
      const Dim& d = cs[i];
      Dim& o = od[i + 2 - cs.rank()];
      if (!o.is_static() && d.is_static() && d.value() != 1) o = d;
    }
    out = Shape(std::move(od));
  }
  ctx.set_output(0, Type::Tensor(dt, out));
  return absl::OkStatus();
}

absl::Status GemmKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  DType dt = a.dtype();
  if (!IsMatMulDType(dt)) return ctx.Error("dtype ", DTypeName(dt), " is not supported");
  if (b.dtype() != dt || (c && c->dtype() != dt)) return ctx.Error("operand dtypes differ");
  if (a.rank() != 2 || b.rank() != 2) return ctx.Error("A and B must be 2-D");
  bool ta = ctx.node().GetInt("transA", 0) != 0, tb = ctx.node().GetInt("transB", 0) != 0;
  double alpha = ctx.node().GetFloat("alpha", 1.0f), beta = ctx.node().GetFloat("beta", 1.0f);
  int64_t M = a.dim(ta ? 1 : 0), K = a.dim(ta ? 0 : 1);
  int64_t Kb = b.dim(tb ? 1 : 0), N = b.dim(tb ? 0 : 1);
  if (K != Kb) return ctx.Error("inner dims differ: A has ", K, ", B has ", Kb);
  Dims out{M, N};
  if (c) {
    if (c->rank() > 2) return ctx.Error("C has rank ", c->rank(), ", expected at most 2");
    auto bd = BroadcastDims(c->dims(), out);
    if (!bd.ok() || *bd != out) return ctx.Error("C does not broadcast to [", M, ",", N, "]");
  }
  Tensor ca = ToCompute(a), cb = ToCompute(b);
  Tensor cy(ca.dtype(), out);
  Tensor cc = c ? ToCompute(*c) : Tensor();
  DispatchCompute(ca.dtype(), [&]<typename T>() {
    const T* pb = cb.data<T>();
    std::vector<T> bt;
    if (tb) {  // make B row-major [K, N]
      bt.resize(K * N);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) bt[k * N + n] = pb[n * K + k];
      pb = bt.data();
    }
    T* py = cy.data<T>();
    if (K > 0) GemmAcc<T>(M, N, K, ca.data<T>(), ta ? 1 : K, ta ? M : 1, pb, N, py, N);
    T al, be;
    if constexpr (std::is_integral_v<T>) {
      al = static_cast<T>(static_cast<int64_t>(alpha));
      be = static_cast<T>(static_cast<int64_t>(beta));
    } else {
      al = static_cast<T>(alpha);
      be = static_cast<T>(beta);
    }
    if (al != T(1))
      for (int64_t i = 0; i < M * N; ++i) py[i] *= al;
    if (c) {
      const T* pc = cc.data<T>();
      ForEachBroadcast<1>(out, std::array<Dims, 1>{BroadcastStrides(c->dims(), out)},
                          [&](int64_t i, const std::array<int64_t, 1>& o) { py[i] += be * pc[o[0]]; });
    }
  });
  ctx.set_output(0, FromCompute(cy, dt));
  return absl::OkStatus();
}

// Before opset 7 Gemm had a `broadcast` attribute; opset 7 always broadcasts C.
absl::Status UpgradeGemm(Graph&, Node* node, int64_t opset) {
  if (opset < 7) node->RemoveAttr("broadcast");
  return absl::OkStatus();
}

OpCost GemmCost(const Node& n) {
  OpCost c;
  IoBytes(n, c);
  const Value* a = n.input(0);
  if (a && a->type().is_tensor() && a->type().shape().ranked() && a->type().shape().rank() == 2) {
    const Dim& k = a->type().shape()[n.GetInt("transA", 0) ? 0 : 1];
    double mn = NumelOf(n.output(0));
    if (k.is_static()) c.flops = 2.0 * mn * static_cast<double>(k.value()) + 2.0 * mn;
  }
  return c;
}

//===--- MatMulInteger / QLinearMatMul --------------------------------------===//

bool Is8Bit(DType t) { return t == DType::kU8 || t == DType::kI8; }

// A per-row parameter ([M] for a 2-D operand) as [M, 1]; other shapes as they are.
Dims RowParamDims(const Tensor& p, const Dims& promoted) {
  if (p.numel() == 1) return {};
  if (p.rank() == 1 && promoted.size() >= 2) return {p.dim(0), 1};
  return p.dims();
}

// x - zp (zp broadcast to x's promoted shape) as u64 values.
absl::StatusOr<Tensor> SubtractZeroPoint(const Tensor& x, const Dims& promoted, const Tensor* zp, bool per_row) {
  Tensor cx = CastTensor(x, DType::kI64).Reshaped(promoted);
  if (zp) {
    if (zp->dtype() != x.dtype()) return InvalidArgument("zero point dtype differs from its operand's");
    Dims zd = per_row ? RowParamDims(*zp, promoted) : (zp->numel() == 1 ? Dims{} : zp->dims());
    auto bd = BroadcastDims(zd, promoted);
    if (!bd.ok() || *bd != promoted) return InvalidArgument("zero point shape does not fit its operand");
    std::vector<int64_t> z = ToInt64Vector(*zp);
    int64_t* p = cx.data<int64_t>();
    ForEachBroadcast<1>(promoted, std::array<Dims, 1>{BroadcastStrides(zd, promoted)},
                        [&](int64_t i, const std::array<int64_t, 1>& o) { p[i] -= z[o[0]]; });
  }
  return CastTensor(cx, DType::kU64);
}

// (A - a_zp) x (B - b_zp) with wrapping integer accumulation, in out_full dims.
absl::StatusOr<Tensor> IntegerMatMul(const Tensor& a, const Tensor* azp, const Tensor& b, const Tensor* bzp,
                                     MatMulShapes* s) {
  KILN_ASSIGN_OR_RETURN(*s, PlanMatMul(a.dims(), b.dims()));
  KILN_ASSIGN_OR_RETURN(Tensor ca, SubtractZeroPoint(a, s->a, azp, true));
  KILN_ASSIGN_OR_RETURN(Tensor cb, SubtractZeroPoint(b, s->b, bzp, false));
  Tensor acc(DType::kU64, s->out_full);
  BatchedMatMul<uint64_t>(ca.data<uint64_t>(), cb.data<uint64_t>(), acc.data<uint64_t>(), *s);
  return acc;
}

absl::Status InferMatMulInteger(InferContext& ctx) {
  bool ka, kb;
  KILN_RETURN_IF_ERROR(CheckTensor(ctx, 0, &ka));
  KILN_RETURN_IF_ERROR(CheckTensor(ctx, 1, &kb));
  for (int i = 0; i < 4; ++i) {
    if (!ctx.has_input(i) || !ctx.input_type(i).is_tensor()) continue;
    DType d = ctx.input_type(i).dtype();
    if (d != DType::kUndefined && !Is8Bit(d))
      return ctx.Error("input ", i, " has dtype ", DTypeName(d), ", expected u8 or i8");
  }
  Shape out;
  if (ka && kb) KILN_RETURN_IF_ERROR(InferMatMulShape(ctx, ctx.input_type(0).shape(), ctx.input_type(1).shape(), &out));
  ctx.set_output(0, Type::Tensor(DType::kI32, out));
  return absl::OkStatus();
}

absl::Status MatMulIntegerKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (!Is8Bit(a.dtype()) || !Is8Bit(b.dtype())) return ctx.Error("A and B must be u8 or i8");
  MatMulShapes s;
  auto acc = IntegerMatMul(a, ctx.has_input(2) ? &ctx.input(2) : nullptr, b,
                           ctx.has_input(3) ? &ctx.input(3) : nullptr, &s);
  if (!acc.ok()) return ctx.Error(acc.status().message());
  ctx.set_output(0, CastTensor(*acc, DType::kI32).Reshaped(s.out));
  return absl::OkStatus();
}

absl::Status InferQLinearMatMul(InferContext& ctx) {
  bool ka, kb;
  KILN_RETURN_IF_ERROR(CheckTensor(ctx, 0, &ka));
  KILN_RETURN_IF_ERROR(CheckTensor(ctx, 3, &kb));
  for (int i : {0, 2, 3, 5, 7}) {
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
    if (!ctx.input_type(i).is_tensor()) continue;
    DType d = ctx.input_type(i).dtype();
    if (d != DType::kUndefined && !Is8Bit(d))
      return ctx.Error("input ", i, " has dtype ", DTypeName(d), ", expected u8 or i8");
  }
  for (int i : {1, 4, 6}) {
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
    if (!ctx.input_type(i).is_tensor()) continue;
    DType d = ctx.input_type(i).dtype();
    if (d != DType::kUndefined && d != DType::kF32)
      return ctx.Error("input ", i, " (scale) has dtype ", DTypeName(d), ", expected f32");
  }
  Shape out;
  if (ka && kb) KILN_RETURN_IF_ERROR(InferMatMulShape(ctx, ctx.input_type(0).shape(), ctx.input_type(3).shape(), &out));
  const Type& yz = ctx.input_type(7);
  ctx.set_output(0, Type::Tensor(yz.is_tensor() ? yz.dtype() : DType::kUndefined, out));
  return absl::OkStatus();
}

absl::Status QLinearMatMulKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 8));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  if (!Is8Bit(a.dtype()) || !Is8Bit(b.dtype())) return ctx.Error("a and b must be u8 or i8");
  const Tensor& yzp = ctx.input(7);
  if (!Is8Bit(yzp.dtype())) return ctx.Error("y_zero_point must be u8 or i8");
  for (int i : {1, 4, 6})
    if (ctx.input(i).dtype() != DType::kF32) return ctx.Error("input ", i, " (scale) must be f32");
  MatMulShapes s;
  auto acc = IntegerMatMul(a, &ctx.input(2), b, &ctx.input(5), &s);
  if (!acc.ok()) return ctx.Error(acc.status().message());
  // Scales and the output zero point broadcast to the output (per row for a).
  Dims sa = RowParamDims(ctx.input(1), s.a);
  Dims sb = ctx.input(4).numel() == 1 ? Dims{} : ctx.input(4).dims();
  Dims sy = ctx.input(6).numel() == 1 ? Dims{} : ctx.input(6).dims();
  Dims sz = yzp.numel() == 1 ? Dims{} : yzp.dims();
  for (const Dims* d : {&sa, &sb, &sy, &sz}) {
    auto bd = BroadcastDims(*d, s.out_full);
    if (!bd.ok() || *bd != s.out_full) return ctx.Error("a scale or zero point does not fit the output shape");
  }
  const float* pa = ctx.input(1).data<float>();
  const float* pb = ctx.input(4).data<float>();
  const float* py = ctx.input(6).data<float>();
  std::vector<int64_t> z = ToInt64Vector(yzp);
  const uint64_t* pacc = acc->data<uint64_t>();
  Tensor y(yzp.dtype(), s.out_full);
  bool is_u8 = yzp.dtype() == DType::kU8;
  double lo = is_u8 ? 0 : -128, hi = is_u8 ? 255 : 127;
  std::array<Dims, 4> strides = {BroadcastStrides(sa, s.out_full), BroadcastStrides(sb, s.out_full),
                                 BroadcastStrides(sy, s.out_full), BroadcastStrides(sz, s.out_full)};
  ForEachBroadcast<4>(s.out_full, strides, [&](int64_t i, const std::array<int64_t, 4>& o) {
    int32_t v = static_cast<int32_t>(static_cast<uint32_t>(pacc[i]));
    float m = pa[o[0]] * pb[o[1]] / py[o[2]];
    double q = std::nearbyint(static_cast<float>(v) * m) + static_cast<double>(z[o[3]]);
    q = std::min(hi, std::max(lo, q));
    if (is_u8) y.data<uint8_t>()[i] = static_cast<uint8_t>(q);
    else y.data<int8_t>()[i] = static_cast<int8_t>(q);
  });
  ctx.set_output(0, y.Reshaped(s.out));
  return absl::OkStatus();
}

OpCost QMatMulCost(const Node& n) {
  OpCost c;
  IoBytes(n, c);
  const Value* a = n.input(0);
  if (a && a->type().is_tensor() && a->type().shape().ranked() && a->type().shape().rank() > 0) {
    const Dim& k = a->type().shape().dims().back();
    if (k.is_static()) c.flops = 2.0 * NumelOf(n.output(0)) * static_cast<double>(k.value());
  }
  return c;
}

//===--- Einsum -------------------------------------------------------------===//

// Labels: 0..51 for letters, 52 + e for the e-th (right-aligned) ellipsis dim.
constexpr int kEllipsisBase = 52;

int LetterLabel(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;  // ASCII order: upper case first
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  return -1;
}

struct EinsumTerm {
  std::vector<int> letters_before;  // labels before the ellipsis (all labels when none)
  std::vector<int> letters_after;   // labels after the ellipsis
  bool ellipsis = false;
};

struct EinsumEq {
  std::vector<EinsumTerm> inputs;
  EinsumTerm output;
  bool explicit_output = false;
};

absl::StatusOr<EinsumTerm> ParseTerm(const std::string& s) {
  EinsumTerm t;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '.') {
      if (s.compare(i, 3, "...") != 0) return InvalidArgument("'.' must be part of an ellipsis '...'");
      if (t.ellipsis) return InvalidArgument("a term has more than one ellipsis");
      t.ellipsis = true;
      i += 3;
      continue;
    }
    int l = LetterLabel(s[i]);
    if (l < 0) return InvalidArgument("invalid character '", std::string(1, s[i]), "' in equation");
    (t.ellipsis ? t.letters_after : t.letters_before).push_back(l);
    ++i;
  }
  return t;
}

absl::StatusOr<EinsumEq> ParseEinsum(const std::string& equation, int num_inputs) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq += ch;
  EinsumEq r;
  std::string lhs = eq, rhs;
  size_t arrow = eq.find("->");
  if (arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
    r.explicit_output = true;
  }
  size_t start = 0;
  for (;;) {
    size_t comma = lhs.find(',', start);
    KILN_ASSIGN_OR_RETURN(EinsumTerm t, ParseTerm(lhs.substr(start, comma == std::string::npos ? comma : comma - start)));
    r.inputs.push_back(std::move(t));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(r.inputs.size()) != num_inputs)
    return InvalidArgument("equation has ", r.inputs.size(), " terms but the op has ", num_inputs, " inputs");
  if (r.explicit_output) {
    KILN_ASSIGN_OR_RETURN(r.output, ParseTerm(rhs));
    std::vector<int> seen;
    for (const auto* v : {&r.output.letters_before, &r.output.letters_after})
      for (int l : *v) {
        if (std::find(seen.begin(), seen.end(), l) != seen.end())
          return InvalidArgument("output label repeated in equation");
        seen.push_back(l);
        bool found = false;
        for (const EinsumTerm& t : r.inputs)
          for (const auto* w : {&t.letters_before, &t.letters_after})
            if (std::find(w->begin(), w->end(), l) != w->end()) found = true;
        if (!found) return InvalidArgument("output label does not appear in any input term");
      }
  } else {
    int count[kEllipsisBase] = {};
    bool any_ellipsis = false;
    for (const EinsumTerm& t : r.inputs) {
      any_ellipsis |= t.ellipsis;
      for (int l : t.letters_before) ++count[l];
      for (int l : t.letters_after) ++count[l];
    }
    r.output.ellipsis = any_ellipsis;
    for (int l = 0; l < kEllipsisBase; ++l)
      if (count[l] == 1) r.output.letters_after.push_back(l);
  }
  return r;
}

// Labels of each axis of a term for an operand of rank `rank`, with `ell`
// the equation's ellipsis rank.
absl::StatusOr<std::vector<int>> TermLabels(const EinsumTerm& t, int rank, int ell) {
  int letters = static_cast<int>(t.letters_before.size() + t.letters_after.size());
  int e = rank - letters;
  if (!t.ellipsis && e != 0)
    return InvalidArgument("term has ", letters, " labels but its operand has rank ", rank);
  if (e < 0) return InvalidArgument("term has ", letters, " labels but its operand has rank ", rank);
  std::vector<int> out = t.letters_before;
  for (int i = 0; i < e; ++i) out.push_back(kEllipsisBase + ell - e + i);
  out.insert(out.end(), t.letters_after.begin(), t.letters_after.end());
  return out;
}

std::vector<int> OutputLabels(const EinsumTerm& t, int ell) {
  std::vector<int> out = t.letters_before;
  if (t.ellipsis)
    for (int i = 0; i < ell; ++i) out.push_back(kEllipsisBase + i);
  out.insert(out.end(), t.letters_after.begin(), t.letters_after.end());
  return out;
}

int EllipsisRank(const EinsumEq& eq, const std::vector<int>& ranks) {
  int ell = 0;
  for (size_t i = 0; i < eq.inputs.size(); ++i) {
    const EinsumTerm& t = eq.inputs[i];
    if (t.ellipsis)
      ell = std::max(ell, ranks[i] - static_cast<int>(t.letters_before.size() + t.letters_after.size()));
  }
  return ell;
}

absl::Status InferEinsum(InferContext& ctx) {
  int n = ctx.num_inputs();
  if (n < 1) return ctx.Error("expects at least one input");
  auto eq = ParseEinsum(ctx.node().GetString("equation", ""), n);
  if (!eq.ok()) return ctx.Error(eq.status().message());
  DType dt = DType::kUndefined;
  std::vector<int> ranks(n, 0);
  for (int i = 0; i < n; ++i) {
    bool known;
    KILN_RETURN_IF_ERROR(CheckTensor(ctx, i, &known));
    if (!known || !ctx.input_type(i).shape().ranked()) {
      if (known && dt == DType::kUndefined) dt = ctx.input_type(i).dtype();
      continue;
    }
    const Type& t = ctx.input_type(i);
    if (t.dtype() != DType::kUndefined) {
      if (dt != DType::kUndefined && t.dtype() != dt) return ctx.Error("input ", i, " has dtype ", DTypeName(t.dtype()), ", expected ", DTypeName(dt));
      dt = t.dtype();
    }
    ranks[i] = t.shape().rank();
  }
  if (dt != DType::kUndefined && !IsNumeric(dt)) return ctx.Error("dtype ", DTypeName(dt), " is not supported");
  int ell = EllipsisRank(*eq, ranks);
  bool ell_known = true;
  for (int i = 0; i < n; ++i)
    if (eq->inputs[i].ellipsis && !(ctx.input_type(i).is_tensor() && ctx.input_type(i).shape().ranked()))
      ell_known = false;
  // Dims of each label from the ranked operands.
  std::map<int, Dim> label_dim;
  for (int i = 0; i < n; ++i) {
    const Type& t = ctx.input_type(i);
    if (!t.is_tensor() || !t.shape().ranked()) continue;
    auto labels = TermLabels(eq->inputs[i], ranks[i], ell);
    if (!labels.ok()) return ctx.Error("input ", i, ": ", labels.status().message());
    for (int k = 0; k < ranks[i]; ++k) {
      const Dim& d = t.shape()[k];
      auto it = label_dim.find((*labels)[k]);
      if (it == label_dim.end()) {
        label_dim[(*labels)[k]] = d;
        continue;
      }
      Dim& cur = it->second;
      if (d.is_static() && cur.is_static() && d.value() != cur.value()) {
        if (cur.value() == 1) cur = d;
        else if (d.value() != 1)
          return ctx.Error("label dims differ: ", cur.value(), " and ", d.value());
      } else if (!cur.is_static() && d.is_static() && d.value() != 1) {
        cur = d;
      }
    }
  }
  if (eq->output.ellipsis && !ell_known) {
    ctx.set_output(0, Type::Tensor(dt, Shape()));
    return absl::OkStatus();
  }
  DimVector dims;
  for (int l : OutputLabels(eq->output, ell)) {
    auto it = label_dim.find(l);
    dims.push_back(it == label_dim.end() ? Dim() : it->second);
  }
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(dims))));
  return absl::OkStatus();
}

// Walks the whole label space with `dims` (innermost last), accumulating
// the product of the operands into the output: out[...] += op0[...] * op1[...]
// * .... Strides are per label (0 where a tensor does not use it). With the
// output's last label innermost, a matmul-like contraction runs as i-k-j
// row updates.
template <typename T>
void EinsumLoop(const std::vector<const T*>& ops, const std::vector<std::vector<int64_t>>& op_strides,
                const std::vector<int64_t>& out_strides, const Dims& dims, T* out) {
  size_t nops = ops.size();
  int D = static_cast<int>(dims.size());
  if (D == 0) {
    T p = ops[0][0];
    for (size_t o = 1; o < nops; ++o) p *= ops[o][0];
    out[0] += p;
    return;
  }
  if (NumElements(dims) == 0) return;
  const int64_t n = dims[D - 1], so = out_strides[D - 1];
  std::vector<int64_t> si(nops), off(nops, 0), idx(D - 1, 0);
  for (size_t o = 0; o < nops; ++o) si[o] = op_strides[o][D - 1];
  int64_t oo = 0;
  int64_t outer = NumElements(Dims(dims.begin(), dims.end() - 1));
  for (int64_t it = 0; it < outer; ++it) {
    T* y = out + oo;
    if (nops == 2) {
      const T* a = ops[0] + off[0];
      const T* b = ops[1] + off[1];
      const int64_t sa = si[0], sb = si[1];
      if (so == 1 && sa == 0 && sb == 1) {
        Axpy<T>(n, a[0], b, y);
      } else if (so == 1 && sa == 1 && sb == 0) {
        Axpy<T>(n, b[0], a, y);
      } else if (so == 0) {
        T acc = T(0);
        for (int64_t j = 0; j < n; ++j) acc += a[j * sa] * b[j * sb];
        y[0] += acc;
      } else {
        for (int64_t j = 0; j < n; ++j) y[j * so] += a[j * sa] * b[j * sb];
      }
    } else {
      for (int64_t j = 0; j < n; ++j) {
        T p = ops[0][off[0] + j * si[0]];
        for (size_t o = 1; o < nops; ++o) p *= ops[o][off[o] + j * si[o]];
        y[j * so] += p;
      }
    }
    for (int d = D - 2; d >= 0; --d) {
      if (++idx[d] < dims[d]) {
        oo += out_strides[d];
        for (size_t o = 0; o < nops; ++o) off[o] += op_strides[o][d];
        break;
      }
      oo -= out_strides[d] * (dims[d] - 1);
      for (size_t o = 0; o < nops; ++o) off[o] -= op_strides[o][d] * (dims[d] - 1);
      idx[d] = 0;
    }
  }
}

absl::Status EinsumKernel(KernelContext& ctx) {
  int n = ctx.num_inputs();
  if (n < 1) return ctx.Error("expects at least one input");
  for (int i = 0; i < n; ++i)
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
  DType dt = ctx.input(0).dtype();
  if (!IsNumeric(dt) || dt == DType::kBool) return ctx.Error("dtype ", DTypeName(dt), " is not supported");
  for (int i = 1; i < n; ++i)
    if (ctx.input(i).dtype() != dt) return ctx.Error("input ", i, " has dtype ", DTypeName(ctx.input(i).dtype()), ", expected ", DTypeName(dt));
  auto eq = ParseEinsum(ctx.node().GetString("equation", ""), n);
  if (!eq.ok()) return ctx.Error(eq.status().message());
  std::vector<int> ranks(n);
  for (int i = 0; i < n; ++i) ranks[i] = ctx.input(i).rank();
  int ell = EllipsisRank(*eq, ranks);
  // Size of each label; each operand's stride for it (summed over repeats,
  // 0 where the operand broadcasts a size-1 dim).
  std::map<int, int64_t> size;
  std::vector<std::vector<int>> labels(n);
  for (int i = 0; i < n; ++i) {
    auto l = TermLabels(eq->inputs[i], ranks[i], ell);
    if (!l.ok()) return ctx.Error("input ", i, ": ", l.status().message());
    labels[i] = *l;
    for (int k = 0; k < ranks[i]; ++k) {
      int64_t d = ctx.input(i).dim(k);
      auto it = size.find(labels[i][k]);
      if (it == size.end()) size[labels[i][k]] = d;
      else if (it->second != d) {
        if (it->second == 1) it->second = d;
        else if (d != 1) return ctx.Error("label dims differ: ", it->second, " and ", d);
      }
    }
  }
  std::vector<std::map<int, int64_t>> stride(n);
  for (int i = 0; i < n; ++i) {
    Dims st = StridesOf(ctx.input(i).dims());
    std::map<int, int64_t> seen_dim;
    for (int k = 0; k < ranks[i]; ++k) {
      int l = labels[i][k];
      int64_t d = ctx.input(i).dim(k);
      auto sd = seen_dim.find(l);
      if (sd != seen_dim.end() && sd->second != d)
        return ctx.Error("input ", i, " repeats a label over dims of different sizes");
      seen_dim[l] = d;
      if (d == size[l]) stride[i][l] += st[k];
    }
  }
  std::vector<int> out_labels = OutputLabels(eq->output, ell);
  std::vector<int> red_labels;
  for (const auto& [l, s] : size)
    if (std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end()) red_labels.push_back(l);
  Dims out_dims;
  for (int l : out_labels) {
    auto it = size.find(l);
    out_dims.push_back(it == size.end() ? 1 : it->second);
  }
  Dims ostr_by_pos = StridesOf(out_dims);
  // Loop order: output labels, then reduced ones, with the output's last
  // label innermost (the last reduced label when the output is a scalar).
  std::vector<int> order;
  std::vector<int64_t> order_ostr;
  int inner = -1, inner_pos = -1;
  if (!out_labels.empty()) {
    inner = out_labels.back();
    inner_pos = static_cast<int>(out_labels.size()) - 1;
  }
  for (size_t p = 0; p < out_labels.size(); ++p) {
    if (static_cast<int>(p) == inner_pos) continue;
    order.push_back(out_labels[p]);
    order_ostr.push_back(ostr_by_pos[p]);
  }
  for (int l : red_labels) {
    order.push_back(l);
    order_ostr.push_back(0);
  }
  if (inner_pos >= 0) {
    order.push_back(inner);
    order_ostr.push_back(ostr_by_pos[inner_pos]);
  }
  Dims dims;
  std::vector<std::vector<int64_t>> opstr(n);
  for (int l : order) {
    auto it = size.find(l);
    dims.push_back(it == size.end() ? 1 : it->second);
    for (int i = 0; i < n; ++i) opstr[i].push_back(stride[i].count(l) ? stride[i][l] : 0);
  }
  DType cdt = ComputeDType(dt);
  std::vector<Tensor> cin(n);
  for (int i = 0; i < n; ++i) cin[i] = ToCompute(ctx.input(i));
  Tensor cy(cdt, out_dims);  // zero-initialized
  DispatchCompute(cdt, [&]<typename T>() {
    std::vector<const T*> ptrs;
    for (const Tensor& t : cin) ptrs.push_back(t.data<T>());
    EinsumLoop<T>(ptrs, opstr, order_ostr, dims, cy.data<T>());
  });
  ctx.set_output(0, FromCompute(cy, dt));
  return absl::OkStatus();
}

// Every point of the label space costs one multiply-add per operand.
OpCost EinsumCost(const Node& n) {
  OpCost c;
  IoBytes(n, c);
  std::vector<int> ranks;
  for (Value* v : n.inputs()) {
    if (!v || !v->type().is_tensor() || !v->type().shape().is_static()) return c;
    ranks.push_back(v->type().shape().rank());
  }
  auto eq = ParseEinsum(n.GetString("equation", ""), static_cast<int>(ranks.size()));
  if (!eq.ok()) return c;
  int ell = EllipsisRank(*eq, ranks);
  std::map<int, int64_t> size;
  for (size_t i = 0; i < ranks.size(); ++i) {
    auto l = TermLabels(eq->inputs[i], ranks[i], ell);
    if (!l.ok()) return c;
    for (int k = 0; k < ranks[i]; ++k)
      size[(*l)[k]] = std::max(size[(*l)[k]], n.input(static_cast<int>(i))->type().shape()[k].value());
  }
  double points = 1;
  for (const auto& [l, s] : size) points *= static_cast<double>(s);
  c.flops = points * static_cast<double>(ranks.size());
  return c;
}

//===--- Det ----------------------------------------------------------------===//

absl::Status InferDet(InferContext& ctx) {
  bool known;
  KILN_RETURN_IF_ERROR(CheckTensor(ctx, 0, &known));
  if (!known) {
    ctx.set_output(0, Type());
    return absl::OkStatus();
  }
  const Type& x = ctx.input_type(0);
  if (x.dtype() != DType::kUndefined && !IsFloat(x.dtype()))
    return ctx.Error("input 0 has dtype ", DTypeName(x.dtype()), ", expected a float type");
  if (!x.shape().ranked()) {
    ctx.set_output(0, Type::Tensor(x.dtype(), Shape()));
    return absl::OkStatus();
  }
  const Shape& s = x.shape();
  if (s.rank() < 2) return ctx.Error("input 0 has rank ", s.rank(), ", expected at least 2");
  const Dim& a = s[s.rank() - 2];
  const Dim& b = s[s.rank() - 1];
  if (a.is_static() && b.is_static() && a.value() != b.value())
    return ctx.Error("matrices must be square, got ", a.value(), "x", b.value());
  ctx.set_output(0, Type::Tensor(x.dtype(), Shape(DimVector(s.dims().begin(), s.dims().end() - 2))));
  return absl::OkStatus();
}

absl::Status DetKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a float type");
  if (x.rank() < 2) return ctx.Error("input has rank ", x.rank(), ", expected at least 2");
  int64_t n = x.dim(x.rank() - 1);
  if (x.dim(x.rank() - 2) != n) return ctx.Error("matrices must be square");
  Dims od(x.dims().begin(), x.dims().end() - 2);
  int64_t batch = NumElements(od);
  std::vector<double> v = ToDoubleVector(x), m(n * n);
  Tensor y(x.dtype(), od);
  DispatchFloat(x.dtype(), [&]<typename T>() {
    T* out = y.data<T>();
    for (int64_t bi = 0; bi < batch; ++bi) {
      std::copy(v.begin() + bi * n * n, v.begin() + (bi + 1) * n * n, m.begin());
      double det = 1;
      for (int64_t c = 0; c < n; ++c) {  // LU with partial pivoting
        int64_t p = c;
        for (int64_t r = c + 1; r < n; ++r)
          if (std::fabs(m[r * n + c]) > std::fabs(m[p * n + c])) p = r;
        if (m[p * n + c] == 0) {
          det = 0;
          break;
        }
        if (p != c) {
          for (int64_t k = 0; k < n; ++k) std::swap(m[p * n + k], m[c * n + k]);
          det = -det;
        }
        double piv = m[c * n + c];
        det *= piv;
        for (int64_t r = c + 1; r < n; ++r) {
          double f = m[r * n + c] / piv;
          if (f == 0) continue;
          for (int64_t k = c + 1; k < n; ++k) m[r * n + k] -= f * m[c * n + k];
        }
      }
      out[bi] = FromDouble<T>(det);
    }
  });
  ctx.set_output(0, y);
  return absl::OkStatus();
}

OpCost DetCost(const Node& n) {
  OpCost c;
  IoBytes(n, c);
  const Value* x = n.input(0);
  if (x && x->type().is_tensor() && x->type().shape().ranked() && x->type().shape().rank() >= 2) {
    const Dim& d = x->type().shape().dims().back();
    if (d.is_static()) {
      double k = static_cast<double>(d.value());
      c.flops = NumelOf(x) / std::max(1.0, k * k) * (2.0 / 3.0) * k * k * k;
    }
  }
  return c;
}

}  // namespace

std::vector<int64_t> TransposePerm(const Node& n) {
  if (!n.domain().empty() || n.op() != "Transpose" || n.num_outputs() != 1) return {};
  if (const Attribute* perm = n.attr("perm")) return perm->ints();
  const Value* x = n.input(0);
  if (!x || !x->type().is_tensor() || !x->type().shape().ranked()) return {};
  std::vector<int64_t> p;
  for (int64_t i = x->type().shape().rank(); i-- > 0;) p.push_back(i);
  return p;
}

std::vector<int64_t> ComposePerms(const std::vector<int64_t>& inner, const std::vector<int64_t>& outer) {
  std::vector<int64_t> p;
  for (int64_t j : outer) {
    if (j < 0 || j >= static_cast<int64_t>(inner.size())) return {};
    p.push_back(inner[j]);
  }
  return p;
}

bool IsMatrixView(const std::vector<int64_t>& perm) {
  const int64_t r = static_cast<int64_t>(perm.size());
  if (r < 2) return false;
  std::vector<bool> seen(r, false);
  for (int64_t a : perm) {
    if (a < 0 || a >= r || seen[a]) return false;
    seen[a] = true;
  }
  return perm[r - 1] == r - 1 || perm[r - 2] == r - 1;
}

bool IsMatrixTranspose(const Node& n) { return IsMatrixView(TransposePerm(n)); }

void RegisterMatMulOps(OpRegistry& r) {
  r.Register("MatMul").Inputs(2).Outputs(1).Class(OpClass::kMatMul)
      .Infer(InferMatMul).Kernel(MatMulKernel).Cost(MatMulCost);
  r.Register("Gemm").Inputs(2, 3).Outputs(1).Class(OpClass::kMatMul)
      .Attr("alpha", AttrKind::kFloat, "1.0")
      .Attr("beta", AttrKind::kFloat, "1.0")
      .Attr("transA", AttrKind::kInt, "0")
      .Attr("transB", AttrKind::kInt, "0")
      .Infer(InferGemm).Kernel(GemmKernel).Cost(GemmCost).Upgrade(UpgradeGemm);
  r.Register("Einsum").Inputs(1, -1).Outputs(1).Class(OpClass::kMatMul).Since(12)
      .RequiredAttr("equation", AttrKind::kString)
      .Infer(InferEinsum).Kernel(EinsumKernel).Cost(EinsumCost);
  r.Register("MatMulInteger").Inputs(2, 4).Outputs(1).Class(OpClass::kMatMul).Since(10)
      .Infer(InferMatMulInteger).Kernel(MatMulIntegerKernel).Cost(QMatMulCost);
  r.Register("QLinearMatMul").Inputs(8).Outputs(1).Class(OpClass::kMatMul).Since(10)
      .Infer(InferQLinearMatMul).Kernel(QLinearMatMulKernel).Cost(QMatMulCost);
  r.Register("Det").Inputs(1).Outputs(1).Class(OpClass::kOther).Since(11)
      .Infer(InferDet).Kernel(DetKernel).Cost(DetCost);
}

}  // namespace kiln
