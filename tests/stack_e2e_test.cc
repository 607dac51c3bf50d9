// `ltctl stack` end to end: a real ltd, real ranks, taken while they run.
//
//   a 4-rank torch.distributed (gloo) job mid-training: each rank's Python
//     frames name the training loop's line (faulthandler through the stack
//     pipe), and the job then finishes normally: exit 0, no restart;
//   a LibTorch rank (examples/train): native frames (eu-stack);
//   a stopped rank says so; another user may not look.
#include <signal.h>

#include <fstream>
#include <regex>
#include <string>

#include "e2e_fixture.h"
#include "process_scan.h"

namespace ltd::test {
namespace {

const std::string kRanks = LT_TEST_RANKS_DIR;
const std::string kPython = "/usr/bin/python3";
const std::string kTrain = kRanks + "/auto_train.py";
const std::string kChild = TestChildPath();

bool HasTorch() {
  static const bool has =
      RunCommand({kPython, "-c", "import torch.distributed"}, {}, 60s).exit_code == 0;
  return has;
}

// The lines of auto_train.py's training loop: from `for step in range`
// to the barrier after it.
std::pair<int, int> TrainingLoopLines() {
  std::ifstream in(kTrain);
  std::string line;
  int n = 0, first = 0, last = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find("for step in range(args.steps):") != std::string::npos) first = n;
    if (first != 0 && last == 0 && n > first && line == "    dist.barrier()") last = n;
  }
  return {first, last};
}

class Stack : public E2E {
 protected:
  nlohmann::json Stacks(const std::string& id, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {"stack", id, "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    CmdResult r = d_.Ctl(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  }
  // Every rank has reported an optimizer step: training, past start-up.
  bool Training(const std::string& id, size_t ranks) {
    nlohmann::json job = d_.Show(id);
    if (job["state"] != "RUNNING" || job["ranks"].size() != ranks) return false;
    for (const auto& r : job["ranks"]) {
      if (!r.contains("last_step") || !r["last_step"].is_number()) return false;
      if (r["last_step"].get<int64_t>() < 2) return false;
    }
    return true;
  }
};

TEST_F(Stack, PythonDdpRanksShowTheTrainingLoopAndTheJobGoesOn) {
  if (!HasTorch()) GTEST_SKIP() << "python3-torch is not installed";
  const std::string stop = d_.dir() + "/stop";
  const std::string id = SubmitDetached(
      {"--devices", "4", "--", kPython, kTrain, "--steps", "1000000", "--until-file", stop});
  ASSERT_TRUE(WaitFor([&] { return Training(id, 4); }, 180s)) << d_.Show(id).dump(1);
  const auto [first, last] = TrainingLoopLines();
  ASSERT_GT(first, 0);
  ASSERT_GT(last, first);
  const std::regex frame("File \"" + kTrain + "\", line ([0-9]+) in main");
  nlohmann::json got = Stacks(id);
  ASSERT_EQ(got["ranks"].size(), 4u) << got.dump(1);
  for (const auto& r : got["ranks"]) {
    EXPECT_EQ(r["kind"], "python") << r.dump(1);
    const std::string frames = r.value("frames", "");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(frames, m, frame)) << frames;
    const int line = std::stoi(m[1]);
    EXPECT_GE(line, first) << frames;
    EXPECT_LT(line, last) << frames;
    EXPECT_NE(r.value("kernel", "").find("kernel: thread "), std::string::npos) << r.dump(1);
  }
  // One rank, in the text form.
  CmdResult text = d_.Ctl({"stack", id, "--rank", "2"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("== rank 2 (pid "), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("== rank 1 "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("auto_train.py"), std::string::npos) << text.out;

  std::ofstream(stop) << "";
  nlohmann::json job = d_.WaitEnded(id, 120s);
  EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump(1);
  EXPECT_EQ(job["exit_code"], 0);
  EXPECT_EQ(job["restart_count"], 0);
  // Nothing of the dumps reached the ranks' own output.
  EXPECT_EQ(d_.Ctl({"logs", id}).out.find("most recent call first"), std::string::npos);
}

TEST_F(Stack, LibTorchRankShowsNativeFrames) {
#ifndef LT_TRAIN
  GTEST_SKIP() << "examples/train was not built (LibTorch not found)";
#else
  const std::string id =
      SubmitDetached({"--devices", "2", "--", LT_TRAIN, "--steps", "1000000", "--step-ms", "20"});
  ASSERT_TRUE(WaitFor([&] { return Training(id, 2); }, 120s)) << d_.Show(id).dump(1);
  nlohmann::json got = Stacks(id, {"--rank", "1"});
  ASSERT_EQ(got["ranks"].size(), 1u) << got.dump(1);
  const auto& r = got["ranks"][0];
  EXPECT_EQ(r["rank"], 1);
  EXPECT_EQ(r["kind"], "native") << r.dump(1);
  const std::string frames = r.value("frames", "");
  EXPECT_NE(frames.find("Thread "), std::string::npos) << frames;
  EXPECT_NE(frames.find("#0"), std::string::npos) << frames;
  EXPECT_NE(frames.find("main"), std::string::npos) << frames;
  EXPECT_EQ(d_.Show(id)["state"], "RUNNING");
  EXPECT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  d_.WaitEnded(id, 60s);
#endif
}

TEST_F(Stack, AStoppedRankSaysSoAndOnlyARunningJobHasStacks) {
  const std::string id = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(id)["state"] == "RUNNING"; }, 20s));
  const pid_t pid = d_.Show(id)["ranks"][0]["pid"].get<pid_t>();
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto e = ReadProcEntry(pid);
        return e && e->state == 'T';
      },
      10s));
  nlohmann::json got = Stacks(id);
  ASSERT_EQ(got["ranks"].size(), 1u) << got.dump(1);
  EXPECT_EQ(got["ranks"][0]["state"], "T (stopped)") << got.dump(1);
  EXPECT_NE(got["ranks"][0].value("note", "").find("stopped"), std::string::npos) << got.dump(1);
  kill(pid, SIGCONT);
  CmdResult bad = d_.Ctl({"stack", id, "--rank", "5"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("has ranks 0-0"), std::string::npos) << bad.err;
  EXPECT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  d_.WaitEnded(id);
  CmdResult ended = d_.Ctl({"stack", id});
  EXPECT_EQ(ended.exit_code, 1);
  EXPECT_NE(ended.err.find("only a running job has stacks"), std::string::npos) << ended.err;
}

}  // namespace
}  // namespace ltd::test
