//===- tile_ir_test.cc - The tile IR's names, text form and verifier ------===//
//
// Round trips of the text form (the header's example, every statement and
// operand form, numbers that need all their digits), the parser's errors
// with line numbers, and one negative case per verifier rule, each
// asserting the rule the error names.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_ir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::target::tile {
namespace {

using ::testing::HasSubstr;

// A target like npusim's figures: 16x16x16 f16 -> f32 MMA, one group.
TileTarget TestTarget(int max_group = 4) {
  TileTarget t;
  t.name = "test";
  t.capacity = {{Scope::kStage, 512 * 1024}, {Scope::kOperandA, 64 * 1024}, {Scope::kOperandB, 64 * 1024},
                {Scope::kAccumulator, 128 * 1024}, {Scope::kVector, 192 * 1024}};
  t.mma = {TileMma{16, 16, 16, DType::kF16, DType::kF32}};
  t.max_group = max_group;
  return t;
}

constexpr char kGemm[] = R"(kernel @gemm_relu {
  plan "tiles 128x128x32, 2 stages"
  arg %A : f16[512,256] in
  arg %B : f16[256,1024] in
  arg %Y : f16[512,1024] out
  grid %m = 4, %n = 8 {
    buffer %As : f16[128,32] stage x2
    buffer %Bs : f16[32,128] stage x2
    buffer %Aa : f16[128,32] operand_a
    buffer %Bb : f16[32,128] operand_b
    buffer %acc : f32[128,128] accumulator
    fill %acc, 0
    pipelined(2) %k = 8 {
      copy %A[%m*128, %k*32] -> %As
      copy %B[%k*32, %n*128] -> %Bs
      sync global -> stage
      copy %As -> %Aa
      copy %Bs -> %Bb
      sync stage -> operand_a
      mma %acc += %Aa * %Bb
    }
    ew relu %acc <- %acc
    copy %acc -> %Y[%m*128, %n*128]
  }
}
)";

TEST(TileIr, Names) {
  EXPECT_EQ(ScopeName(Scope::kOperandB), "operand_b");
  EXPECT_EQ(ParseScope("accumulator"), Scope::kAccumulator);
  EXPECT_EQ(ParseScope("smem"), std::nullopt);
  EXPECT_EQ(RoleName(TileArg::Role::kWorkspace), "workspace");
  EXPECT_EQ(EwOpName(EwOp::kCmpGe), "cmp_ge");
  EXPECT_EQ(ParseEwOp("sigmoid"), EwOp::kSigmoid);
  EXPECT_EQ(EwOpArity(EwOp::kSelect), 3);
  EXPECT_EQ(EwOpArity(EwOp::kPow), 2);
  EXPECT_EQ(EwOpArity(EwOp::kGelu), 1);
  EXPECT_EQ(ParseEwOp("gelu_tanh"), EwOp::kGeluTanh);
  EXPECT_EQ(EwOpArity(EwOp::kGeluTanh), 1);
  EXPECT_EQ(ReduceOpName(ReduceOp::kProd), "prod");
  EXPECT_EQ(ParseReduceOp("max"), ReduceOp::kMax);
}

TEST(TileIr, HeaderExampleRoundTripsAndVerifies) {
  auto k = Parse(kGemm);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->name, "gemm_relu");
  EXPECT_EQ(k->plan, "tiles 128x128x32, 2 stages");
  ASSERT_EQ(k->args.size(), 3u);
  EXPECT_EQ(k->args[2].role, TileArg::Role::kOut);
  EXPECT_EQ(Print(*k), kGemm);
  EXPECT_TRUE(Verify(*k, TestTarget()).ok()) << Verify(*k, TestTarget());
  // A bare local reference is the whole buffer: starts of its rank.
  const Stmt& grid = *k->body[0];
  const Stmt& fill = *grid.body[5];
  ASSERT_EQ(fill.kind, Stmt::Kind::kFill);
  EXPECT_EQ(fill.dst.start.size(), 2u);
}

TEST(TileIr, EveryFormRoundTrips) {
  constexpr char kText[] = R"(kernel @forms {
  arg %X : f32[4,7,300] in
  arg %s : f32[1] const
  arg %Y : f32[4,7,300] out
  arg %W : f32[8,300] workspace
  grid %b = 4, %r = 1 {
    group %g = 2 {
      buffer %x : f32[7,300] vector
      buffer %t : f32[7,1] vector
      buffer %u : bool[7,300] vector
      serial %i = 3 {
        copy %X[%b, 0, -%i*2 + 5] -> %x transpose add
        copy %X[%b, %i - 1, %r*3 - 7] -> %x
      }
      fill %x, -0.1
      fill %t, inf
      fill %t, -inf
      ew add %x <- %x, 0.30000000000000004
      ew select %x <- %u, %x, %t
      ew pow %x <- 2, %x
      ew cmp_lt %u <- %x, 1e-05
      reduce max %t <- %x axis 1
      causal %x, %b*7, %i*300 - 2
      copy %x -> %Y[%b, 0, 0]
      sync vector -> global
    }
  }
}
)";
  auto k = Parse(kText);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(Print(*k), kText);
}

TEST(TileIr, CommentsAreSkipped) {
  auto k = Parse("// RUN: kiln tile %s\nkernel @k { // the name\n  arg %X : f32[1] in // one\n}\n");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(Print(*k), "kernel @k {\n  arg %X : f32[1] in\n}\n");
}

TEST(TileIr, ParseErrorsNameTheLine) {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"kernel @k {\n  bogus %x\n}\n", "line 2: unknown statement 'bogus'"},
      {"kernel @k {\n  arg %X : f99[1] in\n}\n", "line 2: unknown dtype 'f99'"},
      {"kernel @k {\n  arg %X : f32[1] in\n  buffer %b : f32[1] smem\n}\n", "line 3: unknown scope 'smem'"},
      {"kernel @k {\n\n  ew frob %a <- %a\n}\n", "line 3: unknown elementwise op 'frob'"},
      {"kernel @k {\n  grid %m = 4 {\n", "line 3: expected '}', found the end of the text"},
      {"kernel @k {\n  copy %a %b\n}\n", "line 2: expected '->', found '%b'"},
      {"kernel @k {\n  mma %c -= %a * %b\n}\n", "line 2: expected '+=' or '=', found '-'"},
      {"kernel @k {\n}\nkernel @j {\n}\n", "line 3: expected the end of the text after the kernel"},
      {"kernel @k {\n  plan \"open\n}\n", "line 2: unterminated string"},
      {"kernel @k {\n  fill %x, 1 ; \n}\n", "line 2: unexpected character ';'"},
  };
  for (const Case& c : cases) {
    auto k = Parse(c.text);
    ASSERT_FALSE(k.ok()) << c.text;
    EXPECT_THAT(k.status().message(), HasSubstr(c.error)) << c.text;
  }
}

TEST(TileIr, BuildersMatchTheText) {
  TileKernel k;
  k.name = "relu";
  k.args = {TileArg{"X", DType::kF32, {256, 64}, TileArg::Role::kIn},
            TileArg{"Y", DType::kF32, {256, 64}, TileArg::Role::kOut}};
  auto grid = MakeLoop(Stmt::LoopKind::kGrid, {{"r", 4}});
  grid->body.push_back(MakeBuffer("x", DType::kF32, {64, 64}, Scope::kVector));
  TileRef rows{"X", {Affine::Var("r", 64), Affine::Const(0)}};
  grid->body.push_back(MakeCopy(rows, Whole("x", 2)));
  grid->body.push_back(MakeEw(EwOp::kRelu, Whole("x", 2), {Operand{Whole("x", 2)}}));
  rows.name = "Y";
  grid->body.push_back(MakeCopy(Whole("x", 2), rows));
  k.body.push_back(std::move(grid));
  EXPECT_EQ(Print(k), R"(kernel @relu {
  arg %X : f32[256,64] in
  arg %Y : f32[256,64] out
  grid %r = 4 {
    buffer %x : f32[64,64] vector
    copy %X[%r*64, 0] -> %x
    ew relu %x <- %x
    copy %x -> %Y[%r*64, 0]
  }
}
)");
  EXPECT_TRUE(Verify(k, TestTarget()).ok()) << Verify(k, TestTarget());
}

// One broken kernel per verifier rule: the body (inside a kernel with
// %A f16[256,64] in, %Y f32[256,64] out) and the rule its error names.
struct VerifyCase {
  const char* body;
  const char* rule;
};

TEST(TileIrVerify, EachRuleHasItsError) {
  const VerifyCase cases[] = {
      {"copy %Z[0, 0] -> %Y[0, 0]", "'copy %Z -> %Y[0, 0]': rule 'names are defined before use'"},
      {"buffer %A : f32[1] vector", "'buffer %A : f32[1] vector': rule 'names are unique'"},
      {"grid %m = 2 {\n buffer %x : f32[1,64] vector\n}\ngrid %n = 2 {\n buffer %x : f32[1,64] vector\n}",
       "rule 'names are unique'"},
      {"buffer %x : f32[128,64] vector\ncopy %A[%m*128, 0] -> %x", "rule 'loop variables in scope'"},
      {"buffer %x : f32[128,64] vector\ncopy %A[0] -> %x", ""},  // fewer starts of a global tensor: fine
      {"buffer %x : f32[128,64] vector\ncopy %A[0, 0, 0] -> %x", "rule 'references have the rank of what they name'"},
      {"buffer %x : f32[128,64] vector\ncopy %A[0, 0] -> %x[0]", "rule 'references have the rank of what they name'"},
      {"buffer %x : f32[128,64] vector\nbuffer %y : f32[64,64] vector\nserial %i = 2 {\n ew relu %y <- %x[%i*64, 0]\n}",
       "rule 'statements other than copies work on whole buffers'"},
      {"buffer %s : f16[128,64] stage\nbuffer %a : f16[64,64] operand_a\nserial %i = 4 {\n"
       " copy %s[%i*32, 0] -> %a\n}",
       "'copy %s[%i*32, 0] -> %a': rule 'local tiles stay inside their buffers'"},
      {"buffer %x : f32[128,64] vector\ngrid %m = 3 {\n copy %A[%m*128, 0] -> %x\n}",
       "rule 'global tiles start inside their tensors'"},
      {"buffer %x : f32[128,64] vector\ngrid %m = 2 {\n copy %A[%m*128, 0] -> %x\n}", ""},  // ragged edge: fine
      {"buffer %x : f16[128,64] operand_a\ncopy %A[0, 0] -> %x",
       "rule 'copies follow a path between scopes': no path from global to operand_a"},
      {"buffer %x : f32[128,64] vector\ncopy %x -> %A[0, 0]", "rule 'copies write only out and workspace arguments'"},
      {"buffer %x : f32[4,128,64] vector\ncopy %x -> %Y[0, 0]", "rule 'copies to global tensors do not broadcast'"},
      {"buffer %x : f16[128] stage\nbuffer %y : f16[128,1] operand_a\ncopy %x -> %y",
       "rule 'local copies keep the rank'"},
      {"buffer %x : f32[128] vector\ncopy %A[0, 0] -> %x transpose", "rule 'transposed copies are of matrices'"},
      {"buffer %a : f16[32,32] stage\nbuffer %b : f16[32,32] operand_b\nbuffer %c : f32[32,32] accumulator\n"
       "mma %c += %a * %b",
       "rule 'mma operands are in their scopes': A is not in operand_a scope"},
      {"buffer %a : f16[32,16] operand_a\nbuffer %b : f16[32,32] operand_b\nbuffer %c : f32[32,32] accumulator\n"
       "mma %c += %a * %b",
       "rule 'mma shapes agree'"},
      {"buffer %a : f16[24,16] operand_a\nbuffer %b : f16[16,32] operand_b\nbuffer %c : f32[24,32] accumulator\n"
       "mma %c = %a * %b",
       "'mma %c = %a * %b': rule 'mma shapes are in units of the target's mma shapes'"},
      {"buffer %a : f32[32,16] operand_a\nbuffer %b : f32[16,32] operand_b\nbuffer %c : f32[32,32] accumulator\n"
       "mma %c += %a * %b",
       "rule 'mma dtypes are the target's': f32 x f32 -> f32 is no mma of test"},
      {"buffer %x : f16[128,64] stage x2\ncopy %A[0, 0] -> %x",
       "rule 'multi-copy buffers are used inside a pipelined loop of at most that many stages': %x has 2 copies "
       "and is used outside"},
      {"buffer %x : f16[128,64] stage x2\npipelined(3) %k = 4 {\n copy %A[0, 0] -> %x\n}",
       "%x has 2 copies, the loop 3 stages"},
      {"buffer %x : f32[512,512] vector", "'buffer %x : f32[512,512] vector': rule 'buffers fit the target's capacity'"},
      {"group %g = 2 {\n buffer %x : f32[128,128] vector\n}\nbuffer %y : f32[128,256] vector",
       "rule 'buffers fit the target's capacity': vector holds 262144 bytes with this buffer"},
      {"buffer %x : f32[1] global", "rule 'buffers live in local scopes'"},
      {"buffer %x : f32[0,4] vector", "rule 'shapes are positive'"},
      {"buffer %x : f32[4] vector x0", "rule 'buffers have at least one copy'"},
      {"serial %i = 0 {\n}", "rule 'loops run at least once'"},
      {"serial %i = 2 {\n grid %m = 2 {\n }\n}", "'grid %m = 2': rule 'grid loops are outermost'"},
      {"serial %i = 2 {\n group %g = 2 {\n }\n}", "rule 'group loops nest only in grid loops'"},
      {"group %g = 8 {\n}", "'group %g = 8': rule 'group loops within the target's groups per unit'"},
      {"pipelined(0) %k = 2 {\n}", "rule 'pipelined loops have at least one stage'"},
      {"buffer %x : f32[4] vector\new add %x <- %x", "rule 'ew steps take their op's operands': add takes 2, given 1"},
      {"buffer %x : f32[4,4] vector\nbuffer %y : f32[3] vector\new add %x <- %x, %y",
       "rule 'ew operands broadcast to the destination'"},
      {"buffer %x : f32[4,4] vector\nbuffer %y : f32[4] vector\new add %x <- %x, %y", ""},  // a row: fine
      {"buffer %x : f16[16,16] stage\new relu %x <- %x",
       "rule 'ew and reduce steps work in vector or accumulator scope'"},
      {"buffer %x : f32[4,4] vector\new relu %Y <- %x", "rule 'only copies address global tensors'"},
      {"buffer %x : f32[4,4] vector\nbuffer %t : f32[4,1] vector\nreduce sum %t <- %x axis 2",
       "rule 'reduce axes are dimensions of the source'"},
      {"buffer %x : f32[4,4] vector\nbuffer %t : f32[4,4] vector\nreduce sum %t <- %x axis 1",
       "rule 'reduce keeps the reduced dimension with extent 1': the destination should be [4,1]"},
      {"buffer %x : f32[4,4] vector\ngrid %m = 2 {\n causal %x, %m*4, 0\n}", ""},
      {"buffer %x : f32[4] vector\ncausal %x, 0, 0", "rule 'causal masks a tile of scores'"},
      {"buffer %x : f16[4,4] stage\ncausal %x, 0, 0", "rule 'ew and reduce steps work in vector or accumulator"},
      {"buffer %x : f32[4,4] vector\ncausal %x, %q, 0", "rule 'loop variables in scope'"},
      {"causal %A, 0, 0", "rule 'only copies address global tensors'"},
  };
  for (const VerifyCase& c : cases) {
    const std::string text = std::string("kernel @k {\n  arg %A : f16[256,64] in\n  arg %Y : f32[256,64] out\n") +
                             c.body + "\n}\n";
    auto k = Parse(text);
    ASSERT_TRUE(k.ok()) << text << "\n" << k.status();
    absl::Status s = Verify(*k, TestTarget());
    if (std::string(c.rule).empty()) {
      EXPECT_TRUE(s.ok()) << text << "\n" << s;
      continue;
    }
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_THAT(s.message(), HasSubstr(c.rule)) << text;
    EXPECT_THAT(s.message(), HasSubstr("tile kernel @k: '")) << text;
  }
}

TEST(TileIrVerify, MultiCopyBuffersRotateInAnEnclosingPipelinedLoop) {
  // %As (x2) rotates with %k and is read in the inner pipelined(3) %kk loop;
  // %Aa (x3) rotates with %kk.
  auto k = Parse(R"(kernel @k {
  arg %A : f16[256,64] in
  buffer %As : f16[128,64] stage x2
  buffer %Aa : f16[128,16] operand_a x3
  pipelined(2) %k = 2 {
    copy %A[%k*128, 0] -> %As
    pipelined(3) %kk = 4 {
      copy %As[0, %kk*16] -> %Aa
    }
  }
}
)");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(Verify(*k, TestTarget()).ok()) << Verify(*k, TestTarget());
}

}  // namespace
}  // namespace kiln::target::tile
