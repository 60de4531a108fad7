// memarea-bench prints three significant figures, also where rounding carries into the next
// decade (a CI run printed "1.000 µs" for 0.9996 µs).
#include "bench/src/figures.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace {
using memarea::cli::three_significant;

TEST(BenchFigures, ThreeSignificantFiguresInEveryDecade) {
  EXPECT_EQ(three_significant(0.00123456), "0.00123");
  EXPECT_EQ(three_significant(0.985), "0.985");
  EXPECT_EQ(three_significant(1.0), "1.00");
  EXPECT_EQ(three_significant(13.44), "13.4");
  EXPECT_EQ(three_significant(999.0), "999");
  EXPECT_EQ(three_significant(1234.0), "1234");
  EXPECT_EQ(three_significant(-2.5), "-2.50");
}

TEST(BenchFigures, RoundingIntoTheNextDecadeKeepsThreeFigures) {
  EXPECT_EQ(three_significant(0.9996), "1.00");
  EXPECT_EQ(three_significant(0.09996), "0.100");
  EXPECT_EQ(three_significant(9.996), "10.0");
  EXPECT_EQ(three_significant(99.96), "100");
  EXPECT_EQ(three_significant(999.6), "1000");
  EXPECT_EQ(three_significant(-9.996), "-10.0");
  // Just under the carry stays in its decade.
  EXPECT_EQ(three_significant(0.9994), "0.999");
  EXPECT_EQ(three_significant(99.94), "99.9");
}

TEST(BenchFigures, ZeroAndNonFiniteValuesPrintAsTheyAre) {
  EXPECT_EQ(three_significant(0.0), "0");
  EXPECT_EQ(three_significant(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(three_significant(std::numeric_limits<double>::quiet_NaN()), "nan");
}
}  // namespace
