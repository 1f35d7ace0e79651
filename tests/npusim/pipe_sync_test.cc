//===- pipe_sync_test.cc - Flags derived from what instructions touch -----===//
//
// target/npusim/kernels/pipe_sync.h: text in, text out. A read after
// another pipe's write waits for a flag set right after that write; a
// write after another pipe's read waits too (the buffer is free); a wait
// that an earlier one implies, directly or through a third pipe, is left
// out; the same pipe needs none; and a double-buffered stretch assembles
// with its sets and waits paired on every channel (the attention kernel's
// tests run such stretches on the simulator).
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "sim/isa/asm.h"
#include "target/npusim/kernels/pipe_sync.h"

namespace kiln::target::npusim {
namespace {

using sim::Pipe;

TEST(PipeSync, ReadAfterWriteWaitsForAFlagSetRightAfterTheWrite) {
  PipeSync p;
  p.Add(Pipe::kMte2, "load a", {}, {"L1.a"});
  p.Add(Pipe::kMte2, "load b", {}, {"L1.b"});
  p.Add(Pipe::kMte1, "use a", {"L1.a"}, {"L0A.a"});
  EXPECT_EQ(p.Emit(), "  load a\n  set_flag MTE2, MTE1, 0\n  load b\n  wait_flag MTE2, MTE1, 0\n  use a\n");
}

TEST(PipeSync, WriteAfterAnotherPipesReadWaitsForTheBufferToBeFree) {
  PipeSync p;
  p.Add(Pipe::kMte2, "load", {}, {"L1.a"});
  p.Add(Pipe::kMte1, "use", {"L1.a"}, {"L0A.a"});
  p.Add(Pipe::kMte2, "load again", {}, {"L1.a"});
  EXPECT_EQ(p.Emit(),
            "  load\n  set_flag MTE2, MTE1, 0\n  wait_flag MTE2, MTE1, 0\n  use\n  set_flag MTE1, MTE2, 0\n"
            "  wait_flag MTE1, MTE2, 0\n  load again\n");
}

TEST(PipeSync, ImpliedWaitsAndSamePipeOrderNeedNoFlag) {
  PipeSync p;
  p.Add(Pipe::kMte2, "load a", {}, {"L1.a"});
  p.Add(Pipe::kMte1, "move a", {"L1.a"}, {"L0A.a"});
  p.Add(Pipe::kCube, "mmad", {"L0A.a"}, {"L0C.c"});
  // The cube follows MTE1, which followed MTE2's load: no MTE2 -> CUBE flag.
  p.Add(Pipe::kCube, "mmad again", {"L1.a", "L0C.c"}, {"L0C.c"});
  const std::string text = p.Emit();
  EXPECT_EQ(text.find("MTE2, CUBE"), std::string::npos) << text;
  EXPECT_EQ(text.find("CUBE, CUBE"), std::string::npos) << text;
}

TEST(PipeSync, TheStretchAssemblesWithItsFlagsPaired) {
  PipeSync p;
  for (int i = 0; i < 4; ++i) {
    const std::string slot = std::to_string(i % 2);
    p.Add(Pipe::kMte2, absl::StrCat("copy_gm_ub UB[", (i % 2) * 64, "], x[", i * 64, "], len=64"), {},
          {"UB." + slot});
    p.Add(Pipe::kVector, absl::StrCat("vadds.f32 UB[", (i % 2) * 64, "], UB[", (i % 2) * 64, "], 1, mask=16"),
          {"UB." + slot}, {"UB." + slot});
    p.Add(Pipe::kMte3, absl::StrCat("copy_ub_gm y[", i * 64, "], UB[", (i % 2) * 64, "], len=64"), {"UB." + slot},
          {});
  }
  const std::string text = ".program t\n.arg x f32[64]\n.arg y f32[64]\n" + p.Emit();
  auto file = sim::Assemble(text, "t.kasm");
  EXPECT_TRUE(file.ok()) << file.status() << "\n" << text;
  // Sets and waits pair up per channel.
  for (const char* ch : {"MTE2, VECTOR", "VECTOR, MTE3", "MTE3, MTE2", "VECTOR, MTE2"}) {
    size_t sets = 0, waits = 0;
    for (size_t at = 0; (at = text.find(absl::StrCat("set_flag ", ch), at)) != std::string::npos; ++at) ++sets;
    for (size_t at = 0; (at = text.find(absl::StrCat("wait_flag ", ch), at)) != std::string::npos; ++at) ++waits;
    EXPECT_EQ(sets, waits) << ch << "\n" << text;
  }
}

}  // namespace
}  // namespace kiln::target::npusim
