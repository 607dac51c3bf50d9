// Another user's job (issue 28, ltd's --private-data): `ps` and `show`,
// human and --json, of A's job as B show its owner, name, state, devices,
// times and root-cause kind; its cwd, arguments, output paths and error
// text only to A, root and the admin group, and to everyone under
// --private-data no. Three throwaway users and a group; needs root.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "harness.h"
#include "two_users_fixture.h"

namespace ltd::test {
namespace {

class Privacy : public TwoUsersTest {
 protected:
  Privacy() : TwoUsersTest("ltp") {}
  void SetUp() override {
    TwoUsersTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    group_ = "ltp" + std::to_string(getpid()) + "g";
    CmdResult g = RunCommand({"/usr/sbin/groupadd", group_}, {}, 60s);
    ASSERT_EQ(g.exit_code, 0) << "groupadd " << group_ << ": " << g.err;
    admin_ = std::make_unique<TestUser>("ltp" + std::to_string(getpid()) + "c",
                                        std::vector<std::string>{group_});
    ASSERT_TRUE(admin_->ok()) << admin_->error();
  }
  void TearDown() override {
    TwoUsersTest::TearDown();
    if (admin_ != nullptr) {
      EXPECT_TRUE(admin_->Remove()) << admin_->error();
    }
    admin_.reset();
    if (!group_.empty()) {
      EXPECT_EQ(RunCommand({"/usr/sbin/groupdel", group_}, {}, 60s).exit_code, 0) << group_;
    }
  }

  // `show --json` and `ps --json` (its one entry for `id`) as `u`.
  nlohmann::json ShowAs(const TestUser& u, const std::string& id) {
    CmdResult r = CtlAs(u, {"show", id, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }
  nlohmann::json PsAs(const TestUser& u, const std::string& id) {
    CmdResult r = CtlAs(u, {"ps", "--all", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (const auto& j : nlohmann::json::parse(r.out, nullptr, false)) {
      if (j.value("id", "") == id) return j;
    }
    ADD_FAILURE() << "job " << id << " not in: " << r.out;
    return nlohmann::json::object();
  }

  // What only the owner's side sees is all there.
  void ExpectDetails(const nlohmann::json& j, const std::string& who) {
    EXPECT_EQ(j.value("cwd", ""), a_->home()) << who << ": " << j.dump();
    EXPECT_EQ(j["argv"].size(), 2u) << who << ": " << j.dump();
    EXPECT_EQ(j.value("output", ""), a_->home() + "/out-%j.log") << who << ": " << j.dump();
    EXPECT_TRUE(Has(j["root_cause"].value("message", ""), "secret-oops"))
        << who << ": " << j.dump();
    EXPECT_TRUE(j["hidden"].empty()) << who << ": " << j.dump();
  }
  // ... and none of it reaches another user.
  void ExpectHidden(const nlohmann::json& j, const std::string& id) {
    ASSERT_TRUE(j.is_object()) << j.dump();
    EXPECT_EQ(j.value("id", ""), id);
    EXPECT_EQ(j.value("user", ""), a_->name()) << j.dump();
    EXPECT_EQ(j.value("state", ""), "FAILED") << j.dump();
    EXPECT_EQ(j.value("devices", 0), 1) << j.dump();
    EXPECT_FALSE(j["submitted_at"].is_null()) << j.dump();
    EXPECT_EQ(j["root_cause"].value("reason", ""), "exited") << j.dump();
    for (const char* key : {"cwd", "output"}) EXPECT_FALSE(j.contains(key)) << key << j.dump();
    EXPECT_FALSE(j["root_cause"].contains("message")) << j.dump();
    for (const auto& r : j["ranks"]) EXPECT_FALSE(r.contains("error")) << j.dump();
    ASSERT_EQ(j["argv"].size(), 1u) << j.dump();
    EXPECT_EQ(j["argv"][0], child_);
    const std::string text = j.dump();
    EXPECT_FALSE(Has(text, "secret-oops")) << text;
    EXPECT_FALSE(Has(text, "exit:3")) << text;
    EXPECT_FALSE(Has(text, a_->home())) << text;
    for (const char* path : {"cwd", "argv", "output", "root_cause.message", "ranks.error"}) {
      EXPECT_NE(std::find(j["hidden"].begin(), j["hidden"].end(), path), j["hidden"].end())
          << path << " not in hidden: " << text;
    }
  }

  std::string group_;
  std::unique_ptr<TestUser> admin_;
};

TEST_F(Privacy, AnotherUsersJobShowsItsOwnerStateAndTimesButNotItsDetails) {
  ASSERT_TRUE(d_.Start({"--devices", "2", "--admin-group", group_})) << d_.log();
  const std::string id = SubmitAs(*a_, {"--devices", "1", "--output", a_->home() + "/out-%j.log",
                                        "--", child_, "line:error secret-oops,exit:3"});
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(d_.WaitEnded(id, 30s).value("state", ""), "FAILED");

  ExpectDetails(ShowAs(*a_, id), "owner");
  ExpectDetails(d_.Show(id), "root");
  ExpectDetails(ShowAs(*admin_, id), "admin group");
  ExpectDetails(PsAs(*admin_, id), "admin group ps");

  ExpectHidden(ShowAs(*b_, id), id);
  ExpectHidden(PsAs(*b_, id), id);
  // The human views say what is hidden and why, and show none of it.
  CmdResult show = CtlAs(*b_, {"show", id});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_TRUE(Has(show.out, "(hidden: not your job)")) << show.out;
  EXPECT_TRUE(Has(show.out, "exited with code 3")) << show.out;
  EXPECT_FALSE(Has(show.out, "secret-oops") || Has(show.out, "exit:3")) << show.out;
  CmdResult ps = CtlAs(*b_, {"ps", "--all", "--no-trunc"});
  EXPECT_FALSE(Has(ps.out, "exit:3")) << ps.out;

  // --private-data no: everyone sees them.
  ASSERT_EQ(d_.Stop(), 0);
  ASSERT_TRUE(d_.Start({"--devices", "2", "--private-data", "no"})) << d_.log();
  ExpectDetails(ShowAs(*b_, id), "anyone, --private-data no");
}

}  // namespace
}  // namespace ltd::test
