// The Slurm recipe end to end (issue 11): a real two-node Slurm cluster on
// this machine (tests/slurm/cluster.sh: one slurmctld, two slurmd), and
// `srun -N2 --ntasks-per-node=1 --kill-on-bad-exit=1 ltrun --devices 2 --
// python3 <gloo trainer>`, which takes node rank, master address and port
// and run id from Slurm. Skipped where Slurm cannot start (not installed,
// not root) or python3-torch is missing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "harness.h"

namespace ltd::test {
namespace {

const std::string kRanks = LT_TEST_RANKS_DIR;
const std::string kCluster = std::string(LT_TEST_SOURCE_DIR) + "/slurm/cluster.sh";
const std::string kSbatch = std::string(LT_EXAMPLES_DIR) + "/slurm/train.sbatch";
const std::string kPython = "/usr/bin/python3";
const std::string kTrain = kRanks + "/multinode_train.py";

std::string LtrunPath() { return LtdPath().substr(0, LtdPath().rfind('/')) + "/ltrun"; }

bool HasTorch() {
  static const bool has =
      RunCommand({kPython, "-c", "import torch.distributed"}, {}, 300s).exit_code == 0;
  return has;
}

class Slurm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HasTorch()) GTEST_SKIP() << "python3-torch is not installed";
    char tmpl[] = "/tmp/ltd-slurm.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    marker_ = "LT_TEST_TAG=" + dir_;
    CmdResult r = RunCommand({kCluster, "start", dir_ + "/cluster"}, {}, 60s);
    if (r.exit_code == 77) GTEST_SKIP() << r.out << r.err;
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    started_ = true;
    conf_ = "SLURM_CONF=" + dir_ + "/cluster/slurm.conf";
  }

  void TearDown() override {
    if (started_) {
      // Every step has ended (srun waited for it); the daemons go now.
      CmdResult r = RunCommand({kCluster, "stop", dir_ + "/cluster"}, {}, 60s);
      EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
      if (HasFailure()) {
        std::fprintf(
            stderr, "---- Slurm's logs ----\n%s\n",
            RunCommand({"/bin/sh", "-c", "tail -n 30 " + dir_ + "/cluster/log/*.log"}, {}, 10s)
                .out.c_str());
      }
    }
    if (!dir_.empty()) {
      EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(marker_).empty(); }, 10s))
          << "processes left behind: " << ProcessesWithMarker(marker_).size();
      for (pid_t pid : ProcessesWithMarker(marker_)) kill(pid, SIGKILL);
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
    EXPECT_TRUE(ZombieChildrenOf(getpid()).empty());
  }

  CmdResult Srun(std::vector<std::string> args) {
    std::vector<std::string> argv = {"/usr/bin/srun",
                                     "-N2",
                                     "--ntasks-per-node=1",
                                     "--kill-on-bad-exit=1",
                                     LtrunPath(),
                                     "--devices",
                                     "2",
                                     "--"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, {conf_, marker_}, 240s);
  }

  std::string dir_, marker_, conf_;
  bool started_ = false;
};

// The shipped example (examples/slurm/train.sbatch) on two nodes: one
// gloo job of 2 x 2 ranks, numbered as torchrun does, run id from Slurm.
TEST_F(Slurm, TheSbatchExampleRunsCleanOnTwoNodes) {
  const std::string out = dir_ + "/out.txt";
  // Not `sbatch --wait`, which polls at growing intervals: the job's state, every 200 ms.
  CmdResult r = RunCommand({"/usr/bin/sbatch", "--parsable", "--nodes=2", "--output=" + out,
                            kSbatch, kPython, kTrain, "--steps", "5"},
                           {conf_, marker_, "LTRUN=" + LtrunPath(), "DEVICES_PER_NODE=2"}, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string job = r.out.substr(0, r.out.find_first_of(";\n"));
  std::string state;
  EXPECT_TRUE(WaitFor(
      [&] {
        state = RunCommand({"/usr/bin/scontrol", "show", "job", job}, {conf_}, 30s).out;
        const bool ended = state.find("JobState=COMPLETED") != std::string::npos ||
                           state.find("JobState=FAILED") != std::string::npos ||
                           state.find("JobState=CANCELLED") != std::string::npos;
        if (!ended) std::this_thread::sleep_for(200ms);  // scontrol is an RPC: not every ms
        return ended;
      },
      240s));
  std::string output;
  {
    std::ifstream in(out);
    output.assign(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_NE(state.find("JobState=COMPLETED"), std::string::npos) << state << output;
  EXPECT_NE(state.find("ExitCode=0:0"), std::string::npos) << state << output;
  const std::regex line(
      R"(\[(\d)\] multinode ok rank=(\d) world=4 node=(\d) local=(\d) run=slurm-(\d+)\.0)");
  std::set<std::string> ranks;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    EXPECT_EQ(m[1], m[4]);  // ltrun's [R] prefix is the local rank
    EXPECT_EQ(std::stoi(m[2]), std::stoi(m[3]) * 2 + std::stoi(m[4]));
    ranks.insert(m[2]);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"})) << output;
}

// Global rank 3 (node 1's local rank 1) exits 3 mid-run: node 1's ltrun
// ends with the root cause (node and global rank named) and its code, srun
// ends node 0's task, and nothing of either node survives.
TEST_F(Slurm, ARankCrashOnOneNodeEndsTheRunWithItsRootCause) {
  CmdResult r = Srun({kPython, kTrain, "--steps", "1000", "--step-seconds", "0.05", "--fail-rank",
                      "3", "--fail-step", "3", "--exit-code", "3"});
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(
      r.err.find("ltrun: job FAILED on node 1 of 2 (global rank 3): rank 1 exited with code 3 "
                 "(exit code 3)"),
      std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("task 1: Exited with exit code 3"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("[1] rank 3 fails at step 3"), std::string::npos) << r.out;
}

// What ltrun cannot run as (more than one task per node) is refused at once.
TEST_F(Slurm, MoreThanOneTaskPerNodeIsRefusedWithTheRecipe) {
  CmdResult r = RunCommand({"/usr/bin/srun", "-N2", "--ntasks-per-node=2", "--kill-on-bad-exit=1",
                            LtrunPath(), "--devices", "1", "--", "/bin/true"},
                           {conf_, marker_}, 120s);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("this Slurm step runs 4 tasks on 2 nodes, but ltrun starts the ranks "
                       "itself; start one ltrun per node: srun -N2 --ntasks-per-node=1"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace ltd::test
