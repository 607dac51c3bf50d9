// libltworker.so as a rank links it: the C API is exported and works, the
// internals are not exported.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "ltworker/ltworker.h"
#include "ltworker/ltworker.hpp"
#include "test_util.h"

namespace {

TEST(SharedLibraryTest, ExportsOnlyTheCApi) {
  for (const char* name : {"lt_enabled", "lt_heartbeat", "lt_heartbeat_step", "lt_set_timeout_ms",
                           "lt_report_error", "lt_report_error_n"}) {
    EXPECT_NE(::dlsym(RTLD_DEFAULT, name), nullptr) << name;
  }
  // ltworker::internal::ResetHeartbeatForTesting() and WriteLine() stay hidden.
  EXPECT_EQ(::dlsym(RTLD_DEFAULT, "_ZN8ltworker8internal24ResetHeartbeatForTestingEv"), nullptr);
  EXPECT_EQ(::dlsym(RTLD_DEFAULT,
                    "_ZN8ltworker8internal9WriteLineEiNS0_6FdKindESt17basic_string_viewIcSt11char_"
                    "traitsIcEE"),
            nullptr);
}

// The whole life of a rank in one test, since the library reads
// LT_HEARTBEAT_FD only once per process.
TEST(SharedLibraryTest, HeartbeatsReachTheSocket) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  ASSERT_EQ(::setenv("LT_HEARTBEAT_FD", std::to_string(fds[1]).c_str(), 1), 0);
  ASSERT_TRUE(ltworker::Enabled());
  EXPECT_TRUE(ltworker::Heartbeat(1));
  EXPECT_TRUE(ltworker::SetTimeout(std::chrono::seconds(30)));
  EXPECT_EQ(lt_report_error("done"), 0);
  EXPECT_EQ(ltworker::testing::ReadLines(fds[0], 3), "hb 1\ntimeout 30s\nerror done\n");
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
