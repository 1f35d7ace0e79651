//===- npusim_hostile_artifact_test.cc - Artifacts that declare hostile sizes ===//
//
// A .kiln file may say anything, with a valid checksum: every size it
// declares is checked against what it holds and against 64 bits before
// anything is allocated or run, so a crafted artifact is a one-line error,
// never an abort on bad_alloc or a write outside the simulated memory.
//
//===----------------------------------------------------------------------===//
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "sim/isa/encode.h"
#include "target/artifact/artifact_io.h"
#include "tests/target/npusim_test_util.h"

namespace kiln::npusim_test {
namespace {

// The MLP's artifact changed by `mutate`, written and loaded (and run once
// when it loads).
absl::Status LoadMutated(const std::string& name, const std::function<void(artifact::Artifact&)>& mutate) {
  absl::StatusOr<artifact::Artifact> a = Compile(Mlp());
  if (!a.ok()) return a.status();
  mutate(*a);
  const std::string path = ::testing::TempDir() + "/hostile_" + name + ".kiln";
  KILN_RETURN_IF_ERROR(artifact::WriteArtifact(*a, path));
  absl::StatusOr<std::unique_ptr<runtime::LoadedModel>> loaded = target::LoadNpusimArtifact(path);
  if (!loaded.ok()) return loaded.status();
  return (*loaded)->Run({Random({8, 32}, 3)}).status();
}

// Changes the first instruction of `op` in the artifact's programs by `f`
// (the program decoded, changed and encoded again); false when there is none.
bool ChangeFirst(artifact::Artifact& a, sim::Op op, const std::function<void(sim::Inst&)>& f) {
  for (sim::isa::Program& p : *a.mutable_npusim()->mutable_programs()) {
    absl::StatusOr<sim::Program> prog = sim::FromProto(p);
    if (!prog.ok()) continue;
    for (sim::Inst& in : prog->insts)
      if (in.op == op) {
        f(in);
        p = sim::ToProto(*prog);
        return true;
      }
  }
  return false;
}

TEST(NpusimHostileArtifact, TheUnchangedArtifactRuns) { EXPECT_TRUE(LoadMutated("same", [](auto&) {}).ok()); }

TEST(NpusimHostileArtifact, ConstantsBeyondWhatItHoldsAreRefused) {
  absl::Status s = LoadMutated("constants", [](artifact::Artifact& a) {
    a.mutable_npusim()->set_constant_bytes(int64_t{31} << 30);
  });
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("its constants hold"));
}

TEST(NpusimHostileArtifact, DeviceMemoryBeyondTheMachineIsRefused) {
  absl::Status s = LoadMutated("device", [](artifact::Artifact& a) {
    a.mutable_npusim()->set_device_bytes(INT64_MAX - 1000);
  });
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
}

TEST(NpusimHostileArtifact, ABufferWhoseEndWrapsIsRefused) {
  absl::Status s = LoadMutated("offset", [](artifact::Artifact& a) {
    for (artifact::Buffer& b : *a.mutable_npusim()->mutable_buffers())
      if (b.kind() == artifact::Buffer::INTERMEDIATE && !b.has_alias_of()) {
        b.set_offset(INT64_MAX - 16);
        break;
      }
  });
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("lies outside its region"));
}

TEST(NpusimHostileArtifact, AnArgumentWhoseBytesOverflowIsRefused) {
  absl::Status s = LoadMutated("arg", [](artifact::Artifact& a) {
    sim::isa::Arg* arg = a.mutable_npusim()->mutable_programs(0)->mutable_args(0);
    arg->clear_shape();
    for (int64_t d : {int64_t{1} << 40, int64_t{1} << 40, int64_t{1} << 40, int64_t{16}}) arg->add_shape(d);
  });
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("bytes"));
  EXPECT_FALSE(s.ok());
}

TEST(NpusimHostileArtifact, AnAttributeWiderThanItsFieldIsRefused) {
  absl::Status s = LoadMutated("attr", [](artifact::Artifact& a) {
    ASSERT_TRUE(ChangeFirst(a, sim::Op::kMmad, [](sim::Inst& in) { in.attrs[0] = int64_t{1} << 40; }));
  });
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("more than a 32-bit field holds"));
}

// An L2 prefetch must read a part of a constant, for a task after its
// start, in the order of the others.
TEST(NpusimHostileArtifact, AnL2PrefetchOutsideItsConstantIsRefused) {
  auto constant = [](const artifact::Artifact& a) {
    for (int i = 0; i < a.npusim().buffers_size(); ++i)
      if (a.npusim().buffers(i).kind() == artifact::Buffer::CONSTANT && !a.npusim().buffers(i).has_alias_of()) return i;
    return -1;
  };
  auto with = [&](const std::string& name, const std::function<void(artifact::Artifact&, artifact::L2Prefetch&)>& f) {
    return LoadMutated(name, [&](artifact::Artifact& a) {
      artifact::L2Prefetch* p = a.mutable_npusim()->add_prefetches();
      p->set_buffer(constant(a));
      p->set_bytes(a.npusim().buffers(p->buffer()).bytes());
      p->set_start(0);
      p->set_task(a.npusim().tasks_size() - 1);
      f(a, *p);
    });
  };
  EXPECT_TRUE(with("prefetch_ok", [](auto&, auto&) {}).ok());
  for (const auto& [name, f] :
       std::vector<std::pair<std::string, std::function<void(artifact::Artifact&, artifact::L2Prefetch&)>>>{
           {"bytes", [](auto& a, auto& p) { p.set_bytes(a.npusim().buffers(p.buffer()).bytes() + 1); }},
           {"negative", [](auto&, auto& p) { p.set_bytes(-1); }},
           {"buffer", [](auto& a, auto& p) { p.set_buffer(a.npusim().buffers_size()); }},
           {"input", [](auto& a, auto& p) { p.set_buffer(a.npusim().input_buffers(0)); p.set_bytes(0); }},
           {"task", [](auto& a, auto& p) { p.set_task(a.npusim().tasks_size()); }},
           {"before", [](auto& a, auto& p) { p.set_start(a.npusim().tasks_size() - 1); p.set_task(0); }}}) {
    absl::Status s = with("prefetch_" + name, f);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << name << ": " << s;
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("L2 prefetch 0")) << name;
  }
}

}  // namespace
}  // namespace kiln::npusim_test
