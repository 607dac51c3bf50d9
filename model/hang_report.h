// Reading a hang report: which stalled ranks are victims waiting inside a
// collective for a peer, and which one is the rank they wait for.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

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

// A rank lags the leader's step by more than jitter: more than 2 steps and
// more than a tenth of the leader's count.
bool IsStraggler(int64_t step, int64_t max_step);

// With stacks in hand: if the ranks whose deadline passed wait in a
// collective, they wait for a peer; the ranks whose stacks show no
// collective are the ones that stalled. Marks `in_collective` on every
// rank; returns the rank to blame, or -1 to keep the deadline order.
int AttributeHang(HangReport& report);

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
