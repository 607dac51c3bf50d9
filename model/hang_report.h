// Reading a hang report: which stalled ranks are victims waiting inside a
// collective for a peer, and which one is the rank they wait for; and
// when the evidence singles out no rank at all.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "job.h"

namespace ltd {

// True when a stack (gdb's or Python's faulthandler's) shows its rank
// blocked in a collective. What a rank is doing is decided by its main
// thread's innermost frames, not by whatever called them: a rank whose
// innermost frames are user code (a sleep, I/O, a loop) is not waiting in a
// collective even when DDP's forward called that code. Frames of libc,
// pthreads and the C++ runtime (the wait primitives themselves) are looked
// through.
bool WaitsInCollective(std::string_view stack);

// Beats that stop within this of each other single out no rank: the
// beats' own period, their batching on the way in and a busy scheduler
// each add that much. A rank is only ever blamed for stopping first when it
// stopped more than this before every other stalled rank.
inline constexpr std::chrono::milliseconds kBeatNoise{1000};

// `stops`: when each stalled rank stopped beating (or, before its first
// beat, its start-up deadline), with the rank. The rank that stopped first
// when it did so more than `noise` before every other; -1 when two or more
// stopped within the noise of each other (or `stops` is empty).
int SingledOut(std::vector<std::pair<std::chrono::milliseconds, int>> stops,
               std::chrono::milliseconds noise = kBeatNoise);

// The ranks that stopped within `noise` of the first one, and the spread
// of their stops: "ranks 0-3 stopped beating within 4ms of each other".
std::string DescribeTie(std::vector<std::pair<std::chrono::milliseconds, int>> stops,
                        std::chrono::milliseconds noise = kBeatNoise);

// "rank 1", "ranks 0, 2", "ranks 0-3".
std::string RankSet(std::vector<int> ranks);

// True when a rank's stack is evidence: taken (or, in a record that does
// not say, present), with a frame of the rank's main thread, and not of a
// rank handling an uncaught exception. Such stacks say nothing of where
// the rank stopped: faulthandler's dump taken while Python collects
// garbage shows "Garbage-collecting", "<no Python frame>" and no other
// thread; one taken while Python handled an uncaught exception shows a
// traceback cut short, or the main thread in sys.excepthook.
bool StackIsEvidence(const HangReportRank& r);

// What the stacks of the report lack, for a verdict that names no rank:
// "stacks of ranks 0, 2 not taken in the 5s budget; of rank 3 failed
// (eu-stack gave no frames)"; "stack of rank 6 shows no frame of its main
// thread, taken while Python collected garbage"; "stack of rank 1 shows it
// handling an uncaught exception, not where it stopped"; "" when every
// rank's stack is in.
std::string MissingStacks(const HangReport& report, std::chrono::milliseconds budget);

// With stacks in hand: if the ranks whose deadline passed wait in a
// collective, they wait for a peer; the ranks whose stacks show no
// collective are the ones that stalled. Marks `in_collective` on every
// rank; returns the rank to blame, or -1 to keep the deadline order.
// `peers_wait`: ranks elsewhere (another node of the run) are known to
// wait in a collective, whether or not a rank here does.
int AttributeHang(HangReport& report, bool peers_wait = false);

// When every rank with a stack waits in a collective, says so and whether
// they disagree about which one ("rank 0 in all_reduce (distributed_c10d.py:1536),
// rank 1 in barrier (...)": a mismatch) or are in the same one (a
// deadlock); "" otherwise. Call after AttributeHang (it reads in_collective).
std::string DescribeCollectiveWaits(const HangReport& report);

// The main thread's stack as ltd's automatic heartbeat module sends it
// (`auto stack F1<TAB>F2...`, innermost first), in faulthandler's layout
// so that it reads like any other Python stack.
std::string AutoStackText(std::string_view frames);

}  // namespace ltd
