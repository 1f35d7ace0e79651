//===- training.cc - The ops of ai.onnx.preview.training ------------------===//
//
// The optimizers Adagrad, Adam and Momentum, and Gradient, which has
// inference but no kernel.
//
//===----------------------------------------------------------------------===//
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/ops/operand_checks.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

//===--- Optimizers (ai.onnx.preview.training) ----------------------------===//

// Inputs (R, T, groups x N tensors); outputs (outs x N tensors), each output
// group typed like the matching input group starting with X.
absl::StatusOr<int64_t> OptimizerCount(int num_inputs, int num_outputs, int groups, int outs) {
  int vars = num_inputs - 2;
  if (vars <= 0 || vars % groups != 0 || num_outputs != vars / groups * outs)
    return InvalidArgument("expects 2 + ", groups, "N inputs and ", outs, "N outputs, got ", num_inputs,
                           " inputs and ", num_outputs, " outputs");
  return vars / groups;
}

template <int kGroups, int kOuts>
absl::Status InferOptimizer(InferContext& ctx) {
  auto count = OptimizerCount(ctx.num_inputs(), ctx.num_outputs(), kGroups, kOuts);
  if (!count.ok()) return ctx.Error(count.status().message());
  int64_t n = *count;
  const Type& r = ctx.input_type(0);
  if (DTypeIsNot(r, {DType::kF32, DType::kF64})) return ctx.Error("R must be f32 or f64, got ", DTypeName(r.dtype()));
  if (DTypeIsNot(ctx.input_type(1), {DType::kI64})) return ctx.Error("T must be i64");
  // Output group o mirrors input group: X for o = 0, the state groups after G.
  for (int o = 0; o < kOuts; ++o) {
    int group = o == 0 ? 0 : o + 1;
    for (int64_t i = 0; i < n; ++i) ctx.set_output(o * n + i, ctx.input_type(2 + group * n + i));
  }
  return absl::OkStatus();
}

struct OptimizerArgs {
  double r = 0;
  int64_t t = 0;
  int64_t n = 0;
};

template <int kGroups, int kOuts>
absl::StatusOr<OptimizerArgs> ReadOptimizerArgs(KernelContext& ctx) {
  auto count = OptimizerCount(ctx.num_inputs(), ctx.num_outputs(), kGroups, kOuts);
  if (!count.ok()) return ctx.Error(count.status().message());
  OptimizerArgs a;
  a.n = *count;
  KILN_ASSIGN_OR_RETURN(a.r, ScalarFloat(ctx, ctx.input(0), "R"));
  KILN_ASSIGN_OR_RETURN(a.t, ScalarInt(ctx, ctx.input(1), "T"));
  for (int64_t i = 0; i < a.n; ++i) {
    const Tensor& x = ctx.input(2 + i);
    if (!IsFloat(x.dtype())) return ctx.Error("optimized tensor ", i, " must be float, got ", DTypeName(x.dtype()));
    for (int g = 1; g < kGroups; ++g) {
      const Tensor& o = ctx.input(2 + g * a.n + i);
      if (o.dtype() != x.dtype() || o.dims() != x.dims())
        return ctx.Error("input ", 2 + g * a.n + i, " is ", DTypeName(o.dtype()), DimsText(o.dims()),
                         " but the tensor it belongs to is ", DTypeName(x.dtype()), DimsText(x.dims()));
    }
  }
  return a;
}

// Runs `step(x, g, state..., outputs...)` elementwise in double for every
// optimized tensor; state and output pointers are passed as arrays.
template <int kGroups, int kOuts, typename F>
absl::Status RunOptimizer(KernelContext& ctx, const OptimizerArgs& a, F step) {
  for (int64_t i = 0; i < a.n; ++i) {
    const Tensor& x = ctx.input(2 + i);
    for (int o = 0; o < kOuts; ++o) ctx.AllocOutput(o * a.n + i, x.dtype(), x.dims());
    DispatchFloat(x.dtype(), [&]<typename T>() {
      std::array<const T*, kGroups> in;
      for (int g = 0; g < kGroups; ++g) in[g] = ctx.input(2 + g * a.n + i).template data<T>();
      std::array<T*, kOuts> out;
      for (int o = 0; o < kOuts; ++o) out[o] = ctx.output(o * a.n + i).template data<T>();
      std::array<double, kGroups> v;
      std::array<double, kOuts> r;
      for (int64_t e = 0; e < x.numel(); ++e) {
        for (int g = 0; g < kGroups; ++g) v[g] = ToDouble(in[g][e]);
        step(v, r);
        for (int o = 0; o < kOuts; ++o) out[o][e] = FromDouble<T>(r[o]);
      }
    });
  }
  return absl::OkStatus();
}

absl::Status Adagrad(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(OptimizerArgs a, (ReadOptimizerArgs<3, 2>(ctx)));
  const Node& n = ctx.node();
  double norm = n.GetFloat("norm_coefficient", 0.f), eps = n.GetFloat("epsilon", 1e-6f);
  double decay = n.GetFloat("decay_factor", 0.f);
  double r = a.r / (1 + static_cast<double>(a.t) * decay);
  return RunOptimizer<3, 2>(ctx, a, [&](const std::array<double, 3>& v, std::array<double, 2>& out) {
    double x = v[0], g = norm * v[0] + v[1];
    double h = v[2] + g * g;
    out[0] = x - r * g / (std::sqrt(h) + eps);
    out[1] = h;
  });
}

absl::Status Adam(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(OptimizerArgs a, (ReadOptimizerArgs<4, 3>(ctx)));
  const Node& n = ctx.node();
  double norm = n.GetFloat("norm_coefficient", 0.f), post = n.GetFloat("norm_coefficient_post", 0.f);
  double alpha = n.GetFloat("alpha", 0.9f), beta = n.GetFloat("beta", 0.999f), eps = n.GetFloat("epsilon", 1e-6f);
  double t = static_cast<double>(a.t);
  double r = a.t > 0 ? a.r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : a.r;
  return RunOptimizer<4, 3>(ctx, a, [&](const std::array<double, 4>& v, std::array<double, 3>& out) {
    double x = v[0], g = norm * v[0] + v[1];
    double m = alpha * v[2] + (1 - alpha) * g;
    double h = beta * v[3] + (1 - beta) * g * g;
    double xn = x - r * m / (std::sqrt(h) + eps);
    out[0] = (1 - post) * xn;
    out[1] = m;
    out[2] = h;
  });
}

template <typename Ctx>
absl::StatusOr<bool> MomentumIsNesterov(const Ctx& ctx) {
  std::string mode = ctx.node().GetString("mode", "");
  if (mode != "standard" && mode != "nesterov")
    return ctx.Error("mode must be 'standard' or 'nesterov', got '", mode, "'");
  return mode == "nesterov";
}

absl::Status InferMomentum(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(MomentumIsNesterov(ctx).status());
  return InferOptimizer<3, 2>(ctx);
}

absl::Status Momentum(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(bool nesterov, MomentumIsNesterov(ctx));
  KILN_ASSIGN_OR_RETURN(OptimizerArgs a, (ReadOptimizerArgs<3, 2>(ctx)));
  const Node& n = ctx.node();
  double norm = n.GetFloat("norm_coefficient", 0.f), alpha = n.GetFloat("alpha", 0.f), beta = n.GetFloat("beta", 0.f);
  double b = a.t > 0 ? beta : 1.0;
  double r = a.r;
  return RunOptimizer<3, 2>(ctx, a, [&](const std::array<double, 3>& v, std::array<double, 2>& out) {
    double x = v[0], g = norm * v[0] + v[1];
    double m = alpha * v[2] + b * g;
    out[0] = nesterov ? x - r * (g + alpha * m) : x - r * m;
    out[1] = m;
  });
}

// Gradient needs automatic differentiation, which kiln does not do: it has
// inference (each output is typed like its x) but no kernel, so running it
// reports that the op has no reference kernel.
absl::Status InferGradient(InferContext& ctx) {
  const Node& n = ctx.node();
  const Attribute* xs = n.attr("xs");
  if (!xs || xs->kind() != AttrKind::kStrings) return ctx.Error("attribute 'xs' must be a list of names");
  if (static_cast<int>(xs->strings().size()) != ctx.num_outputs())
    return ctx.Error("xs names ", xs->strings().size(), " values but the node has ", ctx.num_outputs(), " outputs");
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    Value* v = n.owner() ? n.owner()->Lookup(xs->strings()[i]) : nullptr;
    if (v) ctx.set_output(i, v->type());
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterTrainingOps(OpRegistry& r) {
  const std::string kTraining = "ai.onnx.preview.training";
  r.Register("Adagrad", kTraining).Inputs(3, -1).Outputs(1, -1).Class(OpClass::kElementwise)
      .Attr("decay_factor", AttrKind::kFloat, "0.0")
      .Attr("epsilon", AttrKind::kFloat, "1e-6")
      .Attr("norm_coefficient", AttrKind::kFloat, "0.0")
      .Infer(InferOptimizer<3, 2>).Kernel(Adagrad);
  r.Register("Adam", kTraining).Inputs(3, -1).Outputs(1, -1).Class(OpClass::kElementwise)
      .Attr("alpha", AttrKind::kFloat, "0.9")
      .Attr("beta", AttrKind::kFloat, "0.999")
      .Attr("epsilon", AttrKind::kFloat, "1e-6")
      .Attr("norm_coefficient", AttrKind::kFloat, "0.0")
      .Attr("norm_coefficient_post", AttrKind::kFloat, "0.0")
      .Infer(InferOptimizer<4, 3>).Kernel(Adam);
  r.Register("Momentum", kTraining).Inputs(3, -1).Outputs(1, -1).Class(OpClass::kElementwise)
      .RequiredAttr("alpha", AttrKind::kFloat)
      .RequiredAttr("beta", AttrKind::kFloat)
      .RequiredAttr("mode", AttrKind::kString)
      .RequiredAttr("norm_coefficient", AttrKind::kFloat)
      .Infer(InferMomentum).Kernel(Momentum);
  r.Register("Gradient", kTraining).Inputs(1, -1).Outputs(1, -1).Class(OpClass::kOther)
      .RequiredAttr("xs", AttrKind::kStrings)
      .RequiredAttr("y", AttrKind::kString)
      .Attr("zs", AttrKind::kStrings, "[]")
      .Infer(InferGradient);
}

}  // namespace kiln
