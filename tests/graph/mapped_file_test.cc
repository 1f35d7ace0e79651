// MappedFile: a regular file's bytes mapped, anything else read whole, and
// a clear error where neither can be had.
#include "graph/support/mapped_file.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace kiln {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("kiln_mapped_" + std::to_string(getpid()) + "_" + name)).string();
}

TEST(MappedFile, RegularFileBytesAndMoves) {
  const std::string path = TempPath("regular");
  std::string want(3 << 20, '\0');
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<char>(i * 131 % 251);
  std::ofstream(path, std::ios::binary).write(want.data(), static_cast<std::streamsize>(want.size()));
  auto m = MappedFile::Open(path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->mapped());  // not read into a copy
  EXPECT_EQ(m->bytes(), want);
  MappedFile moved = *std::move(m);  // the mapping moves with it
  EXPECT_TRUE(moved.mapped());
  EXPECT_EQ(moved.bytes(), want);
  std::filesystem::remove(path);
  EXPECT_EQ(moved.bytes(), want);  // a removed file's mapping stays readable
}

TEST(MappedFile, EmptyFilePipeAndErrors) {
  const std::string path = TempPath("empty");
  std::ofstream(path).close();
  auto empty = MappedFile::Open(path);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_FALSE(empty->mapped());  // nothing to map: read
  EXPECT_TRUE(empty->bytes().empty());
  std::filesystem::remove(path);

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], "through a pipe", 14), 14);
  close(fds[1]);
  auto piped = MappedFile::Open("/proc/self/fd/" + std::to_string(fds[0]));
  close(fds[0]);
  ASSERT_TRUE(piped.ok()) << piped.status();
  EXPECT_FALSE(piped->mapped());  // a pipe cannot be mapped: read to its end
  EXPECT_EQ(piped->bytes(), "through a pipe");

  auto missing = MappedFile::Open(TempPath("missing"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot open file"), std::string::npos);
  auto dir = MappedFile::Open(std::filesystem::temp_directory_path().string());
  ASSERT_FALSE(dir.ok());
}

}  // namespace
}  // namespace kiln
