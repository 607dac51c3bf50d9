// Slurm's compressed host lists and a job step's variables, as ltrun reads
// them inside `srun ... ltrun`.
#include "slurm_env.h"

#include <gtest/gtest.h>

#include <map>

#include "hostlist.h"

namespace ltd {
namespace {

using Hosts = std::vector<std::string>;

Hosts Expand(std::string_view list) {
  auto hosts = ExpandHostlist(list);
  EXPECT_TRUE(hosts.ok()) << list << ": " << hosts.status();
  return hosts.ok() ? *hosts : Hosts{};
}

std::string ErrorOf(std::string_view list) {
  auto hosts = ExpandHostlist(list);
  return hosts.ok() ? "" : std::string(hosts.status().message());
}

TEST(Hostlist, ExpandsSlurmsSyntax) {
  EXPECT_EQ(Expand("n1"), Hosts{"n1"});
  EXPECT_EQ(Expand("gpu[01-04,07]"), (Hosts{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07"}));
  EXPECT_EQ(Expand("a1,b[2-3]"), (Hosts{"a1", "b2", "b3"}));
  EXPECT_EQ(Expand("node[8-10]"), (Hosts{"node8", "node9", "node10"}));
  EXPECT_EQ(Expand("node[08-10]"), (Hosts{"node08", "node09", "node10"}));  // padding kept
  EXPECT_EQ(Expand("n[007]"), Hosts{"n007"});
  EXPECT_EQ(Expand("rack[1-2]-n[01-02]"),
            (Hosts{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}));
  EXPECT_EQ(Expand("gpu[1-2].cluster.example,login"),
            (Hosts{"gpu1.cluster.example", "gpu2.cluster.example", "login"}));
  EXPECT_EQ(Expand("x[1-2],y[3,5]z"), (Hosts{"x1", "x2", "y3z", "y5z"}));
}

TEST(Hostlist, FirstHostAndCountNeedNoExpansion) {
  EXPECT_EQ(FirstHost("gpu[01-04,07]").value(), "gpu01");
  EXPECT_EQ(FirstHost("a1,b[2-3]").value(), "a1");
  EXPECT_EQ(FirstHost("rack[3-4]-n[09-10]").value(), "rack3-n09");
  // A billion hosts: counted and its first named, none of them expanded.
  EXPECT_EQ(FirstHost("n[0-999999999]").value(), "n0");
  EXPECT_EQ(CountHosts("n[0-999999999],m[1-2]").value(), 1000000002u);
  EXPECT_EQ(CountHosts("a[0-999999999999999999]b[0-999999999999999999]").value(), SIZE_MAX);
}

TEST(Hostlist, HostileInputIsRefusedWithOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "it is empty"},
      {"n[0-99999999]", "it names more than 65536 hosts"},
      {"a[0-999999999999999999]b[0-999999999999999999]", "more than 65536 hosts"},
      {"n[1-2", "a '[' is never closed"},
      {"n1-2]", "a ']' without its '['"},
      {"n[[1]]", "brackets cannot nest"},
      {"n[]", "'' in brackets is not a number"},
      {"n[a-b]", "'a' in brackets is not a number"},
      {"n[5-1]", "range 5-1 runs backwards"},
      {"n[1,]", "'' in brackets is not a number"},
      {"n[1-2-3]", "'2-3' in brackets is not a number"},
      {"n[0000000000000000001-2]", "is not a number"},  // more digits than fit
      {"a,,b", "an empty host name"},
      {"a,", "an empty host name"},
      {"a b", "' ' cannot be part of a host name"},
      {"a\nb", "'\\n' cannot be part of a host name"},
      {"a;rm -rf /", "';' cannot be part of a host name"},
  };
  for (const auto& [list, error] : cases) {
    const std::string got = ErrorOf(list);
    EXPECT_NE(got.find(error), std::string::npos) << "'" << list << "' gave: " << got;
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
    if (got.find("more than") == std::string::npos) {
      EXPECT_FALSE(FirstHost(list).ok()) << list;
    }
  }
  EXPECT_NE(ErrorOf(std::string(2 << 20, 'a')).find("is longer than"), std::string::npos);
}

TEST(Hostlist, AHostNameLongerThanDnsTakesIsRefused) {
  const std::string at_limit = std::string(249, 'a') + "[1-1000]";  // a1000: 253 bytes
  EXPECT_EQ(CountHosts(at_limit).value(), 1000u);
  EXPECT_EQ(Expand(at_limit).back(), std::string(249, 'a') + "1000");
  EXPECT_EQ(Expand("n[0007-8]").back(), "n0008");  // padding counts toward the length
  for (const std::string& list :
       {std::string(250, 'a') + "[1-1000]", std::string(254, 'a'), "n[1-2]" + std::string(252, 'x'),
        "a,b" + std::string(253, 'c')}) {
    const auto count = CountHosts(list);
    ASSERT_FALSE(count.ok()) << list.size();
    EXPECT_NE(count.status().message().find("a host name is longer than 253 bytes"),
              std::string::npos)
        << count.status();
    EXPECT_FALSE(FirstHost(list).ok());
  }
  // Within the list's 1 MiB, a name of ~1 MiB in 65,536 hosts: refused
  // before anything is expanded (it would have been 64 GiB).
  const std::string bomb = std::string((1 << 20) - 16, 'a') + "[1-65536]";
  ASSERT_FALSE(CountHosts(bomb).ok());
  EXPECT_NE(ErrorOf(bomb).find("longer than 253 bytes"), std::string::npos);
}

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// What slurmstepd sets for task 1 of `srun -N4 --ntasks-per-node=1` in job 123456.
std::map<std::string, std::string> StepVars() {
  return {{"SLURM_JOB_ID", "123456"},
          {"SLURM_STEP_ID", "2"},
          {"SLURM_NNODES", "4"},
          {"SLURM_STEP_NUM_NODES", "4"},
          {"SLURM_NTASKS", "4"},
          {"SLURM_STEP_NUM_TASKS", "4"},
          {"SLURM_NODEID", "1"},
          {"SLURM_PROCID", "1"},
          {"SLURM_JOB_NODELIST", "gpu[01-04,07]"},
          {"SLURM_STEP_NODELIST", "gpu[02-04,07]"}};
}

TEST(SlurmEnv, OutsideSlurmIsNothing) {
  auto nodes = NodesFromSlurm(Env({{"HOME", "/root"}}));
  ASSERT_TRUE(nodes.ok());
  EXPECT_FALSE(*nodes);
}

TEST(SlurmEnv, AJobStepIsAMultiNodeRun) {
  auto nodes = NodesFromSlurm(Env(StepVars()));
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_TRUE(*nodes);
  EXPECT_EQ((*nodes)->nnodes, 4);
  EXPECT_EQ((*nodes)->node_rank, 1);
  EXPECT_EQ((*nodes)->master_addr, "gpu02");  // the step's first host
  EXPECT_EQ((*nodes)->master_port, 20000 + 456 * 10 + 2);
  EXPECT_EQ((*nodes)->run_id, "slurm-123456.2");
  EXPECT_TRUE((*nodes)->rdzv.empty());
  // Every node derives the same address, port and run id.
  auto vars = StepVars();
  vars["SLURM_NODEID"] = "3";
  auto other = NodesFromSlurm(Env(vars));
  ASSERT_TRUE(other.ok() && *other);
  EXPECT_EQ((*other)->node_rank, 3);
  EXPECT_EQ((*other)->master_addr, (*nodes)->master_addr);
  EXPECT_EQ((*other)->master_port, (*nodes)->master_port);
  EXPECT_EQ((*other)->run_id, (*nodes)->run_id);
}

TEST(SlurmEnv, MasterPortStaysInItsRange) {
  for (uint64_t job : {0ull, 999ull, 1000ull, 4294967295ull}) {
    for (uint64_t step : {0ull, 9ull, 10ull, 4294967294ull}) {
      const int port = SlurmMasterPort(job, step);
      EXPECT_GE(port, 20000);
      EXPECT_LE(port, 29999);
    }
  }
  EXPECT_NE(SlurmMasterPort(1, 0), SlurmMasterPort(2, 0));
  EXPECT_NE(SlurmMasterPort(1, 0), SlurmMasterPort(1, 1));
}

TEST(SlurmEnv, ASingleNodeAllocationWithoutAStepIsOneNode) {
  auto nodes = NodesFromSlurm(Env({{"SLURM_JOB_ID", "7"},
                                   {"SLURM_NNODES", "1"},
                                   {"SLURM_NODEID", "0"},
                                   {"SLURM_JOB_NODELIST", "n1"}}));
  ASSERT_TRUE(nodes.ok() && *nodes) << nodes.status();
  EXPECT_EQ((*nodes)->nnodes, 1);
  EXPECT_EQ((*nodes)->node_rank, 0);
  EXPECT_EQ((*nodes)->run_id, "slurm-7");
}

TEST(SlurmEnv, MisuseGetsOneLineSayingWhatToDo) {
  struct Case {
    std::map<std::string, std::string> change;
    std::vector<std::string> unset;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{},
       {"SLURM_STEP_ID"},
       "ltrun runs outside a job step of a 4-node Slurm job; start one ltrun per node: srun -N4 "
       "--ntasks-per-node=1"},
      {{{"SLURM_STEP_NUM_TASKS", "32"}}, {}, "this Slurm step runs 32 tasks on 4 nodes"},
      {{{"SLURM_NODEID", "4"}}, {}, "SLURM_NODEID 4 is not below SLURM_STEP_NUM_NODES=4"},
      {{{"SLURM_NODEID", "-1"}}, {}, "SLURM_NODEID='-1' is not a number"},
      {{{"SLURM_JOB_ID", "12x"}}, {}, "SLURM_JOB_ID='12x' is not a number"},
      {{{"SLURM_STEP_NUM_NODES", "0"}}, {}, "SLURM_STEP_NUM_NODES is 0"},
      {{{"SLURM_STEP_NUM_NODES", "99999999"}}, {}, "is not a number up to 65536"},
      {{{"SLURM_STEP_NODELIST", "gpu[01-03]"}}, {}, "names 3 hosts, but SLURM_STEP_NUM_NODES is 4"},
      {{{"SLURM_STEP_NODELIST", "gpu[01-0"}}, {}, "a '[' is never closed"},
      {{}, {"SLURM_NNODES", "SLURM_STEP_NUM_NODES"}, "SLURM_JOB_ID is set but not SLURM_NNODES"},
      {{}, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"}, "pass --master-addr"},
  };
  for (const Case& c : cases) {
    auto vars = StepVars();
    for (const auto& [k, v] : c.change) vars[k] = v;
    for (const auto& k : c.unset) vars.erase(k);
    auto nodes = NodesFromSlurm(Env(vars));
    ASSERT_FALSE(nodes.ok()) << c.error;
    const std::string got(nodes.status().message());
    EXPECT_NE(got.find(c.error), std::string::npos) << "got: " << got;
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
  }
}

}  // namespace
}  // namespace ltd
