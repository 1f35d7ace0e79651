//===- trace_options_test.cc - What a trace keeps (TraceOptions) -----------===//
//
// Rules of sim/model/trace.h in its own terms: same-op slices within the
// merge gap become one with a count and their busy cycles; barriers never
// merge; a rate counter is written as each window's average and a level
// counter as its peak, only where the value changes; a window of cycles
// keeps what overlaps it and enters with the counters' values at its start;
// a kernel filter keeps only matching programs' slices; the gzip form
// inflates to the JSON form.
//
//===----------------------------------------------------------------------===//
#include <zlib.h>

#include <string>

#include "gtest/gtest.h"
#include "sim/isa/isa.h"
#include "sim/model/trace.h"
#include "tests/sim/trace_test_util.h"

namespace kiln::sim {
namespace {

Program MakeProgram(const std::string& name) {
  Program p;
  p.name = name;
  Inst mov;
  mov.op = Op::kMov;
  p.insts = {mov, mov, mov};
  return p;
}

TEST(TraceOptions, SameOpSlicesWithinTheGapMerge) {
  const Program p = MakeProgram("k");
  Trace t = FreshTrace();  // merge gap 16 cycles
  t.Instruction(0, Pipe::kMte2, &p, 0, 0, 10, true);
  t.Instruction(0, Pipe::kMte2, &p, 1, 20, 30, true);   // gap 10: merged
  t.Instruction(0, Pipe::kMte2, &p, 2, 50, 60, true);   // gap 20: a slice of its own
  t.Instruction(0, Pipe::kMte2, &p, 0, 60, 70, false);  // not mergeable (a barrier): its own
  ASSERT_EQ(t.slices().size(), 3u);
  EXPECT_EQ(t.slices()[0].count, 2);
  EXPECT_DOUBLE_EQ(t.slices()[0].end, 30);
  EXPECT_DOUBLE_EQ(t.slices()[0].busy, 20);
  EXPECT_EQ(t.slices()[1].count, 1);
  EXPECT_NE(t.ToJson(1000).find(R"("count":2,"busy_cycles":20)"), std::string::npos);

  TraceOptions abutting;
  abutting.merge_gap_cycles = 0;
  Trace u = FreshTrace(abutting);
  u.Instruction(0, Pipe::kMte2, &p, 0, 0, 10, true);
  u.Instruction(0, Pipe::kMte2, &p, 1, 11, 20, true);
  EXPECT_EQ(u.slices().size(), 2u);
}

TEST(TraceOptions, CountersAreWindowedAverageOrPeak) {
  Trace t = FreshTrace();  // windows of 100 cycles
  // A rate: 100 for the first 50 cycles, then 0 until 250, then 40.
  t.Count(Trace::kHbm, "HBM GB/s", 0, 100, /*rate=*/true);
  t.Count(Trace::kHbm, "HBM GB/s", 50, 0, true);
  t.Count(Trace::kHbm, "HBM GB/s", 250, 40, true);
  // A level: 8 from 10 to 20 inside the first window, then 2.
  t.Count(0, "UB footprint KiB", 10, 8);
  t.Count(0, "UB footprint KiB", 20, 2);
  const std::string json = t.ToJson(1000);
  // Window [0, 100): average 50; [100, 200): 0; [200, 300): 20; then 40.
  EXPECT_NE(json.find(R"("name":"HBM GB/s","pid":100000,"tid":0,"ts":0.0000,"args":{"value":50})"), std::string::npos);
  EXPECT_NE(json.find(R"("ts":0.1000,"args":{"value":0})"), std::string::npos);
  EXPECT_NE(json.find(R"("ts":0.2000,"args":{"value":20})"), std::string::npos);
  EXPECT_NE(json.find(R"("ts":0.3000,"args":{"value":40})"), std::string::npos);
  // The footprint's first window shows its peak, 8, then 2 from the next.
  EXPECT_NE(json.find(R"("name":"UB footprint KiB","pid":0,"tid":0,"ts":0.0000,"args":{"value":8})"),
            std::string::npos);
  EXPECT_NE(json.find(R"("name":"UB footprint KiB","pid":0,"tid":0,"ts":0.1000,"args":{"value":2})"),
            std::string::npos);
  // Nothing else: one sample per change of window value.
  size_t samples = 0;
  for (size_t at = json.find(R"("ph":"C")"); at != std::string::npos; at = json.find(R"("ph":"C")", at + 1)) ++samples;
  EXPECT_EQ(samples, 6u);
}

TEST(TraceOptions, AWindowKeepsWhatOverlapsIt) {
  const Program p = MakeProgram("k");
  TraceOptions o;
  o.from = 100;
  o.to = 200;
  o.counter_window_cycles = 0;
  Trace t = FreshTrace(o);
  t.Instruction(0, Pipe::kCube, &p, 0, 0, 50, false);     // before: dropped
  t.Instruction(0, Pipe::kCube, &p, 1, 90, 110, false);   // overlaps: kept
  t.Instruction(0, Pipe::kCube, &p, 2, 250, 260, false);  // after: dropped
  t.Count(Trace::kHbm, "HBM GB/s", 10, 7, true);
  t.Count(Trace::kHbm, "HBM GB/s", 150, 9, true);
  t.Count(Trace::kHbm, "HBM GB/s", 300, 1, true);  // after: dropped
  ASSERT_EQ(t.slices().size(), 1u);
  EXPECT_DOUBLE_EQ(t.slices()[0].start, 90);
  const std::string json = t.ToJson(1000);
  // The value entering the window is written at its start.
  EXPECT_NE(json.find(R"("ts":0.1000,"args":{"value":7})"), std::string::npos);
  EXPECT_NE(json.find(R"("ts":0.1500,"args":{"value":9})"), std::string::npos);
  EXPECT_EQ(json.find(R"("args":{"value":1})"), std::string::npos);
}

TEST(TraceOptions, AKernelFilterKeepsMatchingPrograms) {
  const Program conv = MakeProgram("conv_img2col"), pool = MakeProgram("vec_MaxPool");
  TraceOptions o;
  o.kernels = "conv";
  Trace t = FreshTrace(o);
  t.Instruction(0, Pipe::kCube, &conv, 0, 100, 200, false);
  t.Instruction(0, Pipe::kVector, &pool, 0, 300, 400, false);
  t.Named(Trace::kAicpu, 0, "TopK", 150, 160);  // inside conv's span: kept
  t.Named(Trace::kAicpu, 0, "NMS", 500, 600);   // outside: dropped when written
  ASSERT_EQ(t.slices().size(), 3u);
  const std::string json = t.ToJson(1000);
  EXPECT_NE(json.find("conv_img2col"), std::string::npos);
  EXPECT_EQ(json.find("vec_MaxPool"), std::string::npos);
  EXPECT_NE(json.find("TopK"), std::string::npos);
  EXPECT_EQ(json.find("NMS"), std::string::npos);
}

TEST(TraceOptions, GzipInflatesToTheJson) {
  const Program p = MakeProgram("k");
  Trace t = FreshTrace();
  for (int i = 0; i < 100; ++i) t.Instruction(i % 4, Pipe::kCube, &p, 0, i * 100, i * 100 + 30, false);
  const std::string json = t.ToJson(1000), gz = t.ToJsonGz(1000);
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzip's magic
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_LT(gz.size(), json.size() / 4);
  z_stream z{};
  ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string back(json.size() + 16, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  z.next_out = reinterpret_cast<Bytef*>(back.data());
  z.avail_out = static_cast<uInt>(back.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  back.resize(z.total_out);
  inflateEnd(&z);
  EXPECT_EQ(back, json);
}

}  // namespace
}  // namespace kiln::sim
