//===- progress_test.cc - A run reported in slices is the same run ---------===//
//
// RunOptions::progress runs the simulation in slices of
// progress_every_cycles and reports the time between them: the callback
// sees time advance, and every figure of the run (cycles, instructions,
// HBM bytes, outputs) is what the run gives in one go.
//
//===----------------------------------------------------------------------===//
#include <vector>

#include "gtest/gtest.h"
#include "tests/sim/sim_test_util.h"

namespace kiln::sim {
namespace {

TEST(Progress, SlicesChangeNothing) {
  const std::string text = testing::ReadSource("examples/npu/gemm_double_buffer.kasm");
  auto whole = testing::Load(text);
  auto sliced = testing::Load(text);
  ASSERT_TRUE(whole && sliced);
  auto a = whole->Run();
  ASSERT_TRUE(a.ok()) << a.status();
  RunOptions opt;
  std::vector<double> seen;
  opt.progress = [&seen](double cycles) { seen.push_back(cycles); };
  opt.progress_every_cycles = 500;
  auto b = sliced->Run(opt);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->total_cycles, b->total_cycles);
  EXPECT_EQ(a->instructions, b->instructions);
  EXPECT_EQ(a->hbm_read_bytes, b->hbm_read_bytes);
  EXPECT_EQ(a->hbm_write_bytes, b->hbm_write_bytes);
  EXPECT_EQ(whole->Bytes("C"), sliced->Bytes("C"));
  ASSERT_GE(seen.size(), 2u) << "a run of " << a->total_cycles << " cycles in slices of 500";
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i], seen[i - 1]);
  EXPECT_DOUBLE_EQ(seen.back(), b->total_cycles);
}

TEST(Progress, TheCycleLimitStillHolds) {
  auto l = testing::Load(testing::ReadSource("examples/npu/gemm_double_buffer.kasm"));
  ASSERT_TRUE(l);
  RunOptions opt;
  int calls = 0;
  opt.progress = [&calls](double) { ++calls; };
  opt.progress_every_cycles = 100;
  opt.cycle_limit = 300;
  auto r = l->Run(opt);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(calls, 3);
}

}  // namespace
}  // namespace kiln::sim
