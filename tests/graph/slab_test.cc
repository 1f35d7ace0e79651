//===- slab_test.cc - Where a graph keeps its nodes and values ------------===//
//
// Nodes and values live in slabs: chunks that double up to 2 MiB, each slot
// on a 128-byte boundary, a destroyed object's slot reused by the next one
// created. A chunk of 2 MiB is mapped on its own, aligned to 2 MiB (so that
// it can be one huge page), and unmapped when its graph is destroyed.
//
//===----------------------------------------------------------------------===//
#include <cstddef>
#include <cstdint>
#include <vector>

#include "graph/ir/graph.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

Type F32() { return Type::Tensor(DType::kF32, Shape::Static({2})); }

bool Aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

TEST(Slab, SlotsStartOnPairsOfLines) {
  Graph g;
  Value* x = g.AddInput("x", F32());
  for (int i = 0; i < 3000; ++i) {
    Node* n = g.AddNode("Relu", {x}, 1);
    ASSERT_TRUE(Aligned(n, 128));
    ASSERT_TRUE(Aligned(n->output(0), 128));
  }
}

#ifdef __linux__
TEST(Slab, LargeGraphsMapHugeChunksAndGiveThemBack) {
  const size_t before = ir_internal::MappedChunkBytes();
  {
    Graph g;
    Value* x = g.AddInput("x", F32());
    // 40,000 nodes of 256 bytes: past the chunks that double up to 2 MiB
    // (8 + 16 + ... + 4096 slots), then whole 2 MiB chunks.
    std::vector<Node*> nodes;
    for (int i = 0; i < 40000; ++i) nodes.push_back(g.AddNode("Relu", {x}, 1));
    // The doubling chunks hold 8184 slots; the other 31,816 nodes and
    // 31,817 values (the outputs and the input) take four chunks of 8192
    // slots each.
    const size_t mapped = ir_internal::MappedChunkBytes() - before;
    EXPECT_EQ(mapped, 8 * ir_internal::kHugeChunkBytes);
    // Erased slots are reused before anything new is mapped.
    for (int i = 0; i < 20000; ++i) g.EraseNode(nodes[i]);
    for (int i = 0; i < 20000; ++i) g.AddNode("Relu", {x}, 1);
    EXPECT_EQ(ir_internal::MappedChunkBytes() - before, mapped);
    EXPECT_TRUE(g.WalkOrderIsConsistent());
  }
  EXPECT_EQ(ir_internal::MappedChunkBytes(), before);
}
#endif

}  // namespace
}  // namespace kiln
