//===- encode_test.cc - Programs packed as integers, and their damage -----===//
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "sim/isa/asm.h"
#include "sim/isa/encode.h"
#include "sim/isa/isa.pb.h"

namespace kiln::sim {
namespace {

const char* kText = R"(.program t
.regs 4
.arg x f32[64]
top:
  mov r1, 32
  vadds.f32 UB[r1 + 32], UB[0], 0.5, repeat=2
  copy_gm_ub UB[0], x[r1 + 0], len=256
  set_flag MTE2, VECTOR, 0
  wait_flag MTE2, VECTOR, 0
  pipe_barrier ALL
  bne r1, 0, top
)";

isa::Program Packed() {
  auto f = Assemble(kText, "t.kasm");
  EXPECT_TRUE(f.ok()) << f.status();
  return ToProto(f->program);
}

TEST(EncodeTest, EveryOperandKindRoundTrips) {
  auto f = Assemble(kText, "t.kasm");
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<Program> back = FromProto(ToProto(f->program));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == f->program);
}

// A few bytes an instruction on the wire: the heads, kinds, registers and
// most attributes are one-byte varints.
TEST(EncodeTest, TheCodeIsAFewBytesAnInstruction) {
  auto f = Assemble(kText, "t.kasm");
  ASSERT_TRUE(f.ok());
  isa::Program code_only;
  *code_only.mutable_code() = ToProto(f->program).code();
  EXPECT_LE(code_only.ByteSizeLong(), 24 * f->program.insts.size());
}

// Each kind of damage to the code words is a one-line InvalidArgument that
// names the instruction.
TEST(EncodeTest, DamagedCodeIsRefusedWithTheInstruction) {
  struct Damage {
    std::string name;
    std::function<void(google::protobuf::RepeatedField<int64_t>&)> f;
    std::string says;
  };
  const isa::Program good = Packed();
  // Word indices: 0 head of mov, 1..2 its register, 3..4 its immediate;
  // 5 the head of vadds, 6..10 its destination address.
  const std::vector<Damage> damages = {
      {"truncated", [](auto& c) { c.RemoveLast(); }, "instruction 6: the code ends inside it"},
      {"opcode", [](auto& c) { c.Set(0, 1000); }, "instruction 0: bad opcode"},
      {"negative head", [](auto& c) { c.Set(0, -5); }, "instruction 0: bad head word"},
      {"dtype", [](auto& c) { c.Set(5, c.Get(5) + 1024 * 9); }, "instruction 1: bad dtype"},
      {"operands", [](auto& c) { c.Set(0, c.Get(0) + 1024 * 16 * 16 * 3); }, "too many operands"},
      {"kind", [](auto& c) { c.Set(1, 9); }, "instruction 0: bad operand kind 9"},
      {"register", [](auto& c) { c.Set(2, 40000); }, "instruction 0: bad register"},
      {"space", [](auto& c) { c.Set(7, 9); }, "instruction 1: bad space"},
      {"argument", [](auto& c) { c.Set(9, 3); }, "instruction 1: bad argument index"},
      {"unverified", [](auto& c) { c.Set(2, 7); }, "r7"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.name);
    isa::Program p = good;
    d.f(*p.mutable_code());
    absl::StatusOr<Program> back = FromProto(p);
    ASSERT_FALSE(back.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(back.status())) << back.status();
    EXPECT_THAT(std::string(back.status().message()), ::testing::HasSubstr(d.says));
    EXPECT_EQ(std::string(back.status().message()).find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::sim
