// The run's root cause from its nodes' reports (model/run_verdict.h): the
// strongest evidence wins whatever arrived first; a consequence waits for
// the window unless every node has reported.
#include "run_verdict.h"

#include <gtest/gtest.h>

#include "hang_report.h"

namespace ltd {
namespace {

NodeReport Report(int node, Evidence kind, int64_t order, int rank = 1) {
  NodeReport r;
  r.node = node;
  r.kind = kind;
  r.order = order;
  r.cause.node = node;
  r.cause.rank = rank;
  return r;
}

TEST(RunVerdict, PrimaryBeatsAConsequenceWhateverArrivedFirst) {
  for (bool primary_first : {false, true}) {
    std::vector<NodeReport> reports = {Report(1, Evidence::kConsequence, primary_first ? 9 : 3),
                                       Report(2, Evidence::kPrimary, primary_first ? 3 : 9)};
    const NodeReport* best = Strongest(reports);
    ASSERT_NE(best, nullptr);
    EXPECT_EQ(best->node, 2) << primary_first;
    EXPECT_TRUE(VerdictReady(reports, 4, false));  // nothing beats a primary
  }
}

TEST(RunVerdict, AVanishedNodeBeatsItsPeersConnectionErrors) {
  std::vector<NodeReport> reports = {Report(0, Evidence::kConsequence, 10),
                                     Report(1, Evidence::kConsequence, 11),
                                     Report(3, Evidence::kConsequence, 12)};
  // The survivors' errors came at once; node 2's lease has not expired yet.
  EXPECT_FALSE(VerdictReady(reports, 4, false));
  reports.push_back(Report(2, Evidence::kNodeGone, 40, -1));
  ASSERT_TRUE(VerdictReady(reports, 4, false));  // every node is accounted for
  EXPECT_EQ(Strongest(reports)->node, 2);
}

TEST(RunVerdict, ANodesOwnCauseBeatsItsLossAndTheLossBeatsTornDownNodes) {
  std::vector<NodeReport> reports = {Report(0, Evidence::kTornDown, 1),
                                     Report(2, Evidence::kNodeGone, 5, -1)};
  EXPECT_EQ(Strongest(reports)->node, 2);
  reports.push_back(Report(1, Evidence::kPrimary, 9));
  EXPECT_EQ(Strongest(reports)->node, 1);
}

TEST(RunVerdict, ALoneConsequenceStandsOnlyOnceTheWindowClosed) {
  std::vector<NodeReport> reports = {Report(1, Evidence::kConsequence, 4)};
  EXPECT_FALSE(VerdictReady(reports, 4, false));
  EXPECT_TRUE(VerdictReady(reports, 4, true));
  EXPECT_EQ(Strongest(reports)->node, 1);
  EXPECT_EQ(StandingNote(VerdictWindow(std::chrono::seconds(5))),
            "no node reported a cause within 6s");
}

TEST(RunVerdict, AHangStillInvestigatedIsNoReportYet) {
  std::vector<NodeReport> reports = {
      Report(0, Evidence::kConsequence, 1), Report(1, Evidence::kConsequence, 2),
      Report(2, Evidence::kPending, 3), Report(3, Evidence::kConsequence, 4)};
  EXPECT_FALSE(VerdictReady(reports, 4, false));
  reports[2].kind = Evidence::kPrimary;
  EXPECT_TRUE(VerdictReady(reports, 4, false));
  EXPECT_EQ(Strongest(reports)->node, 2);
  // Only torn-down nodes and a pending hang when the window closed: the
  // hang as first found is all there is.
  std::vector<NodeReport> thin = {Report(0, Evidence::kTornDown, 1),
                                  Report(2, Evidence::kPending, 2)};
  EXPECT_FALSE(VerdictReady(thin, 2, false));
  EXPECT_EQ(Strongest(thin)->node, 2);
}

TEST(RunVerdict, AHangWithoutEvidenceBeatsNodesThatOnlyWait) {
  RootCause hang;
  hang.reason = CauseReason::kHang;
  HangReport unknown;  // --stack-budget 0: no stack taken
  unknown.ranks = {HangReportRank{}, HangReportRank{}};
  unknown.ranks[1].rank = 1;
  Classified c = ClassifyCause(hang, unknown, "");
  EXPECT_EQ(c.kind, Evidence::kUndetermined);
  // Node 0's ranks all wait in a collective and said so first: node 1,
  // which found the hang and cannot tell, is still the likelier culprit.
  std::vector<NodeReport> reports = {Report(0, Evidence::kConsequence, 1), Report(1, c.kind, 2)};
  EXPECT_EQ(Strongest(reports)->node, 1);
  reports.push_back(Report(2, Evidence::kNodeGone, 3, -1));
  EXPECT_EQ(Strongest(reports)->node, 2);
}

TEST(RunVerdict, AmongEqualsTheFirstToArrive) {
  std::vector<NodeReport> reports = {Report(3, Evidence::kPrimary, 8),
                                     Report(1, Evidence::kPrimary, 5)};
  EXPECT_EQ(Strongest(reports)->node, 1);
  EXPECT_EQ(Strongest({}), nullptr);
}

RootCause Exit(std::string message) {
  RootCause c;
  c.rank = 1;
  c.reason = CauseReason::kExited;
  c.exit_code = 1;
  c.message = std::move(message);
  return c;
}

TEST(RunVerdict, APeerErrorIsAConsequence) {
  EXPECT_EQ(ClassifyCause(Exit("rank 1 exited with code 3"), std::nullopt, "").kind,
            Evidence::kPrimary);
  Classified c = ClassifyCause(
      Exit("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed "
           "by peer [10.213.0.3]:20515"),
      std::nullopt, "");
  EXPECT_EQ(c.kind, Evidence::kConsequence);
  EXPECT_EQ(c.what, "lost its peer");
  // The message says only the exit; the rank's own stderr said why.
  c = ClassifyCause(Exit("rank 1 exited with code 1"), std::nullopt,
                    "RuntimeError: [pair.cc:589] Read error [10.213.0.4]:3391: Connection reset "
                    "by peer");
  EXPECT_EQ(c.kind, Evidence::kConsequence);
  c = ClassifyCause(Exit("rank 1 exited with code 1"), std::nullopt,
                    "RuntimeError: [gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
                    "1800000ms for recv operation to complete");
  EXPECT_EQ(c.what, "timed out in a collective");
  RootCause lost;
  lost.reason = CauseReason::kSupervisorLost;
  EXPECT_EQ(ClassifyCause(lost, std::nullopt, "").kind, Evidence::kNodeGone);
  RootCause oom = Exit("rank 1 was killed by the OOM killer");
  oom.reason = CauseReason::kOom;
  EXPECT_EQ(ClassifyCause(oom, std::nullopt, "Connection reset by peer").kind, Evidence::kPrimary);
}

HangReportRank HangRank(int rank, bool in_collective) {
  HangReportRank r;
  r.rank = rank;
  r.stack_status = StackStatus::kTaken;
  r.in_collective = in_collective;
  r.stack = in_collective ? "  File \"/usr/lib/python3/dist-packages/torch/distributed/"
                            "distributed_c10d.py\", line 1536 in all_reduce\n"
                          : "  File \"train.py\", line 7 in main\n";
  return r;
}

TEST(RunVerdict, OutsideACollectiveBeatsWaitingInOne) {
  RootCause hang;
  hang.reason = CauseReason::kHang;
  hang.rank = 1;
  HangReport culprit;
  culprit.ranks = {HangRank(0, true), HangRank(1, false)};
  EXPECT_EQ(ClassifyCause(hang, culprit, "").kind, Evidence::kPrimary);
  hang.rank = -1;
  HangReport waiting;
  waiting.ranks = {HangRank(0, true), HangRank(1, true)};
  Classified c = ClassifyCause(hang, waiting, "");
  EXPECT_EQ(c.kind, Evidence::kConsequence);
  EXPECT_EQ(c.what, "waits in a collective, as every rank of its node does");
  // So across nodes: node 2's stalled rank is the run's cause, however
  // early node 3's all-waiting hang arrived.
  std::vector<NodeReport> reports = {Report(3, c.kind, 1),
                                     Report(2, ClassifyCause(hang, culprit, "").kind, 2)};
  EXPECT_EQ(Strongest(reports)->node, 2);
  // A stopped rank is the plainest cause of all.
  HangReport stopped = waiting;
  stopped.ranks[1].process_state = "stopped (SIGSTOP)";
  EXPECT_EQ(ClassifyCause(hang, stopped, "").kind, Evidence::kPrimary);
}

// Seen in a two-node run under load: node 1 found the hang with no stacks
// of its own (undetermined); node 0 heard of it and took its ranks'
// stacks while node 1 tore its ranks down, so rank 1's allreduce had
// failed and its stack showed it printing the traceback. Rank 0 waits in a
// collective; rank 1's stack says nothing of where it stopped. Neither is
// evidence against node 0: node 1, which found the hang first, stays the
// run's cause.
TEST(RunVerdict, ANodeWithARankItCannotPlaceIsNoConsequence) {
  RootCause hang;
  hang.reason = CauseReason::kHang;
  hang.rank = -1;
  HangReport node0;
  node0.ranks = {HangRank(0, true), HangRank(1, false)};
  node0.ranks[1].stack =
      "Traceback (most recent call last):\n  File \"etcd_ddp.py\", line 46, in main\n"
      "Fatal Python error: Aborted\n\nCurrent thread 0x1 (most recent call first):\n"
      "  File \"ltd_autoheartbeat.py\", line 347 in excepthook\n";
  EXPECT_EQ(AttributeHang(node0, /*peers_wait=*/true), -1);
  Classified c = ClassifyCause(hang, node0, "");
  EXPECT_EQ(c.kind, Evidence::kUndetermined);
  HangReport node1;  // --stack-budget 0
  node1.ranks = {HangReportRank{}, HangReportRank{}};
  node1.ranks[1].rank = 1;
  std::vector<NodeReport> reports = {Report(1, ClassifyCause(hang, node1, "").kind, 1),
                                     Report(0, c.kind, 2)};
  EXPECT_EQ(Strongest(reports)->node, 1);
  // Were its stack missing, the same: a rank unseen may be the one.
  node0.ranks[1].stack_status = StackStatus::kTimedOut;
  EXPECT_EQ(ClassifyCause(hang, node0, "").kind, Evidence::kUndetermined);
}

}  // namespace
}  // namespace ltd
