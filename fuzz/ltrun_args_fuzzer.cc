// ltrun's command line, its own options and torchrun's, with torchrun's
// PET_* variables (ltrun/torchrun_args.h). The input is words, one per
// line; lines `PET_NAME=VALUE` before the first other word are the
// environment. Invariants: a launch read has at least one rank, at least
// one node, a grace in whole units; a refusal is one bounded line.
#include <signal.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "str_util.h"
#include "torchrun_args.h"

using namespace ltd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> words;
  std::map<std::string, std::string, std::less<>> env;
  for (std::string_view line : Split(text, '\n')) {
    const size_t eq = line.find('=');
    if (words.empty() && line.starts_with("PET_") && eq != std::string_view::npos) {
      env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    } else {
      words.emplace_back(line);
    }
  }
  MachineFacts facts;
  facts.gpus = static_cast<int>(size % 3);
  facts.cpus = 4;
  facts.plain_file = [](const std::string& p) { return p == "script"; };
  const EnvLookup lookup = [&env](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  const absl::StatusOr<LaunchArgs> a = ReadLaunchArgs(words, lookup, facts);
  if (!a.ok()) {
    fuzz::CheckRefusal(a.status());
    return 0;
  }
  if (a->help || a->version) return 0;
  FUZZ_CHECK(a->devices >= 1);
  FUZZ_CHECK(!a->nnodes || *a->nnodes >= 1);
  FUZZ_CHECK(!a->master_port || (*a->master_port >= 1 && *a->master_port <= 65535));
  // ltrun's own --rdzv is taken as written (the job's spec refuses a URL
  // that is not etcd:// or etcds://, model/job_spec.cc); torchrun's
  // --rdzv-backend/--rdzv-endpoint are made into etcd://.
  const bool own_rdzv = std::any_of(words.begin(), words.end(), [](const std::string& w) {
    return w == "--rdzv" || w.starts_with("--rdzv=");
  });
  FUZZ_CHECK(a->rdzv.empty() || own_rdzv || a->rdzv.starts_with("etcd://"));
  FUZZ_CHECK(a->c10d_endpoint.empty() || a->rdzv == "etcd://" + a->c10d_endpoint);
  for (int s : a->stop_signals) FUZZ_CHECK(s > 0 && s != SIGKILL && s != SIGSTOP);
  FUZZ_CHECK(fuzz::IsOneLine(NoEffectLine(*a), 1 << 20));
  return 0;
}
