//===- vector_shared_test.cc - Single ops through the shared vector lowering ===//
//
// A single elementwise or row op has two kernels on npusim: its family's own
// (vector_elementwise.cc, vector_rows.cc) and the shared lowering's steps
// run on the same skeletons (vec::GenerateFromTileSteps, as a fused group's
// are). GenerateVectorKernel takes the shared one where its estimate is no
// higher. Here both run on the SystemC model for representative ops and
// shapes: the shared kernel matches the reference, and the chosen kernel
// is never slower than npusim's own. KILN_VEC_SHARED_TABLE=1 prints the
// cycles (the table of docs/npusim-kernels.md).
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/ops/shape_inference.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/vector.h"
#include "target/npusim/kernels/vector_internal.h"
#include "tests/npusim/kernel_harness.h"

namespace kiln::testing {
namespace {

using target::npusim::GeneratedKernel;
using target::npusim::GenerateVectorKernel;
using target::npusim::KernelRequest;
namespace vec = target::npusim::vec;

using Attr = std::function<void(Node*)>;

struct Case {
  std::string op;
  DType dt;
  std::vector<Dims> ins;     // inputs; all but the first may be constants (see consts)
  std::vector<bool> consts;  // per input
  std::vector<Attr> attrs = {};
  std::string domain = "";
  double lo = -2, hi = 2;
};

struct OneNode {
  Graph g;
  Node* node = nullptr;
  absl::flat_hash_map<const Value*, Tensor> feeds;
  std::string label;
};

std::unique_ptr<OneNode> Make(const Case& c) {
  auto t = std::make_unique<OneNode>();
  std::vector<Value*> vs;
  std::vector<std::string> shapes;
  for (size_t i = 0; i < c.ins.size(); ++i) {
    // ReduceSum's axes: the constant [-1].
    Tensor x = c.op == "ReduceSum" && i == 1 ? Tensor::FromVector<int64_t>({-1}, {1})
                                             : UniformTensor(c.dt, c.ins[i], c.lo, c.hi, 7 + static_cast<uint32_t>(i));
    if (i < c.consts.size() && c.consts[i]) {
      vs.push_back(t->g.AddConstant("c" + std::to_string(i), x));
    } else {
      Value* v = t->g.AddInput("x" + std::to_string(i), Type::Of(x));
      t->feeds[v] = x;
      vs.push_back(v);
    }
    shapes.push_back(absl::StrCat("[", absl::StrJoin(c.ins[i], ","), "]"));
  }
  t->node = t->g.AddNode(c.op, vs, 1, c.domain);
  for (const Attr& a : c.attrs) a(t->node);
  t->g.AddOutput(t->node->output(0));
  EXPECT_TRUE(InferShapes(t->g).ok());
  t->label = absl::StrCat(c.op, " ", DTypeName(c.dt), " ", absl::StrJoin(shapes, " "));
  return t;
}

int64_t Simulate(const GeneratedKernel& k, OneNode& t, const sim::Machine& m, double tol) {
  auto run = RunKernelOnSim(k, *t.node, t.feeds, m);
  EXPECT_TRUE(run.ok()) << t.label << ": " << run.status() << "\n" << k.plan;
  if (!run.ok()) return 0;
  auto ref = RunNodeOnReference(*t.node, t.feeds);
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (!ref.ok()) return 0;
  EXPECT_LE(MaxRelativeError(run->outputs[0], (*ref)[0]), tol) << t.label << " plan: " << k.plan;
  return static_cast<int64_t>(run->stats.total_cycles);
}

Attr AInt(std::string k, int64_t v) { return [=](Node* n) { n->SetAttr(k, Attribute::Int(v)); }; }
Attr AInts(std::string k, std::vector<int64_t> v) { return [=](Node* n) { n->SetAttr(k, Attribute::Ints(v)); }; }

std::vector<Case> Cases() {
  std::vector<Case> cs;
  for (DType dt : {DType::kF32, DType::kF16}) {
    for (const Dims& d : std::vector<Dims>{{4096}, {256, 1024}}) {
      cs.push_back({"Relu", dt, {d}, {}});
      cs.push_back({"Sigmoid", dt, {d}, {}});
      cs.push_back({"Tanh", dt, {d}, {}});
      cs.push_back({"Exp", dt, {d}, {}});
      cs.push_back({"Gelu", dt, {d}, {}, {}, "kiln"});
      cs.push_back({"Add", dt, {d, d}, {}});
      cs.push_back({"Mul", dt, {d, d}, {}});
      cs.push_back({"Div", dt, {d, d}, {}, {}, "", 0.5, 2});
      cs.push_back({"Add", dt, {d, {1}}, {false, true}});
    }
    cs.push_back({"Add", dt, {{256, 1024}, {1024}}, {false, true}});
    cs.push_back({"Mul", dt, {{256, 1024}, {256, 1}}, {}});
    for (const Dims& d : std::vector<Dims>{{256, 32}, {64, 128}, {64, 1024}}) {
      cs.push_back({"Softmax", dt, {d}, {}, {AInt("axis", -1)}});
      cs.push_back({"LayerNormalization", dt, {d, {d[1]}, {d[1]}}, {false, true, true}, {AInt("axis", -1)}});
      cs.push_back({"ReduceSum", dt, {d, {1}}, {false, true}});
      cs.push_back({"ReduceMean", dt, {d}, {}, {AInts("axes", {-1})}});
      cs.push_back({"ReduceMax", dt, {d}, {}, {AInts("axes", {-1})}});
    }
  }
  return cs;
}

TEST(VectorShared, ChosenKernelIsNeverSlowerThanNpusimsOwnAndMissesNoGain) {
  const sim::Machine& m = sim::DefaultMachine();
  const bool table = std::getenv("KILN_VEC_SHARED_TABLE") != nullptr;
  if (table) std::printf("| op | own est | own cycles | shared est | shared cycles | chosen |\n");
  for (const Case& c : Cases()) {
    auto t = Make(c);
    const double tol = c.dt == DType::kF32 ? 1e-4 : 1e-2;
    KernelRequest req{t->node, &m};
    auto own = vec::GenerateOwn(req);
    ASSERT_TRUE(own.ok()) << t->label << ": " << own.status();
    auto shared = vec::GenerateFromTileSteps(req);
    auto chosen = GenerateVectorKernel(req);
    ASSERT_TRUE(chosen.ok()) << t->label << ": " << chosen.status();
    const int64_t own_cycles = Simulate(*own, *t, m, tol);
    int64_t shared_cycles = -1;
    if (shared.ok()) shared_cycles = Simulate(*shared, *t, m, tol);
    const bool took_shared = shared.ok() && chosen->plan == shared->plan;
    if (table)
      std::printf("| %s | %.0f | %lld | %s | %s | %s |\n", t->label.c_str(), own->estimated_cycles,
                  static_cast<long long>(own_cycles),
                  shared.ok() ? absl::StrCat(static_cast<int64_t>(shared->estimated_cycles)).c_str() : "-",
                  shared.ok() ? absl::StrCat(shared_cycles).c_str() : std::string(shared.status().message()).c_str(),
                  took_shared ? "shared" : "own");
    if (took_shared) {
      EXPECT_LE(shared_cycles, own_cycles) << t->label << ": " << shared->plan;
    }
    // No missed gains: a shared kernel clearly faster than the own one is
    // the one chosen (the estimates see what makes it faster).
    if (shared.ok() && shared_cycles < 0.9 * static_cast<double>(own_cycles)) {
      EXPECT_TRUE(took_shared) << t->label << ": own " << own_cycles << " cycles (est " << own->estimated_cycles
                               << "), shared " << shared_cycles << " (est " << shared->estimated_cycles << ")";
    }
  }
}

}  // namespace
}  // namespace kiln::testing
