//===- graph_names_uses_test.cc - Names across a nest; use lists ----------===//
//
// Graph::UniqueName never returns a name held anywhere in the nest (nested
// and sibling graphs included), and NameInUse sees names of nested graphs;
// use lists stay exact when uses are added, removed and redirected in any
// order (removal finds a use through the slot its user records), and when
// a node is erased keeping its folded outputs as constants. A new
// ScratchMarks starts empty whatever earlier ones marked. Changes to what
// shape inference reads clear the types-current mark of the nodes reading it.
// constant_data() is the data of constants that hold data and of nothing else.
// Look-ups by name find exactly the live values whether the name index was
// kept all along, dropped during a run of edits with no look-ups, or rebuilt.
// NestMayHoldOp sees the ops of nested graphs and forgets an op whose last
// node is erased.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/ir/graph.h"
#include "graph/ir/parser.h"
#include "graph/passes/infer_shapes.h"
#include "graph/passes/pass_manager.h"
#include "graph/verifier/verifier.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

Type F32(std::vector<int64_t> dims) { return Type::Tensor(DType::kF32, Shape::Static(dims)); }

// A graph nested under `parent` holding values named `names`.
std::unique_ptr<Graph> Body(Graph* parent, const std::string& gname, const std::vector<std::string>& names) {
  auto b = std::make_unique<Graph>(gname, parent);
  Value* prev = nullptr;
  for (const std::string& n : names) {
    if (!prev) {
      prev = b->AddConstant(n, Tensor::Scalar<float>(1.0f));
      continue;
    }
    prev = b->AddNode("Neg", {prev}, std::vector<std::string>{n})->output(0);
  }
  if (prev) b->AddOutput(prev);
  return b;
}

TEST(GraphNames, UniqueNameAvoidsNamesOfNestedGraphs) {
  Graph root;
  Value* c = root.AddInput("c", Type::Tensor(DType::kBool, Shape::Static({})));
  Node* n = root.AddNode("If", {c}, std::vector<std::string>{"r"});
  std::unique_ptr<Graph> then_g = Body(&root, "then", {"v.0", "v.1", "v.2"});
  Graph* then_raw = then_g.get();
  // A graph nested two levels deep, inside the else branch.
  std::unique_ptr<Graph> else_g = Body(&root, "else", {"v.4"});
  Node* inner = else_g->AddNode("If", {c}, std::vector<std::string>{"inner_r"});
  inner->SetAttr("then_branch", Attribute::GraphValue(Body(else_g.get(), "t2", {"v.3", "v.5"})));
  inner->SetAttr("else_branch", Attribute::GraphValue(Body(else_g.get(), "e2", {"v.6"})));
  Graph* else_raw = else_g.get();
  n->SetAttr("then_branch", Attribute::GraphValue(std::move(then_g)));
  n->SetAttr("else_branch", Attribute::GraphValue(std::move(else_g)));

  EXPECT_TRUE(root.NameInUse("v.1"));   // nested
  EXPECT_TRUE(root.NameInUse("v.5"));   // nested two levels deep
  EXPECT_TRUE(then_raw->NameInUse("c"));  // enclosing
  EXPECT_FALSE(then_raw->NameInUse("v.4"));  // a sibling's: not visible, not nested
  EXPECT_FALSE(root.NameInUse("v.7"));

  // Names come from the root's counter and skip every name of the nest,
  // sibling graphs included.
  std::vector<std::string> got = {root.UniqueName("v"), then_raw->UniqueName("v"), else_raw->UniqueName("v")};
  EXPECT_EQ(got, (std::vector<std::string>{"v.7", "v.8", "v.9"}));

  // Once the node holding them is gone, its graphs' names are free again.
  root.AddOutput(n->output(0));
  root.ClearOutputs();
  root.EraseNode(n);
  EXPECT_FALSE(root.NameInUse("v.1"));
}

// UniqueName stops searching the nest once the root's counter passes every
// number a name of the nest ends in; graphs built apart and attached later
// raise that bound, and a number too long to compare keeps the search on.
TEST(GraphNames, UniqueNameSkipsNamesOfGraphsAttachedLater) {
  Graph root;
  Value* c = root.AddInput("c", Type::Tensor(DType::kBool, Shape::Static({})));
  EXPECT_EQ(root.UniqueName("v"), "v.0");
  EXPECT_EQ(root.UniqueName("v"), "v.1");
  // Built with no parent: its names reach the root only when attached.
  std::unique_ptr<Graph> apart = Body(nullptr, "apart", {"v.2", "v.3"});
  Node* n = root.AddNode("If", {c}, std::vector<std::string>{"r"});
  n->SetAttr("then_branch", Attribute::GraphValue(std::move(apart)));
  n->SetAttr("else_branch", Attribute::GraphValue(Body(&root, "else", {"w.0"})));
  EXPECT_EQ(root.UniqueName("v"), "v.4");

  Graph other;
  other.AddInput("x.12345678901234567890123", F32({1}));
  other.AddInput("x.0", F32({1}));
  EXPECT_EQ(other.UniqueName("x"), "x.1");
}

TEST(GraphNames, ClonedNestKeepsNestedNamesInUse) {
  Graph root;
  Value* c = root.AddInput("c", Type::Tensor(DType::kBool, Shape::Static({})));
  Node* n = root.AddNode("If", {c}, std::vector<std::string>{"r"});
  n->SetAttr("then_branch", Attribute::GraphValue(Body(&root, "then", {"k.0", "k.1"})));
  n->SetAttr("else_branch", Attribute::GraphValue(Body(&root, "else", {"k.2"})));
  root.AddOutput(n->output(0));
  std::unique_ptr<Graph> copy = root.Clone();
  EXPECT_TRUE(copy->NameInUse("k.1"));
  EXPECT_EQ(copy->UniqueName("k"), "k.3");
}

// Before the fix, simplify (through Graph::UniqueName) named a new constant
// of the main graph after a value of an If branch, which the verifier
// rejects as a redefinition.
TEST(GraphNames, PassesDoNotReuseNamesOfNestedGraphs) {
  auto model = ParseModel(R"(
graph @main(%x: f32[2,3], %c: bool[]) {
  %s32 = const i64[2] dense [3, 2]
  %s0 = const i64[2] dense [0, -1]
  %r1 = Reshape(%x, %s32) : f32[3,2]
  %r2 = Reshape(%r1, %s0) : f32[3,2]
  %y = If(%c) {else_branch = graph @else() {
    %shape.0 = Neg(%r2) : f32[3,2]
    %shape.1 = Neg(%shape.0) : f32[3,2]
    return %shape.1
  }, then_branch = graph @then() {
    %shape.2 = Relu(%r2) : f32[3,2]
    return %shape.2
  }} : f32[3,2]
  return %y
}
)");
  ASSERT_TRUE(model.ok()) << model.status();
  PassManagerOptions mo;
  mo.verify_each = true;
  PassManager pm({}, mo);
  ASSERT_TRUE(pm.AddPipeline("simplify").ok());
  auto changed = pm.Run(*model);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  absl::Status v = VerifyModel(*model);
  EXPECT_TRUE(v.ok()) << v;
}

// Checks that `v`'s use list is exactly the set of places that read it.
void ExpectUsesExact(const Graph& g, const Value* v) {
  int expected = 0;
  for (const Node* n : g.nodes())
    for (const Value* in : n->inputs()) expected += in == v;
  for (const Value* o : g.outputs()) expected += o == v;
  ASSERT_EQ(static_cast<int>(v->uses().size()), expected) << v->name();
  for (const Use& u : v->uses()) {
    if (u.user) {
      EXPECT_EQ(u.user->input(u.index), v);
    } else {
      EXPECT_EQ(u.graph->outputs()[u.index], v);
    }
  }
}

TEST(GraphUses, StayExactUnderRandomEdits) {
  Graph g;
  Value* x = g.AddInput("x", F32({4}));
  Value* y = g.AddInput("y", F32({4}));
  std::vector<Node*> users;
  for (int i = 0; i < 2000; ++i) {
    // Some nodes read x twice, so one user holds two uses of it.
    Node* n = g.AddNode(i % 3 == 0 ? "Add" : "Neg", i % 3 == 0 ? std::vector<Value*>{x, x} : std::vector<Value*>{x}, 1);
    users.push_back(n);
  }
  for (int i = 0; i < 10; ++i) g.AddOutput(x);
  ExpectUsesExact(g, x);

  std::mt19937 rng(7);
  std::shuffle(users.begin(), users.end(), rng);
  // Redirect a third to y, erase a third, rewire the rest input by input.
  for (size_t i = 0; i < users.size(); ++i) {
    Node* n = users[i];
    if (i % 3 == 0) {
      for (int k = 0; k < n->num_inputs(); ++k) n->SetInput(k, y);
    } else if (i % 3 == 1) {
      g.EraseNode(n);
    } else {
      n->SetInput(0, y);
      n->SetInput(0, x);
    }
    if (i % 97 == 0) {
      ExpectUsesExact(g, x);
      ExpectUsesExact(g, y);
    }
  }
  g.SetOutput(3, y);
  ExpectUsesExact(g, x);
  ExpectUsesExact(g, y);
  // Every remaining use of x moves to y, then back to x.
  x->ReplaceAllUsesWith(y);
  EXPECT_FALSE(x->has_uses());
  ExpectUsesExact(g, y);
  Node* last = g.AddNode("Neg", {y}, 1);
  g.AddOutput(last->output(0));
  for (Node* n : g.NodeList())
    if (n != last && n->num_inputs() > 0) n->SetInput(0, x);
  ExpectUsesExact(g, x);
  ExpectUsesExact(g, y);
  g.ClearOutputs();
  ExpectUsesExact(g, x);
  ExpectUsesExact(g, y);
  EXPECT_FALSE(last->output(0)->has_uses());
}

// Every name of `g`'s values, and of values erased from it, looks up as it
// should: live names to their values, erased ones to nothing.
void ExpectLookups(const Graph& g, const std::vector<std::string>& gone) {
  for (const Value* v : g.Values()) EXPECT_EQ(g.Lookup(v->name()), v) << v->name();
  for (const std::string& n : gone) EXPECT_EQ(g.Lookup(n), nullptr) << n;
}

TEST(GraphNames, LookupsStayExactWhileTheIndexIsDroppedAndRebuilt) {
  Graph g;
  Value* x = g.AddInput("x", F32({4}));
  std::vector<Node*> nodes;
  std::vector<Value*> consts;
  for (int i = 0; i < 600; ++i) {
    consts.push_back(g.AddConstant(absl::StrCat("k", i), Tensor::Scalar<float>(static_cast<float>(i))));
    nodes.push_back(g.AddNode("Add", {i ? nodes.back()->output(0) : x, consts.back()},
                              std::vector<std::string>{absl::StrCat("a", i)}));
  }
  g.AddOutput(nodes.back()->output(0));
  // The first look-up builds the index.
  ExpectLookups(g, {});
  // A run of edits with no look-ups in between outgrows the upkeep the
  // index is worth, so it is dropped along the way; the next look-up
  // rebuilds it from the values that are left.
  std::vector<std::string> gone;
  for (int i = 599; i >= 200; --i) {
    gone.push_back(nodes[i]->output(0)->name());
    gone.push_back(consts[i]->name());
    g.SetOutput(0, nodes[i - 1]->output(0));
    g.EraseNode(nodes[i]);
    g.EraseValue(consts[i]);
  }
  g.RenameValue(consts[0], "renamed");
  gone.push_back("k0");
  Value* fresh = g.AddConstant("fresh", Tensor::Scalar<float>(7.0f));
  ExpectLookups(g, gone);
  EXPECT_EQ(g.Lookup("fresh"), fresh);
  EXPECT_EQ(g.Lookup("renamed"), consts[0]);
  // Kept up to date while look-ups come between the edits.
  g.RenameValue(fresh, "fresher");
  EXPECT_EQ(g.Lookup("fresh"), nullptr);
  EXPECT_EQ(g.Lookup("fresher"), fresh);
  g.EraseValue(fresh);
  EXPECT_EQ(g.Lookup("fresher"), nullptr);
  EXPECT_FALSE(g.NameInUse("fresher"));
  EXPECT_TRUE(g.NameInUse("a0"));
  // A nested graph finds the values of the graph enclosing it.
  Graph body("body", &g);
  EXPECT_EQ(body.Lookup("a1"), nodes[1]->output(0));
  EXPECT_EQ(g.Values().size(), 1u + 200u + 200u);
}

TEST(GraphOps, NestMayHoldOpSeesNestedGraphsAndErasures) {
  Graph root;
  Value* c = root.AddInput("c", Type::Tensor(DType::kBool, Shape::Static({})));
  Value* x = root.AddInput("x", F32({4}));
  Node* relu = root.AddNode("Relu", {x}, 1);
  Node* relu2 = root.AddNode("Relu", {relu->output(0)}, 1);
  Node* neg = root.AddNode("Neg", {x}, 1, "com.example");  // any domain counts
  root.AddOutput(relu2->output(0));
  EXPECT_TRUE(root.NestMayHoldOp("Relu"));
  EXPECT_TRUE(root.NestMayHoldOp("Neg"));
  EXPECT_FALSE(root.NestMayHoldOp("BatchNormalization"));
  // A Sqrt two levels down, in an If inside the else branch.
  Node* n = root.AddNode("If", {c}, std::vector<std::string>{"r"});
  std::unique_ptr<Graph> else_g = Body(&root, "else", {"e0"});
  Node* inner = else_g->AddNode("If", {c}, std::vector<std::string>{"inner_r"});
  std::unique_ptr<Graph> deep = Body(else_g.get(), "t2", {"d0"});
  Node* sqrt = deep->AddNode("Sqrt", {deep->Lookup("d0")}, 1);
  Graph* deep_raw = deep.get();
  inner->SetAttr("then_branch", Attribute::GraphValue(std::move(deep)));
  inner->SetAttr("else_branch", Attribute::GraphValue(Body(else_g.get(), "e2", {"e1"})));
  n->SetAttr("then_branch", Attribute::GraphValue(Body(&root, "then", {"t0", "t1"})));
  n->SetAttr("else_branch", Attribute::GraphValue(std::move(else_g)));
  EXPECT_TRUE(root.NestMayHoldOp("Sqrt"));
  EXPECT_FALSE(root.NestMayHoldOp("Exp"));
  // Counts go down with erasures: the op is gone with its last node.
  deep_raw->EraseNode(sqrt);
  EXPECT_FALSE(root.NestMayHoldOp("Sqrt"));
  root.EraseNode(neg);
  EXPECT_TRUE(root.NestMayHoldOp("Neg"));  // the then branch's Neg is left
  root.SetOutput(0, relu->output(0));
  root.EraseNode(relu2);
  EXPECT_TRUE(root.NestMayHoldOp("Relu"));
  root.SetOutput(0, x);
  root.EraseNode(relu);
  EXPECT_FALSE(root.NestMayHoldOp("Relu"));
  // A clone counts its own nodes.
  std::unique_ptr<Graph> copy = root.Clone();
  EXPECT_TRUE(copy->NestMayHoldOp("If"));
  EXPECT_TRUE(copy->NestMayHoldOp("Neg"));  // the then branch's Neg
  EXPECT_FALSE(copy->NestMayHoldOp("Relu"));
}

TEST(GraphUses, ErasingANodeKeepsItsFoldedOutputsAsConstants) {
  Graph g;
  Value* x = g.AddInput("x", F32({2}));
  Value* c0 = g.AddConstant("c0", Tensor::Scalar<float>(1.0f));
  Node* split = g.AddNode("Split", {x}, std::vector<std::string>{"a", "b", "unused"});
  Value* a = split->output(0);
  Value* b = split->output(1);
  a->set_type(Type::Tensor(DType::kF32, Shape()));
  Node* user = g.AddNode("Add", {a, b}, 1);
  g.AddOutput(a);
  size_t values = g.Values().size();

  g.EraseNodeKeepingConstants(split, {Tensor::FromVector<float>({2, 3}, {2}), Tensor::FromVector<float>({4}, {1})});
  // The same values, now constants after c0, with their names and uses.
  EXPECT_EQ(g.num_nodes(), 1u);
  EXPECT_EQ(g.Constants(), (std::vector<Value*>{c0, a, b}));
  EXPECT_TRUE(a->is_constant());
  EXPECT_EQ(a->producer(), nullptr);
  EXPECT_EQ(a->name(), "a");
  EXPECT_EQ(a->type(), F32({2}));
  EXPECT_EQ(a->constant().data<float>()[1], 3.0f);
  EXPECT_EQ(b->type(), F32({1}));
  EXPECT_EQ(g.Lookup("a"), a);
  EXPECT_EQ(g.Lookup("unused"), nullptr);
  EXPECT_EQ(g.Values().size(), values - 1);
  EXPECT_EQ(user->input(0), a);
  EXPECT_EQ(g.outputs()[0], a);
  ExpectUsesExact(g, a);
  ExpectUsesExact(g, b);
  EXPECT_TRUE(VerifyGraph(g).ok());
  // Folded outputs hold data; the node outputs that stay do not.
  EXPECT_EQ(a->constant_data(), &a->constant());
  EXPECT_EQ(user->output(0)->constant_data(), nullptr);
}

// constant_data(): the data of a constant that holds data, null for every
// other value (an input with or without an initial value, a node output, a
// constant whose bytes were elided, an omitted input).
TEST(GraphValues, ConstantDataIsDataOfConstantsOnly) {
  Graph g;
  Value* x = g.AddInput("x", F32({1}));
  Value* var = g.AddInput("var", F32({1}));
  var->set_initial(Tensor::FromVector<float>({2}, {1}));
  Value* c = g.AddConstant("c", Tensor::Scalar<float>(1.0f));
  Value* elided = g.AddElidedConstant("elided", F32({4}));
  Value* y = g.AddNode("Add", {x, c}, 1)->output(0);
  EXPECT_EQ(c->constant_data(), &c->constant());
  EXPECT_EQ(ConstantData(c), &c->constant());
  for (const Value* v : {x, var, elided, y}) EXPECT_EQ(v->constant_data(), nullptr) << v->name();
  EXPECT_TRUE(var->has_data());
  EXPECT_EQ(ConstantData(nullptr), nullptr);
  // Giving the elided constant bytes makes it one that holds data.
  elided->set_constant(Tensor::FromVector<float>({1, 2, 3, 4}, {4}));
  EXPECT_EQ(elided->constant_data(), &elided->constant());
}

TEST(ScratchMarks, StartEmptyAndHoldWhatWasInserted) {
  Graph g;
  Value* x = g.AddInput("x", F32({2}));
  Node* a = g.AddNode("Neg", {x}, 1);
  Node* b = g.AddNode("Neg", {a->output(0)}, 1);
  {
    ScratchMarks m;
    EXPECT_FALSE(m.Contains(a));
    EXPECT_TRUE(m.Insert(a));
    EXPECT_FALSE(m.Insert(a));
    EXPECT_TRUE(m.Insert(x));
    EXPECT_TRUE(m.Contains(a));
    EXPECT_TRUE(m.Contains(x));
    EXPECT_FALSE(m.Contains(b));
    EXPECT_FALSE(m.Contains(b->output(0)));
  }
  ScratchMarks fresh;
  EXPECT_FALSE(fresh.Contains(a));
  EXPECT_FALSE(fresh.Contains(x));
  EXPECT_TRUE(fresh.Insert(b));
  EXPECT_FALSE(fresh.Contains(a));
  // A clone's objects start unmarked.
  std::unique_ptr<Graph> c = g.Clone();
  EXPECT_FALSE(fresh.Contains(c->last_node()));
}

// Shape inference marks what it inferred; every change to what inference
// reads clears the mark of the nodes that read it, so a later run infers
// them again and what their new types reach.
TEST(TypesCurrent, ChangesToWhatInferenceReadsClearTheMark) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape()));
  Value* y = g.AddInput("y", F32({2, 3}));
  Node* relu = g.AddNode("Relu", {x}, 1);
  Node* neg = g.AddNode("Neg", {relu->output(0)}, 1);
  Node* add = g.AddNode("Add", {neg->output(0), y}, 1);
  g.AddOutput(add->output(0));
  ASSERT_TRUE(InferShapesWithLoops(g).ok());
  for (Node* n : {relu, neg, add}) EXPECT_TRUE(n->types_current()) << n->op();
  EXPECT_FALSE(add->output(0)->type().shape().ranked());

  // The type of an input: its readers, not the nodes past them.
  x->set_type(F32({2, 3}));
  EXPECT_FALSE(relu->types_current());
  EXPECT_TRUE(neg->types_current());
  // Inference then reaches every node the new type reaches.
  ASSERT_TRUE(InferShapesWithLoops(g).ok());
  EXPECT_EQ(add->output(0)->type(), F32({2, 3}));
  for (Node* n : {relu, neg, add}) EXPECT_TRUE(n->types_current()) << n->op();

  // An output's type: its producer and its readers.
  neg->output(0)->set_type(F32({2, 3}));
  EXPECT_FALSE(neg->types_current());
  EXPECT_FALSE(add->types_current());
  EXPECT_TRUE(relu->types_current());
  ASSERT_TRUE(InferShapesWithLoops(g).ok());

  // Inputs set, redirected or dropped; attributes set or removed.
  neg->SetInput(0, x);
  EXPECT_FALSE(neg->types_current());
  ASSERT_TRUE(InferShapesWithLoops(g).ok());
  neg->output(0)->ReplaceAllUsesWith(relu->output(0));
  EXPECT_FALSE(add->types_current());
  ASSERT_TRUE(InferShapesWithLoops(g).ok());
  relu->SetAttr("note", Attribute::Int(1));
  EXPECT_FALSE(relu->types_current());
  ASSERT_TRUE(InferShapesWithLoops(g).ok());
  relu->RemoveAttr("note");
  EXPECT_FALSE(relu->types_current());
  ASSERT_TRUE(InferShapesWithLoops(g).ok());
  // A constant's data: its readers.
  Value* c = g.AddConstant("c", Tensor::Scalar<float>(1.0f));
  Node* mul = g.AddNode("Mul", {y, c}, 1);
  ASSERT_TRUE(InferShapesWithLoops(g).ok());
  EXPECT_TRUE(mul->types_current());
  c->set_constant(Tensor::Scalar<float>(2.0f));
  EXPECT_FALSE(mul->types_current());
  neg->RemoveTrailingInputs(0);
  EXPECT_FALSE(neg->types_current());

  // A node holding a graph is never marked; a clone's nodes start unmarked.
  Node* holder = g.AddNode("If", {y}, 1);
  holder->SetAttr("then_branch", Attribute::GraphValue(std::make_unique<Graph>("t", &g)));
  holder->MarkTypesCurrent();
  EXPECT_FALSE(holder->types_current());
  relu->MarkTypesCurrent();
  std::unique_ptr<Graph> copy = g.Clone();
  for (Node* n : copy->nodes()) EXPECT_FALSE(n->types_current());
}

}  // namespace
}  // namespace kiln
