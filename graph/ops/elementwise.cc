//===- elementwise.cc - Elementwise operators -----------------------------===//
//
// Unary math, binary arithmetic with numpy broadcasting, logic and
// comparison, activations, Cast. Float math on f16/bf16 is computed in f32
// and rounded once; integer arithmetic follows ONNX (and numpy) semantics.
//
//===----------------------------------------------------------------------===//
#include <cmath>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

// Computation type of a storage type: f16/bf16 compute in float.
template <typename T> struct ComputeType { using type = T; };
template <> struct ComputeType<Half> { using type = float; };
template <> struct ComputeType<BFloat16> { using type = float; };
template <typename T> using ComputeT = typename ComputeType<T>::type;

// Applies `f` (ComputeT<T> -> ComputeT<T>) to every element of a float tensor.
template <typename F>
absl::Status UnaryFloat(KernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("expects a float input, got ", DTypeName(x.dtype()));
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  DispatchFloat(x.dtype(), [&]<typename T>() {
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i)
      out[i] = static_cast<T>(f(static_cast<ComputeT<T>>(in[i])));
  });
  return absl::OkStatus();
}

// Binary op with broadcasting; `f` is called with ComputeT<T> operands.
template <typename Dispatch, typename F>
absl::Status BinarySameType(KernelContext& ctx, Dispatch dispatch, F f) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype())
    return ctx.Error("operand dtypes differ: ", DTypeName(a.dtype()), " and ", DTypeName(b.dtype()));
  auto dims = BroadcastDims(a.dims(), b.dims());
  if (!dims.ok()) return ctx.Error(dims.status().message());
  Tensor& y = ctx.AllocOutput(0, a.dtype(), *dims);
  std::array<Dims, 2> strides = {BroadcastStrides(a.dims(), *dims), BroadcastStrides(b.dims(), *dims)};
  dispatch(a.dtype(), [&]<typename T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* out = y.data<T>();
    ForEachBroadcast<2>(*dims, strides, [&](int64_t i, const std::array<int64_t, 2>& off) {
      out[i] = static_cast<T>(f(static_cast<ComputeT<T>>(pa[off[0]]), static_cast<ComputeT<T>>(pb[off[1]])));
    });
  });
  return absl::OkStatus();
}

auto kNumeric = [](DType t, auto&& f) { return DispatchNumeric(t, f); };

//===--- Unary ------------------------------------------------------------===//

absl::Status Relu(KernelContext& ctx) {
  return UnaryFloat(ctx, [](auto x) { return x > 0 ? x : decltype(x)(0); });
}

//===--- Binary -----------------------------------------------------------===//

absl::Status Add(KernelContext& ctx) {
  return BinarySameType(ctx, kNumeric, [](auto a, auto b) { return a + b; });
}

//===--- Cast -------------------------------------------------------------===//

absl::Status InferCast(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  auto dt = DTypeFromOnnx(ctx.node().GetInt("to", 0));
  if (!dt) return ctx.Error("attribute 'to' is not a known data type");
  ctx.set_output(0, Type::Tensor(*dt, x.is_tensor() ? x.shape() : Shape()));
  return absl::OkStatus();
}

absl::Status Cast(KernelContext& ctx) {
  auto dt = DTypeFromOnnx(ctx.node().GetInt("to", 0));
  if (!dt) return ctx.Error("attribute 'to' is not a known data type");
  ctx.set_output(0, CastTensor(ctx.input(0), *dt));
  return absl::OkStatus();
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  r.Register("Relu").Inputs(1).Outputs(1).Class(OpClass::kElementwise)
      .Infer(InferSameAsInput0).Kernel(Relu);
  r.Register("Add").Inputs(2).Outputs(1).Class(OpClass::kElementwise)
      .Infer(InferBroadcast).Kernel(Add);
  r.Register("Cast").Inputs(1).Outputs(1).Class(OpClass::kElementwise)
      .RequiredAttr("to", AttrKind::kInt)
      .Infer(InferCast).Kernel(Cast);
}

}  // namespace kiln
