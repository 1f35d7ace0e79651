//===- npy_test.cc - .npy reading and writing -----------------------------===//
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "graph/io/npy.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// Files written by NumPy 1.24 (/usr/bin/python3), as bytes; the script that
// made them is the comment above each.
// np.save of F32_2x3, dtype '<f4', shape (2, 3)
const std::string kF32_2x3(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x66\x34"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x32\x2c\x20\x33\x29\x2c\x20\x7d\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x00\x80\xbf\x00\x00\x00\xbf\x00\x00\x00\x00\x00\x00\x00\x3f"
    "\x00\x00\x80\x3f\x00\x00\xc0\x3f"
    , 152);
// np.save of I64Scalar, dtype '<i8', shape ()
const std::string kI64Scalar(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x69\x38"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x29\x2c\x20\x7d\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\xf9\xff\xff\xff\xff\xff\xff\xff"
    , 136);
// np.save of BeI32, dtype '>i4', shape (3,)
const std::string kBeI32(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3e\x69\x34"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x33\x2c\x29\x2c\x20\x7d\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x00\x00\x01\xff\xff\xff\xfe\x00\x04\x93\xe0"
    , 140);
// np.save of Bool, dtype '|b1', shape (3,)
const std::string kBool(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x7c\x62\x31"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x33\x2c\x29\x2c\x20\x7d\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x01\x00\x01"
    , 131);
// np.save of F16, dtype '<f2', shape (4,)
const std::string kF16(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x66\x32"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x34\x2c\x29\x2c\x20\x7d\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x3e\x00\x80\xff\x7b\x00\x7c"
    , 136);
// np.save of U8V2, dtype '|u1', shape (2, 2), format version 2.0
const std::string kU8V2(
    "\x93\x4e\x55\x4d\x50\x59\x02\x00\x74\x00\x00\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x7c"
    "\x75\x31\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61"
    "\x6c\x73\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x32\x2c\x20\x32\x29\x2c\x20\x7d\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x01\x02\x03"
    , 132);
// np.save of U16V3, dtype '<u2', shape (2,), format version 3.0
const std::string kU16V3(
    "\x93\x4e\x55\x4d\x50\x59\x03\x00\x74\x00\x00\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c"
    "\x75\x32\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61"
    "\x6c\x73\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x32\x2c\x29\x2c\x20\x7d\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x00\xff\xff"
    , 132);
// np.save of Empty, dtype '<f8', shape (0, 3)
const std::string kEmpty(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x66\x38"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x30\x2c\x20\x33\x29\x2c\x20\x7d\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a"
    , 128);
// np.save of Fortran, dtype '<f4', shape (2, 3)
const std::string kFortran(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x66\x34"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x54\x72\x75\x65"
    "\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x32\x2c\x20\x33\x29\x2c\x20\x7d\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x00\x00\x00\x00\x00\x40\x40\x00\x00\x80\x3f\x00\x00\x80\x40"
    "\x00\x00\x00\x40\x00\x00\xa0\x40"
    , 152);
// np.save of Bf16Struct, dtype [('bf16', '<u2')], shape (2,)
const std::string kBf16Struct(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x5b\x28\x27\x62"
    "\x66\x31\x36\x27\x2c\x20\x27\x3c\x75\x32\x27\x29\x5d\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f"
    "\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20"
    "\x28\x32\x2c\x29\x2c\x20\x7d\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x80\x3f\x00\xc0"
    , 132);
// np.save of Unicode, dtype '<U2', shape (2,)
const std::string kUnicode(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x55\x32"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x32\x2c\x29\x2c\x20\x7d\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x61\x00\x00\x00\x62\x00\x00\x00\x63\x00\x00\x00\x00\x00\x00\x00"
    , 144);
// np.save of C64, dtype '<c8', shape (2,)
const std::string kC64(
    "\x93\x4e\x55\x4d\x50\x59\x01\x00\x76\x00\x7b\x27\x64\x65\x73\x63\x72\x27\x3a\x20\x27\x3c\x63\x38"
    "\x27\x2c\x20\x27\x66\x6f\x72\x74\x72\x61\x6e\x5f\x6f\x72\x64\x65\x72\x27\x3a\x20\x46\x61\x6c\x73"
    "\x65\x2c\x20\x27\x73\x68\x61\x70\x65\x27\x3a\x20\x28\x32\x2c\x29\x2c\x20\x7d\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20"
    "\x20\x20\x20\x20\x20\x20\x20\x0a\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x00\x80\x00\x00\x60\xc0"
    , 144);

Tensor MustParse(const std::string& bytes) {
  auto t = ParseNpy(bytes);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

TEST(NpyTest, ReadsNumpyFloat32) {
  Tensor t = MustParse(kF32_2x3);
  ASSERT_EQ(t.dtype(), DType::kF32);
  EXPECT_EQ(t.dims(), (Dims{2, 3}));
  std::vector<float> expected = {-1, -0.5, 0, 0.5, 1, 1.5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t.data<float>()[i], expected[i]);
}

TEST(NpyTest, ReadsNumpyScalar) {
  Tensor t = MustParse(kI64Scalar);
  ASSERT_EQ(t.dtype(), DType::kI64);
  EXPECT_EQ(t.rank(), 0);
  EXPECT_EQ(t.data<int64_t>()[0], -7);
}

TEST(NpyTest, ReadsBigEndian) {
  Tensor t = MustParse(kBeI32);
  ASSERT_EQ(t.dtype(), DType::kI32);
  EXPECT_EQ(t.dims(), (Dims{3}));
  EXPECT_EQ(t.data<int32_t>()[0], 1);
  EXPECT_EQ(t.data<int32_t>()[1], -2);
  EXPECT_EQ(t.data<int32_t>()[2], 300000);
}

TEST(NpyTest, ReadsBoolHalfAndComplex) {
  Tensor b = MustParse(kBool);
  ASSERT_EQ(b.dtype(), DType::kBool);
  EXPECT_TRUE(b.data<bool>()[0]);
  EXPECT_FALSE(b.data<bool>()[1]);
  EXPECT_TRUE(b.data<bool>()[2]);

  Tensor h = MustParse(kF16);
  ASSERT_EQ(h.dtype(), DType::kF16);
  EXPECT_EQ(static_cast<float>(h.data<Half>()[0]), 1.5f);
  EXPECT_EQ(h.data<Half>()[1].bits, 0x8000);
  EXPECT_EQ(static_cast<float>(h.data<Half>()[2]), 65504.0f);
  EXPECT_EQ(h.data<Half>()[3].bits, 0x7c00);

  Tensor c = MustParse(kC64);
  ASSERT_EQ(c.dtype(), DType::kC64);
  EXPECT_EQ(c.data<float>()[0], 1.0f);
  EXPECT_EQ(c.data<float>()[1], 2.0f);
  EXPECT_EQ(c.data<float>()[3], -3.5f);
}

TEST(NpyTest, ReadsFormatVersions2And3) {
  Tensor a = MustParse(kU8V2);
  ASSERT_EQ(a.dtype(), DType::kU8);
  EXPECT_EQ(a.dims(), (Dims{2, 2}));
  EXPECT_EQ(a.data<uint8_t>()[3], 3);
  Tensor b = MustParse(kU16V3);
  ASSERT_EQ(b.dtype(), DType::kU16);
  EXPECT_EQ(b.data<uint16_t>()[1], 65535);
}

TEST(NpyTest, ReadsEmptyArray) {
  Tensor t = MustParse(kEmpty);
  EXPECT_EQ(t.dtype(), DType::kF64);
  EXPECT_EQ(t.dims(), (Dims{0, 3}));
  EXPECT_EQ(t.numel(), 0);
}

TEST(NpyTest, ReadsBf16Convention) {
  Tensor t = MustParse(kBf16Struct);
  ASSERT_EQ(t.dtype(), DType::kBF16);
  EXPECT_EQ(static_cast<float>(t.data<BFloat16>()[0]), 1.0f);
  EXPECT_EQ(static_cast<float>(t.data<BFloat16>()[1]), -2.0f);
}

TEST(NpyTest, RejectsFortranOrderAndStrings) {
  auto f = ParseNpy(kFortran);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("Fortran-order"), absl::string_view::npos) << f.status();
  auto u = ParseNpy(kUnicode);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("unsupported .npy dtype '<U2'"), absl::string_view::npos) << u.status();
}

// Fills a tensor of any numeric dtype with varied bytes.
Tensor Filled(DType dt, Dims dims, uint32_t seed) {
  Tensor t(dt, std::move(dims));
  std::mt19937 rng(seed);
  unsigned char* p = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<unsigned char>(rng());
  if (dt == DType::kBool)
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] &= 1;
  return t;
}

// A version 1.0 .npy of `descr` and `shape` (the header's text) followed by `data`.
std::string Npy(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict + data;
}

// Shapes whose sizes overflow are refused, zero dimensions or not, before
// anything is allocated; so are negative dimensions.
TEST(NpyTest, RejectsShapesWhoseSizesOverflow) {
  EXPECT_TRUE(ParseNpy(Npy("<f4", "(2,)", std::string(8, '\0'))).ok());
  for (const char* shape : {"(4294967296, 4294967296, 0)", "(0, 4294967296, 4294967296)",
                            "(4611686018427387904, 4)", "(9223372036854775807,)"}) {
    auto t = ParseNpy(Npy("<f4", shape, ""));
    ASSERT_FALSE(t.ok()) << shape;
    EXPECT_NE(t.status().message().find("is too large"), absl::string_view::npos) << t.status();
  }
  EXPECT_FALSE(ParseNpy(Npy("<f4", "(-5, 0)", "")).ok());
}

TEST(NpyTest, RoundTripsEveryDtype) {
  const DType kTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8,
                          DType::kI16, DType::kI32, DType::kI64, DType::kU8,  DType::kU16,
                          DType::kU32, DType::kU64, DType::kBool, DType::kC64, DType::kC128};
  const Dims kShapes[] = {{}, {7}, {2, 3}, {2, 0, 4}, {1, 2, 3, 4, 5}};
  uint32_t seed = 1;
  for (DType dt : kTypes) {
    for (const Dims& dims : kShapes) {
      Tensor t = Filled(dt, dims, seed++);
      auto bytes = SerializeNpy(t);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      // Data starts 64-byte aligned, as NumPy writes it.
      size_t header_len = static_cast<unsigned char>((*bytes)[8]) | static_cast<unsigned char>((*bytes)[9]) << 8;
      EXPECT_EQ((10 + header_len) % 64, 0u);
      auto back = ParseNpy(*bytes);
      ASSERT_TRUE(back.ok()) << DTypeName(dt) << ": " << back.status();
      EXPECT_TRUE(back->Equals(t)) << DTypeName(dt);
    }
  }
}

TEST(NpyTest, WritesTheBf16Descr) {
  auto bytes = SerializeNpy(Filled(DType::kBF16, {2}, 3));
  ASSERT_TRUE(bytes.ok());
  EXPECT_NE(bytes->find("'descr': [('bf16', '<u2')]"), std::string::npos);
}

TEST(NpyTest, FileRoundTrip) {
  std::string path = (std::filesystem::temp_directory_path() / "kiln_npy_test.npy").string();
  Tensor t = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  ASSERT_TRUE(WriteNpy(path, t).ok());
  auto back = ReadNpy(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->Equals(t));
  std::remove(path.c_str());
  auto missing = ReadNpy(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("kiln_npy_test.npy: cannot open file"), absl::string_view::npos);
}

TEST(NpyTest, RejectsUnwritableTensors) {
  EXPECT_FALSE(SerializeNpy(Tensor()).ok());
  auto s = SerializeNpy(Tensor(DType::kString, {2}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("str tensors cannot be written"), absl::string_view::npos);
}

// A version 1.0 file with the given header dict text and data bytes.
std::string MakeNpy(const std::string& dict, const std::string& data) {
  std::string header = dict + "\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

void ExpectError(const std::string& bytes, absl::string_view message) {
  auto t = ParseNpy(bytes);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(message), absl::string_view::npos)
      << "got: " << t.status().message() << "\nexpected: " << message;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos);
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

TEST(NpyTest, MalformedFilesGetClearErrors) {
  ExpectError("", "missing the \\x93NUMPY magic");
  ExpectError("GIF89a....", "missing the \\x93NUMPY magic");
  std::string v9 = kF32_2x3;
  v9[6] = 9;
  ExpectError(v9, "unsupported .npy format version 9.0");
  ExpectError(kF32_2x3.substr(0, 100), "truncated header");
  ExpectError(kF32_2x3.substr(0, kF32_2x3.size() - 4), "the data has 20 bytes, shape (2, 3) of f32 needs 24");
  ExpectError(kF32_2x3 + "xx", "the data has 26 bytes");
  ExpectError(Replace(kF32_2x3, "(2, 3)", "(2, 9)"), "the data has 24 bytes, shape (2, 9) of f32 needs 72");
  ExpectError(Replace(kF32_2x3, "(2, 3)", "(2,-3)"), "header");
  ExpectError(Replace(kF32_2x3, "'shape'", "'shapf'"), "unexpected header key 'shapf'");
  ExpectError(Replace(kF32_2x3, "'<f4'", "'<f3'"), "unsupported .npy dtype '<f3'");
  ExpectError(Replace(kF32_2x3, "'<f4'", "'|O8'"), "unsupported .npy dtype '|O8'");
  ExpectError(Replace(kF32_2x3, "False", "Maybe"), "header");
  // A shape whose element count overflows.
  ExpectError(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999, 99999999999, 9), }",
                      std::string(64, 'x')),
              "shape (99999999999999999, 99999999999, 9) is too large");
  ExpectError(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (999999999999999999999999,), }", ""),
              "header");
  ExpectError(MakeNpy("{'descr': '<f4', 'fortran_order': False}", ""), "lacks 'descr', 'fortran_order' or 'shape'");
  ExpectError(MakeNpy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}", "abcd"),
              "duplicate header key 'descr'");
  ExpectError(MakeNpy("{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': ()}", "abcd"),
              "structured arrays are not supported");
  ExpectError(MakeNpy("[1, 2]", ""), "header is not a Python dict");
  ExpectError(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk", "abcd"),
              "unexpected characters after the header dict");
  // Accepted variations: double quotes, no trailing comma, Python 2 longs.
  auto ok = ParseNpy(MakeNpy("{\"descr\": \"<i2\", \"fortran_order\": False, \"shape\": (2L,)}", std::string("\x01\x00\xff\xff", 4)));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->data<int16_t>()[1], -1);
}

TEST(NpyTest, NeverCrashesOnDamagedFiles) {
  // Every prefix, and random byte damage: errors or tensors, never a crash.
  for (size_t n = 0; n < kF32_2x3.size(); ++n) EXPECT_FALSE(ParseNpy(kF32_2x3.substr(0, n)).ok());
  std::mt19937 rng(7);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string b = iter % 2 ? kBf16Struct : kF32_2x3;
    int flips = 1 + rng() % 4;
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    (void)ParseNpy(b);
  }
}

// A read array borrows the file's data where it lies (numpy's data starts
// 64-byte aligned); without an owner it is a copy. Writing the same path
// again replaces the file rather than rewriting it under the mapping: the
// borrowed tensor keeps the old values.
TEST(NpyTest, ReadArraysBorrowTheFileAndSurviveItsReplacement) {
  const Tensor a = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  auto bytes = SerializeNpy(a);
  ASSERT_TRUE(bytes.ok());
  auto owner = std::make_shared<Tensor>(DType::kU8, Dims{static_cast<int64_t>(bytes->size())});
  std::memcpy(owner->raw(), bytes->data(), bytes->size());
  const char* base = static_cast<const char*>(owner->raw());
  auto borrowed = ParseNpy(absl::string_view(base, bytes->size()), owner);
  ASSERT_TRUE(borrowed.ok()) << borrowed.status();
  const char* at = static_cast<const char*>(borrowed->raw());
  EXPECT_TRUE(at > base && at < base + bytes->size());
  EXPECT_TRUE(borrowed->Equals(a));
  auto copied = ParseNpy(absl::string_view(base, bytes->size()));
  ASSERT_TRUE(copied.ok());
  at = static_cast<const char*>(copied->raw());
  EXPECT_FALSE(at >= base && at < base + bytes->size());

  const std::string path = (std::filesystem::temp_directory_path() / "kiln_npy_borrow_test.npy").string();
  ASSERT_TRUE(WriteNpy(path, a).ok());
  auto read = ReadNpy(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(WriteNpy(path, Tensor::FromVector<float>({9}, {1})).ok());
  EXPECT_TRUE(read->Equals(a));  // the old file's bytes, still mapped
  auto again = ReadNpy(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->numel(), 1);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kiln
