// `--signal SIG@DUR` as typed, signals by name, and the heartbeat line that
// tells the supervisor which signal asks a Python rank for its stacks.
#include "warn_signal.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "heartbeat.h"
#include "job.h"

namespace ltd {
namespace {

TEST(WarnSignal, ParsesSlurmsSpellingsWithoutB) {
  auto w = ParseWarnSignal("--signal", "USR1@90");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->signal, SIGUSR1);
  EXPECT_EQ(w->before, Millis(90000));  // plain seconds, as Slurm's
  w = ParseWarnSignal("--signal", "SIGTERM@2m");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->signal, SIGTERM);
  EXPECT_EQ(w->before, Millis(120000));
  w = ParseWarnSignal("--signal", "10@500ms");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->signal, 10);
  EXPECT_EQ(FormatWarnSignal(*w), "USR1@500ms");
}

TEST(WarnSignal, SaysWhatIsWrong) {
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"USR1", "no @"},
           {"B:USR1@9", "B: means nothing here"},
           {"NOPE@9", "'NOPE' is not a signal"},
           {"0@9", "'0' is not a signal"},
           {"USR1@0", "more than 0"},
           {"USR1@soon", "more than 0"},
       }) {
    auto w = ParseWarnSignal("--signal", text);
    ASSERT_FALSE(w.ok()) << text;
    EXPECT_NE(w.status().message().find(why), std::string::npos) << w.status().message();
    EXPECT_NE(w.status().message().find("USR1@90s"), std::string::npos);  // what to type
  }
  EXPECT_EQ(SignalNumber("usr2"), SIGUSR2);
  EXPECT_EQ(SignalNumber("65"), std::nullopt);
  EXPECT_EQ(SignalName(SIGUSR1), "USR1");
}

TEST(WarnSignal, MustBeShorterThanTheTime) {
  JobSpec spec;
  spec.argv = {"true"};
  spec.cwd = "/";
  spec.time_limit = Millis(6000);
  spec.warn_signal = WarnSignal{SIGUSR1, Millis(6000)};
  SpecLimits limits;
  limits.slots = 8;
  absl::Status s = ValidateSpec(spec, limits);
  EXPECT_NE(s.message().find("--signal USR1@6s: 6s is not shorter than --time 6s"),
            std::string::npos)
      << s.message();
  spec.warn_signal.before = Millis(3000);
  EXPECT_TRUE(ValidateSpec(spec, limits).ok()) << ValidateSpec(spec, limits).message();
}

TEST(WarnSignal, StackSignalLine) {
  auto m = ParseHeartbeatLine("auto stacksig 42");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, HeartbeatMessage::Kind::kAutoStackSignal);
  EXPECT_EQ(m->step, 42);
  EXPECT_FALSE(ParseHeartbeatLine("auto stacksig x"));
  EXPECT_FALSE(ParseHeartbeatLine("auto stacksig -3"));
}

// Found by fuzz/warn_signal: the refusal quoted the spec as it came.
TEST(WarnSignal, RefusalQuotesTheSpecEscaped) {
  auto w = ParseWarnSignal("--signal", "US\xC1R1\n@1s");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(),
            "--signal 'US\\xC1R1\\n@1s': 'US\\xC1R1\\n' is not a signal; use SIG@DUR, e.g. "
            "USR1@90s (USR1 90 seconds before the job's end)");
  w = ParseWarnSignal("--signal", std::string(100000, 'x'));
  ASSERT_FALSE(w.ok());
  EXPECT_LT(w.status().message().size(), 300u);
}

}  // namespace
}  // namespace ltd
