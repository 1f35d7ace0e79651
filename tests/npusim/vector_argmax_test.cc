//===- vector_argmax_test.cc - ArgMax / ArgMin on the vector unit ----------===//
//
// target/npusim/kernels/vector_argmax.cc against the reference kernel: a
// vocabulary-sized row (50,257 logits, several chunks and a ragged last
// repeat), ties (the first index, or the last with select_last_index),
// several rows over several blocks, f16 input, ArgMin; and the axes it does
// not take are refused.
//
//===----------------------------------------------------------------------===//
#include <cmath>

#include <gtest/gtest.h>

#include "absl/strings/str_join.h"

#include "graph/support/status.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/vector.h"
#include "tests/npusim/kernel_harness.h"

namespace kiln::testing {
namespace {

struct Case {
  Dims dims;
  DType dt = DType::kF32;
  const char* op = "ArgMax";
  int64_t axis = -1;
  bool last = false;
  bool ties = false;  // values on a coarse grid, so the extreme repeats
};

absl::Status Check(const Case& c) {
  SCOPED_TRACE(::testing::Message() << c.op << " " << DTypeName(c.dt) << " [" << absl::StrJoin(c.dims, ",")
                                    << "] last " << c.last << " ties " << c.ties);
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(c.dt, Shape::Static(c.dims)));
  Node* n = g.AddNode(c.op, {x}, 1);
  n->SetAttr("axis", Attribute::Int(c.axis));
  n->SetAttr("keepdims", Attribute::Int(0));
  if (c.last) n->SetAttr("select_last_index", Attribute::Int(1));
  Dims out(c.dims.begin(), c.dims.end() - 1);
  n->output(0)->set_type(Type::Tensor(DType::kI64, Shape::Static(out)));
  Tensor t = c.ties ? UniformTensor(c.dt, c.dims, 0, 8, 5) : RandomTensor(c.dt, c.dims, 5);
  if (c.ties) {
    Tensor f(DType::kF32, c.dims);
    for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = std::floor(static_cast<float>(t.GetDouble(i)));
    t = CastTensor(f, c.dt);
  }
  absl::flat_hash_map<const Value*, Tensor> inputs = {{x, t}};
  sim::Machine m = sim::DefaultMachine();
  target::npusim::KernelRequest req;
  req.node = n;
  req.machine = &m;
  KILN_ASSIGN_OR_RETURN(auto k, target::npusim::GenerateVectorKernel(req));
  KILN_ASSIGN_OR_RETURN(auto run, RunKernelOnSim(k, *n, inputs, m));
  KILN_ASSIGN_OR_RETURN(auto want, RunNodeOnReference(*n, inputs));
  EXPECT_TRUE(run.outputs[0].Equals(want[0])) << k.plan;
  return absl::OkStatus();
}

TEST(VectorArgMax, MatchesTheReference) {
  EXPECT_TRUE(Check({.dims = {1, 1, 50257}}).ok());
  EXPECT_TRUE(Check({.dims = {5, 300}, .ties = true}).ok());
  EXPECT_TRUE(Check({.dims = {5, 300}, .last = true, .ties = true}).ok());
  EXPECT_TRUE(Check({.dims = {3, 9000}, .dt = DType::kF16, .ties = true}).ok());
  EXPECT_TRUE(Check({.dims = {40, 64}, .op = "ArgMin"}).ok());
  EXPECT_TRUE(Check({.dims = {2, 100}, .op = "ArgMin", .last = true, .ties = true}).ok());
}

TEST(VectorArgMax, RefusesOtherAxes) {
  absl::Status s = Check({.dims = {4, 8}, .axis = 0});
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
}

}  // namespace
}  // namespace kiln::testing
