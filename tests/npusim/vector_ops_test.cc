//===- vector_ops_test.cc - npusim vector kernels against the reference ---===//
//
// Each case builds a one-node graph, generates its vector kernel, runs it on
// the SystemC model and compares with the reference kernels: f32 within
// 1e-5 (1e-4 for transcendental functions), f16/bf16 within 1e-2 (relative
// to max(1, |reference|)). Shapes cover tiny tensors, ragged sizes (not a
// multiple of 32 bytes), several tiles and cores, and broadcast patterns.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>

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

double Tol(DType dt, bool transcendental) {
  if (dt == DType::kF16 || dt == DType::kBF16) return 1e-2;
  if (dt == DType::kI32) return 0;
  return transcendental ? 1e-4 : 1e-5;
}

// Attributes are set through closures (Attribute is move-only).
using Attr = std::function<void(Node*)>;
Attr AInt(std::string k, int64_t v) { return [=](Node* n) { n->SetAttr(k, Attribute::Int(v)); }; }
Attr AFloat(std::string k, float v) { return [=](Node* n) { n->SetAttr(k, Attribute::Float(v)); }; }
Attr AString(std::string k, std::string v) { return [=](Node* n) { n->SetAttr(k, Attribute::String(v)); }; }
Attr AInts(std::string k, std::vector<int64_t> v) { return [=](Node* n) { n->SetAttr(k, Attribute::Ints(v)); }; }

// A one-node graph; inputs are graph inputs (or constants when given).
struct OneNode {
  Graph g;
  Node* node = nullptr;
  absl::flat_hash_map<const Value*, Tensor> feeds;
  std::string label;
};

std::unique_ptr<OneNode> Make(const std::string& op, const std::vector<Tensor>& ins, const std::vector<bool>& is_const,
                              const std::vector<Attr>& attrs = {},
                              const std::string& domain = "") {
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
  t->node = t->g.AddNode(op, vs, 1, domain);
  for (const Attr& a : attrs) a(t->node);
  t->g.AddOutput(t->node->output(0));
  EXPECT_TRUE(InferShapes(t->g).ok());
  std::vector<std::string> shapes;
  for (const Tensor& x : ins) shapes.push_back(absl::StrCat(DTypeName(x.dtype()), "[", absl::StrJoin(x.dims(), ","), "]"));
  t->label = absl::StrCat(op, "(", absl::StrJoin(shapes, ", "), ")");
  return t;
}

// Generates, runs and compares; returns the kernel's cycles.
int64_t Check(OneNode& t, double tol, const sim::Machine& m = sim::DefaultMachine()) {
  KernelRequest req{t.node, &m};
  auto k = GenerateVectorKernel(req);
  EXPECT_TRUE(k.ok()) << t.label << ": " << k.status();
  if (!k.ok()) return 0;
  EXPECT_GT(k->estimated_cycles, 0) << t.label;
  EXPECT_FALSE(k->plan.empty()) << t.label;
  if (std::getenv("KILN_VEC_DUMP")) std::fprintf(stderr, "%s\n%s\n", t.label.c_str(), sim::Disassemble(k->program).c_str());
  auto run = RunKernelOnSim(*k, *t.node, t.feeds, m);
  EXPECT_TRUE(run.ok()) << t.label << ": " << run.status() << "\n" << k->plan;
  if (!run.ok()) return 0;
  auto ref = RunNodeOnReference(*t.node, t.feeds);
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (!ref.ok()) return 0;
  double err = MaxRelativeError(run->outputs[0], (*ref)[0]);
  EXPECT_LE(err, tol) << t.label << " plan: " << k->plan;
  return run->stats.total_cycles;
}

void ExpectRejected(OneNode& t, const std::string& needle) {
  sim::Machine m = sim::DefaultMachine();
  KernelRequest req{t.node, &m};
  auto k = GenerateVectorKernel(req);
  ASSERT_FALSE(k.ok()) << t.label << " was accepted: " << k->plan;
  EXPECT_NE(std::string(k.status().message()).find(needle), std::string::npos) << k.status();
}

const std::vector<Dims> kShapes = {{1}, {7}, {3, 5}, {1000}, {4, 33, 17}, {70001}};
const DType kFloats[] = {DType::kF32, DType::kF16, DType::kBF16};

// Fewer shapes for the 16-bit dtypes keep the binary quick.
std::vector<Dims> ShapesFor(DType dt) {
  if (dt == DType::kF32) return {{1}, {7}, {4, 33, 17}, {70001}};
  return {{3, 5}, {1000}};
}

struct UnaryCase {
  std::string op;
  double lo, hi;
  bool transcendental;
  std::vector<Attr> attrs = {};
  std::string domain = "";
};

TEST(VectorUnary, MatchesReference) {
  std::vector<UnaryCase> cases = {
      {"Relu", -2, 2, false},
      {"Abs", -2, 2, false},
      {"Neg", -2, 2, false},
      {"Sigmoid", -8, 8, true},
      {"Tanh", -4, 4, true},
      {"Exp", -4, 4, true},
      {"Log", 0.01, 10, true},
      {"Sqrt", 0, 10, true},
      {"Reciprocal", 0.1, 10, true},
      {"Erf", -3, 3, true},
      {"Identity", -2, 2, false},
      {"LeakyRelu", -2, 2, false, {AFloat("alpha", 0.1f)}},
      {"HardSigmoid", -6, 6, false},
      {"HardSwish", -6, 6, false},
      {"Softplus", -20, 20, true},
      {"Softsign", -5, 5, true},
      {"Elu", -4, 4, true, {AFloat("alpha", 0.7f)}},
      {"Selu", -4, 4, true},
      {"Gelu", -5, 5, true, {}, "kiln"},
      {"Gelu", -5, 5, true, {AString("approximate", "tanh")}, "kiln"},
  };
  uint32_t seed = 1;
  for (const UnaryCase& c : cases)
    for (DType dt : kFloats)
      for (const Dims& d : ShapesFor(dt)) {
        auto t = Make(c.op, {UniformTensor(dt, d, c.lo, c.hi, seed++)}, {}, c.attrs, c.domain);
        Check(*t, Tol(dt, c.transcendental));
      }
}

TEST(VectorUnary, Int32) {
  for (const char* op : {"Relu", "Abs", "Neg", "Identity"})
    for (const Dims& d : kShapes) {
      auto t = Make(op, {UniformTensor(DType::kI32, d, -100, 100, 7)}, {});
      Check(*t, 0);
    }
}

TEST(VectorUnary, ClipWithConstantBounds) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kI32}) {
    Tensor lo = CastTensor(Tensor::Scalar<float>(-0.5f), dt), hi = CastTensor(Tensor::Scalar<float>(0.75f), dt);
    if (dt == DType::kI32) {
      lo = Tensor::Scalar<int32_t>(-3);
      hi = Tensor::Scalar<int32_t>(5);
    }
    auto t = Make("Clip", {UniformTensor(dt, {5, 77}, -10, 10, 3), lo, hi}, {false, true, true});
    Check(*t, Tol(dt, false));
    auto only_min = Make("Clip", {UniformTensor(dt, {300}, -10, 10, 4), lo}, {false, true});
    Check(*only_min, Tol(dt, false));
  }
  auto t = Make("Clip", {UniformTensor(DType::kF32, {8}, -1, 1, 3), Tensor::Scalar<float>(0)}, {false, false});
  ExpectRejected(*t, "min is not a constant");
}

// Ops that only select or negate their input run on f16 without
// conversions (the same values bit for bit); the others, and bf16, compute
// in f32.
TEST(VectorUnary, SelectingOpsRunOnF16Natively) {
  sim::Machine m = sim::DefaultMachine();
  auto generate = [&](OneNode& t) {
    KernelRequest req{t.node, &m};
    auto k = GenerateVectorKernel(req);
    EXPECT_TRUE(k.ok()) << t.label << ": " << k.status();
    return k.ok() ? std::make_pair(k->plan, sim::Disassemble(k->program)) : std::make_pair(std::string(), std::string());
  };
  Tensor x = UniformTensor(DType::kF16, {4, 1000}, -8, 8, 11);
  std::vector<std::unique_ptr<OneNode>> native;
  for (const char* op : {"Relu", "Abs", "Neg"}) native.push_back(Make(op, {x}, {}));
  native.push_back(Make("Clip", {x, CastTensor(Tensor::Scalar<float>(0), DType::kF16),
                                 CastTensor(Tensor::Scalar<float>(6), DType::kF16)}, {false, true, true}));
  for (auto& t : native) {
    auto [plan, text] = generate(*t);
    EXPECT_NE(plan.find("compute f16"), std::string::npos) << t->label << ": " << plan;
    EXPECT_EQ(text.find("vconv"), std::string::npos) << t->label;
    Check(*t, 0);
  }
  auto sigmoid = Make("Sigmoid", {x}, {});
  EXPECT_NE(generate(*sigmoid).first.find("compute f32"), std::string::npos);
  auto bf16 = Make("Relu", {UniformTensor(DType::kBF16, {1000}, -8, 8, 12)}, {});
  EXPECT_NE(generate(*bf16).first.find("compute f32"), std::string::npos);
}

TEST(VectorBinary, SameShape) {
  uint32_t seed = 100;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"})
    for (DType dt : kFloats)
      for (const Dims& d : ShapesFor(dt)) {
        double lo = std::string(op) == "Div" ? 0.5 : -3;
        auto t = Make(op, {UniformTensor(dt, d, -3, 3, seed++), UniformTensor(dt, d, lo, 3, seed++)}, {});
        Check(*t, Tol(dt, false));
      }
  for (const char* op : {"Add", "Sub", "Mul", "Max", "Min"}) {
    auto t = Make(op, {UniformTensor(DType::kI32, {1234}, -50, 50, 1), UniformTensor(DType::kI32, {1234}, -50, 50, 2)}, {});
    Check(*t, 0);
  }
  auto div = Make("Div", {UniformTensor(DType::kI32, {8}, 1, 5, 1), UniformTensor(DType::kI32, {8}, 1, 5, 2)}, {});
  ExpectRejected(*div, "does not compute on s32");
}

TEST(VectorBinary, Scalars) {
  uint32_t seed = 200;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"})
    for (DType dt : {DType::kF32, DType::kBF16})
      for (bool constant : {true, false})
        for (int side = 0; side < 2; ++side) {
          Tensor full = UniformTensor(dt, {3, 1001}, 0.5, 3, seed++);
          Tensor s = CastTensor(Tensor::Scalar<float>(side ? 1.75f : -0.625f), dt);
          std::vector<Tensor> ins = side ? std::vector<Tensor>{full, s} : std::vector<Tensor>{s, full};
          std::vector<bool> c = side ? std::vector<bool>{false, constant} : std::vector<bool>{constant, false};
          auto t = Make(op, ins, c);
          Check(*t, Tol(dt, false));
        }
}

TEST(VectorBinary, Broadcast) {
  uint32_t seed = 300;
  struct B {
    Dims a, b;
  };
  std::vector<B> cases = {
      {{64, 96}, {96}},            // row bias
      {{5, 7}, {7}},               // ragged row bias
      {{2, 37, 130}, {130}},       // rows over two outer dims
      {{4, 9, 33}, {4, 9, 1}},     // per-row scalar
      {{2, 300, 5}, {2, 300, 1}},  // many short rows
      {{2, 16, 7, 9}, {1, 16, 1, 1}},  // per-channel bias
      {{3, 5, 100}, {5, 1}},       // per-channel over the middle dim
      {{96}, {64, 96}},            // the full operand on the right
  };
  for (const char* op : {"Add", "Sub", "Mul", "Div"})
    for (DType dt : kFloats)
      for (const B& c : cases) {
        if (dt != DType::kF32 && (std::string(op) == "Mul" || std::string(op) == "Div")) continue;
        auto t = Make(op, {UniformTensor(dt, c.a, 0.5, 2, seed++), UniformTensor(dt, c.b, 0.5, 2, seed++)}, {});
        Check(*t, Tol(dt, false));
      }
  auto c = Make("Add", {UniformTensor(DType::kF32, {2, 3, 1001}, -1, 1, 1), UniformTensor(DType::kF32, {1001}, -1, 1, 2)},
                {false, true});
  Check(*c, 1e-5);
  auto outer = Make("Add", {UniformTensor(DType::kF32, {6, 1}, -1, 1, 1), UniformTensor(DType::kF32, {1, 5}, -1, 1, 2)}, {});
  ExpectRejected(*outer, "both inputs are broadcast");
  auto mid = Make("Add", {UniformTensor(DType::kF32, {4, 6, 5}, -1, 1, 1), UniformTensor(DType::kF32, {4, 1, 5}, -1, 1, 2)}, {});
  ExpectRejected(*mid, "broadcast of");
}

TEST(VectorBinary, PowConstantExponent) {
  uint32_t seed = 400;
  for (float e : {2.0f, 0.5f, 3.0f, -1.0f, -0.5f, 0.0f, 1.0f, 5.0f, 1.5f, -2.0f})
    for (DType dt : kFloats) {
      auto t = Make("Pow", {UniformTensor(dt, {3, 333}, 0.2, 2, seed++), Tensor::Scalar<float>(e)}, {false, true});
      Check(*t, Tol(dt, true));
    }
  auto t = Make("Pow", {UniformTensor(DType::kF32, {8}, 0.2, 2, 1), UniformTensor(DType::kF32, {8}, 0.2, 2, 2)}, {});
  ExpectRejected(*t, "not a constant scalar");
}

TEST(VectorCast, AllPairs) {
  const DType ts[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32};
  uint32_t seed = 500;
  for (DType from : ts)
    for (DType to : ts)
      for (const Dims& d : {Dims{13}, Dims{3, 700}}) {
        Tensor x = UniformTensor(from, d, -100, 100, seed++);
        auto t = Make("Cast", {x}, {}, {AInt("to", DTypeToOnnx(to))});
        Check(*t, to == DType::kI32 || from == DType::kI32 ? 1e-2 : Tol(to == DType::kF32 ? from : to, false));
      }
  auto t = Make("Cast", {UniformTensor(DType::kF32, {8}, -1, 1, 1)}, {}, {AInt("to", 7)});  // i64
  ExpectRejected(*t, "");
}

TEST(VectorReduce, InnermostAxes) {
  uint32_t seed = 600;
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"})
    for (DType dt : kFloats)
      for (int keep : {0, 1}) {
        if (dt != DType::kF32 && keep) continue;  // keepdims changes no layout: once is enough
        struct R {
          Dims x;
          std::vector<int64_t> axes;
        };
        for (const R& r : std::vector<R>{{{5, 7}, {1}},
                                         {{3, 4, 100}, {-1}},
                                         {{2, 3, 64}, {1, 2}},
                                         {{999}, {}},
                                         {{70, 3000}, {1}},
                                         {{33, 1, 129}, {2}}}) {
          Tensor x = UniformTensor(dt, r.x, -2, 2, seed++);
          std::unique_ptr<OneNode> t;
          std::vector<Attr> attrs = {AInt("keepdims", keep)};
          if (std::string(op) == "ReduceSum") {
            if (r.axes.empty()) {
              t = Make(op, {x}, {}, attrs);
            } else {
              t = Make(op, {x, Tensor::FromVector<int64_t>(r.axes, {static_cast<int64_t>(r.axes.size())})},
                       {false, true}, attrs);
            }
          } else {
            if (!r.axes.empty()) attrs.push_back(AInts("axes", r.axes));
            t = Make(op, {x}, {}, attrs);
          }
          Check(*t, dt == DType::kF32 ? 1e-5 : 1e-2);
        }
      }
  auto t = Make("ReduceMax", {UniformTensor(DType::kF32, {3, 4, 5}, -1, 1, 1)}, {}, {AInts("axes", {0, 2})});
  ExpectRejected(*t, "not over the innermost axes");
  auto gap = Make("GlobalAveragePool", {UniformTensor(DType::kF32, {2, 8, 7, 7}, -1, 1, 1)}, {});
  Check(*gap, 1e-5);
}

TEST(VectorSoftmax, LastAxis) {
  uint32_t seed = 700;
  for (const char* op : {"Softmax", "LogSoftmax"})
    for (DType dt : kFloats)
      for (const Dims& d : {Dims{1, 5}, Dims{4, 64}, Dims{3, 7, 100}, Dims{257, 33}, Dims{2, 2000}}) {
        auto t = Make(op, {UniformTensor(dt, d, -5, 5, seed++)}, {});
        Check(*t, dt == DType::kF32 ? 1e-4 : 1e-2);
      }
  auto t = Make("Softmax", {UniformTensor(DType::kF32, {2, 3, 4, 5}, -1, 1, 1)}, {}, {AInt("axis", 1)});
  ExpectRejected(*t, "Softmax over axis 1 of 4 is not the innermost axis");
}

TEST(VectorLayerNorm, LastAxes) {
  uint32_t seed = 800;
  for (DType dt : kFloats)
    for (auto [d, axis] : std::vector<std::pair<Dims, int64_t>>{{{4, 64}, -1}, {{3, 5, 77}, -1}, {{2, 6, 10}, 1},
                                                                {{300, 48}, 1}}) {
      Dims norm(d.begin() + (axis < 0 ? axis + d.size() : axis), d.end());
      for (bool bias : {true, false}) {
        std::vector<Tensor> ins = {UniformTensor(dt, d, -3, 3, seed++), UniformTensor(dt, norm, 0.5, 1.5, seed++)};
        if (bias) ins.push_back(UniformTensor(dt, norm, -1, 1, seed++));
        auto t = Make("LayerNormalization", ins, {false, true, true},
                      {AInt("axis", axis), AFloat("epsilon", 1e-5f)});
        Check(*t, dt == DType::kF32 ? 1e-4 : 1e-2);
      }
    }
}

TEST(VectorBatchNorm, Inference) {
  uint32_t seed = 900;
  for (DType dt : kFloats)
    for (const Dims& d : {Dims{2, 3, 5, 5}, Dims{1, 20, 17}, Dims{4, 8}}) {
      int64_t c = d[1];
      auto t = Make("BatchNormalization",
                    {UniformTensor(dt, d, -2, 2, seed++), UniformTensor(dt, {c}, 0.5, 2, seed++), UniformTensor(dt, {c}, -1, 1, seed++),
                     UniformTensor(dt, {c}, -1, 1, seed++), UniformTensor(dt, {c}, 0.5, 2, seed++)},
                    {false, true, true, true, true});
      Check(*t, dt == DType::kF32 ? 1e-4 : 1e-2);
    }
}

TEST(VectorDispatch, RejectsWhatItCannotRun) {
  auto t = Make("Sin", {UniformTensor(DType::kF32, {8}, -1, 1, 1)}, {});
  ExpectRejected(*t, "no vector kernel");
  auto b = Make("Greater", {UniformTensor(DType::kI32, {8}, -1, 1, 1), UniformTensor(DType::kI32, {8}, -1, 1, 2)}, {});
  ExpectRejected(*b, "compares only floats");
}

}  // namespace
}  // namespace kiln::testing
