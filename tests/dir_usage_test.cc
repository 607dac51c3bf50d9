// A dir's entries without a DIR (common/dir_entries.h), and what a job's
// dir takes on disk (store/dir_usage.h).
#include "dir_usage.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "dir_entries.h"
#include "fd.h"

namespace ltd {
namespace {

class DirUsageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dir-usage-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (mounted_) umount2((dir_ + "/mnt").c_str(), MNT_DETACH);
    std::filesystem::remove_all(dir_);
  }
  static uint64_t Blocks(const std::string& path) {
    struct stat st {};
    return lstat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
  }
  void Write(const std::string& path, size_t bytes) {
    std::ofstream(path) << std::string(bytes, 'x');
  }
  std::string dir_;
  bool mounted_ = false;
};

// More names than one read of the dir holds: each given once, "." and
// ".." never.
TEST_F(DirUsageTest, EveryEntryIsGivenOnceOverSeveralReads) {
  std::map<std::string, int> seen;
  for (int i = 0; i < 300; ++i) {
    const std::string name = "entry-" + std::to_string(i) + std::string(80, 'n');
    std::ofstream(dir_ + "/" + name).flush();
    seen[name] = 0;
  }
  const Fd fd(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  int others = 0;
  ASSERT_TRUE(ForEachDirEntry(fd.get(), [&](const char* name) {
    auto it = seen.find(name);
    if (it == seen.end()) {
      ++others;
    } else {
      ++it->second;
    }
    return true;
  }));
  EXPECT_EQ(others, 0);
  for (const auto& [name, count] : seen) EXPECT_EQ(count, 1) << name;
}

TEST_F(DirUsageTest, AnEntryThatSaysStopEndsTheListing) {
  for (int i = 0; i < 10; ++i) std::ofstream(dir_ + "/f" + std::to_string(i)).flush();
  const Fd fd(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  int calls = 0;
  EXPECT_TRUE(ForEachDirEntry(fd.get(), [&](const char*) { return ++calls < 3; }));
  EXPECT_EQ(calls, 3);
}

TEST_F(DirUsageTest, NotADirIsAFailedRead) {
  const std::string file = dir_ + "/file";
  std::ofstream(file) << "x";
  const Fd fd(open(file.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  EXPECT_FALSE(ForEachDirEntry(fd.get(), [](const char*) { return true; }));
}

// As `du`: the blocks of every file and dir two levels down, the top's
// own not counted (a job's dir is counted by what is in it).
TEST_F(DirUsageTest, CountsTheBlocksOfFilesAndDirsTwoLevelsDown) {
  ASSERT_EQ(mkdir((dir_ + "/a").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((dir_ + "/a/b").c_str(), 0700), 0);
  Write(dir_ + "/top", 10000);
  Write(dir_ + "/a/mid", 20000);
  Write(dir_ + "/a/b/low", 30000);
  const uint64_t want = Blocks(dir_ + "/top") + Blocks(dir_ + "/a") + Blocks(dir_ + "/a/mid") +
                        Blocks(dir_ + "/a/b") + Blocks(dir_ + "/a/b/low");
  ASSERT_GT(Blocks(dir_ + "/a/b/low"), 0u);
  EXPECT_EQ(DirBytes(dir_), want);
}

TEST_F(DirUsageTest, ThreeLevelsDownIsNotEntered) {
  ASSERT_EQ(mkdir((dir_ + "/a").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((dir_ + "/a/b").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((dir_ + "/a/b/c").c_str(), 0700), 0);
  Write(dir_ + "/a/b/c/deep", 30000);
  EXPECT_EQ(DirBytes(dir_), Blocks(dir_ + "/a") + Blocks(dir_ + "/a/b") + Blocks(dir_ + "/a/b/c"));
}

// A file system mounted in the dir (a running job's errors/ tmpfs) is
// neither counted nor entered.
TEST_F(DirUsageTest, AMountInTheDirIsNotCounted) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  ASSERT_EQ(mkdir((dir_ + "/mnt").c_str(), 0700), 0);
  Write(dir_ + "/top", 10000);
  const uint64_t want = Blocks(dir_ + "/top");
  ASSERT_EQ(mount("ltd-test", (dir_ + "/mnt").c_str(), "tmpfs", 0, "size=1m"), 0);
  mounted_ = true;
  Write(dir_ + "/mnt/inside", 50000);
  EXPECT_EQ(DirBytes(dir_), want);
}

TEST_F(DirUsageTest, ADirThatIsNotThereTakesNothing) { EXPECT_EQ(DirBytes(dir_ + "/none"), 0u); }

}  // namespace
}  // namespace ltd
