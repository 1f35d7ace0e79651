//===- donation_test.cc - Step outputs computed over their inputs ---------===//
//
// target/backend/donation.h: which NAME.next may be written over NAME (a
// KV cache's scatter), and which may not (NAME read after the writer,
// directly or through a view; NAME also a graph output; the writer reading
// NAME twice); then npusim's compile driver marks the buffer donated, and
// a loop over the donated step copies nothing from step to step yet ends
// where the reference executor's loop ends.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "runtime/loaded_model.h"
#include "runtime/step_loop.h"
#include "target/backend/donation.h"
#include "target/builtin_targets.h"
#include "target/npusim/npusim_compile.h"
#include "target/npusim/npusim_executable.h"

namespace kiln {
namespace {

std::vector<target::Donation> Donations(const Graph& g) {
  std::vector<std::pair<const Value*, const Value*>> feeds;
  std::vector<std::string> in, out;
  for (const Value* v : g.inputs()) in.push_back(v->name());
  for (const Value* v : g.outputs()) out.push_back(v->name());
  for (const runtime::StepFeed& f : runtime::StepFeeds(in, out))
    feeds.emplace_back(g.inputs()[f.input], g.outputs()[f.output]);
  return target::FindDonations(
      g, feeds, [](const Node& n) { return n.op() == "Reshape"; },
      [](const Node& n, int input) { return n.op() == "ScatterElements" && input == 0; });
}

constexpr const char* kHead = R"(graph @main(%cache: f32[2,8,4], %idx: i64[2,1,4], %new: f32[2,1,4]) {
  %cache.next = ScatterElements(%cache, %idx, %new) {axis = 1} : f32[2,8,4]
)";

TEST(Donation, ACacheWhoseOnlyReaderIsItsScatterIsDonated) {
  auto m = ParseModel(std::string(kHead) + R"(  %s = ReduceSum(%cache.next) {keepdims = 0} : f32[]
  return %cache.next, %s
})");
  ASSERT_TRUE(m.ok()) << m.status();
  auto d = Donations(*m->graph);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].input->name(), "cache");
  EXPECT_EQ(d[0].output->name(), "cache.next");
  EXPECT_EQ(d[0].writer->op(), "ScatterElements");
}

TEST(Donation, AReaderBeforeTheWriterIsFine) {
  auto m = ParseModel(R"(graph @main(%cache: f32[2,8,4], %idx: i64[2,1,4], %new: f32[2,1,4]) {
  %s = ReduceSum(%cache) {keepdims = 0} : f32[]
  %cache.next = ScatterElements(%cache, %idx, %new) {axis = 1} : f32[2,8,4]
  return %cache.next, %s
})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Donations(*m->graph).size(), 1u);
}

TEST(Donation, NotWhenTheOldValueIsReadAfterTheWriter) {
  auto m = ParseModel(std::string(kHead) + R"(  %s = ReduceSum(%cache) {keepdims = 0} : f32[]
  return %cache.next, %s
})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(Donations(*m->graph).empty());
}

TEST(Donation, NotWhenAViewOfTheOldValueIsReadAfterTheWriter) {
  auto m = ParseModel(R"(graph @main(%cache: f32[2,8,4], %idx: i64[2,1,4], %new: f32[2,1,4], %shape: i64[2]) {
  %flat = Reshape(%cache, %shape) : f32[2,32]
  %cache.next = ScatterElements(%cache, %idx, %new) {axis = 1} : f32[2,8,4]
  %s = ReduceSum(%flat) {keepdims = 0} : f32[]
  return %cache.next, %s
})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(Donations(*m->graph).empty());
}

TEST(Donation, NotWhenTheInputIsAlsoAnOutputOrReadTwiceByTheWriter) {
  auto out = ParseModel(std::string(kHead) + R"(  return %cache.next, %cache
})");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(Donations(*out->graph).empty());
  auto twice = ParseModel(R"(graph @main(%cache: f32[2,8,4], %idx: i64[2,8,4]) {
  %cache.next = ScatterElements(%cache, %idx, %cache) {axis = 1} : f32[2,8,4]
  return %cache.next
})");
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_TRUE(Donations(*twice->graph).empty());
}

TEST(Donation, NotWhenTheWriterAlsoReadsAViewOfIt) {
  auto m = ParseModel(R"(graph @main(%w: f32[2,4], %shape: i64[2]) {
  %r = Reshape(%w, %shape) : f32[2,4]
  %w.next = Add(%w, %r) : f32[2,4]
  return %w.next
})");
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = *m->graph;
  auto donations = target::FindDonations(
      g, {{g.inputs()[0], g.outputs()[0]}}, [](const Node& n) { return n.op() == "Reshape"; },
      [](const Node& n, int) { return n.op() == "Add"; });
  EXPECT_TRUE(donations.empty());
}

TEST(Donation, NotWhenTheWriterCannotWriteInPlace) {
  auto m = ParseModel(R"(graph @main(%w: f32[4], %g: f32[4]) {
  %w.next = Sub(%w, %g) : f32[4]
  return %w.next
})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(Donations(*m->graph).empty());
}

// npusim: the buffer is donated, the scatter runs in place on the AI
// cores, and a four-step loop ends where the reference executor's does
// with no cache bytes copied within HBM.
TEST(Donation, NpusimLoopWritesTheCacheInPlace) {
  auto m = ParseModel(R"(graph @main(%cache: f32[2,8,4], %pos: i64[2,1,4], %new: f32[2,1,4]) {
  %cache.next = ScatterElements(%cache, %pos, %new) {axis = 1} : f32[2,8,4]
  %one = const i64[] dense [1]
  %pos.next = Add(%pos, %one) : i64[2,1,4]
  %new.next = Add(%new, %new) : f32[2,1,4]
  return %cache.next, %pos.next, %new.next
})");
  ASSERT_TRUE(m.ok()) << m.status();
  auto a = target::CompileForNpusim(*m, *target::CreateBuiltinTarget("npusim").value(), {});
  ASSERT_TRUE(a.ok()) << a.status();
  int donated = 0;
  for (const auto& b : a->npusim().buffers()) donated += b.donated();
  EXPECT_EQ(donated, 2);  // the cache by its scatter, the position by its Add (new.next reads new twice)
  bool in_place = false;
  for (const auto& task : a->npusim().tasks())
    if (task.op() == "ScatterElements")
      in_place = task.engine() == "vector" && task.plan().find("in place") != std::string::npos;
  EXPECT_TRUE(in_place);

  Tensor cache(DType::kF32, {2, 8, 4});
  for (int i = 0; i < 64; ++i) cache.data<float>()[i] = static_cast<float>(i);
  Tensor pos(DType::kI64, {2, 1, 4});
  for (int i = 0; i < 8; ++i) pos.data<int64_t>()[i] = 2;
  Tensor upd(DType::kF32, {2, 1, 4});
  for (int i = 0; i < 8; ++i) upd.data<float>()[i] = -1.0f - static_cast<float>(i);
  const std::vector<Tensor> inputs = {cache, pos, upd};
  const auto feeds = runtime::StepFeeds({"cache", "pos", "new"}, {"cache.next", "pos.next", "new.next"});
  ASSERT_EQ(feeds.size(), 3u);
  Executor exec;
  auto want = runtime::RunSteps(4, inputs, feeds,
                                [&](std::vector<Tensor> in) { return exec.Run(*m->graph, std::move(in)); });
  ASSERT_TRUE(want.ok()) << want.status();

  auto loaded = runtime::LoadedModel::FromArtifact(*std::move(a), "donation.kiln", target::NpusimModuleLoader());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  target::NpusimRunOptions ro;
  ro.batches = 4;
  ro.feeds = feeds;
  auto got = (*loaded)->Run(inputs, ro);
  ASSERT_TRUE(got.ok()) << got.status();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE((*want)[i].Equals((*got)[i])) << i;
  // Only new.next (32 B) moves between the four steps.
  EXPECT_EQ(target::NpusimOf(**loaded)->summary().stats.d2d_bytes, 3 * 32);
  EXPECT_NE(target::NpusimOf(**loaded)->ReportText().find("320 B of it computed in place"), std::string::npos);
}

}  // namespace
}  // namespace kiln
