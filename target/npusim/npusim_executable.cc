//===- npusim_executable.cc - Running npusim artifacts on the model -------===//
#include "target/npusim/npusim_executable.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/exec/executor.h"
#include "graph/support/checked_math.h"
#include "graph/support/status.h"
#include "sim/isa/encode.h"
#include "sim/machine/machine.h"
#include "sim/model/energy.h"
#include "sim/model/report.h"
#include "target/artifact/artifact_io.h"
#include "target/api/tasks_report.h"

namespace kiln::target {

using artifact::Buffer;

struct NpusimExecutable::Impl {
  const artifact::Artifact* artifact = nullptr;
  const artifact::NpusimModule* module = nullptr;
  const Model* model = nullptr;
  std::vector<const Node*> nodes;            // the graph's top-level nodes, in order
  std::vector<sim::KernelId> kernels;        // per program
  sim::DevAddr constants = 0;
  // The constants' bytes and where they go, written into device memory by
  // the first functional run: a timing-only run reads no data, so a model
  // only ever timed never copies its constants (ResNet-50's 100 MB).
  std::vector<std::pair<sim::DevAddr, Tensor>> unwritten_constants;
  // Of those, the ones a kernel that computes in timing-only runs reads
  // (KernelTask.computes_in_timing_only): written by the first run of either kind.
  absl::flat_hash_set<sim::DevAddr> computed_constants;
  std::vector<sim::DevAddr> slots;           // activation regions, one per batch in flight
  std::vector<std::map<int, Tensor>> host;   // per slot: HOST buffers' values
  bool functional = true;

  int Root(int b) const { return artifact::RootBuffer(*module, b); }
  // The roots a loop's donated feeds live in (by buffer): one place for
  // every step, slot 0's, whichever slot the step stages its data in.
  std::vector<bool> shared;
  sim::DevAddr Address(int b, int slot) const {
    const int root = Root(b);
    const Buffer& r = module->buffers(root);
    if (r.kind() != Buffer::CONSTANT && root < static_cast<int>(shared.size()) && shared[root]) slot = 0;
    return (r.kind() == Buffer::CONSTANT ? constants : slots[slot]) + static_cast<sim::DevAddr>(r.offset());
  }
  bool IsHost(int b) const { return module->buffers(Root(b)).kind() == Buffer::HOST; }

  static std::vector<int64_t> Dims(const Buffer& b) { return {b.dims().begin(), b.dims().end()}; }

  absl::StatusOr<Tensor> ReadBuffer(sim::Device& d, int b, int slot) {
    if (IsHost(b)) {
      auto it = host[slot].find(Root(b));
      if (it == host[slot].end())
        return absl::InternalError(absl::StrCat("buffer '", module->buffers(b).name(), "' has no value"));
      return it->second;
    }
    const Buffer& buf = module->buffers(b);
    std::optional<DType> dt = ParseDType(buf.dtype());
    if (!dt) return absl::InternalError(absl::StrCat("buffer '", buf.name(), "': unknown dtype ", buf.dtype()));
    Tensor t(*dt, Dims(buf));
    if (t.nbytes()) KILN_RETURN_IF_ERROR(d.Read(Address(b, slot), t.raw(), static_cast<int64_t>(t.nbytes())));
    return t;
  }

  absl::Status WriteBuffer(sim::Device& d, int b, int slot, const Tensor& t) {
    if (IsHost(b)) {
      host[slot][Root(b)] = t;
      return absl::OkStatus();
    }
    const Buffer& buf = module->buffers(b);
    if (static_cast<int64_t>(t.nbytes()) != buf.bytes())
      return absl::InternalError(absl::StrCat("buffer '", buf.name(), "' holds ", buf.bytes(), " bytes; the kernel made ",
                                              t.nbytes()));
    if (t.nbytes()) KILN_RETURN_IF_ERROR(d.Write(Address(b, slot), t.raw(), static_cast<int64_t>(t.nbytes())));
    return absl::OkStatus();
  }

  // Data parallelism: chip 0 is simulated; peers[r - 1] holds, for chip r,
  // the value of every AllReduce input that is not a constant (by buffer),
  // computed by the reference executor on chip r's shard. Empty: every chip
  // holds chip 0's data.
  std::vector<absl::flat_hash_map<int, Tensor>> peers;

  // A bucket's collective: each output is the mean over the chips of its
  // input (chip 0's from device memory, the peers' from `peers`). Where
  // every chip holds the same value (a constant, or no peers), that is the
  // value itself.
  absl::Status RunBucket(sim::Device& d, const artifact::Bucket& bucket, int slot) {
    if (!functional) return absl::OkStatus();
    for (int t : bucket.tasks()) {
      const artifact::CollectiveTask& c = module->tasks(t).collective();
      for (int i = 0; i < c.inputs_size(); ++i) {
        const int in = c.inputs(i);
        KILN_ASSIGN_OR_RETURN(Tensor x, ReadBuffer(d, in, slot));
        if (peers.empty() || module->buffers(Root(in)).kind() == Buffer::CONSTANT) {
          KILN_RETURN_IF_ERROR(WriteBuffer(d, c.outputs(i), slot, x));
          continue;
        }
        Tensor mean(DType::kF64, x.dims());
        double* sum = mean.data<double>();
        for (int64_t j = 0; j < x.numel(); ++j) sum[j] = x.GetDouble(j);
        for (const auto& peer : peers) {
          auto it = peer.find(in);
          if (it == peer.end() || it->second.numel() != x.numel())
            return absl::InternalError(absl::StrCat("no peer value of '", module->buffers(in).name(), "'"));
          for (int64_t j = 0; j < x.numel(); ++j) sum[j] += it->second.GetDouble(j);
        }
        for (int64_t j = 0; j < x.numel(); ++j) sum[j] /= static_cast<double>(peers.size() + 1);
        KILN_RETURN_IF_ERROR(WriteBuffer(d, c.outputs(i), slot, CastTensor(mean, x.dtype())));
      }
    }
    return absl::OkStatus();
  }

  // The AICPU task: reads its operands from device memory, runs the node's
  // reference kernel, writes the outputs back.
  absl::Status RunAicpu(sim::Device& d, const artifact::AicpuTask& task, int slot) {
    if (!functional && !task.computes_in_timing_only()) return absl::OkStatus();
    const Node& n = *nodes[task.node()];
    std::vector<const Value*> operands = NodeOperands(n);
    if (operands.size() != static_cast<size_t>(task.operands_size()))
      return absl::InternalError(absl::StrCat("AICPU task '", n.name(), "': operand count mismatch"));
    absl::flat_hash_map<const Value*, Tensor> values;
    for (size_t i = 0; i < operands.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(Tensor t, ReadBuffer(d, task.operands(static_cast<int>(i)), slot));
      values[operands[i]] = std::move(t);
    }
    Executor exec;
    auto outs = exec.RunNode(n, [&](const Value* v) -> const Tensor* {
      auto it = values.find(v);
      return it == values.end() ? nullptr : &it->second;
    });
    if (!outs.ok()) return outs.status();
    for (int i = 0; i < task.outputs_size() && i < static_cast<int>(outs->size()); ++i) {
      if (task.outputs(i) < 0 || !(*outs)[i].defined()) continue;
      KILN_RETURN_IF_ERROR(WriteBuffer(d, task.outputs(i), slot, (*outs)[i]));
    }
    return absl::OkStatus();
  }
};

NpusimExecutable::~NpusimExecutable() = default;

absl::StatusOr<std::vector<Tensor>> NpusimExecutable::ShardInputs(std::vector<Tensor> inputs) {
  Impl& im = *impl_;
  const artifact::NpusimModule& m = *im.module;
  const int n = std::max(1, m.replicas());
  im.peers.clear();
  if (n == 1) return inputs;
  // The inputs whose leading dim holds every chip's shard.
  std::vector<bool> sharded(inputs.size(), false);
  bool any = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Buffer& b = m.buffers(m.input_buffers(static_cast<int>(i)));
    if (inputs[i].rank() == 0 || b.dims_size() == 0 || b.dims(0) <= 0 || inputs[i].dim(0) != b.dims(0) * n) continue;
    if (inputs[i].dtype() == DType::kString)
      return absl::InvalidArgumentError(absl::StrCat("input '", b.name(), "': string tensors cannot be sharded"));
    sharded[i] = any = true;
  }
  if (!any) return inputs;
  auto shard = [&](size_t i, int r) {
    const int64_t rows = inputs[i].dim(0) / n;
    return inputs[i].LeadingRows(r * rows, rows);
  };
  // The peers' AllReduce inputs, from the reference executor on their shards.
  if (im.functional) {
    std::vector<int> wanted;
    for (const artifact::Task& t : m.tasks())
      if (t.has_collective())
        for (int b : t.collective().inputs())
          if (m.buffers(im.Root(b)).kind() != Buffer::CONSTANT) wanted.push_back(b);
    for (int r = 1; r < n; ++r) {
      Model peer = im.model->Clone();
      const size_t first = peer.graph->outputs().size();
      for (int b : wanted) {
        Value* v = peer.graph->Lookup(m.buffers(b).name());
        if (!v) return absl::InternalError(absl::StrCat("AllReduce input '", m.buffers(b).name(), "' is not in the graph"));
        peer.graph->AddOutput(v);
      }
      std::vector<Tensor> in;
      for (size_t i = 0; i < inputs.size(); ++i) in.push_back(sharded[i] ? shard(i, r) : inputs[i]);
      Executor exec;
      auto out = exec.Run(*peer.graph, std::move(in));
      if (!out.ok()) return absl::InvalidArgumentError(absl::StrCat("chip ", r, " (reference executor): ", out.status().message()));
      absl::flat_hash_map<int, Tensor> values;
      for (size_t k = 0; k < wanted.size(); ++k) values[wanted[k]] = (*out)[first + k];
      im.peers.push_back(std::move(values));
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (sharded[i]) inputs[i] = shard(i, 0);
  return inputs;
}

absl::StatusOr<std::unique_ptr<NpusimExecutable>> NpusimExecutable::Load(const artifact::Artifact& artifact,
                                                                        const Model* model) {
  std::unique_ptr<NpusimExecutable> e(new NpusimExecutable());
  e->impl_ = std::make_unique<Impl>();
  Impl& im = *e->impl_;
  im.artifact = &artifact;
  im.module = &artifact.npusim();
  im.model = model;
  const artifact::NpusimModule& m = *im.module;
  KILN_ASSIGN_OR_RETURN(e->machine_, sim::ParseMachine(m.machine(), "the artifact's machine"));
  for (const Node* n : model->graph->nodes()) im.nodes.push_back(n);
  const int nb = m.buffers_size();
  auto bad = [](const std::string& why) { return absl::InvalidArgumentError("the npusim module is inconsistent: " + why); };
  for (int i = 0; i < nb; ++i) {
    const Buffer& b = m.buffers(i);
    if (b.has_alias_of() && (b.alias_of() < 0 || b.alias_of() >= i)) return bad(absl::StrCat("buffer ", i, " aliases ", b.alias_of()));
    if (b.kind() != Buffer::HOST && (b.offset() < 0 || b.bytes() < 0)) return bad(absl::StrCat("buffer ", i, " offset"));
    int64_t region = b.kind() == Buffer::CONSTANT ? m.constant_bytes() : m.device_bytes();
    const std::optional<int64_t> end = CheckedAdd(b.offset(), b.bytes());
    if (b.kind() != Buffer::HOST && !b.has_alias_of() && (!end || *end > region))
      return bad(absl::StrCat("buffer '", b.name(), "' lies outside its region"));
  }
  for (const artifact::Task& t : m.tasks()) {
    if (t.has_kernel()) {
      if (t.kernel().program() < 0 || t.kernel().program() >= m.programs_size()) return bad("task program index");
      for (int a : t.kernel().args())
        if (a < 0 || a >= nb) return bad("kernel argument buffer index");
    } else if (t.has_collective()) {
      const artifact::CollectiveTask& c = t.collective();
      if (c.inputs_size() != c.outputs_size()) return bad("collective inputs and outputs");
      for (int a : c.inputs())
        if (a < 0 || a >= nb) return bad("collective input buffer index");
      for (int a : c.outputs())
        if (a < 0 || a >= nb) return bad("collective output buffer index");
    } else if (t.has_aicpu()) {
      if (t.aicpu().node() < 0 || t.aicpu().node() >= static_cast<int>(im.nodes.size())) return bad("AICPU node index");
      for (int a : t.aicpu().operands())
        if (a < 0 || a >= nb) return bad("AICPU operand buffer index");
      for (int a : t.aicpu().outputs())
        if (a < -1 || a >= nb) return bad("AICPU output buffer index");
    }
  }
  {
    // Every collective task in exactly one bucket; buckets start after and
    // end before tasks of the module.
    std::vector<int> bucket_of(m.tasks_size(), -1);
    for (int b = 0; b < m.bucket_plan_size(); ++b) {
      const artifact::Bucket& k = m.bucket_plan(b);
      if (k.after() < -1 || k.after() >= m.tasks_size() || k.before() < -1 || k.before() >= m.tasks_size() ||
          (k.before() >= 0 && k.before() <= k.after()))
        return bad(absl::StrCat("bucket ", b, " runs outside the tasks"));
      for (int t : k.tasks()) {
        if (t < 0 || t >= m.tasks_size() || !m.tasks(t).has_collective() || bucket_of[t] >= 0)
          return bad(absl::StrCat("bucket ", b, " task ", t));
        bucket_of[t] = b;
      }
    }
    for (int t = 0; t < m.tasks_size(); ++t)
      if (m.tasks(t).has_collective() && bucket_of[t] < 0) return bad(absl::StrCat("task ", t, " is in no bucket"));
    if (m.bucket_plan_size() && m.replicas() < 2) return bad("collectives in a module of one chip");
  }
  // Prefetches read a part of a constant, ahead of a later task, in the
  // order they are issued.
  for (int i = 0, last = 0; i < m.prefetches_size(); ++i) {
    const artifact::L2Prefetch& p = m.prefetches(i);
    if (p.buffer() < 0 || p.buffer() >= nb || m.buffers(p.buffer()).kind() != Buffer::CONSTANT ||
        m.buffers(p.buffer()).has_alias_of() || p.bytes() < 0 || p.bytes() > m.buffers(p.buffer()).bytes() ||
        p.start() < last || p.task() < p.start() || p.task() >= m.tasks_size())
      return bad(absl::StrCat("L2 prefetch ", i));
    last = p.start();
  }
  if (m.input_buffers_size() != artifact.inputs_size() || m.output_buffers_size() != artifact.outputs_size())
    return bad("input/output buffers do not match the signature");
  for (int b : m.input_buffers())
    if (b < 0 || b >= nb) return bad("input buffer index");
  for (int b : m.output_buffers())
    if (b < 0 || b >= nb) return bad("output buffer index");

  KILN_ASSIGN_OR_RETURN(e->device_, sim::Device::Create(e->machine_));
  sim::Device& d = *e->device_;
  for (const sim::isa::Program& p : m.programs()) {
    auto prog = sim::FromProto(p);
    if (!prog.ok()) return absl::InvalidArgumentError(absl::StrCat("program '", p.name(), "': ", prog.status().message()));
    auto k = d.LoadProgram(*std::move(prog));
    if (!k.ok()) return absl::InvalidArgumentError(absl::StrCat("program '", p.name(), "': ", k.status().message()));
    im.kernels.push_back(*k);
  }
  // Constants: every constant of the graph nest, by name.
  absl::flat_hash_map<std::string, const Value*> constants;
  std::vector<const Graph*> stack = {model->graph.get()};
  while (!stack.empty()) {
    const Graph* g = stack.back();
    stack.pop_back();
    for (const Value* v : g->Constants()) constants.emplace(v->name(), v);
    for (const Node* n : g->nodes())
      for (const Graph* s : n->subgraphs()) stack.push_back(s);
  }
  // The constant region is what the artifact's constants fill (each rounded
  // up to kConstantAlignment, as the compile lays them out), checked before
  // anything is allocated: a module cannot declare more than it holds.
  constexpr int64_t kConstantAlignment = 512;
  std::vector<std::pair<const Buffer*, const Tensor*>> filled;
  int64_t held = 0;
  for (int i = 0; i < nb; ++i) {
    const Buffer& b = m.buffers(i);
    if (b.kind() != Buffer::CONSTANT || b.has_alias_of()) continue;
    auto it = constants.find(b.name());
    if (it == constants.end() || !it->second->constant().defined())
      return bad(absl::StrCat("constant '", b.name(), "' is not in the graph"));
    const Tensor& t = it->second->constant();
    if (static_cast<int64_t>(t.nbytes()) != b.bytes()) return bad(absl::StrCat("constant '", b.name(), "' size"));
    held += (std::max<int64_t>(b.bytes(), 1) + kConstantAlignment - 1) / kConstantAlignment * kConstantAlignment;
    filled.emplace_back(&b, &t);
  }
  if (m.constant_bytes() > held)
    return bad(absl::StrCat("it declares ", m.constant_bytes(), " bytes of constants; its constants hold ", held));
  KILN_ASSIGN_OR_RETURN(im.constants, d.Malloc(std::max<int64_t>(m.constant_bytes(), 512)));
  for (const auto& [b, t] : filled)
    if (t->nbytes()) im.unwritten_constants.emplace_back(im.constants + b->offset(), *t);
  for (const artifact::Task& t : m.tasks())
    if (t.has_kernel() && t.kernel().computes_in_timing_only())
      for (int a : t.kernel().args())
        if (m.buffers(im.Root(a)).kind() == Buffer::CONSTANT) im.computed_constants.insert(im.Address(a, 0));
  return e;
}

absl::StatusOr<std::vector<Tensor>> NpusimExecutable::Run(std::vector<Tensor> inputs, const NpusimRunOptions& options) {
  Impl& im = *impl_;
  const artifact::NpusimModule& m = *im.module;
  sim::Device& d = *device_;
  const int batches = std::max(1, options.batches);
  // A loop's fed outputs computed over their inputs (donated) stay in one
  // place for every step (Impl::shared), so no step copies them, while the
  // next step's data is staged in the other slot.
  im.shared.assign(m.buffers_size(), false);
  for (const StepFeed& f : options.feeds)
    if (f.input >= 0 && f.input < m.input_buffers_size() && f.output >= 0 && f.output < m.output_buffers_size() &&
        im.Root(m.input_buffers(f.input)) == im.Root(m.output_buffers(f.output)))
      im.shared[im.Root(m.input_buffers(f.input))] = true;
  const int num_slots = batches > 1 ? 2 : 1;
  im.functional = options.functional;
  if (im.functional) {
    for (const auto& [at, t] : im.unwritten_constants)
      KILN_RETURN_IF_ERROR(d.Write(at, t.raw(), static_cast<int64_t>(t.nbytes())));
    im.unwritten_constants.clear();
  } else if (!im.computed_constants.empty()) {
    // The few constants the kernels that compute in a timing-only run read.
    std::vector<std::pair<sim::DevAddr, Tensor>> rest;
    for (auto& [at, t] : im.unwritten_constants) {
      if (!im.computed_constants.contains(at)) {
        rest.emplace_back(at, std::move(t));
        continue;
      }
      KILN_RETURN_IF_ERROR(d.Write(at, t.raw(), static_cast<int64_t>(t.nbytes())));
    }
    im.unwritten_constants = std::move(rest);
    im.computed_constants.clear();  // written: later timing-only runs have nothing to pick out
  }
  while (static_cast<int>(im.slots.size()) < num_slots) {
    KILN_ASSIGN_OR_RETURN(sim::DevAddr a, d.Malloc(std::max<int64_t>(m.device_bytes(), 512)));
    im.slots.push_back(a);
  }
  im.host.assign(num_slots, {});
  KILN_ASSIGN_OR_RETURN(inputs, ShardInputs(std::move(inputs)));

  sim::StreamId in_stream = d.CreateStream();
  // Data parallelism: the buckets' collectives run on a stream of their own,
  // each after the compute task that produces its last input and before the
  // first that reads one of its outputs.
  const int replicas = std::max(1, m.replicas());
  const sim::StreamId links = m.bucket_plan_size() ? d.CreateStream() : -1;
  std::vector<std::vector<int>> start_after(m.tasks_size() + 1), wait_before(m.tasks_size());
  for (int b = 0; b < m.bucket_plan_size(); ++b) {
    start_after[m.bucket_plan(b).after() + 1].push_back(b);
    if (m.bucket_plan(b).before() >= 0) wait_before[m.bucket_plan(b).before()].push_back(b);
  }
  // Weights read into the L2 ahead of the tasks that stream them, on a
  // stream of their own, each once the tasks before its start are done.
  const sim::StreamId prefetch = m.prefetches_size() ? d.CreateStream() : -1;
  sim::StreamId compute = batches > 1 ? d.CreateStream() : in_stream;
  sim::StreamId out_stream = batches > 1 ? d.CreateStream() : in_stream;
  // A loop's feeds: which inputs come from the step before, which outputs
  // go to the next.
  std::vector<int> fed_input(m.input_buffers_size(), -1);
  std::vector<bool> fed_output(m.output_buffers_size(), false);
  for (const StepFeed& f : options.feeds) {
    if (f.input < 0 || f.input >= m.input_buffers_size() || f.output < 0 || f.output >= m.output_buffers_size())
      return absl::InvalidArgumentError("a step feed names no input or output of the model");
    const Buffer& in = m.buffers(m.input_buffers(f.input));
    const Buffer& out = m.buffers(m.output_buffers(f.output));
    if (im.IsHost(m.input_buffers(f.input)) || im.IsHost(m.output_buffers(f.output)) || in.bytes() != out.bytes() ||
        in.dtype() != out.dtype())
      return absl::InvalidArgumentError(absl::StrCat("output '", out.name(), "' cannot feed input '", in.name(),
                                                     "' on the device"));
    fed_input[f.input] = f.output;
    fed_output[f.output] = true;
  }
  const bool loop = !options.feeds.empty();
  // Host buffers of the outputs, per batch (copies land there during Run).
  std::vector<std::vector<Tensor>> outputs(batches);
  std::vector<sim::EventId> slot_free(batches, -1), fed_read(batches, -1);
  for (int b = 0; b < batches; ++b) {
    const int slot = b % num_slots;
    if (b >= num_slots) KILN_RETURN_IF_ERROR(d.WaitEvent(in_stream, slot_free[b - num_slots]));
    // The slot also held the values the step before this one's feeds read.
    if (loop && b >= num_slots && fed_read[b - 1] >= 0) KILN_RETURN_IF_ERROR(d.WaitEvent(in_stream, fed_read[b - 1]));
    for (int i = 0; i < m.input_buffers_size(); ++i) {
      int buf = m.input_buffers(i);
      if (im.IsHost(buf)) {
        im.host[slot][im.Root(buf)] = inputs[i];
        continue;
      }
      if (b > 0 && fed_input[i] >= 0) continue;  // copied on the device below
      if (inputs[i].nbytes())
        KILN_RETURN_IF_ERROR(d.CopyH2D(in_stream, im.Address(buf, slot), inputs[i].raw(),
                                       static_cast<int64_t>(inputs[i].nbytes())));
    }
    if (batches > 1) {
      sim::EventId in_ready = d.CreateEvent();
      KILN_RETURN_IF_ERROR(d.RecordEvent(in_stream, in_ready));
      KILN_RETURN_IF_ERROR(d.WaitEvent(compute, in_ready));
    }
    if (loop && b > 0) {
      // The step before's NAME.next into this step's NAME, after that step's
      // tasks (the compute stream runs in order) and once this slot's last
      // outputs have gone to the host.
      if (b >= num_slots) KILN_RETURN_IF_ERROR(d.WaitEvent(compute, slot_free[b - num_slots]));
      const int prev = (b - 1) % num_slots;
      for (int i = 0; i < m.input_buffers_size(); ++i) {
        if (fed_input[i] < 0) continue;
        const int in_buf = m.input_buffers(i), out_buf = m.output_buffers(fed_input[i]);
        const sim::DevAddr dst = im.Address(in_buf, slot), src = im.Address(out_buf, prev);
        if (dst != src && m.buffers(in_buf).bytes() > 0)
          KILN_RETURN_IF_ERROR(d.CopyD2D(compute, dst, src, m.buffers(in_buf).bytes()));
      }
      fed_read[b] = d.CreateEvent();
      KILN_RETURN_IF_ERROR(d.RecordEvent(compute, fed_read[b]));
    }
    std::vector<sim::EventId> bucket_done(m.bucket_plan_size(), -1);
    auto start_buckets = [&](int after) -> absl::Status {
      for (int k : start_after[after + 1]) {
        const artifact::Bucket* bucket = &m.bucket_plan(k);
        sim::EventId ready = d.CreateEvent();
        KILN_RETURN_IF_ERROR(d.RecordEvent(compute, ready));
        KILN_RETURN_IF_ERROR(d.WaitEvent(links, ready));
        KILN_RETURN_IF_ERROR(d.AllReduce(links, absl::StrCat("bucket ", k, " (", bucket->tasks_size(), " tensors)"),
                                         bucket->bytes(), replicas, [&im, bucket, slot](sim::Device& dev) {
                                           return im.RunBucket(dev, *bucket, slot);
                                         }));
        bucket_done[k] = d.CreateEvent();
        KILN_RETURN_IF_ERROR(d.RecordEvent(links, bucket_done[k]));
      }
      return absl::OkStatus();
    };
    KILN_RETURN_IF_ERROR(start_buckets(-1));
    int next_prefetch = 0;
    for (int ti = 0; ti < m.tasks_size(); ++ti) {
      const artifact::Task& t = m.tasks(ti);
      if (next_prefetch < m.prefetches_size() && m.prefetches(next_prefetch).start() == ti) {
        sim::EventId ready = d.CreateEvent();
        KILN_RETURN_IF_ERROR(d.RecordEvent(compute, ready));
        KILN_RETURN_IF_ERROR(d.WaitEvent(prefetch, ready));
        for (; next_prefetch < m.prefetches_size() && m.prefetches(next_prefetch).start() == ti; ++next_prefetch) {
          const artifact::L2Prefetch& p = m.prefetches(next_prefetch);
          KILN_RETURN_IF_ERROR(d.PrefetchL2(prefetch, im.Address(p.buffer(), slot), p.bytes()));
        }
      }
      for (int k : wait_before[ti]) KILN_RETURN_IF_ERROR(d.WaitEvent(compute, bucket_done[k]));
      if (t.has_kernel()) {
        std::vector<sim::DevAddr> args;
        for (int a : t.kernel().args()) args.push_back(im.Address(a, slot));
        KILN_RETURN_IF_ERROR(d.Launch(compute, im.kernels[t.kernel().program()], t.kernel().block_dim(), args,
                                      t.kernel().computes_in_timing_only()));
      } else if (t.has_aicpu()) {
        const artifact::AicpuTask* task = &t.aicpu();
        KILN_RETURN_IF_ERROR(d.LaunchAicpu(compute, t.node(), task->ops(), [&im, task, slot](sim::Device& dev) {
          return im.RunAicpu(dev, *task, slot);
        }));
      }
      KILN_RETURN_IF_ERROR(start_buckets(ti));
    }
    for (sim::EventId e : bucket_done) KILN_RETURN_IF_ERROR(d.WaitEvent(compute, e));
    if (batches > 1) {
      sim::EventId done = d.CreateEvent();
      KILN_RETURN_IF_ERROR(d.RecordEvent(compute, done));
      KILN_RETURN_IF_ERROR(d.WaitEvent(out_stream, done));
    }
    for (int i = 0; i < m.output_buffers_size(); ++i) {
      int buf = m.output_buffers(i);
      const Buffer& ob = m.buffers(buf);
      if (im.IsHost(buf)) {
        outputs[b].emplace_back();
        continue;
      }
      std::optional<DType> dt = ParseDType(ob.dtype());
      if (!dt) return absl::InternalError("output dtype");
      outputs[b].emplace_back(*dt, Impl::Dims(ob));
    }
    const bool last_step = b == batches - 1;
    for (int i = 0; i < m.output_buffers_size(); ++i) {
      int buf = m.output_buffers(i);
      Tensor& t = outputs[b][i];
      if (loop && fed_output[i] && !last_step) {
        t = Tensor();  // stays on the device for the next step
        continue;
      }
      if (im.IsHost(buf) || !t.nbytes()) continue;
      KILN_RETURN_IF_ERROR(d.CopyD2H(out_stream, t.raw(), im.Address(buf, slot), static_cast<int64_t>(t.nbytes())));
    }
    if (batches > 1) {
      slot_free[b] = d.CreateEvent();
      KILN_RETURN_IF_ERROR(d.RecordEvent(out_stream, slot_free[b]));
    }
  }

  sim::RunOptions ro;
  ro.functional = options.functional;
  ro.trace = options.trace;
  ro.trace_options.from = options.trace_from;
  ro.trace_options.to = options.trace_to;
  ro.trace_options.kernels = options.trace_kernels;
  if (options.progress)
    ro.progress = [&options, batches](double cycles) {
      options.progress(absl::StrFormat("%.2f M cycles simulated (%d %s)", cycles / 1e6, batches,
                                       options.feeds.empty() ? (batches == 1 ? "batch" : "batches")
                                                             : (batches == 1 ? "step" : "steps")));
    };
  ro.cycle_limit = options.cycle_limit;
  KILN_ASSIGN_OR_RETURN(sim::RunStats stats, d.Run(ro));

  if (options.after_step)
    for (int b = 0; b < batches; ++b) options.after_step(b + 1, outputs[b]);
  const int last = (batches - 1) % num_slots;
  std::vector<Tensor> result = std::move(outputs[batches - 1]);
  for (int i = 0; i < m.output_buffers_size(); ++i) {
    int buf = m.output_buffers(i);
    if (!im.IsHost(buf)) continue;
    auto it = im.host[last].find(im.Root(buf));
    if (it == im.host[last].end()) {
      if (options.functional)
        return absl::InternalError(absl::StrCat("output '", m.buffers(buf).name(), "' was not computed"));
      continue;
    }
    result[i] = it->second;
  }

  summary_ = {};
  summary_.stats = std::move(stats);
  summary_.batches = batches;
  summary_.loop = loop;
  // One batch's compute: from its first task's start to its last task's end
  // (kernels and AICPU tasks run in order on the compute stream).
  int64_t kernels_per_batch = 0, aicpu_per_batch = 0;
  for (const artifact::Task& t : m.tasks()) {
    if (t.has_kernel()) {
      ++kernels_per_batch;
      summary_.estimated_cycles += t.estimated_cycles();
    } else if (t.has_aicpu()) {
      ++aicpu_per_batch;
    }
  }
  const auto& ks = summary_.stats.kernels;
  const auto& as = summary_.stats.aicpu_spans;
  double first = 1e300, end = 0;
  for (int64_t i = 0; i < kernels_per_batch && i < static_cast<int64_t>(ks.size()); ++i) {
    first = std::min(first, ks[i].start_cycle);
    end = std::max(end, ks[i].end_cycle);
  }
  for (int64_t i = 0; i < aicpu_per_batch && i < static_cast<int64_t>(as.size()); ++i) {
    first = std::min(first, as[i].start);
    end = std::max(end, as[i].end);
  }
  summary_.compute_cycles = end > first ? end - first : 0;
  // The link has a lane each way (H2D and D2H copies overlap): a batch's
  // transfers take as long as its slower direction.
  // A loop's variables stay on the device: not part of a step's transfers.
  int64_t in_bytes = 0, out_bytes = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (fed_input[i] >= 0) {
      summary_.fed_bytes += static_cast<int64_t>(inputs[i].nbytes());
      if (im.shared[im.Root(m.input_buffers(i))]) summary_.donated_bytes += static_cast<int64_t>(inputs[i].nbytes());
    }
    else in_bytes += static_cast<int64_t>(inputs[i].nbytes());
  }
  for (size_t i = 0; i < result.size(); ++i)
    if (!fed_output[i] && result[i].defined()) out_bytes += static_cast<int64_t>(result[i].nbytes());
  const double link = sim::HostLinkBytesPerCycle(machine_);
  const double latency = sim::UsToCycles(machine_, machine_.host_link().latency_us());
  summary_.transfer_cycles = std::max(in_bytes / link + latency * m.input_buffers_size(),
                                      out_bytes / link + latency * m.output_buffers_size());
  return result;
}

std::vector<NpusimExecutable::TaskRow> NpusimExecutable::TaskRows() const {
  const artifact::NpusimModule& m = *impl_->module;
  const sim::RunStats& s = summary_.stats;
  std::vector<TaskRow> rows;
  size_t k = 0;
  // AICPU tasks by their first batch's span (spans are in finish order,
  // each batch's after the previous one's).
  std::vector<bool> span_used(s.aicpu_spans.size(), false);
  for (const artifact::Task& t : m.tasks()) {
    TaskRow r;
    r.name = t.node();
    r.engine = t.engine();
    if (t.has_aicpu()) {
      for (size_t i = 0; i < s.aicpu_spans.size(); ++i) {
        if (span_used[i] || s.aicpu_spans[i].name != t.node()) continue;
        span_used[i] = true;
        r.shown = true;
        r.cycles = s.aicpu_spans[i].end - s.aicpu_spans[i].start;
        r.estimated = t.estimated_cycles();
        r.bound = "AICPU";
        break;
      }
      rows.push_back(std::move(r));
      continue;
    }
    if (!t.has_kernel()) {
      rows.push_back(std::move(r));
      continue;
    }
    if (k >= s.kernels.size()) break;
    const sim::KernelStats& ks = s.kernels[k++];
    r.shown = true;
    r.cycles = ks.end_cycle - ks.start_cycle;
    const double span = std::max(1e-9, r.cycles * std::max(1, ks.cores_used));
    r.cube = ks.cube_peak_macs_per_cycle > 0 ? ks.cube_macs / (ks.cube_peak_macs_per_cycle * span) : 0;
    r.estimated = t.estimated_cycles();
    r.cores = ks.cores_used;
    r.bound = sim::KernelBound(ks, machine_);
    r.hbm_read = ks.hbm_read_bytes;
    r.hbm_write = ks.hbm_write_bytes;
    r.l2_hit_rate = sim::L2HitRate(machine_, ks.l2_hit_bytes, ks.l2_miss_bytes);
    r.energy_uj = sim::KernelEnergyJ(ks) * 1e6;
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string NpusimExecutable::ReportTasksCsv() const {
  TasksReport report;
  for (const TaskRow& r : TaskRows()) {
    if (!r.shown) continue;
    TaskReportRow t;
    t.task = r.name;
    t.engine = r.engine;
    t.bound = r.bound;
    t.cycles = r.cycles;
    t.estimated_cycles = r.estimated > 0 ? r.estimated : -1;
    t.cube_utilization = r.cube;
    t.cores = r.cube < 0 ? 0 : r.cores;
    t.hbm_read_bytes = r.hbm_read;
    t.hbm_write_bytes = r.hbm_write;
    t.l2_hit_rate = r.l2_hit_rate;
    t.energy_uj = r.energy_uj;
    report.tasks.push_back(std::move(t));
  }
  const sim::RunStats& s = summary_.stats;
  report.total.cycles = s.total_cycles;
  report.total.estimated_cycles = summary_.estimated_cycles;
  report.total.hbm_read_bytes = s.hbm_read_bytes;
  report.total.hbm_write_bytes = s.hbm_write_bytes;
  report.total.l2_hit_rate = sim::L2HitRate(machine_, s.l2_hit_bytes, s.l2_miss_bytes);
  report.total.energy_uj = sim::EnergyOf(s, machine_).total_j() * 1e6;
  return TasksCsv(report);
}

std::string NpusimExecutable::ReportText() const {
  const Impl& im = *impl_;
  const artifact::NpusimModule& m = *im.module;
  const sim::RunStats& s = summary_.stats;
  std::string out;
  absl::StrAppendFormat(&out, "machine %s: %d AI cores at %.0f MHz; precision %s\n", machine_.name(),
                        machine_.chip().ai_cores(), machine_.chip().clock_mhz(), m.precision());
  absl::StrAppendFormat(&out, "\n%-40s %-7s %12s %12s %7s %7s  %s\n", "task (first batch)", "engine", "cycles",
                        "estimated", "cube%", "cores", "bound");
  std::map<std::string, std::pair<int, double>> per_engine;
  for (const TaskRow& r : TaskRows()) {
    auto& e = per_engine[r.engine];
    ++e.first;
    if (!r.shown) continue;
    e.second += r.cycles;
    std::string name = r.name.size() > 40 ? "..." + r.name.substr(r.name.size() - 37) : r.name;
    if (r.cube < 0) {
      absl::StrAppendFormat(&out, "%-40s %-7s %12.0f %12s %7s %7s  %s\n", name, r.engine, r.cycles,
                            r.estimated > 0 ? absl::StrFormat("%.0f", r.estimated) : "-", "-", "-", r.bound);
    } else {
      absl::StrAppendFormat(&out, "%-40s %-7s %12.0f %12.0f %6.1f%% %7d  %s\n", name, r.engine, r.cycles, r.estimated,
                            100 * r.cube, r.cores, r.bound);
    }
  }
  absl::StrAppendFormat(&out, "\nper engine:\n");
  for (const auto& [engine, e] : per_engine)
    absl::StrAppendFormat(&out, "  %-7s %5d tasks  %12.0f kernel cycles\n", engine, e.first, e.second);
  double clock_hz = machine_.chip().clock_mhz() * 1e6;
  absl::StrAppendFormat(&out,
                        "\ntotal: %.0f cycles (%.1f us) for %d %s%s; %d instructions; HBM read %d B, write %d B; "
                        "H2D %d B, D2H %d B%s; AICPU tasks %d\n",
                        s.total_cycles, s.seconds * 1e6, summary_.batches, summary_.loop ? "step" : "batch",
                        summary_.batches == 1 ? "" : (summary_.loop ? "s" : "es"), s.instructions, s.hbm_read_bytes,
                        s.hbm_write_bytes, s.h2d_bytes, s.d2h_bytes,
                        s.d2d_bytes ? absl::StrFormat(", D2D %d B", s.d2d_bytes) : "", s.aicpu_tasks);
  out += sim::L2Line(s, machine_) + sim::EnergyLine(s, machine_);
  if (summary_.batches > 1)
    absl::StrAppendFormat(&out, "energy per %s: %.3f uJ\n", summary_.loop ? "step" : "batch",
                          sim::EnergyOf(s, machine_).total_j() * 1e6 / summary_.batches);
  out += sim::SimulatorSpeedLine(s);
  if (summary_.loop) {
    const int64_t copied = summary_.fed_bytes - summary_.donated_bytes;
    absl::StrAppendFormat(&out, "loop on the device: the state fed from step to step (%d B) crosses PCIe once each way",
                          summary_.fed_bytes);
    if (summary_.donated_bytes)
      absl::StrAppendFormat(&out, "; %d B of it computed in place (donated: NAME.next written over NAME)",
                            summary_.donated_bytes);
    if (copied) absl::StrAppendFormat(&out, "; %d B copied within HBM each step", copied);
    out += "\n";
    // A step's time (a generation loop's time per output token) against
    // reading every constant once from HBM (a decode step's floor), and
    // what reading the fed state whole too would add (a static KV cache's
    // live part is less).
    const double step = summary_.compute_cycles;
    const double hbm_step = static_cast<double>(s.hbm_read_bytes) / summary_.batches;
    const double bw = sim::HbmBytesPerCycle(machine_);
    const double constants_cycles = static_cast<double>(m.constant_bytes()) / bw;
    const double with_fed_cycles = static_cast<double>(m.constant_bytes() + summary_.fed_bytes) / bw;
    if (step > 0)
      absl::StrAppendFormat(&out,
                            "per step: %.0f cycles of tasks (%.1f us, %.1f steps/s); HBM read %.1f MB a step; every "
                            "constant (%.1f MB) read once takes %.0f cycles: %.2fx that (with the fed state's %.1f MB "
                            "read whole too, %.0f)\n",
                            step, step / clock_hz * 1e6, clock_hz / step, hbm_step / 1e6, m.constant_bytes() / 1e6,
                            constants_cycles, constants_cycles > 0 ? step / constants_cycles : 0.0,
                            summary_.fed_bytes / 1e6, with_fed_cycles);
  }
  if (s.collectives > 0) {
    double last = 0;
    for (const auto& span : s.collective_spans) last = std::max(last, span.second);
    absl::StrAppendFormat(&out,
                          "data parallel: %d chips, %d AllReduce buckets (%s) per batch, %d B; the chip links busy "
                          "%.0f cycles, the last AllReduce done at cycle %.0f\n",
                          m.replicas(), m.bucket_plan_size(), m.buckets(), s.collective_bytes / summary_.batches,
                          sim::CollectiveCycles(s), last);
  }
  absl::StrAppendFormat(&out, "code generators' estimate of the kernels: %.0f cycles\n", summary_.estimated_cycles);
  absl::StrAppendFormat(&out, "device memory: %d B activations (%d B without reuse), %d B constants\n",
                        m.device_bytes(), m.naive_bytes(), m.constant_bytes());
  if (summary_.batches > 1) {
    double per_batch = s.total_cycles / summary_.batches;
    double bound = std::max(summary_.compute_cycles, summary_.transfer_cycles);
    absl::StrAppendFormat(&out,
                          "pipelined: %.0f cycles per %s (%.1f %s/s); bound max(compute %.0f, transfer %.0f) = "
                          "%.0f cycles: %.1f%% of the bound's throughput\n",
                          per_batch, summary_.loop ? "step" : "batch", clock_hz / per_batch,
                          summary_.loop ? "steps" : "batches", summary_.compute_cycles, summary_.transfer_cycles, bound,
                          100 * bound / per_batch);
  } else if (s.total_cycles > 0) {
    absl::StrAppendFormat(&out, "throughput: %.1f runs/s at %.0f MHz\n", clock_hz / s.total_cycles,
                          machine_.chip().clock_mhz());
  }
  absl::StrAppend(&out, "\n", sim::RooflineText(Roofline(), sim::MachineRoofs(machine_)));
  return out;
}

std::vector<sim::RooflinePoint> NpusimExecutable::Roofline() const {
  std::vector<sim::RooflinePoint> all = sim::Roofline(summary_.stats, machine_);
  std::vector<sim::RooflinePoint> out;
  size_t k = 0;
  for (const artifact::Task& t : impl_->module->tasks()) {
    if (!t.has_kernel()) continue;
    if (k >= all.size()) break;
    out.push_back(std::move(all[k++]));
    out.back().name = t.node();
  }
  return out;
}

std::string NpusimExecutable::ReportCsv() const { return sim::ReportCsv(summary_.stats, machine_); }

RunFeatures NpusimExecutable::features() const {
  RunFeatures f;
  f.trace = f.report = f.roofline = f.batches = f.timing_only = f.cycle_limit = f.device_loop = true;
  return f;
}

int NpusimExecutable::replicas() const { return impl_->module->replicas(); }

std::string NpusimExecutable::Describe(const RunOptions& options) const {
  const bool loop = !options.feeds.empty();
  return absl::StrCat("simulating ", impl_->module->tasks_size(), " tasks x ", options.batches, loop ? " step" : " batch",
                      options.batches > 1 ? (loop ? "s" : "es") : "", " on ", machine_.name(), "...");
}

absl::StatusOr<std::string> NpusimExecutable::Report(ReportKind kind, const std::string& title) const {
  switch (kind) {
    case ReportKind::kText: return ReportText();
    case ReportKind::kCsv: return ReportCsv();
    case ReportKind::kTasksCsv: return ReportTasksCsv();
    case ReportKind::kTraceJson: return device_->trace().ToJson(machine_.chip().clock_mhz());
    case ReportKind::kTraceJsonGz: return device_->trace().ToJsonGz(machine_.chip().clock_mhz());
    case ReportKind::kTracePerfetto: return device_->trace().ToPerfetto(machine_.chip().clock_mhz());
    case ReportKind::kRooflineCsv: return sim::RooflineCsv(Roofline());
    case ReportKind::kRooflineSvg:
      return sim::RooflineSvg(Roofline(), sim::MachineRoofs(machine_),
                              absl::StrCat(title, " on ", machine_.name(), " (", impl_->module->precision(), ")"));
  }
  return absl::InvalidArgumentError("unknown report kind");
}

std::vector<std::string> NpusimExecutable::Warnings() const {
  if (device_->trace().truncated()) return {"the trace reached its size bound and was truncated"};
  return {};
}

std::vector<std::pair<std::string, int64_t>> NpusimExecutable::TasksPerEngine() const {
  std::map<std::string, int64_t> counts;
  for (const artifact::Task& t : impl_->module->tasks()) ++counts[t.engine()];
  return {counts.begin(), counts.end()};
}

const NpusimExecutable* NpusimOf(const runtime::LoadedModel& model) {
  return dynamic_cast<const NpusimExecutable*>(model.module());
}

runtime::ModuleLoader NpusimModuleLoader() {
  return [](const artifact::Artifact& a, const Model* model) -> absl::StatusOr<std::unique_ptr<runtime::DeviceModule>> {
    if (!a.has_npusim()) return absl::InvalidArgumentError("the artifact has no npusim module");
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<NpusimExecutable> e, NpusimExecutable::Load(a, model));
    return std::unique_ptr<runtime::DeviceModule>(std::move(e));
  };
}

absl::StatusOr<std::unique_ptr<runtime::LoadedModel>> LoadNpusimArtifact(const std::string& path) {
  return runtime::LoadedModel::Load(path, NpusimModuleLoader());
}

}  // namespace kiln::target
