//===- normalization.cc - Softmax and the normalization operators ---------===//
//
// Softmax, LogSoftmax, BatchNormalization, InstanceNormalization,
// LayerNormalization, LpNormalization, LRN and MeanVarianceNormalization.
//
// Element math runs in f32 for f16/bf16/f32 inputs (f64 for f64), sums and
// statistics accumulate in double, and results are rounded once on store.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/support/status.h"

namespace kiln {

absl::Status UpgradeCoercedAxisOp(Graph& g, Node* node, int64_t opset);

namespace {

// Element computation type: f64 stays f64, every other float computes in f32.
template <typename T>
using MathT = std::conditional_t<std::is_same_v<T, double>, double, float>;

double NumelOf(const Value* v) {
  if (!v || !v->type().is_tensor()) return 0;
  int64_t n = v->type().shape().NumElements();
  return n > 0 ? static_cast<double>(n) : 0;
}

double BytesOf(const Value* v) {
  if (!v || !v->type().is_tensor()) return 0;
  return NumelOf(v) * static_cast<double>(DTypeSize(v->type().dtype()));
}

OpCost PerInputCost(const Node& n, double flops_per_input) {
  OpCost c;
  c.flops = NumelOf(n.input(0)) * flops_per_input;
  for (Value* v : n.inputs()) c.bytes_read += BytesOf(v);
  for (Value* v : n.outputs()) c.bytes_written += BytesOf(v);
  return c;
}

std::string Label(const Node& n) {
  if (n.name().empty()) return absl::StrCat("node (", n.QualifiedOp(), ")");
  return absl::StrCat("node '", n.name(), "' (", n.QualifiedOp(), ")");
}

void SplitAtAxis(const Dims& d, int axis, int64_t* outer, int64_t* n, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int i = 0; i < axis; ++i) *outer *= d[i];
  *n = d[axis];
  for (size_t i = axis + 1; i < d.size(); ++i) *inner *= d[i];
}

// Input 0 must be a float tensor; sets *known when its type is a tensor type.
absl::Status CheckFloatInput(InferContext& ctx, int i, bool* known) {
  *known = false;
  if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
  const Type& t = ctx.input_type(i);
  if (t.is_none()) return absl::OkStatus();
  if (!t.is_tensor()) return ctx.Error("input ", i, " must be a tensor, got ", t.ToString());
  if (t.dtype() != DType::kUndefined && !IsFloat(t.dtype()))
    return ctx.Error("input ", i, " has dtype ", DTypeName(t.dtype()), ", expected a float type");
  *known = true;
  return absl::OkStatus();
}

Tensor ScalarOf(DType dt, double v) {
  Tensor t(dt, {});
  DispatchFloat(dt, [&]<typename T>() { t.data<T>()[0] = FromDouble<T>(v); });
  return t;
}

// Errors unless the first `n` inputs are present (an omitted required input
// reaches the kernel as null).
absl::Status RequireInputs(const KernelContext& ctx, int n) {
  for (int i = 0; i < n; ++i)
    if (!ctx.has_input(i)) return ctx.Error("required input ", i, " is missing");
  return absl::OkStatus();
}

//===--- Upgrade helpers ----------------------------------------------------===//

// Replaces `old` by a node equal to `repl` (built just before `old`) whose
// outputs take over the names, types and uses of old's first outputs; old's
// remaining outputs must be unused. Erases `old` and `repl`.
absl::Status TakeOverOutputs(Graph& g, Node* old, Node* repl) {
  int k = repl->num_outputs();
  if (k > old->num_outputs()) return Internal(Label(*old), ": replacement has too many outputs");
  for (int i = k; i < old->num_outputs(); ++i)
    if (old->output(i)->has_uses())
      return Unimplemented(Label(*old), ": output ", i, " has no opset-17 equivalent but is used");
  std::vector<std::string> names;
  std::vector<Type> types;
  for (int i = 0; i < k; ++i) {
    names.push_back(old->output(i)->name());
    types.push_back(old->output(i)->type());
    old->output(i)->ReplaceAllUsesWith(repl->output(i));
  }
  std::string node_name = old->name();
  g.EraseNode(old);
  Node* fin = g.AddNode(repl->op(), repl->inputs(), names, repl->domain(), repl);
  fin->set_name(node_name);
  for (const auto& [name, a] : repl->attrs()) fin->SetAttr(name, a.Clone(&g));
  for (int i = 0; i < k; ++i) {
    fin->output(i)->set_type(types[i]);
    repl->output(i)->ReplaceAllUsesWith(fin->output(i));
  }
  g.EraseNode(repl);
  return absl::OkStatus();
}

}  // namespace

// Before opset 13, Softmax, LogSoftmax and Hardmax coerce the input to 2-D
// [d0*...*d(axis-1), d(axis)*...*d(n-1)] (axis defaults to 1) and work along
// the second dim. When the axis is known to be the last one, that is the
// opset-13 op with axis -1; otherwise the node becomes
// Reshape(Op(Flatten(x, axis), axis=-1), Shape(x)).
absl::Status UpgradeCoercedAxisOp(Graph& g, Node* node, int64_t opset) {
  if (opset >= 13) return absl::OkStatus();
  int64_t axis = node->GetInt("axis", 1);
  Value* x = node->input(0);
  if (!x || node->num_outputs() != 1) return InvalidArgument(Label(*node), ": expects one input and one output");
  const Type& t = x->type();
  if (t.is_tensor() && t.shape().ranked()) {
    int r = t.shape().rank();
    auto a = NormalizeAxis(axis, r);
    if (!a.ok()) return InvalidArgument(Label(*node), ": ", a.status().message());
    bool trailing_ones = true;
    for (int i = *a + 1; i < r; ++i)
      if (!(t.shape()[i].is_static() && t.shape()[i].value() == 1)) trailing_ones = false;
    if (r > 0 && (*a == r - 1 || trailing_ones)) {
      node->SetAttr("axis", Attribute::Int(*a));
      return absl::OkStatus();
    }
  }
  std::string base = node->name().empty() ? std::string(node->op()) : node->name();
  Node* shape = g.AddNode("Shape", {x}, std::vector<std::string>{g.UniqueName(base + "_shape")}, "", node);
  Node* flat = g.AddNode("Flatten", {x}, std::vector<std::string>{g.UniqueName(base + "_2d")}, "", node);
  flat->SetAttr("axis", Attribute::Int(axis));
  Node* op = g.AddNode(node->op(), {flat->output(0)}, std::vector<std::string>{g.UniqueName(base + "_2d_out")},
                       node->domain(), node);
  op->SetAttr("axis", Attribute::Int(-1));
  op->set_name(node->name().empty() ? "" : g.UniqueName(node->name()));
  Node* reshape = g.AddNode("Reshape", {op->output(0), shape->output(0)}, 1, "", node);
  reshape->SetAttr("allowzero", Attribute::Int(1));
  return TakeOverOutputs(g, node, reshape);
}

namespace {

//===--- Softmax / LogSoftmax -----------------------------------------------===//

absl::Status InferSoftmax(InferContext& ctx) {
  bool known;
  KILN_RETURN_IF_ERROR(CheckFloatInput(ctx, 0, &known));
  if (!known) {
    ctx.set_output(0, Type());
    return absl::OkStatus();
  }
  const Type& x = ctx.input_type(0);
  if (x.shape().ranked()) {
    int64_t axis = ctx.node().GetInt("axis", -1);
    auto a = NormalizeAxis(axis, x.shape().rank());
    if (!a.ok() || x.shape().rank() == 0) return ctx.Error("axis ", axis, " is out of range for rank ", x.shape().rank());
  }
  ctx.set_output(0, x);
  return absl::OkStatus();
}

template <typename T>
void SoftmaxTyped(const T* in, T* out, int64_t outer, int64_t n, int64_t inner, bool log) {
  using C = MathT<T>;
  std::vector<C> mx(inner), e(n * inner);
  std::vector<double> sum(inner);
  for (int64_t o = 0; o < outer; ++o) {
    const T* p = in + o * n * inner;
    T* q = out + o * n * inner;
    std::fill(mx.begin(), mx.end(), -std::numeric_limits<C>::infinity());
    for (int64_t k = 0; k < n; ++k) {
      const T* row = p + k * inner;
      for (int64_t j = 0; j < inner; ++j) {
        C v = static_cast<C>(row[j]);
        if (v > mx[j] || std::isnan(v)) mx[j] = v;
      }
    }
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t k = 0; k < n; ++k) {
      const T* row = p + k * inner;
      C* er = e.data() + k * inner;
      for (int64_t j = 0; j < inner; ++j) {
        C d = static_cast<C>(row[j]) - mx[j];
        er[j] = log ? d : std::exp(d);
        sum[j] += log ? static_cast<double>(std::exp(d)) : static_cast<double>(er[j]);
      }
    }
    if (log) {
      for (int64_t j = 0; j < inner; ++j) sum[j] = std::log(sum[j]);
      for (int64_t k = 0; k < n; ++k) {
        const C* er = e.data() + k * inner;
        T* row = q + k * inner;
        for (int64_t j = 0; j < inner; ++j) row[j] = static_cast<T>(static_cast<C>(er[j] - sum[j]));
      }
    } else {
      for (int64_t j = 0; j < inner; ++j) sum[j] = 1.0 / sum[j];
      for (int64_t k = 0; k < n; ++k) {
        const C* er = e.data() + k * inner;
        T* row = q + k * inner;
        for (int64_t j = 0; j < inner; ++j) row[j] = static_cast<T>(static_cast<C>(er[j] * sum[j]));
      }
    }
  }
}

absl::Status SoftmaxImpl(KernelContext& ctx, bool log) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a float type");
  int64_t axis_attr = ctx.node().GetInt("axis", -1);
  auto axis = NormalizeAxis(axis_attr, x.rank());
  if (!axis.ok() || x.rank() == 0) return ctx.Error("axis ", axis_attr, " is out of range for rank ", x.rank());
  int64_t outer, n, inner;
  SplitAtAxis(x.dims(), *axis, &outer, &n, &inner);
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  if (x.numel() == 0) return absl::OkStatus();
  DispatchFloat(x.dtype(), [&]<typename T>() { SoftmaxTyped<T>(x.data<T>(), y.data<T>(), outer, n, inner, log); });
  return absl::OkStatus();
}

absl::Status SoftmaxKernel(KernelContext& ctx) { return SoftmaxImpl(ctx, false); }
absl::Status LogSoftmaxKernel(KernelContext& ctx) { return SoftmaxImpl(ctx, true); }

OpCost SoftmaxCost(const Node& n) { return PerInputCost(n, 5); }

//===--- Channel-wise statistics helpers ------------------------------------===//

// Per-channel affine y = x * a[c] + b[c] over an N x C x S tensor.
template <typename T>
void ChannelAffine(const T* x, T* y, int64_t N, int64_t C, int64_t S, const std::vector<double>& a,
                   const std::vector<double>& b) {
  using M = MathT<T>;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      const T* px = x + (n * C + c) * S;
      T* py = y + (n * C + c) * S;
      M sa = static_cast<M>(a[c]), sb = static_cast<M>(b[c]);
      for (int64_t s = 0; s < S; ++s) py[s] = static_cast<T>(static_cast<M>(px[s]) * sa + sb);
    }
  }
}

// Mean and population variance of each channel of an N x C x S tensor, over
// N and S (per_instance false) or over S for each (n, c) (per_instance true).
template <typename T>
void ChannelMoments(const T* x, int64_t N, int64_t C, int64_t S, bool per_instance, std::vector<double>& mean,
                    std::vector<double>& var) {
  int64_t groups = per_instance ? N * C : C;
  mean.assign(groups, 0.0);
  var.assign(groups, 0.0);
  double count = per_instance ? static_cast<double>(S) : static_cast<double>(N * S);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const T* px = x + (n * C + c) * S;
      double s = 0;
      for (int64_t i = 0; i < S; ++i) s += static_cast<double>(px[i]);
      mean[per_instance ? n * C + c : c] += s;
    }
  for (double& m : mean) m /= count;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const T* px = x + (n * C + c) * S;
      int64_t gi = per_instance ? n * C + c : c;
      double m = mean[gi], s = 0;
      for (int64_t i = 0; i < S; ++i) {
        double d = static_cast<double>(px[i]) - m;
        s += d * d;
      }
      var[gi] += s;
    }
  for (double& v : var) v /= count;
}

// Checks that input i is a 1-D tensor of `c` elements (when known).
absl::Status CheckChannelParam(InferContext& ctx, int i, const Dim& c, const char* what) {
  if (!ctx.has_input(i)) return ctx.Error("input ", i, " (", what, ") is missing");
  const Type& t = ctx.input_type(i);
  if (t.is_none()) return absl::OkStatus();
  if (!t.is_tensor()) return ctx.Error("input ", i, " (", what, ") must be a tensor");
  if (t.dtype() != DType::kUndefined && !IsFloat(t.dtype()))
    return ctx.Error("input ", i, " (", what, ") has dtype ", DTypeName(t.dtype()), ", expected a float type");
  if (!t.shape().ranked()) return absl::OkStatus();
  if (t.shape().rank() != 1) return ctx.Error("input ", i, " (", what, ") has rank ", t.shape().rank(), ", expected 1");
  const Dim& d = t.shape()[0];
  if (c.is_static() && d.is_static() && c.value() != d.value())
    return ctx.Error("input ", i, " (", what, ") has ", d.value(), " elements, expected ", c.value());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> ChannelParam(KernelContext& ctx, int i, int64_t c, const char* what) {
  const Tensor& t = ctx.input(i);
  if (!IsFloat(t.dtype())) return ctx.Error(what, " has dtype ", DTypeName(t.dtype()), ", expected a float type");
  if (t.rank() != 1 || t.dim(0) != c) return ctx.Error(what, " must be 1-D with ", c, " elements");
  return ToDoubleVector(t);
}

//===--- BatchNormalization -------------------------------------------------===//

absl::Status InferBatchNorm(InferContext& ctx) {
  bool known;
  KILN_RETURN_IF_ERROR(CheckFloatInput(ctx, 0, &known));
  Dim c;
  if (known && ctx.input_type(0).shape().ranked()) {
    const Shape& s = ctx.input_type(0).shape();
    if (s.rank() < 2) return ctx.Error("input 0 has rank ", s.rank(), ", expected at least 2");
    c = s[1];
  }
  const char* names[] = {"scale", "B", "input_mean", "input_var"};
  for (int i = 1; i <= 4; ++i) KILN_RETURN_IF_ERROR(CheckChannelParam(ctx, i, c, names[i - 1]));
  ctx.set_output(0, known ? ctx.input_type(0) : Type());
  for (int i = 1; i < ctx.num_outputs() && i < 3; ++i) {
    const Type& m = ctx.input_type(i + 2);
    ctx.set_output(i, m.is_tensor() ? Type::Tensor(m.dtype(), Shape({c})) : Type());
  }
  return absl::OkStatus();
}

absl::Status BatchNormKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 5));
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a float type");
  if (x.rank() < 2) return ctx.Error("input has rank ", x.rank(), ", expected at least 2");
  int64_t N = x.dim(0), C = x.dim(1), S = 1;
  for (int i = 2; i < x.rank(); ++i) S *= x.dim(i);
  KILN_ASSIGN_OR_RETURN(std::vector<double> scale, ChannelParam(ctx, 1, C, "scale"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> bias, ChannelParam(ctx, 2, C, "B"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> mean, ChannelParam(ctx, 3, C, "input_mean"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> var, ChannelParam(ctx, 4, C, "input_var"));
  double eps = ctx.node().GetFloat("epsilon", 1e-5f);
  double momentum = ctx.node().GetFloat("momentum", 0.9f);
  bool training = ctx.node().GetInt("training_mode", 0) != 0;
  std::vector<double> use_mean = mean, use_var = var;
  if (training) {
    DispatchFloat(x.dtype(), [&]<typename T>() { ChannelMoments<T>(x.data<T>(), N, C, S, false, use_mean, use_var); });
  }
  std::vector<double> a(C), b(C);
  for (int64_t c = 0; c < C; ++c) {
    a[c] = scale[c] / std::sqrt(use_var[c] + eps);
    b[c] = bias[c] - use_mean[c] * a[c];
  }
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  DispatchFloat(x.dtype(), [&]<typename T>() { ChannelAffine<T>(x.data<T>(), y.data<T>(), N, C, S, a, b); });
  // Outside training the running statistics stay what they were.
  for (int i = 1; i < ctx.num_outputs() && i < 3; ++i) {
    const Tensor& in = ctx.input(i + 2);
    const std::vector<double>& running = i == 1 ? mean : var;
    const std::vector<double>& current = i == 1 ? use_mean : use_var;
    Tensor& o = ctx.AllocOutput(i, in.dtype(), {C});
    DispatchFloat(in.dtype(), [&]<typename T>() {
      T* p = o.data<T>();
      for (int64_t c = 0; c < C; ++c)
        p[c] = FromDouble<T>(training ? running[c] * momentum + current[c] * (1 - momentum) : running[c]);
    });
  }
  return absl::OkStatus();
}

// y = (x - mean) / sqrt(var + eps) * scale + B with (C, D1, ..., Dn)-shaped
// parameters: the per-activation form of BatchNormalization (spatial = 0).
absl::Status RewriteNonSpatialBatchNorm(Graph& g, Node* node) {
  Value* x = node->input(0);
  DType dt = DType::kF32;
  if (x->type().is_tensor() && IsFloat(x->type().dtype())) dt = x->type().dtype();
  Value* eps = g.AddConstant(g.UniqueName("epsilon"), ScalarOf(dt, node->GetFloat("epsilon", 1e-5f)));
  Node* sub = g.AddNode("Sub", {x, node->input(3)}, 1, "", node);
  Node* ve = g.AddNode("Add", {node->input(4), eps}, 1, "", node);
  Node* sd = g.AddNode("Sqrt", {ve->output(0)}, 1, "", node);
  Node* div = g.AddNode("Div", {sub->output(0), sd->output(0)}, 1, "", node);
  Node* mul = g.AddNode("Mul", {div->output(0), node->input(1)}, 1, "", node);
  Node* add = g.AddNode("Add", {mul->output(0), node->input(2)}, 1, "", node);
  return TakeOverOutputs(g, node, add);
}

// Before opset 14: legacy attributes is_test (< 7), spatial (< 9) and
// consumed_inputs (1); training was implied by listing the optional outputs
// (Y, mean, var, saved_mean, saved_var) without is_test. Opset 14 keeps (Y,
// running_mean, running_var) and says training with training_mode. Upgrades
// run while the model is imported, before the node's consumers exist, so the
// outputs a node lists are what counts.
absl::Status UpgradeBatchNorm(Graph& g, Node* node, int64_t opset) {
  if (opset >= 14) return absl::OkStatus();
  bool is_test = node->GetInt("is_test", 0) != 0;
  bool spatial = node->GetInt("spatial", 1) != 0;
  node->RemoveAttr("is_test");
  node->RemoveAttr("spatial");
  node->RemoveAttr("consumed_inputs");
  if (node->num_inputs() != 5) return InvalidArgument(Label(*node), ": expects 5 inputs, got ", node->num_inputs());
  bool training = !is_test && node->num_outputs() > 1;
  if (training && node->num_outputs() > 3)
    return Unimplemented(Label(*node), ": training outputs saved_mean and saved_var are not supported");
  if (!spatial) {
    if (training) return Unimplemented(Label(*node), ": training with spatial=0 is not supported");
    return RewriteNonSpatialBatchNorm(g, node);
  }
  int keep = training ? 3 : 1;
  if (training) node->SetAttr("training_mode", Attribute::Int(1));
  if (node->num_outputs() <= keep) return absl::OkStatus();
  Node* repl = g.AddNode(node->op(), node->inputs(), std::min(keep, node->num_outputs()), node->domain(), node);
  for (const auto& [name, a] : node->attrs()) repl->SetAttr(name, a.Clone(&g));
  return TakeOverOutputs(g, node, repl);
}

OpCost BatchNormCost(const Node& n) {
  return PerInputCost(n, n.GetInt("training_mode", 0) != 0 ? 6 : 2);
}

//===--- InstanceNormalization ----------------------------------------------===//

absl::Status InferInstanceNorm(InferContext& ctx) {
  bool known;
  KILN_RETURN_IF_ERROR(CheckFloatInput(ctx, 0, &known));
  Dim c;
  if (known && ctx.input_type(0).shape().ranked()) {
    const Shape& s = ctx.input_type(0).shape();
    if (s.rank() < 3) return ctx.Error("input 0 has rank ", s.rank(), ", expected at least 3");
    c = s[1];
  }
  KILN_RETURN_IF_ERROR(CheckChannelParam(ctx, 1, c, "scale"));
  KILN_RETURN_IF_ERROR(CheckChannelParam(ctx, 2, c, "B"));
  ctx.set_output(0, known ? ctx.input_type(0) : Type());
  return absl::OkStatus();
}

absl::Status InstanceNormKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a float type");
  if (x.rank() < 3) return ctx.Error("input has rank ", x.rank(), ", expected at least 3");
  int64_t N = x.dim(0), C = x.dim(1), S = 1;
  for (int i = 2; i < x.rank(); ++i) S *= x.dim(i);
  KILN_ASSIGN_OR_RETURN(std::vector<double> scale, ChannelParam(ctx, 1, C, "scale"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> bias, ChannelParam(ctx, 2, C, "B"));
  double eps = ctx.node().GetFloat("epsilon", 1e-5f);
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  DispatchFloat(x.dtype(), [&]<typename T>() {
    std::vector<double> mean, var;
    ChannelMoments<T>(x.data<T>(), N, C, S, true, mean, var);
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> a(C), b(C);
      for (int64_t c = 0; c < C; ++c) {
        int64_t gi = n * C + c;
        a[c] = scale[c] / std::sqrt(var[gi] + eps);
        b[c] = bias[c] - mean[gi] * a[c];
      }
      ChannelAffine<T>(x.data<T>() + n * C * S, y.data<T>() + n * C * S, 1, C, S, a, b);
    }
  });
  return absl::OkStatus();
}

absl::Status UpgradeInstanceNorm(Graph&, Node* node, int64_t opset) {
  if (opset < 6) node->RemoveAttr("consumed_inputs");
  return absl::OkStatus();
}

//===--- LayerNormalization -------------------------------------------------===//

absl::StatusOr<DType> StashType(const Node& n) {
  auto dt = DTypeFromOnnx(n.GetInt("stash_type", 1));
  if (!dt || !IsFloat(*dt)) return InvalidArgument("stash_type must be a float data type");
  return *dt;
}

absl::Status InferLayerNorm(InferContext& ctx) {
  bool known;
  KILN_RETURN_IF_ERROR(CheckFloatInput(ctx, 0, &known));
  if (!ctx.has_input(1)) return ctx.Error("input 1 (Scale) is missing");
  auto stash = StashType(ctx.node());
  if (!stash.ok()) return ctx.Error(stash.status().message());
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) continue;
    const Type& t = ctx.input_type(i);
    if (t.is_tensor() && t.dtype() != DType::kUndefined && !IsFloat(t.dtype()))
      return ctx.Error("input ", i, " has dtype ", DTypeName(t.dtype()), ", expected a float type");
  }
  if (!known) {
    ctx.set_output(0, Type());
    for (int i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, Type::Tensor(*stash, Shape()));
    return absl::OkStatus();
  }
  const Type& x = ctx.input_type(0);
  ctx.set_output(0, x);
  Shape stat;
  if (x.shape().ranked()) {
    int r = x.shape().rank();
    int64_t axis_attr = ctx.node().GetInt("axis", -1);
    auto axis = NormalizeAxis(axis_attr, r);
    if (!axis.ok() || r == 0) return ctx.Error("axis ", axis_attr, " is out of range for rank ", r);
    DimVector d;
    for (int i = 0; i < r; ++i) d.push_back(i < *axis ? x.shape()[i] : Dim(1));
    stat = Shape(std::move(d));
    for (int i = 1; i <= 2; ++i) {
      if (!ctx.has_input(i)) continue;
      const Type& t = ctx.input_type(i);
      if (t.is_tensor() && t.shape().ranked() && t.shape().rank() > r - *axis)
        return ctx.Error("input ", i, " has rank ", t.shape().rank(), ", expected at most ", r - *axis);
    }
  }
  for (int i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, Type::Tensor(*stash, stat));
  return absl::OkStatus();
}

// Broadcasts a parameter tensor to `dims` (unidirectionally), flattened.
absl::StatusOr<std::vector<double>> BroadcastParam(const Tensor& t, const Dims& dims) {
  auto bd = BroadcastDims(t.dims(), dims);
  if (!bd.ok() || *bd != dims) return InvalidArgument("parameter shape does not broadcast to the normalized shape");
  std::vector<double> src = ToDoubleVector(t), out(NumElements(dims));
  ForEachBroadcast<1>(dims, std::array<Dims, 1>{BroadcastStrides(t.dims(), dims)},
                      [&](int64_t i, const std::array<int64_t, 1>& o) { out[i] = src[o[0]]; });
  return out;
}

absl::Status LayerNormKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a float type");
  int64_t axis_attr = ctx.node().GetInt("axis", -1);
  auto axis = NormalizeAxis(axis_attr, x.rank());
  if (!axis.ok() || x.rank() == 0) return ctx.Error("axis ", axis_attr, " is out of range for rank ", x.rank());
  auto stash = StashType(ctx.node());
  if (!stash.ok()) return ctx.Error(stash.status().message());
  double eps = ctx.node().GetFloat("epsilon", 1e-5f);
  Dims norm(x.dims().begin() + *axis, x.dims().end());
  int64_t rows = 1, cols = NumElements(norm);
  for (int i = 0; i < *axis; ++i) rows *= x.dim(i);
  if (!IsFloat(ctx.input(1).dtype())) return ctx.Error("Scale must be a float tensor");
  auto scale = BroadcastParam(ctx.input(1), norm);
  if (!scale.ok()) return ctx.Error("Scale: ", scale.status().message());
  std::vector<double> bias(cols, 0.0);
  if (ctx.has_input(2)) {
    if (!IsFloat(ctx.input(2).dtype())) return ctx.Error("B must be a float tensor");
    auto b = BroadcastParam(ctx.input(2), norm);
    if (!b.ok()) return ctx.Error("B: ", b.status().message());
    bias = *std::move(b);
  }
  Dims stat_dims = x.dims();
  for (size_t i = *axis; i < stat_dims.size(); ++i) stat_dims[i] = 1;
  std::vector<double> mean(rows), inv(rows);
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  DispatchFloat(x.dtype(), [&]<typename T>() {
    using M = MathT<T>;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = px + r * cols;
      double s = 0;
      for (int64_t j = 0; j < cols; ++j) s += static_cast<double>(row[j]);
      double m = cols ? s / static_cast<double>(cols) : 0;
      double v = 0;
      for (int64_t j = 0; j < cols; ++j) {
        double d = static_cast<double>(row[j]) - m;
        v += d * d;
      }
      v = cols ? v / static_cast<double>(cols) : 0;
      double is = 1.0 / std::sqrt(v + eps);
      mean[r] = m;
      inv[r] = is;
      T* out = py + r * cols;
      for (int64_t j = 0; j < cols; ++j)
        out[j] = static_cast<T>(static_cast<M>((static_cast<double>(row[j]) - m) * is * (*scale)[j] + bias[j]));
    }
  });
  for (int i = 1; i < ctx.num_outputs() && i < 3; ++i) {
    const std::vector<double>& src = i == 1 ? mean : inv;
    Tensor& o = ctx.AllocOutput(i, *stash, stat_dims);
    DispatchFloat(*stash, [&]<typename T>() {
      T* p = o.data<T>();
      for (int64_t r = 0; r < rows; ++r) p[r] = FromDouble<T>(src[r]);
    });
  }
  return absl::OkStatus();
}

//===--- LpNormalization ----------------------------------------------------===//

absl::Status InferLpNorm(InferContext& ctx) {
  int64_t p = ctx.node().GetInt("p", 2);
  if (p != 1 && p != 2) return ctx.Error("p must be 1 or 2, got ", p);
  return InferSoftmax(ctx);
}

absl::Status LpNormKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a float type");
  int64_t p = ctx.node().GetInt("p", 2);
  if (p != 1 && p != 2) return ctx.Error("p must be 1 or 2, got ", p);
  int64_t axis_attr = ctx.node().GetInt("axis", -1);
  auto axis = NormalizeAxis(axis_attr, x.rank());
  if (!axis.ok() || x.rank() == 0) return ctx.Error("axis ", axis_attr, " is out of range for rank ", x.rank());
  int64_t outer, n, inner;
  SplitAtAxis(x.dims(), *axis, &outer, &n, &inner);
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  DispatchFloat(x.dtype(), [&]<typename T>() {
    using M = MathT<T>;
    std::vector<double> norm(inner);
    for (int64_t o = 0; o < outer; ++o) {
      const T* px = x.data<T>() + o * n * inner;
      T* py = y.data<T>() + o * n * inner;
      std::fill(norm.begin(), norm.end(), 0.0);
      for (int64_t k = 0; k < n; ++k)
        for (int64_t j = 0; j < inner; ++j) {
          double v = static_cast<double>(px[k * inner + j]);
          norm[j] += p == 1 ? std::fabs(v) : v * v;
        }
      if (p == 2)
        for (double& v : norm) v = std::sqrt(v);
      for (int64_t k = 0; k < n; ++k)
        for (int64_t j = 0; j < inner; ++j)
          py[k * inner + j] = static_cast<T>(static_cast<M>(static_cast<double>(px[k * inner + j]) / norm[j]));
    }
  });
  return absl::OkStatus();
}

//===--- LRN ----------------------------------------------------------------===//

absl::Status InferLrn(InferContext& ctx) {
  bool known;
  KILN_RETURN_IF_ERROR(CheckFloatInput(ctx, 0, &known));
  if (ctx.node().GetInt("size", 0) <= 0) return ctx.Error("size must be positive");
  if (known && ctx.input_type(0).shape().ranked() && ctx.input_type(0).shape().rank() < 2)
    return ctx.Error("input 0 has rank ", ctx.input_type(0).shape().rank(), ", expected at least 2");
  ctx.set_output(0, known ? ctx.input_type(0) : Type());
  return absl::OkStatus();
}

absl::Status LrnKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a float type");
  if (x.rank() < 2) return ctx.Error("input has rank ", x.rank(), ", expected at least 2");
  int64_t size = ctx.node().GetInt("size", 0);
  if (size <= 0) return ctx.Error("size must be positive");
  double alpha = ctx.node().GetFloat("alpha", 1e-4f);
  double beta = ctx.node().GetFloat("beta", 0.75f);
  double bias = ctx.node().GetFloat("bias", 1.0f);
  int64_t N = x.dim(0), C = x.dim(1), S = 1;
  for (int i = 2; i < x.rank(); ++i) S *= x.dim(i);
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo;  // floor and ceil of (size-1)/2
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  DispatchFloat(x.dtype(), [&]<typename T>() {
    using M = MathT<T>;
    std::vector<double> sq(C * S), acc(S);
    for (int64_t n = 0; n < N; ++n) {
      const T* px = x.data<T>() + n * C * S;
      T* py = y.data<T>() + n * C * S;
      for (int64_t i = 0; i < C * S; ++i) {
        double v = static_cast<double>(px[i]);
        sq[i] = v * v;
      }
      for (int64_t c = 0; c < C; ++c) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t k = std::max<int64_t>(0, c - lo); k <= std::min(C - 1, c + hi); ++k)
          for (int64_t s = 0; s < S; ++s) acc[s] += sq[k * S + s];
        for (int64_t s = 0; s < S; ++s) {
          double d = std::pow(bias + alpha / static_cast<double>(size) * acc[s], beta);
          py[c * S + s] = static_cast<T>(static_cast<M>(static_cast<double>(px[c * S + s]) / d));
        }
      }
    }
  });
  return absl::OkStatus();
}

OpCost LrnCost(const Node& n) { return PerInputCost(n, static_cast<double>(n.GetInt("size", 1)) + 4); }

//===--- MeanVarianceNormalization ------------------------------------------===//

absl::Status InferMvn(InferContext& ctx) {
  bool known;
  KILN_RETURN_IF_ERROR(CheckFloatInput(ctx, 0, &known));
  if (known && ctx.input_type(0).shape().ranked()) {
    auto axes = NormalizeAxes(ctx.node().GetInts("axes", {0, 2, 3}), ctx.input_type(0).shape().rank());
    if (!axes.ok()) return ctx.Error(axes.status().message());
  }
  ctx.set_output(0, known ? ctx.input_type(0) : Type());
  return absl::OkStatus();
}

absl::Status MvnKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return ctx.Error("input has dtype ", DTypeName(x.dtype()), ", expected a float type");
  auto axes = NormalizeAxes(ctx.node().GetInts("axes", {0, 2, 3}), x.rank());
  if (!axes.ok()) return ctx.Error(axes.status().message());
  int rank = x.rank();
  Dims keep = x.dims();
  std::vector<bool> reduced(rank, false);
  for (int a : *axes) {
    keep[a] = 1;
    reduced[a] = true;
  }
  Dims ks = StridesOf(keep), ostr(rank);
  for (int i = 0; i < rank; ++i) ostr[i] = reduced[i] ? 0 : ks[i];
  int64_t groups = NumElements(keep);
  double count = groups ? static_cast<double>(x.numel()) / static_cast<double>(groups) : 0;
  std::array<Dims, 1> strides{ostr};
  Tensor& y = ctx.AllocOutput(0, x.dtype(), x.dims());
  DispatchFloat(x.dtype(), [&]<typename T>() {
    using M = MathT<T>;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    std::vector<double> mean(groups, 0.0), var(groups, 0.0);
    ForEachBroadcast<1>(x.dims(), strides, [&](int64_t i, const std::array<int64_t, 1>& o) {
      mean[o[0]] += static_cast<double>(px[i]);
    });
    for (double& m : mean) m /= count;
    ForEachBroadcast<1>(x.dims(), strides, [&](int64_t i, const std::array<int64_t, 1>& o) {
      double d = static_cast<double>(px[i]) - mean[o[0]];
      var[o[0]] += d * d;
    });
    for (double& v : var) v = std::sqrt(v / count) + 1e-9;
    ForEachBroadcast<1>(x.dims(), strides, [&](int64_t i, const std::array<int64_t, 1>& o) {
      py[i] = static_cast<T>(static_cast<M>((static_cast<double>(px[i]) - mean[o[0]]) / var[o[0]]));
    });
  });
  return absl::OkStatus();
}

OpCost NormCost(const Node& n) { return PerInputCost(n, 6); }

}  // namespace

void RegisterNormalizationOps(OpRegistry& r) {
  r.Register("Softmax").Inputs(1).Outputs(1).Class(OpClass::kNormalization)
      .Attr("axis", AttrKind::kInt, "-1")
      .Infer(InferSoftmax).Kernel(SoftmaxKernel).Cost(SoftmaxCost).Upgrade(UpgradeCoercedAxisOp);
  r.Register("LogSoftmax").Inputs(1).Outputs(1).Class(OpClass::kNormalization)
      .Attr("axis", AttrKind::kInt, "-1")
      .Infer(InferSoftmax).Kernel(LogSoftmaxKernel).Cost(SoftmaxCost).Upgrade(UpgradeCoercedAxisOp);
  r.Register("BatchNormalization").Inputs(5).Outputs(1, 3).Class(OpClass::kNormalization)
      .Attr("epsilon", AttrKind::kFloat, "1e-5")
      .Attr("momentum", AttrKind::kFloat, "0.9")
      .Attr("training_mode", AttrKind::kInt, "0")
      .Infer(InferBatchNorm).Kernel(BatchNormKernel).Cost(BatchNormCost).Upgrade(UpgradeBatchNorm);
  r.Register("InstanceNormalization").Inputs(3).Outputs(1).Class(OpClass::kNormalization)
      .Attr("epsilon", AttrKind::kFloat, "1e-5")
      .Infer(InferInstanceNorm).Kernel(InstanceNormKernel).Cost(NormCost).Upgrade(UpgradeInstanceNorm);
  r.Register("LayerNormalization").Inputs(2, 3).Outputs(1, 3).Class(OpClass::kNormalization).Since(17)
      .Attr("axis", AttrKind::kInt, "-1")
      .Attr("epsilon", AttrKind::kFloat, "1e-5")
      .Attr("stash_type", AttrKind::kInt, "1 (f32)")
      .Infer(InferLayerNorm).Kernel(LayerNormKernel).Cost(NormCost);
  r.Register("LpNormalization").Inputs(1).Outputs(1).Class(OpClass::kNormalization)
      .Attr("axis", AttrKind::kInt, "-1")
      .Attr("p", AttrKind::kInt, "2")
      .Infer(InferLpNorm).Kernel(LpNormKernel).Cost(NormCost);
  r.Register("LRN").Inputs(1).Outputs(1).Class(OpClass::kNormalization)
      .RequiredAttr("size", AttrKind::kInt)
      .Attr("alpha", AttrKind::kFloat, "1e-4")
      .Attr("beta", AttrKind::kFloat, "0.75")
      .Attr("bias", AttrKind::kFloat, "1.0")
      .Infer(InferLrn).Kernel(LrnKernel).Cost(LrnCost);
  r.Register("MeanVarianceNormalization").Inputs(1).Outputs(1).Class(OpClass::kNormalization).Since(9)
      .Attr("axes", AttrKind::kInts, "[0, 2, 3]")
      .Infer(InferMvn).Kernel(MvnKernel).Cost(NormCost);
}

}  // namespace kiln
