//===- quantization.cc - Linear quantization ------------------------------===//
//
// QuantizeLinear and DequantizeLinear (per tensor or per axis) and
// DynamicQuantizeLinear. The quantized matrix products (MatMulInteger,
// QLinearMatMul, ConvInteger, QLinearConv) live in matmul.cc and conv.cc.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <vector>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/ops/operand_checks.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

//===--- Quantization -----------------------------------------------------===//

// Per-tensor (scalar scale) or per-axis (1-D scale along `axis`) parameters.
template <typename Ctx>
absl::StatusOr<int64_t> QuantAxisBlocks(const Ctx& ctx, const Tensor& x, const Tensor& scale,
                                        const Tensor* zp, int64_t* inner) {
  *inner = 1;
  if (zp && zp->numel() != scale.numel())
    return ctx.Error("the zero point has ", zp->numel(), " values but the scale has ", scale.numel());
  if (scale.numel() == 1 && scale.rank() <= 1) return int64_t{1};
  if (scale.rank() != 1) return ctx.Error("the scale must be a scalar or 1-D, got ", DimsText(scale.dims()));
  auto axis = NormalizeAxis(ctx.node().GetInt("axis", 1), x.rank());
  if (!axis.ok() || x.rank() == 0) return ctx.Error("axis ", ctx.node().GetInt("axis", 1), " is out of range for rank ", x.rank());
  if (x.dim(*axis) != scale.numel())
    return ctx.Error("the scale has ", scale.numel(), " values but axis ", *axis, " has extent ", x.dim(*axis));
  for (int i = *axis + 1; i < x.rank(); ++i) *inner *= x.dim(i);
  return scale.numel();
}

absl::Status InferQuantizeLinear(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (DTypeIsNot(x, {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI32}))
    return ctx.Error("x must be float or i32, got ", DTypeName(x.dtype()));
  DType out = DType::kU8;
  if (ctx.num_inputs() > 2 && ctx.has_input(2)) {
    const Type& zp = ctx.input_type(2);
    if (DTypeIsNot(zp, {DType::kU8, DType::kI8})) return ctx.Error("the zero point must be u8 or i8, got ", DTypeName(zp.dtype()));
    if (zp.is_tensor() && zp.dtype() != DType::kUndefined) out = zp.dtype();
  }
  ctx.set_output(0, Type::Tensor(out, x.is_tensor() ? x.shape() : Shape()));
  return absl::OkStatus();
}

absl::Status QuantizeLinear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (!IsFloat(x.dtype()) && x.dtype() != DType::kI32) return ctx.Error("x must be float or i32, got ", DTypeName(x.dtype()));
  if (!IsFloat(scale.dtype())) return ctx.Error("the scale must be float, got ", DTypeName(scale.dtype()));
  DType out = zp ? zp->dtype() : DType::kU8;
  if (out != DType::kU8 && out != DType::kI8) return ctx.Error("the zero point must be u8 or i8, got ", DTypeName(out));
  int64_t inner;
  KILN_ASSIGN_OR_RETURN(int64_t blocks, QuantAxisBlocks(ctx, x, scale, zp, &inner));
  std::vector<double> s = ToDoubleVector(scale);
  std::vector<double> z = zp ? ToDoubleVector(*zp) : std::vector<double>(s.size(), 0);
  for (double v : s)
    if (v == 0) return ctx.Error("the scale is 0");
  Tensor& y = ctx.AllocOutput(0, out, x.dims());
  float lo = out == DType::kU8 ? 0.f : -128.f, hi = out == DType::kU8 ? 255.f : 127.f;
  std::vector<double> xs = ToDoubleVector(x);
  DispatchInteger(out, [&]<typename Q>() {
    if constexpr (sizeof(Q) == 1) {
      Q* q = y.data<Q>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t c = blocks == 1 ? 0 : (i / inner) % blocks;
        float v = std::nearbyint(static_cast<float>(xs[i]) / static_cast<float>(s[c])) + static_cast<float>(z[c]);
        q[i] = static_cast<Q>(std::isnan(v) ? 0.f : std::min(std::max(v, lo), hi));
      }
    }
  });
  return absl::OkStatus();
}

absl::Status InferDequantizeLinear(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (DTypeIsNot(x, {DType::kU8, DType::kI8, DType::kI32}))
    return ctx.Error("x must be u8, i8 or i32, got ", DTypeName(x.dtype()));
  const Type& s = ctx.input_type(1);
  DType out = s.is_tensor() && s.dtype() != DType::kUndefined ? s.dtype() : DType::kF32;
  if (!IsFloat(out)) return ctx.Error("the scale must be float, got ", DTypeName(out));
  if (ctx.num_inputs() > 2 && ctx.has_input(2)) {
    const Type& zp = ctx.input_type(2);
    if (x.is_tensor() && zp.is_tensor() && x.dtype() != DType::kUndefined && zp.dtype() != DType::kUndefined &&
        zp.dtype() != x.dtype())
      return ctx.Error("the zero point is ", DTypeName(zp.dtype()), " but x is ", DTypeName(x.dtype()));
  }
  ctx.set_output(0, Type::Tensor(out, x.is_tensor() ? x.shape() : Shape()));
  return absl::OkStatus();
}

absl::Status DequantizeLinear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (x.dtype() != DType::kU8 && x.dtype() != DType::kI8 && x.dtype() != DType::kI32)
    return ctx.Error("x must be u8, i8 or i32, got ", DTypeName(x.dtype()));
  if (!IsFloat(scale.dtype())) return ctx.Error("the scale must be float, got ", DTypeName(scale.dtype()));
  if (zp && zp->dtype() != x.dtype())
    return ctx.Error("the zero point is ", DTypeName(zp->dtype()), " but x is ", DTypeName(x.dtype()));
  int64_t inner;
  KILN_ASSIGN_OR_RETURN(int64_t blocks, QuantAxisBlocks(ctx, x, scale, zp, &inner));
  std::vector<double> s = ToDoubleVector(scale);
  std::vector<int64_t> z = zp ? ToInt64Vector(*zp) : std::vector<int64_t>(s.size(), 0);
  Tensor& y = ctx.AllocOutput(0, scale.dtype(), x.dims());
  std::vector<int64_t> xs = ToInt64Vector(x);
  DispatchFloat(scale.dtype(), [&]<typename T>() {
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t c = blocks == 1 ? 0 : (i / inner) % blocks;
      out[i] = static_cast<T>(static_cast<float>(xs[i] - z[c]) * static_cast<float>(s[c]));
    }
  });
  return absl::OkStatus();
}

absl::Status InferDynamicQuantizeLinear(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (DTypeIsNot(x, {DType::kF32})) return ctx.Error("x must be f32, got ", DTypeName(x.dtype()));
  ctx.set_output(0, Type::Tensor(DType::kU8, x.is_tensor() ? x.shape() : Shape()));
  ctx.set_output(1, Type::Tensor(DType::kF32, Shape::Scalar()));
  ctx.set_output(2, Type::Tensor(DType::kU8, Shape::Scalar()));
  return absl::OkStatus();
}

absl::Status DynamicQuantizeLinear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kF32) return ctx.Error("x must be f32, got ", DTypeName(x.dtype()));
  const float* p = x.data<float>();
  float mn = 0, mx = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (!std::isfinite(p[i])) return ctx.Error("x contains NaN or infinity");
    mn = std::min(mn, p[i]);
    mx = std::max(mx, p[i]);
  }
  float scale = (mx - mn) / 255.f;
  float zp = 0;
  if (scale != 0) zp = std::min(std::max(std::nearbyint((0.f - mn) / scale), 0.f), 255.f);
  uint8_t* q = ctx.AllocOutput(0, DType::kU8, x.dims()).data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = scale != 0 ? std::nearbyint(p[i] / scale) + zp : zp;
    q[i] = static_cast<uint8_t>(std::min(std::max(v, 0.f), 255.f));
  }
  ctx.set_output(1, Tensor::Scalar<float>(scale));
  ctx.set_output(2, Tensor::Scalar<uint8_t>(static_cast<uint8_t>(zp)));
  return absl::OkStatus();
}

}  // namespace

void RegisterQuantizationOps(OpRegistry& r) {
  r.Register("QuantizeLinear").Inputs(2, 3).Outputs(1).Class(OpClass::kElementwise).Since(10)
      .Attr("axis", AttrKind::kInt, "1")
      .Infer(InferQuantizeLinear).Kernel(QuantizeLinear);
  r.Register("DequantizeLinear").Inputs(2, 3).Outputs(1).Class(OpClass::kElementwise).Since(10)
      .Attr("axis", AttrKind::kInt, "1")
      .Infer(InferDequantizeLinear).Kernel(DequantizeLinear);
  r.Register("DynamicQuantizeLinear").Inputs(1).Outputs(3).Class(OpClass::kOther).Since(11)
      .Infer(InferDynamicQuantizeLinear).Kernel(DynamicQuantizeLinear);
}

}  // namespace kiln
