//===- move_kernels_test.cc - DMA-only data movement on the NPU model -----===//
//
// Each op's kernel runs on the SystemC model and must reproduce the
// reference kernel bit for bit (it only moves bytes), for several dtypes,
// shapes that need many transfers, and every core count the generator picks.
//
//===----------------------------------------------------------------------===//
#include <random>

#include <gtest/gtest.h>

#include "graph/ops/shape_inference.h"
#include "sim/machine/machine.h"
#include "target/npusim/kernels/move.h"
#include "tests/npusim/kernel_harness.h"

namespace kiln::testing {
namespace {

Tensor Iota(DType dt, std::vector<int64_t> dims, int seed) {
  Tensor t(dt, dims);
  std::mt19937 rng(seed);
  uint8_t* p = static_cast<uint8_t*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(rng());
  if (dt == DType::kF32)  // finite values, so NaN payloads do not matter
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i) * 0.5f - 3.0f + 1000.0f * static_cast<float>(seed);
  return t;
}

// The DMA kernel of `n` on machine `m`.
absl::StatusOr<target::npusim::GeneratedKernel> MoveKernel(const Node* n, const sim::Machine& m) {
  target::npusim::KernelRequest req;
  req.node = n;
  req.machine = &m;
  return target::npusim::GenerateMoveKernel(req);
}

struct Case {
  std::string name;
  std::function<Node*(Graph&, Value*, Value*)> build;  // (graph, x, z): two inputs of the same type
  DType dtype;
  std::vector<int64_t> dims;
};

void RunCase(const Case& c) {
  SCOPED_TRACE(c.name);
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(c.dtype, Shape::Static(c.dims)));
  Value* z = g.AddInput("z", Type::Tensor(c.dtype, Shape::Static(c.dims)));
  Node* n = c.build(g, x, z);
  for (Value* o : n->outputs()) g.AddOutput(o);
  ASSERT_TRUE(InferShapes(g).ok());
  sim::Machine m = sim::DefaultMachine();
  auto k = MoveKernel(n, m);
  ASSERT_TRUE(k.ok()) << k.status();
  absl::flat_hash_map<const Value*, Tensor> inputs = {{x, Iota(c.dtype, c.dims, 3)}, {z, Iota(c.dtype, c.dims, 4)}};
  auto run = RunKernelOnSim(*k, *n, inputs, m);
  ASSERT_TRUE(run.ok()) << run.status();
  auto ref = RunNodeOnReference(*n, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_EQ(run->outputs.size(), ref->size());
  for (size_t i = 0; i < ref->size(); ++i) {
    ASSERT_EQ(run->outputs[i].dims(), (*ref)[i].dims());
    ASSERT_EQ(run->outputs[i].nbytes(), (*ref)[i].nbytes());
    EXPECT_EQ(0, std::memcmp(run->outputs[i].raw(), (*ref)[i].raw(), (*ref)[i].nbytes())) << "output " << i;
  }
  EXPECT_GT(k->estimated_cycles, 0);
  EXPECT_FALSE(k->plan.empty());
}

Value* I64(Graph& g, std::vector<int64_t> v) {
  int64_t n = static_cast<int64_t>(v.size());
  return g.AddConstant(g.UniqueName("c"), Tensor::FromVector<int64_t>(v, {n}));
}

Node* Op(Graph& g, const char* op, std::vector<Value*> in, int outs = 1) { return g.AddNode(op, std::move(in), outs); }

TEST(MoveKernels, MatchTheReferenceBitForBit) {
  std::vector<Case> cases = {
      {"transpose heads", [](Graph& g, Value* x, [[maybe_unused]] Value* z) {
         Node* n = Op(g, "Transpose", {x});
         n->SetAttr("perm", Attribute::Ints({0, 2, 1, 3}));
         return n;
       }, DType::kF32, {2, 16, 4, 32}},
      {"transpose 2-D (element-wise)", [](Graph& g, Value* x, [[maybe_unused]] Value* z) { return Op(g, "Transpose", {x}); }, DType::kF16, {33, 17}},
      {"transpose i64", [](Graph& g, Value* x, [[maybe_unused]] Value* z) {
         Node* n = Op(g, "Transpose", {x});
         n->SetAttr("perm", Attribute::Ints({2, 0, 1}));
         return n;
       }, DType::kI64, {3, 5, 7}},
      {"concat", [](Graph& g, Value* x, [[maybe_unused]] Value* z) {
         Node* n = Op(g, "Concat", {x, z, x});
         n->SetAttr("axis", Attribute::Int(1));
         return n;
       }, DType::kF32, {4, 3, 10}},
      {"split uneven", [](Graph& g, Value* x, [[maybe_unused]] Value* z) {
         Node* n = Op(g, "Split", {x, I64(g, {1, 5, 2})}, 3);
         n->SetAttr("axis", Attribute::Int(2));
         return n;
       }, DType::kF32, {2, 3, 8}},
      {"slice with steps", [](Graph& g, Value* x, [[maybe_unused]] Value* z) {
         return Op(g, "Slice", {x, I64(g, {1, 0}), I64(g, {100, -1}), I64(g, {0, 2}), I64(g, {2, 3})});
       }, DType::kF32, {9, 4, 20}},
      {"expand", [](Graph& g, Value* x, [[maybe_unused]] Value* z) { return Op(g, "Expand", {x, I64(g, {2, 3, 64})}); }, DType::kF32, {3, 1}},
      {"tile", [](Graph& g, Value* x, [[maybe_unused]] Value* z) { return Op(g, "Tile", {x, I64(g, {2, 1, 3})}); }, DType::kBF16, {2, 5, 7}},
      {"gather constant indices", [](Graph& g, Value* x, [[maybe_unused]] Value* z) {
         Node* n = Op(g, "Gather", {x, I64(g, {3, 0, -1, 3})});
         n->SetAttr("axis", Attribute::Int(1));
         return n;
       }, DType::kF32, {2, 6, 5}},
      {"reshape copy", [](Graph& g, Value* x, [[maybe_unused]] Value* z) { return Op(g, "Reshape", {x, I64(g, {-1})}); }, DType::kI32, {4, 4}},
      {"large copy over many cores", [](Graph& g, Value* x, [[maybe_unused]] Value* z) {
         Node* n = Op(g, "Transpose", {x});
         n->SetAttr("perm", Attribute::Ints({1, 0, 2}));
         return n;
       }, DType::kF32, {64, 48, 256}},
  };
  for (const Case& c : cases) RunCase(c);
}

TEST(MoveKernels, RejectsWhatDmaCannotDo) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({8, 8})));
  Value* idx = g.AddInput("i", Type::Tensor(DType::kI64, Shape::Static({3})));
  Node* gather = Op(g, "Gather", {x, idx});  // indices read at run time, along axis 1
  gather->SetAttr("axis", Attribute::Int(1));
  Node* rev = Op(g, "Slice", {x, I64(g, {7}), I64(g, {-9}), I64(g, {0}), I64(g, {-1})});
  Node* relu = Op(g, "Relu", {x});
  ASSERT_TRUE(InferShapes(g).ok());
  sim::Machine m = sim::DefaultMachine();
  for (Node* n : {gather, rev, relu}) {
    auto k = MoveKernel(n, m);
    EXPECT_FALSE(k.ok()) << n->op();
  }
}

// Gather along axis 0 by indices read at run time (an embedding lookup):
// the scalar unit reads each index from UB (ld) and addresses its row's DMA.
// i64 and i32 indices, negative ones, rows of several dims, f16 and f32,
// and more rows than one UB chunk holds; bit for bit as the reference.
TEST(MoveKernels, GatherByIndicesReadAtRunTime) {
  struct GatherCase {
    DType dt, it;
    Dims data, idx;
  };
  const std::vector<GatherCase> cases = {
      {DType::kF32, DType::kI64, {50, 128}, {2, 32}},
      {DType::kF16, DType::kI32, {7, 3, 8}, {5}},
      {DType::kF32, DType::kI64, {300, 2048}, {2000}},  // 8 KiB rows: each block gathers 63 in chunks of UB
  };
  for (const GatherCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << DTypeName(c.dt) << " data " << c.data.size() << "-D, " << DTypeName(c.it));
    Graph g;
    Value* x = g.AddInput("x", Type::Tensor(c.dt, Shape::Static(c.data)));
    Value* i = g.AddInput("i", Type::Tensor(c.it, Shape::Static(c.idx)));
    Node* n = Op(g, "Gather", {x, i});
    g.AddOutput(n->output(0));
    ASSERT_TRUE(InferShapes(g).ok());
    Tensor idx(c.it, c.idx);
    for (int64_t j = 0; j < idx.numel(); ++j) {
      int64_t v = (j * 37 + 11) % c.data[0] - (j % 3 == 0 ? c.data[0] : 0);  // every third negative
      if (c.it == DType::kI64) idx.data<int64_t>()[j] = v;
      else idx.data<int32_t>()[j] = static_cast<int32_t>(v);
    }
    sim::Machine m = sim::DefaultMachine();
    auto k = MoveKernel(n, m);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_NE(k->plan.find("read at run time"), std::string::npos) << k->plan;
    absl::flat_hash_map<const Value*, Tensor> inputs = {{x, Iota(c.dt, c.data, 3)}, {i, idx}};
    auto run = RunKernelOnSim(*k, *n, inputs, m);
    ASSERT_TRUE(run.ok()) << run.status();
    auto ref = RunNodeOnReference(*n, inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_EQ(run->outputs[0].nbytes(), (*ref)[0].nbytes());
    EXPECT_EQ(0, std::memcmp(run->outputs[0].raw(), (*ref)[0].raw(), (*ref)[0].nbytes()));
  }
}

// A KV cache's scatter: the indices an Expand of one position per (batch,
// row), the same for every head and along the head's elements. Each run
// (one row of a head) shares its index with the same row of the other
// heads: one index read, and the heads' rows as the bursts of one strided
// copy each way. Bit for bit the reference's, negative indices included;
// without the shared axis (an index per head) the runs go one by one.
TEST(MoveKernels, ScatterRunsShareAnIndexAcrossHeads) {
  for (bool shared : {true, false}) {
    SCOPED_TRACE(shared ? "index shared by the heads" : "an index per head");
    Graph g;
    const Dims cache_dims = {2, 3, 16, 8}, upd_dims = {2, 3, 4, 8};
    const Dims pos_dims = shared ? Dims{2, 1, 4, 1} : Dims{2, 3, 4, 1};
    Value* cache = g.AddInput("cache", Type::Tensor(DType::kF32, Shape::Static(cache_dims)));
    Value* pos = g.AddInput("pos", Type::Tensor(DType::kI64, Shape::Static(pos_dims)));
    Value* upd = g.AddInput("upd", Type::Tensor(DType::kF32, Shape::Static(upd_dims)));
    Value* shape = g.AddConstant("shape", Tensor::FromVector<int64_t>(upd_dims, {4}));
    Node* expand = Op(g, "Expand", {pos, shape});
    Node* n = Op(g, "ScatterElements", {cache, expand->output(0), upd});
    n->SetAttr("axis", Attribute::Int(2));
    g.AddOutput(n->output(0));
    ASSERT_TRUE(InferShapes(g).ok());
    Tensor p(DType::kI64, pos_dims);
    for (int64_t j = 0; j < p.numel(); ++j) p.data<int64_t>()[j] = j % 4 == 1 ? -3 : 3 * (j % 4) + 1;  // 1, 13, 7, 10
    Tensor idx(DType::kI64, upd_dims);
    for (int64_t j = 0; j < idx.numel(); ++j) {
      const int64_t row = j / 8 % 4, h = j / 32 % 3, b = j / 96;  // of [b, h, row, d]
      idx.data<int64_t>()[j] = p.data<int64_t>()[shared ? b * 4 + row : (b * 3 + h) * 4 + row];
    }
    sim::Machine m = sim::DefaultMachine();
    target::npusim::KernelRequest req;
    req.node = n;
    req.machine = &m;
    auto k = target::npusim::GenerateScatterKernel(req);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(k->plan.find("x 3 bursts sharing their index") != std::string::npos, shared) << k->plan;
    EXPECT_NE(k->plan.find(shared ? "8 runs of 32 B" : "24 runs of 32 B"), std::string::npos) << k->plan;
    absl::flat_hash_map<const Value*, Tensor> inputs = {
        {cache, Iota(DType::kF32, cache_dims, 3)}, {expand->output(0), idx}, {upd, Iota(DType::kF32, upd_dims, 4)}};
    auto run = RunKernelOnSim(*k, *n, inputs, m);
    ASSERT_TRUE(run.ok()) << run.status();
    auto ref = RunNodeOnReference(*n, inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_EQ(run->outputs[0].nbytes(), (*ref)[0].nbytes());
    EXPECT_EQ(0, std::memcmp(run->outputs[0].raw(), (*ref)[0].raw(), (*ref)[0].nbytes()));
  }
}

// An index out of range makes its row's DMA fall outside the table: the run
// fails with an error, it does not read a neighbour's row or crash.
TEST(MoveKernels, GatherIndexOutOfRangeFailsTheRun) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({8, 16})));
  Value* i = g.AddInput("i", Type::Tensor(DType::kI64, Shape::Static({4})));
  Node* n = Op(g, "Gather", {x, i});
  g.AddOutput(n->output(0));
  ASSERT_TRUE(InferShapes(g).ok());
  sim::Machine m = sim::DefaultMachine();
  auto k = MoveKernel(n, m);
  ASSERT_TRUE(k.ok()) << k.status();
  for (int64_t bad : {8, -9}) {
    Tensor idx = Tensor::FromVector<int64_t>({1, bad, 2, 3}, {4});
    auto run = RunKernelOnSim(*k, *n, {{x, Iota(DType::kF32, {8, 16}, 1)}, {i, idx}}, m);
    EXPECT_FALSE(run.ok()) << bad;
  }
}

}  // namespace
}  // namespace kiln::testing
