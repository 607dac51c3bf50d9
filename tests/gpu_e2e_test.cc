// GPUs checked free before reuse, end to end: a real ltd loads a fake
// libnvidia-ml.so.1 built by the tests (--nvml-library), whose processes and
// memory come from a file this test writes ($LT_FAKE_NVML_FILE). A leftover
// process quarantines a GPU, the pending job names it, the GPU frees itself
// once the process is gone, and `ltctl gpus` shows each state. Then ltd
// without NVML, and (label gpu) the real NVML where there is one.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <fstream>

#include "harness.h"

namespace ltd::test {
namespace {

const std::string kChild = TestChildPath();

std::string Me() {
  passwd* pw = getpwuid(getuid());
  return pw != nullptr ? pw->pw_name : std::to_string(getuid());
}

std::string Trim(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

class FakeNvml : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = d_.dir() + "/nvml";
    Write("count 2\nmem 0 100 16384\nmem 1 200 16384\nutil 0 7\nutil 1 9\n");
    const std::string file = file_;
    d_.set_child_setup([file] { setenv("LT_FAKE_NVML_FILE", file.c_str(), 1); });
  }
  void TearDown() override {
    d_.Stop();
    EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 10s));
    for (pid_t pid : ProcessesWithMarker(d_.marker())) kill(pid, SIGKILL);
    EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1) << "a child of the test is left";
    if (HasFailure()) std::fprintf(stderr, "---- ltd log ----\n%s\n", d_.log().c_str());
  }
  // Rewritten whole and renamed in place, so ltd never reads half a file.
  void Write(const std::string& text) {
    std::ofstream(file_ + ".tmp") << text;
    ASSERT_EQ(rename((file_ + ".tmp").c_str(), file_.c_str()), 0);
  }
  nlohmann::json Gpus() {
    CmdResult r = d_.Ctl({"gpus", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  }
  std::string SubmitDetached(std::vector<std::string> args) {
    std::vector<std::string> argv = {"submit", "-d"};
    argv.insert(argv.end(), args.begin(), args.end());
    CmdResult r = d_.Ctl(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Trim(r.out);
  }

  Daemon d_;
  std::string file_;
};

TEST_F(FakeNvml, LeftoverQuarantinesUntilItGoesAndGpusShowsEachState) {
  ASSERT_TRUE(d_.Start({"--gpus", "0,1", "--nvml-library", LT_FAKE_NVML, "--gpu-sample-interval",
                        "200ms", "--gpu-leftover-mib", "64"}))
      << d_.log();
  const std::string first = SubmitDetached({"--devices", "2", "--", kChild, "hang"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(first)["state"] == "RUNNING"; }, 20s));
  nlohmann::json g = Gpus();
  EXPECT_EQ(g["gpu_checks"], true) << g.dump();
  ASSERT_EQ(g["slots"].size(), 2u) << g.dump();
  EXPECT_EQ(g["slots"][1]["state"], "BUSY");
  EXPECT_EQ(g["slots"][1]["job_id"], first);
  EXPECT_EQ(g["slots"][1]["user"], Me());
  // show: each GPU's memory and utilisation, sampled.
  ASSERT_TRUE(WaitFor([&] { return d_.Show(first)["gpus"].size() == 2; }, 20s))
      << d_.Show(first).dump();
  nlohmann::json shown = d_.Show(first);
  EXPECT_EQ(shown["gpus"][1]["gpu"], "1");
  EXPECT_EQ(shown["gpus"][1]["memory_used_mib"], 200);
  EXPECT_EQ(shown["gpus"][1]["utilization"], 9);
  EXPECT_NE(d_.Ctl({"show", first}).out.find("GPU 1:"), std::string::npos);

  // A process outside the job holds GPU 1 when the job ends: this test's
  // own pid stands for it (a real process, so its user can be looked up).
  // The one on GPU 0 holds less than --gpu-leftover-mib: no matter.
  Write("count 2\nproc 1 " + std::to_string(getpid()) + " 3174\nproc 0 1 10\n");
  ASSERT_EQ(d_.Ctl({"kill", first}).exit_code, 0);
  d_.WaitEnded(first);
  g = Gpus();
  EXPECT_EQ(g["slots"][0]["state"], "FREE") << g.dump();
  EXPECT_EQ(g["slots"][1]["state"], "QUARANTINED") << g.dump();
  ASSERT_EQ(g["slots"][1]["holders"].size(), 1u) << g.dump();
  EXPECT_EQ(g["slots"][1]["holders"][0]["pid"], getpid());
  EXPECT_EQ(g["slots"][1]["holders"][0]["user"], Me());
  EXPECT_EQ(g["slots"][1]["holders"][0]["memory_mib"], 3174);
  EXPECT_FALSE(g["slots"][1]["quarantined_since"].is_null());
  CmdResult table = d_.Ctl({"gpus"});
  EXPECT_NE(table.out.find("QUARANTINED"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("pid " + std::to_string(getpid()) + " (" + Me() + ") holds 3.1 GiB"),
            std::string::npos)
      << table.out;

  // The next job waits and says for what.
  const std::string second = SubmitDetached({"--devices", "2", "--", kChild, "exit:0"});
  const std::string reason = "needs 2 devices, 1 free; GPU 1 quarantined: pid " +
                             std::to_string(getpid()) + " (" + Me() + ") holds 3.1 GiB";
  EXPECT_EQ(d_.Show(second)["pending_reason"], reason) << d_.Show(second).dump();
  EXPECT_NE(d_.Ctl({"ps"}).out.find(reason), std::string::npos);

  // The process goes: the GPU comes back by itself and the job runs.
  Write("count 2\n");
  EXPECT_EQ(d_.WaitEnded(second)["state"], "SUCCEEDED");
  EXPECT_EQ(d_.Show(second)["cuda_visible_devices"], "0,1");
  g = Gpus();
  EXPECT_EQ(g["slots"][1]["state"], "FREE") << g.dump();
  EXPECT_NE(d_.log().find("GPU 1 is clean again"), std::string::npos);
}

// Each GPU's /dev/nvidiaN and every process on it, a job's rank and any
// other, as NVML saw them at most a second before `ltctl gpus` asked.
TEST_F(FakeNvml, GpusShowsEachGpusMinorAndEveryProcessOnIt) {
  Write("count 2\nminor 0 4\nminor 1 7\n");
  ASSERT_TRUE(d_.Start({"--gpus", "0,1", "--nvml-library", LT_FAKE_NVML})) << d_.log();
  nlohmann::json g = Gpus();
  ASSERT_EQ(g["slots"].size(), 2u) << g.dump();
  EXPECT_EQ(g["slots"][0]["minor"], 4) << g.dump();
  EXPECT_EQ(g["slots"][1]["minor"], 7) << g.dump();
  EXPECT_TRUE(g["slots"][1]["processes"].empty()) << g.dump();

  const std::string id = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(id)["state"] == "RUNNING"; }, 20s));
  const nlohmann::json shown = d_.Show(id);
  const std::string gpu = shown["cuda_visible_devices"];
  const int rank_pid = shown["ranks"][0]["pid"];
  const int slot = std::stoi(gpu);
  // The rank holds 1 GiB; a process of no job (pid 1) holds an amount
  // NVML cannot tell.
  Write("count 2\nminor 0 4\nminor 1 7\nproc " + gpu + " " + std::to_string(rank_pid) +
        " 1024\nproc " + gpu + " 1 na\n");
  ASSERT_TRUE(WaitFor([&] { return Gpus()["slots"][slot]["processes"].size() == 2; }, 10s))
      << Gpus().dump();
  g = Gpus();
  const nlohmann::json procs = g["slots"][slot]["processes"];
  EXPECT_EQ(g["slots"][slot]["state"], "BUSY");
  EXPECT_EQ(g["slots"][slot]["job_id"], id);
  EXPECT_EQ(procs[0]["pid"], rank_pid);
  EXPECT_EQ(procs[0]["user"], Me());
  EXPECT_EQ(procs[0]["memory_mib"], 1024);
  EXPECT_EQ(procs[1]["pid"], 1);
  EXPECT_EQ(procs[1]["user"], "root");
  EXPECT_TRUE(procs[1]["memory_mib"].is_null()) << procs.dump();  // NVML cannot tell
  EXPECT_TRUE(g["slots"][1 - slot]["processes"].empty()) << g.dump();
  const std::string table = d_.Ctl({"gpus"}).out;
  EXPECT_NE(table.find("MINOR"), std::string::npos) << table;
  EXPECT_NE(table.find("pid " + std::to_string(rank_pid) + " (" + Me() +
                       ") holds 1.0 GiB; pid 1 (root) holds memory"),
            std::string::npos)
      << table;
  Write("count 2\n");
  ASSERT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  d_.WaitEnded(id);
}

TEST_F(FakeNvml, WithoutGpusOptionTheGpusNvmlFindsAreTheSlots) {
  Write("count 3\n");
  d_.set_default_devices(false);
  ASSERT_TRUE(d_.Start({"--nvml-library", LT_FAKE_NVML})) << d_.log();
  nlohmann::json g = Gpus();
  ASSERT_EQ(g["slots"].size(), 3u) << g.dump();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(g["slots"][i]["gpu"], std::to_string(i));
  const std::string id =
      SubmitDetached({"--devices", "3", "--", kChild, "getenv:CUDA_VISIBLE_DEVICES"});
  EXPECT_EQ(d_.WaitEnded(id)["cuda_visible_devices"], "0,1,2");
}

TEST_F(FakeNvml, WithoutNvmlChecksAreOffAndSaidOnce) {
  ASSERT_TRUE(
      d_.Start({"--gpus", "0,1", "--nvml-library", d_.dir() + "/no-such-libnvidia-ml.so.1"}))
      << d_.log();
  // Logged once ltd is up, a moment after its socket answers (after
  // "ltd listening", so that line is no sign of it).
  EXPECT_TRUE(WaitFor(
      [&] { return d_.log().find("GPU checks off: cannot load") != std::string::npos; }, 10s))
      << d_.log();
  nlohmann::json g = Gpus();
  EXPECT_EQ(g["gpu_checks"], false);
  EXPECT_EQ(g["slots"].size(), 2u);
  EXPECT_NE(d_.Ctl({"gpus"}).out.find("GPU checks are off"), std::string::npos);
  const std::string id = SubmitDetached({"--devices", "2", "--", kChild, "exit:0"});
  EXPECT_EQ(d_.WaitEnded(id)["state"], "SUCCEEDED");
  EXPECT_EQ(Gpus()["slots"][1]["state"], "FREE");
  // Not again for the job, nor for the looks at the GPUs.
  const std::string log = d_.log();
  const size_t at = log.find("GPU checks off");
  EXPECT_EQ(log.find("GPU checks off", at + 1), std::string::npos) << "said more than once";
}

TEST_F(FakeNvml, DriverThatFailsToInitIsNoNvml) {
  Write("fail init\ncount 2\n");
  ASSERT_TRUE(d_.Start({"--gpus", "0,1", "--nvml-library", LT_FAKE_NVML})) << d_.log();
  EXPECT_TRUE(WaitFor(
      [&] {
        return d_.log().find("GPU checks off: nvmlInit failed: Driver Not Loaded") !=
               std::string::npos;
      },
      10s))
      << d_.log();
  EXPECT_EQ(Gpus()["gpu_checks"], false);
}

// The real NVML (label gpu): skipped where no driver answers.
TEST(RealNvml, GpusListsTheHostsGpus) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) GTEST_SKIP() << "no libnvidia-ml.so.1 on this host: " << dlerror();
  dlclose(lib);
  Daemon d;
  d.set_default_devices(false);
  ASSERT_TRUE(d.Start()) << d.log();
  ASSERT_TRUE(WaitFor([&] { return d.log().find("ltd listening") != std::string::npos; }, 10s));
  if (d.log().find("GPU checks off") != std::string::npos) {
    d.Stop();
    GTEST_SKIP() << "NVML loads but does not answer here:\n" << d.log();
  }
  CmdResult r = d.Ctl({"gpus", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto g = nlohmann::json::parse(r.out);
  EXPECT_EQ(g["gpu_checks"], true);
  ASSERT_FALSE(g["slots"].empty());
  for (const auto& s : g["slots"]) {
    EXPECT_FALSE(s["gpu"].get<std::string>().empty());
    EXPECT_GT(s["usage"]["memory_total_mib"].get<uint64_t>(), 0u) << s.dump();
  }
  // A job on every GPU, and every GPU back (or quarantined by someone
  // else's process, which `gpus` must then name) after it.
  const std::string n = std::to_string(g["slots"].size());
  CmdResult job = d.Ctl({"submit", "--devices", n, "--", kChild, "exit:0"});
  EXPECT_EQ(job.exit_code, 0) << job.err;
  auto after = nlohmann::json::parse(d.Ctl({"gpus", "--json"}).out);
  for (const auto& s : after["slots"]) {
    if (s["state"] == "QUARANTINED") {
      EXPECT_FALSE(s["holders"].empty()) << s.dump();
    } else {
      EXPECT_EQ(s["state"], "FREE") << s.dump();
    }
  }
  EXPECT_EQ(d.Stop(), 0);
}

}  // namespace
}  // namespace ltd::test
