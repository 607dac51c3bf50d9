// Static multi-node runs end to end (issue 11): two real ltd instances, one
// socket and state dir each, stand in for two nodes of one run; their
// ranks form one torch.distributed gloo job of 2 nodes x 2 ranks through
// MASTER_ADDR:MASTER_PORT. Skipped without python3-torch.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "harness.h"

namespace ltd::test {
namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kTrain = std::string(LT_TEST_RANKS_DIR) + "/multinode_train.py";

bool HasTorch() {
  static const bool has =
      RunCommand({kPython, "-c", "import torch.distributed"}, {}, 300s).exit_code == 0;
  return has;
}

// A TCP port free on loopback right now, for the run's MASTER_PORT.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

std::string Trim(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

class MultiNode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HasTorch()) GTEST_SKIP() << "python3-torch is not installed";
    for (Daemon* d : {&node0_, &node1_}) {
      ASSERT_TRUE(d->Start({"--devices", "2"})) << "ltd did not start:\n" << d->log();
    }
    port_ = FreePort();
    ASSERT_NE(port_, 0);
  }

  void TearDown() override {
    for (Daemon* d : {&node0_, &node1_}) {
      d->Stop();
      EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d->marker()).empty(); }, 5s));
      for (pid_t pid : ProcessesWithMarker(d->marker())) kill(pid, SIGKILL);
      if (HasFailure()) std::fprintf(stderr, "---- ltd log ----\n%s\n", d->log().c_str());
    }
    EXPECT_TRUE(ZombieChildrenOf(getpid()).empty());
  }

  // Submits node `rank`'s part of the run, detached; returns the job id.
  std::string Submit(const Daemon& d, int node_rank, std::vector<std::string> program) {
    std::vector<std::string> args = {
        "submit",        "-d",        "--devices",     "2",
        "--nnodes",      "2",         "--node-rank",   std::to_string(node_rank),
        "--master-addr", "127.0.0.1", "--master-port", std::to_string(port_),
        "--run-id",      "mn-e2e"};
    args.insert(args.end(), program.begin(), program.end());
    CmdResult r = d.Ctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Trim(r.out);
  }

  Daemon node0_, node1_;
  int port_ = 0;
};

TEST_F(MultiNode, TwoNodesOfTwoRanksTrainAsOneGlooJob) {
  const std::vector<std::string> program = {"--", kPython, kTrain, "--steps", "5"};
  const std::string id0 = Submit(node0_, 0, program);
  const std::string id1 = Submit(node1_, 1, program);
  nlohmann::json job0 = node0_.WaitEnded(id0, 180s);
  nlohmann::json job1 = node1_.WaitEnded(id1, 180s);
  EXPECT_EQ(job0["state"], "SUCCEEDED") << job0.dump(1) << node0_.Ctl({"logs", id0}).out;
  EXPECT_EQ(job1["state"], "SUCCEEDED") << job1.dump(1) << node1_.Ctl({"logs", id1}).out;

  // Every global rank of the run took part, numbered as torchrun does.
  const std::string logs0 = node0_.Ctl({"logs", id0}).out;
  const std::string logs1 = node1_.Ctl({"logs", id1}).out;
  for (const auto& [logs, line] : std::vector<std::pair<std::string, std::string>>{
           {logs0, "[0] multinode ok rank=0 world=4 node=0 local=0 run=mn-e2e"},
           {logs0, "[1] multinode ok rank=1 world=4 node=0 local=1 run=mn-e2e"},
           {logs1, "[0] multinode ok rank=2 world=4 node=1 local=0 run=mn-e2e"},
           {logs1, "[1] multinode ok rank=3 world=4 node=1 local=1 run=mn-e2e"}}) {
    EXPECT_NE(logs.find(line), std::string::npos) << "no '" << line << "' in:\n" << logs;
  }

  // The record, `show` and `ps` say which node of which run each is.
  EXPECT_EQ(job1["nnodes"], 2);
  EXPECT_EQ(job1["node_rank"], 1);
  EXPECT_EQ(job1["master_addr"], "127.0.0.1");
  EXPECT_EQ(job1["master_port"], port_);
  EXPECT_EQ(job1["run_id"], "mn-e2e");
  EXPECT_TRUE(job1["nodes"].empty());  // a static run knows only itself
  const std::string show = node1_.Ctl({"show", id1}).out;
  EXPECT_NE(show.find("Nodes:         node 1/2 (static), run mn-e2e, master 127.0.0.1:" +
                      std::to_string(port_)),
            std::string::npos)
      << show;
  EXPECT_NE(show.find("RANK  GLOBAL"), std::string::npos) << show;
  const std::string ps = node1_.Ctl({"ps", "-a"}).out;
  EXPECT_NE(ps.find("NODE"), std::string::npos) << ps;
  EXPECT_NE(ps.find(" 1/2 "), std::string::npos) << ps;
}

TEST_F(MultiNode, BadNodeFlagsAreRefusedAtSubmitWithOneLine) {
  const std::string port = std::to_string(port_);
  struct Case {
    std::vector<std::string> flags;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{"--nnodes", "2", "--master-addr", "h", "--master-port", port},
       "--nnodes 2 needs --node-rank (0..1, a different one on each node) or --rdzv"},
      {{"--nnodes", "2", "--node-rank", "2", "--master-addr", "h", "--master-port", port},
       "--node-rank 2 is outside 0..1 (--nnodes 2)"},
      {{"--nnodes", "2", "--node-rank", "1"},
       "a static multi-node job needs --master-addr and --master-port"},
      {{"--nnodes", "0"}, "--nnodes"},
      {{"--nnodes", "2", "--node-rank", "0", "--master-addr", "a;b", "--master-port", port},
       "--master-addr 'a;b' is not a host name or IP address"},
      {{"--master-port", "70000"}, "--master-port"},
      {{"--rdzv", "http://x:1"}, "--rdzv 'http://x:1' is not etcd://HOST:PORT"},
      {{"--nnodes", "2", "--node-rank", "0", "--master-addr", "h", "--master-port", port,
        "--max-restarts", "1"},
       "--max-restarts of a multi-node job needs --rdzv"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"submit", "-d", "--devices", "2"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    args.insert(args.end(), {"--", "/bin/true"});
    CmdResult r = node0_.Ctl(args);
    EXPECT_EQ(r.exit_code, 1) << c.error;
    EXPECT_NE(r.err.find(c.error), std::string::npos) << "got: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_EQ(Trim(node0_.Ctl({"ps", "-a", "--json"}).out), "[]");  // nothing was started
}

}  // namespace
}  // namespace ltd::test
