// Stragglers: ranks whose progress really lags the others'. Step counts
// are compared at one moment, never as they happened to be read: ltd's
// automatic heartbeats report a rank's step count once per check interval,
// each rank at its own phase, so two lock-step ranks' counts, read at the
// same time, may be a second of steps apart. Every view (ps, show, the
// metrics, the hang report) asks this one function.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "job.h"

namespace ltd {

// How far back a report is projected at most.
inline constexpr std::chrono::milliseconds kMaxProjection{2000};
// Reports this close together need no projection.
inline constexpr std::chrono::milliseconds kFreshReport{100};

// A rank lags the leader by more than jitter: more than 2 steps and more
// than a tenth of the leader's count (steps at the same moment).
bool LagsTheLeader(double step, double leader);

// One flag per rank (same order). `mode`: how the steps were reported.
// Explicit heartbeats carry every step as it happens, so a rank that has
// not beaten since its last report has not stepped since: the counts as
// they are compare at the newest report. Automatic heartbeats sample the
// count once per interval: a rank's count is compared with each newer
// report taken back to its own report's moment at that rank's measured
// rate (at most kMaxProjection back). Taking counts back, never forward,
// errs toward no flag: a rank that stopped is never assumed to go on, and
// a newer report whose rate is not measured yet is no evidence.
std::vector<bool> Stragglers(const std::vector<Rank>& ranks, HeartbeatMode mode);

// The ranks flagged, for the hang report.
std::vector<int> StragglerRanks(const std::vector<Rank>& ranks, HeartbeatMode mode);

}  // namespace ltd
