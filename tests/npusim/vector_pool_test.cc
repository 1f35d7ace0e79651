//===- vector_pool_test.cc - npusim pooling, compare/select and broadcasting ===//
//
// MaxPool / AveragePool (padding, strides, dilations, ceil_mode,
// count_include_pad), comparisons producing bool tensors, Where and Not /
// And / Or, reductions over outer axes, and general broadcasting, each run
// on the SystemC model against the reference kernels. Shapes are small:
// ragged rows, several planes per tile, several blocks.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <cmath>
#include <random>

#include "absl/strings/str_join.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/shape_inference.h"
#include "sim/isa/asm.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/vector.h"
#include "tests/npusim/kernel_harness.h"

namespace kiln::testing {
namespace {

using target::npusim::GenerateVectorKernel;
using target::npusim::KernelRequest;

// Values from a small set, so comparisons see ties.
Tensor Coarse(DType dt, const Dims& dims, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> u(-3, 3);
  Tensor f(DType::kF32, dims);
  for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = 0.5f * static_cast<float>(u(gen));
  return dt == DType::kF32 ? f : CastTensor(f, dt);
}

Tensor RandomBool(const Dims& dims, uint32_t seed) {
  std::mt19937 gen(seed);
  Tensor t(DType::kBool, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<bool>()[i] = (gen() & 1) != 0;
  return t;
}

using Attr = std::function<void(Node*)>;
Attr AInt(std::string k, int64_t v) { return [=](Node* n) { n->SetAttr(k, Attribute::Int(v)); }; }
Attr AInts(std::string k, std::vector<int64_t> v) { return [=](Node* n) { n->SetAttr(k, Attribute::Ints(v)); }; }
Attr AString(std::string k, std::string v) { return [=](Node* n) { n->SetAttr(k, Attribute::String(v)); }; }

struct OneNode {
  Graph g;
  Node* node = nullptr;
  absl::flat_hash_map<const Value*, Tensor> feeds;
  std::string label;
};

std::unique_ptr<OneNode> Make(const std::string& op, const std::vector<Tensor>& ins, const std::vector<bool>& is_const,
                              const std::vector<Attr>& attrs = {}, int outputs = 1) {
  auto t = std::make_unique<OneNode>();
  std::vector<Value*> vs;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (i < is_const.size() && is_const[i]) {
      vs.push_back(t->g.AddConstant("c" + std::to_string(i), ins[i]));
    } else {
      Value* v = t->g.AddInput("x" + std::to_string(i), Type::Of(ins[i]));
      t->feeds[v] = ins[i];
      vs.push_back(v);
    }
  }
  t->node = t->g.AddNode(op, vs, outputs);
  for (const Attr& a : attrs) a(t->node);
  t->g.AddOutput(t->node->output(0));
  EXPECT_TRUE(InferShapes(t->g).ok());
  std::vector<std::string> shapes;
  for (const Tensor& x : ins)
    shapes.push_back(absl::StrCat(DTypeName(x.dtype()), "[", absl::StrJoin(x.dims(), ","), "]"));
  t->label = absl::StrCat(op, "(", absl::StrJoin(shapes, ", "), ")");
  return t;
}

void Check(OneNode& t, double tol, int max_blocks = 0) {
  const sim::Machine& m = sim::DefaultMachine();
  KernelRequest req{t.node, &m};
  req.max_blocks = max_blocks;
  auto k = GenerateVectorKernel(req);
  ASSERT_TRUE(k.ok()) << t.label << ": " << k.status();
  EXPECT_GT(k->estimated_cycles, 0) << t.label;
  EXPECT_FALSE(k->plan.empty()) << t.label;
  if (std::getenv("KILN_VEC_DUMP")) std::fprintf(stderr, "%s\n%s\n", t.label.c_str(), sim::Disassemble(k->program).c_str());
  auto run = RunKernelOnSim(*k, *t.node, t.feeds, m);
  ASSERT_TRUE(run.ok()) << t.label << ": " << run.status() << "\n" << k->plan;
  auto ref = RunNodeOnReference(*t.node, t.feeds);
  ASSERT_TRUE(ref.ok()) << ref.status();
  if (std::getenv("KILN_VEC_PLAN"))
    std::fprintf(stderr, "%s: %lld cycles (estimate %.0f), %s\n", t.label.c_str(),
                 static_cast<long long>(run->stats.total_cycles), k->estimated_cycles, k->plan.c_str());
  const Tensor& got = run->outputs[0];
  const Tensor& want = (*ref)[0];
  if (want.dtype() == DType::kBool) {
    // Bytes exactly: 0 or 1.
    ASSERT_EQ(got.nbytes(), want.nbytes()) << t.label;
    const uint8_t* g = static_cast<const uint8_t*>(got.raw());
    const uint8_t* w = static_cast<const uint8_t*>(want.raw());
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < want.numel(); ++i)
      if (g[i] != w[i]) {
        if (first < 0) first = i;
        ++bad;
      }
    EXPECT_EQ(bad, 0) << t.label << ": first mismatch at " << first << " (got " << int(first >= 0 ? g[first] : 0)
                      << ") plan: " << k->plan;
    return;
  }
  double err = MaxRelativeError(got, want);
  EXPECT_LE(err, tol) << t.label << " plan: " << k->plan;
}

void ExpectRejected(OneNode& t, const std::string& needle) {
  const sim::Machine& m = sim::DefaultMachine();
  KernelRequest req{t.node, &m};
  auto k = GenerateVectorKernel(req);
  ASSERT_FALSE(k.ok()) << t.label << " was accepted: " << k->plan;
  EXPECT_NE(std::string(k.status().message()).find(needle), std::string::npos) << k.status();
}

double Tol(DType dt) { return dt == DType::kF32 ? 1e-5 : 1e-2; }

//===--- Pooling ------------------------------------------------------------===//

struct PoolCase {
  Dims x;
  std::vector<int64_t> kernel, strides, pads, dilations;
  int ceil = 0;
};

std::vector<Attr> PoolAttrs(const PoolCase& c) {
  std::vector<Attr> a = {AInts("kernel_shape", c.kernel)};
  if (!c.strides.empty()) a.push_back(AInts("strides", c.strides));
  if (!c.pads.empty()) a.push_back(AInts("pads", c.pads));
  if (!c.dilations.empty()) a.push_back(AInts("dilations", c.dilations));
  if (c.ceil) a.push_back(AInt("ceil_mode", 1));
  return a;
}

const std::vector<PoolCase> kPools = {
    {{1, 4, 12, 12}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0},  // ResNet's stem pool, small
    {{2, 3, 7, 9}, {2, 2}, {2, 2}, {}, {}, 0},              // ragged, no padding
    {{1, 2, 10, 11}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0},  // stride 1 ("same")
    {{1, 3, 9, 10}, {3, 2}, {2, 3}, {0, 1, 1, 0}, {}, 1},  // ceil_mode, uneven pads
    {{1, 2, 11, 13}, {2, 3}, {1, 2}, {1, 0, 0, 2}, {2, 2}, 0},  // dilations
    {{40, 3, 5, 5}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0},  // many small planes over several blocks
};

TEST(VectorPool, MaxPool) {
  uint32_t seed = 1;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
    for (const PoolCase& c : kPools) {
      if (dt != DType::kF32 && &c != &kPools[0] && &c != &kPools[3]) continue;
      auto t = Make("MaxPool", {UniformTensor(dt, c.x, -4, 4, seed++)}, {}, PoolAttrs(c));
      Check(*t, 0);
    }
}

TEST(VectorPool, AveragePool) {
  uint32_t seed = 100;
  for (int include : {0, 1})
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
      for (const PoolCase& c : kPools) {
        if (dt != DType::kF32 && &c != &kPools[0] && &c != &kPools[3]) continue;
        std::vector<Attr> a = PoolAttrs(c);
        a.push_back(AInt("count_include_pad", include));
        auto t = Make("AveragePool", {UniformTensor(dt, c.x, -4, 4, seed++)}, {}, a);
        Check(*t, Tol(dt));
      }
}

TEST(VectorPool, LargePlanesTileByRows) {
  // A 112x112 plane (ResNet's stem) does not fit UB with its gathers: row tiles.
  PoolCase c{{1, 2, 112, 112}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0};
  auto t = Make("MaxPool", {UniformTensor(DType::kF16, c.x, -4, 4, 7)}, {}, PoolAttrs(c));
  Check(*t, 0);
  auto a = Make("AveragePool", {UniformTensor(DType::kF32, {1, 1, 150, 150}, -4, 4, 8)}, {},
                {AInts("kernel_shape", {3, 3}), AInts("pads", {1, 1, 1, 1})});
  Check(*a, 1e-5, 1);
}

TEST(VectorPool, AutoPadAndOneBlock) {
  auto t = Make("MaxPool", {UniformTensor(DType::kF32, {2, 5, 9, 9}, -4, 4, 9)}, {},
                {AInts("kernel_shape", {3, 3}), AInts("strides", {2, 2}), AString("auto_pad", "SAME_UPPER")});
  Check(*t, 0, 1);
}

TEST(VectorPool, Rejects) {
  auto idx = Make("MaxPool", {UniformTensor(DType::kF32, {1, 1, 4, 4}, -1, 1, 1)}, {}, {AInts("kernel_shape", {2, 2})}, 2);
  idx->g.AddOutput(idx->node->output(1));
  ExpectRejected(*idx, "Indices");
  auto one_d = Make("MaxPool", {UniformTensor(DType::kF32, {1, 2, 9}, -1, 1, 1)}, {}, {AInts("kernel_shape", {2})});
  ExpectRejected(*one_d, "2-D");
}

TEST(VectorPool, UnusedIndicesOutputIsAllowed) {
  auto t = Make("MaxPool", {UniformTensor(DType::kF32, {1, 3, 6, 6}, -1, 1, 1)}, {}, {AInts("kernel_shape", {2, 2})}, 2);
  Check(*t, 0);
}

//===--- Comparisons, Where, bool logic -------------------------------------===//

const std::vector<Dims> kCmpShapes = {{7}, {3, 37}, {1000}, {5, 4099}};

TEST(VectorCompare, ComparisonsToBool) {
  uint32_t seed = 300;
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
      for (const Dims& d : kCmpShapes) {
        if (dt != DType::kF32 && d.size() == 2 && d[1] == 4099) continue;
        auto t = Make(op, {Coarse(dt, d, seed++), Coarse(dt, d, seed++)}, {});
        Check(*t, 0);
      }
}

TEST(VectorCompare, ScalarsAndOuterBroadcast) {
  uint32_t seed = 400;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    auto c = Make("Less", {Coarse(dt, {3, 37}, seed++), CastTensor(Tensor::Scalar<float>(0.5f), dt)}, {false, true});
    Check(*c, 0);
    auto s = Make("GreaterOrEqual", {CastTensor(Tensor::Scalar<float>(0.0f), dt), Coarse(dt, {1001}, seed++)}, {});
    Check(*s, 0);
    auto p = Make("Equal", {Coarse(dt, {2, 3, 16, 16}, seed++), Coarse(dt, {16, 16}, seed++)}, {});
    Check(*p, 0);
  }
}

TEST(VectorCompare, Where) {
  uint32_t seed = 500;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
    for (const Dims& d : kCmpShapes) {
      if (dt != DType::kF32 && d.size() == 2 && d[1] == 4099) continue;
      auto t = Make("Where", {RandomBool(d, seed++), UniformTensor(dt, d, -2, 2, seed++), UniformTensor(dt, d, -2, 2, seed++)}, {});
      Check(*t, 0);
    }
  // GPT-2's causal mask: a [1,1,S,S] condition, the scores, a constant.
  for (DType dt : {DType::kF32, DType::kF16}) {
    auto t = Make("Where", {RandomBool({1, 1, 24, 24}, seed++), UniformTensor(dt, {2, 3, 24, 24}, -2, 2, seed++),
                            CastTensor(Tensor::Scalar<float>(-10000.0f), dt)},
                  {false, false, true});
    Check(*t, 0);
  }
  auto x_scalar = Make("Where", {RandomBool({5, 9}, seed++), Tensor::Scalar<float>(1.5f), UniformTensor(DType::kF32, {5, 9}, -2, 2, 1)}, {});
  Check(*x_scalar, 0);
  // One condition for every element (a training step that keeps or skips
  // its update): either side whole, the other side's infinities and NaNs
  // not leaking through.
  for (bool keep : {true, false})
    for (DType dt : {DType::kF32, DType::kF16})
      for (const Dims& d : {Dims{7}, Dims{3, 37}, Dims{5, 4099}}) {
        if (dt != DType::kF32 && d.size() == 2 && d[1] == 4099) continue;
        Tensor x = UniformTensor(DType::kF32, d, -2, 2, seed++), y = UniformTensor(DType::kF32, d, -2, 2, seed++);
        Tensor& bad = keep ? y : x;
        bad.data<float>()[0] = std::numeric_limits<float>::infinity();
        bad.data<float>()[bad.numel() - 1] = std::nanf("");
        x = CastTensor(x, dt);
        y = CastTensor(y, dt);
        Tensor cond(DType::kBool, {});
        cond.data<bool>()[0] = keep;
        auto t = Make("Where", {cond, x, y}, {});
        Check(*t, 0);
      }
}

TEST(VectorCompare, BoolLogic) {
  uint32_t seed = 600;
  for (const Dims& d : kCmpShapes) {
    auto n = Make("Not", {RandomBool(d, seed++)}, {});
    Check(*n, 0);
    for (const char* op : {"And", "Or", "Xor"}) {
      auto t = Make(op, {RandomBool(d, seed++), RandomBool(d, seed++)}, {});
      Check(*t, 0);
    }
  }
}

TEST(VectorCompare, Rejects) {
  auto i = Make("Less", {Tensor::FromVector<int32_t>({1, 2, 3}, {3}), Tensor::FromVector<int32_t>({3, 2, 1}, {3})}, {});
  ExpectRejected(*i, "compares only floats");
  auto mid = Make("Where", {RandomBool({4, 1, 5}, 1), UniformTensor(DType::kF32, {4, 6, 5}, -1, 1, 2),
                            UniformTensor(DType::kF32, {4, 6, 5}, -1, 1, 3)}, {});
  ExpectRejected(*mid, "broadcast of");
}

TEST(VectorBinary, OuterBroadcastRepeats) {
  // An additive attention mask [1,1,S,S] against scores [B,H,S,S], both sides.
  uint32_t seed = 650;
  for (DType dt : {DType::kF32, DType::kF16}) {
    auto t = Make("Add", {UniformTensor(dt, {2, 3, 20, 20}, -2, 2, seed++), UniformTensor(dt, {1, 1, 20, 20}, -2, 2, seed++)}, {});
    Check(*t, Tol(dt));
    auto r = Make("Sub", {UniformTensor(dt, {20, 20}, -2, 2, seed++), UniformTensor(dt, {2, 3, 20, 20}, -2, 2, seed++)}, {});
    Check(*r, Tol(dt));
  }
}

//===--- Reductions over outer axes -----------------------------------------===//

TEST(VectorReduceOuter, MiddleAndLeadingAxes) {
  uint32_t seed = 700;
  struct R {
    Dims x;
    std::vector<int64_t> axes;
  };
  const std::vector<R> cases = {{{4, 6, 5}, {1}},        {{70, 3}, {0}},          {{2, 3, 4, 33}, {1, 2}},
                                {{1, 5000, 9}, {1}},     {{2, 9, 5000}, {1}},     {{3, 1, 7, 130}, {0, 2}}};
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"})
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
      for (const R& r : cases) {
        if (dt != DType::kF32 && r.x.size() != 3) continue;
        if (r.x == Dims{1, 5000, 9} && std::string(op) != "ReduceSum") continue;
        Tensor x = UniformTensor(dt, r.x, -2, 2, seed++);
        std::unique_ptr<OneNode> t;
        if (std::string(op) == "ReduceSum") {
          t = Make(op, {x, Tensor::FromVector<int64_t>(r.axes, {static_cast<int64_t>(r.axes.size())})}, {false, true},
                   {AInt("keepdims", 0)});
        } else {
          t = Make(op, {x}, {}, {AInts("axes", r.axes)});
        }
        double tol = dt == DType::kF32 ? 1e-4 : 1e-2;
        if (r.x[1] == 5000 && std::string(op) == "ReduceSum") tol = 1e-3;
        Check(*t, tol);
      }
}

}  // namespace
}  // namespace kiln::testing
