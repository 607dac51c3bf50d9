// `--signal SIG@DUR` end to end: SIG reaches each rank's main process DUR
// before the job's end is forced (its --time, a drain's deadline), the
// job's output and `show` say when. Evidence, not timing: the handler ran
// well after the start and before the teardown, in that order.
#include <cstdlib>
#include <regex>
#include <string>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

// A rank that prints when it starts and when USR1 comes (seconds since the
// epoch), and sleeps in between; `sleep` in the foreground lets the trap
// run within 0.1 s.
const std::string kTrapUsr1 =
    "echo start $(date +%s.%N); trap 'echo usr1 $(date +%s.%N)' USR1; "
    "while :; do sleep 0.1; done";

double After(const std::string& out, const std::string& word) {
  const size_t at = out.find(word + " ");
  return at == std::string::npos ? -1 : std::strtod(out.c_str() + at + word.size() + 1, nullptr);
}

class WarnSignalE2E : public E2E {};

TEST_F(WarnSignalE2E, TimeLimitSendsTheSignalItsDurBeforeTheEnd) {
  const std::string id = SubmitDetached(
      {"--devices", "1", "--time", "6s", "--signal", "USR1@3s", "--", "/bin/sh", "-c", kTrapUsr1});
  nlohmann::json job = d_.WaitEnded(id, 30s);
  EXPECT_EQ(job["root_cause"]["reason"], "time_limit") << job.dump(1);
  const std::string out = d_.Ctl({"logs", id}).out;
  const double start = After(out, "start");
  const double usr1 = After(out, "usr1");
  ASSERT_GT(start, 0) << out;
  ASSERT_GT(usr1, 0) << "the handler never ran:\n" << out;
  // About 3 s in: well after the start (not at once), and before the end.
  EXPECT_GT(usr1 - start, 1.5) << out;
  // ... and before the end, 6 s after the start (the teardown's SIGTERM
  // would end the shell before its trap ran).
  EXPECT_LT(usr1 - start, 5.5) << out;
  // In the log's own format, where it happened among the ranks' lines.
  const size_t sent =
      out.find("[ltd] SIGUSR1 sent to every rank's main process: --time ends in 3s");
  ASSERT_NE(sent, std::string::npos) << out;
  EXPECT_LT(sent, out.find("usr1 ")) << out;
  EXPECT_FALSE(job["warn_signal_sent_at"].is_null()) << job.dump(1);
  EXPECT_EQ(job["warn_signal_why"], "--time ends in 3s");
  EXPECT_EQ(job["warn_signal"], 10);
  const std::string show = d_.Ctl({"show", id}).out;
  EXPECT_NE(show.find("Signal:        USR1@3s, sent "), std::string::npos) << show;
}

// An attached submit hears the --signal notice once, as ltd says it (not a
// second time as "a line of the log reads: ..."), after its job's id; it
// ends TIMEOUT with 124.
TEST_F(WarnSignalE2E, AnAttachedSubmitHearsTheNoticeOnce) {
  CmdResult r = d_.Ctl({"submit", "--name", "warned", "--devices", "1", "--time", "4s", "--signal",
                        "USR1@2s", "--", "/bin/sh", "-c", kTrapUsr1},
                       30s);
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_EQ(r.err.rfind("ltd: job 1 (warned)\n", 0), 0u) << "its id first: " << r.err;
  const std::string notice = "ltd: SIGUSR1 sent to every rank's main process: --time ends in 2s";
  const size_t first = r.err.find(notice);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(notice, first + 1), std::string::npos) << "twice: " << r.err;
  EXPECT_EQ(r.err.find("a line of the log reads"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ltctl: job 1 TIMEOUT: "), std::string::npos) << r.err;
}

TEST_F(WarnSignalE2E, RefusedWhenNotShorterThanTheTimeOrMalformed) {
  CmdResult r = d_.Ctl(
      {"submit", "-d", "--devices", "1", "--time", "2s", "--signal", "USR1@5s", "--", "true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not shorter than --time 2s"), std::string::npos) << r.err;
  r = d_.Ctl({"submit", "-d", "--devices", "1", "--signal", "B:USR1@5", "--", "true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("B: means nothing here"), std::string::npos) << r.err;
  r = d_.Ctl({"submit", "-d", "--devices", "1", "--signal", "NOPE@5", "--", "true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("'NOPE' is not a signal"), std::string::npos) << r.err;
}

TEST_F(WarnSignalE2E, DrainDeadlineSignalsThenTearsDown) {
  const std::string id =
      SubmitDetached({"--devices", "1", "--signal", "USR1@2s", "--", "/bin/sh", "-c", kTrapUsr1});
  ASSERT_TRUE(WaitFor([&] { return After(d_.Ctl({"logs", id}).out, "start") > 0; }, 20s));
  CmdResult drain = d_.Ctl({"drain", "--reason", "test", "--deadline", "4s"});
  ASSERT_EQ(drain.exit_code, 0) << drain.err;
  EXPECT_NE(drain.out.find("running jobs are torn down at "), std::string::npos) << drain.out;
  // At most microseconds, as every time ltd shows.
  EXPECT_TRUE(
      std::regex_search(drain.out, std::regex("torn down at [0-9-]+T[0-9:]+(\\.[0-9]{1,6})?Z \\(")))
      << drain.out;
  nlohmann::json job = d_.WaitEnded(id, 30s);
  EXPECT_EQ(job["state"], "CANCELLED") << job.dump(1);
  EXPECT_NE(job["root_cause"]["message"].get<std::string>().find("the drain's deadline came"),
            std::string::npos)
      << job.dump(1);
  const std::string out = d_.Ctl({"logs", id}).out;
  const size_t handled = out.find("usr1 ");
  ASSERT_NE(handled, std::string::npos) << out;
  EXPECT_EQ(job["warn_signal_why"], "the drain's deadline is in 2s");
  EXPECT_EQ(d_.Ctl({"resume"}).exit_code, 0);
}

// Jobs outlive ltd for 5 s: a restart keeps them; ltd away (SIGKILLed)
// longer ends them, the supervisor sending the job's --signal its DUR
// before.
class WarnSignalRestoreE2E : public WarnSignalE2E {
 protected:
  std::vector<std::string> DaemonArgs() override { return {"--restore-window", "5s"}; }
};

// The deadline is kept in the state dir: an ltd stopped and started again
// in between still sends the --signal and tears the job down when the
// drain said.
TEST_F(WarnSignalRestoreE2E, DrainDeadlineOutlivesARestartOfLtd) {
  const std::string id =
      SubmitDetached({"--devices", "1", "--signal", "USR1@2s", "--", "/bin/sh", "-c", kTrapUsr1});
  ASSERT_TRUE(WaitFor([&] { return After(d_.Ctl({"logs", id}).out, "start") > 0; }, 20s));
  CmdResult drain = d_.Ctl({"drain", "--reason", "test", "--deadline", "8s"});
  ASSERT_EQ(drain.exit_code, 0) << drain.err;
  EXPECT_EQ(d_.Stop(), 0);
  ASSERT_TRUE(d_.Start(DaemonArgs())) << d_.log();
  EXPECT_NE(d_.log().find("running jobs are torn down in "), std::string::npos) << d_.log();
  nlohmann::json job = d_.WaitEnded(id, 30s);
  EXPECT_EQ(job["state"], "CANCELLED") << job.dump(1);
  EXPECT_NE(job["root_cause"]["message"].get<std::string>().find("the drain's deadline came"),
            std::string::npos)
      << job.dump(1);
  EXPECT_NE(d_.Ctl({"logs", id}).out.find("usr1 "), std::string::npos)
      << "the --signal was not sent";
  EXPECT_EQ(job["warn_signal_why"], "the drain's deadline is in 2s");
  // resume forgets it: the next ltd has no deadline to keep.
  EXPECT_EQ(d_.Ctl({"resume"}).exit_code, 0);
  EXPECT_NE(access((d_.state_dir() + "/drain").c_str(), F_OK), 0);
  EXPECT_NE(access((d_.state_dir() + "/drain-deadline").c_str(), F_OK), 0);
}

TEST_F(WarnSignalRestoreE2E, TheSignalComesBeforeTheRestoreWindowEnds) {
  const std::string id =
      SubmitDetached({"--devices", "1", "--signal", "USR1@3s", "--", "/bin/sh", "-c", kTrapUsr1});
  ASSERT_TRUE(WaitFor([&] { return After(d_.Ctl({"logs", id}).out, "start") > 0; }, 20s));
  d_.KillHard();
  // The supervisor's teardown ends it once the window is over.
  const std::vector<pid_t> supervisors = Supervisors(d_.state_dir(), id);
  ASSERT_EQ(supervisors.size(), 1u);
  EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(supervisors[0]); }, 30s))
      << "the supervisor did not end after its restore window";
  ASSERT_TRUE(d_.Start(DaemonArgs())) << d_.log();
  nlohmann::json job = d_.WaitEnded(id, 30s);
  EXPECT_EQ(job["root_cause"]["reason"], "daemon_lost") << job.dump(1);
  EXPECT_EQ(job["warn_signal_why"],
            "ltd is away; the job is torn down in 3s unless it comes back (its --restore-window)")
      << job.dump(1);
  const std::string out = d_.Ctl({"logs", id}).out;
  const double start = After(out, "start"), usr1 = After(out, "usr1");
  ASSERT_GT(usr1, 0) << "the handler never ran:\n" << out;
  EXPECT_GT(usr1 - start, 1.0) << out;  // not at once: ~2 s after ltd went
}

}  // namespace
}  // namespace ltd::test
