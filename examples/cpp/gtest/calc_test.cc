#include <gtest/gtest.h>
#include "calc.h"
TEST(Parse, SkipsWords) { EXPECT_EQ(parse("1,x,3"), (std::vector<long>{1, 3})); }
TEST(Stats, MeanOfTwo) { EXPECT_EQ(mean(parse("2,4")), 3); }
class Totals : public ::testing::TestWithParam<int> {};
TEST_P(Totals, CountsUp) { std::vector<long> v(GetParam(), 1); EXPECT_EQ(total(v), GetParam()); }
INSTANTIATE_TEST_SUITE_P(Small, Totals, ::testing::Values(1, 3));
TEST(Stats, DISABLED_Slow) {}
TEST(Stats, Skipped) { GTEST_SKIP() << "not today"; }
