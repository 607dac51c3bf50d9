// The state dir: who may read what, ids that are never handed out twice,
// and error files that are the user's and read as such.
#include "job_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace ltd::test {
namespace {

class JobStoreTest : public ::testing::Test {
 protected:
  JobStoreTest() {
    char tmpl[] = "/tmp/ltd-store.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~JobStoreTest() override { std::filesystem::remove_all(dir_); }

  static mode_t Mode(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }
  static std::string Slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string dir_;
};

TEST_F(JobStoreTest, OthersMayTraverseButReadNothing) {
  chmod(dir_.c_str(), 0755);  // as an older ltd left it
  auto store = JobStore::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(Mode(dir_), 0711u);
  EXPECT_EQ(Mode(dir_ + "/jobs"), 0711u);
  ASSERT_TRUE(store->CreateJobDir("1").ok());
  EXPECT_EQ(Mode(store->JobDir("1")), 0711u);
  // errors/ is nobody's but root's until the job starts.
  struct stat st {};
  ASSERT_EQ(stat((store->JobDir("1") + "/errors").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
  Job job;
  job.id = "1";
  ASSERT_TRUE(store->Save(job).ok());
  EXPECT_EQ(Mode(store->JobDir("1") + "/job.json"), 0600u);
}

// A restart reads the records on several threads: each readable one
// reaches the callback once, an unreadable one never.
TEST_F(JobStoreTest, ForEachOnThreadsGivesEveryReadableRecordOnce) {
  auto store = JobStore::Open(dir_);
  ASSERT_TRUE(store.ok()) << store.status();
  for (int i = 1; i <= 200; ++i) {
    const std::string id = std::to_string(i);
    ASSERT_TRUE(store->CreateJobDir(id).ok());
    Job job;
    job.id = id;
    job.spec.name = "job-" + id;
    ASSERT_TRUE(store->Save(job).ok());
  }
  std::ofstream(store->JobDir("7") + "/job.json", std::ios::trunc) << "{not json";
  for (int threads : {1, 4}) {
    std::mutex mu;
    std::multiset<std::string> seen;
    store->ForEach(
        [&](Job&& job) {
          EXPECT_EQ(job.spec.name, "job-" + job.id);
          std::lock_guard lock(mu);
          seen.insert(job.id);
        },
        threads);
    EXPECT_EQ(seen.size(), 199u) << threads << " threads";
    EXPECT_EQ(seen.count("7"), 0u);
    for (int i = 1; i <= 200; ++i) {
      if (i != 7) {
        EXPECT_EQ(seen.count(std::to_string(i)), 1u) << i;
      }
    }
  }
}

// A finished job's errors/ dir is root's: its user writes no more there.
TEST_F(JobStoreTest, AnEndedJobsErrorDirIsClosedToItsUser) {
  if (geteuid() != 0) GTEST_SKIP() << "chown to another user needs root";
  auto store = JobStore::Open(dir_);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(store->CreateJobDir("1").ok());
  ASSERT_TRUE(store->OpenErrorDir("1", 4242, 4343, std::nullopt).ok());
  struct stat st {};
  ASSERT_EQ(stat((store->JobDir("1") + "/errors").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4242u) << "the running job's user writes there";
  EXPECT_EQ(st.st_gid, 4343u);
  ASSERT_TRUE(store->CloseErrorDir("1").ok());
  ASSERT_EQ(stat((store->JobDir("1") + "/errors").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_TRUE(store->CloseErrorDir("2").ok()) << "no dir: nothing to close";
}

// Removing a job's dir is one rename for the caller (the loop); its files
// go on the store's thread, however many a user left.
TEST_F(JobStoreTest, RemovalIsARenameAndTheFilesGoLater) {
  auto store = JobStore::Open(dir_);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(store->CreateJobDir("1").ok());
  for (int i = 0; i < 200; ++i) {
    std::ofstream(store->JobDir("1") + "/errors/f" + std::to_string(i)) << "x";
  }
  ASSERT_TRUE(store->Remove("1").ok());
  EXPECT_FALSE(std::filesystem::exists(store->JobDir("1")));
  store->DrainRemovals();
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/removed"));
  EXPECT_TRUE(store->Remove("7").ok()) << "nothing to remove";
  // What an ltd left half removed goes at the next one's start.
  std::filesystem::create_directories(dir_ + "/removed/9/errors");
  auto next = JobStore::Open(dir_);
  next->RemoveLeftovers();
  next->DrainRemovals();
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/removed"));
}

// The remover follows no link out of a job's dir, and a name in removed/
// that a removal cut short still holds is not removed on the caller's
// thread: the next free name is taken, and the leftover waits for the next
// start's sweep.
TEST_F(JobStoreTest, ARemovalFollowsNoLinkAndTakesAFreeName) {
  auto store = JobStore::Open(dir_);
  ASSERT_TRUE(store.ok());
  const std::string outside = dir_ + "/outside";
  std::filesystem::create_directories(outside + "/sub");
  std::ofstream(outside + "/sub/keep") << "x";
  ASSERT_TRUE(store->CreateJobDir("1").ok());
  ASSERT_EQ(symlink(outside.c_str(), (store->JobDir("1") + "/to-dir").c_str()), 0);
  ASSERT_EQ(symlink((outside + "/sub/keep").c_str(), (store->JobDir("1") + "/to-file").c_str()), 0);
  std::filesystem::create_directories(store->JobDir("1") + "/a/b/c");
  std::ofstream(store->JobDir("1") + "/a/b/c/f") << "x";
  ASSERT_TRUE(store->CreateJobDir("2").ok());
  std::filesystem::create_directories(dir_ + "/removed/2/left");

  ASSERT_TRUE(store->Remove("1").ok());
  ASSERT_TRUE(store->Remove("2").ok());
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/removed/2/left"))
      << "removed on the caller's thread";
  store->DrainRemovals();
  EXPECT_FALSE(std::filesystem::exists(store->JobDir("1")));
  EXPECT_FALSE(std::filesystem::exists(store->JobDir("2")));
  EXPECT_TRUE(std::filesystem::exists(outside + "/sub/keep")) << "a link was followed";
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/removed/1"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/removed/2.1"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/removed/2/left"));
}

// A dir deeper than the remover holds fds for is moved up and removed in a
// later pass: a tree of any depth goes (a user can make one where a dir of
// theirs is in a job's dir).
TEST_F(JobStoreTest, ATreeOfAnyDepthIsRemoved) {
  auto store = JobStore::Open(dir_);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(store->CreateJobDir("1").ok());
  std::string deep = store->JobDir("1") + "/errors";
  for (int i = 0; i < 300; ++i) deep += "/d";
  std::filesystem::create_directories(deep);
  std::ofstream(deep + "/f") << "x";
  ASSERT_TRUE(store->Remove("1").ok());
  store->DrainRemovals();
  EXPECT_FALSE(std::filesystem::exists(store->JobDir("1")));
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/removed"));
}

TEST_F(JobStoreTest, IdsAreNeverHandedOutTwice) {
  auto store = JobStore::Open(dir_);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(*store->TakeId(1), 1u);
  EXPECT_EQ(*store->TakeId(1), 2u);  // what is on disk wins over what is asked
  // A dir an earlier job left (its record was never saved) is skipped.
  ASSERT_TRUE(store->CreateJobDir("3").ok());
  EXPECT_EQ(*store->TakeId(1), 4u);
  EXPECT_FALSE(store->CreateJobDir("3").ok());  // never reused
  // A new ltd on the same state dir goes on counting.
  auto again = JobStore::Open(dir_);
  EXPECT_EQ(*again->TakeId(1), 5u);
  EXPECT_EQ(*again->TakeId(9), 9u);
}

TEST_F(JobStoreTest, ReservedIdsAreHandedOutFromMemoryAndNeverAgainAfterACrash) {
  auto store = JobStore::Open(dir_);
  ASSERT_TRUE(store.ok());
  const std::string next_id = dir_ + "/next-id";
  EXPECT_EQ(*store->TakeId(1, 4), 1u);
  EXPECT_EQ(Slurp(next_id), "5\n");  // 1-4 are taken on disk before 1 is handed out
  EXPECT_EQ(*store->TakeId(1, 4), 2u);
  EXPECT_EQ(*store->TakeId(1, 4), 3u);
  EXPECT_EQ(Slurp(next_id), "5\n");  // from memory: no write
  // ltd crashes here: the next one on the state dir starts past them all.
  auto after_crash = JobStore::Open(dir_);
  EXPECT_EQ(*after_crash->TakeId(1, 4), 5u);
  EXPECT_EQ(Slurp(next_id), "9\n");
  // The first store, reserving past its block, reads the disk again.
  EXPECT_EQ(*store->TakeId(1, 4), 4u);
  EXPECT_EQ(*store->TakeId(1, 4), 9u);
  EXPECT_EQ(Slurp(next_id), "13\n");
  // A clean stop gives back what it did not hand out.
  ASSERT_TRUE(store->ReturnReservedIds().ok());
  EXPECT_EQ(Slurp(next_id), "10\n");
  auto after_stop = JobStore::Open(dir_);
  EXPECT_EQ(*after_stop->TakeId(1, 4), 10u);
}

TEST_F(JobStoreTest, StoresSharingAStateDirEachTakeTheirOwnIds) {
  // Several ltrun of one user share a state dir: each takes ids at once.
  constexpr int kStores = 4, kEach = 50;
  std::vector<std::vector<uint64_t>> taken(kStores);
  std::vector<std::thread> threads;
  for (int t = 0; t < kStores; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto store = JobStore::Open(dir_);  // a process of its own, as far as ids go
        ASSERT_TRUE(store.ok());
        auto id = store->TakeId(1);
        ASSERT_TRUE(id.ok()) << id.status();
        taken[t].push_back(*id);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint64_t> all;
  for (const auto& ids : taken) all.insert(ids.begin(), ids.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kStores * kEach)) << "an id was handed out twice";
}

TEST_F(JobStoreTest, ErrorFilesAreTheUsersOwnOrIgnored) {
  auto store = JobStore::Open(dir_);
  ASSERT_TRUE(store.ok());
  const uid_t user = 4242;
  ASSERT_TRUE(store->CreateJobDir("1").ok());
  ASSERT_TRUE(store->OpenErrorDir("1", user, user, std::nullopt).ok());
  const std::string file = store->ErrorFile("1", 0);
  EXPECT_TRUE(absl::IsNotFound(store->ReadErrorFile("1", 0, user, 100).status()));

  // A link to a file the user may not read is not followed.
  const std::string secret = dir_ + "/secret";
  std::ofstream(secret) << "root's secret";
  ASSERT_EQ(symlink(secret.c_str(), file.c_str()), 0);
  EXPECT_FALSE(store->ReadErrorFile("1", 0, user, 100).ok());
  unlink(file.c_str());
  // Nor a hard link (someone else's file), nor a FIFO that would block.
  ASSERT_EQ(link(secret.c_str(), file.c_str()), 0);
  EXPECT_FALSE(store->ReadErrorFile("1", 0, user, 100).ok());
  unlink(file.c_str());
  ASSERT_EQ(mkfifo(file.c_str(), 0600), 0);
  ASSERT_EQ(chown(file.c_str(), user, user), 0);
  EXPECT_FALSE(store->ReadErrorFile("1", 0, user, 100).ok());
  unlink(file.c_str());

  std::ofstream(file) << std::string(1000, 'x');
  ASSERT_EQ(chown(file.c_str(), user, user), 0);
  auto text = store->ReadErrorFile("1", 0, user, 100);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, std::string(100, 'x'));  // bounded
}

}  // namespace
}  // namespace ltd::test
