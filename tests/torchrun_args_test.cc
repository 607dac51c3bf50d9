// ltrun's command line (ltrun/torchrun_args.h): every option of the table
// in both spellings with '=' or a space, torchrun's meanings, PET_*
// defaults, refusals as one line in ltd's words, and random bytes that
// never crash it.
#include "torchrun_args.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <random>

#include "str_util.h"

namespace ltd {
namespace {

using Env = std::map<std::string, std::string>;

MachineFacts Facts(int gpus = 0, int cpus = 16) {
  MachineFacts f;
  f.gpus = gpus;
  f.cpus = cpus;
  f.plain_file = [](const std::string& path) { return path == "plain_script"; };
  return f;
}

EnvLookup Lookup(const Env& env) {
  return [env](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

absl::StatusOr<LaunchArgs> Read(std::vector<std::string> words, const Env& env = {},
                                const MachineFacts& facts = Facts()) {
  return ReadLaunchArgs(words, Lookup(env), facts);
}

LaunchArgs Ok(std::vector<std::string> words, const Env& env = {},
              const MachineFacts& facts = Facts()) {
  auto r = Read(words, env, facts);
  EXPECT_TRUE(r.ok()) << Join(words, " ") << ": " << r.status().message();
  return r.ok() ? *r : LaunchArgs{};
}

std::string Refusal(std::vector<std::string> words, const Env& env = {},
                    const MachineFacts& facts = Facts()) {
  auto r = Read(words, env, facts);
  EXPECT_FALSE(r.ok()) << Join(words, " ");
  const std::string m = r.ok() ? "" : std::string(r.status().message());
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  return m;
}

std::vector<std::string> Underscored(std::string_view name) {
  std::string u(name);
  for (char& c : u) {
    if (c == '-') c = '_';
  }
  return {std::string(name), u};
}

// Every option of the table, by each of its long names in both spellings,
// with '=' and with a space, and by its short name: the parser takes it.
TEST(ArgTable, EveryOptionInBothSpellingsWithEqualsOrSpace) {
  for (const ArgDef& def : LtrunArgTable()) {
    std::vector<std::string_view> names = {def.name};
    for (std::string_view a : Split(def.aliases, ' ')) {
      if (!a.empty()) names.push_back(a);
    }
    for (std::string_view n : names) {
      for (const std::string& spelled : Underscored(n)) {
        std::vector<std::vector<std::string>> lines;
        if (def.type == ArgType::kFlag) {
          lines.push_back({"--" + spelled, "prog"});
        } else {
          lines.push_back({"--" + spelled + "=v", "prog"});
          lines.push_back({"--" + spelled, "v", "prog"});
        }
        for (const auto& line : lines) {
          auto p = ParseArgs(LtrunArgTable(), line, nullptr);
          ASSERT_TRUE(p.ok()) << Join(line, " ") << ": " << p.status().message();
          EXPECT_TRUE(p->Has(def.name)) << Join(line, " ");
          if (def.type != ArgType::kFlag) {
            EXPECT_EQ(*p->Get(def.name), "v");
          }
          EXPECT_EQ(p->program, std::vector<std::string>{"prog"}) << Join(line, " ");
        }
      }
    }
    if (def.short_name != 0 && def.type != ArgType::kFlag) {
      for (const std::vector<std::string>& line :
           {std::vector<std::string>{Cat("-", def.short_name), "v", "p"},
            std::vector<std::string>{Cat("-", def.short_name, "v"), "p"},
            std::vector<std::string>{Cat("-", def.short_name, "=v"), "p"}}) {
        auto p = ParseArgs(LtrunArgTable(), line, nullptr);
        ASSERT_TRUE(p.ok()) << Join(line, " ") << ": " << p.status().message();
        EXPECT_EQ(*p->Get(def.name), "v") << Join(line, " ");
      }
    }
  }
}

// torchrun's options that exist in 2.6 to 2.11, each in the table.
TEST(ArgTable, HasEveryTorchrunOption) {
  for (const char* name : {"nnodes",
                           "nproc-per-node",
                           "rdzv-backend",
                           "rdzv-endpoint",
                           "rdzv-id",
                           "rdzv-conf",
                           "standalone",
                           "max-restarts",
                           "monitor-interval",
                           "start-method",
                           "event-log-handler",
                           "role",
                           "module",
                           "no-python",
                           "run-path",
                           "log-dir",
                           "redirects",
                           "tee",
                           "local-ranks-filter",
                           "duplicate-stdout-filters",
                           "duplicate-stderr-filters",
                           "node-rank",
                           "master-addr",
                           "master-port",
                           "local-addr",
                           "logs-specs",
                           "numa-binding",
                           "signals-to-handle",
                           "shutdown-timeout",
                           "virtual-local-rank"}) {
    for (const std::string& spelled : Underscored(name)) {
      auto p =
          ParseArgs(LtrunArgTable(), std::vector<std::string>{"--" + spelled + "=x", "p"}, nullptr);
      auto f = ParseArgs(LtrunArgTable(), std::vector<std::string>{"--" + spelled, "p"}, nullptr);
      EXPECT_TRUE(p.ok() || f.ok()) << spelled;
    }
  }
  for (const char* s : {"-m", "-r", "-t", "-n"}) {
    EXPECT_TRUE(ParseArgs(LtrunArgTable(), std::vector<std::string>{s, "1", "p"}, nullptr).ok())
        << s;
  }
}

TEST(TorchrunArgs, NprocPerNodeCountsWhatTorchrunCounts) {
  EXPECT_EQ(Ok({"--nproc-per-node", "4", "x"}).devices, 4);
  EXPECT_EQ(Ok({"--nproc_per_node=3", "x"}).devices, 3);
  EXPECT_EQ(Ok({"--devices", "2", "x"}).devices, 2);
  EXPECT_EQ(Ok({"--nproc-per-node", "gpu", "x"}, {}, Facts(8)).devices, 8);
  EXPECT_EQ(Ok({"--nproc-per-node", "cpu", "x"}, {}, Facts(8, 12)).devices, 12);
  EXPECT_EQ(Ok({"--nproc-per-node", "auto", "x"}, {}, Facts(4, 12)).devices, 4);
  EXPECT_EQ(Ok({"--nproc-per-node", "auto", "x"}, {}, Facts(0, 12)).devices, 12);
  EXPECT_NE(Refusal({"--nproc-per-node", "gpu", "x"}).find("no GPU"), std::string::npos);
  EXPECT_EQ(Refusal({"--nproc_per_node", "x", "p"}),
            "--nproc_per_node does not take 'x'; give a number, gpu, cpu or auto");
  EXPECT_EQ(Refusal({"--devices", "0", "p"}),
            "--devices does not take '0'; give a number, gpu, cpu or auto");
}

TEST(TorchrunArgs, NnodesFixedOrRefusedElasticInOneLine) {
  EXPECT_EQ(Ok({"--nnodes", "2", "x"}).nnodes, 2);
  EXPECT_EQ(Ok({"--nnodes=2:2", "x"}).nnodes, 2);
  EXPECT_EQ(Ok({"--nnodes", "1:1", "x"}).nnodes, 1);
  const std::string elastic = Refusal({"--nnodes", "1:4", "x"});
  EXPECT_NE(elastic.find("elastic run of 1 to 4 nodes"), std::string::npos) << elastic;
  EXPECT_NE(elastic.find("give --nnodes 4"), std::string::npos) << elastic;
  EXPECT_EQ(Refusal({"--nnodes", "a:b", "x"}),
            "--nnodes does not take 'a:b'; give N or N:N, N at least 1");
  EXPECT_NE(Refusal({"--nnodes", "0", "x"}).find("does not take '0'"), std::string::npos);
}

TEST(TorchrunArgs, ScriptsRunWithPythonAsTorchrunRunsThem) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Ok({"train.py", "--lr", "1"}).command, (V{"python3", "-u", "train.py", "--lr", "1"}));
  EXPECT_EQ(Ok({"-m", "pkg.train", "--x"}).command, (V{"python3", "-u", "-m", "pkg.train", "--x"}));
  EXPECT_EQ(Ok({"--module", "pkg"}).command, (V{"python3", "-u", "-m", "pkg"}));
  EXPECT_EQ(Ok({"--no-python", "./train.py"}).command, (V{"./train.py"}));
  EXPECT_EQ(Ok({"--no_python", "bash", "run.sh"}).command, (V{"bash", "run.sh"}));
  EXPECT_EQ(Ok({"--run-path", "/abs/train"}).command, (V{"python3", "-u", "/abs/train"}));
  EXPECT_EQ(Ok({"plain_script"}).command, (V{"python3", "-u", "plain_script"}));
  // ltrun's own habit: a program, run as it is.
  EXPECT_EQ(Ok({"--", "python3", "train.py"}).command, (V{"python3", "train.py"}));
  EXPECT_EQ(Ok({"/bin/true"}).command, (V{"/bin/true"}));
  MachineFacts f = Facts();
  f.python_exec = "/opt/py/bin/python";
  EXPECT_EQ(Ok({"train.py"}, {}, f).command, (V{"/opt/py/bin/python", "-u", "train.py"}));
  // After PROGRAM every word is the program's, options included.
  EXPECT_EQ(Ok({"train.py", "--nnodes", "9"}).nnodes, std::nullopt);
}

TEST(TorchrunArgs, RendezvousBackends) {
  LaunchArgs etcd =
      Ok({"--nnodes=2", "--rdzv-backend=etcd", "--rdzv-endpoint=h:2379", "--rdzv-id=job7", "x"});
  EXPECT_EQ(etcd.rdzv, "etcd://h:2379");
  EXPECT_EQ(etcd.run_id, "job7");
  EXPECT_EQ(
      Ok({"--nnodes=2", "--rdzv_backend", "etcd-v2", "--rdzv_endpoint", "http://h:2379/", "x"})
          .rdzv,
      "etcd://h:2379");
  LaunchArgs c10d = Ok({"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "n0", "x"});
  EXPECT_EQ(c10d.rdzv, "etcd://n0:29400");
  EXPECT_EQ(c10d.c10d_endpoint, "n0:29400");
  EXPECT_EQ(c10d.run_id, "none");
  // One node meets nobody: nothing to host, nothing to join.
  LaunchArgs one = Ok({"--nnodes=1", "--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0", "x"});
  EXPECT_TRUE(one.rdzv.empty());
  EXPECT_TRUE(one.c10d_endpoint.empty());
  LaunchArgs standalone = Ok({"--standalone", "--rdzv-backend=etcd", "--rdzv-endpoint=h:1", "x"});
  EXPECT_TRUE(standalone.rdzv.empty());
  EXPECT_EQ(standalone.nnodes, 1);
  EXPECT_EQ(NoEffectLine(standalone),
            "--rdzv-backend (with --standalone), --rdzv-endpoint (with --standalone) have no "
            "effect under ltrun (torchrun's; see ltrun(1))");
  LaunchArgs stat = Ok({"--nnodes=2", "--node-rank=1", "--rdzv-endpoint=m:1234", "x"});
  EXPECT_EQ(stat.master_addr, "m");
  EXPECT_EQ(stat.master_port, 1234);
  EXPECT_EQ(stat.node_rank, 1);
  // Port 0 is torchrun's "any free port": none given, one is picked (it
  // read as port 0; fuzz/ltrun_args found it). Where nodes meet, it is no
  // place to meet.
  LaunchArgs any_port = Ok({"--rdzv-endpoint=m:0", "x"});
  EXPECT_EQ(any_port.master_addr, "m");
  EXPECT_EQ(any_port.master_port, std::nullopt);
  EXPECT_EQ(
      Refusal({"--nnodes=2", "--rdzv-backend=etcd", "--rdzv-endpoint=h:0", "x"}),
      "--rdzv-endpoint does not take 'h:0'; give HOST:PORT with the port every node meets at");
  EXPECT_EQ(
      Refusal({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=h:00", "x"}),
      "--rdzv-endpoint does not take 'h:00'; give HOST:PORT with the port every node meets at");
  LaunchArgs conf = Ok({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=h:5",
                        "--rdzv-conf=join_timeout=90,is_host=1,read_timeout=60", "x"});
  EXPECT_EQ(conf.rdzv_timeout, "90s");
  EXPECT_EQ(conf.c10d_is_host, true);
  EXPECT_EQ(conf.no_effect, std::vector<std::string>{"--rdzv-conf read_timeout"});
  EXPECT_EQ(Refusal({"--nnodes=2", "--rdzv-backend=etcd", "x"}),
            "--rdzv-backend etcd needs --rdzv-endpoint HOST:PORT, the same on every node");
  EXPECT_EQ(Refusal({"--rdzv-backend=zookeeper", "x"}),
            "--rdzv-backend does not take 'zookeeper'; give static, etcd, etcd-v2 or c10d");
  EXPECT_EQ(Refusal({"--standalone", "--nnodes=2", "x"}),
            "--standalone runs one node, not 2; drop --nnodes or --standalone");
}

TEST(TorchrunArgs, PetVariablesAreDefaultsAndTheLineWins) {
  const Env kubeflow = {{"PET_NNODES", "2"},          {"PET_NPROC_PER_NODE", "4"},
                        {"PET_NODE_RANK", "1"},       {"PET_MASTER_ADDR", "job-master-0"},
                        {"PET_MASTER_PORT", "23456"}, {"PET_MAX_RESTARTS", "3"}};
  LaunchArgs a = Ok({"train.py"}, kubeflow);
  EXPECT_EQ(a.nnodes, 2);
  EXPECT_EQ(a.devices, 4);
  EXPECT_EQ(a.node_rank, 1);
  EXPECT_EQ(a.master_addr, "job-master-0");
  EXPECT_EQ(a.master_port, 23456);
  EXPECT_EQ(a.max_restarts, 3);
  EXPECT_EQ(Ok({"--nproc-per-node=2", "train.py"}, kubeflow).devices, 2);
  EXPECT_EQ(Ok({"x"}, {{"PET_STANDALONE", "1"}}).nnodes, 1);
  EXPECT_EQ(Ok({"x"}, {{"PET_STANDALONE", "0"}}).nnodes, std::nullopt);
  EXPECT_EQ(Ok({"pkg"}, {{"PET_MODULE", "1"}}).command,
            (std::vector<std::string>{"python3", "-u", "-m", "pkg"}));
  EXPECT_EQ(Ok({"x"}, {{"PET_NNODES", ""}}).nnodes, std::nullopt);  // empty: not set
  EXPECT_EQ(Refusal({"x"}, {{"PET_STANDALONE", "yes"}}),
            "PET_STANDALONE='yes' is not a number; set it to 1 (on) or 0 (off)");
  EXPECT_EQ(Refusal({"x"}, {{"PET_NNODES", "1:3"}}).substr(0, 20), "PET_NNODES 1:3 asks ");
}

TEST(TorchrunArgs, LogsAndConsoleAsTorchrunMeansThem) {
  LaunchArgs a =
      Ok({"--log-dir", "/l", "--redirects", "3", "--tee=0:1,1:2", "--local-ranks-filter=0,2", "x"});
  EXPECT_EQ(a.log_dir, "/l");
  EXPECT_EQ(a.redirects.For(5), 3);
  EXPECT_EQ(a.tee.For(0), 1);
  EXPECT_EQ(a.tee.For(1), 2);
  EXPECT_EQ(a.tee.For(2), 0);
  EXPECT_EQ(a.local_ranks_filter, (std::set<int>{0, 2}));
  EXPECT_EQ(Ok({"-r", "1", "x"}).redirects.all, 1);
  // -t: torchrun's --tee with a stream number, ltrun's --time with a duration.
  EXPECT_EQ(Ok({"-t", "3", "x"}).tee.all, 3);
  LaunchArgs timed = Ok({"-t", "1h", "x"});
  EXPECT_EQ(timed.time_limit, "1h");
  EXPECT_FALSE(timed.tee.Any());
  EXPECT_EQ(Refusal({"--tee", "5", "x"}),
            "--tee does not take '5'; give 0-3 (1 stdout, 2 stderr, 3 both) or RANK:N,...");
  EXPECT_EQ(Refusal({"--local-ranks-filter", "a", "x"}),
            "--local-ranks-filter does not take 'a'; give local ranks as 0,1,2");
}

TEST(TorchrunArgs, SignalsAndShutdownMapOntoLtdsOwn) {
  LaunchArgs a = Ok({"--signals-to-handle=SIGTERM,SIGUSR1", "--shutdown-timeout=45", "x"});
  EXPECT_EQ(a.stop_signals, (std::vector<int>{SIGTERM, SIGUSR1}));
  EXPECT_EQ(a.grace, "45s");
  EXPECT_EQ(Ok({"--shutdown_timeout", "45", "--grace", "3s", "x"}).grace, "3s");
  EXPECT_EQ(
      Refusal({"--signals-to-handle", "SIGKILL", "x"}),
      "--signals-to-handle does not take 'SIGKILL'; give signal names such as SIGTERM,SIGUSR1");
}

TEST(TorchrunArgs, OptionsWithoutEffectAreSaidOnce) {
  LaunchArgs a = Ok({"--monitor_interval=1", "--start-method", "fork", "--role", "trainer",
                     "--max_restarts=2", "x"});
  EXPECT_EQ(a.max_restarts, 2);
  EXPECT_EQ(NoEffectLine(a),
            "--monitor_interval, --start-method, --role have no effect under ltrun (torchrun's; "
            "see ltrun(1))");
  EXPECT_EQ(NoEffectLine(Ok({"x"})), "");
  EXPECT_EQ(Refusal({"--start-method", "thread", "x"}),
            "--start-method does not take 'thread'; give spawn, fork or forkserver");
}

TEST(TorchrunArgs, RefusalsAreOneLineInLtdsWords) {
  EXPECT_EQ(Refusal({"--nproc-per-nod", "2", "x"}),
            "unknown option --nproc-per-nod; did you mean --nproc-per-node?");
  EXPECT_EQ(Refusal({"--devcies", "2", "x"}), "unknown option --devcies; did you mean --devices?");
  EXPECT_EQ(Refusal({"--zzzzzzzz", "x"}), "unknown option --zzzzzzzz");
  EXPECT_EQ(Refusal({"--devices", "1", "--devices", "2", "x"}),
            "--devices is given more than once; give it once");
  EXPECT_EQ(Refusal({"--nnodes"}), "--nnodes needs a value");
  EXPECT_EQ(Refusal({"--standalone=1", "x"}), "--standalone takes no value");
  EXPECT_EQ(Refusal({"--max-restarts", "-1", "x"}), "--max-restarts does not take '-1'");
  EXPECT_EQ(Refusal({"--master_port", "70000", "x"}), "--master_port does not take '70000'");
  EXPECT_EQ(Refusal({"--containment", "box", "x"}),
            "--containment does not take 'box'; give auto, cgroup, subreaper or process-group");
  EXPECT_EQ(Refusal({"--\x1b[31m", "x"}), "unknown option --\\x1B[31m");
}

// Random words and bytes: a result or one line, never a crash (ASan/UBSan
// builds make this a fuzzer of its own).
TEST(TorchrunArgs, RandomCommandLinesNeverCrash) {
  std::mt19937 rng(38);
  std::vector<std::string> pieces;
  for (const ArgDef& def : LtrunArgTable()) {
    pieces.push_back(Cat("--", def.name));
    pieces.push_back(Cat("--", def.name, "="));
    if (def.short_name != 0) pieces.push_back(Cat("-", def.short_name));
  }
  for (const char* v : {"1", "0", "2:2", "1:9", "gpu", "auto", "h:1", "c10d", "etcd", "", "-", "--",
                        "0:1,1:2", "SIGUSR1", "a=b,c", "\xff\x00", ":", "99999999999999"}) {
    pieces.emplace_back(v);
  }
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::string> words;
    const int n = static_cast<int>(rng() % 8);
    for (int w = 0; w < n; ++w) {
      std::string word = pieces[rng() % pieces.size()];
      if (rng() % 4 == 0) word += pieces[rng() % pieces.size()];
      if (rng() % 8 == 0) word.push_back(static_cast<char>(rng() % 256));
      words.push_back(word);
    }
    Env env;
    if (rng() % 3 == 0) env["PET_NNODES"] = pieces[rng() % pieces.size()];
    if (rng() % 3 == 0) env["PET_STANDALONE"] = pieces[rng() % pieces.size()];
    auto r = Read(words, env, Facts(static_cast<int>(rng() % 3)));
    if (!r.ok()) {
      EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << Join(words, " ");
    }
  }
}

}  // namespace
}  // namespace ltd
