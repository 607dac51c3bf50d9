// The queue end to end (issue 12): `submit --after` chains and the reasons
// `ps` and `show` give for a pending job, through the real ltctl.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

const std::string kChild = TestChildPath();

// An RFC 3339 UTC time as show prints it ("2026-11-30T03:59:08.5Z", fewer
// digits when they are zero) in seconds since the epoch.
double Seconds(const std::string& t) {
  std::tm tm{};
  const char* rest = strptime(t.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  EXPECT_NE(rest, nullptr) << t;
  if (rest == nullptr) return 0;
  const double frac = *rest == '.' ? std::strtod(rest, nullptr) : 0;
  return static_cast<double>(timegm(&tm)) + frac;
}

class Queue : public E2E {
 protected:
  std::vector<std::string> DaemonArgs() override { return {"--devices", "2"}; }
};

TEST_F(Queue, AfterChainRunsInOrderOnSuccess) {
  const std::string first =
      SubmitDetached({"--name", "prep", "--devices", "1", "--", kChild, "sleep:300,exit:0"});
  const std::string second =
      SubmitDetached({"--after", "prep", "--devices", "1", "--", kChild, "exit:0"});
  nlohmann::json shown = d_.Show(second);
  // Waiting for prep, unless a slow machine took longer than prep's sleep
  // (prep not over when looked at after: it was not over before either).
  if (!d_.Show(first).value("ended_at", nlohmann::json()).is_string()) {
    EXPECT_EQ(shown["pending_reason"], "after job " + first) << shown.dump();
  }
  EXPECT_EQ(shown["after"], nlohmann::json::array({first}));
  EXPECT_EQ(d_.WaitEnded(second)["state"], "SUCCEEDED");
  const nlohmann::json a = d_.Show(first), b = d_.Show(second);
  EXPECT_EQ(a["state"], "SUCCEEDED");
  // The second started only once the first had ended.
  EXPECT_GE(Seconds(b["started_at"]), Seconds(a["ended_at"])) << a.dump() << b.dump();
}

TEST_F(Queue, AfterAFailureTheJobIsCancelledUnrunAndShowSaysWhy) {
  const std::string ran = d_.dir() + "/ran";
  const std::string go = d_.dir() + "/go";
  // It fails only once every job is submitted: a dependency that already
  // failed is refused at submit instead.
  const std::string first =
      SubmitDetached({"--devices", "1", "--", kChild, "waitfile:" + go + ",exit:3"});
  const std::string second =
      SubmitDetached({"--after", first, "--devices", "1", "--", kChild, "pidfile:" + ran});
  const std::string third =
      SubmitDetached({"--after", second, "--devices", "1", "--", kChild, "pidfile:" + ran});
  std::ofstream(go) << "go";
  CmdResult w = d_.Ctl({"wait", third});
  EXPECT_EQ(w.exit_code, 1) << w.err;
  CmdResult show = d_.Ctl({"show", third});
  EXPECT_NE(
      show.out.find("never ran: job " + second + ", which it was to run after, ended CANCELLED"),
      std::string::npos)
      << show.out;
  for (const std::string& id : {second, third}) {
    nlohmann::json j = d_.Show(id);
    EXPECT_EQ(j["state"], "CANCELLED") << j.dump();
    EXPECT_EQ(j["root_cause"]["reason"], "dependency_failed") << j.dump();
    EXPECT_TRUE(j["ranks"].empty()) << j.dump();
  }
  EXPECT_EQ(access(ran.c_str(), F_OK), -1) << "a job ran after a failed dependency";
}

TEST_F(Queue, AfterACancelTheJobIsCancelled) {
  const std::string first = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  const std::string second =
      SubmitDetached({"--after", first, "--devices", "1", "--", kChild, "exit:0"});
  ASSERT_EQ(d_.Ctl({"kill", first}).exit_code, 0);
  nlohmann::json j = d_.WaitEnded(second);
  EXPECT_EQ(j["state"], "CANCELLED");
  EXPECT_EQ(j["root_cause"]["reason"], "dependency_failed");
}

// --dependency, as sbatch's: afterany runs after a failure, afternotok
// runs after one and is cancelled after a success, singleton waits for the
// user's earlier job of the same name; show spells them as sbatch does.
// Off until fixed (issue 38): fails on the merged tree, not yet explained.
TEST_F(Queue, DependencyKindsAsSbatchs) {
  const std::string go = d_.dir() + "/dep-go";
  const std::string fails =
      SubmitDetached({"--devices", "1", "--", kChild, "waitfile:" + go + ",exit:3"});
  const std::string ok =
      SubmitDetached({"--name", "solo", "--devices", "1", "--", kChild, "waitfile:" + go});
  const std::string any = SubmitDetached(
      {"--dependency", "afterany:" + fails, "--devices", "1", "--", kChild, "exit:0"});
  const std::string notok = SubmitDetached(
      {"--dependency", "afternotok:" + fails, "--devices", "1", "--", kChild, "exit:0"});
  const std::string never = SubmitDetached(
      {"--dependency", "afternotok:" + ok, "--devices", "1", "--", kChild, "exit:0"});
  const std::string single = SubmitDetached(
      {"--name", "solo", "--dependency", "singleton", "--devices", "1", "--", kChild, "exit:0"});
  EXPECT_EQ(d_.Show(single)["after_any"], nlohmann::json::array({ok}));
  CmdResult show = d_.Ctl({"show", notok});
  EXPECT_NE(show.out.find("afternotok:" + fails), std::string::npos) << show.out;
  // The singleton shares its name with the job it waits for: the name
  // alone no longer says which.
  CmdResult ambiguous = d_.Ctl({"show", "solo"});
  EXPECT_EQ(ambiguous.exit_code, 1);
  EXPECT_NE(ambiguous.err.find("name 'solo' is ambiguous: jobs "), std::string::npos)
      << ambiguous.err;
  EXPECT_NE(ambiguous.err.find("(singletons) are live; use the job id"), std::string::npos)
      << ambiguous.err;
  std::ofstream(go) << "go";
  EXPECT_EQ(d_.WaitEnded(any)["state"], "SUCCEEDED");
  EXPECT_EQ(d_.WaitEnded(notok)["state"], "SUCCEEDED");
  const nlohmann::json cancelled = d_.WaitEnded(never);
  EXPECT_EQ(cancelled["state"], "CANCELLED") << cancelled.dump();
  EXPECT_EQ(cancelled["root_cause"]["reason"], "dependency_failed");
  EXPECT_EQ(d_.WaitEnded(single)["state"], "SUCCEEDED");
  EXPECT_GE(Seconds(d_.Show(single)["started_at"]), Seconds(d_.Show(ok)["ended_at"]));

  CmdResult r =
      d_.Ctl({"submit", "--dependency", "after:" + ok, "--devices", "1", "--", kChild, "exit:0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("a Slurm dependency ltd does not have"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = d_.Ctl({"submit", "--dependency", "singleton", "--devices", "1", "--", kChild, "exit:0"});
  EXPECT_NE(r.err.find("give --name"), std::string::npos) << r.err;
}

TEST_F(Queue, UnknownOrFailedDependencyIsRefusedWithOneLine) {
  CmdResult r = d_.Ctl({"submit", "--after", "777", "--devices", "1", "--", kChild, "exit:0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ltctl: --after 777: no job '777'; `ltctl ps -a` lists them\n");
  const std::string failed = SubmitDetached({"--devices", "1", "--", kChild, "exit:2"});
  d_.WaitEnded(failed);
  r = d_.Ctl({"submit", "--after", failed, "--devices", "1", "--", kChild, "exit:0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already ended FAILED, so this job would never run"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // No cycle can be written: --after names only jobs that exist, so a job
  // cannot wait for itself or for a job submitted after it.
  r = d_.Ctl({"submit", "--after", std::to_string(std::stoi(failed) + 1), "--devices", "1", "--",
              kChild, "exit:0"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("no job"), std::string::npos) << r.err;
}

TEST_F(Queue, PsAndShowSayWhyAJobWaits) {
  const std::string big = SubmitDetached({"--devices", "2", "--", kChild, "hang"});
  const std::string waits = SubmitDetached({"--devices", "2", "--", kChild, "exit:0"});
  const std::string after =
      SubmitDetached({"--after", big, "--devices", "1", "--", kChild, "exit:0"});
  CmdResult ps = d_.Ctl({"ps"});
  EXPECT_NE(ps.out.find("PENDING (needs 2 devices, 0 free)"), std::string::npos) << ps.out;
  EXPECT_NE(ps.out.find("PENDING (after job " + big + ")"), std::string::npos) << ps.out;
  CmdResult show = d_.Ctl({"show", waits});
  EXPECT_NE(show.out.find("needs 2 devices, 0 free"), std::string::npos) << show.out;
  EXPECT_EQ(d_.Show(after)["pending_reason"], "after job " + big);
  EXPECT_EQ(d_.Show(big)["pending_reason"], "");
  ASSERT_EQ(d_.Ctl({"kill", big}).exit_code, 0);
  EXPECT_EQ(d_.WaitEnded(waits)["state"], "SUCCEEDED");
  EXPECT_EQ(d_.WaitEnded(after)["root_cause"]["reason"], "dependency_failed");
}

}  // namespace
}  // namespace ltd::test
