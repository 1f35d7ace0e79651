//===- optimizer_bench.cc - Speed and memory of the graph optimizer -------===//
//
// Time and memory of each pass, and of the whole default pipeline, on
// generated graphs of about 1k, 10k and 100k nodes:
//
//   chain    a chain of elementwise nodes, each with its own scalar constant
//            (many constants, most of them equal: dedup and folding work)
//   diamond  a chain of diamonds (one value read by two nodes joined again)
//            with duplicated nodes for cse and dead nodes for dce
//   pytorch  blocks as a PyTorch export writes them: shape plumbing
//            (Shape, Gather, Unsqueeze, Concat feeding a Reshape), a MatMul
//            with its bias add and activation, a residual add, a constant-only
//            subexpression, an Identity, a duplicated node and a dead one
//
// Each benchmark builds a fresh graph, runs what the pass normally follows
// (untimed), then times the pass alone. Memory is counted by this binary's
// global operator new: `peak_MiB` is the most memory the pass held at once
// beyond what was live when it started, `alloc_MiB` all it allocated.
// Tensor payloads over 64 bytes (std::aligned_alloc) are not counted
// (smaller ones share their tensor's allocation and are); `heap_MiB` is the
// change of all live heap memory (mallinfo2) over the pass, payloads
// included. Slab chunks of 2 MiB, which graphs map outside the heap, count
// in all three (a chunk a pass maps counts as held until its end).
//
// `graph_MiB` is the heap the graph held when the timed pipeline began, and
// `us_per_node` the time per node of the graph as generated. The Scaling
// family runs the default pipeline on sizes between 5k and 100k nodes, to
// show where the time per node steps up as the graph outgrows the caches.
//
//   build/benchmarks/optimizer_bench --benchmark_filter=Pipeline
//   build/benchmarks/optimizer_bench --benchmark_filter='Pass/.*/pytorch'
//   build/benchmarks/optimizer_bench --benchmark_filter=Scaling
//
// With KILN_BENCH_TIMING set, every timed run also prints the pass
// manager's --time-passes table to stderr (time per pass within the
// pipeline):
//
//   KILN_BENCH_TIMING=1 build/benchmarks/optimizer_bench --benchmark_filter=Pipeline/default/chain/100000/
//
//===----------------------------------------------------------------------===//
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "graph/ir/graph.h"
#include "graph/passes/pass_manager.h"

//===--- Counting allocations ---------------------------------------------===//

namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_total{0};

void* Counted(void* p) {
  if (!p) throw std::bad_alloc();
  int64_t n = static_cast<int64_t>(malloc_usable_size(p));
  int64_t live = g_live.fetch_add(n, std::memory_order_relaxed) + n;
  g_total.fetch_add(n, std::memory_order_relaxed);
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
  return p;
}

void Uncounted(void* p) {
  if (!p) return;
  g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}

void* Aligned(size_t n, std::align_val_t a) {
  size_t align = std::max(static_cast<size_t>(a), sizeof(void*));
  return std::aligned_alloc(align, (n + align - 1) / align * align);
}

}  // namespace

void* operator new(size_t n) { return Counted(std::malloc(n ? n : 1)); }
void* operator new[](size_t n) { return Counted(std::malloc(n ? n : 1)); }
void* operator new(size_t n, std::align_val_t a) { return Counted(Aligned(n ? n : 1, a)); }
void* operator new[](size_t n, std::align_val_t a) { return Counted(Aligned(n ? n : 1, a)); }
void operator delete(void* p) noexcept { Uncounted(p); }
void operator delete[](void* p) noexcept { Uncounted(p); }
void operator delete(void* p, size_t) noexcept { Uncounted(p); }
void operator delete[](void* p, size_t) noexcept { Uncounted(p); }
void operator delete(void* p, std::align_val_t) noexcept { Uncounted(p); }
void operator delete[](void* p, std::align_val_t) noexcept { Uncounted(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { Uncounted(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { Uncounted(p); }

namespace kiln {
namespace {

//===--- Generated graphs -------------------------------------------------===//

Type F32(std::vector<int64_t> dims) { return Type::Tensor(DType::kF32, Shape::Static(dims)); }

Node* Op(Graph& g, const char* op, std::vector<Value*> ins) { return g.AddNode(op, std::move(ins), 1); }
Value* Out(Graph& g, const char* op, std::vector<Value*> ins) { return Op(g, op, std::move(ins))->output(0); }

// Elementwise nodes in a chain, each with its own scalar constant (a few
// distinct values); every 16th node adds a constant-only product.
Model Chain(int n) {
  Model m;
  Graph& g = *m.graph;
  Value* cur = g.AddInput("x", F32({8, 32}));
  static const char* kOps[] = {"Add", "Mul", "Relu", "Sub", "Neg", "Mul"};
  for (int i = 0; static_cast<int>(g.num_nodes()) < n; ++i) {
    const char* op = kOps[i % 6];
    if (op[0] == 'R' || op[0] == 'N') {
      cur = Out(g, op, {cur});
      continue;
    }
    Value* c = g.AddConstant(absl::StrCat("c", i), Tensor::Scalar<float>(1.0f + static_cast<float>(i % 5) * 0.25f));
    if (i % 16 == 0) {
      Value* d = g.AddConstant(absl::StrCat("d", i), Tensor::Scalar<float>(0.5f));
      c = Out(g, "Mul", {c, d});
    }
    cur = Out(g, op, {cur, c});
  }
  g.AddOutput(cur);
  return m;
}

// Diamonds: a value read by two nodes that join again; every diamond also
// repeats one of its nodes (cse) and leaves one dead (dce).
Model Diamond(int n) {
  Model m;
  Graph& g = *m.graph;
  Value* cur = g.AddInput("x", F32({8, 32}));
  Value* half = g.AddConstant("half", Tensor::Scalar<float>(0.5f));
  for (int i = 0; static_cast<int>(g.num_nodes()) < n; ++i) {
    Value* a = Out(g, "Relu", {cur});
    Value* b = Out(g, "Mul", {cur, half});
    Value* a2 = Out(g, "Relu", {cur});  // same as a
    Out(g, "Neg", {b});                   // dead
    Value* s = Out(g, "Add", {a, b});
    cur = Out(g, "Sub", {s, a2});
  }
  g.AddOutput(cur);
  return m;
}

// Blocks as a PyTorch export writes them (about 16 nodes each).
Model PyTorchLike(int n) {
  Model m;
  Graph& g = *m.graph;
  const int64_t rows = 4, cols = 16;
  Value* cur = g.AddInput("x", F32({rows, cols}));
  Value* zero = g.AddConstant("zero", Tensor::Scalar<int64_t>(0));
  Value* axes0 = g.AddConstant("axes0", Tensor::FromVector<int64_t>({0}, {1}));
  Value* minus1 = g.AddConstant("minus1", Tensor::FromVector<int64_t>({-1}, {1}));
  std::vector<float> wdata(cols * cols);
  for (size_t k = 0; k < wdata.size(); ++k) wdata[k] = static_cast<float>(k % 7) * 0.01f;
  for (int i = 0; static_cast<int>(g.num_nodes()) < n; ++i) {
    Value* w = g.AddConstant(absl::StrCat("layer", i, ".weight"), Tensor::FromVector<float>(wdata, {cols, cols}));
    Value* bias = g.AddConstant(absl::StrCat("layer", i, ".bias"), Tensor::FromVector<float>(std::vector<float>(cols, 0.1f), {cols}));
    Value* c1 = g.AddConstant(absl::StrCat("s", i), Tensor::FromVector<float>(std::vector<float>(cols, 2.0f), {cols}));
    Value* c2 = g.AddConstant(absl::StrCat("t", i), Tensor::FromVector<float>(std::vector<float>(cols, 0.5f), {cols}));
    // Shape plumbing: reshape to [rows, -1] with the row count read back.
    Value* shape = Out(g, "Shape", {cur});
    Node* gather = Op(g, "Gather", {shape, zero});
    gather->SetAttr("axis", Attribute::Int(0));
    Value* rows_v = Out(g, "Unsqueeze", {gather->output(0), axes0});
    Node* cat = Op(g, "Concat", {rows_v, minus1});
    cat->SetAttr("axis", Attribute::Int(0));
    Value* r = Out(g, "Reshape", {cur, cat->output(0)});
    // Linear layer, activation, residual.
    Value* mm = Out(g, "MatMul", {r, w});
    Value* b = Out(g, "Add", {mm, bias});
    Value* a = Out(g, "Relu", {b});
    Value* a2 = Out(g, "Relu", {b});  // a duplicate
    Value* res = Out(g, "Add", {a, cur});
    Value* k = Out(g, "Mul", {c1, c2});  // constant-only
    Value* o = Out(g, "Mul", {res, k});
    Value* id = Out(g, "Identity", {o});
    Out(g, "Neg", {o});  // dead
    cur = Out(g, "Add", {id, a2});
  }
  g.AddOutput(cur);
  return m;
}

using Generator = Model (*)(int);

struct GeneratorInfo {
  const char* name;
  Generator make;
};
const GeneratorInfo kGenerators[] = {{"chain", Chain}, {"diamond", Diamond}, {"pytorch", PyTorchLike}};

//===--- Running ----------------------------------------------------------===//

int64_t MinorFaults() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

// The heap in use, and the graphs' slab chunks mapped outside it.
int64_t HeapInUse() {
  struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd + ir_internal::MappedChunkBytes());
}

void RunPipeline(Model& m, const std::string& spec) {
  if (spec.empty()) return;
  PassManager pm;
  if (!pm.AddPipeline(spec).ok()) std::abort();
  auto changed = pm.Run(m);
  if (!changed.ok()) std::abort();
}

// Times `pipeline` on a fresh graph from `gen` of `n` nodes, after
// `before` (untimed).
void Measure(benchmark::State& state, Generator gen, const std::string& before, const std::string& pipeline) {
  int n = static_cast<int>(state.range(0));
  int64_t nodes_before = 0, nodes_after = 0, peak = 0, total = 0, heap = 0, graph_heap = 0, faults = 0;
  double timed_ns = 0;
  const bool print_timing = std::getenv("KILN_BENCH_TIMING") != nullptr;
  for (auto _ : state) {
    state.PauseTiming();
    int64_t empty_heap = HeapInUse();
    Model m = gen(n);
    RunPipeline(m, before);
    nodes_before = static_cast<int64_t>(m.graph->num_nodes());
    PassManager pm;
    if (!pm.AddPipeline(pipeline).ok()) std::abort();
    int64_t live0 = g_live.load();
    g_peak.store(live0);
    int64_t total0 = g_total.load();
    int64_t mapped0 = static_cast<int64_t>(ir_internal::MappedChunkBytes());
    int64_t heap0 = HeapInUse();
    graph_heap = heap0 - empty_heap;
    state.ResumeTiming();
    int64_t faults0 = MinorFaults();
    auto start = std::chrono::steady_clock::now();
    auto changed = pm.Run(m);
    timed_ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    faults = MinorFaults() - faults0;
    state.PauseTiming();
    if (print_timing) std::fprintf(stderr, "%s\n", pm.TimingReport().c_str());
    if (!changed.ok()) {
      state.SkipWithError(std::string(changed.status().message()).c_str());
      break;
    }
    // Slab chunks the pass mapped count as held to the end and allocated.
    const int64_t mapped = std::max<int64_t>(0, static_cast<int64_t>(ir_internal::MappedChunkBytes()) - mapped0);
    peak = g_peak.load() - live0 + mapped;
    total = g_total.load() - total0 + mapped;
    heap = HeapInUse() - heap0;
    nodes_after = static_cast<int64_t>(m.graph->num_nodes());
    // Destroy the graph untimed: only the passes are measured.
    m.graph.reset();
    state.ResumeTiming();
  }
  constexpr double kMiB = 1 << 20;
  state.counters["nodes"] = static_cast<double>(nodes_before);
  state.counters["nodes_after"] = static_cast<double>(nodes_after);
  state.counters["peak_MiB"] = static_cast<double>(peak) / kMiB;
  state.counters["alloc_MiB"] = static_cast<double>(total) / kMiB;
  state.counters["heap_MiB"] = static_cast<double>(heap) / kMiB;
  state.counters["graph_MiB"] = static_cast<double>(graph_heap) / kMiB;
  state.counters["faults"] = static_cast<double>(faults);
  if (state.iterations() > 0)
    state.counters["us_per_node"] = timed_ns / 1e3 / static_cast<double>(state.iterations()) / n;
}

// What each pass normally follows in the default pipeline.
struct PassCase {
  const char* pass;
  const char* before;
};
const PassCase kPasses[] = {
    {"infer-shapes", ""},
    {"fold-constants", "infer-shapes"},
    {"simplify", "infer-shapes,fold-constants,infer-shapes"},
    {"eliminate-dead-branches", "infer-shapes"},
    {"cse", "infer-shapes,fold-constants,infer-shapes,simplify"},
    {"dce", "infer-shapes,fold-constants,infer-shapes,simplify,cse"},
    {"fold-batchnorm", "infer-shapes"},
    {"dedup-constants", "infer-shapes,fold-constants,infer-shapes,simplify,cse,dce"},
    {"recognize-composites", "default"},
    {"form-fusion-groups", "default"},
};

// Repetitions also report their minimum: on a machine shared with other
// work the fastest run is the steadiest estimate of what the work costs.
benchmark::internal::Benchmark* WithMin(benchmark::internal::Benchmark* b) {
  return b->ComputeStatistics("min", [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
  });
}

void RegisterAll() {
  const std::vector<int64_t> sizes = {1000, 10000, 100000};
  for (const GeneratorInfo& gen : kGenerators) {
    for (const char* pipeline : {"default", "default,form-fusion-groups"}) {
      auto* b = benchmark::RegisterBenchmark(
          absl::StrCat("Pipeline/", pipeline, "/", gen.name).c_str(),
          [gen, pipeline](benchmark::State& s) { Measure(s, gen.make, "", pipeline); });
      for (int64_t n : sizes) b->Arg(n);
      WithMin(b)->Unit(benchmark::kMillisecond)->MinTime(0.5);
    }
  }
  for (const GeneratorInfo& gen : kGenerators) {
    auto* b = benchmark::RegisterBenchmark(absl::StrCat("Scaling/default/", gen.name).c_str(),
                                           [gen](benchmark::State& s) { Measure(s, gen.make, "", "default"); });
    for (int64_t n : {5000, 7500, 10000, 12500, 15000, 20000, 30000, 50000, 100000}) b->Arg(n);
    WithMin(b)->Unit(benchmark::kMillisecond)->MinTime(0.5);
  }
  // KILN_BENCH_PIPELINE=SPEC (and KILN_BENCH_BEFORE=SPEC, run untimed
  // first) adds Custom/GRAPH/N: any pipeline on the generated graphs.
  if (const char* spec = std::getenv("KILN_BENCH_PIPELINE")) {
    const char* before_env = std::getenv("KILN_BENCH_BEFORE");
    std::string pipeline = spec, before = before_env ? before_env : "";
    for (const GeneratorInfo& gen : kGenerators) {
      auto* b = benchmark::RegisterBenchmark(
          absl::StrCat("Custom/", gen.name).c_str(),
          [gen, pipeline, before](benchmark::State& s) { Measure(s, gen.make, before, pipeline); });
      for (int64_t n : sizes) b->Arg(n);
      WithMin(b)->Unit(benchmark::kMillisecond)->MinTime(0.5);
    }
  }
  // A pass alone can take microseconds while building its graph and
  // running what precedes it (untimed) takes milliseconds: a minimum
  // time would run it for thousands of untimed iterations, so the count
  // is fixed per size instead.
  for (const PassCase& p : kPasses) {
    for (const GeneratorInfo* gen : {&kGenerators[0], &kGenerators[1], &kGenerators[2]}) {
      for (int64_t n : sizes) {
        auto* b = benchmark::RegisterBenchmark(
            absl::StrCat("Pass/", p.pass, "/", gen->name).c_str(),
            [gen, p](benchmark::State& s) { Measure(s, gen->make, p.before, p.pass); });
        WithMin(b->Arg(n))->Unit(benchmark::kMillisecond)->Iterations(n <= 1000 ? 200 : n <= 10000 ? 40 : 8);
      }
    }
  }
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  kiln::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
