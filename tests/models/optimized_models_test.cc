// The default optimizer pipeline on the PyTorch-exported models
// (scripts/export_models.py, exported by the models.export fixture): the
// optimized graph verifies, gives the same outputs as the imported graph on
// the reference executor (and PyTorch's), and, with static input shapes, no
// shape plumbing (Shape, Size, a Gather of a shape), Identity or
// constant-only node survives anywhere in it.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/exec/executor.h"
#include "graph/passes/pass_manager.h"
#include "graph/verifier/verifier.h"
#include "gtest/gtest.h"
#include "tests/models/exported_model.h"
#include "tests/passes/group_settles.h"
#include "tools/conformance/conformance.h"

namespace kiln {
namespace {

bool StaticInputs(const Graph& g) {
  for (const Value* v : g.inputs())
    if (!v->type().is_tensor() || !v->type().shape().ranked() || !v->type().shape().is_static()) return false;
  return true;
}

// Whether `v` is computed from a Shape or Size node (through any ops).
bool FromShape(const Value* v, int depth = 0) {
  const Node* p = v ? v->producer() : nullptr;
  if (!p || depth > 64) return false;
  if (p->op() == "Shape" || p->op() == "Size") return true;
  for (const Value* in : p->inputs())
    if (FromShape(in, depth + 1)) return true;
  return false;
}

bool IsRandom(const Node& n) {
  return n.op().rfind("Random", 0) == 0 || n.op() == "Bernoulli" || n.op() == "Multinomial";
}

// What must not survive the default pipeline when input shapes are static.
void Leftovers(const Graph& g, std::vector<std::string>* out) {
  for (const Node* n : g.nodes()) {
    std::string label = absl::StrCat(n->QualifiedOp(), " -> %", n->num_outputs() ? n->output(0)->name() : "");
    if (n->op() == "Shape" || n->op() == "Size") out->push_back("shape op " + label);
    if (n->op() == "Gather" && FromShape(n->input(0))) out->push_back("gather of a shape " + label);
    if (n->op() == "Identity") out->push_back("identity " + label);
    bool all_constant = n->subgraphs().empty() && !IsRandom(*n);
    for (const Value* v : n->inputs()) all_constant &= !v || v->is_constant();
    if (all_constant) out->push_back("constant-only " + label);
    for (const Graph* s : n->subgraphs()) Leftovers(*s, out);
  }
}

int CountNodes(const Graph& g) {
  int count = 0;
  for (const Node* n : g.nodes()) {
    ++count;
    for (const Graph* s : n->subgraphs()) count += CountNodes(*s);
  }
  return count;
}

class OptimizedModel : public ::testing::TestWithParam<std::string> {};

TEST_P(OptimizedModel, DefaultPipelineKeepsOutputsAndLeavesNoShapePlumbing) {
  auto exported = LoadExportedModel(GetParam());
  ASSERT_TRUE(exported.ok()) << exported.status();
  Model* model = &exported->model;
  const std::vector<Tensor>& inputs = exported->inputs;
  Executor before_exec;
  auto before = before_exec.Run(*model->graph, inputs);
  ASSERT_TRUE(before.ok()) << before.status();

  int nodes_before = CountNodes(*model->graph);
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("default").ok());
  auto changed = pm.Run(*model);
  ASSERT_TRUE(changed.ok()) << changed.status();
  absl::Status v = VerifyModel(*model);
  ASSERT_TRUE(v.ok()) << v;
  std::cout << "[ models   ] " << GetParam() << ": " << nodes_before << " -> " << CountNodes(*model->graph)
            << " nodes\n";

  Executor after_exec;
  auto after = after_exec.Run(*model->graph, inputs);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->size(), before->size());
  for (size_t i = 0; i < after->size(); ++i) {
    // Folding and composites reorder float arithmetic a little.
    absl::Status s = CompareTensors((*before)[i], (*after)[i], /*rtol=*/1e-4, /*atol=*/1e-5);
    EXPECT_TRUE(s.ok()) << "output " << i << " differs from the unoptimized graph's: " << s;
    ASSERT_LT(i, exported->expected.size());
    s = CompareTensors(exported->expected[i], (*after)[i], /*rtol=*/1e-3, /*atol=*/1e-5);
    EXPECT_TRUE(s.ok()) << "output " << i << " differs from PyTorch's: " << s;
  }

  ASSERT_TRUE(StaticInputs(*model->graph)) << "the exported model's inputs are expected to be static";
  std::vector<std::string> left;
  Leftovers(*model->graph, &left);
  EXPECT_TRUE(left.empty()) << left.size() << " nodes survive, the first: " << left[0];
}

TEST_P(OptimizedModel, FixpointGroupLeavesNothingToDo) {
  auto exported = LoadExportedModel(GetParam());
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(CheckGroupSettles(exported->model, GetParam()), 6);
}

INSTANTIATE_TEST_SUITE_P(Exported, OptimizedModel,
                         ::testing::Values("tiny_cnn", "mlp", "bert_encoder", "gpt2_block", "resnet18",
                                           "resnet50", "mobilenet_v2"));

}  // namespace
}  // namespace kiln
