// A rank's child stuck in the kernel, end to end, as two throwaway users
// see it: the v1 freezer holds the child (in D state, deaf to SIGKILL)
// while the rank itself dies. Root's kill still ends the job with its
// record (the child listed as the rank's descendant), the admin's
// --unkillable-program runs, and the quarantined device counts against
// its owner: under --user-max-running-jobs 1 the owner's next job waits
// with a reason while another user's runs, and `ltctl gpus` names the
// owner without NVML. Thawed, the child dies and everything comes back.
// The test thaws and removes the cgroup it makes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "file_io.h"
#include "freezer.h"
#include "harness.h"
#include "two_users_fixture.h"

namespace ltd::test {
namespace {

class UnkillableUsers : public TwoUsersTest {
 protected:
  UnkillableUsers() : TwoUsersTest("ltu") {}
  void SetUp() override {
    TwoUsersTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    program_out_ = d_.dir() + "/unkillable.out";
    program_ = d_.dir() + "/unkillable.sh";
    std::ofstream(program_) << "#!/bin/sh\nenv | grep '^LTD_' | sort > " << program_out_ << "\n";
    chmod(program_.c_str(), 0755);
  }
  std::string program_, program_out_;
};

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(UnkillableUsers, ARanksChildInDStateEndsTheJobAndItsSlotStaysItsOwners) {
  Freezer freezer;
  if (!freezer.ok()) GTEST_SKIP() << "no cgroup v1 freezer here";
  ASSERT_TRUE(d_.Start({"--devices", "2", "--user-max-running-jobs", "1", "--unkillable-program",
                        program_, "--unkillable-program-timeout", "10s"}))
      << d_.log();
  // The rank writes its pid, then its child writes its own.
  const std::string pidfile = a_->home() + "/pids";
  const std::string id = SubmitAs(*a_, {"--devices", "1", "--grace", "1s", "--", child_,
                                        "pidfile:" + pidfile + ",fork:1,hang"});
  ASSERT_FALSE(id.empty());
  std::string text;
  ASSERT_TRUE(WaitFor(
      [&] {
        text = ReadWholeFile(pidfile).value_or("");
        return Count(text, "\n") >= 2;
      },
      20s))
      << text;
  std::istringstream pids(text);
  pid_t rank = 0, child = 0;
  pids >> rank >> child;
  ASSERT_GT(child, 0) << text;
  ASSERT_TRUE(freezer.Freeze(child));

  // Root's kill: the rank dies of its SIGTERM, the child does not of the
  // SIGKILL that follows; the job ends all the same, cause kept.
  CmdResult kill = d_.Ctl({"kill", id});
  ASSERT_EQ(kill.exit_code, 0) << kill.err;
  nlohmann::json j = d_.WaitEnded(id, 30s);
  EXPECT_EQ(j["state"], "CANCELLED") << j.dump();
  EXPECT_EQ(j["root_cause"]["reason"], "cancelled") << j.dump();
  ASSERT_EQ(j["unkillable"].size(), 1u) << j.dump();
  EXPECT_EQ(j["unkillable"][0]["pid"], child);
  EXPECT_EQ(j["unkillable"][0]["rank"], 0);
  EXPECT_EQ(j["unkillable"][0]["descendant"], true);
  EXPECT_EQ(j["unkillable"][0]["state"], "D") << j.dump();
  EXPECT_TRUE(j["unkillable"][0]["gone_at"].is_null()) << j.dump();
  CmdResult show = d_.Ctl({"show", id});
  EXPECT_TRUE(Has(show.out, "unkillable: pid " + std::to_string(child) + " (of rank 0) in D"))
      << show.out;

  // The admin's program ran, told which process and that it is a rank's.
  ASSERT_TRUE(WaitFor([&] { return !ReadWholeFile(program_out_).value_or("").empty(); }, 10s));
  const std::string env = ReadWholeFile(program_out_).value_or("");
  EXPECT_TRUE(Has(env, "LTD_JOB_ID=" + id + "\n")) << env;
  EXPECT_TRUE(Has(env, "LTD_UNKILLABLE_PIDS=" + std::to_string(child) + "\n")) << env;
  EXPECT_TRUE(Has(env, "LTD_JOB_USER=" + a_->name() + "\n")) << env;
  EXPECT_TRUE(Has(env, " descendant")) << env;

  // The quarantined slot is still A's: A's next job waits for A's limit
  // (one slot is free), B's runs.
  const std::string next = SubmitAs(*a_, {"--devices", "1", "--", child_, "exit:0"});
  const std::string other = SubmitAs(*b_, {"--devices", "1", "--", child_, "exit:0"});
  EXPECT_EQ(d_.WaitEnded(other, 30s)["state"], "SUCCEEDED");
  nlohmann::json waiting = d_.Show(next);
  EXPECT_EQ(waiting["state"], "PENDING") << waiting.dump();
  EXPECT_TRUE(Has(waiting.value("pending_reason", ""), "user limit")) << waiting.dump();
  EXPECT_TRUE(Has(waiting.value("pending_reason", ""), "would not die")) << waiting.dump();
  CmdResult gpus = d_.Ctl({"gpus", "--json"});
  const auto slots = nlohmann::json::parse(gpus.out, nullptr, false);
  int owned = 0;
  for (const auto& s : slots.value("slots", nlohmann::json::array())) {
    if (s.value("state", "") != "QUARANTINED") continue;
    EXPECT_EQ(s.value("user", ""), a_->name()) << gpus.out;
    EXPECT_EQ(s.value("job_id", ""), id) << gpus.out;
    ++owned;
  }
  EXPECT_EQ(owned, 1) << gpus.out;
  EXPECT_TRUE(Has(d_.Ctl({"gpus"}).out, a_->name())) << d_.Ctl({"gpus"}).out;
  // Said once the supervisor gave up on it, not once a second.
  EXPECT_LE(Count(d_.log(), "killing again"), 2u) << d_.log();

  // Thawed, it dies of its pending SIGKILL: A's slot and limit come back.
  freezer.Thaw();
  EXPECT_EQ(d_.WaitEnded(next, 30s)["state"], "SUCCEEDED");
  EXPECT_FALSE(d_.Show(id)["unkillable"][0]["gone_at"].is_null());
}

}  // namespace
}  // namespace ltd::test
