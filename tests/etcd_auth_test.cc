// A run's records in a real etcd, sealed with a fake MUNGE (no munged):
// another user's node cannot take a run's place, and a forged abort,
// master address or report does not decide it; the owner's own do.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>

#include "etcd_client.h"
#include "etcd_fence.h"
#include "etcd_server.h"
#include "fake_credential.h"
#include "rendezvous.h"

namespace ltd {
namespace {

using namespace std::chrono_literals;
using test::FakeCodec;

constexpr uid_t kOwner = 1000;
constexpr uid_t kOther = 2000;

bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

class RdzvAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<test::EtcdServer>();
    if (!server_->ok()) GTEST_SKIP() << "etcd cannot start here: " << server_->error();
    auto c = etcd::Client::Connect(server_->endpoint(), 5s);
    ASSERT_TRUE(c.ok()) << c.status();
    raw_ = std::move(*c);
  }
  // A node of the run as `writer` (the uid its credentials say) for `owner`.
  rdzv::Config Node(int node_rank, uid_t writer = kOwner, uid_t owner = kOwner) {
    rdzv::Config c;
    c.endpoint = server_->endpoint();
    c.run_id = run_id_;
    c.nnodes = 2;
    c.node_rank = node_rank;
    c.devices = 1;
    c.host = "host" + std::to_string(node_rank);
    c.master_addr = "127.0.0.1";
    c.master_port = 29500 + node_rank;
    c.timeout = 20s;
    c.auth = std::make_shared<rdzv::RecordAuth>(std::make_unique<FakeCodec>(writer), owner);
    return c;
  }
  std::string Key(const std::string& rest) const { return "/ltd/runs/" + run_id_ + "/" + rest; }

  std::unique_ptr<test::EtcdServer> server_;
  std::unique_ptr<etcd::Client> raw_;
  std::string run_id_ = "auth-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed());
};

TEST_F(RdzvAuthTest, AnotherUsersNodeCannotTakeTheRunsPlace) {
  // Another user's node takes node rank 1 first, and stays.
  std::atomic<bool> give_up{false};
  auto other_cfg = Node(1, kOther, kOther);
  other_cfg.abandon = [&] { return give_up.load(); };
  auto other =
      std::async(std::launch::async, [&] { return rdzv::Rendezvous::Join(std::move(other_cfg)); });
  ASSERT_TRUE(
      WaitUntil([&] { return raw_->Get(Key("nodes/1")).value_or(std::nullopt).has_value(); }, 10s));
  auto zero = std::async(std::launch::async, [&] { return rdzv::Rendezvous::Join(Node(0)); });
  // Node 0 does not count it: its run is not complete.
  EXPECT_EQ(zero.wait_for(1s), std::future_status::timeout);
  // The owner's own node 1 comes, and takes its place back.
  auto one = rdzv::Rendezvous::Join(Node(1));
  ASSERT_TRUE(one.ok()) << one.status();
  auto r0 = zero.get();
  ASSERT_TRUE(r0.ok()) << r0.status();
  EXPECT_EQ((*r0)->agreement().master_addr, "127.0.0.1");
  EXPECT_EQ((*r0)->agreement().master_port, 29500);
  EXPECT_EQ((*one)->agreement().master_port, 29500);
  EXPECT_GE((*r0)->auth().refused(), 1);
  EXPECT_NE((*r0)->auth().last_refused().find("written by uid 2000"), std::string::npos)
      << (*r0)->auth().last_refused();
  give_up = true;
  EXPECT_FALSE(other.get().ok());  // never met anyone it believes
}

TEST_F(RdzvAuthTest, ForgedAbortAndMasterDoNotDecideTheStart) {
  ASSERT_TRUE(raw_->Put(Key("abort"), "forged: this run cannot start").ok());
  ASSERT_TRUE(raw_->Put(Key("master"), R"({"addr":"6.6.6.6","port":1})").ok());
  auto one = std::async(std::launch::async, [&] { return rdzv::Rendezvous::Join(Node(1)); });
  auto r0 = rdzv::Rendezvous::Join(Node(0));
  auto r1 = one.get();
  ASSERT_TRUE(r0.ok()) << r0.status();
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ((*r1)->agreement().master_addr, "127.0.0.1");
  EXPECT_EQ((*r1)->agreement().master_port, 29500);
  // Node 0 reads both forgeries before it writes the master; node 1 may
  // come after that write, and then sees the forged abort alone.
  EXPECT_GE((*r0)->auth().refused(), 2);
  EXPECT_GE((*r1)->auth().refused(), 1);
}

TEST_F(RdzvAuthTest, AnOwnersMisconfiguredNodeStillAbortsTheStart) {
  auto bad = Node(1);
  bad.nnodes = 3;
  auto zero = std::async(std::launch::async, [&] { return rdzv::Rendezvous::Join(Node(0)); });
  auto r1 = rdzv::Rendezvous::Join(bad);
  ASSERT_FALSE(r1.ok());
  auto r0 = zero.get();
  ASSERT_FALSE(r0.ok());
  EXPECT_NE(r0.status().message().find("--nnodes"), std::string::npos) << r0.status();
}

// The loop's side of a fence, on the test's thread of the moment.
struct Events final : RunFenceEvents {
  std::mutex mu;
  std::vector<RootCause> causes;
  int64_t refused = 0;
  void OnRunCause(int, RootCause c) override { causes.push_back(std::move(c)); }
  void OnRunVerdict(int, NodeReport, std::string, std::vector<NodeReport>) override {}
  void OnNodes(std::vector<NodeStatus>) override {}
  void OnFenceNotice(std::string) override {}
  void OnRefusedRecords(int64_t total, std::string) override { refused = total; }
};

TEST_F(RdzvAuthTest, AForgedReportDoesNotDecideTheRun) {
  auto one = std::async(std::launch::async, [&] { return rdzv::Rendezvous::Join(Node(1)); });
  auto r0 = rdzv::Rendezvous::Join(Node(0));
  auto r1 = one.get();
  ASSERT_TRUE(r0.ok() && r1.ok());
  Events ev0, ev1;
  auto post = [](Events* ev) {
    return [ev](std::function<void()> fn) {
      std::lock_guard<std::mutex> lock(ev->mu);
      fn();
    };
  };
  auto f0 = rdzv::EtcdFence::Start(std::move(*r0), post(&ev0));
  auto f1 = rdzv::EtcdFence::Start(std::move(*r1), post(&ev1));
  ASSERT_TRUE(f0.ok() && f1.ok());
  (*f0)->SetEvents(&ev0);
  (*f1)->SetEvents(&ev1);
  auto seen = [](Events& ev, auto fn) {
    std::lock_guard<std::mutex> lock(ev.mu);
    return fn(ev);
  };
  // The issue's forged report, written straight into etcd; then the same
  // as another user's credential.
  const std::string forged =
      R"J({"kind":"primary","what":"","cause":{"reason":"exited","rank":1,"exit_code":42,)J"
      R"J("message":"uncorrectable ECC error on GPU 1 (forged)"}})J";
  ASSERT_TRUE(raw_->Put(Key("attempts/0/report/1"), forged).ok());
  rdzv::RecordAuth other(std::make_unique<FakeCodec>(kOther), kOther);
  ASSERT_TRUE(
      raw_->Put(Key("attempts/0/report/1"), *other.Seal(Key("attempts/0/report/1"), forged)).ok());
  ASSERT_TRUE(WaitUntil([&] { return seen(ev0, [](Events& e) { return e.refused >= 2; }); }, 10s));
  EXPECT_TRUE(seen(ev0, [](Events& e) { return e.causes.empty(); }));
  // Node 1's own report is believed.
  NodeReport mine;
  mine.node = 1;
  mine.cause.node = 1;
  mine.cause.rank = 0;
  mine.cause.exit_code = 3;
  mine.cause.message = "rank 0 exited with code 3";
  mine.cause.at = std::chrono::system_clock::now();
  (*f1)->Publish(0, mine);
  ASSERT_TRUE(
      WaitUntil([&] { return seen(ev0, [](Events& e) { return !e.causes.empty(); }); }, 10s));
  seen(ev0, [](Events& e) {
    EXPECT_EQ(e.causes[0].exit_code, 3);
    EXPECT_EQ(e.causes[0].message, "rank 0 exited with code 3");
    return true;
  });
  (*f0)->Close();
  (*f1)->Close();
}

}  // namespace
}  // namespace ltd
