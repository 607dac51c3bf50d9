// A job that ends while the state dir's disk is full: its supervisor
// cannot save the final record, says so to ltd with the record, and ltd
// saves it once the disk has room. The next ltd then finds the job's real
// end, not a RUNNING record it would call LOST. The state dir is a small
// tmpfs of the test's own (root only; skipped otherwise).
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

const std::string kChild = TestChildPath();

// Writes `path` until the file system refuses more; true once it did.
bool FillUp(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  static const std::string kBlock(64 * 1024, 'x');
  bool full = false;
  for (int i = 0; i < 100000 && !full; ++i) {
    full = std::fwrite(kBlock.data(), 1, kBlock.size(), f) != kBlock.size() || std::fflush(f) != 0;
  }
  // Whatever little is left (less than a block) goes too.
  for (int i = 0; i < 64 * 1024 && std::fputc('x', f) != EOF && std::fflush(f) == 0; ++i) {
  }
  std::fclose(f);
  return full;
}

class FullDiskE2E : public E2E {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root, to mount a small tmpfs as the state dir";
    std::error_code ec;
    std::filesystem::create_directories(d_.state_dir(), ec);
    ASSERT_FALSE(ec) << ec.message();
    if (mount("tmpfs", d_.state_dir().c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
              "size=4m,mode=0700") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs on " << d_.state_dir() << ": " << std::strerror(errno);
    }
    mounted_ = true;
    ASSERT_TRUE(d_.Start({"--restore-window", "10m"})) << d_.log();
  }

  void TearDown() override {
    if (d_.pid() > 0) d_.Stop();
    E2E::TearDown();
    // Lazily: a process the test failed to end may still hold a file.
    if (mounted_ && umount2(d_.state_dir().c_str(), MNT_DETACH) != 0) {
      ADD_FAILURE() << "umount " << d_.state_dir() << ": " << std::strerror(errno);
    }
  }

  // The job's record as its supervisor (or ltd) last saved it.
  nlohmann::json Record(const std::string& id) const {
    nlohmann::json j = nlohmann::json::parse(
        ReadWhole(d_.state_dir() + "/jobs/" + id + "/job.json"), nullptr, false);
    return j.is_object() ? j : nlohmann::json::object();
  }

  bool mounted_ = false;
};

TEST_F(FullDiskE2E, AFinalRecordTheDiskRefusedIsSavedOnceThereIsRoom) {
  const std::string go = d_.dir() + "/GO";  // outside the full file system
  const std::string id =
      SubmitDetached({"--devices", "1", "--", kChild, "waitfile:" + go + ",exit:3"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(id).value("state", "") == "RUNNING"; }, 20s))
      << d_.Show(id).dump(2);

  const std::string filler = d_.state_dir() + "/filler";
  ASSERT_TRUE(FillUp(filler)) << "the tmpfs never filled";
  std::ofstream(go) << "go\n";
  nlohmann::json job = d_.WaitEnded(id);
  EXPECT_EQ(job["state"], "FAILED") << job.dump(2);
  // Neither the supervisor nor ltd could save it.
  EXPECT_EQ(Record(id).value("state", ""), "RUNNING");

  // Room again: ltd saves the record it holds (at its next retry, or at
  // the latest as it stops).
  std::filesystem::remove(filler);
  EXPECT_EQ(d_.Stop(), 0);
  EXPECT_EQ(Record(id).value("state", ""), "FAILED") << d_.log();

  ASSERT_TRUE(d_.Start({"--restore-window", "10m"})) << d_.log();
  job = d_.Show(id);
  EXPECT_EQ(job["state"], "FAILED") << job.dump(2);
  EXPECT_EQ(job["exit_code"], 3) << job.dump(2);
  EXPECT_EQ(job["root_cause"]["reason"], "exited") << job.dump(2);
  EXPECT_EQ(job["root_cause"]["exit_code"], 3) << job.dump(2);
}

}  // namespace
}  // namespace ltd::test
