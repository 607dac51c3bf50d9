// Reading stacks: what a rank is doing is decided by its main thread's
// innermost frames, in both formats ltd collects (faulthandler, gdb).
#include "hang_report.h"

#include <gtest/gtest.h>

namespace ltd::test {
namespace {

using Millis = std::chrono::milliseconds;

// Lightning 1.9 under DDP, rank 1 blocked in the user's training_step (a
// time.sleep, which faulthandler does not show: it is C), called from
// DDP's forward; rank 0 in loss.backward(), waiting in the allreduce.
constexpr char kUserCodeBelowDdpForward[] = R"(Fatal Python error: Aborted

Thread 0x00007f43c9e5f6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
  File "/usr/lib/python3.11/threading.py", line 622 in wait
  File "/usr/lib/python3.11/threading.py", line 995 in _bootstrap

Current thread 0x00007f43d6d0f040 (most recent call first):
  File "/work/scripts/hang.py", line 31 in training_step
  File "/site/pytorch_lightning/overrides/base.py", line 98 in forward
  File "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", line 1194 in _call_impl
  File "/usr/lib/python3/dist-packages/torch/nn/parallel/distributed.py", line 1040 in _run_ddp_forward
  File "/usr/lib/python3/dist-packages/torch/nn/parallel/distributed.py", line 1098 in forward
  File "/site/pytorch_lightning/strategies/ddp.py", line 351 in training_step
  File "/site/pytorch_lightning/trainer/trainer.py", line 1103 in fit
  File "/work/scripts/hang.py", line 60 in <module>
)";

constexpr char kBackwardInDdp[] = R"(Fatal Python error: Aborted

Current thread 0x00007f00aa0f0040 (most recent call first):
  File "/usr/lib/python3/dist-packages/torch/autograd/__init__.py", line 197 in backward
  File "/usr/lib/python3/dist-packages/torch/_tensor.py", line 488 in backward
  File "/site/pytorch_lightning/core/module.py", line 1410 in backward
  File "/site/pytorch_lightning/trainer/trainer.py", line 1103 in fit
  File "/work/scripts/hang.py", line 60 in <module>
)";

// faulthandler's "Current thread" is whichever took the signal; the one
// running the script's <module> is the main thread.
constexpr char kSignalTakenByAWorkerThread[] = R"(Current thread 0x00007f1 (most recent call first):
  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 1321 in all_reduce
  File "/usr/lib/python3.11/threading.py", line 995 in _bootstrap

Thread 0x00007f2 (most recent call first):
  File "/work/train.py", line 12 in write_checkpoint
  File "/work/train.py", line 40 in <module>
)";

// gdb, LibTorch on gloo: Thread 1 (put first by the sampler) waits for a
// peer's data under libc and libstdc++ frames.
constexpr char kNativeGlooWait[] =
    R"(Thread 1 (Thread 0x7f5e (LWP 4242) "train"):
#0  0x00007f5e in __futex_abstimed_wait_common64 (private=0, cancel=true) at ./nptl/futex-internal.c:57
#1  __futex_abstimed_wait_common (cancel=true) at ./nptl/futex-internal.c:87
#2  0x00007f5e in __GI___futex_abstimed_wait_cancelable64 () at ./nptl/futex-internal.c:139
#3  0x00007f5e in __pthread_cond_wait_common () at ./nptl/pthread_cond_wait.c:503
#4  ___pthread_cond_wait () at ./nptl/pthread_cond_wait.c:618
#5  0x00007f5e in std::condition_variable::wait(std::unique_lock<std::mutex>&) () from /lib/x86_64-linux-gnu/libstdc++.so.6
#6  0x00007f5e in gloo::transport::tcp::UnboundBuffer::waitRecv(int*, std::chrono::duration<long, std::ratio<1l, 1000l> >) () from /lib/x86_64-linux-gnu/libgloo.so.0
#7  0x00007f5e in c10d::ProcessGroupGloo::AsyncWork::wait() () from /lib/libtorch_cpu.so
#8  0x000055 in main (argc=5, argv=0x7ffd) at /work/examples/train/train.cc:262
Thread 2 (Thread 0x7f5f (LWP 4243) "train"):
#0  0x00007f5e in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6
)";

constexpr char kNativeSleepingInUserCode[] =
    R"(Thread 1 (Thread 0x7f5e (LWP 4250) "train"):
#0  0x00007f5e in __GI___clock_nanosleep (clock_id=0, flags=0) at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:71
#1  0x00007f5e in __GI___nanosleep () at ./posix/nanosleep.c:25
#2  0x000055 in std::this_thread::sleep_for<long, std::ratio<1l, 1l> > () at /usr/include/c++/12/bits/this_thread_sleep.h:80
#3  injected_hang (rank=1, step=5) at /work/examples/train/train.cc:43
#4  0x000055 in main (argc=5, argv=0x7ffd) at /work/examples/train/train.cc:262
)";

TEST(HangReport, TheInnermostFramesDecideNotTheCallers) {
  EXPECT_FALSE(WaitsInCollective(kUserCodeBelowDdpForward));
  EXPECT_TRUE(WaitsInCollective(kBackwardInDdp));
  EXPECT_FALSE(WaitsInCollective(kSignalTakenByAWorkerThread));
  EXPECT_TRUE(WaitsInCollective(kNativeGlooWait));
  EXPECT_FALSE(WaitsInCollective(kNativeSleepingInUserCode));
  EXPECT_FALSE(WaitsInCollective(""));
  EXPECT_FALSE(WaitsInCollective("no frames at all\n\x01\xff"));
  EXPECT_TRUE(WaitsInCollective(
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 3 "
      "in barrier\n"));
}

HangReportRank Rank(int rank, bool stalled, std::string stack) {
  HangReportRank r;
  r.rank = rank;
  r.stalled = stalled;
  r.stack = std::move(stack);
  return r;
}

TEST(HangReport, TheRankOthersWaitForIsTheCulprit) {
  // Rank 0's deadline passed first (rank 1 beat once more), but rank 0
  // waits in the allreduce for rank 1, which runs user code.
  HangReport lightning;
  lightning.ranks = {Rank(0, true, kBackwardInDdp), Rank(1, false, kUserCodeBelowDdpForward)};
  lightning.stalled_ranks = {0};
  EXPECT_EQ(AttributeHang(lightning), 1);
  EXPECT_EQ(lightning.stalled_ranks, std::vector<int>{1});
  EXPECT_TRUE(lightning.ranks[0].in_collective);
  EXPECT_FALSE(lightning.ranks[0].stalled);
  EXPECT_TRUE(lightning.ranks[1].stalled);

  HangReport native;
  native.ranks = {Rank(0, true, kNativeGlooWait), Rank(1, true, kNativeSleepingInUserCode),
                  Rank(2, true, kNativeGlooWait)};
  native.stalled_ranks = {0, 1, 2};
  EXPECT_EQ(AttributeHang(native), 1);

  // Every rank waits: nothing tells them apart, the deadline order stays.
  HangReport all_wait;
  all_wait.ranks = {Rank(0, true, kNativeGlooWait), Rank(1, true, kBackwardInDdp)};
  all_wait.stalled_ranks = {0, 1};
  EXPECT_EQ(AttributeHang(all_wait), -1);
  EXPECT_EQ(all_wait.stalled_ranks, (std::vector<int>{0, 1}));

  // The stalled rank does not wait in a collective: it is its own cause.
  HangReport plain;
  plain.ranks = {Rank(0, true, kNativeSleepingInUserCode), Rank(1, false, kNativeGlooWait)};
  plain.stalled_ranks = {0};
  EXPECT_EQ(AttributeHang(plain), -1);
}

// A stack that did not come is no evidence, even where some text (the
// kernel's view) is there: the rank it would have cleared is not blamed.
TEST(HangReport, OnlyTakenStacksAreEvidence) {
  HangReport report;
  report.ranks = {Rank(0, true, kNativeGlooWait),
                  Rank(1, true,
                       "kernel: thread 7 (train) in "
                       "hrtimer_nanosleep\n"),
                  Rank(2, true, kNativeGlooWait)};
  report.ranks[0].stack_status = StackStatus::kTaken;
  report.ranks[1].stack_status = StackStatus::kTimedOut;
  report.ranks[2].stack_status = StackStatus::kTaken;
  report.stalled_ranks = {0, 1, 2};
  EXPECT_EQ(AttributeHang(report), -1);
  EXPECT_EQ(MissingStacks(report, Millis(5000)), "stack of rank 1 not taken in the 5s budget");
  report.ranks[0].stack_status = StackStatus::kFailed;
  report.ranks[0].stack_note = "eu-stack gave no frames (exit 2)";
  report.ranks[2].stack_status = StackStatus::kTimedOut;
  EXPECT_EQ(MissingStacks(report, Millis(5000)),
            "stacks of ranks 1, 2 not taken in the 5s budget; stack of rank 0 not taken "
            "(eu-stack gave no frames (exit 2))");
}

// faulthandler's dump when the signal came while Python collected garbage
// (seen under load in a gloo run: the rank blocked in its allreduce): the
// collecting thread, no frame, and no other thread.
constexpr char kTakenWhileCollectingGarbage[] = R"(Fatal Python error: Aborted

Current thread 0x00007faf34086040 (most recent call first):
  Garbage-collecting
  <no Python frame>

Extension modules: torch._C, numpy.core._multiarray_umath (total: 2)
)";

// A stack that shows no frame of the rank's main thread says nothing of
// where the rank is: it does not make the rank one that the others wait
// for, and the report says what it lacks.
TEST(HangReport, AStackWithoutAFrameIsNoEvidence) {
  HangReport report;
  report.ranks = {Rank(0, true, kBackwardInDdp), Rank(1, true, kUserCodeBelowDdpForward),
                  Rank(2, true, kTakenWhileCollectingGarbage), Rank(3, true, kBackwardInDdp)};
  for (HangReportRank& r : report.ranks) r.stack_status = StackStatus::kTaken;
  report.stalled_ranks = {0, 1, 2, 3};
  EXPECT_FALSE(StackIsEvidence(report.ranks[2]));
  EXPECT_EQ(AttributeHang(report), 1);
  EXPECT_EQ(report.stalled_ranks, std::vector<int>{1});
  EXPECT_FALSE(report.ranks[2].stalled);
  EXPECT_FALSE(report.ranks[2].in_collective);
  EXPECT_EQ(MissingStacks(report, Millis(5000)),
            "stack of rank 2 shows no frame of its main thread, taken while Python collected "
            "garbage");
  report.ranks[3].stack =
      "Current thread 0x00007f1 (most recent call first):\n  <no Python frame>\n";
  EXPECT_EQ(MissingStacks(report, Millis(5000)),
            "stack of rank 2 shows no frame of its main thread, taken while Python collected "
            "garbage; stack of rank 3 shows no frame of its main thread");
}

// A multi-node run under load: another node found the hang and tore its
// ranks down while this node took its stacks. This rank's allreduce had
// failed already, and faulthandler caught it printing the traceback, in
// the excepthook of ltd's heartbeat module; the traceback is cut short
// there. Nothing in it says where the rank stopped.
constexpr char kTakenWhilePrintingATraceback[] = R"(Traceback (most recent call last):
  File "/work/tests/ranks/etcd_ddp.py", line 58, in <module>
    main()
  File "/work/tests/ranks/etcd_ddp.py", line 46, in main
    loss.backward()  # DDP allreduces the gradients here, across nodes
    ^^^^^^^^^^^^^^^
  File "/usr/lib/python3/dist-packages/torch/_tensor.py", line 488, in backward
Fatal Python error: Aborted

Current thread 0x00007fd45e57c040 (most recent call first):
  File "/work/build/daemon/python/autoload/ltd_autoheartbeat.py", line 347 in excepthook

Extension modules: torch._C, numpy.core._multiarray_umath (total: 2)
)";

// A rank caught handling an uncaught exception is not one that stalled
// outside a collective: it is not blamed, even where the others are known
// to wait in one, and the report says what its stack lacks.
TEST(HangReport, ARankHandlingAnUncaughtExceptionIsNotTheOneOthersWaitFor) {
  HangReport report;
  report.ranks = {Rank(0, true, kBackwardInDdp), Rank(1, true, kTakenWhilePrintingATraceback)};
  for (HangReportRank& r : report.ranks) r.stack_status = StackStatus::kTaken;
  report.stalled_ranks = {0, 1};
  EXPECT_FALSE(StackIsEvidence(report.ranks[1]));
  EXPECT_EQ(AttributeHang(report, /*peers_wait=*/true), -1);
  EXPECT_EQ(report.stalled_ranks, (std::vector<int>{0, 1}));
  EXPECT_FALSE(report.ranks[1].in_collective);
  EXPECT_EQ(MissingStacks(report, Millis(5000)),
            "stack of rank 1 shows it handling an uncaught exception, not where it stopped");

  // The main thread in sys.excepthook says as much without a traceback
  // (seen too: the hook reporting the error, before it printed anything);
  // an excepthook that the program itself calls is the program's code.
  HangReportRank hook = Rank(2, true, R"(Fatal Python error: Aborted

Current thread 0x00007f3fc247c040 (most recent call first):
  File "/usr/lib/python3.11/enum.py", line 717 in __call__
  File "/work/build/daemon/python/ltworker/__init__.py", line 89 in write
  File "/work/build/daemon/python/ltworker/__init__.py", line 278 in report_error
  File "/work/build/daemon/python/autoload/ltd_autoheartbeat.py", line 344 in excepthook
)");
  EXPECT_FALSE(StackIsEvidence(hook));
  hook.stack =
      "Current thread 0x1 (most recent call first):\n  File \"/site/hooks.py\", line 9 in "
      "excepthook\n  File \"/work/train.py\", line 3 in <module>\n";
  EXPECT_TRUE(StackIsEvidence(hook));

  // A traceback is no thread: its <module> frame does not make it the
  // main thread, whose innermost frames would decide.
  EXPECT_FALSE(
      WaitsInCollective("Traceback (most recent call last):\n  File \"/work/t.py\", "
                        "line 3, in <module>\n"));
}

// Beats that stop within a second of each other name no rank, however
// the microseconds fall; a rank that stopped clearly first is named.
TEST(HangReport, BeatsStoppingWithinTheNoiseSingleOutNoRank) {
  using S = std::vector<std::pair<Millis, int>>;
  EXPECT_EQ(SingledOut(S{{Millis(10'000), 2}, {Millis(10'004), 0}, {Millis(10'001), 1}}), -1);
  EXPECT_EQ(SingledOut(S{{Millis(10'000), 2}, {Millis(11'000), 0}}), -1);  // exactly the noise
  EXPECT_EQ(SingledOut(S{{Millis(10'000), 2}, {Millis(11'001), 0}}), 2);
  EXPECT_EQ(SingledOut(S{{Millis(12'000), 3}, {Millis(10'000), 1}, {Millis(12'002), 0}}), 1);
  EXPECT_EQ(SingledOut(S{{Millis(5), 3}}), 3);  // alone past its deadline
  EXPECT_EQ(SingledOut(S{}), -1);
  EXPECT_EQ(
      DescribeTie(
          S{{Millis(10'000), 2}, {Millis(10'004), 0}, {Millis(10'001), 1}, {Millis(10'003), 3}}),
      "ranks 0-3 stopped beating within 4ms of each other");
  EXPECT_EQ(DescribeTie(S{{Millis(10'000), 2}, {Millis(10'300), 0}, {Millis(15'000), 1}}),
            "ranks 0, 2 stopped beating within 300ms of each other");
  EXPECT_EQ(RankSet({3, 1, 2}), "ranks 1-3");
  EXPECT_EQ(RankSet({0, 2}), "ranks 0, 2");
  EXPECT_EQ(RankSet({4}), "rank 4");
}

}  // namespace
}  // namespace ltd::test
