//===- walk_order_test.cc - The walk order a graph keeps for prefetching -===//
//
// Graph keeps its nodes in an array beside the list (the walk order), which
// walks read to prefetch the nodes ahead. It must only ever hold live nodes
// of the graph, each at the position the node records and in list order,
// whatever sequence of appends, insertions in the middle, moves and
// erasures the graph goes through; a walk that prefetches through it sees
// every node once, in list order. Constants sit in an array of their own
// with holes where erased ones were: a walk over them sees the live ones
// in creation order, however many were erased (and the holes closed up).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "graph/ir/graph.h"
#include "graph/passes/pass_manager.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

Type F32() { return Type::Tensor(DType::kF32, Shape::Static({2})); }

std::vector<Node*> ListOf(const Graph& g) {
  std::vector<Node*> out;
  for (Node* n = g.first_node(); n; n = n->next()) out.push_back(n);
  return out;
}

TEST(WalkOrder, StaysConsistentThroughAppendsInsertionsMovesAndErasures) {
  Graph g;
  Value* x = g.AddInput("x", F32());
  std::mt19937 rng(7);
  // Nodes read only the input, so any of them may be erased or moved.
  for (int i = 0; i < 500; ++i) g.AddNode("Relu", {x}, 1);
  ASSERT_TRUE(g.WalkOrderIsConsistent());
  for (int step = 0; step < 5000; ++step) {
    std::vector<Node*> nodes = ListOf(g);
    Node* at = nodes.empty() ? nullptr : nodes[rng() % nodes.size()];
    switch (rng() % 4) {
      case 0:
        g.AddNode("Neg", {x}, 1);  // at the end
        break;
      case 1:
        g.AddNode("Neg", {x}, 1, "", at);  // in the middle
        break;
      case 2:
        if (at) g.MoveNode(at, nodes[rng() % nodes.size()]);
        break;
      case 3:
        if (at) g.EraseNode(at);
        break;
    }
    ASSERT_TRUE(g.WalkOrderIsConsistent()) << "after step " << step;
  }
  // Erasing nearly everything closes the holes up as it goes.
  std::vector<Node*> nodes = ListOf(g);
  for (size_t i = 0; i + 3 < nodes.size(); ++i) {
    g.EraseNode(nodes[i]);
    ASSERT_TRUE(g.WalkOrderIsConsistent()) << "after erasing " << i;
  }
  EXPECT_EQ(g.num_nodes(), 3u);
}

TEST(WalkOrder, WalksSeeEveryNodeOnceInListOrder) {
  Graph g;
  Value* cur = g.AddInput("x", F32());
  for (int i = 0; i < 500; ++i) cur = g.AddNode(i % 2 ? "Relu" : "Neg", {cur}, 1)->output(0);
  g.AddOutput(cur);
  // Holes and nodes out of the array: erase every third node (rewiring its
  // users), insert before every fifth.
  std::vector<Node*> nodes = ListOf(g);
  for (size_t i = 0; i < nodes.size(); i += 3) {
    Node* n = nodes[i];
    n->output(0)->ReplaceAllUsesWith(n->input(0));
    g.EraseNode(n);
  }
  nodes = ListOf(g);
  for (size_t i = 0; i < nodes.size(); i += 5) g.AddNode("Abs", {nodes[i]->input(0)}, 1, "", nodes[i]);
  ASSERT_TRUE(g.WalkOrderIsConsistent());
  std::vector<Node*> seen;
  for (Node* n : g.nodes()) seen.push_back(n);
  EXPECT_EQ(seen, ListOf(g));
  seen.clear();
  for (Node* n = g.last_node(); n; n = n->prev()) {
    g.PrefetchBehind(n->prev());
    seen.push_back(n);
  }
  std::vector<Node*> backwards = ListOf(g);
  std::reverse(backwards.begin(), backwards.end());
  EXPECT_EQ(seen, backwards);
}

TEST(WalkOrder, ClonesAndPipelinesKeepIt) {
  Model m;
  Graph& g = *m.graph;
  Value* cur = g.AddInput("x", F32());
  Value* one = g.AddConstant("one", Tensor::FromVector<float>({1, 1}, {2}));
  for (int i = 0; i < 300; ++i) {
    Value* id = g.AddNode("Identity", {cur}, 1)->output(0);  // simplify erases these
    cur = g.AddNode("Mul", {id, one}, 1)->output(0);          // and these (x * 1)
    g.AddNode("Neg", {cur}, 1);                               // dce erases these
  }
  g.AddOutput(cur);
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("default").ok());
  ASSERT_TRUE(pm.Run(m).ok());
  EXPECT_TRUE(g.WalkOrderIsConsistent());
  EXPECT_EQ(g.num_nodes(), 1u);  // the last Mul: its output is the graph's
  Model c = m.Clone();
  EXPECT_TRUE(c.graph->WalkOrderIsConsistent());
}

TEST(ConstantOrder, WalksSeeTheLiveConstantsInCreationOrder) {
  Graph g;
  Value* x = g.AddInput("x", F32());
  std::mt19937 rng(11);
  std::vector<Value*> expected;  // the live constants, in creation order
  auto check = [&](int step) {
    std::vector<Value*> walked;
    for (Value* c = g.first_constant(); c; c = g.NextConstant(c)) walked.push_back(c);
    ASSERT_EQ(walked, expected) << "after step " << step;
    ASSERT_EQ(g.Constants(), expected) << "after step " << step;
    ASSERT_EQ(g.num_constants(), expected.size()) << "after step " << step;
  };
  int name = 0;
  for (int step = 0; step < 6000; ++step) {
    switch (rng() % 3) {
      case 0:
        expected.push_back(g.AddConstant("c" + std::to_string(name++), Tensor::Scalar<float>(1.0f)));
        break;
      case 1: {
        // A node's output becomes a constant at the end of the list.
        Node* n = g.AddNode("Relu", {x}, 1);
        Value* out = n->output(0);
        g.EraseNodeKeepingConstants(n, {Tensor::Scalar<float>(2.0f)});
        expected.push_back(out);
        break;
      }
      case 2:
        if (expected.empty()) break;
        // Mostly from the front, as walks that erase as they go do.
        size_t i = rng() % 4 ? 0 : rng() % expected.size();
        g.EraseValue(expected[i]);
        expected.erase(expected.begin() + static_cast<std::ptrdiff_t>(i));
        break;
    }
    check(step);
  }
  // Erasing while walking: every other constant.
  bool erase = true;
  for (Value* c = g.first_constant(), *next = nullptr; c; c = next, erase = !erase) {
    next = g.NextConstant(c);
    if (!erase) continue;
    expected.erase(std::find(expected.begin(), expected.end(), c));
    g.EraseValue(c);
  }
  check(-1);
  Model m;
  m.graph = g.Clone();
  std::vector<std::string> names, cloned;
  for (Value* c : expected) names.push_back(c->name());
  for (Value* c : m.graph->Constants()) cloned.push_back(c->name());
  EXPECT_EQ(cloned, names);
}

}  // namespace
}  // namespace kiln
