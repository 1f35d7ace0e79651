//===- npusim_compile.cc - Compiling a model for the simulated NPU ---------===//
#include "target/npusim/npusim_compile.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/text_format.h"
#include "graph/exec/executor.h"
#include "graph/ir/printer.h"
#include "graph/ops/matmul.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/form_fusion_groups.h"
#include "graph/passes/narrow_precision.h"
#include "graph/passes/fusion/outline.h"
#include "graph/passes/rewrite_helpers.h"
#include "graph/support/status.h"
#include "sim/isa/encode.h"
#include "sim/machine/machine.h"
#include "target/artifact/artifact_io.h"
#include "runtime/step_loop.h"
#include "target/backend/attention_mask.h"
#include "target/backend/copy_pieces.h"
#include "target/backend/donation.h"
#include "target/backend/memory_plan.h"
#include "target/backend/allreduce_buckets.h"
#include "target/npusim/kernels/cube.h"
#include "target/npusim/kernels/cube_img2col.h"
#include "target/npusim/kernels/cube_matmul.h"
#include "target/npusim/kernels/move.h"
#include "target/npusim/kernels/vector.h"
#include "target/npusim/expand_training_batchnorm.h"
#include "target/npusim/l2_prefetch_plan.h"
#include "target/npusim/split_reductions.h"
#include "target/precision.h"

namespace kiln::target {
namespace {

using artifact::Buffer;
using npusim::GeneratedKernel;

constexpr int64_t kAlignment = 512;

absl::StatusOr<sim::Machine> MachineFromOptions(const CompileOptions& options, const Target& target) {
  KILN_RETURN_IF_ERROR(CheckSettings(options, target.description()));
  if (std::string machine = options.Setting("machine"); !machine.empty()) return sim::LoadMachine(machine);
  return sim::DefaultMachine();
}

bool IsAllReduce(const Node& n) { return n.domain() == "kiln" && n.op() == "AllReduce"; }

// The compile-time estimate of a compute task's cycles: its kernel's
// estimate, or an AICPU task's cost in core cycles.
double EstimatedTaskCycles(const artifact::Task& t, const sim::Machine& m) {
  if (t.has_kernel()) return t.estimated_cycles();
  return t.has_aicpu() ? sim::AicpuTaskCycles(m, t.aicpu().ops()) : 0;
}

// A value lives in device memory when its size is known at compile time.
bool OnDevice(const Value* v) {
  const Type& t = v->type();
  return t.is_tensor() && t.shape().ranked() && t.shape().is_static() && t.dtype() != DType::kString &&
         t.dtype() != DType::kUndefined;
}

bool IsView(const Node& n) {
  if (!n.domain().empty()) return false;
  bool view = IsOneOf(n, kViewOps);
  // Dropout is an identity only in inference (training mode draws random numbers).
  if (n.op() == "Dropout") view = !IsNondeterministicOp(n) && (n.num_outputs() == 1 || !n.output(1)->has_uses());
  if (!view || !n.input(0)) return false;
  const Value* in = n.input(0);
  const Value* out = n.output(0);
  return OnDevice(in) && OnDevice(out) && in->type().dtype() == out->type().dtype() && npusim::StaticBytes(in->type()) == npusim::StaticBytes(out->type());
}

absl::StatusOr<GeneratedKernel> Generate(const std::string& engine, const Node& n, const sim::Machine& machine,
                                         const CompileOptions& options, bool want_tile_ir = false,
                                         const absl::flat_hash_set<const Value*>* c1hwc0 = nullptr,
                                         bool in_place = false) {
  npusim::KernelRequest req;
  req.node = &n;
  req.in_place = in_place;
  req.machine = &machine;
  req.fp16_matrix = options.precision == Precision::kFp16;
  req.want_tile_ir = want_tile_ir;
  if (c1hwc0 && n.num_inputs() > 0 && n.num_outputs() > 0) {
    req.x_c1hwc0 = c1hwc0->contains(n.input(0));
    req.y_c1hwc0 = c1hwc0->contains(n.output(0));
  }
  if (engine == "cube") return npusim::GenerateCubeKernel(req);
  if (engine == "vector") {
    if (HasCopyPieces(n) || npusim::IsIndexedMove(n)) return npusim::GenerateMoveKernel(req);
    return npusim::GenerateVectorKernel(req);
  }
  return absl::InvalidArgumentError(absl::StrCat("no kernel generator for engine '", engine, "'"));
}

// Ops that compute each element from the same element of their inputs (of
// the output's shape) or from scalars, on the vector unit or the AICPU
// alike: they give the same bytes whatever order the elements are stored
// in, so NC1HWC0 passes through them.
bool OrderBlind(const Node& n) {
  static constexpr const char* kOps[] = {"Relu", "Clip", "Add", "Sub", "Mul", "Max", "Min", "Abs", "Neg"};
  if (!IsOneOf(n, kOps) || n.num_outputs() != 1 || !n.output(0)->type().is_tensor()) return false;
  const Type& out = n.output(0)->type();
  for (const Value* v : n.inputs()) {
    if (!v) continue;
    const Type& t = v->type();
    if (t.is_tensor() && t.shape() == out.shape() && t.dtype() == out.dtype()) continue;
    if (t.is_tensor() && t.shape().NumElements() == 1) continue;  // a scalar
    return false;
  }
  return true;
}

// Whether values of `t` may be kept in NC1HWC0: f16 (16 channels a block)
// and f32 (8).
bool C1hwc0Type(DType t) { return t == DType::kF16 || t == DType::kF32; }

// The values kept in NC1HWC0 between convolutions: groups of f16 or f32 4-D values
// joined through OrderBlind ops, whose channels are whole blocks of 16,
// produced only by such ops and by Convs that run through img2col, and used
// only by such ops and as the input of such Convs (never a graph output, a
// view or another kernel). Each Conv then reads its band into L1 as it is
// and writes its tiles in blocks, where NCHW takes a conversion through UB
// and a workspace on the way in and a transpose on the way out. A pointwise
// Conv that is a GEMM on NCHW (stride 1) runs slower through img2col unless
// it is spared the conversion: it keeps a group in NC1HWC0 only when its
// other tensor is in NC1HWC0 too.
absl::flat_hash_set<const Value*> ChooseC1hwc0(const Graph& g, const sim::Machine& machine) {
  enum Kind { kNo, kImg2col, kGemm };  // how a Conv that can run through img2col otherwise runs
  struct Conv {
    Kind kind = kNo;
    const Value* x = nullptr;    // the image
    const Value* res = nullptr;  // a fused residual, in the output's layout
  };
  absl::flat_hash_map<const Node*, Conv> convs;
  // A Conv, or a kiln.Fused group of one and its epilogue (ConvOperandsOf).
  auto conv_of = [&](const Node* n) -> Conv {
    const bool fused = n && n->domain() == "kiln" && n->op() == "Fused";
    if (!n || !(fused || (n->domain().empty() && n->op() == "Conv")) || !n->input(0)) return Conv{};
    auto [it, fresh] = convs.try_emplace(n);
    if (fresh) {
      absl::StatusOr<npusim::ConvOperands> ops = npusim::ConvOperandsOf(*n);
      if (!ops.ok()) return it->second;
      const Type& x = ops->x->type();
      const Type& y = ops->y->type();
      if (x.is_tensor() && y.is_tensor() && C1hwc0Type(x.dtype()) && y.dtype() == x.dtype() &&
          npusim::Img2ColConvRuns(*n, machine, 0).ok()) {
        // A pointwise Conv is a GEMM on NCHW, and so is one whose epilogue
        // reads no residual (the GEMM and a vector kernel over its result,
        // where the GEMM does not take the epilogue); with a residual, img2col
        // reads it tile by tile in the output's layout.
        const bool gemm = npusim::GemmSpecOfNode(*ops->conv, 0).ok() && (ops->steps.empty() || !ops->res);
        it->second = {gemm ? kGemm : kImg2col, ops->x, ops->res};
      }
    }
    return it->second;
  };
  auto runs_img2col = [&](const Node* n) { return conv_of(n).kind != kNo; };
  // A global pool of f16 reads NC1HWC0 as [N, C/16, H*W, 16] and writes
  // [N, C, 1, 1], the same bytes in either layout.
  auto pools_c1hwc0 = [&](const Node* n) {
    if (!n || !n->domain().empty() || (n->op() != "GlobalAveragePool" && n->op() != "GlobalMaxPool")) return false;
    npusim::KernelRequest req;
    req.node = n;
    req.machine = &machine;
    req.x_c1hwc0 = true;
    return C1hwc0Type(n->input(0)->type().dtype()) && npusim::GenerateVectorKernel(req).ok();
  };
  // Union-find over the candidate values, in node order.
  std::vector<const Value*> values;
  absl::flat_hash_map<const Value*, int> id;
  std::vector<int> parent;
  auto find = [&](int i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  auto add = [&](const Value* v) {
    auto [it, fresh] = id.try_emplace(v, static_cast<int>(values.size()));
    if (fresh) {
      values.push_back(v);
      parent.push_back(it->second);
    }
    return it->second;
  };
  for (const Node* n : g.nodes()) {
    if (runs_img2col(n)) {
      add(conv_of(n).x);
      const int o = add(n->output(0));
      if (const Value* r = conv_of(n).res) parent[find(add(r))] = find(o);
    } else if (OrderBlind(*n)) {
      int o = add(n->output(0));
      for (const Value* v : n->inputs())
        if (v && v->type().shape() == n->output(0)->type().shape()) parent[find(add(v))] = find(o);
    }
  }
  std::vector<bool> bad(values.size(), false);
  for (size_t i = 0; i < values.size(); ++i) {
    const Value* v = values[i];
    const Type& t = v->type();
    bool ok = !v->is_input() && !v->is_constant() && t.is_tensor() && C1hwc0Type(t.dtype()) &&
              t.shape().is_static() && t.shape().rank() == 4 && t.shape()[1].value() % 16 == 0;
    const Node* p = v->producer();
    ok = ok && p && ((runs_img2col(p) && p->output(0) == v) || OrderBlind(*p));
    for (const Use& u : v->uses()) {
      const Node* n = u.user;
      ok = ok && n &&
           ((runs_img2col(n) && (v == conv_of(n).x || v == conv_of(n).res)) || (pools_c1hwc0(n) && u.index == 0) ||
            (OrderBlind(*n) && v->type().shape() == n->output(0)->type().shape()));
    }
    if (!ok) bad[find(static_cast<int>(i))] = true;
  }
  // GEMM Convs with one tensor left in NCHW give up the other, to a fixpoint.
  auto kept = [&](const Value* v) { return id.contains(v) && !bad[find(id.at(v))]; };
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [n, conv] : convs) {
      if (conv.kind != kGemm || kept(conv.x) == kept(n->output(0))) continue;
      bad[find(id.at(kept(conv.x) ? conv.x : n->output(0)))] = true;
      changed = true;
    }
  }
  absl::flat_hash_set<const Value*> chosen;
  for (const Value* v : values)
    if (kept(v)) chosen.insert(v);
  return chosen;
}

// Whether the kernel of `n` reads its first input or writes its first
// output in NC1HWC0 (KernelRequest::x_c1hwc0, y_c1hwc0).
bool TouchesC1hwc0(const Node& n, const absl::flat_hash_set<const Value*>& c1hwc0) {
  return n.num_inputs() > 0 && n.num_outputs() > 0 && (c1hwc0.contains(n.input(0)) || c1hwc0.contains(n.output(0)));
}

// Constants laid out as fractals for the kernels that read them so
// (npusim::FractalConstant): one new graph constant per constant and layout,
// named after it, computed once at compile time.
class FractalConstants {
 public:
  const Value* Get(Graph& g, const Value& v, const npusim::FractalConstant& f) {
    auto key = std::make_tuple(&v, f.rows, f.cols, f.transpose, f.conv_weight);
    auto it = made_.find(key);
    if (it != made_.end()) return it->second;
    const Value* laid = g.AddConstant(g.UniqueName(absl::StrCat(v.name(), ".nz")), npusim::FractalImage(v.constant(), f));
    made_.emplace(key, laid);
    return laid;
  }

 private:
  absl::flat_hash_map<std::tuple<const Value*, int64_t, int64_t, bool, bool>, const Value*> made_;
};

// The buffers of a compilation, one per graph value that has storage.
class BufferTable {
 public:
  explicit BufferTable(artifact::NpusimModule* module) : module_(module) {}

  int Get(const Value* v) const {
    auto it = index_.find(v);
    return it == index_.end() ? -1 : it->second;
  }

  int Add(const Value* v, Buffer::Kind kind) {
    if (int i = Get(v); i >= 0) return i;
    int i = AddRaw(v->name(), OnDevice(v) ? kind : Buffer::HOST, v->type());
    index_[v] = i;
    return i;
  }

  int AddWorkspace(const std::string& name, int64_t bytes) {
    int i = module_->buffers_size();
    Buffer* b = module_->add_buffers();
    b->set_name(name);
    b->set_kind(Buffer::WORKSPACE);
    b->set_bytes(bytes);
    b->set_dtype("i8");
    b->add_dims(bytes);
    life_.push_back({0, 0});
    alias_.push_back(-1);
    return i;
  }

  // `alias` reads the same bytes as `of`.
  void Alias(const Value* alias, const Value* of) {
    int i = AddRaw(alias->name(), module_->buffers(Get(of)).kind() == Buffer::CONSTANT ? Buffer::CONSTANT
                                                                                         : Buffer::INTERMEDIATE,
                   alias->type());
    alias_[i] = Get(of);
    module_->mutable_buffers(i)->set_alias_of(alias_[i]);
    index_[alias] = i;
  }

  void Touch(int buffer, int task) {
    if (buffer < 0) return;
    auto& [first, last] = life_[buffer];
    if (first < 0 || task < first) first = task;
    last = std::max(last, task);
  }

  int Root(int i) const {
    while (alias_[i] >= 0) i = alias_[i];
    return i;
  }

  // Places every device buffer; `num_tasks` is the end of the run.
  void Plan(int num_tasks) {
    const int n = module_->buffers_size();
    // Inputs, outputs and constants hold their bytes for the whole run;
    // an alias keeps its root alive as long as it is read.
    for (int i = 0; i < n; ++i) {
      Buffer::Kind k = module_->buffers(i).kind();
      if (k == Buffer::INPUT || k == Buffer::OUTPUT || k == Buffer::CONSTANT) {
        Touch(i, 0);
        Touch(i, num_tasks);
      }
      if (life_[i].first < 0) life_[i] = {0, 0};
    }
    // Graph inputs and outputs that are views of other buffers keep those
    // buffers alive as long as they themselves are.
    for (int b : module_->input_buffers()) Touch(b, 0), Touch(b, num_tasks);
    for (int b : module_->output_buffers()) Touch(b, 0), Touch(b, num_tasks);
    for (int i = 0; i < n; ++i) {
      if (alias_[i] < 0) continue;
      int r = Root(i);
      Touch(r, life_[i].first);
      Touch(r, life_[i].second);
    }
    std::vector<BufferLife> lives;
    std::vector<int> which;
    int64_t constant_end = 0;
    for (int i = 0; i < n; ++i) {
      Buffer* b = module_->mutable_buffers(i);
      if (alias_[i] >= 0 || b->kind() == Buffer::HOST) continue;
      if (b->kind() == Buffer::CONSTANT) {
        b->set_offset(constant_end);
        constant_end += (std::max<int64_t>(b->bytes(), 1) + kAlignment - 1) / kAlignment * kAlignment;
        continue;
      }
      lives.push_back({b->bytes(), life_[i].first, life_[i].second});
      which.push_back(i);
    }
    module_->set_constant_bytes(constant_end);
    MemoryPlan plan = PlanMemory(lives, kAlignment);
    for (size_t j = 0; j < which.size(); ++j) module_->mutable_buffers(which[j])->set_offset(plan.offsets[j]);
    for (int i = 0; i < n; ++i) {
      if (module_->buffers(i).kind() == Buffer::HOST) module_->mutable_buffers(i)->set_offset(-1);
      else if (alias_[i] >= 0) module_->mutable_buffers(i)->set_offset(module_->buffers(Root(i)).offset());
    }
    module_->set_device_bytes(plan.peak_bytes);
    module_->set_naive_bytes(plan.naive_bytes);
  }

 private:
  int AddRaw(const std::string& name, Buffer::Kind kind, const Type& type) {
    int i = module_->buffers_size();
    Buffer* b = module_->add_buffers();
    b->set_name(name);
    b->set_kind(kind);
    b->set_dtype(std::string(DTypeName(type.dtype())));
    if (type.is_tensor() && type.shape().ranked())
      for (const Dim& d : type.shape().dims()) b->add_dims(d.is_static() ? d.value() : -1);
    if (kind != Buffer::HOST) b->set_bytes(npusim::StaticBytes(type));
    life_.push_back({-1, -1});
    alias_.push_back(-1);
    return i;
  }

  artifact::NpusimModule* module_;
  absl::flat_hash_map<const Value*, int> index_;
  std::vector<std::pair<int, int>> life_;
  std::vector<int> alias_;
};

// Groups the AllReduce tasks into buckets (target/backend/allreduce_buckets.h)
// and keeps their buffers alive while the links may touch them: a bucket
// runs on its own stream, from the end of the last task that produces one
// of its inputs (`after`) to the first compute task that reads one of its
// outputs (`before`), so its inputs live until `before` and its outputs
// from `after`.
absl::Status PlanAllReduceBuckets(artifact::NpusimModule& module, const std::vector<int>& collectives, int replicas,
                                  const std::string& strategy, const sim::Machine& machine,
                                  const absl::flat_hash_map<int, int>& first_read, BufferTable& buffers) {
  if (collectives.empty()) {
    if (!strategy.empty())
      return absl::InvalidArgumentError("--buckets applies to data-parallel steps (kiln.AllReduce nodes, made by "
                                        "`kiln opt --passes=training-step,default --replicas=N`); this model has none");
    module.set_replicas(1);
    return absl::OkStatus();
  }
  module.set_replicas(replicas);
  KILN_ASSIGN_OR_RETURN(std::string s, ParseBucketStrategy(strategy.empty() ? "search" : strategy));
  module.set_buckets(s);
  // When each compute task ends, by the estimates, if they ran back to back.
  std::vector<double> end(module.tasks_size(), 0);
  double clock = 0;
  for (int t = 0; t < module.tasks_size(); ++t) end[t] = clock += EstimatedTaskCycles(module.tasks(t), machine);
  std::vector<int> order = collectives;
  auto after = [&](int t) { return module.tasks(t).collective().after(); };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return after(a) < after(b); });
  std::vector<AllReduceItem> items;
  for (int t : order) items.push_back({module.tasks(t).collective().bytes(), after(t) < 0 ? 0 : end[after(t)]});
  KILN_ASSIGN_OR_RETURN(std::vector<PlannedBucket> plan,
                        PlanBuckets(s, items, [&](int64_t bytes) { return sim::AllReduceCycles(machine, bytes, replicas); }));
  const int last = module.tasks_size();
  for (const PlannedBucket& p : plan) {
    artifact::Bucket* b = module.add_bucket_plan();
    int start_after = -1, before = last;
    for (int i : p.items) {
      const int t = order[i];
      b->add_tasks(t);
      start_after = std::max(start_after, after(t));
      for (int o : module.tasks(t).collective().outputs())
        if (auto it = first_read.find(buffers.Root(o)); it != first_read.end()) before = std::min(before, it->second);
    }
    b->set_bytes(p.bytes);
    b->set_after(start_after);
    b->set_before(before == last ? -1 : before);
    b->set_estimated_start(p.start);
    b->set_estimated_end(p.end);
    for (int i : p.items) {
      const artifact::CollectiveTask& c = module.tasks(order[i]).collective();
      for (int in : c.inputs()) buffers.Touch(in, before);
      for (int out : c.outputs()) buffers.Touch(out, std::max(start_after, 0));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> NpusimTileIr(const Node& node, const Target& target, const CompileOptions& options) {
  const std::string engine = target.Place(node, options).engine;
  if (engine != "cube") {
    return absl::NotFoundError(absl::StrCat("npusim runs it on the ", engine.empty() ? "no engine" : engine,
                                            " without a tile form"));
  }
  KILN_ASSIGN_OR_RETURN(sim::Machine machine, MachineFromOptions(options, target));
  // A kernel that cannot be generated is not an error here: compiling
  // splits the group back or moves the node to the AICPU.
  absl::StatusOr<GeneratedKernel> k = Generate(engine, node, machine, options, /*want_tile_ir=*/true);
  if (!k.ok()) return absl::NotFoundError(absl::StrCat("npusim's cube kernel: ", k.status().message()));
  // A program the tile IR does not express yet (a convolution's im2col, an
  // operand read through Transposes) is shown as what runs, its plan,
  // rather than as the shared lowering's form of the node, which it is not.
  if (k->tile_ir.empty())
    return absl::StrCat("// runs as: ", k->plan, "\n// (this cube program has no tile IR form yet)\n");
  return k->tile_ir;
}

namespace {

// The artifact's graph carries a constant's bytes only where they are read
// from it: by the host (an AICPU task, a nested graph, a graph output) or
// into device memory when the model loads (a CONSTANT buffer, found by
// name). A top-level constant that nothing reads any more (a weight that
// precision narrowing replaced) is dropped, and one that only AI-core
// kernels read, each through a copy of its own (a matrix operand's fractal
// re-layout), travels elided; otherwise every weight would be stored two
// or three times.
void DropHostlessConstants(Graph& g, const artifact::NpusimModule& module,
                           const absl::flat_hash_set<const Node*>& kernel_nodes) {
  absl::flat_hash_set<absl::string_view> loaded;
  for (const Buffer& b : module.buffers())
    if (b.kind() == Buffer::CONSTANT) loaded.insert(b.name());
  for (Value *c = g.first_constant(), *next = nullptr; c; c = next) {
    next = g.NextConstant(c);
    if (!c->constant_data() || loaded.contains(c->name())) continue;
    if (!c->has_uses()) {
      g.EraseValue(c);
      continue;
    }
    const auto uses = c->uses();
    if (std::all_of(uses.begin(), uses.end(), [&](const Use& u) { return u.user && kernel_nodes.contains(u.user); }))
      c->set_constant(Tensor());
  }
}

// The kernels a timing-only run computes too: those whose control flow
// reads data (`steering`: a task and the inputs of its node it reads), and,
// transitively, the kernel and AICPU tasks that produce what they read
// (through views; a graph input NAME that a step output NAME.next feeds in
// a loop leads to that output's producer). Each is marked in its KernelTask
// or AicpuTask, and its plan says so.
void MarkComputedInTimingOnlyRuns(artifact::NpusimModule& module, const Graph& g,
                                  const std::vector<const Node*>& task_nodes,
                                  const absl::flat_hash_map<const Value*, int>& producer_task,
                                  const std::vector<std::pair<int, std::vector<int>>>& steering) {
  if (steering.empty()) return;
  absl::flat_hash_map<const Value*, const Value*> fed;  // input NAME -> the step output NAME.next
  for (const auto& [input, output] : runtime::StepFeedValues(g)) fed[input] = output;
  std::vector<const Value*> work;
  absl::flat_hash_set<const Value*> seen_values;
  absl::flat_hash_set<int> marked;
  auto mark = [&](int t, const std::string& why) {
    if (!marked.insert(t).second) return;
    artifact::Task* task = module.mutable_tasks(t);
    if (task->has_kernel()) task->mutable_kernel()->set_computes_in_timing_only(true);
    else if (task->has_aicpu()) task->mutable_aicpu()->set_computes_in_timing_only(true);
    else return;
    task->set_plan(absl::StrCat(task->plan(), task->plan().empty() ? "" : "; ", why));
  };
  for (const auto& [t, inputs] : steering) {
    mark(t, "computed in timing-only runs too: its control flow reads its mask's values");
    for (int i : inputs)
      if (i < static_cast<int>(task_nodes[t]->inputs().size()) && task_nodes[t]->input(i))
        work.push_back(task_nodes[t]->input(i));
  }
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    if (!v || !seen_values.insert(v).second) continue;
    auto it = producer_task.find(v);
    if (it == producer_task.end()) {
      if (auto f = fed.find(v); f != fed.end()) work.push_back(f->second);
      continue;
    }
    const int t = it->second;
    mark(t, "computed in timing-only runs too: a later kernel's control flow reads its values");
    for (const Value* in : task_nodes[t]->inputs()) work.push_back(in);
  }
}

}  // namespace

absl::StatusOr<artifact::Artifact> CompileForNpusim(const Model& input, const Target& target,
                                                    const CompileOptions& options) {
  KILN_ASSIGN_OR_RETURN(sim::Machine machine, MachineFromOptions(options, target));
  Model model = input.Clone();
  Graph& g = *model.graph;

  artifact::Artifact a;
  a.set_format_version(artifact::kArtifactFormatVersion);
  a.set_target("npusim");
  artifact::FillSignatures(g, &a);
  artifact::NpusimModule* module = a.mutable_npusim();
  {
    google::protobuf::TextFormat::Printer printer;
    std::string text;
    printer.PrintToString(machine, &text);
    module->set_machine(text);
  }
  module->set_precision(PrecisionName(options.precision));

  // Fused groups and composites (kiln.Attention, kiln.Gelu): kept whole
  // when their engine has a kernel for them, split back into their members
  // (expanded into the ONNX ops they stand for) otherwise, so the parts can
  // still run on the cube and the vector unit.
  // Under a narrow precision, groups are split back before the matrix ops
  // are narrowed and formed again after (below), so that the fused kernel
  // computes in the narrow type too and a memory-bound group takes the
  // Casts narrowing puts at its edges.
  const bool narrows = options.precision != Precision::kFp32;
  auto conv_group = [](const Node& n) {
    return n.domain() == "kiln" && n.op() == "Fused" && n.GetString("kind", "") == "conv-epilogue";
  };
  absl::flat_hash_map<const Node*, GeneratedKernel> kernels;
  bool narrowed = false;
  KILN_ASSIGN_OR_RETURN(const bool fused_attention, options.BoolSetting("fused-attention", true));
  auto attention = [](const Node* n) { return n->domain() == "kiln" && n->op() == "Attention"; };
  auto keep = [&](Node* n) {
    if (kernels.contains(n)) return true;
    if (attention(n)) {
      if (!fused_attention || !npusim::AttentionRunsFused(*n, machine)) return false;
      // An f32 attention waits for narrowing; its kernel is made after.
      if (narrows && !narrowed) return true;
      if (!npusim::AttentionRunsAsIs(*n)) return false;
      MakeAttentionMaskAdditive(g, n);
    }
    if (n->domain() == "kiln" && n->op() == "Fused" && (!options.fusion || (narrows && !narrowed)))
      return false;
    // A convolution's group that img2col runs needs only that answer here:
    // its kernel is made once the layouts of its tensors are chosen.
    if (conv_group(*n) && npusim::Img2ColConvRuns(*n, machine, 0).ok()) return true;
    auto k = Generate(target.Place(*n, options).engine, *n, machine, options);
    if (!k.ok()) return false;
    kernels[n] = *std::move(k);
    return true;
  };
  if (fusion::SplitBackKilnNodes(g, keep)) KILN_RETURN_IF_ERROR(InferShapes(g));
  if (narrows) {
    // The attentions kept whole compute narrow too, as the fused kernel does.
    if (options.precision == Precision::kFp16 || options.precision == Precision::kBf16)
      KILN_RETURN_IF_ERROR(NarrowMatrixOps(g, MatrixDType(options.precision), [&](const Node& n) {
                             return attention(&n) && n.output(0)->type().dtype() == DType::kF32 &&
                                    !npusim::AttentionRunsAsDecode(n);
                           }).status());
    else
      KILN_RETURN_IF_ERROR(NarrowForPrecision(g, options).status());
    narrowed = true;
    // Narrowing changes the dtypes of composites kept whole (a kiln.Gelu
    // between two GEMMs now reads and writes f16): their kernels are made
    // again for the types they now have.
    kernels.clear();
  }
  // Training-mode BatchNorms become the ops they stand for, and reductions
  // over axes the vector unit cannot take in one kernel (the per-channel
  // sums of {0, 2, 3}) become two it can.
  if (npusim::ExpandTrainingBatchNorm(g, machine) > 0) KILN_RETURN_IF_ERROR(InferShapes(g));
  if (npusim::SplitReductionsForVector(g) > 0) KILN_RETURN_IF_ERROR(InferShapes(g));
  // What was split back may group anew: an expanded attention's Transpose
  // of K with the MatMul that reads it, narrowed matrix ops with their
  // epilogues.
  fusion::PartitionOptions grouping;
  grouping.matrix_member = npusim::CubeTakesGroupMember;
  grouping.memory_member = npusim::VectorGroupTakes;
  if (options.fusion) FormFusionGroups(g, grouping);
  if (fusion::SplitBackKilnNodes(g, keep)) KILN_RETURN_IF_ERROR(InferShapes(g));

  const absl::flat_hash_set<const Value*> c1hwc0 = ChooseC1hwc0(g, machine);
  // Kernels generated while splitting back assumed NCHW.
  absl::erase_if(kernels, [&](const auto& kv) { return TouchesC1hwc0(*kv.first, c1hwc0); });
  // A pointwise Conv on NCHW tensors is a GEMM, faster than img2col with
  // its conversions: its group runs as the GEMM and vector kernels unless
  // the GEMM takes the whole epilogue (a Relu).
  bool inlined = false;
  for (Node* n : g.NodeList()) {
    if (!conv_group(*n) || TouchesC1hwc0(*n, c1hwc0)) continue;
    absl::StatusOr<npusim::ConvOperands> ops = npusim::ConvOperandsOf(*n);
    if (!ops.ok() || ops->steps.empty() || !npusim::GemmSpecOfNode(*ops->conv, 0).ok()) continue;
    kernels.erase(n);
    fusion::InlineFused(g, n);
    inlined = true;
  }
  if (inlined) KILN_RETURN_IF_ERROR(InferShapes(g));

  BufferTable buffers(module);
  for (const Value* v : g.inputs()) buffers.Add(v, Buffer::INPUT);
  // Step outputs NAME.next computed over their inputs NAME (a KV cache's
  // scatter writes its new positions only), so a loop copies nothing.
  absl::flat_hash_set<const Node*> in_place;
  {
    const std::vector<std::pair<const Value*, const Value*>> feeds = runtime::StepFeedValues(g);
    // An AICPU task reads its operands before it writes: in place too.
    for (const Donation& d : FindDonations(g, feeds, IsView, [](const Node& n, int input) {
           return npusim::WritesInPlace(n, input) && OnDevice(n.output(0));
         })) {
      buffers.Alias(d.output, d.input);
      module->mutable_buffers(buffers.Get(d.output))->set_donated(true);
      if (d.input_index == 0) in_place.insert(d.writer);
    }
  }
  for (const Value* v : g.outputs()) {
    if (v->is_constant()) buffers.Add(v, Buffer::CONSTANT);
    else if (v->producer() && !IsView(*v->producer())) buffers.Add(v, Buffer::OUTPUT);
  }

  FractalConstants fractals;
  absl::flat_hash_map<std::string, int> program_index;  // serialized program -> index
  // Data parallelism: the task that computes each value (a view: its
  // input's), the first compute task that reads each buffer (by root), and
  // the AllReduce tasks.
  absl::flat_hash_map<const Value*, int> producer_task;
  absl::flat_hash_map<int, int> first_read;
  std::vector<int> collectives;
  int replicas = 0;
  absl::flat_hash_set<const Node*> kernel_nodes;  // the nodes that run as AI-core kernels
  std::vector<const Node*> task_nodes;             // the node of each task
  std::vector<std::pair<int, std::vector<int>>> steering;  // kernel tasks whose control flow reads these inputs
  int node_index = -1;
  for (Node* n : g.nodes()) {
    ++node_index;
    const int t = module->tasks_size();
    artifact::Task* task = module->add_tasks();
    task_nodes.push_back(n);
    task->set_node(n->name().empty() ? (n->num_outputs() ? n->output(0)->name() : n->op()) : n->name());
    task->set_op(n->QualifiedOp());
    {
      const Attribute* body = n->domain() == "kiln" && n->op() == "Fused" ? n->attr("body") : nullptr;
      task->set_nodes(body && body->g() ? static_cast<int>(body->g()->num_nodes()) : 1);
      task->set_flops(NodeCost(*n).flops);
    }
    // A value read here; a view's read is not a compute task's (first_read).
    auto read = [&](const Value* v) {
      int b = v->is_constant() ? buffers.Add(v, Buffer::CONSTANT) : buffers.Add(v, Buffer::INTERMEDIATE);
      buffers.Touch(b, t);
      return b;
    };
    auto use = [&](const Value* v) {
      int b = read(v);
      first_read.emplace(buffers.Root(b), t);
      return b;
    };
    auto def = [&](const Value* v) {
      int b = buffers.Add(v, Buffer::INTERMEDIATE);
      buffers.Touch(b, t);
      producer_task[v] = t;
      return b;
    };

    if (IsAllReduce(*n)) {
      const int r = static_cast<int>(n->GetInt("replicas", 1));
      if (replicas && r != replicas)
        return absl::InvalidArgumentError(absl::StrCat("node '", task->node(), "' (kiln.AllReduce): ", r,
                                                       " replicas, but another AllReduce has ", replicas));
      replicas = r;
      task->set_engine("links");
      task->set_reason(absl::StrCat("a collective over the chip links: the mean over ", r, " chips"));
      artifact::CollectiveTask* ct = task->mutable_collective();
      int after = -1;
      int64_t bytes = 0;
      for (const Value* v : n->inputs()) {
        if (!v || !OnDevice(v))
          return absl::InvalidArgumentError(absl::StrCat("node '", task->node(),
                                                         "' (kiln.AllReduce): an input without a static shape"));
        if (auto it = producer_task.find(v); it != producer_task.end()) after = std::max(after, it->second);
        bytes += npusim::StaticBytes(v->type());
        ct->add_inputs(use(v));
      }
      for (const Value* v : n->outputs()) ct->add_outputs(def(v));
      ct->set_bytes(bytes);
      ct->set_after(after);
      collectives.push_back(t);
      continue;
    }

    if (IsView(*n) && buffers.Get(n->output(0)) < 0) {
      if (auto it = producer_task.find(n->input(0)); it != producer_task.end()) producer_task[n->output(0)] = it->second;
      read(n->input(0));
      buffers.Alias(n->output(0), n->input(0));
      buffers.Touch(buffers.Get(n->output(0)), t);
      task->set_engine("view");
      task->set_reason("a view of its input's bytes: nothing moves");
      continue;
    }

    Placement p = target.Place(*n, options);
    if (p.engine.empty())
      return absl::InvalidArgumentError(absl::StrCat("node '", task->node(), "' (", n->QualifiedOp(), "): ", p.reason));
    std::string engine = p.engine, reason = p.reason;
    absl::StatusOr<GeneratedKernel> kernel = absl::UnimplementedError("");
    if (engine == "cube" || engine == "vector") {
      if (auto it = kernels.find(n); it != kernels.end()) kernel = std::move(it->second);
      else kernel = Generate(engine, *n, machine, options, /*want_tile_ir=*/false, &c1hwc0, in_place.contains(n));
      if (!kernel.ok() && !OrderBlind(*n) && TouchesC1hwc0(*n, c1hwc0))
        return absl::InternalError(absl::StrCat("node '", task->node(), "': the kernel for an NC1HWC0 tensor: ",
                                                kernel.status().message()));
      if (!kernel.ok()) {
        const OpDef* opdef = OpRegistry::Global().Find(*n);
        if (!opdef || !opdef->kernel)
          return absl::InvalidArgumentError(absl::StrCat("node '", task->node(), "' (", n->QualifiedOp(), "): the ",
                                                         engine, " kernel cannot be generated (",
                                                         kernel.status().message(), ") and there is no AICPU kernel"));
        reason = absl::StrCat(engine, " kernel: ", kernel.status().message());
        engine = "aicpu";
      }
    } else if (engine != "aicpu") {
      reason = absl::StrCat("engine '", engine, "' runs on the AICPU here: ", reason);
      engine = "aicpu";
    }
    task->set_engine(engine);
    task->set_reason(reason);

    if (engine != "aicpu") {
      GeneratedKernel& k = *kernel;
      // The engine the kernel runs on (a decode-shaped attention placed on
      // the cube runs on the vector unit alone).
      if (!k.engine.empty() && k.engine != engine) {
        task->set_engine(k.engine);
        task->set_reason(absl::StrCat("placed on the ", engine, "; its kernel runs on the ", k.engine, " engine alone"));
      }
      kernel_nodes.insert(n);
      artifact::KernelTask* kt = task->mutable_kernel();
      size_t first_output = 0;
      std::vector<const Value*> args = npusim::LaunchValues(*n, k, &first_output);
      for (const npusim::FractalConstant& f : k.fractal_constants) {
        if (f.arg < 0 || f.arg >= static_cast<int>(args.size()) || !args[f.arg]->is_constant())
          return absl::InternalError(absl::StrCat("node '", task->node(), "': a fractal argument is not a constant"));
        args[f.arg] = fractals.Get(g, *args[f.arg], f);
      }
      for (size_t i = 0; i < args.size(); ++i) {
        bool output = i >= first_output && i < first_output + n->outputs().size();
        kt->add_args(output ? def(args[i]) : use(args[i]));
      }
      if (k.workspace_bytes > 0) {
        int w = buffers.AddWorkspace(absl::StrCat(task->node(), ".workspace"), k.workspace_bytes);
        buffers.Touch(w, t);
        kt->add_args(w);
      }
      sim::isa::Program proto = sim::ToProto(k.program);
      std::string key;
      proto.SerializeToString(&key);
      auto [it, inserted] = program_index.emplace(key, module->programs_size());
      if (inserted) *module->add_programs() = std::move(proto);
      kt->set_program(it->second);
      kt->set_block_dim(k.block_dim);
      if (!k.steering_inputs.empty()) steering.emplace_back(t, k.steering_inputs);
      task->set_estimated_cycles(k.estimated_cycles);
      task->set_plan(k.plan);
      continue;
    }

    artifact::AicpuTask* at = task->mutable_aicpu();
    at->set_node(node_index);
    for (const Value* v : NodeOperands(*n)) at->add_operands(use(v));
    for (Value* v : n->outputs()) at->add_outputs(v->has_uses() || std::count(g.outputs().begin(), g.outputs().end(), v)
                                                      ? def(v)
                                                      : -1);
    OpCost cost = NodeCost(*n);
    at->set_ops(std::max(cost.flops, cost.bytes_read + cost.bytes_written));
  }
  for (const Value* v : g.inputs()) module->add_input_buffers(buffers.Get(v));
  for (const Value* v : g.outputs()) {
    int b = buffers.Get(v);
    if (b < 0) b = buffers.Add(v, v->is_constant() ? Buffer::CONSTANT : Buffer::OUTPUT);
    module->add_output_buffers(b);
  }
  for (const Value* v : c1hwc0)
    if (int b = buffers.Get(v); b >= 0) module->mutable_buffers(b)->set_layout("NC1HWC0");
  KILN_RETURN_IF_ERROR(PlanAllReduceBuckets(*module, collectives, replicas, options.Setting("buckets"), machine,
                                            first_read, buffers));
  MarkComputedInTimingOnlyRuns(*module, g, task_nodes, producer_task, steering);
  KILN_ASSIGN_OR_RETURN(const bool l2_prefetch, options.BoolSetting("l2-prefetch", true));
  if (l2_prefetch) npusim::PlanL2Prefetches(*module, machine);
  buffers.Plan(module->tasks_size());

  DropHostlessConstants(g, *module, kernel_nodes);
  BlobStore blobs;
  a.set_graph_kir(PrintModel(model, PrintOptions(), &blobs));
  a.set_constants(SerializeBlobStore(blobs));
  return a;
}

std::string ExplainNpusimTasks(const artifact::Artifact& a) {
  const artifact::NpusimModule& m = a.npusim();
  std::string out;
  struct Sum {
    int tasks = 0, nodes = 0;
    double flops = 0, cycles = 0;
  };
  std::map<std::string, Sum> per_engine;
  double total_flops = 0;
  for (const artifact::Task& t : m.tasks()) {
    absl::StrAppend(&out, t.node(), " = ", t.op(), "  ->  ", t.engine(), ": ", t.reason());
    if (!t.plan().empty()) absl::StrAppend(&out, " [", t.plan(), "]");
    absl::StrAppend(&out, "\n");
    Sum& e = per_engine[t.engine()];
    ++e.tasks;
    e.nodes += t.nodes();
    e.flops += t.flops();
    e.cycles += t.estimated_cycles();
    total_flops += t.flops();
  }
  absl::StrAppend(&out, "\ntasks per engine:\n");
  for (const auto& [engine, e] : per_engine)
    absl::StrAppend(&out, absl::StrFormat("  %-8s %6d tasks %6d nodes %12.6f GFLOP %6.2f%%", engine, e.tasks, e.nodes,
                                          e.flops / 1e9, total_flops > 0 ? 100 * e.flops / total_flops : 0.0),
                    e.cycles > 0 ? absl::StrFormat("  %.0f estimated cycles", e.cycles) : "", "\n");
  if (m.replicas() > 1) {
    absl::StrAppend(&out, absl::StrFormat("\ndata parallel: %d chips; AllReduce buckets (%s):\n", m.replicas(),
                                          m.buckets()));
    for (int i = 0; i < m.bucket_plan_size(); ++i) {
      const artifact::Bucket& b = m.bucket_plan(i);
      absl::StrAppend(&out, absl::StrFormat("  bucket %d: %d tensors, %d bytes, after task %d, estimated %.0f-%.0f cycles\n",
                                            i, b.tasks_size(), b.bytes(), b.after(), b.estimated_start(),
                                            b.estimated_end()));
    }
  }
  if (m.prefetches_size()) {
    int64_t bytes = 0;
    for (const artifact::L2Prefetch& p : m.prefetches()) bytes += p.bytes();
    absl::StrAppend(&out, absl::StrFormat("\nL2 prefetches (--l2-prefetch): %d, %d bytes of constants read ahead:\n",
                                          m.prefetches_size(), bytes));
    for (const artifact::L2Prefetch& p : m.prefetches())
      absl::StrAppend(&out, absl::StrFormat("  %s, %d of %d bytes: from task %d (%s) for task %d (%s)\n",
                                            m.buffers(p.buffer()).name(), p.bytes(), m.buffers(p.buffer()).bytes(),
                                            p.start(), m.tasks(p.start()).node(), p.task(), m.tasks(p.task()).node()));
  }
  absl::StrAppend(&out, absl::StrFormat("device memory: %d bytes planned, %d without reuse (%.1f%%)\n",
                                        m.device_bytes(), m.naive_bytes(),
                                        m.naive_bytes() ? 100.0 * m.device_bytes() / m.naive_bytes() : 100.0));
  return out;
}

}  // namespace kiln::target
