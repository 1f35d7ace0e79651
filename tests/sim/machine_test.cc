//===- machine_test.cc - Machine descriptions -----------------------------===//
#include "gtest/gtest.h"
#include "sim/machine/machine.h"
#include "tests/sim/sim_test_util.h"

namespace kiln::sim {
namespace {

TEST(MachineTest, ShippedFilesLoad) {
  auto a = LoadMachine(std::string(KILN_SOURCE_DIR) + "/sim/machines/ascend910-like.textproto");
  ASSERT_TRUE(a.ok()) << a.status();
  // The 910-like file is the default machine: it sets every field, and
  // DefaultMachine() is that file (embedded at build time).
  EXPECT_EQ(a->SerializeAsString(), DefaultMachine().SerializeAsString());
  EXPECT_TRUE(ValidateMachine(DefaultMachine()).ok()) << ValidateMachine(DefaultMachine());
  auto b = LoadMachine(std::string(KILN_SOURCE_DIR) + "/sim/machines/ascend910b-like.textproto");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->chip().ai_cores(), 24);
  EXPECT_EQ(b->chip().clock_mhz(), 1800);
  EXPECT_EQ(b->core().l1_kib(), 512);
  EXPECT_EQ(b->core().l0c_kib(), 128);
  EXPECT_EQ(b->core().ub_kib(), 192);
  EXPECT_EQ(b->core().l0a_kib(), 64);  // kept from the file
  EXPECT_EQ(b->core().cube_fp16_macs_per_cycle(), 4096);  // a default
}

TEST(MachineTest, DefaultsFollowPublicFigures) {
  Machine m = DefaultMachine();
  EXPECT_EQ(m.chip().ai_cores(), 32);
  EXPECT_EQ(m.core().cube_fp16_macs_per_cycle(), 16 * 16 * 16);
  EXPECT_EQ(m.core().cube_int8_macs_per_cycle(), 2 * m.core().cube_fp16_macs_per_cycle());
  EXPECT_EQ(m.core().cube_fp32_macs_per_cycle() * 4, m.core().cube_fp16_macs_per_cycle());
  EXPECT_DOUBLE_EQ(HbmBytesPerCycle(m), 1200.0);
  EXPECT_DOUBLE_EQ(HostLinkBytesPerCycle(m), 32.0);
  EXPECT_DOUBLE_EQ(ChipLinkBytesPerCycle(m), 30.0);  // 30 GB/s at 1 GHz
}

TEST(MachineTest, PartialFileKeepsDefaults) {
  auto m = ParseMachine("chip { ai_cores: 2 }", "x");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->chip().ai_cores(), 2);
  EXPECT_EQ(m->core().ub_kib(), 256);
}

TEST(MachineTest, UnknownFieldIsNamed) {
  auto m = ParseMachine("core { l1_kb: 512 }", "bad.textproto");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("l1_kb"), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find("bad.textproto:1:"), std::string::npos) << m.status();
}

TEST(MachineTest, NegativeSizeIsNamed) {
  auto m = ParseMachine("core { ub_kib: -4 }", "bad.textproto");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("core.ub_kib must be positive, got -4"), std::string::npos) << m.status();
}

TEST(MachineTest, ZeroClockIsNamed) {
  auto m = ParseMachine("chip { clock_mhz: 0 }", "bad.textproto");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("chip.clock_mhz must be positive"), std::string::npos) << m.status();
}

TEST(MachineTest, MissingFileIsAnError) {
  auto m = LoadMachine("/nonexistent/machine.textproto");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace kiln::sim
