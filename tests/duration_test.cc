#include "duration.h"

#include <gtest/gtest.h>

namespace ltd {
namespace {

TEST(Duration, AcceptsTheDocumentedSpellings) {
  EXPECT_EQ(ParseDuration("500ms"), Millis(500));
  EXPECT_EQ(ParseDuration("10s"), Millis(10'000));
  EXPECT_EQ(ParseDuration("5m"), Millis(300'000));
  EXPECT_EQ(ParseDuration("2h"), Millis(7'200'000));
  EXPECT_EQ(ParseDuration("30"), Millis(30'000));
  EXPECT_EQ(ParseDuration("1.5"), Millis(1'500));
  EXPECT_EQ(ParseDuration("0"), Millis(0));
}

TEST(Duration, RejectsTheRest) {
  for (const char* bad :
       {"", "s", "ms", "-1", "-5s", "10x", "1e999", "ten", "10 s", " 10s", "nan", "inf", "9999h"}) {
    EXPECT_FALSE(ParseDuration(bad)) << bad;
  }
}

TEST(Duration, FormatsShortest) {
  EXPECT_EQ(FormatDuration(Millis(1500)), "1500ms");
  EXPECT_EQ(FormatDuration(Millis(10'000)), "10s");
  EXPECT_EQ(FormatDuration(Millis(120'000)), "2m");
  EXPECT_EQ(FormatDuration(Millis(3'600'000)), "1h");
  EXPECT_EQ(FormatDuration(Millis(0)), "0s");
}

}  // namespace
}  // namespace ltd
