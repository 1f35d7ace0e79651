//===- artifact_io_test.cc - The .kiln file: magic, message, checksum -----===//
#include "target/artifact/artifact_io.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace kiln::artifact {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/artifact_io_test_" + name;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

Artifact Sample() {
  Artifact a;
  a.set_format_version(kArtifactFormatVersion);
  a.set_target("npusim");
  a.set_graph_kir("graph @main(%x: f32[2]) {\n  %y = Relu(%x) : f32[2]\n  return %y\n}\n");
  a.set_constants(std::string(4096, '\x5a'));
  return a;
}

uint64_t Le64(const std::string& b, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

// The message, the constants in a section of their own (64-byte aligned,
// after zero padding), the two sizes, and the CRC-32 of every byte after the
// magic, little-endian: the layout the proto file documents.
TEST(ArtifactIo, WritesMagicMessageConstantsAndChecksum) {
  std::string path = TempPath("layout.kiln");
  ASSERT_TRUE(WriteArtifact(Sample(), path).ok());
  std::string bytes = ReadBytes(path);
  ASSERT_GT(bytes.size(), 4096u + 28);
  EXPECT_EQ(bytes.substr(0, 8), "KILNART\n");
  const uint64_t n = Le64(bytes, bytes.size() - 20), c = Le64(bytes, bytes.size() - 12);
  EXPECT_EQ(c, 4096u);
  const size_t start = (8 + n + 63) / 64 * 64;
  EXPECT_EQ(start + c + 20, bytes.size());
  EXPECT_EQ(bytes.substr(8 + n, start - 8 - n), std::string(start - 8 - n, '\0'));
  EXPECT_EQ(bytes.substr(start, c), Sample().constants());
  Artifact parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes.substr(8, n)));
  EXPECT_EQ(parsed.target(), "npusim");
  EXPECT_TRUE(parsed.constants().empty());
  auto read = ReadArtifact(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->graph_kir(), Sample().graph_kir());
  EXPECT_EQ(read->constants(), Sample().constants());
  // Deterministic: a second write gives the same bytes.
  ASSERT_TRUE(WriteArtifact(*read, path).ok());
  EXPECT_EQ(ReadBytes(path), bytes);
  std::remove(path.c_str());
}

// Read as a file, the constants stay where they lie in its mapping: the
// section is a view of the file's bytes, aligned as the layout says, and
// the message holds none.
TEST(ArtifactIo, TheConstantsAreReadWhereTheyLie) {
  std::string path = TempPath("mapped.kiln");
  ASSERT_TRUE(WriteArtifact(Sample(), path).ok());
  auto f = ReadArtifactFile(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->message.constants().empty());
  EXPECT_EQ(f->constants(), Sample().constants());
  const absl::string_view file = f->file->bytes();
  EXPECT_GE(f->section.data(), file.data());
  EXPECT_LE(f->section.data() + f->section.size(), file.data() + file.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f->section.data()) % 64, 0u);
  std::remove(path.c_str());
}

// Writing an artifact over one that a run has mapped replaces the file:
// the run keeps reading the constants it mapped.
TEST(ArtifactIo, AMappedArtifactSurvivesItsReplacement) {
  std::string path = TempPath("replaced.kiln");
  ASSERT_TRUE(WriteArtifact(Sample(), path).ok());
  auto f = ReadArtifactFile(path);
  ASSERT_TRUE(f.ok()) << f.status();
  Artifact other = Sample();
  other.set_constants(std::string(64, '\x11'));
  ASSERT_TRUE(WriteArtifact(other, path).ok());
  EXPECT_EQ(f->constants(), Sample().constants());
  auto read = ReadArtifact(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->constants(), other.constants());
  std::remove(path.c_str());
}

// An artifact without constants is the message and its checksum alone.
TEST(ArtifactIo, WithoutConstantsTheFileIsTheMessageAndItsChecksum) {
  std::string path = TempPath("plain.kiln");
  Artifact a = Sample();
  a.clear_constants();
  ASSERT_TRUE(WriteArtifact(a, path).ok());
  std::string bytes = ReadBytes(path);
  Artifact parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes.substr(8, bytes.size() - 12)));
  EXPECT_EQ(parsed.graph_kir(), a.graph_kir());
  auto f = ReadArtifactFile(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->section.empty());
  std::remove(path.c_str());
}

// Every single-bit flip past the magic is caught: by the checksum, or (in
// the checksum itself) because it no longer matches the message.
TEST(ArtifactIo, EveryFlippedBitIsRefused) {
  std::string path = TempPath("flip.kiln");
  ASSERT_TRUE(WriteArtifact(Sample(), path).ok());
  const std::string good = ReadBytes(path);
  std::string bad_path = TempPath("flip_bad.kiln");
  for (size_t at = 8; at < good.size(); at += 37) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ (1 << (at % 8)));
    WriteBytes(bad_path, bad);
    auto read = ReadArtifact(bad_path);
    ASSERT_FALSE(read.ok()) << "byte " << at;
    EXPECT_TRUE(absl::StrContains(read.status().message(), "truncated or corrupted")) << read.status();
  }
  std::remove(path.c_str());
  std::remove(bad_path.c_str());
}

TEST(ArtifactIo, TruncationsAndForeignFilesAreRefused) {
  std::string path = TempPath("cut.kiln");
  ASSERT_TRUE(WriteArtifact(Sample(), path).ok());
  const std::string good = ReadBytes(path);
  std::string bad_path = TempPath("cut_bad.kiln");
  for (size_t keep : {size_t{0}, size_t{5}, size_t{8}, size_t{11}, size_t{12}, good.size() / 2, good.size() - 4,
                      good.size() - 1}) {
    WriteBytes(bad_path, good.substr(0, keep));
    auto read = ReadArtifact(bad_path);
    ASSERT_FALSE(read.ok()) << keep << " bytes";
    EXPECT_TRUE(absl::StrContains(read.status().message(), keep < 8 ? "bad magic" : "truncated or corrupted"))
        << read.status();
  }
  WriteBytes(bad_path, "graph @main() {\n}\n");
  EXPECT_TRUE(absl::StrContains(ReadArtifact(bad_path).status().message(), "not a kiln artifact"));
  EXPECT_TRUE(absl::StrContains(ReadArtifact(TempPath("missing.kiln")).status().message(), "cannot open"));
  std::remove(path.c_str());
  std::remove(bad_path.c_str());
}

// A file written before the checksum (magic and message only) names its
// format version; one from a later kiln does too.
TEST(ArtifactIo, OtherVersionsAreNamed) {
  std::string path = TempPath("old.kiln");
  Artifact old = Sample();
  old.set_format_version(2);
  WriteBytes(path, "KILNART\n" + old.SerializeAsString());
  auto read = ReadArtifact(path);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(absl::StrContains(read.status().message(),
                                absl::StrCat("artifact format version 2; this kiln reads version ", kArtifactFormatVersion)))
      << read.status();
  Artifact next = Sample();
  next.set_format_version(kArtifactFormatVersion + 1);
  ASSERT_TRUE(WriteArtifact(next, path).ok());
  read = ReadArtifact(path);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(absl::StrContains(read.status().message(), "(recompile the model)")) << read.status();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kiln::artifact
