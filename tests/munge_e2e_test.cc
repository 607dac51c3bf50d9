// Multi-node runs sealed with a real MUNGE (a munged with a key the test
// made) at a real etcd, end to end with ltrun: another user's ltrun that
// tries to join a run as its node 1, and reports written straight into
// etcd (plain, and as that user's MUNGE credential) to decide it, are
// refused and counted; the run succeeds once its own node 1 comes. Needs
// root (the other user is a throwaway local one), munged and etcd.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "etcd_client.h"
#include "etcd_server.h"
#include "harness.h"
#include "munge_server.h"
#include "record_auth.h"

namespace ltd::test {
namespace {

std::string LtrunPath() { return LtdPath().substr(0, LtdPath().rfind('/')) + "/ltrun"; }

class MungeRun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: it makes a local user and runs munged";
    if (access("/usr/sbin/useradd", X_OK) != 0) GTEST_SKIP() << "useradd is not installed";
    munge_ = std::make_unique<MungeServer>();
    if (!munge_->ok()) GTEST_SKIP() << "munged cannot start here: " << munge_->error();
    etcd_ = std::make_unique<EtcdServer>();
    if (!etcd_->ok()) GTEST_SKIP() << "etcd cannot start here: " << etcd_->error();
    auto c = etcd::Client::Connect(etcd_->endpoint(), 5s);
    ASSERT_TRUE(c.ok()) << c.status();
    raw_ = std::move(*c);
    other_ = std::make_unique<TestUser>("ltmg" + std::to_string(getpid()) + "b");
    ASSERT_TRUE(other_->ok()) << other_->error();
    char tmpl[] = "/tmp/ltd-munge-e2e.XXXXXX";
    dir_ = mkdtemp(tmpl);
    chmod(dir_.c_str(), 0755);  // the other user's ltrun reads ltrun's helpers only
    marker_ = "LT_TEST_TAG=" + dir_;
    run_id_ = "mrun" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void TearDown() override {
    if (!dir_.empty()) {
      EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(marker_).empty(); }, 10s))
          << "processes left behind: " << ProcessesWithMarker(marker_).size();
      for (pid_t pid : ProcessesWithMarker(marker_)) kill(pid, SIGKILL);
    }
    if (other_ && other_->ok()) {
      EXPECT_TRUE(WaitFor([&] { return ProcessesOfUser(other_->uid()).empty(); }, 10s));
      EXPECT_TRUE(other_->Remove()) << other_->error();
    }
    EXPECT_TRUE(ZombieChildrenOf(getpid()).empty());
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // ltrun as node `node` of a 2-node run of 1 rank each, sealed with MUNGE.
  std::vector<std::string> Node(int node, const std::string& state, std::string timeout,
                                std::vector<std::string> command) {
    std::vector<std::string> argv = {LtrunPath(),
                                     "--rdzv",
                                     etcd_->url(),
                                     "--run-id",
                                     run_id_,
                                     "--nnodes",
                                     "2",
                                     "--devices",
                                     "1",
                                     "--node-rank",
                                     std::to_string(node),
                                     "--master-addr",
                                     "127.0.0.1",
                                     "--no-slurm",
                                     "--rdzv-auth",
                                     "munge",
                                     "--munge-socket",
                                     munge_->socket(),
                                     "--rdzv-timeout",
                                     timeout,
                                     "--state-dir",
                                     state,
                                     "--report",
                                     state + ".json",
                                     "--"};
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  }
  nlohmann::json Json(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in, nullptr, false);
  }
  // The refusals ltrun's job record holds so far (it saves each of the first).
  int64_t Refused(const std::string& state) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(state + "/jobs", ec)) {
      nlohmann::json j = Json(e.path().string() + "/job.json");
      if (j.is_object()) return j.value("rdzv_refused", int64_t{0});
    }
    return 0;
  }
  bool KeyThere(const std::string& rest) {
    auto kv = raw_->Get("/ltd/runs/" + run_id_ + "/" + rest);
    return kv.ok() && kv->has_value();
  }
  // A MUNGE credential made by the other user over `payload`.
  std::string CredentialOfOther(const std::string& payload) {
    const std::string file = dir_ + "/payload";
    std::ofstream(file) << payload;
    chmod(file.c_str(), 0644);
    CmdResult r = RunCommandAs(other_->As(), {"/usr/bin/munge", "-S", munge_->socket(), "-i", file},
                               {marker_}, 10s);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return TrimEnd(r.out);
  }

  std::unique_ptr<MungeServer> munge_;
  std::unique_ptr<EtcdServer> etcd_;
  std::unique_ptr<etcd::Client> raw_;
  std::unique_ptr<TestUser> other_;
  std::string dir_, marker_, run_id_;
};

TEST_F(MungeRun, AnotherUserCannotJoinOrDecideARun) {
  // The other user's ltrun, as the issue ran it: node 1 of the run.
  const std::string other_state = dir_ + "/other";
  mkdir(other_state.c_str(), 0700);
  chown(other_state.c_str(), other_->uid(), other_->gid());
  auto intruder = std::async(std::launch::async, [&] {
    return RunCommandAs(other_->As(dir_),
                        Node(1, other_state + "/s", "15s", {"sh", "-c", "exit 42"}), {marker_},
                        60s);
  });
  ASSERT_TRUE(WaitFor([&] { return KeyThere("nodes/1"); }, 20s));
  // The owner's nodes: each rank waits for the test's word, so that the
  // forged reports come while the run runs.
  const std::string go = dir_ + "/go";
  auto rank = [&](int node) {
    const std::string started = dir_ + "/started" + std::to_string(node);
    return std::vector<std::string>{
        "sh", "-c",
        "touch " + started + "; i=0; while [ ! -e " + go +
            " ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; exit 0"};
  };
  const std::string s0 = dir_ + "/node0", s1 = dir_ + "/node1";
  auto zero = std::async(std::launch::async,
                         [&] { return RunCommand(Node(0, s0, "60s", rank(0)), {marker_}, 90s); });
  // Node 0 meets no node 1 it believes: it waits (the intruder's is counted).
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(s0 + "/jobs"); }, 20s));
  EXPECT_FALSE(WaitFor([&] { return std::filesystem::exists(dir_ + "/started0"); }, 1s))
      << "node 0 started its ranks with another user's node 1";
  auto one = std::async(std::launch::async,
                        [&] { return RunCommand(Node(1, s1, "60s", rank(1)), {marker_}, 90s); });
  ASSERT_TRUE(WaitFor(
      [&] {
        return std::filesystem::exists(dir_ + "/started0") &&
               std::filesystem::exists(dir_ + "/started1");
      },
      30s));
  // A report written straight into etcd, and one as the other user's
  // credential over a well-formed payload for the owner's uid.
  const std::string key = "/ltd/runs/" + run_id_ + "/attempts/0/report/1";
  const std::string forged =
      R"J({"kind":"primary","what":"","cause":{"reason":"exited","rank":1,"exit_code":42,)J"
      R"J("message":"uncorrectable ECC error on GPU 1 (forged)"}})J";
  const int64_t before = Refused(s0);
  ASSERT_TRUE(raw_->Put(key, forged).ok());
  ASSERT_TRUE(raw_->Put(key, CredentialOfOther(rdzv::RecordAuth::Frame(0, key, forged))).ok());
  EXPECT_TRUE(WaitFor([&] { return Refused(s0) >= before + 2; }, 20s))
      << "node 0 refused " << Refused(s0) - before << " of the 2 forged reports";
  std::ofstream(go) << "go";
  CmdResult r0 = zero.get(), r1 = one.get(), rb = intruder.get();
  EXPECT_EQ(r0.exit_code, 0) << r0.err;
  EXPECT_EQ(r1.exit_code, 0) << r1.err;
  nlohmann::json n0 = Json(s0 + ".json"), n1 = Json(s1 + ".json");
  ASSERT_TRUE(n0.is_object() && n1.is_object()) << r0.err << r1.err;
  EXPECT_EQ(n0["state"], "SUCCEEDED") << n0.dump(1);
  EXPECT_EQ(n1["state"], "SUCCEEDED") << n1.dump(1);
  EXPECT_GE(n0.value("rdzv_refused", 0), 3) << n0.dump(1);  // its node key, 2 reports
  EXPECT_NE(r0.err.find("refused etcd record"), std::string::npos) << r0.err;
  // The other user's node met nobody it believes, and ran nothing.
  EXPECT_NE(rb.exit_code, 0);
  EXPECT_NE(rb.exit_code, 42) << rb.err;
  EXPECT_NE(rb.err.find("did not complete"), std::string::npos) << rb.err;
}

}  // namespace
}  // namespace ltd::test
