// The flag values ltd, ltctl and ltrun share: what each accepts, and the
// one line each says for what it refuses.
#include "flag_values.h"

#include <gtest/gtest.h>

#include "bytes.h"

namespace ltd {
namespace {

TEST(FlagValues, DurationsAsDurationHasThem) {
  EXPECT_EQ(*DurationFlag("--grace", "500ms"), Millis(500));
  EXPECT_EQ(*DurationFlag("--grace", "1.5"), Millis(1500));
  EXPECT_EQ(*DurationFlag("--grace", "1m30s"), Millis(90'000));
  EXPECT_EQ(*DurationFlag("--grace", "01:30"), Millis(90'000));
  for (const char* bad : {"", "5x", "-1s", "1y", "30m1h"}) {
    auto d = DurationFlag("--grace", bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().message(), std::string("--grace '") + bad +
                                        "' is not a duration; use e.g. 500ms, 10s, 1h30m, "
                                        "01:30:00 or plain seconds");
  }
}

// sbatch's --time: a plain number is minutes; every other spelling is a
// duration's.
TEST(FlagValues, TimeLimitsAsSbatchHasThem) {
  EXPECT_EQ(*TimeLimitFlag("--time", "90"), Millis(90 * 60'000));
  EXPECT_EQ(*TimeLimitFlag("--time", "90s"), Millis(90'000));
  EXPECT_EQ(*TimeLimitFlag("--time", "1h30m"), Millis(90 * 60'000));
  EXPECT_EQ(*TimeLimitFlag("--time", "01:30:00"), Millis(90 * 60'000));
  EXPECT_EQ(*TimeLimitFlag("--time", "0"), Millis(0));
  for (const char* bad : {"", "soon", "1:2:3:4", "-1"}) {
    auto d = TimeLimitFlag("--time", bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().message(),
              std::string("--time '") + bad +
                  "' is not a duration; use e.g. 2h, 1h30m, 90 (minutes), 01:30:00 or 1-12:00:00");
  }
}

TEST(FlagValues, SizesWithTheirLeast) {
  EXPECT_EQ(*ByteSizeFlag("--job-max-log-bytes", "1M", 1 << 20, "1M"), 1u << 20);
  for (const char* bad : {"512K", "lots", ""}) {
    auto s = ByteSizeFlag("--job-max-log-bytes", bad, 1 << 20, "1M");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().message(), std::string("--job-max-log-bytes '") + bad +
                                        "' is not a size of at least 1M; use e.g. 1G");
  }
}

TEST(FlagValues, CpusInThousandths) {
  EXPECT_EQ(*CpusFlag("--cpus", "4"), 4000u);
  EXPECT_EQ(*CpusFlag("--cpus", "1.5"), 1500u);
  EXPECT_EQ(*CpusFlag("--cpus", "0.125"), 125u);
  for (const char* bad : {"", "0", "lots", "1.2345", "-1", "1e3"}) {
    auto c = CpusFlag("--cpus", bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().message(),
              std::string("--cpus '") + bad + "' is not a number of CPUs; use e.g. 4 or 1.5");
  }
}

TEST(FlagValues, EnvNeedsAKeyAndAnEqualsSign) {
  EXPECT_TRUE(EnvFlag("A=").ok());
  EXPECT_TRUE(EnvFlag("A=b=c").ok());
  EXPECT_EQ(EnvFlag("NOEQUALS").message(), "--env takes KEY=VALUE, got 'NOEQUALS'");
  EXPECT_EQ(EnvFlag("=v").message(), "--env takes KEY=VALUE, got '=v'");
  EXPECT_EQ(EnvFlag("\xFF\n").message(), "--env takes KEY=VALUE, got '\\xFF\\n'");
}

// Found by fuzz/duration, fuzz/byte_size: a refusal quoted the value as
// it came, so bytes from a request or a config file (invalid UTF-8, a
// newline, a terminal's escape, a megabyte) went into the one line a
// person reads. Now escaped and cut as every other quoted value.
TEST(FlagValues, RefusalQuotesTheValueEscapedAndBounded) {
  EXPECT_EQ(DurationFlag("--grace", "\xFF\n5").status().message(),
            "--grace '\\xFF\\n5' is not a duration; use e.g. 500ms, 10s, 1h30m, 01:30:00 or plain "
            "seconds");
  for (const std::string& text : {std::string("1\x1b[2J"), std::string(100000, 'x')}) {
    for (const absl::Status& s :
         {DurationFlag("--grace", text).status(), TimeLimitFlag("--time", text).status(),
          ByteSizeFlag("--mem", text, 1, "1").status(), CpusFlag("--cpus", text).status()}) {
      ASSERT_FALSE(s.ok());
      EXPECT_LT(s.message().size(), 200u) << s.message().substr(0, 80);
      EXPECT_EQ(s.message().find('\x1b'), std::string::npos);
      EXPECT_TRUE(IsValidUtf8(std::string(s.message())));
    }
  }
}

}  // namespace
}  // namespace ltd
