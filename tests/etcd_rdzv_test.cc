// The rendezvous against a real etcd: nodes meet and agree, and every bad
// start ends with one clear message within the timeout.
#include <gtest/gtest.h>

#include <future>

#include "etcd_server.h"
#include "rendezvous.h"

namespace ltd {
namespace {

using namespace std::chrono_literals;

class RdzvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<test::EtcdServer>();
    if (!server_->ok()) GTEST_SKIP() << "etcd cannot start here: " << server_->error();
  }
  rdzv::Config Node(int node_rank, int nnodes = 2, int devices = 2) {
    rdzv::Config c;
    c.endpoint = server_->endpoint();
    c.run_id = run_id_;
    c.nnodes = nnodes;
    c.node_rank = node_rank;
    c.devices = devices;
    c.host = "host" + std::to_string(node_rank);
    c.master_port = 29500 + node_rank;
    c.timeout = 10s;
    return c;
  }
  std::unique_ptr<test::EtcdServer> server_;
  std::string run_id_ = "run-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed());
};

TEST_F(RdzvTest, NodesAgreeOnRanksAndMaster) {
  auto a = std::async(std::launch::async, [&] { return rdzv::Rendezvous::Join(Node(-1)); });
  auto b = std::async(std::launch::async, [&] { return rdzv::Rendezvous::Join(Node(-1)); });
  auto ra = a.get();
  auto rb = b.get();
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_NE((*ra)->node_rank(), (*rb)->node_rank());
  EXPECT_EQ((*ra)->node_rank() + (*rb)->node_rank(), 1);
  const rdzv::Agreement& x = (*ra)->agreement();
  const rdzv::Agreement& y = (*rb)->agreement();
  EXPECT_EQ(x.master_addr, y.master_addr);
  EXPECT_EQ(x.master_port, y.master_port);
  // Node 0's port (joined without --node-rank: 29499 both), and not its
  // host name, which may be a loopback address there: the address it
  // reaches etcd from (a local etcd: loopback).
  EXPECT_EQ(x.master_port, 29499);
  EXPECT_EQ(x.master_addr, "127.0.0.1");
  // A restart: both meet again at attempt 1.
  auto b1 = std::async(std::launch::async, [&] { return (*rb)->Barrier(1, nullptr); });
  EXPECT_TRUE((*ra)->Barrier(1, nullptr).ok());
  EXPECT_TRUE(b1.get().ok());
}

TEST_F(RdzvTest, GivenRanksAndMasterAddr) {
  auto c0 = Node(0);
  c0.master_addr = "10.1.2.3";
  auto a = std::async(std::launch::async, [&] { return rdzv::Rendezvous::Join(Node(1)); });
  auto r0 = rdzv::Rendezvous::Join(c0);
  auto r1 = a.get();
  ASSERT_TRUE(r0.ok()) << r0.status();
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ((*r0)->node_rank(), 0);
  EXPECT_EQ((*r1)->node_rank(), 1);
  EXPECT_EQ((*r1)->agreement().master_addr, "10.1.2.3");
  EXPECT_EQ((*r1)->agreement().master_port, 29500);
}

TEST_F(RdzvTest, MismatchedNnodesEndsBothNodes) {
  auto a = std::async(std::launch::async, [&] { return rdzv::Rendezvous::Join(Node(0, 2)); });
  auto r1 = rdzv::Rendezvous::Join(Node(1, 3));
  auto r0 = a.get();
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("--nnodes"), std::string::npos) << r1.status();
  ASSERT_FALSE(r0.ok());
  EXPECT_NE(r0.status().message().find("--nnodes"), std::string::npos) << r0.status();
}

TEST_F(RdzvTest, MismatchedDevices) {
  auto a = std::async(std::launch::async, [&] { return rdzv::Rendezvous::Join(Node(0, 2, 2)); });
  auto r1 = rdzv::Rendezvous::Join(Node(1, 2, 4));
  auto r0 = a.get();
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("--devices"), std::string::npos) << r1.status();
  ASSERT_FALSE(r0.ok());
  EXPECT_NE(r0.status().message().find("--devices"), std::string::npos) << r0.status();
}

// A node of a release whose nodes chose a run's cause another way (its
// node key says no version) would record a cause of its own: the run does
// not start, on either side.
TEST_F(RdzvTest, ANodeOfAnotherFenceVersionEndsTheStart) {
  auto client = etcd::Client::Connect(server_->endpoint(), 5s);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(
      (*client)
          ->Put("/ltd/runs/" + run_id_ + "/nodes/0", R"({"host":"old","nnodes":2,"devices":2})")
          .ok());
  auto r1 = rdzv::Rendezvous::Join(Node(1));
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().message(),
            "node 0 (old) of run " + run_id_ +
                " runs an ltd release whose nodes agree on a failure's cause another way (version "
                "1, this node 2); run the same ltd release on every node");
  // The run's start is ended for the old node too.
  auto abort = (*client)->Get("/ltd/runs/" + run_id_ + "/abort");
  ASSERT_TRUE(abort.ok()) << abort.status();
  ASSERT_TRUE(abort->has_value());
  EXPECT_EQ((*abort)->value, r1.status().message());
}

TEST_F(RdzvTest, DuplicateNodeRank) {
  auto c = Node(0);
  c.timeout = 5s;
  auto dup = c;
  dup.host = "other";
  auto a = std::async(std::launch::async, [&] { return rdzv::Rendezvous::Join(c); });
  auto b = std::async(std::launch::async, [&] { return rdzv::Rendezvous::Join(dup); });
  auto ra = a.get();
  auto rb = b.get();
  // One of the two nodes 0 is refused as soon as it asks; that ends the
  // run's start for the other at once too (no wait for its timeout).
  ASSERT_FALSE(ra.ok());
  ASSERT_FALSE(rb.ok());
  const std::string both =
      std::string(ra.status().message()) + "\n" + std::string(rb.status().message());
  EXPECT_NE(both.find("node rank 0 of run " + run_id_ + " is already taken by host "),
            std::string::npos)
      << both;
  EXPECT_NE(both.find("cannot start: node rank 0"), std::string::npos) << both;
}

TEST_F(RdzvTest, NeverCompletes) {
  auto c = Node(1);
  c.timeout = 1s;
  auto r = rdzv::Rendezvous::Join(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("did not complete within --rdzv-timeout 1s"),
            std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("1 of 2 nodes joined (node(s) 1)"), std::string::npos);
}

TEST(RdzvUnreachable, EndsWithinTheTimeout) {
  rdzv::Config c;
  c.endpoint = "127.0.0.1:" + std::to_string(test::FreeTcpPort());
  c.run_id = "r";
  c.nnodes = 2;
  c.timeout = 500ms;
  auto r = rdzv::Rendezvous::Join(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot reach etcd at " + c.endpoint), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace ltd
