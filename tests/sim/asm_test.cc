//===- asm_test.cc - .kasm assembly, disassembly, encoding and rules ------===//
#include "gtest/gtest.h"
#include "sim/isa/asm.h"
#include "sim/isa/encode.h"
#include "sim/isa/verify.h"
#include "sim/machine/machine.h"
#include "sim/model/device.h"
#include "tests/sim/sim_test_util.h"

namespace kiln::sim {
namespace {

using testing::ReadSource;

const char* const kExamples[] = {"examples/npu/gemm_double_buffer.kasm", "examples/npu/vector_sigmoid.kasm",
                                 "examples/npu/deadlock.kasm"};

TEST(AsmTest, ExamplesRoundTripExactly) {
  for (const char* path : kExamples) {
    SCOPED_TRACE(path);
    auto f = Assemble(ReadSource(path), path);
    ASSERT_TRUE(f.ok()) << f.status();
    std::string text = Disassemble(*f);
    auto g = Assemble(text, "disassembly");
    ASSERT_TRUE(g.ok()) << g.status() << "\n" << text;
    EXPECT_TRUE(*f == *g) << text;
    EXPECT_EQ(Disassemble(*g), text);
  }
}

TEST(AsmTest, ProtoRoundTrip) {
  for (const char* path : kExamples) {
    SCOPED_TRACE(path);
    auto f = Assemble(ReadSource(path), path);
    ASSERT_TRUE(f.ok()) << f.status();
    auto p = ParseProgram(SerializeProgram(f->program));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(*p == f->program);
    EXPECT_EQ(Disassemble(*p), Disassemble(f->program));
  }
}

TEST(AsmTest, ProtoOpcodesMatchTheTable) {
  for (const OpInfo& info : Ops()) {
    std::string name = isa::Opcode_Name(static_cast<isa::Opcode>(info.op));
    std::string want = "OP_";
    for (const char* c = info.name; *c; ++c) want += static_cast<char>(std::toupper(*c));
    EXPECT_EQ(name, want);
  }
  EXPECT_EQ(isa::Opcode_descriptor()->value_count(), static_cast<int>(Op::kNumOps));
}

TEST(AsmTest, CanonicalText) {
  const char* text = R"(.program t
.regs 4
.arg x f32[64]
top:
  mov r1, 0x10
  add r2, r1, -3
  vadds.f32 UB[r1 + 32], UB[r2 - 32], 0.5, repeat=2, mask=17
  vconv.f16.f32 UB[0], UB[256], round=trunc
  vcmp.f32 UB[512], UB[0], UB[256], cmp=ge
  copy_ub_gm x[r1], UB[0], nburst=2, len=64, src_stride=128
  blt r2, r3, top
  set_flag VECTOR, MTE3, 3
  pipe_barrier ALL
)";
  auto f = Assemble(text, "t.kasm");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(Disassemble(f->program), R"(.program t
.regs 4
.arg x f32[64]
top:
  mov r1, 16
  add r2, r1, -3
  vadds.f32 UB[r1 + 32], UB[r2 - 32], 0.5, repeat=2, mask=17
  vconv.f16.f32 UB[0], UB[256], round=trunc
  vcmp.f32 UB[512], UB[0], UB[256], cmp=ge
  copy_ub_gm x[r1], UB[0], nburst=2, len=64, src_stride=128
  blt r2, r3, top
  set_flag VECTOR, MTE3, 3
  pipe_barrier ALL
)");
}

std::string AsmError(const std::string& body) {
  auto f = Assemble(".program t\n.regs 4\n.arg x f16[1024]\n" + body, "t.kasm");
  EXPECT_FALSE(f.ok()) << body;
  return std::string(f.status().message());
}

TEST(AsmTest, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(AsmError("  vad.f16 UB[0], UB[0], UB[0]\n"), "t.kasm:4: unknown instruction 'vad'");
  EXPECT_EQ(AsmError("  vadd UB[0], UB[0], UB[0]\n"), "t.kasm:4: 'vadd' takes 1 dtype suffix (vadd.f16)");
  EXPECT_EQ(AsmError("  mmad.f16 L0C[0], L0A[0], L0B[0], m=1, k=1\n"), "t.kasm:4: 'mmad' needs attribute 'n'");
  EXPECT_EQ(AsmError("  jmp nowhere\n"), "t.kasm:4: unknown label 'nowhere'");
  EXPECT_EQ(AsmError("  copy_gm_ub UB[0], y[0], len=32\n"),
            "t.kasm:4: unknown buffer 'y' (not L1, L0A, L0B, L0C, UB or a declared .arg)");
  EXPECT_EQ(AsmError("  vadd.f16 UB[0], UB[0], UB[0], speed=3\n"), "t.kasm:4: 'vadd' has no attribute 'speed'");
  EXPECT_EQ(AsmError(".arg x f16[4]\n"), "t.kasm:4: argument 'x' declared twice");
}

// Each load-time rule, with the instruction's index and text.
TEST(AsmTest, RulesNameInstructionAndRule) {
  EXPECT_EQ(AsmError("  vadd.f16 UB[0], UB[64], UB[300]\n"),
            "t.kasm: instruction 0 (vadd.f16 UB[0], UB[64], UB[300]): UB address 300 is not 32-byte aligned");
  EXPECT_EQ(AsmError("  vexp.s32 UB[0], UB[0]\n"),
            "t.kasm: instruction 0 (vexp.s32 UB[0], UB[0]): vexp takes dtype f16, f32, not s32");
  EXPECT_EQ(AsmError("  copy_gm_ub UB[0], x[1024], len=1026\n"),
            "t.kasm: instruction 0 (copy_gm_ub UB[0], x[1024], len=1026): GM access [1024, 2050) is outside "
            "argument x (2048 bytes)");
  EXPECT_EQ(AsmError("  mov r9, 1\n"), "t.kasm: instruction 0 (mov r9, 1): register r9 is outside the program's 4 registers");
  EXPECT_EQ(AsmError("  mmad.f16 L0C[0], L0A[256], L0B[0], m=1, k=1, n=1\n"),
            "t.kasm: instruction 0 (mmad.f16 L0C[0], L0A[256], L0B[0], m=1, k=1, n=1): L0A address 256 is not "
            "512-byte aligned");
  EXPECT_EQ(AsmError("  vadd.f32 UB[0], UB[0], UB[0], mask=65\n"),
            "t.kasm: instruction 0 (vadd.f32 UB[0], UB[0], UB[0], mask=65): attribute mask must be at most 64, got 65");
  EXPECT_EQ(AsmError("  set_flag MTE2, MTE2, 0\n"),
            "t.kasm: instruction 0 (set_flag MTE2, MTE2, 0): a flag connects two different pipes");
  EXPECT_EQ(AsmError("  wait_flag MTE2, CUBE, 16\n"),
            "t.kasm: instruction 0 (wait_flag MTE2, CUBE, 16): event id 16 is outside 0..15");
  EXPECT_EQ(AsmError("  vadd.f16 L1[0], UB[0], UB[0]\n"),
            "t.kasm: instruction 0 (vadd.f16 L1[0], UB[0], UB[0]): vector operands are in UB, operand 1 is in L1");
  EXPECT_EQ(AsmError("  vconv.f16.s32 UB[0], UB[256]\n"),
            "t.kasm: instruction 0 (vconv.f16.s32 UB[0], UB[256]): vconv converts f32 to and from f16, bf16 and s32, "
            "not s32 to f16");
  EXPECT_EQ(AsmError("  vtranspose.s32 UB[0], UB[512]\n"),
            "t.kasm: instruction 0 (vtranspose.s32 UB[0], UB[512]): vtranspose takes dtype f16, bf16, f32, not s32");
  EXPECT_EQ(AsmError("  vtranspose.f32 UB[0], UB[512], mask=256\n"),
            "t.kasm: instruction 0 (vtranspose.f32 UB[0], UB[512], mask=256): vtranspose moves whole 8x8 "
            "matrices: mask must be 64");
  EXPECT_EQ(AsmError("  vtranspose.f16 UB[0], UB[512], mask=128\n"),
            "t.kasm: instruction 0 (vtranspose.f16 UB[0], UB[512], mask=128): vtranspose moves whole 16x16 "
            "matrices: mask must be 256");
  EXPECT_EQ(AsmError("  div r1, r1, 0\n"), "t.kasm: instruction 0 (div r1, r1, 0): division by zero");
  EXPECT_EQ(AsmError("  ld.f32 r1, UB[0]\n"), "t.kasm: instruction 0 (ld.f32 r1, UB[0]): ld takes dtype s32, not f32");
  EXPECT_EQ(AsmError("  ld.s32 r1, L1[0]\n"),
            "t.kasm: instruction 0 (ld.s32 r1, L1[0]): operand 2 must be in UB, not L1");
  EXPECT_EQ(AsmError("  ld.s32 r1, UB[6]\n"),
            "t.kasm: instruction 0 (ld.s32 r1, UB[6]): the word's offset 6 is not a multiple of 4");
  // A register set once from an immediate makes the address static.
  EXPECT_EQ(AsmError("  mov r1, 2048\n  copy_gm_ub UB[0], x[r1], len=32\n"),
            "t.kasm: instruction 1 (copy_gm_ub UB[0], x[r1], len=32): GM access [2048, 2080) is outside argument x "
            "(2048 bytes)");
}

// Local buffer bounds depend on the machine: checked when a device loads the program.
TEST(AsmTest, LoadChecksBufferSizes) {
  auto f = Assemble(".program t\n  vadd.f16 UB[262144], UB[0], UB[0]\n", "t.kasm");
  ASSERT_TRUE(f.ok()) << f.status();
  auto d = Device::Create(DefaultMachine());
  ASSERT_TRUE(d.ok());
  auto k = (*d)->LoadProgram(f->program);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().message(),
            "program t: instruction 0 (vadd.f16 UB[262144], UB[0], UB[0]): UB access [262144, 262400) is outside UB "
            "(262144 bytes)");
}

// Addresses that depend on registers are checked at issue, with the same message.
TEST(AsmTest, RuntimeChecksUseTheSameMessage) {
  auto l = testing::Load(R"(.program t
.regs 4
.arg x f16[1024]
  mov r1, 0
loop:
  copy_gm_ub UB[0], x[r1], len=512
  add r1, r1, 512
  blt r1, 4096, loop
)");
  ASSERT_TRUE(l);
  auto r = l->Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "block 0: instruction 1 (copy_gm_ub UB[0], x[r1], len=512): GM access [2048, 2560) is outside argument x "
            "(2048 bytes)");
}

TEST(AsmTest, RandomFillIsDeterministic) {
  std::vector<float> a(100), b(100);
  RandomFill(DType::kF32, 7, a.data(), 100);
  RandomFill(DType::kF32, 7, b.data(), 100);
  EXPECT_EQ(a, b);
  for (float v : a) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
  RandomFill(DType::kF32, 8, b.data(), 100);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace kiln::sim
