// The state dir's bounds shared per user (--keep-jobs, --max-state-bytes):
// which finished job goes first, and whose submit a full state dir
// refuses. FinishedJobs alone, then through the job table with fakes.
#include "finished_jobs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "manager_fixture.h"

namespace ltd::test {
namespace {

constexpr uid_t kA = 1001, kB = 1002, kC = 1003;
constexpr uint64_t kM = 1 << 20;

// Prunes as the job table does; the ids in the order they went.
std::vector<std::string> Prune(FinishedJobs& f, size_t keep, uint64_t max,
                               const FinishedJobs::Usage& live = {}) {
  std::vector<std::string> gone;
  while (auto id = f.NextToPrune(keep, max, live)) {
    gone.push_back(*id);
    f.Remove(*id);
    if (gone.size() > 100) break;  // a rule that never stops fails below
  }
  return gone;
}

using Ids = std::vector<std::string>;

TEST(FinishedJobs, OneUserLosesTheOldestFirst) {
  FinishedJobs f;
  for (int i = 1; i <= 5; ++i) f.Add(std::to_string(i), kA, kM);
  EXPECT_EQ(Prune(f, 3, 0), (Ids{"1", "2"}));
  EXPECT_EQ(f.size(), 3u);
  EXPECT_EQ(Prune(f, 10, 2 * kM), (Ids{"3"}));
  EXPECT_EQ(f.bytes(), 2 * kM);
  EXPECT_EQ(Prune(f, 10, 2 * kM), Ids{});
}

// Four chatty jobs of A and one quiet job of B, the oldest: by bytes and
// by count, A's own go.
TEST(FinishedJobs, TheQuietUsersRecordsSurviveTheChattyOnes) {
  FinishedJobs f;
  f.Add("1", kB, 8 * 1024);
  for (int i = 2; i <= 5; ++i) f.Add(std::to_string(i), kA, kM);
  EXPECT_EQ(Prune(f, 10000, 2 * kM), (Ids{"2", "3", "4"}));
  EXPECT_EQ(f.size(), 2u);
  FinishedJobs count;
  count.Add("1", kB, 0);
  for (int i = 2; i <= 6; ++i) count.Add(std::to_string(i), kA, 0);
  EXPECT_EQ(Prune(count, 3, 0), (Ids{"2", "3", "4"}));
}

// A user over their share through live jobs alone: nobody else's finished
// job goes, even though the bound is passed.
TEST(FinishedJobs, LiveJobsOfOneUserPruneNobodyWithinTheirShare) {
  FinishedJobs f;
  f.Add("1", kB, kM / 2);
  f.Add("2", kC, kM / 2);
  EXPECT_EQ(Prune(f, 10000, 3 * kM, {{kA, 5 * kM}}), Ids{});
  EXPECT_EQ(f.size(), 2u);
  // Over their share themselves, they lose their own.
  f.Add("3", kB, 2 * kM);
  EXPECT_EQ(Prune(f, 10000, 3 * kM, {{kA, 5 * kM}}), (Ids{"1", "3"}));
}

// The furthest over their share goes first; then the next.
TEST(FinishedJobs, TheFurthestOverTheirShareGoesFirst) {
  FinishedJobs f;
  f.Add("1", kB, 3 * kM);
  f.Add("2", kA, 5 * kM);
  f.Add("3", kC, 1 * kM);
  f.Add("4", kB, 1 * kM);
  // 10M over 3 users of a 6M bound: 2M each; A is 3M over, B 2M.
  EXPECT_EQ(Prune(f, 10000, 6 * kM), (Ids{"2"}));
  // B (4M) over a 1.5M share loses its oldest, and is within it then.
  EXPECT_EQ(Prune(f, 10000, 3 * kM), (Ids{"1"}));
  // B and C as far over: the older job goes.
  EXPECT_EQ(Prune(f, 10000, kM), (Ids{"3"}));
  EXPECT_EQ(f.size(), 1u);
}

TEST(FinishedJobs, ARecoveredTableIsOldestByIdAndTiesGoToTheOlder) {
  FinishedJobs f;
  f.Add("10", kA, kM);
  f.Add("9", kB, kM);
  f.Add("2", kA, kM);
  f.Add("11", kB, kM);
  f.SortById();
  EXPECT_EQ(Prune(f, 3, 0), (Ids{"2"}));  // A and B hold 2 each: A's oldest is older
  EXPECT_EQ(Prune(f, 2, 0), (Ids{"9"}));  // B holds 2
}

TEST(FinishedJobs, ASharesWordsAreTheUsersOwn) {
  FinishedJobs f;
  f.Add("1", kB, kM);
  f.Add("2", kA, kM);
  const FinishedJobs::Share a = f.ShareOf(kA, 4 * kM, {{kA, 2 * kM}});
  EXPECT_EQ(a.total, 4 * kM);
  EXPECT_EQ(a.used, 3 * kM);
  EXPECT_EQ(a.live_used, 2 * kM);
  EXPECT_EQ(a.users, 2u);
  EXPECT_EQ(a.share, 2 * kM);
  const FinishedJobs::Share c = f.ShareOf(kC, 4 * kM, {{kA, 2 * kM}});
  EXPECT_EQ(c.users, 3u) << "a newcomer has a share too";
  EXPECT_EQ(c.used, 0u);
}

// Through the job table: A's live jobs fill the state dir; B, within their
// share, is accepted, and A is refused in one line that says what to do.
class StateShareTest : public ManagerFixture {
 protected:
  StateShareTest() : ManagerFixture("share") {
    ManagerConfig config;
    config.placement.slots = 8;
    config.max_state_bytes = 2 * kM;
    RunnerConfig runner;
    runner.restart_backoff = Millis(0);
    Make(config, runner);
  }
  JobSpec Spec(uid_t uid) {
    JobSpec s;
    s.devices = 1;
    s.argv = {"/bin/true"};
    s.cwd = "/";
    s.uid = uid;
    s.gid = uid;
    s.grace = Millis(1000);
    return s;
  }
  void Grow(const std::string& id, uint64_t bytes) {
    std::ofstream(store_->JobDir(id) + "/filler", std::ios::binary) << std::string(bytes, 'x');
    // A running job's dir is measured again at most once a second.
    clock_.Advance(LiveBytes::kRemeasure);
  }
  void End(const std::string& id) {
    launcher_.Exit(id, 0, 0);
    clock_.Advance(Millis(0));
  }
};

TEST_F(StateShareTest, OneUsersLiveJobsRefuseOnlyThem) {
  const std::string quiet = Submit(Spec(kB), "bob");
  End(quiet);
  const std::string chatty = Submit(Spec(kA), "alice");
  Grow(chatty, 3 * kM);
  auto refused = manager_->Submit(Spec(kA), "alice");
  ASSERT_FALSE(refused.ok());
  const std::string message(refused.status().message());
  EXPECT_NE(message.find("the state dir is full: your jobs take"), std::string::npos) << message;
  EXPECT_NE(message.find("shared by 2 users"), std::string::npos) << message;
  EXPECT_NE(message.find("ltctl kill"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  // B's record is kept, and B's next job is taken.
  EXPECT_TRUE(manager_->Resolve(quiet).ok());
  EXPECT_TRUE(std::filesystem::exists(store_->JobDir(quiet)));
  const std::string next = Submit(Spec(kB), "bob");
  EXPECT_FALSE(next.empty());
  // Once A's job ended, A's own finished job goes first, and A may submit.
  End(chatty);
  EXPECT_FALSE(manager_->Resolve(chatty).ok()) << "A's finished job was kept over the bound";
  EXPECT_TRUE(manager_->Resolve(quiet).ok());
  EXPECT_TRUE(manager_->Submit(Spec(kA), "alice").ok());
}

}  // namespace
}  // namespace ltd::test
