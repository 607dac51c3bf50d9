// Reading std::terminate's words from a rank's stderr, a line at a time.
#include "terminate_text.h"

#include <gtest/gtest.h>

#include <string>

namespace ltd {
namespace {

TEST(TerminateText, TheTypeAndTheFirstLineOfItsWhat) {
  TerminateText t;
  t.Line("[rank0]: step 3");
  EXPECT_EQ(t.text(), "");
  t.Line("terminate called after throwing an instance of 'std::runtime_error'");
  EXPECT_EQ(t.text(), "terminate called after throwing std::runtime_error");
  t.Line("  what():  boom");
  t.Line("  what():  not a what() any more");
  EXPECT_EQ(t.text(), "terminate called after throwing std::runtime_error: boom");
}

TEST(TerminateText, AWhatMustFollowAtOnceAndTheLastTerminateCounts) {
  TerminateText t;
  t.Line("terminate called after throwing an instance of 'A'");
  t.Line("something else");
  t.Line("  what():  too late");
  EXPECT_EQ(t.text(), "terminate called after throwing A");
  t.Line("terminate called without an active exception");
  EXPECT_EQ(t.text(), "terminate called without an active exception");
  t.Line("terminate called after throwing an instance of ''");
  t.Line("  what():  x");
  EXPECT_EQ(t.text(), "terminate called after throwing an exception: x");
}

TEST(TerminateText, ALongTextIsCutWithinItsBoundAndNeverInsideACharacter) {
  TerminateText t;
  t.Line("terminate called after throwing an instance of '" + std::string(1000, 'T') + "'");
  EXPECT_EQ(t.text().size(), TerminateText::kMaxText);
  t.Line("  what():  ignored: no room");
  EXPECT_EQ(t.text().size(), TerminateText::kMaxText);
  t.Line("terminate called after throwing an instance of 'E'");
  std::string what;
  while (what.size() < 2000) what += "\xc3\xa9";  // é, two bytes each
  t.Line("  what():  " + what);
  EXPECT_LE(t.text().size(), TerminateText::kMaxText);
  EXPECT_GT(t.text().size(), TerminateText::kMaxText - 2);
  EXPECT_EQ(t.text().back(), '\xa9');  // a whole é last
}

}  // namespace
}  // namespace ltd
