// The hang report of a multi-node run (model/run_hang.h): a node's
// evidence compact on the way out, checked and bounded on the way in (it
// came through etcd, where anyone may write), and merged into the run's
// report that every node's record holds, with the nodes that told nothing.
#include "run_hang.h"

#include <gtest/gtest.h>

#include <limits>

#include "hang_ranks.h"

namespace ltd {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kWindow{6000};

// A Python stack of a rank asleep outside any collective, and one waiting
// in DDP's allreduce.
const std::string kSleeping =
    "Current thread 0x00007f (most recent call first):\n"
    "  File \"/srv/train.py\", line 41 in <module>\n";
const std::string kWaiting =
    "Current thread 0x00007f (most recent call first):\n"
    "  File \"/usr/lib/python3/dist-packages/torch/autograd/__init__.py\", line 197 in backward\n"
    "  File \"/srv/train.py\", line 45 in <module>\n";

using test::TakenRank;

// A node of 2 ranks whose rank 0 sleeps and rank 1 waits in a collective.
HangReport Culprits() {
  HangReport h;
  h.stalled_ranks = {0};
  h.ranks = {TakenRank(0, 3, true, false, kSleeping), TakenRank(1, 3, false, true, kWaiting)};
  return h;
}

// A node of 2 ranks both waiting in a collective.
HangReport Waiting() {
  HangReport h;
  h.ranks = {TakenRank(0, 3, false, true, kWaiting), TakenRank(1, 3, false, true, kWaiting)};
  return h;
}

NodeReport Report(int node, Evidence kind, std::optional<HangReport> hang, int culprit = -1) {
  NodeReport r;
  r.node = node;
  r.kind = kind;
  r.cause.node = node;
  r.cause.reason = CauseReason::kHang;
  r.cause.message = "no heartbeat for 3s";
  if (hang) r.hang = CompactHang(*hang, node, culprit);
  return r;
}

TEST(RunHang, ANodeSendsEveryRankButOnlyTheStacksOutsideACollective) {
  const std::vector<HangReportRank> c = CompactHang(Culprits(), 1, 0);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].node, 1);
  EXPECT_EQ(c[0].rank, 0);
  EXPECT_EQ(c[0].last_step, 3);
  EXPECT_TRUE(c[0].stalled);
  EXPECT_FALSE(c[0].in_collective);
  EXPECT_EQ(c[0].stack, kSleeping);
  EXPECT_TRUE(c[1].in_collective);
  EXPECT_EQ(c[1].stack, "");  // its node's own record has it
  EXPECT_EQ(c[1].stack_status, StackStatus::kTaken);
}

TEST(RunHang, ANodesStacksAreBoundedTheCulpritsFirst) {
  HangReport h;
  const std::string big = kSleeping + std::string(12 * 1024, 'x');  // a frame, then bulk
  for (int r = 0; r < 3; ++r) h.ranks.push_back(TakenRank(r, 1, false, false, big + "\n" + big));
  const std::vector<HangReportRank> c = CompactHang(h, 0, 2);
  ASSERT_EQ(c.size(), 3u);
  size_t total = 0;
  for (const HangReportRank& r : c) {
    EXPECT_LE(r.stack.size(), kMaxHangStackBytes);
    total += r.stack.size();
  }
  EXPECT_LE(total, kMaxNodeHangStackBytes);
  EXPECT_NE(c[2].stack.find("more bytes in its node's own record"), std::string::npos);
  EXPECT_EQ(c[2].stack_status, StackStatus::kTaken);
  // Past the node's bound a stack is left out, saying so.
  int left_out = 0;
  for (const HangReportRank& r : c) {
    if (r.stack.empty()) {
      ++left_out;
      EXPECT_EQ(r.stack_status, StackStatus::kSkipped);
      EXPECT_NE(r.stack_note.find("left out of its node's report"), std::string::npos);
    }
  }
  EXPECT_GE(left_out, 1);
}

TEST(RunHang, EvidenceCrossesAsGlobalRanksAndReadsBack) {
  HangReport h = Culprits();
  h.ranks[0].process_state = "stopped (SIGSTOP)";
  h.ranks[1].straggler = true;
  const nlohmann::json j = NodeHangToJson(CompactHang(h, 1, 0), 2);
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j[0]["rank"], 2);
  EXPECT_EQ(j[1]["rank"], 3);
  auto back = NodeHangFromJson(nlohmann::json::parse(j.dump()), 1, 4, 2);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].node, 1);
  EXPECT_EQ((*back)[0].rank, 0);
  EXPECT_EQ((*back)[0].last_step, 3);
  EXPECT_TRUE((*back)[0].stalled);
  EXPECT_FALSE((*back)[0].in_collective);
  EXPECT_EQ((*back)[0].process_state, "stopped (SIGSTOP)");
  EXPECT_EQ((*back)[0].stack, kSleeping);
  EXPECT_EQ((*back)[0].stack_status, StackStatus::kTaken);
  EXPECT_EQ((*back)[0].stack_note, "faulthandler");
  EXPECT_TRUE((*back)[1].in_collective);
  EXPECT_TRUE((*back)[1].straggler);
}

TEST(RunHang, ANodeSpeaksOnlyForItsOwnRanks) {
  // Node 1 of a run of 4 nodes x 2 ranks: global ranks 2 and 3 are its.
  nlohmann::json j = nlohmann::json::array({
      "not an object",
      {{"rank", "2"}},                                       // a string
      {{"rank", 0}, {"stalled", true}},                      // node 0's
      {{"rank", 8}},                                         // past the world size
      {{"rank", -2}},                                        // no rank
      {{"rank", std::numeric_limits<uint64_t>::max() - 3}},  // past int64_t
      {{"rank", 3.5}},                                       // no integer
      {{"rank", 2}, {"step", 7}, {"stalled", "yes"}},        // stalled is no bool
      {{"rank", 2}, {"step", 9}, {"stalled", true}},         // a second rank 2
      {{"rank", 3}, {"step", "x"}, {"stack_status", "bogus"}},
  });
  auto got = NodeHangFromJson(j, 1, 4, 2);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].rank, 0);
  EXPECT_EQ((*got)[0].node, 1);
  EXPECT_EQ((*got)[0].last_step, 7);  // the first of the two
  EXPECT_FALSE((*got)[0].stalled);
  EXPECT_EQ((*got)[1].rank, 1);
  EXPECT_EQ((*got)[1].last_step, -1);
  EXPECT_EQ((*got)[1].stack_status, StackStatus::kUnknown);
  // Not a list, or a node outside the run: nothing.
  EXPECT_FALSE(NodeHangFromJson(nlohmann::json::object(), 1, 4, 2).has_value());
  EXPECT_FALSE(NodeHangFromJson(nlohmann::json::array(), 4, 4, 2).has_value());
  EXPECT_FALSE(NodeHangFromJson(nlohmann::json::array(), -1, 4, 2).has_value());
}

TEST(RunHang, OversizeEvidenceIsCut) {
  nlohmann::json j = nlohmann::json::array();
  const std::string stack = std::string(6000, 's') + "\n" + std::string(6000, 't') + "\n";
  for (int i = 0; i < 3; ++i) {
    j.push_back({{"rank", 8 + i},
                 {"state", std::string(100000, 'p')},
                 {"stack_note", std::string(5000, 'n')},
                 {"stack", stack}});
  }
  // Ten thousand entries for a node of 4 ranks: 4 are read at most.
  for (int i = 0; i < 10000; ++i) j.push_back({{"rank", 8 + i % 4}});
  auto got = NodeHangFromJson(j, 2, 3, 4);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->size(), 4u);
  size_t stacks = 0;
  for (const HangReportRank& r : *got) {
    EXPECT_LE(r.process_state.size(), kMaxHangTextBytes);
    EXPECT_LE(r.stack_note.size(), kMaxHangTextBytes);
    EXPECT_LE(r.stack.size(), kMaxHangStackBytes);
    stacks += r.stack.size();
  }
  EXPECT_LE(stacks, kMaxNodeHangStackBytes);
  EXPECT_NE((*got)[0].stack.find("more bytes in its node's own record"), std::string::npos);
  EXPECT_EQ((*got)[2].stack, "");  // past the node's bound
  EXPECT_EQ((*got)[2].stack_status, StackStatus::kSkipped);
}

TEST(RunHang, TheRunsReportHasEveryNodesRanksAndNamesTheMissing) {
  // Node 0 of 5, 2 ranks each: node 1's rank 0 sleeps, the others wait.
  std::vector<NodeReport> reports = {
      Report(0, Evidence::kConsequence, Waiting()),
      Report(1, Evidence::kPrimary, Culprits(), 0),
      Report(2, Evidence::kPending, std::nullopt),  // its stacks never came
      Report(3, Evidence::kNodeGone, std::nullopt),
      Report(9, Evidence::kPrimary, Culprits(), 0),  // no node of the run
  };
  const HangReport h = MergeRunHang(0, 5, 2, Waiting(), reports, 1, kWindow, WallTime{});
  ASSERT_EQ(h.ranks.size(), 4u);
  EXPECT_EQ(h.ranks[0].node, 0);
  EXPECT_EQ(h.ranks[0].stack, kWaiting);  // its own, whole
  EXPECT_EQ(h.ranks[2].node, 1);
  EXPECT_EQ(h.ranks[2].rank, 0);
  EXPECT_EQ(h.ranks[2].stack, kSleeping);  // the culprit's
  EXPECT_TRUE(h.ranks[2].stalled);
  EXPECT_EQ(h.ranks[3].stack, "");
  EXPECT_EQ(h.stalled_ranks, std::vector<int>{2});  // global
  EXPECT_TRUE(IsRunWide(h));
  ASSERT_EQ(h.missing_nodes.size(), 3u);
  EXPECT_EQ(h.missing_nodes[0].node, 2);
  EXPECT_EQ(h.missing_nodes[0].why, "its stacks did not come within 6s");
  EXPECT_EQ(h.missing_nodes[1].node, 3);
  EXPECT_EQ(h.missing_nodes[1].why,
            "gone (its supervisor and ranks vanished) before it reported its ranks");
  EXPECT_EQ(h.missing_nodes[2].node, 4);
  EXPECT_EQ(h.missing_nodes[2].why, "no report within 6s");
}

TEST(RunHang, ANodeWithoutStacksSaysWhyAndTheLastReportCounts) {
  NodeReport crashed = Report(1, Evidence::kPrimary, std::nullopt);
  crashed.cause.message = "rank 1 exited with code 3";
  crashed.order = 5;
  NodeReport earlier = Report(1, Evidence::kPrimary, Culprits(), 0);
  earlier.order = 2;
  const HangReport h =
      MergeRunHang(0, 2, 2, std::nullopt, {earlier, crashed}, 1, kWindow, WallTime{});
  EXPECT_TRUE(h.ranks.empty());
  ASSERT_EQ(h.missing_nodes.size(), 2u);
  // This node took no stacks in this attempt, and said so in its report (none here).
  EXPECT_EQ(h.missing_nodes[0].node, 0);
  EXPECT_EQ(h.missing_nodes[0].why, "no report within 6s");
  EXPECT_EQ(h.missing_nodes[1].why, "its report has no hang evidence (rank 1 exited with code 3)");
}

TEST(RunHang, TheRunsReportIsBoundedAndKeepsTheCulprit) {
  // 300 nodes of 20 ranks, each rank with a stack outside a collective.
  constexpr int kNodes = 300, kDevices = 20;
  HangReport node;
  for (int r = 0; r < kDevices; ++r) {
    node.ranks.push_back(TakenRank(r, 1, r == 0, false, kSleeping + std::string(1000, 'f') + "\n"));
  }
  std::vector<NodeReport> reports;
  for (int n = 0; n < kNodes; ++n) reports.push_back(Report(n, Evidence::kPrimary, node, 0));
  const HangReport h =
      MergeRunHang(0, kNodes + 100, kDevices, std::nullopt, reports, 250, kWindow, WallTime{});
  EXPECT_LE(h.ranks.size(), kMaxRunHangRanks);
  size_t stacks = 0;
  bool culprit = false;
  for (const HangReportRank& r : h.ranks) {
    stacks += r.stack.size();
    if (r.node == 250 && r.rank == 0) culprit = !r.stack.empty();
  }
  EXPECT_LE(stacks, kMaxRunHangStackBytes);
  EXPECT_TRUE(culprit);
  ASSERT_EQ(h.missing_nodes.size(), kMaxMissingNodesListed + 1);
  EXPECT_NE(h.missing_nodes[0].why.find("holds at most 4096 ranks of other nodes"),
            std::string::npos)
      << h.missing_nodes[0].why;
  EXPECT_EQ(h.missing_nodes.back().node, -1);
  EXPECT_NE(h.missing_nodes.back().why.find("more nodes are missing"), std::string::npos);
}

TEST(RunHang, TheRecordKeepsEachRanksNodeAndOldRecordsRead) {
  Job job;
  job.id = "7";
  job.hang_report = MergeRunHang(0, 3, 2, Waiting(), {Report(1, Evidence::kPrimary, Culprits(), 0)},
                                 1, kWindow, WallTime{});
  auto back = JobFromJson(nlohmann::json::parse(ToJson(job).dump()));
  ASSERT_TRUE(back && back->hang_report);
  EXPECT_EQ(ToJson(*back).dump(), ToJson(job).dump());
  EXPECT_EQ(back->hang_report->ranks[2].node, 1);
  ASSERT_EQ(back->hang_report->missing_nodes.size(), 1u);
  EXPECT_EQ(back->hang_report->missing_nodes[0].node, 2);
  // A record of a release before: no node, no missing nodes; a single node's.
  nlohmann::json old = ToJson(job);
  for (auto& r : old["hang_report"]["ranks"]) r.erase("node");
  old["hang_report"].erase("missing_nodes");
  auto read = JobFromJson(old);
  ASSERT_TRUE(read && read->hang_report);
  EXPECT_EQ(read->hang_report->ranks[0].node, -1);
  EXPECT_FALSE(IsRunWide(*read->hang_report));
}

}  // namespace
}  // namespace ltd
