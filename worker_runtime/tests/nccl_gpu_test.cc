// The real libnccl behind the watcher and the C API. Needs a CUDA device
// (ctest label "gpu"); skips itself where none is usable.
#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <cerrno>

#include "ltworker/nccl_watch.h"
#include "nccl_api_real.h"
#include "nccl_watcher.h"
#include "test_util.h"

namespace ltworker::internal {
namespace {

// A one-rank communicator on device 0, or a skip.
class NcclGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int device = 0;
    const ncclResult_t rc = ncclCommInitAll(&comm_, 1, &device);
    if (rc != ncclSuccess) {
      comm_ = nullptr;
      GTEST_SKIP() << "no usable GPU/NCCL device: " << ncclGetErrorString(rc);
    }
  }
  void TearDown() override {
    if (comm_ != nullptr && !aborted_) ncclCommDestroy(comm_);
  }

  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
};

TEST_F(NcclGpuTest, HealthyCommunicatorHasNoAsyncError) {
  int async_error = -1;
  EXPECT_EQ(RealNcclApi()->GetAsyncError(comm_, &async_error), kNcclSuccess);
  EXPECT_EQ(async_error, kNcclSuccess);
  EXPECT_STRNE(RealNcclApi()->ErrorString(ncclSystemError), "");
}

TEST_F(NcclGpuTest, CApiRegistersAndUnregisters) {
  EXPECT_EQ(lt_nccl_set_poll_interval_ms(5), 0);
  ASSERT_EQ(lt_nccl_register(comm_), 0);
  EXPECT_EQ(lt_nccl_register(comm_), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(lt_nccl_unregister(comm_), 0);
  EXPECT_EQ(lt_nccl_unregister(comm_), -1);
  EXPECT_EQ(errno, ENOENT);
}

// What SIGTERM leads to, without the signal: the watcher thread aborts a
// real communicator.
TEST_F(NcclGpuTest, WatcherAbortsRealCommunicator) {
  std::atomic<bool> done{false};
  NcclWatcher::Options options;
  options.poll_interval = std::chrono::milliseconds(5);
  options.after_sigterm_aborts = [&done] { done.store(true); };
  NcclWatcher watcher(RealNcclApi(), std::move(options));
  ASSERT_EQ(watcher.Start(), 0);
  ASSERT_EQ(watcher.Register(comm_), 0);
  watcher.NotifySigterm();
  ASSERT_TRUE(ltworker::testing::WaitFor([&] { return done.load(); }));
  aborted_ = true;
  EXPECT_EQ(watcher.Unregister(comm_), 0);
}

}  // namespace
}  // namespace ltworker::internal
