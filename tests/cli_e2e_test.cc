// ltctl's command line end to end: what users type reaches the program as
// typed, submit's options before PROGRAM still count, the globals work on
// either side of the verb, and bad input is one line and exit code 1.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

const std::string kChild = TestChildPath();

using CliE2E = E2E;

// The lines rank `rank` printed to stdout of an attached submit, in order,
// without their "[R] " prefix.
std::vector<std::string> RankLines(const std::string& out, int rank) {
  const std::string prefix = "[" + std::to_string(rank) + "] ";
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(prefix)) lines.push_back(line.substr(prefix.size()));
  }
  return lines;
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

nlohmann::json ParseJson(const CmdResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

void ExpectOneLineError(const CmdResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(CliE2E, EverythingAfterProgramIsTheProgramsWithoutDoubleDash) {
  // Submit options, ltctl globals, verbs, `--`, `--help`, an empty and a
  // spaced argument: all of them the program's, as they come after PROGRAM.
  const std::vector<std::string> args = {
      "--lr",  "3e-4", "--name", "x",    "-d", "--json", "--socket", "/nowhere", "--devices", "9",
      "--env", "K=V",  "ps",     "show", "--", "-",      "--help",   "",         "two words"};
  CmdResult r = d_.Ctl(Concat({"submit", "--devices", "2", kChild, "argv"}, args));
  ASSERT_EQ(r.exit_code, 0) << r.err;  // attached: -d and --json were not ltctl's
  EXPECT_EQ(RankLines(r.out, 0), args) << r.out;
  EXPECT_EQ(RankLines(r.out, 1), args) << r.out;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["name"], "");  // --name x went to the program
  EXPECT_EQ(job["devices"], 2);
  EXPECT_EQ(job["argv"], Concat({kChild, "argv"}, args));
}

TEST_F(CliE2E, DoubleDashBeforeProgramStillWorks) {
  // `--` after a repeatable option ends PROGRAM's options too, not only the
  // option's values.
  const std::vector<std::string> args = {"--lr", "3e-4", "--rank", "1", "--", "-d"};
  CmdResult r = d_.Ctl(Concat(
      {"submit", "--devices", "1", "--env", "LT_TEST_EXTRA=yes", "--", kChild, "argv"}, args));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(RankLines(r.out, 0), args) << r.out;
  EXPECT_EQ(d_.Show("1")["argv"], Concat({kChild, "argv"}, args));
}

TEST_F(CliE2E, SubmitOptionsBeforeProgramTakeEffect) {
  // No `--`: each option takes its own value and PROGRAM starts after them,
  // also right after a repeatable one (`--env K=V PROGRAM`).
  CmdResult r =
      d_.Ctl({"submit", "--name", "opts", "-d", "--env", "LT_TEST_EXTRA=first", "--grace", "3s",
              "--heartbeat-timeout", "1m", "--max-restarts", "0", "--devices", "2", "--env",
              "LT_TEST_OTHER=second", kChild, "getenv:LT_TEST_EXTRA,getenv:LT_TEST_OTHER,exit:0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1\n");  // detached: the job id alone
  nlohmann::json job = d_.WaitEnded("opts");
  EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump();
  EXPECT_EQ(job["id"], "1");
  EXPECT_EQ(job["devices"], 2);
  EXPECT_EQ(job["grace_ms"], 3000);
  EXPECT_EQ(job["heartbeat_timeout_ms"], 60000);
  EXPECT_EQ(job["argv"],
            nlohmann::json({kChild, "getenv:LT_TEST_EXTRA,getenv:LT_TEST_OTHER,exit:0"}));
  CmdResult logs = d_.Ctl({"logs", "opts", "--rank", "1"});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, "LT_TEST_EXTRA=first\nLT_TEST_OTHER=second\n");
}

TEST_F(CliE2E, JsonBeforeOrAfterTheVerb) {
  const std::string id = SubmitDetached({"--devices", "1", "--name", "live", kChild, "hang"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(id).value("state", "") == "RUNNING"; }, 10s));
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {"--json", "ps"}, {"ps", "--json"}, {"ps", "--json", "-a"}, {"ps", "-a", "--json"}}) {
    nlohmann::json jobs = ParseJson(d_.Ctl(argv));
    ASSERT_TRUE(jobs.is_array()) << argv[0] << " " << argv[1];
    ASSERT_EQ(jobs.size(), 1u) << jobs.dump();
    EXPECT_EQ(jobs[0]["id"], id);
    EXPECT_EQ(jobs[0]["state"], "RUNNING");
  }
  for (const auto& argv : std::vector<std::vector<std::string>>{{"--json", "show", id},
                                                                {"show", "--json", id},
                                                                {"show", id, "--json"},
                                                                {"show", "live", "--json"}}) {
    nlohmann::json job = ParseJson(d_.Ctl(argv));
    ASSERT_TRUE(job.is_object()) << argv[0] << " " << argv[1];
    EXPECT_EQ(job["id"], id);
    EXPECT_EQ(job["name"], "live");
    EXPECT_TRUE(job["ranks"].is_array());
  }
  // Without it, the table and the text, which are no JSON.
  EXPECT_FALSE(nlohmann::json::accept(d_.Ctl({"ps"}).out));
  EXPECT_FALSE(nlohmann::json::accept(d_.Ctl({"show", id}).out));
  EXPECT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  EXPECT_EQ(d_.WaitEnded(id)["state"], "CANCELLED");
}

TEST_F(CliE2E, SocketAfterTheVerbCountsAndTheLastOneWins) {
  const std::vector<std::string> nowhere = {"LTD_SOCKET=" + d_.dir() + "/nowhere.sock"};
  CmdResult after =
      RunCommand({LtctlPath(), "ps", "--json", "--socket", d_.socket()}, nowhere, 30s);
  EXPECT_TRUE(ParseJson(after).is_array()) << after.out;
  CmdResult last = RunCommand(
      {LtctlPath(), "--socket", d_.dir() + "/nowhere.sock", "ps", "--socket", d_.socket()}, {},
      30s);
  EXPECT_EQ(last.exit_code, 0) << last.err;
  CmdResult missing = RunCommand({LtctlPath(), "ps"}, nowhere, 30s);
  ExpectOneLineError(missing, "cannot reach ltd at " + d_.dir() + "/nowhere.sock");
}

// An attached submit says its job first (`ltd: job N (NAME)`), and `logs`
// of a restarted job marks where each attempt ended and why.
TEST_F(CliE2E, AttachedSubmitSaysItsJobAndLogsMarkEachAttempt) {
  CmdResult r = d_.Ctl({"submit", "--name", "twice", "--devices", "1", "--max-restarts", "1",
                        kChild, "print:1,exit:3"},
                       60s);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.err.rfind("ltd: job 1 (twice)\n", 0), 0u) << r.err;
  const std::string logs = d_.Ctl({"logs", "1"}).out;
  const size_t marker = logs.find(
      "[ltd] attempt 1 of job 1 ended: rank 0 exited with code 3; "
      "restarting (1 of 1) in ");
  ASSERT_NE(marker, std::string::npos) << logs;
  // Between the two attempts' lines.
  EXPECT_NE(logs.find("[0] line 0 of 1"), std::string::npos) << logs;
  EXPECT_LT(logs.find("[0] line 0 of 1"), marker) << logs;
  EXPECT_NE(logs.find("[0] line 0 of 1", marker), std::string::npos) << logs;
  CmdResult plain = d_.Ctl({"submit", "--devices", "1", kChild, "exit:0"}, 30s);
  EXPECT_EQ(plain.err.rfind("ltd: job 2\n", 0), 0u) << "no name, no (): " << plain.err;
}

// #LTD lines at the top of a script are submit options, as #SBATCH lines;
// the command line's win; a bad one is one line naming the script's line.
TEST_F(CliE2E, ScriptDirectivesAreSubmitOptionsTheCommandLineWins) {
  const std::string script = d_.dir() + "/job.sh";
  {
    std::ofstream f(script);
    f << "#!/bin/sh\n#LTD --devices 2 --name from-script\n# a comment\n"
         "#LTD --env FROM='the script'  # why\necho \"rank $RANK of $WORLD_SIZE: $FROM\"\n"
         "#LTD --devices 9\n";
  }
  chmod(script.c_str(), 0755);
  CmdResult r = d_.Ctl({"submit", script}, 30s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(RankLines(r.out, 1), std::vector<std::string>{"rank 1 of 2: the script"}) << r.out;
  EXPECT_EQ(d_.Show("1")["name"], "from-script");
  r = d_.Ctl({"submit", "--devices", "1", "--name", "mine", script}, 30s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(RankLines(r.out, 0), std::vector<std::string>{"rank 0 of 1: the script"}) << r.out;
  EXPECT_EQ(d_.Show("2")["name"], "mine");

  std::ofstream(script) << "#!/bin/sh\n#LTD --devcies 2\ntrue\n";
  ExpectOneLineError(d_.Ctl({"submit", script}),
                     script + ":2: #LTD: unknown option --devcies (did you mean '--devices'?)");
}

TEST_F(CliE2E, BadCommandLinesAreOneLineAndExitOne) {
  ExpectOneLineError(d_.Ctl({"submit", "--devices", "2"}), "PROGRAM is required");
  ExpectOneLineError(d_.Ctl({"submit", "--devices", "2", "--"}), "PROGRAM is required");
  ExpectOneLineError(d_.Ctl({"submit", "--devcies", "2", kChild, "exit:0"}),
                     "unknown option --devcies");
  ExpectOneLineError(d_.Ctl({"submit", "--devices", "2", "--nmae", "x", kChild, "exit:0"}),
                     "--nmae");
  ExpectOneLineError(d_.Ctl({"submit", "--devices", "1", "--env"}), "--env");
  ExpectOneLineError(d_.Ctl({"submit", "--devices", "1", "--env", "NOEQUALS", kChild, "exit:0"}),
                     "--env takes KEY=VALUE, got 'NOEQUALS'");
  ExpectOneLineError(d_.Ctl({"show"}), "JOB is required");
  ExpectOneLineError(d_.Ctl({"show", "1", "--jsn"}), "--jsn");
  ExpectOneLineError(d_.Ctl({"show", "1", "2"}), "'2' is not expected");
  ExpectOneLineError(d_.Ctl({"ps", "--bogus"}), "--bogus");
  ExpectOneLineError(d_.Ctl({"frobnicate", "7"}), "unknown verb 'frobnicate'");
  ExpectOneLineError(d_.Ctl({"--jsno", "ps"}), "unknown option --jsno");
  ExpectOneLineError(d_.Ctl({}), "no verb given; give one of submit, ");
  // A typo gets the closest verb or option; an option of submit's after
  // PROGRAM is PROGRAM's, and the line says so.
  ExpectOneLineError(d_.Ctl({"sumbit", "--devices", "1", kChild}),
                     "unknown verb 'sumbit' (did you mean 'submit'?)");
  ExpectOneLineError(d_.Ctl({"submit", "--devcies", "2", kChild, "exit:0"}),
                     "unknown option --devcies (did you mean '--devices'?)");
  ExpectOneLineError(d_.Ctl({"submit", kChild, "exit:0", "--devices", "2"}),
                     "--devices is given after PROGRAM, where it is PROGRAM's own argument");
  for (const std::vector<std::string>& line :
       {std::vector<std::string>{}, {"show", "1", "2"}, {"frobnicate"}, {"ps", "--bogus"}}) {
    const CmdResult r = d_.Ctl(line);
    for (const char* cli11 : {"subcommand", "The following", "were not expected", "Run with"}) {
      EXPECT_EQ(r.err.find(cli11), std::string::npos) << "CLI11's words: " << r.err;
    }
  }
  // None of them made a job.
  nlohmann::json jobs = ParseJson(d_.Ctl({"ps", "-a", "--json"}));
  EXPECT_EQ(jobs, nlohmann::json::array()) << jobs.dump();
}

}  // namespace
}  // namespace ltd::test
