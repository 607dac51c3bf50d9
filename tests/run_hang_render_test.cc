// How ltctl shows a multi-node run's hang report (client/render.cc): node
// by node, each rank's step and whether it waits in a collective, the
// culprit's stack, the nodes that told nothing; a single node's report
// shows as it always has.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "api_convert.h"
#include "hang_ranks.h"
#include "render.h"
#include "run_hang.h"

namespace ltd {
namespace {

std::string Shown(const Job& job) {
  v1::Job pb;
  ToProto(job, kShowLimits, &pb);
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  PrintJob(pb, out);
  std::fclose(out);
  std::string text(buf, len);
  std::free(buf);
  return text;
}

HangReportRank Rank(int rank, bool stalled, bool in_collective, std::string stack) {
  return test::TakenRank(rank, 3, stalled, in_collective, std::move(stack));
}

Job RunJob() {
  Job job;
  job.id = "4";
  job.state = JobState::kFailed;
  job.spec.devices = 2;
  job.spec.nodes.nnodes = 3;
  job.spec.nodes.node_rank = 0;
  job.spec.nodes.rdzv = "etcd://127.0.0.1:2379";
  return job;
}

TEST(RunHangRender, ARunsReportShowsEveryNodesRanksAndTheMissing) {
  Job job = RunJob();
  HangReport own;
  own.ranks = {Rank(0, false, true, "  File \"torch/autograd/x.py\", line 1 in backward\n"),
               Rank(1, false, true, "")};
  HangReport theirs;
  theirs.ranks = {Rank(0, true, false, "  File \"/srv/train.py\", line 43 in main\n"),
                  Rank(1, false, true, "  File \"torch/autograd/x.py\", line 1 in backward\n")};
  NodeReport node1;
  node1.node = 1;
  node1.hang = CompactHang(theirs, 1, 0);
  job.hang_report =
      MergeRunHang(0, 3, 2, own, {node1}, 1, std::chrono::milliseconds(6000), WallTime{});
  const std::string text = Shown(job);
  EXPECT_NE(text.find("Hang report of the run"), std::string::npos) << text;
  EXPECT_NE(text.find("stalled first: node 1 rank 0 (global 2)"), std::string::npos) << text;
  EXPECT_NE(text.find("  node 0:\n    rank 0 (global 0): last step 3, waits in a collective\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  node 1:\n    rank 0 (global 2): last step 3, STALLED, outside any "
                      "collective\n      stack: taken (faulthandler)\n          File "
                      "\"/srv/train.py\", line 43 in main\n    rank 1 (global 3): last step 3, "
                      "waits in a collective\n  node 2: no report within 6s\n"),
            std::string::npos)
      << text;
}

TEST(RunHangRender, ASingleNodesReportShowsAsBefore) {
  Job job;
  job.id = "5";
  job.state = JobState::kFailed;
  HangReport h;
  h.stalled_ranks = {1};
  h.ranks = {Rank(0, false, true, ""), Rank(1, true, false, "#0 sleep\n")};
  job.hang_report = h;
  const std::string text = Shown(job);
  EXPECT_EQ(text.find("of the run"), std::string::npos) << text;
  EXPECT_NE(text.find("  stalled first: rank(s) [1]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  stragglers:    none\n"), std::string::npos) << "no []: " << text;
  EXPECT_NE(text.find("  rank 1: last step 3, last heartbeat -, STALLED\n    stack: taken "
                      "(faulthandler)\n      #0 sleep\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace ltd
