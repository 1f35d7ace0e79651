//===- collective.cc - kiln's collective operators (domain "kiln") --------===//
//
// kiln.AllReduce(x1, ..., xk) -> (y1, ..., yk), attribute `replicas` = N:
// each yi is the mean of xi over the N replicas of a data-parallel step
// (every replica runs the same graph on its own shard of the batch). One
// node per gradient, as the training-step pass inserts them; a target
// groups them into buckets (one collective for several tensors).
//
// A graph runs here as one replica among peers that hold the same data
// (the reference executor, the constant folder), so the mean is the input
// itself. A target that runs real peers (npusim with sharded inputs)
// computes the mean over their values instead.
//
//===----------------------------------------------------------------------===//
#include <string>

#include "absl/strings/str_cat.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

absl::Status CheckAllReduce(const Node& n, const std::string& label) {
  if (n.num_outputs() != n.num_inputs())
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", n.num_inputs(), " inputs but ", n.num_outputs(),
                                                   " outputs (one output per input)"));
  int64_t replicas = n.GetInt("replicas", 0);
  if (replicas < 1) return absl::InvalidArgumentError(absl::StrCat(label, ": replicas must be at least 1, not ", replicas));
  return absl::OkStatus();
}

absl::Status InferAllReduce(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckAllReduce(ctx.node(), ctx.NodeLabel()));
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
    const Type& t = ctx.input_type(i);
    if (t.is_tensor() && !IsFloat(t.dtype()))
      return ctx.Error("input ", i, " is ", DTypeName(t.dtype()), ": the mean over replicas needs a float tensor");
    ctx.set_output(i, t);
  }
  return absl::OkStatus();
}

absl::Status AllReduceKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckAllReduce(ctx.node(), ctx.NodeLabel()));
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.Error("input ", i, " is missing");
    ctx.set_output(i, ctx.input(i));
  }
  return absl::OkStatus();
}

// What moves: each replica sends and receives about twice its bytes
// (reduce-scatter, then all-gather) and adds one element per element.
OpCost AllReduceCost(const Node& n) {
  OpCost c;
  for (const Value* v : n.inputs()) {
    if (!v || !v->type().is_tensor()) continue;
    int64_t e = v->type().shape().NumElements();
    if (e <= 0) continue;
    double bytes = static_cast<double>(e) * static_cast<double>(DTypeSize(v->type().dtype()));
    c.flops += static_cast<double>(e);
    c.bytes_read += bytes;
    c.bytes_written += bytes;
  }
  return c;
}

}  // namespace

void RegisterCollectiveOps(OpRegistry& r) {
  r.Register("AllReduce", "kiln").Inputs(1, -1).Outputs(1, -1).Class(OpClass::kOther)
      .RequiredAttr("replicas", AttrKind::kInt)
      .Infer(InferAllReduce).Kernel(AllReduceKernel).Cost(AllReduceCost);
}

}  // namespace kiln
