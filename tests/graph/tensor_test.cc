//===- tensor_test.cc - graph/ir/tensor.h ---------------------------------===//
#include "graph/ir/tensor.h"

#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>

namespace kiln {
namespace {

// Bool tensors filled from raw bytes (device memory, a file) may hold any
// byte: each reads as true when non-zero, without loading it as a bool.
TEST(Tensor, BoolBytesReadAsNonZero) {
  Tensor t(DType::kBool, {4});
  const uint8_t bytes[4] = {0, 1, 90, 255};
  std::memcpy(t.raw(), bytes, 4);
  EXPECT_EQ(t.GetDouble(0), 0.0);
  EXPECT_EQ(t.GetDouble(1), 1.0);
  EXPECT_EQ(t.GetDouble(2), 1.0);
  EXPECT_EQ(t.GetInt(3), 1);
  EXPECT_EQ(t.GetInt(0), 0);
}

TEST(Tensor, LeadingRowsCopyAShard) {
  Tensor t(DType::kI32, {4, 3});
  for (int64_t i = 0; i < 12; ++i) t.data<int32_t>()[i] = static_cast<int32_t>(i);
  Tensor s = t.LeadingRows(1, 2);
  EXPECT_EQ(s.dims(), (Dims{2, 3}));
  EXPECT_EQ(s.GetInt(0), 3);
  EXPECT_EQ(s.GetInt(5), 8);
  EXPECT_FALSE(s.SharesStorageWith(t));
  EXPECT_EQ(t.LeadingRows(4, 0).numel(), 0);
}

}  // namespace
}  // namespace kiln
