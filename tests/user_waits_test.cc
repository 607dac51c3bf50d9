// Waits on what a user controls run on threads of their own, a few per
// user and a bound in all; past either, a call is refused at once.
#include "user_waits.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace ltd::test {
namespace {

using namespace std::chrono_literals;

// Work that waits until released, as a check on a stuck mount does until
// its deadline.
struct Gate {
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  std::function<void()> Wait(std::atomic<int>& done) {
    return [f = opened, &done] {
      f.wait();
      ++done;
    };
  }
};

TEST(UserWaits, AUsersWaitsPastTheBoundAreRefusedAtOnceOthersGoOn) {
  std::atomic<int> done{0};
  Gate gate;
  {
    UserWaits waits("submits waiting for their files", /*per_user=*/2, /*in_all=*/3);
    EXPECT_TRUE(waits.Run(1000, gate.Wait(done)).ok());
    EXPECT_TRUE(waits.Run(1000, gate.Wait(done)).ok());
    const absl::Status third = waits.Run(1000, gate.Wait(done));
    EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(std::string(third.message()),
              "too many submits waiting for their files: 2 of yours are waiting on their file "
              "system (at most 2 at once); wait for them to be answered and submit again");
    EXPECT_EQ(waits.Running(1000), 2);
    // Another user goes on, up to the bound in all.
    EXPECT_TRUE(waits.Run(2000, gate.Wait(done)).ok());
    const absl::Status full = waits.Run(3000, gate.Wait(done));
    EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(std::string(full.message()).find("on this server"), std::string::npos);
    EXPECT_EQ(waits.Running(3000), 0);
    gate.open.set_value();
    // The destructor waits for the running work.
  }
  EXPECT_EQ(done.load(), 3);
}

TEST(UserWaits, AnEndedWaitFreesItsPlace) {
  std::atomic<int> done{0};
  UserWaits waits("checks", 1, 8);
  ASSERT_TRUE(waits.Run(7, [&] { ++done; }).ok());
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (waits.Running(7) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(waits.Running(7), 0);
  EXPECT_TRUE(waits.Run(7, [&] { ++done; }).ok());
}

}  // namespace
}  // namespace ltd::test
