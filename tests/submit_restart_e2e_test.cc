// A submit that meets an ltd that stops, restarts or crashes: ltctl waits
// for ltd to come back and sends the same request with the same token,
// and ltd answers a repeat with the job it made, so that every submit ends
// with exactly one job and its id, never an error in gRPC's words. A real
// ltd (with per-job supervisors) and the real ltctl.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

const std::string kChild = TestChildPath();

// What gRPC says when a connection breaks; none of it may reach a user.
void ExpectNoGrpcWords(const std::string& err) {
  for (const char* word : {"Socket closed", "Cancelling", "Connection reset", "failed to connect",
                           "Deadline Exceeded", "Stream removed", "GOAWAY", "RST_STREAM"}) {
    EXPECT_EQ(err.find(word), std::string::npos) << err;
  }
}

class SubmitRestartE2E : public E2E {
 protected:
  // Each test starts ltd itself; its jobs outlive its restarts.
  void SetUp() override {}
  void TearDown() override {
    if (d_.pid() > 0) {
      EXPECT_EQ(d_.Ctl({"shutdown"}, 60s).exit_code, 0);
      EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(d_.pid()); }, 30s)) << "ltd did not stop";
      EXPECT_EQ(d_.Stop(), 0);
    }
    // Supervisors of jobs that ended while ltd was killed hand their
    // records to the next ltd, then go.
    EXPECT_TRUE(WaitFor([&] { return Supervisors(d_.state_dir()).empty(); }, 30s))
        << Supervisors(d_.state_dir()).size() << " supervisor(s) left";
    for (pid_t shim : Supervisors(d_.state_dir())) kill(shim, SIGKILL);
    E2E::TearDown();
  }
  bool Start() { return d_.Start({"--restore-window", "10m"}); }
  // ltd's (and its supervisors') log lines about job `id`.
  std::string LogOf(const std::string& id) {
    std::istringstream lines(d_.log());
    std::string out;
    for (std::string line; std::getline(lines, line);) {
      if (Has(line, "job=" + id + " ")) out += line + "\n";
    }
    return out;
  }

  // Every job ltd has, by id.
  std::set<std::string> JobIds() {
    CmdResult r = d_.Ctl({"ps", "-a", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::set<std::string> ids;
    for (const auto& j : nlohmann::json::parse(r.out, nullptr, false))
      ids.insert(j.value("id", ""));
    return ids;
  }
};

// `ltctl shutdown` tears a job down that takes its grace period to go;
// a submit meanwhile is refused by the stopping ltd, waits, and is made
// by the next ltd: one line saying so, one job, its id on stdout.
TEST_F(SubmitRestartE2E, ASubmitDuringAShutdownWaitsForTheNextLtd) {
  ASSERT_TRUE(Start()) << d_.log();
  const std::string slow =
      SubmitDetached({"--devices", "1", "--grace", "3s", "--", kChild, "ignore-term,hang"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(slow).value("state", "") == "RUNNING"; }, 10s));
  std::future<CmdResult> shutdown =
      std::async(std::launch::async, [&] { return d_.Ctl({"shutdown"}, 60s); });
  ASSERT_TRUE(WaitFor([&] { return Has(d_.log(), "shutdown asked for"); }, 10s)) << d_.log();
  std::future<CmdResult> submit = std::async(std::launch::async, [&] {
    return d_.Ctl({"submit", "-d", "--devices", "1", "--", kChild, "exit:0"}, 60s);
  });
  EXPECT_EQ(shutdown.get().exit_code, 0);
  // shutdown answers before ltd has exited: wait for it to go by itself
  // (a SIGTERM from Stop() in its last steps would end it by the signal).
  EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(d_.pid()); }, 30s)) << "ltd did not stop";
  EXPECT_EQ(d_.Stop(), 0);
  ASSERT_TRUE(Start()) << d_.log();
  CmdResult r = submit.get();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id = TrimEnd(r.out);
  EXPECT_EQ(r.err,
            "ltctl: ltd went away before it answered (it is stopping or restarting); waiting for "
            "it to come back to submit again\nltctl: ltd is back: job " +
                id + "\n");
  ExpectNoGrpcWords(r.err);
  EXPECT_EQ(JobIds(), (std::set<std::string>{slow, id}));
  EXPECT_EQ(d_.WaitEnded(id)["state"], "SUCCEEDED");
}

// A stand-in for an ltd that dies as it takes a connection: a socket at
// ltd's path whose queue holds one connection (a backlog of none), closed
// once one came, so that nothing listens after it.
class DyingLtd {
 public:
  explicit DyingLtd(const std::string& path) : fd_(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    unlink(addr.sun_path);
    listening_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                 listen(fd_, 0) == 0;
  }
  ~DyingLtd() {
    if (fd_ >= 0) close(fd_);
  }
  DyingLtd(const DyingLtd&) = delete;
  DyingLtd& operator=(const DyingLtd&) = delete;
  bool listening() const { return listening_; }
  // Whether a connection came within 30 s; nothing listens after it.
  bool TakesOneConnectionAndGoes() {
    pollfd queued{fd_, POLLIN, 0};
    const bool came = listening_ && poll(&queued, 1, 30000) == 1;
    close(fd_);
    fd_ = -1;
    return came;
  }

 private:
  int fd_;
  bool listening_ = false;
};

// ltctl's first connection is taken by an ltd that dies before it answers,
// and nothing listens on the socket after it: the submit waits for the next
// ltd and is made there. (ltctl once probed the socket and then connected
// again: a probe answered by an ltd killed before the second connect ended
// the submit with "cannot reach ltd", once in some twenty soaks below.)
TEST_F(SubmitRestartE2E, ASubmitWhoseLtdDiesAfterItsFirstConnectWaitsForTheNext) {
  ASSERT_TRUE(Start()) << d_.log();
  d_.KillHard();
  DyingLtd dying(d_.socket());
  ASSERT_TRUE(dying.listening());
  std::future<CmdResult> submit = std::async(std::launch::async, [&] {
    return d_.Ctl({"submit", "-d", "--devices", "1", "--", kChild, "exit:0"}, 120s);
  });
  ASSERT_TRUE(dying.TakesOneConnectionAndGoes()) << "ltctl never connected";
  ASSERT_TRUE(Start()) << d_.log();
  CmdResult r = submit.get();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id = TrimEnd(r.out);
  EXPECT_EQ(id.find_first_not_of("0123456789"), std::string::npos) << id;
  EXPECT_TRUE(Has(r.err, "waiting")) << r.err;
  ExpectNoGrpcWords(r.err);
  EXPECT_EQ(JobIds(), (std::set<std::string>{id}));
  EXPECT_EQ(d_.WaitEnded(id)["state"], "SUCCEEDED");
}

// `ltctl wait` follows its job through a restart of ltd, and the ltd that
// first answers it after the restart dies before the stream is opened
// again: it waits again, and follows the job to its end.
TEST_F(SubmitRestartE2E, AWaitWhoseLtdDiesAgainAsItComesBackWaitsForTheNext) {
  ASSERT_TRUE(Start()) << d_.log();
  const std::string id = SubmitDetached({"--devices", "1", "--", kChild, "sleep:4000,exit:3"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(id).value("state", "") == "RUNNING"; }, 10s));
  std::future<CmdResult> wait = std::async(std::launch::async, [&] {
    return d_.Ctl({"wait", id}, 120s);
  });
  ASSERT_TRUE(WaitFor([&] { return Has(d_.log(), "wait stream opened"); }, 10s)) << d_.log();
  d_.KillHard();
  DyingLtd dying(d_.socket());
  ASSERT_TRUE(dying.listening());
  ASSERT_TRUE(dying.TakesOneConnectionAndGoes()) << "ltctl never tried ltd again";
  ASSERT_TRUE(Start()) << d_.log();
  CmdResult r = wait.get();
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_TRUE(Has(r.err, "lost ltd")) << r.err;
  EXPECT_FALSE(Has(r.err, "cannot reach")) << r.err;
  ExpectNoGrpcWords(r.err);
}

// The soak: 120 detached submits one after another while ltd is SIGKILLed
// (and started again) every 25 submits, at a random moment of a submit:
// each submit exits 0 with a job id, and ltd has exactly one job per
// submit; once ltd has stopped, no lt-shim of the state dir is left,
// spare or not (a supervisor that a killed ltd started and never watched
// goes with that ltd: first_contact.h). About 10 s on a 2-core VM.
TEST_F(SubmitRestartE2E, SubmitsThroughSigkillsOfLtdMakeExactlyOneJobEach) {
  constexpr int kSubmits = 120, kEvery = 25;
  ASSERT_TRUE(Start()) << d_.log();
  std::atomic<int> started{0};
  std::vector<CmdResult> results(kSubmits);
  std::thread submitter([&] {
    for (int i = 0; i < kSubmits; ++i) {
      started = i + 1;
      results[i] = d_.Ctl({"submit", "-d", "--devices", "1", "--", kChild, "exit:0"}, 120s);
    }
  });
  std::mt19937 random(std::random_device{}());
  for (int kill = 1; kill * kEvery < kSubmits; ++kill) {
    ASSERT_TRUE(WaitFor([&] { return started >= kill * kEvery; }, 120s));
    // Somewhere in the life of that submit: ltctl's start, its connect,
    // the request in ltd, the answer on its way.
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 40));
    d_.KillHard();
    ASSERT_TRUE(Start()) << d_.log();
  }
  submitter.join();
  std::set<std::string> ids;
  int waited = 0;
  for (int i = 0; i < kSubmits; ++i) {
    const CmdResult& r = results[i];
    EXPECT_EQ(r.exit_code, 0) << "submit " << i << ": " << r.err;
    ExpectNoGrpcWords(r.err);
    const std::string id = TrimEnd(r.out);
    EXPECT_FALSE(id.empty()) << "submit " << i;
    EXPECT_EQ(id.find_first_not_of("0123456789"), std::string::npos) << id;
    ids.insert(id);
    if (!r.err.empty()) ++waited;
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kSubmits));
  EXPECT_EQ(JobIds(), ids);  // no job without its submit, none twice
  std::printf("[  NOTE    ] %d of %d submits met a killed ltd and waited for the next\n", waited,
              kSubmits);
  // Each ran once, to its end: none was left to a supervisor that no ltd
  // watches (which, its window over, would record it LOST).
  std::map<std::string, int> states;
  std::string other;  // a job that did not succeed
  EXPECT_TRUE(WaitFor(
      [&] {
        states.clear();
        CmdResult r = d_.Ctl({"ps", "-a", "--json"});
        for (const auto& j : nlohmann::json::parse(r.out, nullptr, false)) {
          ++states[j.value("state", "")];
          if (j.value("state", "") != "SUCCEEDED") other = j.value("id", "");
        }
        return states == std::map<std::string, int>{{"SUCCEEDED", kSubmits}};
      },
      60s))
      << states["SUCCEEDED"] << " of " << kSubmits << " SUCCEEDED; job " << other << ": "
      << d_.Show(other).dump() << "\n"
      << LogOf(other);
  size_t went = 0;
  const std::string log = d_.log();
  for (size_t at = 0; (at = log.find("went before it started the job", at)) != std::string::npos;
       ++at) {
    ++went;
  }
  std::printf("[  NOTE    ] %zu supervisor(s) went with the killed ltd that started them\n", went);
  // Every supervisor goes once its job has ended and an ltd has its
  // record, and the spare with its ltd: none is left after ltd stops.
  EXPECT_EQ(d_.Ctl({"shutdown"}, 60s).exit_code, 0);
  EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(d_.pid()); }, 30s)) << "ltd did not stop";
  EXPECT_EQ(d_.Stop(), 0);
  std::vector<pid_t> left;
  EXPECT_TRUE(WaitFor(
      [&] {
        left = Supervisors(d_.state_dir());
        for (pid_t spare : SpareSupervisors(d_.state_dir())) left.push_back(spare);
        return left.empty();
      },
      10s))
      << left.size() << " lt-shim(s) left after ltd stopped, the first pid " << left[0];
}

}  // namespace
}  // namespace ltd::test
