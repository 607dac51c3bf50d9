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

TEST(Duration, AcceptsSumsFromTheLargestUnitDown) {
  EXPECT_EQ(ParseDuration("1h30m"), Millis(5'400'000));
  EXPECT_EQ(ParseDuration("90s"), Millis(90'000));
  EXPECT_EQ(ParseDuration("2m30s"), Millis(150'000));
  EXPECT_EQ(ParseDuration("1d2h"), Millis((26 * 3600) * 1000LL));
  EXPECT_EQ(ParseDuration("1h0m5s250ms"), Millis(3'605'250));
  EXPECT_EQ(ParseDuration("1.5h"), Millis(5'400'000));
}

// Slurm's clock forms (sbatch --time).
TEST(Duration, AcceptsSlurmsClockForms) {
  EXPECT_EQ(ParseDuration("05:30"), Millis(330'000));                          // MM:SS
  EXPECT_EQ(ParseDuration("90:00"), Millis(5'400'000));                        // MM:SS, MM past 59
  EXPECT_EQ(ParseDuration("01:30:00"), Millis(5'400'000));                     // HH:MM:SS
  EXPECT_EQ(ParseDuration("2-12"), Millis((2 * 86400 + 12 * 3600) * 1000LL));  // D-HH
  EXPECT_EQ(ParseDuration("1-02:30"), Millis((86400 + 2 * 3600 + 30 * 60) * 1000LL));  // D-HH:MM
  EXPECT_EQ(ParseDuration("1-02:30:15"),
            Millis((86400 + 2 * 3600 + 30 * 60 + 15) * 1000LL));  // D-HH:MM:SS
  EXPECT_EQ(ParseDuration("0:00"), Millis(0));
}

// A plain number counts what the caller says: seconds, or minutes for --time.
TEST(Duration, PlainNumbersInTheCallersUnit) {
  EXPECT_EQ(ParseDuration("90"), Millis(90'000));
  EXPECT_EQ(ParseTimeLimit("90"), Millis(5'400'000));
  EXPECT_EQ(ParseTimeLimit("90s"), Millis(90'000));
  EXPECT_EQ(ParseTimeLimit("01:30"), Millis(90'000));
  EXPECT_EQ(ParseTimeLimit("1-00"), Millis(86'400'000));
}

TEST(Duration, RejectsTheRest) {
  for (const char* bad : {"",       "s",     "ms",     "-1",     "-5s",     "10x",   "1e999",
                          "ten",    "10 s",  " 10s",   "nan",    "inf",     "9999h", "30m1h",
                          "1h1h",   "1h30",  "1ms5s",  "h1",     "1:2:3:4", "1:60",  "1:00:60",
                          "1-24",   "-1:00", "1-",     "1--2",   ":30",     "1:",    "1-2:3:4:5",
                          "1.5:00", "1-1h",  "400-00", "1.2.3s", "5y"}) {
    EXPECT_FALSE(ParseDuration(bad)) << bad;
    EXPECT_FALSE(ParseTimeLimit(bad)) << bad;
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

// Found by fuzz/byte_size: ten times a number below 2^62 wrapped past
// 2^64 before the bound was checked, so a size of 20 digits read as a few
// bytes ("--job-max-log-bytes 36893488147419103240" was 8 bytes).
TEST(ByteSize, RefusesWhatWouldWrapAround) {
  EXPECT_FALSE(ParseByteSize("36893488147419103240"));
  EXPECT_FALSE(ParseByteSize("36893488147419103240K"));
  EXPECT_FALSE(ParseByteSize("18446744073709551617"));
  EXPECT_EQ(ParseByteSize("4611686018427387904"), 1ull << 62);
  EXPECT_FALSE(ParseByteSize("4611686018427387905"));
}

}  // namespace
}  // namespace ltd
