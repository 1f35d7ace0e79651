//===- cube_fused_test.cc - kiln.Fused GEMM + bias + Relu on the cube -----===//
#include <gtest/gtest.h>

#include "graph/ops/shape_inference.h"
#include "graph/passes/form_fusion_groups.h"
#include "graph/support/float16.h"
#include "graph/support/status.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/cube.h"
#include "tests/npusim/kernel_harness.h"

namespace kiln::testing {
namespace {

// kiln.Fused(a, b) { t = MatMul(a, b) [* Gemm alpha]; t = Add(t, bias); Relu(t) }
// with bias a body constant.
void RunFused(DType dt, bool gemm, float alpha, bool add, bool relu, Dims bias_dims) {
  SCOPED_TRACE(::testing::Message() << DTypeName(dt) << (gemm ? " Gemm" : " MatMul") << " alpha " << alpha
                                    << " add " << add << " relu " << relu);
  const int64_t M = 40, K = 72, N = 50;
  const Dims b_dims = gemm ? Dims{N, K} : Dims{K, N};  // a Gemm's B transposed (transB)
  Graph g;
  Value* a = g.AddInput("a", Type::Tensor(dt, Shape::Static({M, K})));
  Value* b = g.AddInput("b", Type::Tensor(dt, Shape::Static(b_dims)));
  Node* fused = g.AddNode("Fused", {a, b}, 1, "kiln");
  auto body = std::make_unique<Graph>("body", &g);
  Value* ba = body->AddInput("ba", Type::Tensor(dt, Shape::Static({M, K})));
  Value* bb = body->AddInput("bb", Type::Tensor(dt, Shape::Static(b_dims)));
  Node* mm = body->AddNode(gemm ? "Gemm" : "MatMul", {ba, bb}, 1);
  if (gemm) {
    mm->SetAttr("alpha", Attribute::Float(alpha));
    mm->SetAttr("transB", Attribute::Int(1));
  }
  Type out = Type::Tensor(dt, Shape::Static({M, N}));
  mm->output(0)->set_type(out);
  Value* cur = mm->output(0);
  if (add) {
    Value* bias = body->AddConstant("bias", RandomTensor(dt, bias_dims, 7));
    Node* n = body->AddNode("Add", {bias, cur}, 1);
    n->output(0)->set_type(out);
    cur = n->output(0);
  }
  if (relu) {
    Node* n = body->AddNode("Relu", {cur}, 1);
    n->output(0)->set_type(out);
    cur = n->output(0);
  }
  body->AddOutput(cur);
  fused->SetAttr("body", Attribute::GraphValue(std::move(body)));
  fused->output(0)->set_type(out);
  absl::flat_hash_map<const Value*, Tensor> inputs = {{a, RandomTensor(dt, {M, K}, 1)}, {b, RandomTensor(dt, b_dims, 2)}};
  sim::Machine m = sim::DefaultMachine();
  target::npusim::KernelRequest req;
  req.node = fused;
  req.machine = &m;
  auto k = target::npusim::GenerateCubeKernel(req);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->constant_args.size(), add ? 1u : 0u);
  auto run = RunKernelOnSim(*k, *fused, inputs, m);
  ASSERT_TRUE(run.ok()) << run.status() << "\n" << k->plan;
  auto ref = RunNodeOnReference(*fused, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_LE(MaxRelativeError(run->outputs[0], (*ref)[0]), dt == DType::kF32 ? 1e-4 : 1e-2) << k->plan;
}

TEST(CubeFused, GemmWithBiasAndRelu) {
  for (DType dt : {DType::kF16, DType::kBF16, DType::kF32}) {
    RunFused(dt, false, 1, true, true, {50});
    RunFused(dt, false, 1, true, false, {1, 50});
    RunFused(dt, false, 1, false, true, {});
    RunFused(dt, true, 0.5f, true, true, {50});  // alpha: the UB epilogue
    RunFused(dt, false, 1, true, true, {1});
  }
}

// MatMul(op(A), op(B)) * scale [+ row bias], op a Transpose of the last two
// axes or nothing, grouped by the optimizer's fusion pass: the GEMM reads the
// untransposed operands as transposed ones.
struct TransposeCase {
  Dims a, b;  // as the graph's inputs hold them
  bool ta, tb;
  float scale;
  bool bias;
  bool cast = false;      // then a Cast to f32 (f16 operands)
  bool residual = false;  // an Add of a graph input of the result's type, after the bias
  bool wide_residual = false;  // the residual added after the Cast, in f32
};

absl::StatusOr<std::string> RunTransposed(DType dt, const TransposeCase& c) {
  Graph g;
  Value* a = g.AddInput("a", Type::Tensor(dt, Shape::Static(c.a)));
  Value* b = g.AddInput("b", Type::Tensor(dt, Shape::Static(c.b)));
  auto transpose = [&](Value* v, bool t) {
    if (!t) return v;
    Node* n = g.AddNode("Transpose", {v}, 1);
    std::vector<int64_t> perm;
    for (size_t i = 0; i < v->type().shape().rank(); ++i) perm.push_back(static_cast<int64_t>(i));
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    n->SetAttr("perm", Attribute::Ints(perm));
    return n->output(0);
  };
  Value* cur = g.AddNode("MatMul", {transpose(a, c.ta), transpose(b, c.tb)}, 1)->output(0);
  if (c.scale != 1.0f) {
    Tensor scale = dt == DType::kF16 ? Tensor::Scalar(Half(c.scale)) : Tensor::Scalar(c.scale);
    cur = g.AddNode("Mul", {cur, g.AddConstant("scale", scale)}, 1)->output(0);
  }
  KILN_RETURN_IF_ERROR(InferShapes(g));
  if (c.bias) {
    int64_t n = cur->type().shape().StaticDims().back();
    cur = g.AddNode("Add", {cur, g.AddConstant("bias", RandomTensor(dt, {n}, 7))}, 1)->output(0);
  }
  Value* r = nullptr;
  if (c.residual) {
    KILN_RETURN_IF_ERROR(InferShapes(g));
    r = g.AddInput("r", cur->type());
    cur = g.AddNode("Add", {r, cur}, 1)->output(0);
  }
  if (c.cast && dt != DType::kF32) {
    Node* cast = g.AddNode("Cast", {cur}, 1);
    cast->SetAttr("to", Attribute::Int(1));
    cur = cast->output(0);
  }
  if (c.wide_residual) {
    KILN_RETURN_IF_ERROR(InferShapes(g));
    r = g.AddInput("r", cur->type());
    cur = g.AddNode("Add", {cur, r}, 1)->output(0);
  }
  g.AddOutput(cur);
  KILN_RETURN_IF_ERROR(InferShapes(g));
  FormFusionGroups(g);
  Node* fused = nullptr;
  for (Node* n : g.nodes())
    if (n->op() == "Fused") fused = n;
  if (!fused) return absl::InternalError("no group formed");
  sim::Machine m = sim::DefaultMachine();
  target::npusim::KernelRequest req;
  req.node = fused;
  req.machine = &m;
  KILN_ASSIGN_OR_RETURN(target::npusim::GeneratedKernel k, target::npusim::GenerateCubeKernel(req));
  absl::flat_hash_map<const Value*, Tensor> inputs = {{a, RandomTensor(dt, c.a, 1)}, {b, RandomTensor(dt, c.b, 2)}};
  if (r) inputs[r] = RandomTensor(r->type().dtype(), r->type().shape().StaticDims(), 3);
  KILN_ASSIGN_OR_RETURN(auto run, RunKernelOnSim(k, *fused, inputs, m));
  KILN_ASSIGN_OR_RETURN(auto ref, RunNodeOnReference(*fused, inputs));
  EXPECT_LE(MaxRelativeError(run.outputs[0], ref[0]), dt == DType::kF32 ? 1e-4 : 1e-2) << k.plan;
  return k.plan;
}

TEST(CubeFused, TransposedOperandsAndScale) {
  const std::vector<TransposeCase> cases = {
      {{2, 3, 40, 24}, {2, 3, 50, 24}, false, true, 0.125f, false},  // attention's Q K^T, scaled
      {{24, 40}, {24, 50}, true, false, 1.0f, true},                  // A^T B + bias
      {{2, 24, 40}, {2, 50, 24}, true, true, 0.5f, true},             // both, batched
      {{40, 24}, {3, 50, 24}, false, true, 1.0f, false},              // A broadcast over B's batch
      {{40, 24}, {24, 50}, false, false, 1.0f, true, true},           // + bias, written as f32
      {{4, 24}, {24, 50}, false, false, 1.0f, true, true},            // narrower than a tile: through UB
      {{2, 3, 40, 24}, {2, 3, 50, 24}, false, true, 0.125f, false, true},
      {{40, 24}, {24, 50}, false, false, 1.0f, true, false, true},    // + bias + residual
      {{2, 40, 24}, {24, 50}, false, false, 1.0f, false, true, true}, // a tall GEMM, residual, f32 out
      {{2, 3, 40, 24}, {2, 3, 50, 24}, false, true, 0.5f, true, false, true},
      {{40, 24}, {24, 50}, false, false, 1.0f, true, true, false, true},  // + bias, to f32, + an f32 residual
  };
  for (DType dt : {DType::kF16, DType::kF32}) {
    for (const TransposeCase& c : cases) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " A " << c.a.size() << "-D" << (c.ta ? " transposed" : "")
                                        << ", B " << c.b.size() << "-D" << (c.tb ? " transposed" : ""));
      absl::StatusOr<std::string> plan = RunTransposed(dt, c);
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(plan->find("A read transposed") != std::string::npos, c.ta) << *plan;
      EXPECT_EQ(plan->find("B read transposed") != std::string::npos, c.tb) << *plan;
      EXPECT_EQ(plan->find("scaled by") != std::string::npos, c.scale != 1.0f) << *plan;
      EXPECT_EQ(plan->find("writes f32") != std::string::npos, c.cast && dt != DType::kF32) << *plan;
      EXPECT_EQ(plan->find("residual") != std::string::npos, c.residual || c.wide_residual) << *plan;
    }
  }
}

// A transposed A whose batches would share B becomes one tall GEMM of A's
// rows, which a transposed A is not: the cube declines (the compile then
// splits the group back).
TEST(CubeFused, TransposedABatchesSharingBAreDeclined) {
  absl::StatusOr<std::string> plan = RunTransposed(DType::kF16, {{3, 24, 40}, {24, 50}, true, false, 1.0f, false});
  EXPECT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("strided A"), std::string::npos) << plan.status();
}

// Attention's heads read where the projection wrote them: Q [B, S, H, D]
// through Transpose(0, 2, 1, 3) is A with rows H*D apart, K through that
// and a swap of the last two axes is a transposed B, V through the head
// transpose a B with rows H*D apart. Each GEMM's group takes its
// Transposes, and the kernel matches the reference.
TEST(CubeFused, HeadsAreStridedViews) {
  for (DType dt : {DType::kF16, DType::kF32}) {
    SCOPED_TRACE(DTypeName(dt));
    const int64_t B = 2, S = 40, H = 3, D = 24;
    Graph g;
    Value* q = g.AddInput("q", Type::Tensor(dt, Shape::Static({B, S, H, D})));
    Value* k = g.AddInput("k", Type::Tensor(dt, Shape::Static({B, S, H, D})));
    Value* v = g.AddInput("v", Type::Tensor(dt, Shape::Static({B, S, H, D})));
    Value* p = g.AddInput("p", Type::Tensor(dt, Shape::Static({B, H, S, S})));
    auto transpose = [&](Value* x, std::vector<int64_t> perm) {
      Node* n = g.AddNode("Transpose", {x}, 1);
      n->SetAttr("perm", Attribute::Ints(perm));
      return n->output(0);
    };
    Value* kt = transpose(transpose(k, {0, 2, 1, 3}), {0, 1, 3, 2});
    g.AddOutput(g.AddNode("MatMul", {transpose(q, {0, 2, 1, 3}), kt}, 1)->output(0));
    g.AddOutput(g.AddNode("MatMul", {p, transpose(v, {0, 2, 1, 3})}, 1)->output(0));
    ASSERT_TRUE(InferShapes(g).ok());
    FormFusionGroups(g);
    absl::flat_hash_map<const Value*, Tensor> inputs = {{q, RandomTensor(dt, {B, S, H, D}, 1)},
                                                        {k, RandomTensor(dt, {B, S, H, D}, 2)},
                                                        {v, RandomTensor(dt, {B, S, H, D}, 3)},
                                                        {p, RandomTensor(dt, {B, H, S, S}, 4)}};
    sim::Machine m = sim::DefaultMachine();
    int groups = 0;
    for (Node* n : g.nodes()) {
      ASSERT_NE(n->op(), "Transpose");
      if (n->op() != "Fused") continue;
      ++groups;
      target::npusim::KernelRequest req;
      req.node = n;
      req.machine = &m;
      auto kernel = target::npusim::GenerateCubeKernel(req);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      absl::flat_hash_map<const Value*, Tensor> in;
      for (const Value* x : n->inputs()) in[x] = inputs.at(x);
      auto run = RunKernelOnSim(*kernel, *n, in, m);
      ASSERT_TRUE(run.ok()) << run.status();
      auto ref = RunNodeOnReference(*n, in);
      ASSERT_TRUE(ref.ok()) << ref.status();
      EXPECT_LE(MaxRelativeError(run->outputs[0], (*ref)[0]), dt == DType::kF32 ? 1e-4 : 1e-2) << kernel->plan;
    }
    EXPECT_EQ(groups, 2);
  }
}

}  // namespace
}  // namespace kiln::testing
