// Stragglers judged from steps at the same moment, with a fake timeline:
// ranks report their step counts as ltd hears them (every step with
// explicit heartbeats, once per check interval at each rank's own phase
// with automatic ones), and the rate is measured as the runner measures it.
#include "straggler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "job_runtime.h"

namespace ltd::test {
namespace {

// Ranks stepping on their own clocks: step(rank, t) is rank's count at t.
struct Timeline {
  int ranks = 4;
  HeartbeatMode mode = HeartbeatMode::kExplicit;
  Millis report_every{1000};  // automatic heartbeats: one report per interval
  std::function<int64_t(int, Millis)> step;
  std::function<Millis(int)> phase = [](int r) { return Millis(r * 250 + 7); };

  // Runs to `end`, judging every 100ms; returns the number of judgements
  // with a flag on `rank` (or on any rank for -1), and sets `first_flag_step`
  // to the leader's step at the first judgement that flagged `rank`.
  int Run(Millis end, int rank, int64_t* first_flag_step = nullptr,
          int* raw_flags = nullptr) const {
    std::vector<Rank> recs(static_cast<size_t>(ranks));
    std::vector<RankRuntime> rts(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) recs[static_cast<size_t>(r)].rank = r;
    const WallTime epoch{};
    int flagged = 0;
    for (Millis t{0}; t <= end; t += Millis(1)) {
      for (int r = 0; r < ranks; ++r) {
        Rank& rec = recs[static_cast<size_t>(r)];
        const int64_t now = step(r, t);
        const bool report = mode == HeartbeatMode::kExplicit
                                ? now != rec.last_step
                                : (t - phase(r)).count() >= 0 &&
                                      (t - phase(r)) % report_every == Millis(0) &&
                                      now != rec.last_step;
        if (!report) continue;
        rec.last_step = now;
        rec.last_heartbeat_at = epoch + t;
        rts[static_cast<size_t>(r)].MeasureRate(now, t, rec.steps_per_second);
      }
      if (t % Millis(100) != Millis(0) || t < Millis(100)) continue;
      const std::vector<bool> flags = Stragglers(recs, mode);
      int64_t leader = -1;
      for (const Rank& rec : recs) leader = std::max(leader, rec.last_step);
      bool any = false;
      for (int r = 0; r < ranks; ++r) {
        if (flags[static_cast<size_t>(r)] && (rank < 0 || r == rank)) any = true;
        if (raw_flags != nullptr &&
            LagsTheLeader(static_cast<double>(recs[static_cast<size_t>(r)].last_step),
                          static_cast<double>(leader)))
          ++*raw_flags;
      }
      if (any && first_flag_step != nullptr && flagged == 0) *first_flag_step = leader;
      flagged += any;
    }
    return flagged;
  }
};

// 33 steps a second, every rank alike (DDP keeps them in lock-step).
int64_t LockStep(int, Millis t) { return t.count() / 30; }

TEST(Stragglers, ALockStepJobSampledOncePerIntervalHasNone) {
  Timeline auto_beats{4, HeartbeatMode::kAutomatic, Millis(1000), LockStep};
  int raw = 0;
  EXPECT_EQ(auto_beats.Run(Millis(60'000), -1, nullptr, &raw), 0);
  // The counts as read are up to a second of steps apart: comparing them
  // as they are (what ps and show did) flags ranks all along.
  EXPECT_GT(raw, 100);
}

TEST(Stragglers, ALockStepJobBeatingEveryStepHasNone) {
  // Each rank beats its step a few milliseconds after the others.
  Timeline beats{4, HeartbeatMode::kExplicit, Millis(0),
                 [](int r, Millis t) { return std::max<int64_t>(0, (t.count() - 3 * r) / 30); }};
  EXPECT_EQ(beats.Run(Millis(60'000), -1), 0);
}

TEST(Stragglers, ARankThirtyPercentSlowerIsFlaggedWithinFiftySteps) {
  auto slow = [](int r, Millis t) {
    return r == 2 ? static_cast<int64_t>(std::floor(t.count() * 0.7 / 30)) : t.count() / 30;
  };
  Timeline beats{4, HeartbeatMode::kExplicit, Millis(0), slow};
  int64_t at = -1;
  EXPECT_GT(beats.Run(Millis(10'000), 2, &at), 0);
  EXPECT_GE(at, 0);
  EXPECT_LE(at, 50) << "flagged only when the leader was at step " << at;
  EXPECT_EQ(beats.Run(Millis(10'000), 0), 0);  // the others never are
  EXPECT_EQ(beats.Run(Millis(10'000), 1), 0);
  EXPECT_EQ(beats.Run(Millis(10'000), 3), 0);

  // Sampled once a second, the pace of each rank has to be measured first
  // (a 2s window): flagged within a few intervals, never the others.
  Timeline auto_beats{4, HeartbeatMode::kAutomatic, Millis(1000), slow};
  at = -1;
  EXPECT_GT(auto_beats.Run(Millis(20'000), 2, &at), 0);
  EXPECT_GE(at, 0);
  EXPECT_LE(at, 200) << "flagged only when the leader was at step " << at;
  EXPECT_EQ(auto_beats.Run(Millis(20'000), 0), 0);
  EXPECT_EQ(auto_beats.Run(Millis(20'000), 1), 0);
  EXPECT_EQ(auto_beats.Run(Millis(20'000), 3), 0);
}

TEST(Stragglers, ARankThatStoppedLagsOnceOthersMoveOn) {
  std::vector<Rank> ranks(3);
  const WallTime epoch{};
  for (int r = 0; r < 3; ++r) {
    ranks[static_cast<size_t>(r)].rank = r;
    ranks[static_cast<size_t>(r)].last_step = r == 1 ? 2 : 40;
    ranks[static_cast<size_t>(r)].last_heartbeat_at = epoch + Millis(r == 1 ? 100 : 1500);
  }
  EXPECT_EQ(StragglerRanks(ranks, HeartbeatMode::kExplicit), std::vector<int>{1});
  ranks[1].last_step = -1;  // no step at all yet
  EXPECT_EQ(StragglerRanks(ranks, HeartbeatMode::kExplicit), std::vector<int>{1});
}

}  // namespace
}  // namespace ltd::test
