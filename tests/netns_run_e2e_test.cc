// A 4-node run on one machine, each node in a network namespace of its own
// on a bridge the test makes (10.213.N.0/24, N from the test's pid),
// meeting at a real etcd on the bridge's address in the root namespace:
// `ltrun --rdzv ... --node-rank i --heartbeat-timeout 5s` per node, 2 gloo
// ranks each (GLOO_SOCKET_IFNAME=eth0), tests/ranks/multinode_train.py.
// Faults on node 2, and what every node's record must name: a rank that
// stalls outside a collective (not a node whose ranks only wait for it;
// with the run's hang report, every node's ranks and its stack), a
// node SIGKILLed whole (not a survivor whose gloo saw its sockets close),
// and a rank that exits 3. As root with `ip` and `nsenter`; skipped
// without them, python3-torch or etcd. Namespaces, veths, the bridge, etcd
// and every process are removed even when a check fails.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "cgroup_fs.h"
#include "etcd_server.h"
#include "harness.h"
#include "str_util.h"

namespace ltd::test {
namespace {

constexpr int kNodes = 4;
const std::string kPython = "/usr/bin/python3";
const std::string kTrain = std::string(LT_TEST_RANKS_DIR) + "/multinode_train.py";

std::string LtrunPath() { return LtdPath().substr(0, LtdPath().rfind('/')) + "/ltrun"; }

bool Sh(const std::string& cmd, std::string* err = nullptr) {
  CmdResult r = RunCommand({"/bin/sh", "-c", cmd}, {}, std::chrono::seconds(30));
  if (err != nullptr) *err = r.err;
  return r.exit_code == 0;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class NetnsRun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (getuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    if (access("/usr/sbin/ip", X_OK) != 0 && access("/sbin/ip", X_OK) != 0) {
      GTEST_SKIP() << "ip (iproute2) is not installed";
    }
    if (access("/usr/bin/nsenter", X_OK) != 0) GTEST_SKIP() << "nsenter is not installed";
    if (RunCommand({kPython, "-c", "import torch.distributed"}, {}, 300s).exit_code != 0) {
      GTEST_SKIP() << "python3-torch is not installed";
    }
    const int tag = getpid() % 100000;
    net_ = getpid() % 250 + 1;
    bridge_ = "ltb" + std::to_string(tag);
    for (int i = 0; i < kNodes; ++i) {
      netns_.push_back("ltn" + std::to_string(tag) + "-" + std::to_string(i));
    }
    // Made before anything that could fail, so TearDown removes whatever
    // of it exists.
    made_ = true;
    std::string err;
    ASSERT_TRUE(Sh(Cat("ip link add ", bridge_, " type bridge && ip addr add ", Addr(1), "/24 dev ",
                       bridge_, " && ip link set ", bridge_, " up"),
                   &err))
        << err;
    for (int i = 0; i < kNodes; ++i) {
      const std::string ns = netns_[static_cast<size_t>(i)];
      const std::string veth = "ltv" + std::to_string(tag) + "-" + std::to_string(i);
      ASSERT_TRUE(
          Sh(Cat("ip netns add ", ns, " && ip link add ", veth, " type veth peer name eth0 netns ",
                 ns, " && ip link set ", veth, " master ", bridge_, " up && ip -n ", ns,
                 " addr add ", Addr(10 + i), "/24 dev eth0 && ip -n ", ns,
                 " link set eth0 up && ip -n ", ns, " link set lo up"),
             &err))
          << err;
    }
    etcd_ = std::make_unique<EtcdServer>(Addr(1));
    if (!etcd_->ok()) GTEST_SKIP() << "etcd cannot start here: " << etcd_->error();
    char tmpl[] = "/tmp/ltd-netns-e2e.XXXXXX";
    dir_ = mkdtemp(tmpl);
    marks_ = dir_ + "/marks";
    std::filesystem::create_directory(marks_);
    marker_ = "LT_TEST_TAG=" + dir_;
    run_id_ = "netns" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  void TearDown() override {
    if (!dir_.empty()) {
      EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(marker_).empty(); }, 15s))
          << "processes left behind: " << ProcessesWithMarker(marker_).size();
      for (pid_t pid : ProcessesWithMarker(marker_)) kill(pid, SIGKILL);
      WaitFor([&] { return ProcessesWithMarker(marker_).empty(); }, 5s);
      RemoveCgroupsOf(killed_);
      EXPECT_TRUE(ZombieChildrenOf(getpid()).empty());
      std::filesystem::remove_all(dir_);
    }
    etcd_.reset();
    if (!made_) return;
    for (const std::string& ns : netns_) Sh("ip netns del " + ns + " 2>/dev/null");
    Sh("ip link del " + bridge_ + " 2>/dev/null");
    // Deleting a namespace deletes its end of the veth, and with it the
    // pair; nothing of the test's is left on the host.
    EXPECT_FALSE(Sh("ip link show " + bridge_ + " >/dev/null 2>&1"));
    for (const std::string& ns : netns_) {
      EXPECT_FALSE(std::filesystem::exists("/run/netns/" + ns)) << ns;
    }
  }

  std::string Addr(int host) const { return Cat("10.213.", net_, ".", host); }

  // A SIGKILLed ltrun cannot remove its cgroups (ltd's sweep would, had it
  // one); the test does, as it stands in for whoever ran it.
  void RemoveCgroupsOf(pid_t ltrun) {
    auto own = OwnCgroupDir();
    if (!own.ok() || ltrun <= 0) return;
    for (const std::string& base : ChildCgroups(*own)) {
      const std::string dir = *own + "/" + base + "/run-ltrun" + std::to_string(ltrun);
      if (!base.starts_with("ltd-") || access(dir.c_str(), F_OK) != 0) continue;
      EXPECT_TRUE(RemoveCgroupTree(dir).ok()) << dir;
      rmdir((*own + "/" + base).c_str());
    }
  }

  std::vector<std::string> Node(int i, const std::vector<std::string>& train) {
    std::vector<std::string> flags = lease_.empty()
                                         ? std::vector<std::string>{}
                                         : std::vector<std::string>{"--rdzv-lease", lease_};
    std::vector<std::string> argv = {"/usr/bin/nsenter",
                                     "--net=/run/netns/" + netns_[static_cast<size_t>(i)],
                                     "--",
                                     LtrunPath(),
                                     "--rdzv",
                                     etcd_->url(),
                                     "--run-id",
                                     run_id_,
                                     "--nnodes",
                                     std::to_string(kNodes),
                                     "--node-rank",
                                     std::to_string(i),
                                     "--devices",
                                     "2",
                                     "--heartbeat-timeout",
                                     "5s",
                                     "--no-slurm",
                                     "--report",
                                     Report(i),
                                     "--state-dir",
                                     Cat(dir_, "/state", i),
                                     "--",
                                     kPython,
                                     kTrain,
                                     "--mark-dir",
                                     marks_};
    argv.insert(argv.begin() + 4, flags.begin(), flags.end());  // after ltrun
    argv.insert(argv.end(), train.begin(), train.end());
    return argv;
  }
  std::string Report(int i) { return Cat(dir_, "/node", i, ".json"); }
  // What each node's ltrun said, for a run that went wrong.
  static std::string NodesSaid(const std::vector<CmdResult>& r) {
    std::string out;
    for (size_t i = 0; i < r.size(); ++i) {
      out += Cat("\n---- node ", i, ": exit code ", r[i].exit_code, "\n", r[i].err);
    }
    return out;
  }
  nlohmann::json Record(int i) { return nlohmann::json::parse(Read(Report(i)), nullptr, false); }

  // Every node at once; `node2_started` gets node 2's ltrun pid.
  std::vector<CmdResult> RunAll(const std::vector<std::string>& train,
                                std::atomic<pid_t>* node2 = nullptr) {
    const std::vector<std::string> env = {marker_, "PYTHONPATH=" LT_PYTHON_DIR,
                                          "GLOO_SOCKET_IFNAME=eth0", "OMP_NUM_THREADS=1"};
    std::vector<std::future<CmdResult>> runs;
    for (int i = 0; i < kNodes; ++i) {
      runs.push_back(std::async(std::launch::async, [this, i, env, train, node2] {
        return RunCommand(Node(i, train), env, 240s, [i, node2](pid_t pid) {
          if (i == 2 && node2 != nullptr) *node2 = pid;
        });
      }));
    }
    std::vector<CmdResult> out;
    for (auto& r : runs) out.push_back(r.get());
    return out;
  }

  // Every node's record names node 2's local rank 1 (global rank 5).
  void ExpectNode2Rank5(const std::vector<CmdResult>& r, int code, const char* reason) {
    for (int i = 0; i < kNodes; ++i) {
      EXPECT_EQ(r[static_cast<size_t>(i)].exit_code, code)
          << "node " << i << ": " << r[static_cast<size_t>(i)].err;
      nlohmann::json j = Record(i);
      ASSERT_TRUE(j.is_object()) << "node " << i << " wrote no record";
      const nlohmann::json& c = j["root_cause"];
      EXPECT_EQ(c["rank"], 1) << "node " << i << ": " << c.dump();
      if (i == 2) {
        EXPECT_EQ(c["reason"], reason) << c.dump();
      } else {
        EXPECT_EQ(c["reason"], "remote_failure") << "node " << i << ": " << c.dump();
        EXPECT_EQ(c["node"], 2) << "node " << i << ": " << c.dump();
        EXPECT_NE(c["message"].get<std::string>().find("node 2 rank 5"), std::string::npos)
            << "node " << i << ": " << c.dump();
      }
    }
  }

  int net_ = 0;
  bool made_ = false;
  std::string bridge_;
  std::vector<std::string> netns_;
  std::unique_ptr<EtcdServer> etcd_;
  std::string dir_, marks_, marker_, run_id_;
  pid_t killed_ = 0;
  std::string lease_;  // --rdzv-lease, when given
};

TEST_F(NetnsRun, RankExitingOnNode2IsNamedOnEveryNode) {
  auto r = RunAll({"--steps", "100000", "--step-seconds", "0.05", "--fail-rank", "5", "--fail-step",
                   "10", "--exit-code", "3"});
  ExpectNode2Rank5(r, 3, "exited");
}

TEST_F(NetnsRun, RankStalledOutsideACollectiveOnNode2IsNamedOnEveryNode) {
  // Every rank stops beating at once: rank 5 in time.sleep, the others in
  // their allreduce, so any node may find the hang first.
  auto r = RunAll({"--steps", "100000", "--step-seconds", "0.05", "--fail-rank", "5", "--fail-step",
                   "10", "--hang", "--timeout", "600"});
  ExpectNode2Rank5(r, 124, "hang");
  nlohmann::json two = Record(2);
  ASSERT_TRUE(two["hang_report"].is_object()) << two.dump(1);
  EXPECT_NE(two["root_cause"]["message"].get<std::string>().find("stalled outside a collective"),
            std::string::npos)
      << two["root_cause"].dump();
  // Every node's record holds the run's hang report: every node's ranks,
  // node by node, rank 5 (node 2's rank 1) the one outside a collective,
  // with its stack.
  for (int i = 0; i < kNodes; ++i) {
    const nlohmann::json h = Record(i)["hang_report"];
    ASSERT_TRUE(h.is_object()) << "node " << i;
    ASSERT_EQ(h["ranks"].size(), 2u * kNodes) << "node " << i << ": " << h.dump(1);
    EXPECT_TRUE(h["missing_nodes"].empty()) << "node " << i << ": " << h["missing_nodes"].dump();
    EXPECT_EQ(h["stalled_ranks"], nlohmann::json::array({5})) << "node " << i << ": " << h.dump(1);
    const nlohmann::json& culprit = h["ranks"][5];
    EXPECT_EQ(culprit["node"], 2) << culprit.dump();
    EXPECT_EQ(culprit["rank"], 1) << culprit.dump();
    EXPECT_EQ(culprit["in_collective"], false) << culprit.dump();
    EXPECT_NE(culprit["stack"].get<std::string>().find(".py"), std::string::npos)
        << "node " << i << ": " << culprit.dump();
  }
}

TEST_F(NetnsRun, Node2KilledWholeIsNamedOnEveryNode) {
  lease_ = "3s";  // named sooner than the default 5s would
  std::atomic<pid_t> node2{0};
  auto killer = std::async(std::launch::async, [&] {
    // Once the run trains (every rank's pid is marked), node 2's ltrun and
    // its ranks die at once, as a machine that loses power would.
    const bool up = WaitFor(
        [&] {
          for (int rank = 0; rank < 2 * kNodes; ++rank) {
            if (Read(Cat(marks_, "/rank-", rank, ".pid")).empty()) return false;
          }
          return node2.load() > 0;
        },
        180s);
    if (!up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a few steps in
    killed_ = node2.load();
    kill(killed_, SIGKILL);
    for (int rank : {4, 5}) kill(std::stoi(Read(Cat(marks_, "/rank-", rank, ".pid"))), SIGKILL);
    return true;
  });
  auto r = RunAll({"--steps", "100000", "--step-seconds", "0.05", "--timeout", "600"}, &node2);
  const bool started = killer.get();
  ASSERT_TRUE(started) << "the run did not start:" << NodesSaid(r);
  for (int i : {0, 1, 3}) {
    EXPECT_EQ(r[static_cast<size_t>(i)].exit_code, 1)
        << "node " << i << ": " << r[static_cast<size_t>(i)].err;
    nlohmann::json j = Record(i);
    ASSERT_TRUE(j.is_object()) << "node " << i << " wrote no record";
    const nlohmann::json& c = j["root_cause"];
    EXPECT_EQ(c["reason"], "remote_failure") << "node " << i << ": " << c.dump();
    EXPECT_EQ(c["node"], 2) << "node " << i << ": " << c.dump();
    EXPECT_NE(c["message"].get<std::string>().find(
                  "is gone: its supervisor and ranks vanished (its etcd lease expired)"),
              std::string::npos)
        << "node " << i << ": " << c.dump();
  }
}

}  // namespace
}  // namespace ltd::test
