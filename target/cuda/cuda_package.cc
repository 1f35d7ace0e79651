//===- cuda_package.cc - Compiling a model into a CUDA C++ package ---------===//
#include "target/cuda/cuda_package.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/exec/executor.h"
#include "graph/ir/printer.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/cse.h"
#include "graph/passes/dce.h"
#include "graph/passes/form_fusion_groups.h"
#include "graph/passes/fusion/outline.h"
#include "graph/passes/rewrite_helpers.h"
#include "graph/passes/simplify.h"
#include "graph/support/status.h"
#include "runtime/step_loop.h"
#include "target/backend/attention_dims.h"
#include "target/backend/attention_mask.h"
#include "target/backend/donation.h"
#include "target/backend/memory_plan.h"
#include "target/backend/tile_lowering.h"
#include "target/cuda/cuda_collectives.h"
#include "target/cuda/cuda_copy_chains.h"
#include "target/cuda/cuda_copy_kernel.h"
#include "target/cuda/cuda_target.h"
#include "target/cuda/cuda_values.h"
#include "target/precision.h"

namespace kiln::target::cuda {
namespace {

constexpr int64_t kAlignment = 256;
// A result this small, computed only from values on the host, is computed
// on the host too.
constexpr int64_t kSmallHostElements = 64;

// Why node `n` runs on the host whatever its placement: one of its operands
// or results has a shape known only at run time, or a dtype the device does
// not hold (empty: neither).
std::string HostOnlyReason(const Node& n) {
  std::vector<const Value*> values = NodeOperands(n);
  for (const Value* v : n.outputs())
    if (v) values.push_back(v);
  for (const Value* v : values) {
    if (DeviceStorable(v)) continue;
    const bool shape = HostStorable(v);
    return absl::StrCat("'", v->name(), "' (", v->type().ToString(), ") has ",
                        shape ? "a shape known only at run time" : "a dtype the device does not hold",
                        shape ? ": sized when its producer has run, kept on the host" : "");
  }
  return "";
}

std::string NodeLabel(const Node& n) {
  if (!n.name().empty()) return n.name();
  if (n.num_outputs() > 0) return n.output(0)->name();
  return n.op();
}

// A C identifier from any text.
std::string Identifier(absl::string_view s) {
  std::string r;
  for (char c : s) r += absl::ascii_isalnum(static_cast<unsigned char>(c)) ? absl::ascii_tolower(c) : '_';
  return r.empty() ? "k" : r;
}

// A generated kernel of one node: its CUDA form and which value each of
// the tile kernel's arguments is (null: the workspace).
struct NodeKernel {
  CudaKernel cuda;
  std::vector<const Value*> args;
  std::string tile_ir;
};

// Lowers nodes through the shared backend and the CUDA code generator.
class KernelBuilder {
 public:
  KernelBuilder(const TargetDescription& d, const CudaBuildOptions& build, Precision precision)
      : build_(build), precision_(precision), figures_(tile::FiguresOf(d)) {}

  DType MatrixInput(const Node& n) const {
    DType t = DType::kF32;
    for (const Value* v : n.inputs())
      if (v && v->type().is_tensor()) {
        t = v->type().dtype();
        break;
      }
    // Under mixed precision the graph says which matrix ops are narrow: an
    // f32 one stays f32.
    return t != DType::kF32 || precision_ == Precision::kMixed ? t : MatrixDType(precision_);
  }

  absl::StatusOr<NodeKernel> Build(const Node& n) {
    std::vector<const Value*> args;  // the value each kernel argument stands for
    KILN_ASSIGN_OR_RETURN(tile::TileKernel k, tile::LowerNode(n, MatrixInput(n), figures_, &args));
    if (args.size() != k.args.size()) return absl::InternalError("the lowering named no value for some argument");
    // The kernel's name is its op and a hash of its source under a fixed
    // name and canonical argument names, so identical kernels (of one model
    // or many: the repeated blocks of a ResNet stage) share one function.
    tile::CanonicalizeNames(k);
    std::string plan = k.plan;
    std::string op = Identifier(n.domain() == "kiln" && n.op() == "Fused" ? n.GetString("kind", "fused") : n.op());
    k.name = absl::StrCat("kiln_", op);
    KILN_ASSIGN_OR_RETURN(CudaKernel probe, EmitCudaKernel(k, build_.arch));
    k.name = absl::StrFormat("kiln_%s_%016x", op, StableHash(probe.source));
    KILN_ASSIGN_OR_RETURN(CudaKernel ck, EmitCudaKernel(k, build_.arch));
    if (ck.variants.empty()) return absl::InternalError("the code generator emitted no variant");
    if (ck.plan.empty()) ck.plan = plan;
    return NodeKernel{std::move(ck), std::move(args), tile::Print(k)};
  }

 private:
  const CudaBuildOptions& build_;
  Precision precision_;
  tile::TileCostFigures figures_;
};

// The buffers of a package, one per value that has device storage.
class Buffers {
 public:
  explicit Buffers(CudaPackage* p) : p_(p) {}

  int Get(const Value* v) const {
    auto it = index_.find(v);
    return it == index_.end() ? -1 : it->second;
  }

  int Add(const Value* v, PackageBuffer::Kind kind) {
    if (int i = Get(v); i >= 0) return i;
    int i = Raw(v->name(), kind, StaticBytes(v));
    index_[v] = i;
    return i;
  }

  int Raw(const std::string& name, PackageBuffer::Kind kind, int64_t bytes) {
    PackageBuffer b;
    b.name = name;
    b.kind = kind;
    b.bytes = bytes;
    p_->buffers.push_back(b);
    return static_cast<int>(p_->buffers.size()) - 1;
  }

  void Alias(const Value* alias, const Value* of) {
    const PackageBuffer& root = p_->buffers[Root(Get(of))];
    int i = Raw(alias->name(), root.kind == PackageBuffer::Kind::kConstant ? PackageBuffer::Kind::kConstant
                                                                              : PackageBuffer::Kind::kIntermediate,
                StaticBytes(alias));
    p_->buffers[i].alias_of = Get(of);
    index_[alias] = i;
  }

  void Touch(int b, int task) {
    if (b < 0) return;
    PackageBuffer& x = p_->buffers[b];
    if (x.first < 0 || task < x.first) x.first = task;
    x.last = std::max(x.last, task);
  }

  int Root(int i) const {
    while (p_->buffers[i].alias_of >= 0) i = p_->buffers[i].alias_of;
    return i;
  }

 private:
  CudaPackage* p_;
  absl::flat_hash_map<const Value*, int> index_;
};

}  // namespace

int CudaPackage::num_host_tasks() const {
  int n = 0;
  for (const PackageTask& t : tasks) n += t.kind == PackageTask::Kind::kHost;
  return n;
}

absl::StatusOr<CudaPackage> BuildCudaPackage(const Model& input, const Target& target,
                                             const CompileOptions& options) {
  KILN_ASSIGN_OR_RETURN(CudaBuildOptions build, CudaBuildOptionsFrom(options));
  CudaPackage pkg;
  pkg.build = build;
  pkg.precision = PrecisionName(options.precision);
  Model model = input.Clone();
  Graph& g = *model.graph;
  pkg.model_name = g.name();
  KernelBuilder builder(target.description(), pkg.build, options.precision);

  // Fused groups and composites: kept whole when a kernel takes them, split
  // back into their members (or the ONNX ops they stand for) otherwise, so
  // the parts can still run on the GPU. Under a narrow precision every
  // group is split back first and the matrix ops narrowed (weights
  // converted once, activations kept narrow between them: NarrowMatrixOps);
  // the groups formed again below then run on the narrow graph, so that
  // GEMMs read f16/bf16 memory and their epilogues and memory-bound chains
  // run narrow too.
  bool narrowed = options.precision == Precision::kFp32;
  // An f32 kiln.Attention the attention kernel takes once narrowed stays
  // whole through --precision=fp16/bf16 and is narrowed with the matrix
  // ops (its kernel computes in the narrow type, as the split-back MatMuls
  // would); under mixed precision it is split back and its parts decided
  // op by op.
  const bool narrows_attention = options.precision == Precision::kFp16 || options.precision == Precision::kBf16;
  KILN_ASSIGN_OR_RETURN(const bool fused_attention, options.BoolSetting("fused-attention", true));
  auto narrowable_attention = [&](const Node& n) {
    return narrows_attention && n.domain() == "kiln" && n.op() == "Attention" && n.num_outputs() == 1 &&
           n.output(0)->type().dtype() == DType::kF32 && tile::AttentionShapesLower(n).ok();
  };
  absl::flat_hash_map<const Node*, absl::StatusOr<NodeKernel>> prebuilt;
  auto keep = [&](Node* n) {
    if (prebuilt.contains(n)) return true;
    // A group over values sized at run time runs its members on the host.
    if (!HostOnlyReason(*n).empty()) return false;
    if (n->domain() == "kiln" && n->op() == "Attention") {
      if (!fused_attention) return false;
      // The kernels read an additive mask: a bool one becomes one first,
      // for the attention form or one query row (the decode kernels).
      const absl::StatusOr<AttentionDims> dims = AttentionDimsOf(*n);
      if (tile::AttentionShapesLower(*n).ok() || (dims.ok() && dims->s == 1)) MakeAttentionMaskAdditive(g, n);
      // One query row against a cache: the decode kernels, at the cache's dtype.
      if (DecodeAttentionTakes(*n).ok()) return target.Place(*n, options).engine == "simt";
    }
    if (!narrowed && n->domain() == "kiln" && n->op() == "Fused") return false;
    if (!narrowed && narrowable_attention(*n) && target.Place(*n, options).engine == "tensorcore") return true;
    const std::string engine = target.Place(*n, options).engine;
    if (engine != "tensorcore" && engine != "simt") return false;
    absl::StatusOr<NodeKernel> k = builder.Build(*n);
    if (!k.ok()) return false;
    prebuilt.emplace(n, std::move(k));
    return true;
  };
  auto split_back = [&]() -> absl::Status {
    if (!fusion::SplitBackKilnNodes(g, keep)) return absl::OkStatus();
    // What the split-back writes may simplify with its neighbours: the
    // Transpose of K an attention expands to composes with the head split's;
    // and groups that each took a copy of a shared producer (a decoder's
    // mask, cloned into every layer's group) leave identical copies, one
    // of which serves them all.
    const bool simplified = SimplifyGraph(g, nullptr);
    const CseReport merged = EliminateCommonSubexpressions(g);
    // Kernels built while splitting back name values these may have
    // replaced or erased: they are built again when their task is made.
    if (simplified || merged.nodes_removed > 0) prebuilt.clear();
    return InferShapes(g);
  };
  KILN_RETURN_IF_ERROR(split_back());
  if (!narrowed) {
    bool changed = false;
    if (narrows_attention) {
      KILN_ASSIGN_OR_RETURN(changed, NarrowMatrixOps(g, MatrixDType(options.precision), narrowable_attention));
    } else {
      KILN_ASSIGN_OR_RETURN(changed, NarrowForPrecision(g, options));
    }
    narrowed = true;
    // Kernels built before narrowing were for the old types.
    prebuilt.clear();
    if (changed) {
      EliminateDeadCode(g);  // the f32 originals of converted weights
      KILN_RETURN_IF_ERROR(InferShapes(g));
    }
    // An attention kept for narrowing whose kernel still cannot be built is split back now.
    KILN_RETURN_IF_ERROR(split_back());
  }
  // What was split back groups anew, a matrix op taking only the epilogue
  // members the GEMM lowering has steps for: a group the kernels could not
  // take whole (a MatMul, its bias Add and a LeakyRelu) becomes the GEMM
  // with its bias and the LeakyRelu on its own, instead of three kernels.
  if (options.fusion) {
    fusion::PartitionOptions grouping;
    grouping.matrix_member = [](const std::vector<const Node*>&, const Node& candidate) {
      return (candidate.domain().empty() && candidate.op() == "Transpose") || tile::GemmEpilogueTakes(candidate);
    };
    if (FormFusionGroups(g, grouping).total_groups() > 0) {
      // Grouping erases nodes and makes new ones, which may take an erased
      // node's address: kernels built so far are keyed by node, so they go.
      prebuilt.clear();
      KILN_RETURN_IF_ERROR(split_back());
    }
  }

  // Every value the device holds must have a static shape; values sized
  // at run time stay on the host, among the host tasks that read and write
  // them (HostOnlyReason). The model's inputs are given by the caller at
  // their compiled sizes; an output may be sized at run time.
  auto check_storable = [&](const Value* v, const Node* user) -> absl::Status {
    if (DeviceStorable(v)) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("value '", v->name(), "' (", v->type().ToString(), ")",
                     user ? absl::StrCat(" of node '", NodeLabel(*user), "' (", user->QualifiedOp(), ")") : "",
                     " cannot live in device memory: the cuda target needs static shapes and fixed-width dtypes"));
  };
  for (const Value* v : g.inputs())
    if (!DeviceStorable(v) && !HostStringInput(v))
      return absl::InvalidArgumentError(
          absl::StrCat("input '", v->name(), "' (", v->type().ToString(), ")",
                       HostStorable(v) ? " has a shape known only at run time: the cuda target compiles a model's "
                                         "inputs at fixed sizes (export the model with static input shapes)"
                                       : " has a dtype the cuda target cannot take as an input"));
  for (const Value* v : g.outputs())
    if (!HostStorable(v))
      return absl::InvalidArgumentError(absl::StrCat("output '", v->name(), "' (", v->type().ToString(),
                                                     ") has a dtype the cuda target cannot return"));
  // Nodes that run on the host whatever their placement, and why.
  absl::flat_hash_map<const Node*, std::string> host_only;
  // And small results computed only from values those nodes made (the
  // shape arithmetic around a value sized at run time): on the GPU each
  // would cost a copy to the device and another back.
  absl::flat_hash_set<const Value*> host_made;
  for (const Node* n : g.nodes()) {
    std::string why = HostOnlyReason(*n);
    if (why.empty()) {
      const std::vector<const Value*> operands = NodeOperands(*n);
      bool from_host = !operands.empty(), small = true;
      for (const Value* v : operands) from_host &= host_made.contains(v);
      int64_t elements = 0;
      for (const Value* v : n->outputs()) {
        small &= v && DeviceStorable(v) && v->type().shape().NumElements() <= kSmallHostElements;
        if (small) elements += v->type().shape().NumElements();
      }
      if (from_host && small)
        why = absl::StrCat("its operands are on the host and its result is small (", elements,
                           " elements): computed there, not copied each way");
    }
    if (why.empty()) continue;
    for (const Value* v : n->outputs())
      if (v) host_made.insert(v);
    host_only.emplace(n, std::move(why));
  }

  Buffers buffers(&pkg);
  absl::flat_hash_map<const Value*, int> value_index;
  // A value the launcher describes, on the device in `buffer` or (-1) on the host.
  auto value_of = [&](const Value* v, int buffer) {
    auto [it, inserted] = value_index.emplace(v, static_cast<int>(pkg.values.size()));
    if (inserted) {
      PackageValue x{v->name(), v->type().dtype(), DimsOf(v)};
      x.ranked = v->type().is_tensor() && v->type().shape().ranked();
      x.buffer = buffer;
      x.on_host = buffer < 0;
      x.dynamic = !DeviceStorable(v);
      pkg.values.push_back(std::move(x));
    }
    return it->second;
  };
  for (const Value* v : g.inputs())
    if (DeviceStorable(v)) buffers.Add(v, PackageBuffer::Kind::kInput);  // a string input stays on the host
  // Step outputs NAME.next that a ScatterElements computes over its data
  // input NAME (a KV cache at its position) are that input's bytes
  // (donation): the scatter writes only its updates, and a caller that
  // passes one pointer for both (kiln_model_run_device) copies nothing.
  absl::flat_hash_set<const Value*> donated;
  {
    const std::vector<std::pair<const Value*, const Value*>> feeds = runtime::StepFeedValues(g);
    auto in_place = [&](const Node& n, int input) {
      return input == 0 && !host_only.contains(&n) && IsScatterCopy(n) && DevicePiecesOf(n).ok() &&
             target.Place(n, options).engine == "simt";
    };
    for (const Donation& d : FindDonations(g, feeds, IsView, in_place)) {
      buffers.Alias(d.output, d.input);
      donated.insert(d.output);
    }
  }
  for (const Value* v : g.outputs())
    if (DeviceStorable(v) && !v->is_constant() && v->producer() &&
        (!IsView(*v->producer()) || host_only.contains(v->producer())))
      buffers.Add(v, PackageBuffer::Kind::kOutput);

  absl::flat_hash_map<std::string, int> kernel_index;  // function of the first variant -> kernel
  auto add_kernel = [&](PackageKernel k) {
    auto [it, inserted] = kernel_index.emplace(k.variants.front().function, static_cast<int>(pkg.kernels.size()));
    if (inserted) pkg.kernels.push_back(std::move(k));
    return it->second;
  };

  const CopyChains chains(g, [&](const Node& n) {
    return !host_only.contains(&n) && IsCopyOp(n) && CopyElementBytes(n).ok() &&
           target.Place(n, options).engine == "simt";
  }, host_only);
  // Host tasks and their nodes: their operands and results are bound once
  // every task is placed, so that a value only host tasks touch stays on
  // the host.
  std::vector<std::pair<int, const Node*>> host_tasks;

  int node_index = -1;
  for (Node* n : g.nodes()) {
    ++node_index;
    const int t = static_cast<int>(pkg.tasks.size());
    PackageTask task;
    task.node = NodeLabel(*n);
    task.op = n->QualifiedOp();
    {
      const OpCost cost = NodeCost(*n);
      task.flops = cost.flops;
      task.bytes = cost.bytes_read + cost.bytes_written;
    }
    auto use = [&](const Value* v) -> absl::StatusOr<int> {
      KILN_RETURN_IF_ERROR(check_storable(v, n));
      int b = buffers.Add(v, v->is_constant() ? PackageBuffer::Kind::kConstant : PackageBuffer::Kind::kIntermediate);
      buffers.Touch(b, t);
      return b;
    };
    auto def = [&](const Value* v) -> absl::StatusOr<int> {
      KILN_RETURN_IF_ERROR(check_storable(v, n));
      int b = buffers.Add(v, PackageBuffer::Kind::kIntermediate);
      buffers.Touch(b, t);
      return b;
    };

    // A task where nothing runs.
    auto add_view = [&](const char* reason) {
      task.kind = PackageTask::Kind::kView;
      task.engine = "view";
      task.reason = reason;
      pkg.tasks.push_back(std::move(task));
    };
    const bool view = IsView(*n) && !host_only.contains(n);
    if (view && chains.Absorbed(n->output(0))) {
      add_view("a view that only copies read: they read its source");
      continue;
    }
    if (view && buffers.Get(n->output(0)) < 0) {
      KILN_RETURN_IF_ERROR(use(n->input(0)).status());
      buffers.Alias(n->output(0), n->input(0));
      buffers.Touch(buffers.Get(n->output(0)), t);
      add_view("a view of its input's bytes: nothing moves");
      continue;
    }

    std::string engine = "host", reason;
    if (const auto it = host_only.find(n); it != host_only.end()) {
      reason = it->second;
    } else {
      Placement p = target.Place(*n, options);
      if (p.engine.empty())
        return absl::InvalidArgumentError(absl::StrCat("node '", task.node, "' (", task.op, "): ", p.reason));
      engine = p.engine;
      reason = p.reason;
    }
    bool placed = false;
    if (const std::vector<CopyChains::Read>* reads = chains.ReadsOf(n)) {  // a copy on the device
      const int64_t element_bytes = *CopyElementBytes(*n);
      std::vector<PackageTask::Launch> launches;
      int absorbed = 0;
      for (const Value* v : n->outputs()) absorbed += chains.Absorbed(v);
      int in_place = 0;
      for (const CopyChains::Read& r : *reads) {
        if (r.piece.elements() == 0 || chains.Absorbed(n->output(r.piece.dst))) continue;
        // A donated output's piece that copies its own bytes onto themselves moves nothing.
        const Value* out = n->output(r.piece.dst);
        if (donated.contains(out) && !r.piece.scatter && r.piece.index_input < 0 && r.piece.table_dim < 0 &&
            buffers.Get(r.source) >= 0 && buffers.Root(buffers.Get(out)) == buffers.Root(buffers.Get(r.source)) &&
            r.piece.src_base == r.piece.dst_base && r.piece.src_strides == r.piece.dst_strides) {
          ++in_place;
          KILN_RETURN_IF_ERROR(use(r.source).status());
          buffers.Touch(buffers.Get(out), t);
          continue;
        }
        CopyLaunch c = MakeCopyLaunch(r.piece, element_bytes, n->op());
        PackageKernel k;
        k.name = c.function;
        k.source = c.source;
        k.copy = true;
        k.copy_piece = c.piece;
        k.copy_element_bytes = c.element_bytes;
        k.variants.push_back({c.function, 0, {c.blocks, 1, 1}, c.threads, 0});
        PackageTask::Launch l;
        l.kernel = add_kernel(std::move(k));
        KILN_ASSIGN_OR_RETURN(int dst, def(n->output(c.piece.dst)));
        KILN_ASSIGN_OR_RETURN(int src, use(r.source));
        l.args = {dst, src};
        if (c.piece.index_input >= 0) {
          KILN_ASSIGN_OR_RETURN(int index, use(n->input(c.piece.index_input)));
          l.args.push_back(index);
        }
        launches.push_back(std::move(l));
      }
      if (absorbed == n->num_outputs()) {
        add_view("only copies read its outputs: they read its input instead");
        continue;
      }
      // Outputs no piece writes (empty tensors) still get their buffers.
      for (const Value* v : n->outputs())
        if (!chains.Absorbed(v)) KILN_RETURN_IF_ERROR(def(v).status());
      task.plan = absl::StrCat(launches.size(), " strided-copy launch", launches.size() == 1 ? "" : "es");
      if (in_place > 0) absl::StrAppend(&task.plan, ", in place over its data input (donated: only the updates move)");
      if (absorbed > 0)
        absl::StrAppend(&task.plan, " (", absorbed, " output", absorbed == 1 ? "" : "s",
                        " composed into the copies that read ", absorbed == 1 ? "it" : "them", ")");
      task.launches = std::move(launches);
      placed = true;
    } else if (engine == "simt" && IsCopyOp(*n)) {
      // The chains took every copy that has launches: this one has no
      // pieces, or elements the device does not hold.
      absl::Status why = DevicePiecesOf(*n).status();
      if (why.ok()) why = CopyElementBytes(*n).status();
      reason = absl::StrCat("copy kernel: ", why.message());
    } else if (engine == "simt" && DecodeAttentionTakes(*n).ok()) {
      // Two launches: the chunks' partials into a workspace, then their combination.
      absl::StatusOr<DecodeAttentionLaunch> a = MakeDecodeAttentionLaunch(*n);
      if (a.ok()) {
        const int ws = buffers.Raw(absl::StrCat(task.node, ".workspace"), PackageBuffer::Kind::kWorkspace,
                                   a->what.WorkspaceBytes());
        buffers.Touch(ws, t);
        for (int stage : {1, 2}) {
          PackageKernel k;
          k.name = stage == 1 ? a->partial : a->combine;
          k.source = stage == 1 ? a->source : absl::StrCat("// ", a->combine, ": defined with ", a->partial, "\n");
          k.decode_attention = a->what;
          k.decode_attention_stage = stage;
          k.workspace_bytes = a->what.WorkspaceBytes();
          if (stage == 1)
            k.variants.push_back({k.name, 0, {a->what.chunks, a->what.items, 1}, a->threads,
                                  (2 * 4 + 4 * a->what.d) * 4});
          else
            k.variants.push_back({k.name, 0, {a->what.items, 1, 1}, 32, 0});
          PackageTask::Launch l;
          l.kernel = add_kernel(std::move(k));
          l.workspace = ws;
          if (stage == 1) {
            l.args = {ws};
            for (const Value* v : n->inputs()) {
              if (!v) continue;
              KILN_ASSIGN_OR_RETURN(int x, use(v));
              l.args.push_back(x);
            }
          } else {
            KILN_ASSIGN_OR_RETURN(int y, def(n->output(0)));
            l.args = {y, ws};
          }
          task.launches.push_back(std::move(l));
        }
        task.plan = absl::StrCat("decode attention: ", a->what.items, " heads x batches against ", a->what.l,
                                 " keys in ", a->what.chunks, " chunks of 64, masked keys not read, then their ",
                                 "combination");
        placed = true;
      } else {
        reason = absl::StrCat("decode attention: ", a.status().message());
      }
    } else if (engine == "simt" && (IsIntElementwise(*n) || IsArgReduce(*n))) {
      // Kernels of their own (not from the tile IR): one launch that writes
      // the node's output from its inputs, in order.
      PackageKernel k;
      int64_t blocks = 1, threads = 256, shared = 0;
      absl::Status made;
      if (IsIntElementwise(*n)) {
        absl::StatusOr<IntElementwiseLaunch> a = MakeIntElementwiseLaunch(*n);
        made = a.status();
        if (a.ok()) {
          std::tie(k.name, k.source, blocks, threads) = std::tie(a->function, a->source, a->blocks, a->threads);
          k.int_elementwise = a->what;
          task.plan = absl::StrCat("integer elementwise in ", DTypeName(a->what.inputs[0]));
        }
      } else {
        absl::StatusOr<ArgReduceLaunch> a = MakeArgReduceLaunch(*n);
        made = a.status();
        if (a.ok()) {
          std::tie(k.name, k.source, blocks, threads, shared) =
              std::tie(a->function, a->source, a->blocks, a->threads, a->shared_bytes);
          k.arg_reduce = a->what;
          task.plan = absl::StrCat("arg-reduction: a block of ", a->threads, " threads per output element");
        }
      }
      if (made.ok()) {
        k.variants.push_back({k.name, 0, {blocks, 1, 1}, threads, shared});
        PackageTask::Launch l;
        l.kernel = add_kernel(std::move(k));
        KILN_ASSIGN_OR_RETURN(int y, def(n->output(0)));
        l.args = {y};
        for (const Value* v : n->inputs()) {
          KILN_ASSIGN_OR_RETURN(int x, use(v));
          l.args.push_back(x);
        }
        task.launches.push_back(std::move(l));
        placed = true;
      } else {
        reason = absl::StrCat("simt kernel: ", made.message());
      }
    } else if (engine == "nccl") {
      // A kiln.AllReduce: each output the mean of its input over the
      // replicas, in a bucket PlanCollectives forms below.
      for (int i = 0; i < n->num_inputs(); ++i) {
        CollectiveItem c;
        KILN_ASSIGN_OR_RETURN(c.input, use(n->input(i)));
        KILN_ASSIGN_OR_RETURN(c.output, def(n->output(i)));
        c.dtype = n->input(i)->type().dtype();
        c.elements = n->input(i)->type().shape().NumElements();
        task.collective.push_back(c);
      }
      pkg.replicas = std::max<int>(pkg.replicas, static_cast<int>(n->GetInt("replicas", 1)));
      task.kind = PackageTask::Kind::kCollective;
      task.engine = engine;
      task.reason = reason;
      task.plan = "an ncclAllReduce (average) in its bucket, on the links stream";
      pkg.tasks.push_back(std::move(task));
      continue;
    } else if (engine == "tensorcore" || engine == "simt") {
      absl::StatusOr<NodeKernel> k = absl::UnknownError("");
      if (auto it = prebuilt.find(n); it != prebuilt.end()) k = std::move(it->second);
      else k = builder.Build(*n);
      if (k.ok()) {
        CudaKernel& ck = k->cuda;
        PackageKernel pk;
        pk.name = ck.name;
        pk.source = ck.source;
        pk.matrix = ck.matrix;
        pk.variants = ck.variants;
        pk.workspace_bytes = ck.workspace_bytes;
        pk.zero_args = ck.zero_args;
        pk.tile_ir = std::move(k->tile_ir);
        task.plan = ck.plan;
        PackageTask::Launch l;
        l.kernel = add_kernel(std::move(pk));
        for (const Value* v : k->args) {
          if (!v) {
            if (l.workspace < 0) {
              l.workspace = buffers.Raw(absl::StrCat(task.node, ".workspace"), PackageBuffer::Kind::kWorkspace,
                                        std::max<int64_t>(ck.workspace_bytes, 1));
              buffers.Touch(l.workspace, t);
            }
            l.args.push_back(l.workspace);
            continue;
          }
          bool is_output = v->producer() == n;
          KILN_ASSIGN_OR_RETURN(int b, is_output ? def(v) : use(v));
          l.args.push_back(b);
        }
        task.launches.push_back(std::move(l));
        placed = true;
      } else {
        reason = absl::StrCat(engine, " kernel: ", k.status().message());
      }
    } else if (engine != "host") {
      reason = absl::StrCat("engine '", engine, "' runs on the host here: ", reason);
    }
    if (placed) {
      task.kind = PackageTask::Kind::kKernel;
      task.engine = engine;
      task.reason = reason;
      pkg.tasks.push_back(std::move(task));
      continue;
    }

    // A host task: the reference kernel on the host, operands copied in and out.
    const OpDef* opdef = OpRegistry::Global().Find(*n);
    if (!opdef || !opdef->kernel)
      return absl::InvalidArgumentError(
          absl::StrCat("node '", task.node, "' (", task.op, "): ", reason, ", and it has no host kernel"));
    task.kind = PackageTask::Kind::kHost;
    task.engine = "host";
    task.reason = reason;
    task.host_node = node_index;
    host_tasks.push_back({t, n});
    pkg.tasks.push_back(std::move(task));
  }
  // A host task's operand or result that a kernel, a view or the caller
  // reads or writes has a device buffer and is copied; one that only host
  // tasks touch stays on the host (a value sized at run time always does).
  for (const auto& [t, n] : host_tasks) {
    PackageTask& task = pkg.tasks[t];
    for (const Value* v : NodeOperands(*n)) {
      if (!HostStorable(v)) return check_storable(v, n);
      const int b = buffers.Get(v);
      buffers.Touch(b, t);
      task.host_inputs.push_back(value_of(v, b));
    }
    for (const Value* v : n->outputs()) {
      const bool needed = v->has_uses() || std::count(g.outputs().begin(), g.outputs().end(), v);
      if (needed) {
        if (!HostStorable(v)) return check_storable(v, n);
        const int b = buffers.Get(v);
        buffers.Touch(b, t);
        task.host_outputs.push_back(value_of(v, b));
        continue;
      }
      PackageValue x{v->name(), v->type().dtype(), DimsOf(v)};
      x.ranked = v->type().is_tensor() && v->type().shape().ranked();
      x.dynamic = !DeviceStorable(v);
      pkg.values.push_back(std::move(x));
      task.host_outputs.push_back(static_cast<int>(pkg.values.size()) - 1);
    }
  }
  const int num_tasks = static_cast<int>(pkg.tasks.size());
  for (const Value* v : g.inputs()) pkg.inputs.push_back(value_of(v, buffers.Get(v)));
  for (const Value* v : g.outputs()) {
    int b = buffers.Get(v);
    if (b < 0 && DeviceStorable(v))
      b = buffers.Add(v, v->is_constant() ? PackageBuffer::Kind::kConstant : PackageBuffer::Kind::kOutput);
    pkg.outputs.push_back(value_of(v, b));
  }

  // A data-parallel step's AllReduces in buckets, their buffers kept alive
  // while the links stream may read or write them.
  KILN_RETURN_IF_ERROR(PlanCollectives(
      target.description(), options, pkg, [&](int b) { return buffers.Root(b); },
      [&](int b, int t) { buffers.Touch(b, t); }));

  // Lifetimes: inputs from the start, outputs to the end; a view keeps its
  // root alive as long as it is read.
  for (int v : pkg.inputs) buffers.Touch(pkg.values[v].buffer, 0);
  for (int v : pkg.outputs) buffers.Touch(pkg.values[v].buffer, num_tasks);
  for (size_t i = 0; i < pkg.buffers.size(); ++i) {
    PackageBuffer& b = pkg.buffers[i];
    if (b.first < 0) b.first = b.last = 0;
    if (b.alias_of >= 0) {
      int r = buffers.Root(static_cast<int>(i));
      buffers.Touch(r, b.first);
      buffers.Touch(r, b.last);
    }
  }
  std::vector<BufferLife> lives;
  std::vector<int> which;
  for (size_t i = 0; i < pkg.buffers.size(); ++i) {
    const PackageBuffer& b = pkg.buffers[i];
    if (b.alias_of >= 0 || b.kind == PackageBuffer::Kind::kConstant) continue;
    lives.push_back({std::max<int64_t>(b.bytes, 1), b.first, b.last});
    which.push_back(static_cast<int>(i));
  }
  MemoryPlan plan = PlanMemory(lives, kAlignment);
  for (size_t j = 0; j < which.size(); ++j) pkg.buffers[which[j]].offset = plan.offsets[j];
  pkg.arena_bytes = plan.peak_bytes;
  pkg.naive_bytes = plan.naive_bytes;

  // Constants: one copy of each distinct content, aligned.
  {
    absl::flat_hash_map<const Value*, int> constant_buffer;
    // Find each constant buffer's value again (buffers keep names only).
    std::vector<const Value*> constant_values(pkg.buffers.size(), nullptr);
    std::vector<const Graph*> graphs = {&g};
    for (size_t gi = 0; gi < graphs.size(); ++gi) {
      for (const Value* c : graphs[gi]->Constants())
        if (int b = buffers.Get(c); b >= 0) constant_values[b] = c;
      for (const Node* n : graphs[gi]->nodes())
        for (const Graph* sg : n->subgraphs()) graphs.push_back(sg);
    }
    std::map<std::pair<uint64_t, int64_t>, std::vector<int64_t>> by_hash;  // (hash, bytes) -> offsets
    for (size_t i = 0; i < pkg.buffers.size(); ++i) {
      PackageBuffer& b = pkg.buffers[i];
      if (b.kind != PackageBuffer::Kind::kConstant || b.alias_of >= 0) continue;
      const Value* c = constant_values[i];
      if (!c || !c->constant().defined())
        return absl::InvalidArgumentError(absl::StrCat("constant '", b.name, "' has no data (an elided constant)"));
      std::string bytes(reinterpret_cast<const char*>(c->constant().bytes().data()), c->constant().nbytes());
      auto& offsets = by_hash[{StableHash(bytes), static_cast<int64_t>(bytes.size())}];
      bool found = false;
      for (int64_t off : offsets)
        if (pkg.constants.compare(static_cast<size_t>(off), bytes.size(), bytes) == 0) {
          b.offset = off;
          found = true;
          break;
        }
      if (found) continue;
      b.offset = static_cast<int64_t>(pkg.constants.size());
      offsets.push_back(b.offset);
      pkg.constants += bytes;
      pkg.constants.resize((pkg.constants.size() + kAlignment - 1) / kAlignment * kAlignment, '\0');
    }
  }
  for (size_t i = 0; i < pkg.buffers.size(); ++i)
    if (pkg.buffers[i].alias_of >= 0) {
      const PackageBuffer& r = pkg.buffers[buffers.Root(static_cast<int>(i))];
      pkg.buffers[i].offset = r.offset;
      pkg.buffers[i].kind = r.kind == PackageBuffer::Kind::kConstant ? PackageBuffer::Kind::kConstant
                                                                     : pkg.buffers[i].kind;
    }

  // Host tasks read the optimized graph: its text, and the blobs of every
  // constant except those only GPU kernels read.
  if (pkg.num_host_tasks() > 0) {
    BlobStore blobs;
    pkg.host_graph_kir = PrintModel(model, PrintOptions(), &blobs);
    absl::flat_hash_set<uint64_t> keep, drop;
    std::vector<const Graph*> graphs = {&g};
    for (size_t gi = 0; gi < graphs.size(); ++gi)
      for (const Node* n : graphs[gi]->nodes()) {
        for (const auto& [name, a] : n->attrs())
          if (a.kind() == AttrKind::kTensor && a.t().defined()) keep.insert(StableTensorHash(a.t()));
        for (const Graph* sg : n->subgraphs()) graphs.push_back(sg);
        if (gi > 0) {
          for (const Value* c : graphs[gi]->Constants())
            if (c->constant().defined()) keep.insert(StableTensorHash(c->constant()));
        }
      }
    absl::flat_hash_set<const Node*> host_nodes;
    {
      int i = 0;
      for (const Node* n : g.nodes()) {
        if (pkg.tasks[i].kind == PackageTask::Kind::kHost) host_nodes.insert(n);
        ++i;
      }
    }
    for (const Value* c : g.Constants()) {
      if (!c->constant().defined()) continue;
      bool host = false;
      for (const Use& u : c->uses()) host |= u.user && host_nodes.contains(u.user);
      (host ? keep : drop).insert(StableTensorHash(c->constant()));
    }
    BlobStore kept;
    for (const auto& [h, t] : blobs.blobs)
      if (keep.contains(h) || !drop.contains(h)) kept.blobs.emplace(h, t);
    if (!kept.empty()) pkg.host_graph_blobs = SerializeBlobStore(kept);
  }
  return pkg;
}

}  // namespace kiln::target::cuda
