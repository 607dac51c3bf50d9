// RankConsole: rank lines reach a pipe once the caller has nothing more in
// hand, a burst in one write, and `2>&1` keeps the order they came in.
#include "rank_console.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace ltd {
namespace {

// Both streams into one pipe, as `cmd 2>&1 | reader` has them.
class RankConsoleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int p[2];
    ASSERT_EQ(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
    read_ = p[0];
    out_ = fdopen(p[1], "w");
    err_ = fdopen(dup(p[1]), "w");
    ASSERT_NE(out_, nullptr);
    ASSERT_NE(err_, nullptr);
    setvbuf(err_, nullptr, _IONBF, 0);  // as stderr is
  }
  void TearDown() override {
    console_.reset();
    std::fclose(out_);
    std::fclose(err_);
    close(read_);
  }
  // What the reader of the pipe can have now, without waiting.
  std::string Available() {
    std::string got;
    char buf[4096];
    for (ssize_t n; (n = read(read_, buf, sizeof buf)) > 0;)
      got.append(buf, static_cast<size_t>(n));
    return got;
  }

  int read_ = -1;
  FILE* out_ = nullptr;
  FILE* err_ = nullptr;
  std::unique_ptr<RankConsole> console_;
};

TEST_F(RankConsoleTest, LinesGoOutWhenTheCallerHasNoMore) {
  console_ = std::make_unique<RankConsole>(out_, err_);
  console_->Line(0, false, "first");
  console_->Line(1, false, "second");
  EXPECT_EQ(Available(), "");  // one burst: one write, at the end of it
  console_->Idle();
  EXPECT_EQ(Available(), "[0] first\n[1] second\n");
  console_->Idle();  // nothing held: nothing written
  EXPECT_EQ(Available(), "");
}

TEST_F(RankConsoleTest, StderrLinesKeepTheirPlaceAmongStdoutLines) {
  console_ = std::make_unique<RankConsole>(out_, err_, "ltrun: ");
  console_->Line(0, false, "out 1");
  console_->Line(0, true, "err 1");
  console_->Line(0, false, "out 2");
  console_->Notice("job 7 restarts");
  console_->Line(2, true, "err 2");
  // stderr lines are out as they come, with what stdout held before them.
  EXPECT_EQ(Available(), "[0] out 1\n[0] err 1\n[0] out 2\nltrun: job 7 restarts\n[2] err 2\n");
}

TEST_F(RankConsoleTest, BytesPassAsTheyAreAndPrefixesCanBeOff) {
  console_ = std::make_unique<RankConsole>(out_, err_);
  console_->set_prefix(false);
  console_->Line(3, false, std::string_view("a\0\xff", 3));
  console_->Raw("[1] from the log\n");
  console_->Idle();
  EXPECT_EQ(Available(), std::string("a\0\xff\n[1] from the log\n", 21));
}

TEST_F(RankConsoleTest, WhatIsHeldGoesOutWhenTheConsoleGoes) {
  console_ = std::make_unique<RankConsole>(out_, err_);
  console_->Line(-5, false, "negative ranks print as they are");
  console_.reset();
  EXPECT_EQ(Available(), "[-5] negative ranks print as they are\n");
}

}  // namespace
}  // namespace ltd
