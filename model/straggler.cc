#include "straggler.h"

#include <algorithm>

namespace ltd {

bool LagsTheLeader(double step, double leader) {
  if (leader < 0) return false;
  const double lag = leader - std::max(step, -1.0);
  return lag > 2 && lag * 10 > leader;
}

std::vector<bool> Stragglers(const std::vector<Rank>& ranks, HeartbeatMode mode) {
  std::vector<bool> flags(ranks.size(), false);
  auto reported = [](const Rank& r) { return r.last_step >= 0 && r.last_heartbeat_at; };
  for (size_t i = 0; i < ranks.size(); ++i) {
    const Rank& me = ranks[i];
    // A sampled count not reported yet is no evidence (each rank reports
    // at its own phase); a rank's own beats carry its first step at once.
    if (mode == HeartbeatMode::kAutomatic && !reported(me)) continue;
    // No step yet: behind anyone who has one.
    const double mine = reported(me) ? static_cast<double>(me.last_step) : -1;
    double leader = -1;
    for (const Rank& other : ranks) {
      if (!reported(other)) continue;
      double step = static_cast<double>(other.last_step);
      if (mode == HeartbeatMode::kAutomatic && reported(me)) {
        const auto newer = std::chrono::duration_cast<std::chrono::milliseconds>(
            *other.last_heartbeat_at - *me.last_heartbeat_at);
        if (newer.count() < 0) continue;  // older: its count then is not known
        if (newer > kFreshReport) {
          if (other.steps_per_second <= 0) continue;  // pace unknown: no evidence
          step -= other.steps_per_second *
                  static_cast<double>(std::min(newer, kMaxProjection).count()) / 1000.0;
        }
      }
      leader = std::max(leader, step);
    }
    flags[i] = LagsTheLeader(mine, leader);
  }
  return flags;
}

std::vector<int> StragglerRanks(const std::vector<Rank>& ranks, HeartbeatMode mode) {
  std::vector<int> out;
  const std::vector<bool> flags = Stragglers(ranks, mode);
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (flags[i]) out.push_back(ranks[i].rank);
  }
  return out;
}

}  // namespace ltd
