// What users and admins see and steer (issue 23), end to end against a
// real ltd through the real ltctl: ps filters, drain and resume, log
// timestamps, --output files, the state dir's bound. Two throwaway users
// where whose job it is matters; needs root (skipped otherwise).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "harness.h"
#include "two_users_fixture.h"

namespace ltd::test {
namespace {

size_t Lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void ExpectOneLineError(const CmdResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(Has(r.err, needle)) << "wanted '" << needle << "' in: " << r.err;
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
}

// The ids in a `ps --json` output.
std::vector<std::string> Ids(const CmdResult& ps) {
  std::vector<std::string> ids;
  const auto list = nlohmann::json::parse(ps.out, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array()) return {"<not a JSON list: " + ps.out + ps.err + ">"};
  for (const auto& j : list) ids.push_back(j.value("id", ""));
  return ids;
}

class Controls : public TwoUsersTest {
 protected:
  Controls() : TwoUsersTest("ltc") {}
};

using Ids_ = std::vector<std::string>;

// ps --me, --user, --state, --no-trunc, as squeue's --me -u -t.
TEST_F(Controls, PsFiltersByOwnerAndState) {
  ASSERT_TRUE(d_.Start()) << d_.log();
  const std::string failed = SubmitAs(*a_, {"--devices", "1", "--", child_, "exit:3"});
  ASSERT_EQ(d_.WaitEnded(failed).value("state", ""), "FAILED");
  const std::string a_run = SubmitAs(*a_, {"--devices", "1", "--", child_, "hang"});
  const std::string b_run =
      SubmitAs(*b_, {"--devices", "1", "--", child_, std::string(200, 'x'), "hang"});
  ASSERT_TRUE(WaitState(a_run, "RUNNING"));
  ASSERT_TRUE(WaitState(b_run, "RUNNING"));

  EXPECT_EQ(Ids(CtlAs(*a_, {"--json", "ps", "--me"})), (Ids_{a_run}));
  EXPECT_EQ(Ids(CtlAs(*a_, {"--json", "ps", "--me", "-a"})), (Ids_{failed, a_run}));
  EXPECT_EQ(Ids(CtlAs(*b_, {"--json", "ps", "--me"})), (Ids_{b_run}));
  EXPECT_EQ(Ids(d_.Ctl({"--json", "ps", "--me"})), Ids_{}) << "root has no jobs of its own";
  EXPECT_EQ(Ids(CtlAs(*a_, {"--json", "ps", "--user", b_->name()})), (Ids_{b_run}));
  EXPECT_EQ(Ids(d_.Ctl({"--json", "ps", "-u", std::to_string(a_->uid()) + "," + b_->name()})),
            (Ids_{a_run, b_run}));
  // A named state lists finished jobs without -a.
  EXPECT_EQ(Ids(d_.Ctl({"--json", "ps", "--state", "failed"})), (Ids_{failed}));
  EXPECT_EQ(Ids(d_.Ctl({"--json", "ps", "-t", "FAILED,RUNNING", "--user", a_->name()})),
            (Ids_{failed, a_run}));
  EXPECT_EQ(Ids(d_.Ctl({"--json", "ps", "--state", "SUCCEEDED"})), Ids_{});

  // --no-trunc: the whole command in the table.
  const std::string cut = CtlAs(*b_, {"ps", "--me"}).out;
  EXPECT_FALSE(Has(cut, std::string(200, 'x'))) << cut;
  const std::string whole = CtlAs(*b_, {"ps", "--me", "--no-trunc"}).out;
  EXPECT_TRUE(Has(whole, std::string(200, 'x') + " hang")) << whole;

  ExpectOneLineError(d_.Ctl({"ps", "--state", "RUNNNING"}),
                     "--state 'RUNNNING' is not a job state");
  ExpectOneLineError(d_.Ctl({"ps", "--user", "no-such-user-ltd"}),
                     "--user 'no-such-user-ltd': no such user");
  ASSERT_EQ(d_.Ctl({"kill", a_run}).exit_code, 0);
  ASSERT_EQ(d_.Ctl({"kill", b_run}).exit_code, 0);
  d_.WaitEnded(a_run);
  d_.WaitEnded(b_run);
}

// drain / resume: only root or the admin group; while drained no job
// starts, running ones go on, pending ones say why; a restart stays
// drained; resume starts what waits.
TEST_F(Controls, DrainHoldsNewJobsUntilResumeThroughARestart) {
  // A's own group is the admin group; B is nobody.
  const std::vector<std::string> args = {"--admin-group", a_->name(), "--restore-window", "1m"};
  ASSERT_TRUE(d_.Start(args)) << d_.log();
  const std::string running = SubmitAs(*b_, {"--devices", "1", "--", child_, "hang"});
  ASSERT_TRUE(WaitState(running, "RUNNING"));

  ExpectOneLineError(CtlAs(*b_, {"drain", "--reason", "mine now"}),
                     "only root or the group " + a_->name() + " may drain ltd");
  CmdResult drained = CtlAs(*a_, {"drain", "--reason", "swap GPU 3"});
  ASSERT_EQ(drained.exit_code, 0) << drained.err;
  EXPECT_TRUE(Has(drained.out, "ltd is draining: swap GPU 3")) << drained.out;
  EXPECT_TRUE(Has(drained.out, "1 running go on")) << drained.out;

  const std::string waiting = SubmitAs(*b_, {"--devices", "1", "--", child_, "exit:0"});
  ASSERT_TRUE(WaitFor(
      [&] { return Has(CtlAs(*b_, {"ps"}).out, "PENDING (ltd is draining: swap GPU 3)"); }, 10s))
      << CtlAs(*b_, {"ps"}).out;
  EXPECT_EQ(d_.Show(running).value("state", ""), "RUNNING") << "a running job was stopped";

  // ltd stops and comes back: still drained.
  ASSERT_EQ(d_.Stop(), 0);
  ASSERT_TRUE(d_.Start(args)) << d_.log();
  ASSERT_TRUE(WaitState(running, "RUNNING")) << "the running job was not re-attached";
  ASSERT_TRUE(
      WaitFor([&] { return Has(d_.Ctl({"ps"}).out, "(ltd is draining: swap GPU 3)"); }, 10s))
      << d_.Ctl({"ps"}).out;
  EXPECT_EQ(d_.Show(waiting).value("state", ""), "PENDING");

  ExpectOneLineError(CtlAs(*b_, {"resume"}), "may resume ltd");
  CmdResult resumed = d_.Ctl({"resume"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(Has(resumed.out, "ltd takes jobs again")) << resumed.out;
  EXPECT_EQ(d_.WaitEnded(waiting).value("state", ""), "SUCCEEDED");
  ASSERT_EQ(d_.Ctl({"kill", running}).exit_code, 0);
  d_.WaitEnded(running);
}

// logs --timestamps and --since: ltd keeps when each line came.
TEST_F(Controls, LogsShowWhenEachLineCameAndSinceFilters) {
  ASSERT_TRUE(d_.Start()) << d_.log();
  const std::string go = bin_.path() + "/go";
  const std::string id = SubmitAs(
      *a_, {"--devices", "1", "--", child_, "print:2,waitfile:" + go + ",stderr:after,hang"});
  ASSERT_TRUE(WaitFor([&] { return Has(CtlAs(*a_, {"logs", id}).out, "line 1 of 2"); }, 20s));
  // A time between the two bursts, as the server's clock has it.
  char now[64];
  const auto t = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()) %
                  std::chrono::seconds(1);
  std::snprintf(now, sizeof now, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(us.count()));
  std::ofstream(go) << "go";
  ASSERT_TRUE(WaitFor([&] { return Has(CtlAs(*a_, {"logs", id}).out, "after"); }, 20s));

  const CmdResult plain = CtlAs(*a_, {"logs", id});
  EXPECT_EQ(plain.out, "[0] line 0 of 2\n[0] line 1 of 2\n[0] after\n");
  const CmdResult stamped = CtlAs(*a_, {"logs", id, "--timestamps"});
  const std::regex line(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z \[0\] (line [01] of 2|after)\n)");
  std::string rest = stamped.out;
  int matched = 0;
  for (std::smatch m; std::regex_search(rest, m, line) && m.position(0) == 0; rest = m.suffix())
    ++matched;
  EXPECT_EQ(matched, 3) << stamped.out;
  EXPECT_EQ(CtlAs(*a_, {"logs", id, "--rank", "0", "--since", now}).out, "after\n");
  EXPECT_EQ(CtlAs(*a_, {"logs", id, "--since", "1h"}).out, plain.out);
  EXPECT_TRUE(Has(CtlAs(*a_, {"logs", id, "--since", "1h", "-t"}).out, "Z [0] after\n"));
  ExpectOneLineError(CtlAs(*a_, {"logs", id, "--since", "yesterday"}),
                     "--since 'yesterday' is neither a duration nor a time");
  // Another user's log stays closed, times or not.
  EXPECT_EQ(CtlAs(*b_, {"logs", id, "--timestamps"}).exit_code, 1);
  ASSERT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  d_.WaitEnded(id);
}

// --output / --error: the files are opened as the job's user, with
// sbatch's %j %x %t %n %u; what the user may not write, a link, a FIFO, are refused at submit
// in one line (or, where the directory is known only once the job has an
// id, the job fails to start, saying why). Nothing is opened as root.
TEST_F(Controls, OutputFilesAreTheUsersOwn) {
  ASSERT_TRUE(d_.Start()) << d_.log();
  const std::string home = a_->home();
  // The files get the submitter's umask (not lt-shim's 077), as a shell's
  // `>` would make them: ltctl inherits this process's.
  const mode_t old_umask = umask(022);
  const std::string id =
      SubmitAs(*a_, {"--devices", "2", "--name", "tr.ain", "--output", "out-%j-%t-%x-%n-%u.log",
                     "--error", home + "/err-%j.log", "--", child_, "print:2,stderr:oops"});
  umask(027);
  const std::string id027 =
      SubmitAs(*a_, {"--devices", "1", "--output", "o027-%j.log", "--", child_, "print:1"});
  umask(old_umask);
  ASSERT_EQ(d_.WaitEnded(id).value("state", ""), "SUCCEEDED");
  ASSERT_EQ(d_.WaitEnded(id027).value("state", ""), "SUCCEEDED");
  const std::string out1 = home + "/out-" + id + "-1-tr.ain-0-" + a_->name() + ".log";
  EXPECT_EQ(ReadAll(out1), "line 0 of 2\nline 1 of 2\n");
  struct stat st {};
  ASSERT_EQ(stat(out1.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, a_->uid()) << "the output file is not its user's";
  EXPECT_EQ(st.st_mode & 0777, 0644u) << "umask 022";
  ASSERT_EQ(stat((home + "/o027-" + id027 + ".log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u) << "umask 027";
  const std::string err = ReadAll(home + "/err-" + id + ".log");
  EXPECT_TRUE(Has(err, "[0] oops\n") && Has(err, "[1] oops\n")) << err;
  EXPECT_EQ(d_.Show(id).value("output", ""), home + "/out-%j-%t-%x-%n-%u.log");

  // Hostile paths, each refused at submit with one line, nothing written.
  const std::string victim = b_->home() + "/victim";
  std::ofstream(victim) << "B's";
  ASSERT_EQ(chown(victim.c_str(), b_->uid(), b_->gid()), 0);
  chmod(victim.c_str(), 0666);  // even a file anyone may write: B's home is 0700
  const std::string link = home + "/link";
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  ASSERT_EQ(lchown(link.c_str(), a_->uid(), a_->gid()), 0);
  const std::string fifo = home + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(chown(fifo.c_str(), a_->uid(), a_->gid()), 0);
  const std::string rootfile = bin_.path() + "/rootfile";
  std::ofstream(rootfile) << "root's";
  chmod(rootfile.c_str(), 0644);
  struct Case {
    std::string path, says;
  };
  for (const Case& c : {Case{victim, "Permission denied"}, Case{link, "is a symbolic link"},
                        Case{fifo, "is a FIFO"}, Case{rootfile, "Permission denied"},
                        Case{"/etc/ltd-%j.log", "Permission denied"},
                        Case{home + "/x-%q.log", "'%q' is no pattern"}}) {
    ExpectOneLineError(
        CtlAs(*a_, {"submit", "-d", "--devices", "1", "--output", c.path, "--", child_, "print:1"}),
        c.says);
  }
  EXPECT_EQ(ReadAll(victim), "B's");
  EXPECT_EQ(ReadAll(rootfile), "root's");

  // A directory known only with the id: the job fails to start, saying why.
  const std::string late = SubmitAs(
      *a_, {"--devices", "1", "--output", b_->home() + "/%j/out", "--", child_, "print:1"});
  const nlohmann::json ended = d_.WaitEnded(late);
  EXPECT_EQ(ended.value("state", ""), "FAILED") << ended.dump();
  EXPECT_TRUE(Has(ended["root_cause"].value("message", ""), "--output: open(")) << ended.dump();
  EXPECT_TRUE(Has(ended["root_cause"].value("message", ""), "Permission denied")) << ended.dump();
}

// --max-state-bytes: past the bound the oldest finished jobs go first;
// when the live jobs' logs alone fill it, a submit is refused in one line.
TEST_F(Controls, StateDirBoundPrunesTheOldestThenRefuses) {
  ASSERT_TRUE(d_.Start({"--max-state-bytes", "2M", "--job-max-log-bytes", "1M"})) << d_.log();
  // About 500K of log each (a stamp and "[0] " before each line).
  std::vector<std::string> done;
  for (int i = 0; i < 5; ++i) {
    done.push_back(SubmitAs(*a_, {"--devices", "1", "--", child_, "print:10000"}));
    ASSERT_EQ(d_.WaitEnded(done.back()).value("state", ""), "SUCCEEDED");
  }
  Ids_ kept = Ids(d_.Ctl({"--json", "ps", "-a"}));
  EXPECT_EQ(std::count(kept.begin(), kept.end(), done.front()), 0) << "the oldest was kept";
  EXPECT_EQ(std::count(kept.begin(), kept.end(), done.back()), 1) << "the newest was pruned";
  EXPECT_LT(kept.size(), done.size());

  // Live jobs of about 1M of log each, until one is refused.
  std::vector<std::string> live;
  CmdResult refused;
  for (int i = 0; i < 6 && refused.exit_code != 1; ++i) {
    refused = CtlAs(*a_, {"submit", "-d", "--devices", "1", "--", child_, "print:40000,hang"});
    if (refused.exit_code != 0) break;
    live.push_back(TrimEnd(refused.out));
    ASSERT_TRUE(WaitFor(
        [&] {
          return Has(CtlAs(*a_, {"logs", live.back(), "--tail", "1"}).out, "line 39999");
        },
        30s));
  }
  EXPECT_GE(live.size(), 2u);
  ExpectOneLineError(refused, "the state dir is full");
  EXPECT_TRUE(Has(refused.err, "--max-state-bytes 2048K")) << refused.err;
  EXPECT_EQ(Ids(d_.Ctl({"--json", "ps", "--state", "SUCCEEDED"})), Ids_{})
      << "finished jobs were kept while live ones needed the room";
  for (const std::string& id : live) ASSERT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  for (const std::string& id : live) d_.WaitEnded(id);
}

}  // namespace
}  // namespace ltd::test
