// A multi-node run in the job model: torchrun's flags checked, torchrun's
// rank numbering and environment, the record and the API carrying it all.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "api_convert.h"
#include "job.h"
#include "launch_env.h"

namespace ltd {
namespace {

JobSpec GoodSpec() {
  JobSpec spec;
  spec.devices = 2;
  spec.argv = {"python3", "train.py"};
  spec.cwd = "/tmp";
  return spec;
}

JobSpec StaticNode(int node_rank, int nnodes = 2) {
  JobSpec spec = GoodSpec();
  spec.nodes.nnodes = nnodes;
  spec.nodes.node_rank = node_rank;
  spec.nodes.master_addr = "gpu01";
  spec.nodes.master_port = 29400;
  return spec;
}

std::string ErrorOf(const JobSpec& spec) {
  SpecLimits limits;
  limits.slots = 1024;
  const absl::Status s = ValidateSpec(spec, limits);
  return s.ok() ? "" : std::string(s.message());
}

std::map<std::string, std::string> EnvOf(const Job& job, int rank) {
  std::map<std::string, std::string> env;
  for (const std::string& kv : RankEnvironment(job, rank, "/state/jobs/7", {})) {
    const size_t eq = kv.find('=');
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

TEST(MultiNodeSpec, SingleNodeAndStaticNodesAreAccepted) {
  EXPECT_EQ(ErrorOf(GoodSpec()), "");
  EXPECT_EQ(ErrorOf(StaticNode(0)), "");
  EXPECT_EQ(ErrorOf(StaticNode(1)), "");
  JobSpec ipv6 = StaticNode(1);
  ipv6.nodes.master_addr = "fe80::1";
  EXPECT_EQ(ErrorOf(ipv6), "");
  JobSpec rdzv = GoodSpec();
  rdzv.nodes.nnodes = 4;
  rdzv.nodes.rdzv = "etcd://127.0.0.1:2379";
  rdzv.max_restarts = 3;
  EXPECT_EQ(ErrorOf(rdzv), "");  // node rank, address and port from the rendezvous
}

TEST(MultiNodeSpec, BadInputGetsOneLineSayingWhatToDo) {
  struct Case {
    JobSpec spec;
    std::string error;
  };
  auto with = [](JobSpec s, auto change) {
    change(s);
    return s;
  };
  const std::vector<Case> cases = {
      {with(StaticNode(0), [](JobSpec& s) { s.nodes.nnodes = 0; }),
       "--nnodes 0 is outside 1..65536"},
      {StaticNode(2), "--node-rank 2 is outside 0..1 (--nnodes 2)"},
      {StaticNode(-2), "--node-rank -2 is outside 0..1"},
      {with(StaticNode(0), [](JobSpec& s) { s.nodes.node_rank = -1; }),
       "--nnodes 2 needs --node-rank (0..1, a different one on each node) or --rdzv"},
      {with(StaticNode(0), [](JobSpec& s) { s.nodes.master_addr.clear(); }),
       "a static multi-node job needs --master-addr and --master-port"},
      {with(StaticNode(0), [](JobSpec& s) { s.nodes.master_port = 0; }),
       "a static multi-node job needs --master-addr and --master-port"},
      {with(StaticNode(0), [](JobSpec& s) { s.nodes.master_port = 70000; }),
       "--master-port 70000 is outside 1..65535"},
      {with(StaticNode(0), [](JobSpec& s) { s.nodes.master_addr = "gpu01\nEVIL=1"; }),
       "--master-addr 'gpu01\\nEVIL=1' is not a host name or IP address"},
      {with(StaticNode(0), [](JobSpec& s) { s.max_restarts = 1; }),
       "--max-restarts of a multi-node job needs --rdzv"},
      {with(StaticNode(0), [](JobSpec& s) { s.nodes.run_id = "a b"; }),
       "--run-id 'a b' must be at most 128 letters"},
      {with(StaticNode(0), [](JobSpec& s) { s.nodes.run_id = std::string(129, 'r'); }), "--run-id"},
      {with(GoodSpec(), [](JobSpec& s) { s.nodes.rdzv = "http://127.0.0.1:2379"; }),
       "--rdzv 'http://127.0.0.1:2379' is not etcd://HOST:PORT"},
      {with(GoodSpec(), [](JobSpec& s) { s.nodes.rdzv = "etcd://"; }), "is not etcd://HOST:PORT"},
      {with(GoodSpec(),
            [](JobSpec& s) {
              s.nodes.rdzv = "etcd://h:1";
              s.nodes.rdzv_timeout = std::chrono::milliseconds(0);
            }),
       "--rdzv-timeout must be between 1ms and"},
      {with(GoodSpec(),
            [](JobSpec& s) {
              s.nodes.rdzv = "etcd://h:1";
              s.nodes.rdzv_lease = std::chrono::milliseconds(1000);
            }),
       "--rdzv-lease must be whole seconds from 2s to 5m"},
      {with(GoodSpec(),
            [](JobSpec& s) {
              s.nodes.rdzv = "etcd://h:1";
              s.nodes.rdzv_lease = std::chrono::milliseconds(2500);
            }),
       "--rdzv-lease must be whole seconds"},
      {with(StaticNode(0, 65536), [](JobSpec& s) { s.devices = 512; }),
       "--nnodes 65536 x --devices 512 ranks is more than 16777216"},
  };
  for (const Case& c : cases) {
    const std::string error = ErrorOf(c.spec);
    EXPECT_NE(error.find(c.error), std::string::npos) << "got: " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

TEST(MultiNodeEnvironment, SingleNodeIsTorchrunsStandalone) {
  Job job;
  job.id = "7";
  job.spec = GoodSpec();
  job.master_port = 41000;
  auto env = EnvOf(job, 1);
  EXPECT_EQ(env["RANK"], "1");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "2");
  EXPECT_EQ(env["GROUP_RANK"], "0");
  EXPECT_EQ(env["GROUP_WORLD_SIZE"], "1");
  EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "41000");
  EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "7");
}

// torchrun --nnodes 3 --nproc-per-node 2 --node-rank 2: its local rank 1
// is global rank 5 of 6.
TEST(MultiNodeEnvironment, RanksAreNumberedAsTorchrunDoes) {
  Job job;
  job.id = "7";
  job.spec = StaticNode(2, 3);
  job.spec.nodes.run_id = "slurm-42.0";
  job.spec.env = {"RANK=99", "MASTER_ADDR=elsewhere", "HOME=/home/a"};
  job.master_port = 29400;
  auto env = EnvOf(job, 1);
  EXPECT_EQ(env["RANK"], "5");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "6");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["GROUP_RANK"], "2");
  EXPECT_EQ(env["NODE_RANK"], "2");
  EXPECT_EQ(env["ROLE_RANK"], "5");
  EXPECT_EQ(env["ROLE_WORLD_SIZE"], "6");
  EXPECT_EQ(env["GROUP_WORLD_SIZE"], "3");
  EXPECT_EQ(env["ROLE_NAME"], "default");
  EXPECT_EQ(env["MASTER_ADDR"], "gpu01");
  EXPECT_EQ(env["MASTER_PORT"], "29400");
  EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "slurm-42.0");
  EXPECT_EQ(env["TORCHELASTIC_ERROR_FILE"], "/state/jobs/7/errors/error-1.json");
  EXPECT_EQ(env["HOME"], "/home/a");
  // Every node's ranks together are 0..5, each once.
  std::set<std::string> ranks;
  for (int node = 0; node < 3; ++node) {
    job.spec.nodes.node_rank = node;
    for (int local = 0; local < 2; ++local) ranks.insert(EnvOf(job, local)["RANK"]);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3", "4", "5"}));
}

// Lightning takes a launch for torchrun's when RANK, GROUP_RANK,
// LOCAL_RANK and LOCAL_WORLD_SIZE are all set (TorchElasticEnvironment.
// detect); it then reads WORLD_SIZE, RANK, LOCAL_RANK, GROUP_RANK (as the
// node rank), MASTER_ADDR and MASTER_PORT. tests/ranks/lightning_detect.py
// checks the same with Lightning's own code where it is installed.
TEST(MultiNodeEnvironment, SatisfiesLightningsTorchElasticDetection) {
  Job job;
  job.id = "7";
  job.spec = StaticNode(1);
  job.master_port = 29400;
  auto env = EnvOf(job, 0);
  for (const char* key : {"RANK", "GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
                          "MASTER_ADDR", "MASTER_PORT"}) {
    EXPECT_TRUE(env.contains(key)) << key;
  }
  EXPECT_EQ(std::stoi(env["GROUP_RANK"]) * std::stoi(env["LOCAL_WORLD_SIZE"]) +
                std::stoi(env["LOCAL_RANK"]),
            std::stoi(env["RANK"]));
}

TEST(MultiNodeRecord, JsonRoundTripKeepsNodesAndRemoteCause) {
  Job job;
  job.id = "9";
  job.state = JobState::kFailed;
  job.spec = StaticNode(0);
  job.spec.nodes.run_id = "run-1";
  job.spec.nodes.rdzv = "etcd://10.0.0.1:2379";
  job.spec.nodes.rdzv_timeout = std::chrono::milliseconds(30'000);
  job.spec.nodes.rdzv_lease = std::chrono::milliseconds(3000);
  RootCause remote;
  remote.reason = CauseReason::kRemoteFailure;
  remote.node = 1;
  remote.rank = 1;
  remote.exit_code = 3;
  remote.message = "node 1 rank 1 exited with code 3";
  job.root_cause = remote;
  RootCause local = remote;
  local.reason = CauseReason::kExited;
  job.nodes = {NodeStatus{0, "gpu01", "FAILED", remote}, NodeStatus{1, "gpu02", "FAILED", local}};
  const nlohmann::json j = ToJson(job);
  EXPECT_EQ(j["nnodes"], 2);
  EXPECT_EQ(j["node_rank"], 0);
  EXPECT_EQ(j["root_cause"]["reason"], "remote_failure");
  EXPECT_EQ(j["root_cause"]["node"], 1);
  EXPECT_EQ(j["nodes"][1]["host"], "gpu02");
  auto back = JobFromJson(j);
  ASSERT_TRUE(back);
  EXPECT_EQ(ToJson(*back), j);
  EXPECT_EQ(ExitCodeFor(remote), 3);

  // A record from before multi-node is a single-node job.
  nlohmann::json old = j;
  for (const char* key : {"nnodes", "node_rank", "master_addr", "requested_master_port", "run_id",
                          "rdzv", "rdzv_timeout_ms", "rdzv_lease_ms", "nodes"}) {
    old.erase(key);
  }
  auto single = JobFromJson(old);
  ASSERT_TRUE(single);
  EXPECT_FALSE(IsMultiNode(single->spec.nodes));
  EXPECT_EQ(single->spec.nodes.rdzv_lease, std::chrono::milliseconds(5000));
  EXPECT_EQ(NodeRankOf(single->spec.nodes), 0);
}

TEST(MultiNodeApi, SubmitRequestCarriesTorchrunsFlags) {
  v1::SubmitRequest req;
  req.set_devices(2);
  req.add_argv("/bin/true");
  req.set_cwd("/tmp");
  auto single = SpecFromRequest(req);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->nodes.nnodes, 1);
  EXPECT_EQ(single->nodes.node_rank, -1);
  req.set_nnodes(2);
  req.set_node_rank(1);
  req.set_master_addr("gpu01");
  req.set_master_port(29400);
  req.set_run_id("r");
  req.set_rdzv("etcd://e:2379");
  req.set_rdzv_timeout_ms(5000);
  req.set_rdzv_lease_ms(3000);
  auto spec = SpecFromRequest(req);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->nodes.nnodes, 2);
  EXPECT_EQ(spec->nodes.node_rank, 1);
  EXPECT_EQ(spec->nodes.master_addr, "gpu01");
  EXPECT_EQ(spec->nodes.master_port, 29400);
  EXPECT_EQ(spec->nodes.run_id, "r");
  EXPECT_EQ(spec->nodes.rdzv, "etcd://e:2379");
  EXPECT_EQ(spec->nodes.rdzv_timeout, std::chrono::milliseconds(5000));
  EXPECT_EQ(spec->nodes.rdzv_lease, std::chrono::milliseconds(3000));
  req.set_master_addr(std::string(5000, 'a'));
  EXPECT_FALSE(SpecFromRequest(req).ok());
}

TEST(MultiNodeApi, ShowCarriesNodesAndTheRemoteCause) {
  Job job;
  job.id = "9";
  job.spec = StaticNode(0);
  RootCause remote;
  remote.reason = CauseReason::kRemoteFailure;
  remote.node = 1;
  remote.rank = 0;
  job.root_cause = remote;
  job.nodes = {NodeStatus{0, "gpu01", "FAILED", remote}, NodeStatus{1, "gpu02", "FAILED", {}}};
  v1::Job out;
  ToProto(job, kShowLimits, &out);
  EXPECT_EQ(out.nnodes(), 2);
  EXPECT_EQ(out.node_rank(), 0);
  EXPECT_EQ(out.master_addr(), "gpu01");
  EXPECT_EQ(out.run_id(), "9");
  EXPECT_EQ(out.root_cause().reason(), v1::RootCause::remote_failure);
  EXPECT_EQ(out.root_cause().node(), 1);
  ASSERT_EQ(out.nodes_size(), 2);
  EXPECT_EQ(out.nodes(1).host(), "gpu02");
  EXPECT_FALSE(out.nodes(1).has_root_cause());
}

}  // namespace
}  // namespace ltd
