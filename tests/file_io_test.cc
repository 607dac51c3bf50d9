// Whole-file writes (common/file_io.h).
#include "file_io.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ltd {
namespace {

class ReplaceFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/file-io-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ReplaceFileTest, ReplacesTheFileWhole) {
  const std::string path = dir_ + "/f";
  std::ofstream(path) << "old\n";
  ASSERT_TRUE(ReplaceFile(path, "new\n").ok());
  EXPECT_EQ(ReadWholeFile(path).value_or(""), "new\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

// A PATH.tmp that is there already (in a shared directory, another user's
// link to a file of theirs or of root's) is not written into.
TEST_F(ReplaceFileTest, APlantedTmpIsNotWrittenInto) {
  const std::string path = dir_ + "/f", other = dir_ + "/other";
  std::ofstream(other) << "someone else's\n";
  ASSERT_EQ(link(other.c_str(), (path + ".tmp").c_str()), 0);
  ASSERT_TRUE(ReplaceFile(path, "the record\n").ok());
  EXPECT_EQ(ReadWholeFile(other).value_or(""), "someone else's\n");
  EXPECT_EQ(ReadWholeFile(path).value_or(""), "the record\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

}  // namespace
}  // namespace ltd
