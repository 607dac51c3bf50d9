// NcclWatcher and the SIGTERM hook against a fake NCCL: no GPU, no libnccl.
#include "nccl_watcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ltworker/ltworker.h"
#include "ltworker_internal.h"
#include "sigterm_hook.h"
#include "test_util.h"

namespace ltworker::internal {
namespace {

using ltworker::testing::WaitFor;

constexpr int kSystemError = 2;  // ncclSystemError
constexpr int kRemoteError = 6;  // ncclRemoteError
constexpr int kInvalidArg = 4;   // ncclInvalidArgument

// Records every call; errors are set per communicator by the test.
class FakeNccl : public NcclApi {
 public:
  int GetAsyncError(CommHandle comm, int* async_error) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++queries_[comm];
    *async_error = async_errors_[comm];
    return query_results_[comm];
  }
  int Abort(CommHandle comm) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++aborts_[comm];
    }
    if (hang_in_abort_) {
      while (true) ::pause();  // a stuck ncclCommAbort
    }
    return kNcclSuccess;
  }
  const char* ErrorString(int result) override {
    switch (result) {
      case kSystemError:
        return "unhandled system error";
      case kRemoteError:
        return "remote process exited or there was a network error";
      case kInvalidArg:
        return "invalid argument";
      default:
        return "fake error";
    }
  }

  void SetAsyncError(CommHandle comm, int error) {
    std::lock_guard<std::mutex> lock(mu_);
    async_errors_[comm] = error;
  }
  void SetQueryResult(CommHandle comm, int result) {
    std::lock_guard<std::mutex> lock(mu_);
    query_results_[comm] = result;
  }
  int queries(CommHandle comm) {
    std::lock_guard<std::mutex> lock(mu_);
    return queries_[comm];
  }
  int aborts(CommHandle comm) {
    std::lock_guard<std::mutex> lock(mu_);
    return aborts_[comm];
  }
  void HangInAbort() { hang_in_abort_ = true; }

 private:
  std::mutex mu_;
  std::map<CommHandle, int> async_errors_;
  std::map<CommHandle, int> query_results_;
  std::map<CommHandle, int> queries_;
  std::map<CommHandle, int> aborts_;
  std::atomic<bool> hang_in_abort_{false};
};

// Collects what the watcher reports.
class Reports {
 public:
  std::function<void(std::string_view)> Sink() {
    return [this](std::string_view text) {
      std::lock_guard<std::mutex> lock(mu_);
      texts_.emplace_back(text);
    };
  }
  std::vector<std::string> texts() {
    std::lock_guard<std::mutex> lock(mu_);
    return texts_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> texts_;
};

int comm_storage[3];
CommHandle const kCommA = &comm_storage[0];
CommHandle const kCommB = &comm_storage[1];
CommHandle const kCommC = &comm_storage[2];

NcclWatcher::Options SyncOptions(Reports* reports) {
  NcclWatcher::Options options;
  options.poll_interval = std::chrono::hours(1);  // the thread, if started, only wakes on demand
  options.report_error = reports->Sink();
  return options;
}

TEST(NcclWatcherTest, RegisterValidatesHandles) {
  FakeNccl nccl;
  Reports reports;
  NcclWatcher watcher(&nccl, SyncOptions(&reports));
  EXPECT_EQ(watcher.Register(nullptr), EINVAL);
  EXPECT_EQ(watcher.Register(kCommA), 0);
  EXPECT_EQ(watcher.Register(kCommA), EEXIST);
  EXPECT_EQ(watcher.Unregister(kCommB), ENOENT);
  EXPECT_EQ(watcher.size(), 1u);
  EXPECT_EQ(watcher.Unregister(kCommA), 0);
  EXPECT_EQ(watcher.size(), 0u);
}

TEST(NcclWatcherTest, HealthyAndInProgressCommsAreLeftAlone) {
  FakeNccl nccl;
  Reports reports;
  NcclWatcher watcher(&nccl, SyncOptions(&reports));
  ASSERT_EQ(watcher.Register(kCommA), 0);
  ASSERT_EQ(watcher.Register(kCommB), 0);
  nccl.SetAsyncError(kCommB, kNcclInProgress);
  watcher.CheckOnce();
  watcher.CheckOnce();
  EXPECT_EQ(nccl.queries(kCommA), 2);
  EXPECT_EQ(nccl.queries(kCommB), 2);
  EXPECT_EQ(nccl.aborts(kCommA), 0);
  EXPECT_EQ(nccl.aborts(kCommB), 0);
  EXPECT_TRUE(reports.texts().empty());
}

TEST(NcclWatcherTest, AsyncErrorIsReportedThenAbortedOnce) {
  FakeNccl nccl;
  Reports reports;
  NcclWatcher watcher(&nccl, SyncOptions(&reports));
  ASSERT_EQ(watcher.Register(kCommA), 0);
  ASSERT_EQ(watcher.Register(kCommB), 0);
  nccl.SetAsyncError(kCommB, kRemoteError);
  watcher.CheckOnce();
  EXPECT_EQ(reports.texts(),
            std::vector<std::string>{"NCCL async error on communicator: remote process exited or "
                                     "there was a network error"});
  EXPECT_EQ(nccl.aborts(kCommB), 1);
  EXPECT_EQ(nccl.aborts(kCommA), 0);
  // The aborted handle is freed memory now: never queried or aborted again.
  watcher.CheckOnce();
  watcher.AbortAll();
  EXPECT_EQ(nccl.queries(kCommB), 1);
  EXPECT_EQ(nccl.aborts(kCommB), 1);
  EXPECT_EQ(reports.texts().size(), 1u);
  EXPECT_EQ(nccl.aborts(kCommA), 1);  // AbortAll still reached the healthy one
}

TEST(NcclWatcherTest, FailingQueryCountsAsAnError) {
  FakeNccl nccl;
  Reports reports;
  NcclWatcher watcher(&nccl, SyncOptions(&reports));
  ASSERT_EQ(watcher.Register(kCommA), 0);
  nccl.SetQueryResult(kCommA, kInvalidArg);
  watcher.CheckOnce();
  EXPECT_EQ(reports.texts(),
            std::vector<std::string>{"NCCL async error on communicator: invalid argument"});
  EXPECT_EQ(nccl.aborts(kCommA), 1);
}

TEST(NcclWatcherTest, UnregisterStopsWatching) {
  FakeNccl nccl;
  Reports reports;
  NcclWatcher watcher(&nccl, SyncOptions(&reports));
  ASSERT_EQ(watcher.Register(kCommA), 0);
  ASSERT_EQ(watcher.Unregister(kCommA), 0);
  nccl.SetAsyncError(kCommA, kSystemError);
  watcher.CheckOnce();
  watcher.AbortAll();
  EXPECT_EQ(nccl.queries(kCommA), 0);
  EXPECT_EQ(nccl.aborts(kCommA), 0);
  EXPECT_TRUE(reports.texts().empty());
}

// The thread polls on its own, and the report reaches ltd as one protocol
// line through the C API, before the abort.
TEST(NcclWatcherThreadTest, ErrorReachesTheHeartbeatFdAsAnErrorLine) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  ASSERT_EQ(::setenv("LT_HEARTBEAT_FD", std::to_string(fds[1]).c_str(), 1), 0);
  ResetHeartbeatForTesting();

  FakeNccl nccl;
  NcclWatcher::Options options;
  options.poll_interval = std::chrono::milliseconds(1);
  options.report_error = [](std::string_view text) { lt_report_error_n(text.data(), text.size()); };
  NcclWatcher watcher(&nccl, std::move(options));
  ASSERT_EQ(watcher.Start(), 0);
  ASSERT_EQ(watcher.Register(kCommA), 0);
  ASSERT_EQ(watcher.Register(kCommB), 0);
  ASSERT_TRUE(WaitFor([&] { return nccl.queries(kCommA) >= 2; }));
  nccl.SetAsyncError(kCommA, kSystemError);
  ASSERT_TRUE(WaitFor([&] { return nccl.aborts(kCommA) == 1; }));
  EXPECT_EQ(ltworker::testing::ReadLines(fds[0], 1),
            "error NCCL async error on communicator: unhandled system error\n");
  EXPECT_EQ(nccl.aborts(kCommB), 0);

  ::unsetenv("LT_HEARTBEAT_FD");
  ResetHeartbeatForTesting();
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(NcclWatcherThreadTest, UnregisteredCommIsNeverTouchedAgain) {
  FakeNccl nccl;
  Reports reports;
  NcclWatcher::Options options = SyncOptions(&reports);
  options.poll_interval = std::chrono::milliseconds(1);
  NcclWatcher watcher(&nccl, std::move(options));
  ASSERT_EQ(watcher.Start(), 0);
  ASSERT_EQ(watcher.Register(kCommA), 0);
  ASSERT_EQ(watcher.Register(kCommB), 0);
  ASSERT_TRUE(WaitFor([&] { return nccl.queries(kCommA) >= 1; }));
  ASSERT_EQ(watcher.Unregister(kCommA), 0);
  const int queries_at_unregister = nccl.queries(kCommA);
  nccl.SetAsyncError(kCommA, kSystemError);
  // Several more passes over B prove the thread kept running.
  const int b = nccl.queries(kCommB);
  ASSERT_TRUE(WaitFor([&] { return nccl.queries(kCommB) >= b + 3; }));
  EXPECT_EQ(nccl.queries(kCommA), queries_at_unregister);
  EXPECT_EQ(nccl.aborts(kCommA), 0);
  EXPECT_TRUE(reports.texts().empty());
}

TEST(NcclWatcherThreadTest, PollIntervalChangeTakesEffect) {
  FakeNccl nccl;
  Reports reports;
  NcclWatcher watcher(&nccl, SyncOptions(&reports));  // one hour
  ASSERT_EQ(watcher.Start(), 0);
  ASSERT_EQ(watcher.Register(kCommA), 0);
  watcher.SetPollInterval(std::chrono::milliseconds(1));
  EXPECT_TRUE(WaitFor([&] { return nccl.queries(kCommA) >= 3; }));
}

// --- SIGTERM ------------------------------------------------------------------

std::atomic<int> g_previous_handler_calls{0};
void CountingHandler(int) { g_previous_handler_calls.fetch_add(1); }
std::atomic<int> g_previous_siginfo_signo{0};
void SiginfoHandler(int, siginfo_t* info, void*) { g_previous_siginfo_signo.store(info->si_signo); }

// Sets SIGTERM's disposition for one test and puts the old one back.
class SigtermTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::sigaction(SIGTERM, nullptr, &saved_), 0); }
  void TearDown() override {
    EXPECT_EQ(UninstallSigtermHook(), 0);
    EXPECT_EQ(::sigaction(SIGTERM, &saved_, nullptr), 0);
  }
  static void Set(void (*handler)(int)) {
    struct sigaction action {};
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    ASSERT_EQ(::sigaction(SIGTERM, &action, nullptr), 0);
  }

  struct sigaction saved_;
};

TEST_F(SigtermTest, AbortsEveryRegisteredCommAndChainsToPreviousHandler) {
  Set(CountingHandler);
  g_previous_handler_calls = 0;
  FakeNccl nccl;
  Reports reports;
  std::atomic<int> finished{0};
  NcclWatcher::Options options = SyncOptions(&reports);
  options.after_sigterm_aborts = [&finished] {
    FinishSigterm();  // previous was a function: must not kill us
    finished.fetch_add(1);
  };
  NcclWatcher watcher(&nccl, std::move(options));
  ASSERT_EQ(watcher.Start(), 0);
  ASSERT_EQ(watcher.Register(kCommA), 0);
  ASSERT_EQ(watcher.Register(kCommB), 0);
  ASSERT_EQ(watcher.Register(kCommC), 0);
  ASSERT_EQ(watcher.Unregister(kCommC), 0);
  ASSERT_EQ(InstallSigtermHook(&watcher), 0);
  EXPECT_EQ(InstallSigtermHook(&watcher), EALREADY);

  ASSERT_EQ(::raise(SIGTERM), 0);
  EXPECT_EQ(g_previous_handler_calls.load(), 1);  // ran synchronously, inside our handler
  ASSERT_TRUE(WaitFor([&] { return finished.load() == 1; }));
  EXPECT_EQ(nccl.aborts(kCommA), 1);
  EXPECT_EQ(nccl.aborts(kCommB), 1);
  EXPECT_EQ(nccl.aborts(kCommC), 0);
  EXPECT_TRUE(reports.texts().empty()) << "teardown is not a failure of this rank";

  // Uninstalling puts the program's handler back.
  ASSERT_EQ(UninstallSigtermHook(), 0);
  struct sigaction now;
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, &CountingHandler);
}

TEST_F(SigtermTest, ChainsToSiginfoHandler) {
  struct sigaction action {};
  action.sa_sigaction = SiginfoHandler;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(::sigaction(SIGTERM, &action, nullptr), 0);
  g_previous_siginfo_signo = 0;
  FakeNccl nccl;
  Reports reports;
  NcclWatcher watcher(&nccl, SyncOptions(&reports));
  ASSERT_EQ(watcher.Start(), 0);
  ASSERT_EQ(watcher.Register(kCommA), 0);
  ASSERT_EQ(InstallSigtermHook(&watcher), 0);
  ASSERT_EQ(::raise(SIGTERM), 0);
  EXPECT_EQ(g_previous_siginfo_signo.load(), SIGTERM);
  EXPECT_TRUE(WaitFor([&] { return nccl.aborts(kCommA) == 1; }));
}

TEST_F(SigtermTest, IgnoredSigtermInstallsNothing) {
  Set(SIG_IGN);
  FakeNccl nccl;
  Reports reports;
  NcclWatcher watcher(&nccl, SyncOptions(&reports));
  ASSERT_EQ(InstallSigtermHook(&watcher), 0);
  struct sigaction now;
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_IGN);
}

// With the default disposition the rank still dies of SIGTERM, but only
// after its communicators were aborted.
TEST_F(SigtermTest, DefaultDispositionDiesAfterAborting) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Set(SIG_DFL);
  EXPECT_EXIT(
      {
        FakeNccl nccl;
        Reports reports;
        NcclWatcher::Options options = SyncOptions(&reports);
        options.after_sigterm_aborts = [&nccl] {
          std::fprintf(stderr, "aborted %d+%d\n", nccl.aborts(kCommA), nccl.aborts(kCommB));
          FinishSigterm();
        };
        NcclWatcher watcher(&nccl, std::move(options));
        if (watcher.Start() != 0 || watcher.Register(kCommA) != 0 ||
            watcher.Register(kCommB) != 0 || InstallSigtermHook(&watcher) != 0) {
          std::_Exit(2);
        }
        ::raise(SIGTERM);
        // The watcher ends the process; give up after the deadline.
        WaitFor([] { return false; });
        std::_Exit(3);
      },
      ::testing::KilledBySignal(SIGTERM), "aborted 1\\+1");
}

// A second SIGTERM does not wait for an abort that hangs.
TEST_F(SigtermTest, SecondSigtermKillsEvenIfAbortHangs) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Set(SIG_DFL);
  EXPECT_EXIT(
      {
        FakeNccl nccl;
        nccl.HangInAbort();
        Reports reports;
        NcclWatcher watcher(&nccl, SyncOptions(&reports));
        if (watcher.Start() != 0 || watcher.Register(kCommA) != 0 ||
            InstallSigtermHook(&watcher) != 0) {
          std::_Exit(2);
        }
        ::raise(SIGTERM);
        if (!WaitFor([&] { return nccl.aborts(kCommA) == 1; })) std::_Exit(4);
        ::raise(SIGTERM);
        WaitFor([] { return false; });
        std::_Exit(3);
      },
      ::testing::KilledBySignal(SIGTERM), "");
}

}  // namespace
}  // namespace ltworker::internal
