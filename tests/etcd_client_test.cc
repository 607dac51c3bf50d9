// The etcd v3 client against a real etcd: put/get, the create-revision Txn,
// leases that expire and are revoked, a watch, and an etcd that is gone.
#include "etcd_client.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "etcd_server.h"
#include "rendezvous.h"

namespace ltd {
namespace {

using namespace std::chrono_literals;

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<test::EtcdServer>();
    if (!server_->ok()) GTEST_SKIP() << "etcd cannot start here: " << server_->error();
    auto c = etcd::Client::Connect(server_->endpoint(), 5s);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }
  std::unique_ptr<test::EtcdServer> server_;
  std::unique_ptr<etcd::Client> client_;
};

TEST_F(EtcdClientTest, PutGetAndPrefix) {
  ASSERT_TRUE(client_->Put("/t/a", "1").ok());
  ASSERT_TRUE(client_->Put("/t/b", std::string("\0\xff", 2)).ok());
  ASSERT_TRUE(client_->Put("/u/c", "3").ok());
  auto a = client_->Get("/t/a");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->value, "1");
  auto none = client_->Get("/t/none");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto t = client_->GetPrefix("/t/");
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->kvs.size(), 2u);
  EXPECT_EQ(t->kvs[1].value, std::string("\0\xff", 2));
  EXPECT_GT(t->revision, 0);
  ASSERT_TRUE(client_->DeletePrefix("/t/").ok());
  EXPECT_TRUE(client_->GetPrefix("/t/")->kvs.empty());
}

TEST_F(EtcdClientTest, FirstWriterWins) {
  auto first = client_->PutIfAbsent("/cause", "node 1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first);
  etcd::KeyValue existing;
  auto second = client_->PutIfAbsent("/cause", "node 0", 0, &existing);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);
  EXPECT_EQ(existing.value, "node 1");
  EXPECT_EQ((*client_->Get("/cause"))->value, "node 1");
}

TEST_F(EtcdClientTest, LeaseKeysGoWhenRevokedOrExpired) {
  auto lease = client_->GrantLease(std::chrono::seconds(1));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client_->Put("/leased", "x", *lease).ok());
  ASSERT_TRUE(client_->Get("/leased")->has_value());
  auto ttl = client_->KeepAliveOnce(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_GT(*ttl, 0);
  ASSERT_TRUE(client_->RevokeLease(*lease).ok());
  EXPECT_FALSE(client_->Get("/leased")->has_value());

  // Not kept alive: etcd drops it after its TTL (etcd's minimum is a few
  // seconds; wait for the key to go, with a deadline).
  auto short_lease = client_->GrantLease(std::chrono::seconds(1));
  ASSERT_TRUE(short_lease.ok());
  ASSERT_TRUE(client_->Put("/expiring", "x", *short_lease).ok());
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (client_->Get("/expiring")->has_value()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the lease never expired";
    std::this_thread::sleep_for(50ms);
  }
}

TEST_F(EtcdClientTest, WatchSeesPutsAndDeletesThenEtcdGoing) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<etcd::WatchEvent> seen;
  std::optional<absl::Status> error;
  etcd::Watch watch(
      *client_, "/w/", 0,
      [&](std::vector<etcd::WatchEvent> events) {
        std::lock_guard<std::mutex> lock(mu);
        for (auto& e : events) seen.push_back(std::move(e));
        cv.notify_all();
      },
      [&](absl::Status s) {
        std::lock_guard<std::mutex> lock(mu);
        error = s;
        cv.notify_all();
      });
  ASSERT_TRUE(watch.WaitCreated(5s).ok());
  ASSERT_TRUE(client_->Put("/w/x", "1").ok());
  ASSERT_TRUE(client_->Put("/other", "1").ok());
  ASSERT_TRUE(client_->DeletePrefix("/w/").ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return seen.size() >= 2; }));
    EXPECT_FALSE(seen[0].deleted);
    EXPECT_EQ(seen[0].kv.key, "/w/x");
    EXPECT_EQ(seen[0].kv.value, "1");
    EXPECT_TRUE(seen[1].deleted);
    EXPECT_EQ(seen.size(), 2u);
  }
  server_->Stop();
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return error.has_value(); }))
      << "the watch never noticed etcd going";
  EXPECT_FALSE(error->ok());
}

TEST(EtcdClientUnreachable, ConnectFailsWithinItsTimeout) {
  auto c = etcd::Client::Connect("127.0.0.1:" + std::to_string(test::FreeTcpPort()), 300ms);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("cannot reach etcd"), std::string::npos);
}

// A job killed while its supervisor waits for etcd: the wait ends at the
// give-up, however long the timeout (a user may say --rdzv-timeout 8760h).
TEST(EtcdClientUnreachable, ConnectEndsWhenGivenUp) {
  std::atomic<int> asked{0};
  auto c = etcd::Client::Connect("127.0.0.1:" + std::to_string(test::FreeTcpPort()), 60s,
                                 [&] { return ++asked >= 2; });
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsCancelled(c.status())) << c.status();
  EXPECT_EQ(asked.load(), 2);
}

// A user's endpoint is a host and port, never a gRPC target of another
// kind: a supervisor runs as root, and "unix:PATH" would have it speak to
// a local service's socket for the user.
TEST(EtcdClientUnreachable, AUnixSocketTargetIsNotFollowed) {
  char dir_tmpl[] = "/tmp/etcd-unix.XXXXXX";
  ASSERT_NE(mkdtemp(dir_tmpl), nullptr);
  const std::string path = std::string(dir_tmpl) + "/s.sock";
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  auto c = etcd::Client::Connect("unix:" + path, 500ms);
  EXPECT_FALSE(c.ok()) << "connected to a Unix socket";
  close(fd);
  std::filesystem::remove_all(dir_tmpl);
}

// What other nodes write is anyone's: wrong types and long text neither
// throw nor pass through.
TEST(RdzvFields, HostileValuesAreAbsentOrBounded) {
  const auto j = nlohmann::json::parse(
      R"({"host": 7, "state": ["x"], "port": "80", "addr": "a\nb", "long": ")" +
      std::string(10000, 'x') + "\"}");
  EXPECT_EQ(rdzv::JsonText(j, "host"), "");
  EXPECT_EQ(rdzv::JsonText(j, "state"), "");
  EXPECT_FALSE(rdzv::JsonInt(j, "port").has_value());
  EXPECT_EQ(rdzv::JsonText(j, "addr").find('\n'), std::string::npos);
  EXPECT_LE(rdzv::JsonText(j, "long").size(), 300u);
  EXPECT_EQ(rdzv::JsonText(nlohmann::json::array(), "host"), "");
  EXPECT_EQ(rdzv::JsonInt(nlohmann::json{{"port", 2379}}, "port"), 2379);
}

TEST(RdzvUrl, Parses) {
  EXPECT_EQ(*rdzv::ParseRdzvUrl("etcd://10.0.0.1:2379"), "10.0.0.1:2379");
  EXPECT_EQ(*rdzv::ParseRdzvUrl("etcd://host:2379/"), "host:2379");
  EXPECT_FALSE(rdzv::ParseRdzvUrl("http://host:2379").ok());
  EXPECT_FALSE(rdzv::ParseRdzvUrl("etcd://host").ok());
  EXPECT_FALSE(rdzv::ParseRdzvUrl("etcd://host:x").ok());
  EXPECT_FALSE(rdzv::ParseRdzvUrl("etcd://").ok());
  // A refusal is one line, whatever the URL held.
  const std::vector<std::string> urls = {"http://a\nb:1", "etcd://a:1\x1b[31m",
                                         "etcd://" + std::string(300, 'h')};
  for (const std::string& url : urls) {
    const auto refused = rdzv::ParseRdzvUrl(url);
    ASSERT_FALSE(refused.ok()) << url;
    const std::string m(refused.status().message());
    EXPECT_EQ(m.find_first_of("\n\x1b"), std::string::npos) << m;
    EXPECT_LT(m.size(), 200u) << m;
  }
  EXPECT_TRUE(rdzv::CheckRunId("job-7.a_b").ok());
  EXPECT_FALSE(rdzv::CheckRunId("a/b").ok());
  EXPECT_FALSE(rdzv::CheckRunId("").ok());
}

}  // namespace
}  // namespace ltd
