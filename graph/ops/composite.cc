//===- composite.cc - kiln's composite operators (domain "kiln") ----------===//
//
// Composite ops stand for a whole subgraph that recognize-composites found
// and that a target may map in one piece (or expand-composites turns back
// into ONNX ops):
//
//   kiln.Gelu(X) {approximate = "none" | "tanh"}
//     none: y = x * 0.5 * (1 + erf(x / sqrt(2)))
//     tanh: y = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
//
//   kiln.Attention(Q, K, V, mask?) {scale, k_transposed, causal, mask_value}
//     S = scale * Q @ K^T         (K holds K^T already when k_transposed = 1)
//     S = S + mask                (float mask, numpy broadcasting)
//     S = mask ? S : mask_value   (bool mask: true takes part in attention)
//     S[..., i, j] = -inf, j > i  (causal = 1)
//     Y = Softmax(S, axis = -1) @ V
//
// Batch dims of Q, K (and then of the probabilities and V) broadcast as
// MatMul's do; the mask broadcasts against the scores as Add/Where would, so
// every attention subgraph maps onto this op exactly. Q, K and V have rank
// >= 2. scale defaults to 1/sqrt(head size) (the last dim of Q).
//
// The reference kernels compute in double and round once on store.
//
//===----------------------------------------------------------------------===//
#include <array>
#include <cmath>
#include <limits>
#include <numbers>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

double NumelOf(const Value* v) {
  if (!v || !v->type().is_tensor()) return 0;
  int64_t n = v->type().shape().NumElements();
  return n > 0 ? static_cast<double>(n) : 0;
}

double BytesOf(const Value* v) {
  if (!v || !v->type().is_tensor()) return 0;
  return NumelOf(v) * static_cast<double>(DTypeSize(v->type().dtype()));
}

// The input `i` as a tensor type, or null when its type is not known yet.
absl::StatusOr<const Type*> TensorInput(const InferContext& ctx, int i) {
  if (!ctx.has_input(i)) return nullptr;
  const Type& t = ctx.input_type(i);
  if (t.is_none()) return nullptr;
  if (!t.is_tensor()) return ctx.Error("input ", i, " must be a tensor, got ", t.ToString());
  return &t;
}

absl::Status CheckFloat(const InferContext& ctx, int i, const Type* t) {
  if (t && t->dtype() != DType::kUndefined && !IsFloat(t->dtype()))
    return ctx.Error("input ", i, " has dtype ", DTypeName(t->dtype()), ", expected a float type");
  return absl::OkStatus();
}

//===--- Gelu -------------------------------------------------------------===//

absl::StatusOr<bool> GeluIsTanh(const Node& n) {
  std::string a = n.GetString("approximate", "none");
  if (a == "none") return false;
  if (a == "tanh") return true;
  return InvalidArgument("attribute 'approximate' must be \"none\" or \"tanh\", got \"", a, "\"");
}

absl::Status InferGelu(InferContext& ctx) {
  auto tanh = GeluIsTanh(ctx.node());
  if (!tanh.ok()) return ctx.Error(tanh.status().message());
  KILN_ASSIGN_OR_RETURN(const Type* x, TensorInput(ctx, 0));
  KILN_RETURN_IF_ERROR(CheckFloat(ctx, 0, x));
  if (x) ctx.set_output(0, *x);
  return absl::OkStatus();
}

absl::Status GeluKernel(KernelContext& ctx) {
  if (!ctx.has_input(0)) return ctx.Error("input 0 is missing");
  auto tanh = GeluIsTanh(ctx.node());
  if (!tanh.ok()) return ctx.Error(tanh.status().message());
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("input 0 has dtype ", DTypeName(x.dtype()), ", expected a float type");
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  const double inv_sqrt2 = 1.0 / std::sqrt(2.0);
  const double k = std::sqrt(2.0 / std::numbers::pi);
  DispatchFloat(x.dtype(), [&]<typename T>() {
    const T* in = x.data<T>();
    T* out = y.data<T>();
    int64_t n = x.numel();
    if (*tanh) {
      for (int64_t i = 0; i < n; ++i) {
        double v = ToDouble(in[i]);
        out[i] = FromDouble<T>(0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v))));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        double v = ToDouble(in[i]);
        out[i] = FromDouble<T>(0.5 * v * (1.0 + std::erf(v * inv_sqrt2)));
      }
    }
  });
  return absl::OkStatus();
}

// About a dozen operations per element (erf/tanh counted as a few).
OpCost GeluCost(const Node& n) {
  OpCost c;
  c.flops = 12 * NumelOf(n.input(0));
  c.bytes_read = BytesOf(n.input(0));
  c.bytes_written = BytesOf(n.output(0));
  return c;
}

//===--- Attention --------------------------------------------------------===//

// Leading (batch) dims of a shape of rank >= 2.
Shape BatchOf(const Shape& s) { return Shape(DimVector(s.dims().begin(), s.dims().end() - 2)); }

absl::Status CheckSame(const InferContext& ctx, const char* what, const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static() && a.value() != b.value())
    return ctx.Error(what, " differ: ", a.value(), " and ", b.value());
  return absl::OkStatus();
}

absl::Status InferAttention(InferContext& ctx) {
  const char* names[] = {"Q", "K", "V", "mask"};
  const Type* t[4] = {nullptr, nullptr, nullptr, nullptr};
  for (int i = 0; i < 4; ++i) {
    KILN_ASSIGN_OR_RETURN(t[i], TensorInput(ctx, i));
    if (i < 3 && !ctx.has_input(i)) return ctx.Error("input ", i, " (", names[i], ") is missing");
  }
  DType dt = DType::kUndefined;
  for (int i = 0; i < 3; ++i) {
    KILN_RETURN_IF_ERROR(CheckFloat(ctx, i, t[i]));
    if (!t[i] || t[i]->dtype() == DType::kUndefined) continue;
    if (dt != DType::kUndefined && t[i]->dtype() != dt)
      return ctx.Error("input ", i, " (", names[i], ") has dtype ", DTypeName(t[i]->dtype()), ", expected ",
                       DTypeName(dt), " like the others");
    dt = t[i]->dtype();
  }
  if (t[3] && t[3]->dtype() != DType::kUndefined && t[3]->dtype() != DType::kBool && dt != DType::kUndefined &&
      t[3]->dtype() != dt)
    return ctx.Error("input 3 (mask) has dtype ", DTypeName(t[3]->dtype()), ", expected bool or ", DTypeName(dt));
  for (int i = 0; i < 3; ++i)
    if (t[i] && t[i]->shape().ranked() && t[i]->shape().rank() < 2)
      return ctx.Error("input ", i, " (", names[i], ") has rank ", t[i]->shape().rank(), ", expected at least 2");
  bool ranked = true;
  for (int i = 0; i < 4; ++i)
    if (ctx.has_input(i) && (!t[i] || !t[i]->shape().ranked())) ranked = false;
  if (!ranked) {
    ctx.set_output(0, Type::Tensor(dt, Shape()));
    return absl::OkStatus();
  }
  bool kt = ctx.node().GetInt("k_transposed", 0) != 0;
  const Shape& q = t[0]->shape();
  const Shape& k = t[1]->shape();
  const Shape& v = t[2]->shape();
  const Dim& dq = q[q.rank() - 1];
  const Dim& dk = kt ? k[k.rank() - 2] : k[k.rank() - 1];
  const Dim& sk = kt ? k[k.rank() - 1] : k[k.rank() - 2];
  KILN_RETURN_IF_ERROR(CheckSame(ctx, "head sizes of Q and K", dq, dk));
  auto batch = BroadcastShapes(BatchOf(q), BatchOf(k));
  if (!batch.ok()) return ctx.Error("batch dims of Q and K: ", batch.status().message());
  DimVector sd = batch->dims();
  sd.push_back(q[q.rank() - 2]);
  sd.push_back(sk);
  Shape scores(std::move(sd));
  if (t[3]) {
    auto s = BroadcastShapes(scores, t[3]->shape());
    if (!s.ok()) return ctx.Error("mask: ", s.status().message());
    scores = *std::move(s);
  }
  KILN_RETURN_IF_ERROR(CheckSame(ctx, "key lengths of the scores and V", scores[scores.rank() - 1], v[v.rank() - 2]));
  auto ob = BroadcastShapes(BatchOf(scores), BatchOf(v));
  if (!ob.ok()) return ctx.Error("batch dims of the scores and V: ", ob.status().message());
  DimVector od = ob->dims();
  od.push_back(scores[scores.rank() - 2]);
  od.push_back(v[v.rank() - 1]);
  ctx.set_output(0, Type::Tensor(dt, Shape(std::move(od))));
  return absl::OkStatus();
}

struct MatView {
  Dims batch;
  int64_t rows = 0, cols = 0;
};

MatView ViewOf(const Dims& d) {
  MatView m;
  m.batch.assign(d.begin(), d.end() - 2);
  m.rows = d[d.size() - 2];
  m.cols = d[d.size() - 1];
  return m;
}

// C[b] = A[b] @ B[b] (or A[b] @ B[b]^T) with broadcast batch dims; A is
// batch x M x K, B is batch x K x N (or batch x N x K).
void BatchedProduct(const std::vector<double>& a, const MatView& va, const std::vector<double>& b,
                    const MatView& vb, bool b_transposed, const Dims& batch, std::vector<double>& c) {
  int64_t m = va.rows, kk = va.cols, n = b_transposed ? vb.rows : vb.cols;
  c.assign(static_cast<size_t>(NumElements(batch) * m * n), 0.0);
  std::array<Dims, 2> strides{BroadcastStrides(va.batch, batch), BroadcastStrides(vb.batch, batch)};
  int64_t bi = 0;
  ForEachBroadcast<2>(batch, strides, [&](int64_t, const std::array<int64_t, 2>& off) {
    const double* pa = a.data() + off[0] * va.rows * va.cols;
    const double* pb = b.data() + off[1] * vb.rows * vb.cols;
    double* pc = c.data() + bi * m * n;
    ++bi;
    for (int64_t i = 0; i < m; ++i) {
      double* row = pc + i * n;
      const double* arow = pa + i * kk;
      if (b_transposed) {
        for (int64_t j = 0; j < n; ++j) {
          const double* bcol = pb + j * kk;
          double acc = 0;
          for (int64_t p = 0; p < kk; ++p) acc += arow[p] * bcol[p];
          row[j] = acc;
        }
      } else {
        for (int64_t p = 0; p < kk; ++p) {
          double av = arow[p];
          const double* brow = pb + p * n;
          for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
        }
      }
    }
  });
}

absl::Status AttentionKernel(KernelContext& ctx) {
  for (int i = 0; i < 3; ++i)
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  DType dt = q.dtype();
  if (!IsFloat(dt)) return ctx.Error("input 0 has dtype ", DTypeName(dt), ", expected a float type");
  for (int i = 1; i < 3; ++i)
    if (ctx.input(i).dtype() != dt)
      return ctx.Error("input ", i, " has dtype ", DTypeName(ctx.input(i).dtype()), ", expected ", DTypeName(dt));
  for (int i = 0; i < 3; ++i)
    if (ctx.input(i).rank() < 2) return ctx.Error("input ", i, " has rank ", ctx.input(i).rank(), ", expected at least 2");
  const Tensor* mask = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  if (mask && mask->dtype() != DType::kBool && mask->dtype() != dt)
    return ctx.Error("input 3 (mask) has dtype ", DTypeName(mask->dtype()), ", expected bool or ", DTypeName(dt));
  bool kt = ctx.node().GetInt("k_transposed", 0) != 0;
  bool causal = ctx.node().GetInt("causal", 0) != 0;
  double mask_value = ctx.node().GetFloat("mask_value", -std::numeric_limits<float>::infinity());

  MatView vq = ViewOf(q.dims()), vk = ViewOf(k.dims()), vv = ViewOf(v.dims());
  int64_t d = vq.cols, dk = kt ? vk.rows : vk.cols, sk = kt ? vk.cols : vk.rows;
  if (d != dk) return ctx.Error("head sizes of Q and K differ: ", d, " and ", dk);
  double scale = ctx.node().has_attr("scale") ? ctx.node().GetFloat("scale", 1.0f)
                                              : 1.0 / std::sqrt(static_cast<double>(d));
  auto batch = BroadcastDims(vq.batch, vk.batch);
  if (!batch.ok()) return ctx.Error("batch dims of Q and K: ", batch.status().message());

  // Scores, then the mask broadcast over them.
  std::vector<double> qd = ToDoubleVector(q), kd = ToDoubleVector(k), s;
  // With k_transposed, K is batch x D x Sk and multiplies as it is.
  BatchedProduct(qd, vq, kd, vk, !kt, *batch, s);
  qd.clear();
  kd.clear();
  for (double& x : s) x *= scale;
  Dims sdims = *batch;
  sdims.push_back(vq.rows);
  sdims.push_back(sk);
  if (mask) {
    auto full = BroadcastDims(sdims, mask->dims());
    if (!full.ok()) return ctx.Error("mask: ", full.status().message());
    std::vector<double> f(static_cast<size_t>(NumElements(*full)));
    std::array<Dims, 2> strides{BroadcastStrides(sdims, *full), BroadcastStrides(mask->dims(), *full)};
    if (mask->dtype() == DType::kBool) {
      const bool* m = mask->data<bool>();
      ForEachBroadcast<2>(*full, strides, [&](int64_t i, const std::array<int64_t, 2>& o) {
        f[i] = m[o[1]] ? s[o[0]] : mask_value;
      });
    } else {
      std::vector<double> m = ToDoubleVector(*mask);
      ForEachBroadcast<2>(*full, strides, [&](int64_t i, const std::array<int64_t, 2>& o) {
        f[i] = s[o[0]] + m[o[1]];
      });
    }
    s = std::move(f);
    sdims = *std::move(full);
  }
  MatView vs = ViewOf(sdims);
  int64_t mats = NumElements(vs.batch);
  if (causal) {
    const double ninf = -std::numeric_limits<double>::infinity();
    for (int64_t b = 0; b < mats; ++b)
      for (int64_t i = 0; i < vs.rows; ++i)
        for (int64_t j = i + 1; j < vs.cols; ++j) s[(b * vs.rows + i) * vs.cols + j] = ninf;
  }
  // Softmax along the last dim (a NaN or an all -inf row gives NaN, as Softmax does).
  for (int64_t r = 0; r < mats * vs.rows; ++r) {
    double* row = s.data() + r * vs.cols;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < vs.cols; ++j)
      if (row[j] > mx || std::isnan(row[j])) mx = row[j];
    double sum = 0;
    for (int64_t j = 0; j < vs.cols; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    double inv = 1.0 / sum;
    for (int64_t j = 0; j < vs.cols; ++j) row[j] *= inv;
  }
  // Probabilities @ V.
  if (vs.cols != vv.rows) return ctx.Error("key lengths of the scores and V differ: ", vs.cols, " and ", vv.rows);
  auto ob = BroadcastDims(vs.batch, vv.batch);
  if (!ob.ok()) return ctx.Error("batch dims of the scores and V: ", ob.status().message());
  std::vector<double> vd = ToDoubleVector(v), out;
  BatchedProduct(s, vs, vd, vv, false, *ob, out);
  Dims odims = *ob;
  odims.push_back(vs.rows);
  odims.push_back(vv.cols);
  Tensor& y = ctx.AllocOutput(0, dt, odims);
  DispatchFloat(dt, [&]<typename T>() {
    T* p = y.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) p[i] = FromDouble<T>(out[i]);
  });
  return absl::OkStatus();
}

// Two matmuls (2 flops per multiply-add) and about five operations per score
// for scaling, masking and the softmax.
OpCost AttentionCost(const Node& n) {
  OpCost c;
  for (Value* v : n.inputs()) c.bytes_read += BytesOf(v);
  c.bytes_written = BytesOf(n.output(0));
  const Value* q = n.input(0);
  const Value* vv = n.input(2);
  if (!q || !vv || !q->type().is_tensor() || !vv->type().is_tensor()) return c;
  const Shape& qs = q->type().shape();
  const Shape& vs = vv->type().shape();
  double out = NumelOf(n.output(0));
  if (!qs.ranked() || !vs.ranked() || qs.rank() < 2 || vs.rank() < 2 || out == 0) return c;
  const Dim& d = qs[qs.rank() - 1];
  const Dim& sk = vs[vs.rank() - 2];
  const Dim& dv = vs[vs.rank() - 1];
  if (!d.is_static() || !sk.is_static() || !dv.is_static() || dv.value() == 0) return c;
  double scores = out / static_cast<double>(dv.value()) * static_cast<double>(sk.value());
  c.flops = 2 * scores * static_cast<double>(d.value()) + 2 * out * static_cast<double>(sk.value()) + 5 * scores;
  return c;
}

}  // namespace

void RegisterCompositeOps(OpRegistry& r) {
  r.Register("Gelu", "kiln").Inputs(1).Outputs(1).Class(OpClass::kElementwise)
      .Attr("approximate", AttrKind::kString, "none")
      .Infer(InferGelu).Kernel(GeluKernel).Cost(GeluCost);
  r.Register("Attention", "kiln").Inputs(3, 4).Outputs(1).Class(OpClass::kMatMul)
      .Attr("scale", AttrKind::kFloat, "1/sqrt(head size)")
      .Attr("k_transposed", AttrKind::kInt, "0")
      .Attr("causal", AttrKind::kInt, "0")
      .Attr("mask_value", AttrKind::kFloat, "-inf")
      .Infer(InferAttention).Kernel(AttentionKernel).Cost(AttentionCost);
}

}  // namespace kiln
