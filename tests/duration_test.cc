#include "duration.h"

#include <gtest/gtest.h>

#include "byte_size.h"

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

TEST(ByteSize, AcceptsWhatAdminsType) {
  EXPECT_EQ(ParseByteSize("1000"), 1000u);
  EXPECT_EQ(ParseByteSize("64K"), 64u << 10);
  EXPECT_EQ(ParseByteSize("1M"), 1u << 20);
  EXPECT_EQ(ParseByteSize("512MiB"), 512ull << 20);
  EXPECT_EQ(ParseByteSize("2G"), 2ull << 30);
  EXPECT_EQ(ParseByteSize("1TB"), 1ull << 40);
  for (const char* bad : {"", "M", "-1M", "1X", "1.5G", " 1G", "99999999999999999999", "9999999T"})
    EXPECT_FALSE(ParseByteSize(bad)) << bad;
}

}  // namespace
}  // namespace ltd
