//===- pass_table.cc - The table of passes and named pipelines ------------===//
//
// The one place where passes get their names. `kiln opt --passes=a,b` and
// named pipelines refer to these names.
//
//===----------------------------------------------------------------------===//
#include "graph/passes/cse.h"
#include "graph/passes/dce.h"
#include "graph/passes/dedup_constants.h"
#include "graph/passes/eliminate_dead_branches.h"
#include "graph/passes/expand_composites.h"
#include "graph/passes/fold_batchnorm.h"
#include "graph/passes/fold_constants.h"
#include "graph/passes/form_fusion_groups.h"
#include "graph/passes/gears.h"
#include "graph/passes/infer_shapes.h"
#include "graph/passes/narrow_precision.h"
#include "graph/passes/pass_registry.h"
#include "graph/passes/prune.h"
#include "graph/passes/recognize_composites.h"
#include "graph/passes/simplify.h"
#include "graph/passes/training_step.h"

namespace kiln {

const std::vector<PassInfo>& RegisteredPasses() {
  static const std::vector<PassInfo> passes = {
      {"infer-shapes", "infer types and shapes; Loop/Scan bodies iterate to a fixpoint", CreateInferShapesPass},
      {"fold-constants", "evaluate nodes whose inputs are constant or whose output depends only on static shapes",
       CreateFoldConstantsPass},
      {"cse", "merge nodes with the same op, attributes and inputs", CreateCsePass},
      {"dce", "remove nodes and constants that no output depends on", CreateDcePass},
      {"prune", "keep only the outputs named by --outputs, then remove what they do not need", CreatePrunePass},
      {"eliminate-dead-branches", "inline If nodes with a constant condition; remove Loops that never run",
       CreateEliminateDeadBranchesPass},
      {"dedup-constants", "merge constants with identical dtype, shape and bytes", CreateDedupConstantsPass},
      {"simplify", "algebraic simplification (identities, transpose/reshape/cast chains, squeeze pairs)",
       CreateSimplifyPass},
      {"fold-batchnorm", "fold inference BatchNormalization into the Conv or Gemm that feeds it",
       CreateFoldBatchNormPass},
      {"recognize-composites", "turn LayerNorm, GELU, Softmax and attention subgraphs into composite nodes",
       CreateRecognizeCompositesPass},
      {"expand-composites", "expand composite nodes back into ONNX ops", CreateExpandCompositesPass},
      {"narrow-fp16", "matrix ops compute in fp16 with fp32 accumulation; activations stay fp16 between them",
       CreateNarrowFp16Pass},
      {"narrow-bf16", "matrix ops compute in bf16 with fp32 accumulation; activations stay bf16 between them",
       CreateNarrowBf16Pass},
      {"mixed-precision",
       "ops compute in fp16 (or bf16) op by op from allow, infer, clear and deny lists and a cost model of the casts",
       CreateMixedPrecisionPass},
      {"form-fusion-groups", "group memory-bound chains and matmul/conv epilogues into fused nodes",
       CreateFormFusionGroupsPass},
      {"gears", "compile one static variant per gear (--dynamic-batch, --dynamic-dims) behind a shape dispatch",
       CreateGearsPass},
      {"training-step",
       "append the gradient of the loss for each parameter (P.grad) and one SGD step (P.next) as outputs",
       CreateTrainingStepPass},
  };
  return passes;
}

const std::vector<PipelineInfo>& RegisteredPipelines() {
  static const std::vector<PipelineInfo> pipelines = {
      // Constants are merged first as well as after folding: exports carry
      // many copies of the same small constants (scalars, axes, shape
      // pieces), and every walk of the fixpoint group then reads one of
      // each instead of every copy. CSE after the composites merges what
      // each recognition made alike (a decoder's layers each invert the
      // one attention mask).
      {"default", "the optimizer every target runs",
       "dedup-constants,infer-shapes,fixpoint(fold-constants,infer-shapes,simplify,eliminate-dead-branches,cse,dce),"
       "fold-batchnorm,dedup-constants,recognize-composites,cse,dce"},
      {"cleanup", "folding and dead-code removal only",
       "infer-shapes,fixpoint(fold-constants,infer-shapes,cse,dce)"},
  };
  return pipelines;
}

const PassInfo* FindPass(absl::string_view name) {
  for (const PassInfo& p : RegisteredPasses())
    if (name == p.name) return &p;
  return nullptr;
}

const PipelineInfo* FindPipeline(absl::string_view name) {
  for (const PipelineInfo& p : RegisteredPipelines())
    if (name == p.name) return &p;
  return nullptr;
}

}  // namespace kiln
