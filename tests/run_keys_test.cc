#include "run_keys.h"

#include <gtest/gtest.h>

#include "bytes.h"
#include "fence_values.h"

namespace ltd::rdzv {
namespace {

const std::string kPrefix = "/ltd/runs/r1/";

// A member key counts only as a node of the run. Before, std::stoi took
// "nodes/-1", "nodes/7x" and "nodes/5" of a 2-node run as nodes, so keys
// anyone can put in etcd completed the rendezvous without the real nodes.
TEST(RunKeys, MemberIsANodeOfTheRunOrNothing) {
  const std::string value = R"({"host": "a", "nnodes": 2, "devices": 4, "fence": 2})";
  auto m = ParseMember(kPrefix, kPrefix + "nodes/1", value, 2);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->rank, 1);
  EXPECT_EQ(m->host, "a");
  EXPECT_EQ(m->nnodes, 2);
  EXPECT_EQ(m->devices, 4);
  EXPECT_EQ(m->fence, 2);
  for (const char* key : {"nodes/-1", "nodes/2", "nodes/5", "nodes/1x", "nodes/", "nodes/ 1",
                          "nodes/+1", "nodes/99999999999", "nodes/01", "nodes/00", "master"}) {
    EXPECT_FALSE(ParseMember(kPrefix, kPrefix + key, value, 2)) << key;
  }
  EXPECT_FALSE(ParseMember(kPrefix, "/ltd/runs/other/nodes/0", value, 2));
  EXPECT_FALSE(ParseMember(kPrefix, kPrefix + "nodes/0", "not json", 2));
  // Counts past int's range are none a node gives: not cut into one.
  m = ParseMember(kPrefix, kPrefix + "nodes/0", R"({"nnodes": 4294967298})", 2);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->nnodes, 0);
}

TEST(RunKeys, MasterIsAHostAndAPort) {
  auto m = ParseMaster(nlohmann::json::parse(R"({"addr": "10.0.0.1", "port": 29500})"));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->addr, "10.0.0.1");
  EXPECT_EQ(m->port, 29500);
  for (const char* bad : {R"({"addr": "a b", "port": 1})", R"({"addr": "a", "port": 0})",
                          R"({"addr": "a", "port": 65536})", R"({"addr": "", "port": 1})",
                          R"({"addr": "a", "port": "1"})", R"([1])"}) {
    EXPECT_FALSE(ParseMaster(nlohmann::json::parse(bad))) << bad;
  }
}

// A cause's message is cut to 4096 bytes between characters: cut inside
// one, the job's record could not be written as JSON (its dump throws on
// invalid UTF-8).
TEST(FenceValues, LongCauseIsCutBetweenCharacters) {
  std::string text = "x";
  for (int i = 0; i < 3000; ++i) text += "\u00e9";  // 2 bytes each: byte 4096 splits one
  auto cause = ParseCause(nlohmann::json{{"reason", "exited"}, {"message", text}});
  ASSERT_TRUE(cause.has_value());
  EXPECT_LE(cause->message.size(), 4096u);
  EXPECT_GE(cause->message.size(), 4095u);
  EXPECT_TRUE(IsValidUtf8(cause->message));
  EXPECT_NO_THROW((void)ToJson(*cause).dump());
}

// Who cancelled a node's job is a user's name or ltd's: another node's
// value bounds it as a message is (a 2.8 MB one was kept whole, shown
// four times over as escapes in every `ps`).
TEST(FenceValues, WhoCancelledIsBoundedAsAMessageIs) {
  std::string who = "x";
  for (int i = 0; i < 3000; ++i) who += "\u00e9";
  auto cause = ParseCause(nlohmann::json{{"reason", "cancelled"}, {"cancelled_by", who}});
  ASSERT_TRUE(cause.has_value());
  EXPECT_LE(cause->cancelled_by.size(), 256u);
  EXPECT_GE(cause->cancelled_by.size(), 255u);
  EXPECT_TRUE(IsValidUtf8(cause->cancelled_by));
  EXPECT_NO_THROW((void)ToJson(*cause).dump());
}

// A run's table of nodes is in its job's record, which ltd holds: each
// node's texts get a share of 256 KiB over the run's nodes, 16 to 256 bytes.
TEST(FenceValues, ANodesTextsShareTheRunsBytes) {
  EXPECT_EQ(NodeTextMax(0), 256u);
  EXPECT_EQ(NodeTextMax(2), 256u);
  EXPECT_EQ(NodeTextMax(1024), 256u);
  EXPECT_EQ(NodeTextMax(4096), 64u);
  EXPECT_EQ(NodeTextMax(65536), 16u);
  const std::string big(5000, 'z');
  const std::string value =
      nlohmann::json{
          {"state", "FAILED"},
          {"host", big},
          {"root_cause", {{"reason", "cancelled"}, {"message", big}, {"cancelled_by", big}}}}
          .dump();
  for (int nnodes : {2, 4096, 65536}) {
    NodeStatus n;
    ASSERT_TRUE(ApplyStatus(value, n, NodeTextMax(nnodes)));
    const size_t max = NodeTextMax(nnodes);
    EXPECT_LE(n.host.size(), max + 32) << nnodes;  // and the mark of what was cut
    ASSERT_TRUE(n.root_cause.has_value());
    EXPECT_LE(n.root_cause->message.size(), max) << nnodes;
    EXPECT_LE(n.root_cause->cancelled_by.size(), max) << nnodes;
    EXPECT_EQ(n.state, "FAILED");
  }
}

TEST(FenceValues, AReportSpeaksForItsKeysNodeOnly) {
  const std::string value = R"({"cause": {"reason": "exited", "exit_code": 3, "node": 0},
                                 "kind": "primary", "what": "rank 1 exited 3"})";
  auto v = ParseAttempt("attempts/0/report/1", value, 7, 2, 2);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->report.node, 1);
  EXPECT_EQ(v->report.cause.node, 1);
  EXPECT_EQ(v->report.order, 7);
  EXPECT_FALSE(v->verdict || v->gone);
  EXPECT_FALSE(ParseAttempt("attempts/0/report/2", value, 7, 2, 2)) << "no node of the run";
  EXPECT_FALSE(ParseAttempt("attempts/-1/report/1", value, 7, 2, 2));
  // One key a node and an attempt: "01" is not node 1's (fuzz/rdzv_values
  // found it read as node 1's second report).
  EXPECT_FALSE(ParseAttempt("attempts/0/report/01", value, 7, 2, 2));
  EXPECT_FALSE(ParseAttempt("attempts/0/gone/01", value, 7, 2, 2));
  EXPECT_FALSE(ParseAttempt("attempts/00/report/1", value, 7, 2, 2));
  EXPECT_FALSE(ParseAttempt("attempts/0/verdict", value, 7, 2, 2)) << "a verdict names its node";
  v = ParseAttempt("attempts/3/verdict",
                   R"({"cause": {"reason": "hang"}, "kind": "primary", "node": 1, "note": "n"})", 9,
                   2, 2);
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(v->verdict);
  EXPECT_EQ(v->attempt, 3);
  EXPECT_EQ(v->report.node, 1);
  EXPECT_EQ(v->note, "n");
  EXPECT_FALSE(ParseAttempt(
      "attempts/3/verdict",
      R"({"cause": {"reason": "hang"}, "kind": "primary", "node": 4294967297})", 9, 2, 2))
      << "a node past int's range is not node 1";
}

}  // namespace
}  // namespace ltd::rdzv
