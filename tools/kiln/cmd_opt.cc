//===- cmd_opt.cc - `kiln opt` --------------------------------------------===//
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/commandlineflag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "graph/ir/dot.h"
#include "graph/ir/printer.h"
#include "graph/passes/narrow_precision.h"
#include "graph/passes/pass_manager.h"
#include "graph/passes/pass_registry.h"
#include "graph/passes/training_step.h"
#include "graph/support/status.h"
#include "graph/verifier/verifier.h"
#include "tools/kiln/cli_util.h"

ABSL_FLAG(std::string, o, "", "Output .kir file (default: standard output).");
ABSL_FLAG(std::string, emit, "kir", "Output form: kir (text IR) or dot (Graphviz).");
ABSL_FLAG(bool, inline_constants, false, "Print every constant inline instead of as a blob reference.");
ABSL_FLAG(std::string, passes, "default", "Pipeline to run: pass names, named pipelines, fixpoint(...) groups.");
ABSL_FLAG(std::vector<std::string>, outputs, {}, "prune: graph outputs to keep.");
ABSL_FLAG(int64_t, fold_max_elements, kiln::PassOptions().fold_max_elements,
          "fold-constants: leave a node alone when a result would have more elements than this.");
ABSL_FLAG(std::string, loss, "", "training-step: the loss output (default: the one float scalar output).");
ABSL_FLAG(std::vector<std::string>, params, {}, "training-step: the parameters (default: float constants of rank >= 1).");
ABSL_FLAG(double, learning_rate, kiln::TrainingOptions().learning_rate, "training-step: the SGD learning rate.");
ABSL_FLAG(std::string, optimizer, "sgd", "training-step: the update rule (sgd, adam, adamw).");
ABSL_FLAG(double, momentum, 0, "training-step: SGD's momentum.");
ABSL_FLAG(bool, nesterov, false, "training-step: Nesterov momentum (SGD).");
ABSL_FLAG(double, weight_decay, 0, "training-step: weight decay (L2 for sgd/adam, decoupled for adamw).");
ABSL_FLAG(std::vector<std::string>, betas, {}, "training-step: Adam's beta1,beta2 (default 0.9,0.999).");
ABSL_FLAG(double, epsilon, kiln::TrainingOptions().epsilon, "training-step: Adam's epsilon.");
ABSL_FLAG(std::string, state, "constants",
          "training-step: the parameters and optimizer state as 'constants' or as 'inputs' with initial values.");
ABSL_FLAG(std::string, loss_scale, "none",
          "training-step: loss scaling: none, a static scale X, dynamic or dynamic:X (initial X, default 65536).");
ABSL_FLAG(int, loss_scale_growth_interval, kiln::TrainingOptions().loss_scale_growth_interval,
          "training-step: finite steps in a row before a dynamic loss scale doubles.");
ABSL_FLAG(int, replicas, 1, "training-step: data-parallel replicas that average their gradients (kiln.AllReduce).");
ABSL_FLAG(bool, verify_each, false, "Run the verifier after every pass.");
ABSL_FLAG(bool, list_passes, false, "List the registered passes and named pipelines.");
ABSL_FLAG(std::vector<std::string>, print_after, {}, "Print the graph after these passes (on stderr).");
ABSL_FLAG(bool, print_after_all, false, "Print the graph after every pass (on stderr).");
ABSL_FLAG(bool, time_passes, false, "Print a table of time per pass (on stderr).");
ABSL_FLAG(bool, stats, false, "Print each pass's counters (on stderr).");
ABSL_FLAG(std::vector<std::string>, dynamic_batch, {}, "gears: batch sizes, one static variant each.");
ABSL_FLAG(std::string, dynamic_dims, "", "gears: NAME=v1,v2;NAME2=... values of symbolic dims.");
ABSL_FLAG(std::string, mixed_type, "fp16", "mixed precision: the narrow type, fp16 or bf16.");
ABSL_FLAG(std::vector<std::string>, mixed_allow, {}, "mixed precision: matrix ops moved to the allow list.");
ABSL_FLAG(std::vector<std::string>, mixed_infer, {}, "mixed precision: ops moved to the infer list.");
ABSL_FLAG(std::vector<std::string>, mixed_clear, {}, "mixed precision: ops moved to the clear list.");
ABSL_FLAG(std::vector<std::string>, mixed_deny, {}, "mixed precision: ops moved to the deny list (computed f32).");
ABSL_FLAG(int64_t, mixed_min_macs_per_cast, kiln::MixedPrecisionOptions().min_macs_per_cast,
          "mixed precision: a matrix op computes narrow when it does at least this many multiply-adds per element "
          "converted by the Cast kernels it needs (0: always).");

namespace kiln::cli {

absl::StatusOr<PassOptions> PassOptionsFromFlags() {
  PassOptions po;
  po.outputs = absl::GetFlag(FLAGS_outputs);
  po.fold_max_elements = absl::GetFlag(FLAGS_fold_max_elements);
  if (po.fold_max_elements < 0)
    return absl::InvalidArgumentError("--fold-max-elements: must not be negative");
  for (const std::string& b : absl::GetFlag(FLAGS_dynamic_batch)) {
    int64_t v;
    if (!absl::SimpleAtoi(b, &v) || v <= 0)
      return absl::InvalidArgumentError("--dynamic-batch: '" + b + "' is not a positive integer");
    po.dynamic_batch.push_back(v);
  }
  std::string dims = absl::GetFlag(FLAGS_dynamic_dims);
  if (!dims.empty()) {
    for (absl::string_view entry : absl::StrSplit(dims, ';', absl::SkipEmpty())) {
      std::vector<std::string> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
      if (kv.size() != 2 || kv[0].empty())
        return absl::InvalidArgumentError("--dynamic-dims: expected NAME=v1,v2 but got '" + std::string(entry) + "'");
      for (absl::string_view v : absl::StrSplit(kv[1], ',')) {
        int64_t n;
        if (!absl::SimpleAtoi(v, &n) || n <= 0)
          return absl::InvalidArgumentError("--dynamic-dims: '" + std::string(v) + "' is not a positive integer");
        po.dynamic_dims[kv[0]].push_back(n);
      }
    }
  }
  std::string type = absl::GetFlag(FLAGS_mixed_type);
  if (type != "fp16" && type != "bf16")
    return absl::InvalidArgumentError("--mixed-type must be fp16 or bf16, not '" + type + "'");
  po.mixed.narrow = type == "fp16" ? DType::kF16 : DType::kBF16;
  po.mixed.allow = absl::GetFlag(FLAGS_mixed_allow);
  po.mixed.infer = absl::GetFlag(FLAGS_mixed_infer);
  po.mixed.clear = absl::GetFlag(FLAGS_mixed_clear);
  po.mixed.deny = absl::GetFlag(FLAGS_mixed_deny);
  po.mixed.min_macs_per_cast = absl::GetFlag(FLAGS_mixed_min_macs_per_cast);
  if (absl::Status s = CheckMixedPrecision(po.mixed); !s.ok()) return s;
  po.training.loss = absl::GetFlag(FLAGS_loss);
  po.training.params = absl::GetFlag(FLAGS_params);
  po.training.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  if (!(po.training.learning_rate >= 0))
    return absl::InvalidArgumentError("--learning-rate must not be negative");
  po.training.replicas = absl::GetFlag(FLAGS_replicas);
  if (po.training.replicas < 1 || po.training.replicas > kMaxReplicas)
    return absl::InvalidArgumentError(absl::StrCat("--replicas must be between 1 and ", kMaxReplicas, ", not ",
                                                   po.training.replicas));
  KILN_ASSIGN_OR_RETURN(po.training.optimizer, ParseOptimizer(absl::GetFlag(FLAGS_optimizer)));
  po.training.momentum = absl::GetFlag(FLAGS_momentum);
  po.training.nesterov = absl::GetFlag(FLAGS_nesterov);
  po.training.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  po.training.epsilon = absl::GetFlag(FLAGS_epsilon);
  if (std::vector<std::string> betas = absl::GetFlag(FLAGS_betas); !betas.empty()) {
    if (betas.size() != 2 || !absl::SimpleAtod(betas[0], &po.training.beta1) ||
        !absl::SimpleAtod(betas[1], &po.training.beta2))
      return absl::InvalidArgumentError("--betas takes two numbers, beta1,beta2 (as 0.9,0.999)");
  }
  if (std::string state = absl::GetFlag(FLAGS_state); state == "inputs" || state == "constants")
    po.training.state_as_inputs = state == "inputs";
  else
    return absl::InvalidArgumentError("--state must be 'constants' or 'inputs', not '" + state + "'");
  {
    const std::string scale = absl::GetFlag(FLAGS_loss_scale);
    using LS = TrainingOptions::LossScaling;
    absl::string_view rest = scale;
    if (scale == "none") {
      po.training.loss_scaling = LS::kNone;
    } else if (absl::ConsumePrefix(&rest, "dynamic")) {
      po.training.loss_scaling = LS::kDynamic;
      if (!rest.empty() && !(absl::ConsumePrefix(&rest, ":") && absl::SimpleAtod(rest, &po.training.loss_scale)))
        return absl::InvalidArgumentError("--loss-scale must be none, a number, dynamic or dynamic:X, not '" + scale + "'");
    } else if (absl::SimpleAtod(scale, &po.training.loss_scale)) {
      po.training.loss_scaling = LS::kStatic;
    } else {
      return absl::InvalidArgumentError("--loss-scale must be none, a number, dynamic or dynamic:X, not '" + scale + "'");
    }
    po.training.loss_scale_growth_interval = absl::GetFlag(FLAGS_loss_scale_growth_interval);
  }
  if (absl::Status s = CheckTrainingOptions(po.training); !s.ok()) return s;
  return po;
}

// Runs the --passes pipeline (with the reporting flags) on `model`.
namespace {

// Flags that act only through one pass. Given (away from their defaults)
// to a pipeline that runs no such pass they would do nothing, so they are
// refused. `opt_only`: other commands consume the flag themselves (compile's
// gears and --precision=mixed) or do not take it.
struct PassFlag {
  const char* flag;  // as spelled on the command line, without the dashes
  const char* pass;
  bool opt_only;
};
constexpr PassFlag kPassFlags[] = {
    {"fold-max-elements", "fold-constants", false},
    {"dynamic-batch", "gears", true},
    {"dynamic-dims", "gears", true},
    {"mixed-type", "mixed-precision", true},
    {"mixed-allow", "mixed-precision", true},
    {"mixed-infer", "mixed-precision", true},
    {"mixed-clear", "mixed-precision", true},
    {"mixed-deny", "mixed-precision", true},
    {"mixed-min-macs-per-cast", "mixed-precision", true},
    {"loss", "training-step", true},
    {"params", "training-step", true},
    {"learning-rate", "training-step", true},
    {"optimizer", "training-step", true},
    {"momentum", "training-step", true},
    {"nesterov", "training-step", true},
    {"weight-decay", "training-step", true},
    {"betas", "training-step", true},
    {"epsilon", "training-step", true},
    {"state", "training-step", true},
    {"loss-scale", "training-step", true},
    {"loss-scale-growth-interval", "training-step", true},
    {"replicas", "training-step", true},
};

}  // namespace

absl::StatusOr<std::string> PipelineFromFlags(const std::string& target_pipeline, bool is_opt) {
  std::string passes = absl::GetFlag(FLAGS_passes);
  // `--passes` left at "default": the pipeline the target asks for.
  if (passes == "default" && !target_pipeline.empty()) passes = target_pipeline;
  if (passes == "none") passes.clear();
  KILN_ASSIGN_OR_RETURN(PassOptions po, PassOptionsFromFlags());
  // --outputs prunes to those outputs first, unless the pipeline places the
  // prune pass itself.
  if (!po.outputs.empty()) {
    PassManager probe(po);
    if (!passes.empty()) KILN_RETURN_IF_ERROR(probe.AddPipeline(passes));
    if (!probe.RunsPass("prune")) passes = passes.empty() ? "prune" : "prune," + passes;
  }
  PassManagerOptions mo;
  mo.print_after = absl::GetFlag(FLAGS_print_after);
  PassManager probe(po, mo);
  if (!passes.empty()) KILN_RETURN_IF_ERROR(probe.AddPipeline(passes));
  for (const PassFlag& f : kPassFlags) {
    if ((!is_opt && f.opt_only) || probe.RunsPass(f.pass) || !FlagGiven(f.flag)) continue;
    return absl::InvalidArgumentError(absl::StrCat("--", f.flag, " acts through the ", f.pass,
                                                   " pass, which the pipeline '", passes.empty() ? "none" : passes,
                                                   "' does not run (add it: --passes=", f.pass,
                                                   passes.empty() ? "" : ",", passes, ")"));
  }
  if (passes.empty()) {
    // What watches the passes has nothing to watch.
    for (const char* flag : {"time-passes", "stats", "verify-each", "print-after-all", "print-after"})
      if (FlagGiven(flag))
        return absl::InvalidArgumentError(absl::StrCat("--", flag, ": the pipeline runs no pass (--passes=none)"));
  }
  KILN_RETURN_IF_ERROR(probe.CheckPrintAfter());
  return passes;
}

absl::Status RunPipelineFromFlags(Model& model, const std::string& target_pipeline, bool is_opt) {
  KILN_ASSIGN_OR_RETURN(const std::string passes, PipelineFromFlags(target_pipeline, is_opt));
  if (passes.empty()) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(PassOptions po, PassOptionsFromFlags());
  PassManagerOptions mo;
  mo.verify_each = absl::GetFlag(FLAGS_verify_each);
  mo.print_after = absl::GetFlag(FLAGS_print_after);
  mo.print_after_all = absl::GetFlag(FLAGS_print_after_all);
  PassManager pm(po, mo);
  KILN_RETURN_IF_ERROR(pm.AddPipeline(passes));
  KILN_RETURN_IF_ERROR(pm.Run(model).status());
  if (absl::GetFlag(FLAGS_time_passes)) std::cerr << pm.TimingReport();
  if (absl::GetFlag(FLAGS_stats)) std::cerr << pm.StatsReport();
  return absl::OkStatus();
}

namespace {

// --list-passes: the pass table and the named pipelines.
std::string PassList() {
  std::string out = "passes:\n";
  for (const PassInfo& p : RegisteredPasses()) absl::StrAppendFormat(&out, "  %-24s %s\n", p.name, p.summary);
  out += "\npipelines:\n";
  for (const PipelineInfo& p : RegisteredPipelines())
    absl::StrAppendFormat(&out, "  %-24s %s:\n  %-24s %s\n", p.name, p.summary, "", p.spec);
  return out;
}

int Opt(const std::vector<std::string>& args) {
  if (absl::GetFlag(FLAGS_list_passes)) {
    if (!args.empty()) return Fail("--list-passes takes no model");
    std::cout << PassList();
    return 0;
  }
  if (args.size() != 1) return Fail("opt takes one model (MODEL.onnx or MODEL.kir)");
  auto model = LoadModel(args[0]);
  if (!model.ok()) return Fail(model.status());
  absl::Status v = VerifyModel(*model);
  if (!v.ok()) return Fail(v);
  absl::Status p = RunPipelineFromFlags(*model, "", /*is_opt=*/true);
  if (!p.ok()) return Fail(p);
  v = VerifyModel(*model);
  if (!v.ok()) return Fail("the optimized graph does not verify: " + std::string(v.message()));
  if (absl::GetFlag(FLAGS_inline_constants) && absl::GetFlag(FLAGS_emit) == "dot")
    return Fail("--inline-constants: --emit=dot prints no constants");
  PrintOptions po;
  po.inline_all_constants = absl::GetFlag(FLAGS_inline_constants);
  std::string out_path = absl::GetFlag(FLAGS_o);
  std::string emit = absl::GetFlag(FLAGS_emit);
  if (emit != "kir" && emit != "dot") return Fail("--emit must be kir or dot, not '" + emit + "'");
  BlobStore blobs;
  std::string text = emit == "dot" ? ToDot(*model->graph)
                                   : PrintModel(*model, po, out_path.empty() ? nullptr : &blobs);
  if (out_path.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream f(out_path);
  if (!f || !(f << text)) return Fail("cannot write '" + out_path + "'");
  // Blobs go beside a file, never beside a device or a pipe (-o /dev/null).
  std::error_code ec;
  const bool beside_file = !std::filesystem::exists(out_path, ec) || std::filesystem::is_regular_file(out_path, ec);
  if (!blobs.empty() && beside_file) {
    absl::Status s = SaveBlobStore(blobs, out_path + ".blobs");
    if (!s.ok()) return Fail(s);
  }
  return 0;
}

}  // namespace

extern const Command kOptCommand;
const Command kOptCommand = {
    "opt", "optimize a model and print it as .kir text",
    R"(usage: kiln opt MODEL.onnx|MODEL.kir [--passes=PIPELINE] [-o OUT.kir] [flags]

Imports (or parses) the model, verifies it, runs the pass pipeline and prints
the result in kiln's text form. Constants larger than 16 elements print as
blob references whose bytes go to OUT.kir.blobs beside the output (or stay
elided when printing to stdout); --inline-constants prints them in full.

A pipeline is a comma-separated list of pass names, named pipelines
(`default`, `cleanup`) and fixpoint groups `fixpoint(a,b)` or
`fixpoint<N>(a,b)` that repeat until nothing changes (at most N times).
`--passes=none` only imports, verifies and prints. `kiln opt --list-passes`
lists the passes.

flags:
  -o OUT.kir              output file; default standard output
  --passes=PIPELINE       default: default
  --list-passes           list the passes and named pipelines (no model)
  --outputs=a,b           keep only these graph outputs, in this order, and
                          what they need (the prune pass: run first unless
                          --passes places it)
  --fold-max-elements=N   fold-constants: do not fold a node whose result would
                          have more than N elements (default 4194304, 4 Mi)
  --dynamic-batch=1,2,4   gears: one static variant per batch size
  --dynamic-dims='seq=16,32;len=8'  gears: values of other symbolic dims
  --mixed-type=fp16|bf16, --mixed-allow=OPS, --mixed-infer=OPS,
  --mixed-clear=OPS, --mixed-deny=OPS, --mixed-min-macs-per-cast=N
                          mixed-precision: the narrow type, list edits and
                          cost threshold (as in `kiln compile --help`)
  --loss=NAME             training-step: the loss output (default: the one
                          output that is a float tensor of one element)
  --params=a,b            training-step: the parameters, float constants
                          (default: every float constant of rank >= 1 the
                          loss depends on)
  --learning-rate=X       training-step: the learning rate (default 0.01)
  --optimizer=sgd|adam|adamw  training-step: the update, as torch.optim
                          defines it (default sgd); its state (momentum
                          buffers, Adam's moments and step count) is zero
                          constants of the step with outputs NAME.next
  --momentum=X, --nesterov  training-step: SGD's momentum (default 0)
  --weight-decay=X        training-step: L2 (sgd, adam) or decoupled (adamw)
  --betas=B1,B2, --epsilon=X  training-step: Adam's (default 0.9,0.999, 1e-8)
  --loss-scale=S          training-step: none (default), a static scale, or
                          dynamic[:INIT] (torch.cuda.amp.GradScaler's rule,
                          INIT 65536: a step with a non-finite gradient
                          changes nothing and halves the scale; it doubles
                          after N finite steps); the backward pass starts
                          from loss * scale, P.grad is unscaled
  --loss-scale-growth-interval=N  training-step: the dynamic scale's N
                          (default 2000)
  --state=constants|inputs  training-step: the parameters and optimizer state
                          stay constants (default) or become inputs holding
                          their values as initial values: a compiled step
                          that `kiln run --steps=N` loops on (NAME.next ->
                          NAME)
  --replicas=N            training-step: a data-parallel step on N chips:
                          each gradient is averaged over the replicas
                          (kiln.AllReduce) before the update (default 1)
  --verify-each           run the verifier after every pass
  --print-after=p1,p2     print the graph after these passes (stderr)
  --print-after-all       print the graph after every pass (stderr)
  --time-passes           a table of time per pass (stderr)
  --stats                 each pass's counters (stderr)
  --inline-constants      print all constants inline
  --emit=kir|dot          the text IR (default) or a Graphviz graph
)",
    Opt};

}  // namespace kiln::cli
