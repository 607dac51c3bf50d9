// What ltrun reads of a Slurm job step (slurm/slurm_env.h): the step's
// variables, and its compressed host lists (slurm/hostlist.h), which a
// user's environment sets as it likes. Invariants: counting, the first
// host and the expansion agree (the same count, the same first host, a
// list refused by one refused by all, past expansion's own bound); every
// host is a name of at most 253 bytes of a host name's characters; a step
// read names a node of the run, a master port in 20000..29999 and a master
// that is the list's first host.
#include <cctype>
#include <map>

#include "fuzz_check.h"
#include "hostlist.h"
#include "slurm_env.h"

using namespace ltd;

namespace {

constexpr size_t kMaxHosts = 4096;  // expansion's bound here: fast runs

bool HostName(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (unsigned char c : host) {
    if (!std::isalnum(c) && c != '-' && c != '.' && c != '_') return false;
  }
  return true;
}

void CheckList(std::string_view list) {
  const auto count = CountHosts(list);
  const auto first = FirstHost(list);
  const auto hosts = ExpandHostlist(list, kMaxHosts);
  FUZZ_CHECK(count.ok() == first.ok());
  if (!count.ok()) {
    fuzz::CheckRefusal(count.status());
    fuzz::CheckRefusal(first.status());
    FUZZ_CHECK(!hosts.ok());
    return;
  }
  FUZZ_CHECK(*count >= 1);
  FUZZ_CHECK(HostName(*first));
  if (!hosts.ok()) {
    fuzz::CheckRefusal(hosts.status());
    FUZZ_CHECK(*count > kMaxHosts);
    return;
  }
  FUZZ_CHECK(hosts->size() == *count);
  FUZZ_CHECK(hosts->front() == *first);
  for (const std::string& h : *hosts) FUZZ_CHECK(HostName(h));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  // The first line alone, as a list; then the rest as NAME=VALUE lines.
  const std::string_view first_line = in.Field('\n');
  CheckList(first_line);

  std::map<std::string, std::string, std::less<>> vars;
  while (in.left() > 0) {
    const std::string_view line = in.Field('\n');
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    vars[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  const EnvLookup env = [&vars](std::string_view name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  const auto nodes = NodesFromSlurm(env);
  if (!nodes.ok()) {
    fuzz::CheckRefusal(nodes.status());
    FUZZ_CHECK(vars.count("SLURM_JOB_ID") == 1);
    return 0;
  }
  if (!nodes->has_value()) {
    FUZZ_CHECK(vars.count("SLURM_JOB_ID") == 0);
    return 0;
  }
  const NodeSpec& n = **nodes;
  FUZZ_CHECK(n.nnodes >= 1 && n.nnodes <= 65536);
  FUZZ_CHECK(n.node_rank >= 0 && n.node_rank < n.nnodes);
  FUZZ_CHECK(n.master_port >= 20000 && n.master_port <= 29999);
  FUZZ_CHECK(fuzz::IsOneLine(n.run_id, 64));
  if (!n.master_addr.empty()) {
    FUZZ_CHECK(HostName(n.master_addr));
    bool from_a_list = false;
    for (const char* var : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      const auto it = vars.find(var);
      if (it == vars.end()) continue;
      const auto want = FirstHost(it->second);
      from_a_list = want.ok() && *want == n.master_addr;
      break;  // the first set is the one read
    }
    FUZZ_CHECK(from_a_list);
  }
  return 0;
}
