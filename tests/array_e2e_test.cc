// Job arrays end to end (issue 38): `submit --array 0-5%2` through the real
// ltctl: each task's environment and output file, the %N throttle, `ps`'s
// ARRAY_TASK ids, `kill` of a task and of the array, `wait`'s exit code,
// `show` of the array, and the array kept through a restart of ltd.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

class Array : public E2E {
 protected:
  // Devices enough for every task: only the throttle holds tasks back.
  std::vector<std::string> DaemonArgs() override {
    return {"--devices", "8", "--user-max-pending-jobs", "8", "--restore-window", "10m"};
  }

  bool Exists(const std::string& name) const {
    struct stat st {};
    return stat((d_.dir() + "/" + name).c_str(), &st) == 0;
  }

  // Each task says its environment, marks its start, and ends with its
  // task id as exit code once the test writes go-ID.
  std::vector<std::string> TaskArgs() const {
    const std::string dir = d_.dir();
    return {"/bin/sh", "-c",
            "echo task=$LTD_ARRAY_JOB_ID:$LTD_ARRAY_TASK_ID:$LTD_ARRAY_TASK_COUNT "
            "slurm=${SLURM_ARRAY_TASK_ID-none}:${SLURM_ARRAY_JOB_ID-none}; touch " +
                dir + "/started-$LTD_ARRAY_TASK_ID; while [ ! -e " + dir +
                "/go-$LTD_ARRAY_TASK_ID ]; do sleep 0.02; done; exit $LTD_ARRAY_TASK_ID"};
  }

  // The array's tasks as `ps --json` lists them, by task id.
  std::map<int, nlohmann::json> Tasks(const std::string& array) const {
    CmdResult r = d_.Ctl({"ps", "-a", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<int, nlohmann::json> out;
    for (const nlohmann::json& j : nlohmann::json::parse(r.out)) {
      if (j["array_job_id"] == array) out[j["array_task_id"].get<int>()] = j;
    }
    return out;
  }

  int Running(const std::string& array) const {
    int n = 0;
    for (const auto& [task, j] : Tasks(array)) n += j["state"] == "RUNNING" ? 1 : 0;
    return n;
  }

  void Go(int task) const { std::ofstream(d_.dir() + "/go-" + std::to_string(task)) << "go"; }
};

TEST_F(Array, ThrottledTasksWithTheirOwnEnvKillWaitAndARestart) {
  std::vector<std::string> argv = {"submit", "--array", "0-5%2",
                                   "--name", "arr",     "--devices",
                                   "1",      "-o",      d_.dir() + "/out-%A_%a.log",
                                   "--"};
  for (const std::string& a : TaskArgs()) argv.push_back(a);
  CmdResult sub = d_.Ctl(argv);
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string a = TrimEnd(sub.out);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a.find_first_not_of("0123456789"), std::string::npos) << a;

  // Two run; the other four wait for the throttle, saying so.
  ASSERT_TRUE(WaitFor([&] { return Exists("started-0") && Exists("started-1"); }, 30s));
  std::map<int, nlohmann::json> tasks = Tasks(a);
  ASSERT_EQ(tasks.size(), 6u);
  EXPECT_EQ(tasks[0]["id"], a);  // the array's id is its first task's
  for (int t = 2; t < 6; ++t) {
    EXPECT_EQ(tasks[t]["state"], "PENDING") << tasks[t].dump();
    EXPECT_EQ(tasks[t]["pending_reason"], "array throttle: 2 of 6 tasks running")
        << tasks[t].dump();
    EXPECT_EQ(tasks[t]["array_task_count"], 6);
  }
  EXPECT_LE(Running(a), 2);
  CmdResult ps = d_.Ctl({"ps"});
  for (int t = 0; t < 6; ++t) EXPECT_TRUE(Has(ps.out, a + "_" + std::to_string(t))) << ps.out;

  // Task 0 ends: task 2 starts, and no other.
  Go(0);
  ASSERT_TRUE(WaitFor([&] { return Exists("started-2"); }, 30s));
  EXPECT_FALSE(Exists("started-3"));
  EXPECT_LE(Running(a), 2);
  EXPECT_EQ(d_.WaitEnded(a + "_0")["exit_code"], 0);

  // Its own environment, ltd's names only, in its log and its own file.
  CmdResult logs = d_.Ctl({"logs", a + "_0"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_TRUE(Has(logs.out, "task=" + a + ":0:6 slurm=none:none")) << logs.out;
  EXPECT_TRUE(Has(ReadWhole(d_.dir() + "/out-" + a + "_0.log"), "task=" + a + ":0:6"));
  // One task's log or nothing: the whole array is refused, saying what to give.
  CmdResult whole = d_.Ctl({"logs", a});
  EXPECT_EQ(whole.exit_code, 1);
  EXPECT_TRUE(Has(whole.err, "is an array of 6 tasks; name one task, such as " + a + "_"))
      << whole.err;

  // ltd restarts under the array: tasks, states and throttle kept.
  EXPECT_EQ(d_.Stop(), 0);
  ASSERT_TRUE(d_.Start(DaemonArgs())) << d_.log();
  tasks = Tasks(a);
  ASSERT_EQ(tasks.size(), 6u);
  EXPECT_EQ(tasks[0]["state"], "SUCCEEDED");
  EXPECT_EQ(tasks[1]["state"], "RUNNING");
  EXPECT_EQ(tasks[2]["state"], "RUNNING");
  EXPECT_EQ(tasks[3]["pending_reason"], "array throttle: 2 of 6 tasks running") << tasks[3].dump();
  EXPECT_FALSE(Exists("started-3"));

  // One task killed: it alone ends, and the next starts.
  CmdResult kill1 = d_.Ctl({"kill", a + "_1"});
  EXPECT_EQ(kill1.exit_code, 0) << kill1.err;
  EXPECT_EQ(d_.WaitEnded(a + "_1")["state"], "CANCELLED");
  ASSERT_TRUE(WaitFor([&] { return Exists("started-3"); }, 30s));
  EXPECT_FALSE(Exists("started-4"));
  EXPECT_EQ(Tasks(a)[2]["state"], "RUNNING");
  EXPECT_LE(Running(a), 2);

  // show of the array: its tasks by state.
  CmdResult show = d_.Ctl({"show", a});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_TRUE(Has(show.out, "6 tasks, at most 2 at once")) << show.out;
  EXPECT_TRUE(Has(show.out, "1 SUCCEEDED")) << show.out;
  EXPECT_TRUE(Has(show.out, a + "_1")) << show.out;

  // Task 2 fails with code 2, and task 4 takes its place; then the whole
  // array is killed (by its name), task 5 before it ever started.
  Go(2);
  EXPECT_EQ(d_.WaitEnded(a + "_2")["exit_code"], 2);
  ASSERT_TRUE(WaitFor([&] { return Exists("started-4"); }, 30s));
  EXPECT_EQ(Tasks(a)[5]["pending_reason"], "array throttle: 2 of 6 tasks running");
  CmdResult killall = d_.Ctl({"kill", "arr"});
  EXPECT_EQ(killall.exit_code, 0) << killall.err;
  EXPECT_EQ(TrimEnd(killall.out), a);
  for (int t = 3; t < 6; ++t) {
    EXPECT_EQ(d_.WaitEnded(a + "_" + std::to_string(t))["state"], "CANCELLED");
  }
  // wait: every task, the worst exit code (130, the cancelled ones').
  CmdResult w = d_.Ctl({"wait", a});
  EXPECT_EQ(w.exit_code, 130) << w.err;
  EXPECT_FALSE(Exists("started-5"));
}

TEST_F(Array, WaitExitsWithTheWorstTasksCode) {
  CmdResult sub = d_.Ctl({"submit", "--array", "0-2", "--devices", "1", "--", "/bin/sh", "-c",
                          "exit $LTD_ARRAY_TASK_ID"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string a = TrimEnd(sub.out);
  CmdResult w = d_.Ctl({"wait", a});
  EXPECT_EQ(w.exit_code, 2) << w.err;
  nlohmann::json shown = nlohmann::json::parse(d_.Ctl({"show", a, "--json"}).out);
  ASSERT_EQ(shown["array_tasks"].size(), 3u) << shown.dump();
  EXPECT_EQ(shown["array_tasks"][1]["exit_code"], 1);
  EXPECT_EQ(shown["array_tasks"][0]["state"], "SUCCEEDED");
}

TEST_F(Array, BadSpecsAndTooManyTasksAreRefusedInOneLine) {
  for (const char* bad : {"5-2", "", "0-1000", "0-3%0"}) {
    CmdResult r = d_.Ctl({"submit", "--array", bad, "--devices", "1", "--", "/bin/true"});
    EXPECT_EQ(r.exit_code, 1) << bad;
    EXPECT_TRUE(Has(r.err, "--array")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // Nine tasks under a limit of 8 pending jobs: as nine submits would be.
  CmdResult r = d_.Ctl({"submit", "--array", "0-8", "--devices", "1", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Has(r.err, "the array would add 9")) << r.err;
  // %a belongs to an array's task.
  r = d_.Ctl({"submit", "-d", "-o", d_.dir() + "/x-%a", "--devices", "1", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Has(r.err, "%a is an array task's id")) << r.err;
}

// #LTD --array in a script, as #SBATCH --array.
TEST_F(Array, ScriptDirective) {
  const std::string script = d_.dir() + "/job.sh";
  std::ofstream(script) << "#!/bin/sh\n#LTD --array 3,5 --devices 1\nexit 0\n";
  chmod(script.c_str(), 0755);
  CmdResult sub = d_.Ctl({"submit", script});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string a = TrimEnd(sub.out);
  EXPECT_EQ(d_.Ctl({"wait", a}).exit_code, 0);
  EXPECT_EQ(d_.WaitEnded(a + "_5")["state"], "SUCCEEDED");
  EXPECT_EQ(d_.Ctl({"show", a + "_4"}).exit_code, 1);
}

}  // namespace
}  // namespace ltd::test
