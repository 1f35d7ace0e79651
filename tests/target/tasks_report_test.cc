//===- tasks_report_test.cc - A run's tasks as CSV, read and written -----===//
//
// target/api/tasks_report.h in its own terms: a report reads back as
// written, energy included; byte counts are integers, exact past 2^53
// (a double would round them: what the fuzzer found); the sums of a report
// without a total row must read back too; columns are taken by name.
//
//===----------------------------------------------------------------------===//
#include "target/api/tasks_report.h"

#include "gtest/gtest.h"
#include "target/api/executable.h"

namespace kiln::target {
namespace {

TEST(TasksReport, ReadsBackAsWritten) {
  TasksReport r;
  TaskReportRow t;
  t.task = "conv, \"first\"";
  t.engine = "cube";
  t.cycles = 1200;
  t.estimated_cycles = 1100;
  t.cube_utilization = 0.5;
  t.cores = 32;
  t.bound = "HBM";
  t.hbm_read_bytes = 4096;
  t.hbm_write_bytes = 1024;
  t.energy_uj = 12.5;
  r.tasks.push_back(t);
  r.total.cycles = 1500;
  r.total.energy_uj = 99.25;
  const std::string csv = TasksCsv(r);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), kTasksCsvHeader);
  auto back = ParseTasksCsv(csv, "t.csv");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->tasks.size(), 1u);
  EXPECT_EQ(back->tasks[0].task, t.task);
  EXPECT_EQ(back->tasks[0].hbm_read_bytes, 4096);
  EXPECT_DOUBLE_EQ(back->tasks[0].energy_uj, 12.5);
  EXPECT_DOUBLE_EQ(back->total.energy_uj, 99.25);
  EXPECT_EQ(TasksCsv(*back), csv);
}

TEST(TasksReport, ByteCountsAreExactPastTwoToThe53) {
  // No total row: the total is the tasks' sum, 2^57 + 1 bytes, which a
  // double cannot hold.
  const std::string csv = "task,cycles,hbm_write_bytes\na,1,144115188075855872\nb,1,1\n";
  auto r = ParseTasksCsv(csv, "t.csv");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->total.hbm_write_bytes, (int64_t{1} << 57) + 1);
  const std::string written = TasksCsv(*r);
  auto back = ParseTasksCsv(written, "w.csv");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->total.hbm_write_bytes, (int64_t{1} << 57) + 1);
  EXPECT_EQ(TasksCsv(*back), written);
  // A byte count is an integer; sums past what a count holds are refused.
  EXPECT_FALSE(ParseTasksCsv("task,cycles,hbm_read_bytes\na,1,1.5\n", "f.csv").ok());
  EXPECT_FALSE(ParseTasksCsv("task,cycles,hbm_read_bytes\na,1,4000000000000000000\nb,1,4000000000000000000\n", "s.csv")
                   .ok());
  EXPECT_FALSE(ParseTasksCsv("task,cycles\na,4000000000000000000\nb,4000000000000000000\n", "c.csv").ok());
}

TEST(TasksReport, ColumnsAreTakenByName) {
  auto r = ParseTasksCsv("cycles,task,energy_uj\n10,a,\n20,b,3.5\n", "t.csv");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tasks.size(), 2u);
  EXPECT_EQ(r->tasks[1].task, "b");
  EXPECT_DOUBLE_EQ(r->tasks[1].cycles, 20);
  EXPECT_LT(r->tasks[0].energy_uj, 0);  // empty: not reported
  EXPECT_DOUBLE_EQ(r->tasks[1].energy_uj, 3.5);
}

}  // namespace
}  // namespace kiln::target
