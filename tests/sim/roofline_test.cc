//===- roofline_test.cc - Kernels under the machine's roofs ---------------===//
//
// The work a run counts (cube multiply-accumulates and vector elements at
// the units' peak rates), the roofline's definitions on hand-made
// statistics, the rule that no kernel of the model beats a roof, and the
// chart's text.
//
//===----------------------------------------------------------------------===//
#include "sim/model/roofline.h"

#include <cmath>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sim/machine/machine.h"
#include "sim/model/device.h"
#include "tests/sim/sim_test_util.h"

namespace kiln::sim {
namespace {

using testing::Load;
using testing::ReadSource;

TEST(RooflineTest, RunsCountTheWorkAtTheUnitsPeakRates) {
  Machine m = DefaultMachine();
  // fp16 and bf16: one 16x16x16 step a cycle; fp32: a 16x16x8 step in two.
  struct Case { const char* dt; double cycles_per_step; };
  for (Case c : {Case{"f16", 1}, Case{"f32", 2}}) {
    SCOPED_TRACE(c.dt);
    auto l = Load(absl::StrCat(".program t\n  mmad.", c.dt, " L0C[0], L0A[0], L0B[0], m=2, k=3, n=4, init=1\n"), m);
    ASSERT_TRUE(l);
    auto r = l->Run();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_DOUBLE_EQ(r->kernels[0].cube_cycles, 2 * 3 * 4 * c.cycles_per_step);
    EXPECT_DOUBLE_EQ(r->kernels[0].vector_cycles, 0);
  }
  // Vector: every repeat's active elements; a special function costs its
  // repeats' extra cycles, not extra elements.
  auto l = Load(
      ".program t\n"
      "  vmuls.f16 UB[0], UB[4096], 2.0, repeat=5\n"      // 5 x 128 elements, 5 cycles
      "  vsigmoid.f32 UB[8192], UB[12288], repeat=3\n"    // 3 x 64 elements, 3 x 2 cycles
      "  vmuls.f16 UB[0], UB[4096], 2.0, repeat=2, mask=10\n",  // 2 x 10 elements, 2 cycles
      m);
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  const KernelStats& k = r->kernels[0];
  EXPECT_EQ(k.vector_elements, 5 * 128 + 3 * 64 + 2 * 10);
  EXPECT_DOUBLE_EQ(k.vector_cycles, 5 + 3 * m.core().vector_special_cycles_per_repeat() + 2);
  EXPECT_DOUBLE_EQ(k.cube_cycles, 0);
}

TEST(RooflineTest, PointsFollowTheirDefinitions) {
  Machine m = DefaultMachine();
  const Roofs roofs = MachineRoofs(m);
  EXPECT_EQ(roofs.cores, 32);
  EXPECT_DOUBLE_EQ(roofs.cube_fp16, 2.0 * 4096 * 32);
  EXPECT_DOUBLE_EQ(roofs.cube_fp32, 2.0 * 1024 * 32);
  EXPECT_DOUBLE_EQ(roofs.vector_fp16, 128.0 * 32);
  EXPECT_DOUBLE_EQ(roofs.vector_fp32, 64.0 * 32);
  EXPECT_DOUBLE_EQ(roofs.hbm_bytes_per_cycle, 1200);

  RunStats s;
  auto add = [&](const char* name, double cycles, int64_t macs, double cube_cycles, int64_t elements,
                 double vector_cycles, int64_t bytes) {
    KernelStats k;
    k.name = name;
    k.cores_used = 32;
    k.start_cycle = 100;
    k.end_cycle = 100 + cycles;
    k.cube_macs = macs;
    k.cube_cycles = cube_cycles;
    k.vector_elements = elements;
    k.vector_cycles = vector_cycles;
    k.hbm_read_bytes = bytes / 2;
    k.hbm_write_bytes = bytes - bytes / 2;
    s.kernels.push_back(k);
  };
  add("gemm", 1000, 4096 * 6400, 6400, 0, 0, 120000);  // compute 200 cycles, memory 100
  add("softmax", 500, 0, 0, 128 * 9600, 9600, 12000);  // compute 300, memory 10
  add("copy", 400, 0, 0, 0, 0, 360000);                // memory 300
  add("empty", 10, 0, 0, 0, 0, 0);
  add("epilogue", 800, 4096 * 320, 320, 128 * 12800, 12800, 1200);  // cube 10, vector 400, memory 1
  std::vector<RooflinePoint> p = Roofline(s, m);
  ASSERT_EQ(p.size(), 5u);

  EXPECT_EQ(p[0].name, "gemm");
  EXPECT_DOUBLE_EQ(p[0].work(), 2.0 * 4096 * 6400);
  EXPECT_DOUBLE_EQ(p[0].cube_bound, 200);
  EXPECT_DOUBLE_EQ(p[0].compute_bound(), 200);
  EXPECT_DOUBLE_EQ(p[0].memory_bound, 100);
  EXPECT_DOUBLE_EQ(p[0].intensity(), 2.0 * 4096 * 6400 / 120000);
  EXPECT_DOUBLE_EQ(p[0].attained(), 2.0 * 4096 * 6400 / 1000);
  EXPECT_DOUBLE_EQ(p[0].roof(), 2.0 * 4096 * 6400 / 200);  // the fp16 cube roof itself
  EXPECT_DOUBLE_EQ(p[0].roof(), roofs.cube_fp16);
  EXPECT_DOUBLE_EQ(p[0].efficiency(), 0.2);
  EXPECT_STREQ(p[0].limit(), "cube");

  EXPECT_DOUBLE_EQ(p[1].roof(), roofs.vector_fp16);
  EXPECT_DOUBLE_EQ(p[1].efficiency(), 0.6);
  EXPECT_STREQ(p[1].limit(), "vector");

  EXPECT_DOUBLE_EQ(p[2].work(), 0);
  EXPECT_DOUBLE_EQ(p[2].memory_bound, 300);
  EXPECT_DOUBLE_EQ(p[2].efficiency(), 0.75);
  EXPECT_STREQ(p[2].limit(), "HBM");

  EXPECT_DOUBLE_EQ(p[3].efficiency(), 0);
  EXPECT_STREQ(p[3].limit(), "none");

  // A matrix op with a long vector epilogue is limited by the vector unit.
  EXPECT_DOUBLE_EQ(p[4].cube_bound, 10);
  EXPECT_DOUBLE_EQ(p[4].vector_bound, 400);
  EXPECT_DOUBLE_EQ(p[4].efficiency(), 0.5);
  EXPECT_STREQ(p[4].limit(), "vector");

  // The chart leaves out what a log-log plot cannot place, and says so;
  // names are escaped; the same points give the same bytes.
  p[0].name = "a<b>&\"c\"";
  std::string svg = RooflineSvg(p, roofs, "t & u");
  EXPECT_NE(svg.find("<title>a&lt;b&gt;&amp;&quot;c&quot;: 1000 cycles on 32 cores"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">t &amp; u</text>"), std::string::npos);
  EXPECT_NE(svg.find("2 kernels without work or HBM traffic not shown"), std::string::npos);
  EXPECT_EQ(svg.find("copy:"), std::string::npos);
  EXPECT_EQ(svg, RooflineSvg(p, roofs, "t & u"));
  for (const char* bad : {"nan", "inf"}) EXPECT_EQ(svg.find(bad), std::string::npos) << bad;
  // A run without kernels (everything on the AICPU) still gives a chart: the roofs.
  std::string empty = RooflineSvg({}, roofs, "none");
  EXPECT_NE(empty.find("<title>cube fp16 262144 per cycle</title>"), std::string::npos);
  EXPECT_EQ(empty.find(" cycles on "), std::string::npos);  // no kernel's circle
  for (const char* bad : {"nan", "inf"}) EXPECT_EQ(empty.find(bad), std::string::npos) << bad;
  std::string csv = RooflineCsv(p);
  EXPECT_TRUE(absl::StrContains(csv, "\n1,softmax,500,32,0,1228800,12000,102.4,2457.6,300,10,4096,0.600000,vector\n"))
      << csv;
}

// No kernel runs faster than the roofs allow: the model never drives a unit
// past its peak rate nor HBM past its bandwidth, on either machine.
TEST(RooflineTest, NoKernelBeatsItsRoofs) {
  for (const char* machine_file : {"sim/machines/ascend910-like.textproto", "sim/machines/ascend910b-like.textproto"}) {
    auto m = LoadMachine(std::string(KILN_SOURCE_DIR) + "/" + machine_file);
    ASSERT_TRUE(m.ok()) << m.status();
    for (const char* path : {"examples/npu/gemm_double_buffer.kasm", "examples/npu/vector_sigmoid.kasm",
                             "tests/sim/roofline.kasm"}) {
      SCOPED_TRACE(absl::StrCat(machine_file, " ", path));
      auto l = Load(ReadSource(path), *m);
      ASSERT_TRUE(l);
      auto r = l->Run();
      ASSERT_TRUE(r.ok()) << r.status();
      for (const RooflinePoint& p : Roofline(*r, *m)) {
        EXPECT_GT(p.work(), 0);
        EXPECT_GT(p.efficiency(), 0);
        EXPECT_LE(p.efficiency(), 1.0);
        // Per core too: the busiest unit's peak-rate cycles fit in the
        // kernel's time on the cores it used.
        const KernelStats& k = r->kernels[0];
        EXPECT_LE(std::max(k.cube_cycles, k.vector_cycles) / k.cores_used, p.cycles);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::sim
