// Dims, shapes and types: what each kind of dim answers, and that symbolic
// dims compare by name.
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "graph/ir/tensor.h"
#include "graph/ir/type.h"

namespace kiln {
namespace {

TEST(Dim, EachKindAnswersForItself) {
  Dim s(7), u, n = Dim::Symbol("batch");
  EXPECT_TRUE(s.is_static());
  EXPECT_FALSE(s.is_symbolic() || s.is_unknown());
  EXPECT_EQ(s.value(), 7);
  EXPECT_EQ(s.symbol(), "");
  EXPECT_EQ(s.ToString(), "7");

  EXPECT_TRUE(u.is_unknown());
  EXPECT_FALSE(u.is_static() || u.is_symbolic());
  EXPECT_EQ(u.value(), -1);
  EXPECT_EQ(u.ToString(), "?");

  EXPECT_TRUE(n.is_symbolic());
  EXPECT_FALSE(n.is_static() || n.is_unknown());
  EXPECT_EQ(n.value(), -1);
  EXPECT_EQ(n.symbol(), "batch");
  EXPECT_EQ(n.ToString(), "batch");

  EXPECT_EQ(Dim(0).value(), 0);  // a static extent of zero is static
  EXPECT_TRUE(Dim(0).is_static());
}

TEST(Dim, NegativeExtentsAndEmptyNamesAreUnknown) {
  EXPECT_TRUE(Dim(-1).is_unknown());
  EXPECT_TRUE(Dim(-5).is_unknown());
  EXPECT_EQ(Dim(-5).value(), -1);
  EXPECT_EQ(Dim(-5), Dim());
  EXPECT_TRUE(Dim::Symbol("").is_unknown());
}

TEST(Dim, SymbolsCompareByName) {
  EXPECT_EQ(Dim::Symbol("seq"), Dim::Symbol(std::string("se") + "q"));
  EXPECT_NE(Dim::Symbol("seq"), Dim::Symbol("batch"));
  EXPECT_NE(Dim::Symbol("seq"), Dim());
  EXPECT_NE(Dim::Symbol("seq"), Dim(3));
  // A name that looks like a number is still a name.
  EXPECT_TRUE(Dim::Symbol("3").is_symbolic());
  EXPECT_NE(Dim::Symbol("3"), Dim(3));
  EXPECT_EQ(Dim::Symbol("a b").symbol(), "a b");
}

TEST(Dim, IsOneWord) { EXPECT_EQ(sizeof(Dim), sizeof(int64_t)); }

TEST(Dim, SymbolsMadeOnManyThreadsAgree) {
  // Each thread names the same 64 symbols in its own order; every thread
  // must get the same dims for the same names.
  constexpr int kThreads = 4, kNames = 64;
  std::vector<DimVector> got(kThreads, DimVector(kNames));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &got] {
      for (int i = 0; i < kNames; ++i) {
        int k = (i * (2 * t + 1)) % kNames;
        got[t][k] = Dim::Symbol("threaded_" + std::to_string(k));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(got[t], got[0]);
  for (int i = 0; i < kNames; ++i) EXPECT_EQ(got[0][i].symbol(), "threaded_" + std::to_string(i));
}

TEST(Shape, SymbolicDimsKeepTheirNamesThroughCopies) {
  Shape s({Dim::Symbol("batch"), Dim(3), Dim()});
  Shape copy = s;
  EXPECT_EQ(copy, s);
  EXPECT_EQ(copy.ToString(), "[batch,3,?]");
  EXPECT_FALSE(copy.is_static());
  EXPECT_EQ(copy.NumElements(), -1);
  EXPECT_NE(Shape({Dim::Symbol("batch"), Dim(3), Dim()}), Shape({Dim::Symbol("seq"), Dim(3), Dim()}));
}

TEST(NumElements, OverflowAndNegativeDimsAreMinusOne) {
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({7, 0}), 0);
  EXPECT_EQ(NumElements({int64_t{1} << 32, int64_t{1} << 32}), -1);
  EXPECT_EQ(NumElements({int64_t{1} << 32, int64_t{1} << 32, 0}), -1);
  EXPECT_EQ(NumElements({-1, 4}), -1);
  EXPECT_EQ(Shape::Static({int64_t{1} << 40, int64_t{1} << 40}).NumElements(), -1);
}

}  // namespace
}  // namespace kiln
